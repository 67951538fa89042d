/* An executable with its own table, using a shared library that has another. */
#include <stdio.h>
#include <offlink.h>
#include "shape.h"

int app_counter = 7;

const char *app_where(void) { return OFFLINK_SIDE; }

int main(void)
{
  printf("exe: host %s, target %s\n", app_where(),
         OFFLINK_TRANSLATE(OFFLINK_TABLE, app_where)());
  printf("lib: host %s, target %s\n", shape_where(), shape_where_on_target());
  printf("lib area(3): host %.1f\n", shape_area(3));
  shape_version = 4;
  printf("lib version: host %d, target %d\n", shape_version, shape_version_on_target());
  printf("tables differ: %s\n", OFFLINK_TABLE != NULL ? "exe has one" : "exe has none");
  /* The executable's table does not know the library's functions: unchanged. */
  printf("lib function through the exe table unchanged: %s\n",
         offlink_translate(OFFLINK_TABLE, (const void *)shape_area) == (void *)shape_area
             ? "yes" : "no");
  int *c = OFFLINK_TRANSLATE(OFFLINK_TABLE, &app_counter);
  printf("app_counter: host %d at a different address on target: %s, target value %d\n",
         app_counter, c != &app_counter ? "yes" : "no", *c);
  return 0;
}
