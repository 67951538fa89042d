/* A thread dlopen()s ctor.c's library, whose constructor uses this module's table; meanwhile
 * the main thread makes the first use of the same table, which loads its image (dlopen).
 * Neither may wait for the other for ever. */
#include <offlink.h>

const char *side(void) { return OFFLINK_SIDE; }

#if !OFFLINK_IS_TARGET
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int started;

API void app_ctor_started(void) {
  pthread_mutex_lock(&lock);
  started = 1;
  pthread_cond_signal(&cond);
  pthread_mutex_unlock(&lock);
  usleep(300000); /* the main thread is now in its setup, waiting for the loader's lock */
}

API void app_use_table(const char *who) {
  printf("%s: %s\n", who, OFFLINK_TRANSLATE(OFFLINK_TABLE, side)());
  fflush(stdout);
}

static void *opener(void *path) {
  if (!dlopen(path, RTLD_NOW))
    printf("error: %s\n", dlerror());
  return NULL;
}

int main(int argc, char **argv) {
  pthread_t t;
  if (argc < 2)
    return 2;
  pthread_create(&t, NULL, opener, argv[1]);
  pthread_mutex_lock(&lock);
  while (!started)
    pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
  app_use_table("main");
  pthread_join(t, NULL);
  return 0;
}
#endif
