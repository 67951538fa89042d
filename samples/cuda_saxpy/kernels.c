/* The kernels and their data.  Built for CUDA (nvcc) and for the host (gcc) from this one
 * file: on a GPU they run as __global__ kernels on __device__ data, without one their host
 * builds run as plain functions on the host variables. */
#include "saxpy.h"

OFFLINK_DEVICE_DATA float x[N];
OFFLINK_DEVICE_DATA float y[N];
OFFLINK_DEVICE_DATA float total;

/* y = a*x + y, grid-stride: any number of threads covers [0, n). */
OFFLINK_KERNEL void saxpy(int n, float a, const float *xs, float *ys) {
  OFFLINK_FOR(i, n) ys[i] = a * xs[i] + ys[i];
}

/* total += every v[i]: a reduction into a device global.  The values are small integers,
 * so the float sum is exact in any order the GPU's threads add them. */
OFFLINK_KERNEL void sum(int n, const float *v) {
  OFFLINK_FOR(i, n) OFFLINK_ATOMIC_ADD(&total, v[i]);
}
