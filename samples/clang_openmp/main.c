/* clang_openmp: a multi-CU OpenMP program linked by offlink, run on libomptarget. */
#include <omp.h>
#include <stdio.h>
#include "common.h"

int counter_bump(int by); /* libcounter.so */

int main(void) {
  static double x[N], y[N];
  for (int i = 0; i < N; i++) {
    x[i] = i * 0.5;
    y[i] = (i % 7) * 0.25;
  }
  saxpy(N, 3.0, x, y);
  printf("saxpy: y[0]=%.3f y[10]=%.3f y[999]=%.3f\n", y[0], y[10], y[999]);
  printf("dot: %.3f\n", dot(N, x, y));

  int sq = 0;
#pragma omp target map(from: sq)
  sq = square(12);
  printf("square(12) on the device: %d\n", sq);

  scale = 10.0; /* host copy only: the device keeps 2.0 until updated */
  double dev_scale = 0.0;
#pragma omp target map(from: dev_scale)
  dev_scale = scale;
  printf("scale: host %.1f device %.1f\n", scale, dev_scale);
#pragma omp target update to(scale)
#pragma omp target map(from: dev_scale)
  dev_scale = scale;
  printf("scale after update: device %.1f\n", dev_scale);

#pragma omp target update from(calls)
  printf("device calls counter: %d\n", calls);
  printf("indirect add_one(41): %d\n", call_through(add_one, 41));
  printf("host-only pointer host_only(41): %d\n", call_through(host_only, 41));
  int first = counter_bump(1);
  printf("library counter: %d %d\n", first, counter_bump(10));
  printf("devices: %d\n", omp_get_num_devices() > 0);
  return 0;
}
