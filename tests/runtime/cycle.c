/* A shared library with its own table, loaded and unloaded again and again by cycle_main.c:
 * the test prepends #define TAG "a" or "b", so the output shows whose image answered. */
#include <offlink.h>

const char *which(void) { return TAG " " OFFLINK_SIDE; }

#if !OFFLINK_IS_TARGET
__attribute__((visibility("default"))) const char *cycle_report(void) {
  return OFFLINK_TRANSLATE(OFFLINK_TABLE, which)();
}
#endif
