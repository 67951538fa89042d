/* The same program built by make, CMake and Meson: the build system only has to run
 * `offlink cc` for compiles and `offlink link` for the link. */
#include <stdio.h>
#include <offlink.h>
#include "bs.h"

int main(void)
{
  const void *table = OFFLINK_TABLE;
  const char *(*t_side)(void) = offlink_translate(table, (const void *)side);
  int (*t_scale)(int) = offlink_translate(table, (const void *)scale_by);
  printf("table: %s\n", table ? "present" : "absent");
  printf("side: host %s, target %s\n", side(), t_side());
  printf("scale_by(21): host %d, target %d\n", scale_by(21), t_scale(21));
  factor = 5;
  if (offlink_update_to(table, &factor) != 0)
    printf("update_to failed: %s\n", offlink_last_error());
  printf("after update: host %d, target %d\n", scale_by(21), t_scale(21));
  return 0;
}
