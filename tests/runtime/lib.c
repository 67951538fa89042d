/* A shared library with its own offload table, loaded into a program (withlib.c) that has
 * its own: each module's OFFLINK_TABLE is its own, and both run their own images. */
#include <offlink.h>

#if OFFLINK_IS_TARGET
#define BIAS 1000
#else
#define BIAS 0
#endif

const char *lib_side(void) { return "lib " OFFLINK_SIDE; }
int lib_value = 40;
int lib_get(void) { return lib_value + BIAS; }

#if !OFFLINK_IS_TARGET
const void *lib_table(void) { return OFFLINK_TABLE; }

const char *lib_run(void) { return OFFLINK_TRANSLATE(OFFLINK_TABLE, lib_side)(); }

int lib_update_and_get(int v) {
  lib_value = v;
  if (offlink_update_to(OFFLINK_TABLE, &lib_value) != 0)
    return -1;
  return OFFLINK_TRANSLATE(OFFLINK_TABLE, lib_get)();
}
#endif
