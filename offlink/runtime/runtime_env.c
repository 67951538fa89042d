/* offlink runtime: the environment, read once (when the first module registers) and
 * ignored in secure-execution programs (setuid, setgid, setcap: secure_getenv), so that it
 * cannot choose what such a program loads or from where; and whether exit() has begun. */

#define _GNU_SOURCE
#include "runtime_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_int process_exiting; /* exit() has begun: destructors free nothing */

static const char *const env_names[] = {"OFFLINK_TARGET",      "OFFLINK_MANDATORY",
                                        "OFFLINK_LIBCUDA",     "OFFLINK_CUDA_DEVICE",
                                        "OFFLINK_CUDA_SYNC_LAUNCH", "OFFLINK_CUDA_INFO",
                                        "TMPDIR"};
static char *env_values[sizeof env_names / sizeof env_names[0]];
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void note_exit(void) { atomic_store(&process_exiting, 1); }

static void env_read(void) {
  for (size_t i = 0; i < sizeof env_names / sizeof env_names[0]; i++) {
    const char *v = secure_getenv(env_names[i]);
    env_values[i] = v ? strdup(v) : NULL;
  }
  /* Runs before the destructors that exit() runs (the loader's own handler came first). */
  atexit(note_exit);
}

void ofl_read_env(void) { pthread_once(&env_once, env_read); }

const char *ofl_getenv(const char *name) {
  ofl_read_env();
  for (size_t i = 0; i < sizeof env_names / sizeof env_names[0]; i++)
    if (strcmp(env_names[i], name) == 0)
      return env_values[i];
  return NULL;
}

int ofl_process_exiting(void) { return atomic_load(&process_exiting); }
