/* One source for the GPU and the host: kernels and device data (offlink.h, "CUDA kernels"). */
#ifndef SAXPY_H
#define SAXPY_H
#include <offlink.h>

#define N 1000

extern OFFLINK_DEVICE_DATA float x[N];
extern OFFLINK_DEVICE_DATA float y[N];
extern OFFLINK_DEVICE_DATA float total; /* the sum kernel's result */

OFFLINK_KERNEL void saxpy(int n, float a, const float *xs, float *ys);
OFFLINK_KERNEL void sum(int n, const float *v);
#endif
