/* A shared library linked with offlink: it carries its own table and uses it. */
#include <offlink.h>
#include "shape.h"

int shape_version = 3;

double shape_area(double side)
{
#ifdef __OFFLINK_TARGET__
  return side * side + 0.5; /* the target build differs, to show which one ran */
#else
  return side * side;
#endif
}

const char *shape_where(void) { return OFFLINK_SIDE; }

#ifndef __OFFLINK_TARGET__
/* Host-only entry points that reach the library's target code through its own table. */
const char *shape_where_on_target(void)
{
  return OFFLINK_TRANSLATE(OFFLINK_TABLE, shape_where)();
}

int shape_version_on_target(void)
{
  const int *v = OFFLINK_TRANSLATE(OFFLINK_TABLE, &shape_version);
  return *v;
}
#endif
