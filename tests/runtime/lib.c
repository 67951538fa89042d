/* A shared library with its own offload table, loaded into a program (withlib.c) that has
 * its own: each module's OFFLINK_TABLE is its own, and both run their own images. */
#include <offlink.h>

#if OFFLINK_IS_TARGET
#define BIAS 1000
#else
#define BIAS 0
#endif

const char *lib_side(void) { return "lib " OFFLINK_SIDE; }
int lib_value = 40; /* the executable uses it too: it has a copy (a copy relocation) */
int lib_get(void) { return lib_value + BIAS; }

#if !OFFLINK_IS_TARGET
const void *lib_table(void) { return OFFLINK_TABLE; }

const char *lib_run(void) { return OFFLINK_TRANSLATE(OFFLINK_TABLE, lib_side)(); }

/* A function pointer the executable took: in a non-PIE executable, its PLT entry. */
const char *lib_call(const char *(*f)(void)) { return OFFLINK_TRANSLATE(OFFLINK_TABLE, f)(); }

int lib_update_and_get(void) {
  if (offlink_update_to(OFFLINK_TABLE, &lib_value) != 0)
    return -1;
  lib_value = 0;
  if (offlink_update_from(OFFLINK_TABLE, &lib_value) != 0)
    return -2;
  return OFFLINK_TRANSLATE(OFFLINK_TABLE, lib_get)();
}
#endif
