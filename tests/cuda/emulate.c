/* The sample's kernels as the fake driver (fake_libcuda.c) runs them: on the "device" copies
 * of the data, so the program's output shows that the runtime copied, translated and passed
 * every argument.  Each says on stderr whether its pointers were device ones, as they must be. */
#include <stdio.h>

#include "saxpy.h"

static const char *side(const void *p, const void *host) {
  return p == host ? "HOST memory" : "device memory";
}

void fake_launch_saxpy(void **params, unsigned grid, unsigned block) {
  int n = *(int *)params[0];
  float a = *(float *)params[1];
  const float *xs = *(const float **)params[2];
  float *ys = *(float **)params[3];
  fprintf(stderr, "fake: saxpy n=%d a=%.1f grid=%u block=%u on %s\n", n, a, grid, block,
          side(ys, y));
  for (int i = 0; i < n; i++)
    ys[i] = a * xs[i] + ys[i];
}

void fake_launch_sum(void **params, unsigned grid, unsigned block) {
  int n = *(int *)params[0];
  const float *v = *(const float **)params[1];
  float *t = OFFLINK_TRANSLATE(OFFLINK_TABLE, &total); /* the kernel's `total` */
  fprintf(stderr, "fake: sum n=%d grid=%u block=%u on %s\n", n, grid, block, side(t, &total));
  for (int i = 0; i < n; i++)
    *t += v[i];
}
