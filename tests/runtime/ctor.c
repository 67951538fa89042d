/* A library whose constructor uses the executable's module (deadlock.c): it runs inside
 * dlopen, with the dynamic loader's lock held, while the main thread sets that module up. */
void app_ctor_started(void);
void app_use_table(const char *who);

__attribute__((constructor)) static void use_the_app(void) {
  app_ctor_started();
  app_use_table("ctor");
}
