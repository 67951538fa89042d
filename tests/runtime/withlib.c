/* A program with its own table using a shared library (lib.c) with its own table. */
#include <offlink.h>
#include <stdio.h>

const char *app_side(void) { return "app " OFFLINK_SIDE; }
int app_value = OFFLINK_IS_TARGET ? 2000 : 2;

#if !OFFLINK_IS_TARGET
extern int lib_value;
const char *lib_side(void);
const void *lib_table(void);
const char *lib_run(void);
const char *lib_call(const char *(*f)(void));
int lib_update_and_get(void);

int main(void) {
  const char *e;
  printf("tables: %s\n",
         lib_table() && OFFLINK_TABLE && lib_table() != OFFLINK_TABLE ? "distinct" : "shared");
  printf("app: %s\n", OFFLINK_TRANSLATE(OFFLINK_TABLE, app_side)());
  printf("app-value: %d\n", *OFFLINK_TRANSLATE(OFFLINK_TABLE, &app_value));
  printf("lib: %s\n", lib_run());
  printf("lib-call: %s\n", lib_call(lib_side));
  lib_value = 41; /* the executable's copy, which the library's code uses too */
  printf("lib-get: %d\n", lib_update_and_get());
  printf("lib-value: %d\n", lib_value);
  printf("app-lib-side: %s\n",
         OFFLINK_TRANSLATE(OFFLINK_TABLE, lib_side) == lib_side ? "unchanged" : "moved");
  printf("lib-target: %s\n", offlink_target_name(lib_table()));
  e = offlink_last_error();
  printf("error: %s\n", e ? e : "(null)");
  return 0;
}
#endif
