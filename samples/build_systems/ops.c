/* Functions offered for offload; the target build of scale_by differs, so the output shows
 * which side ran. */
#include "bs.h"

int scale_by(int x)
{
#ifdef __OFFLINK_TARGET__
  return x * factor + 1000;
#else
  return x * factor;
#endif
}

const char *side(void)
{
#ifdef __OFFLINK_TARGET__
  return __OFFLINK_TARGET__;
#else
  return "host";
#endif
}
