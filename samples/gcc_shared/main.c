#include <omp.h>
#include <stdio.h>
#include "vec.h"

static double x[4096];

int main(void) {
  for (int i = 0; i < 4096; i++)
    x[i] = 0.25 * i;
  vec_init(0.5);
  double squares = 0;
#pragma omp target map(tofrom: squares) map(to: x)
  for (int i = 0; i < 4096; i++)
    squares += x[i] * x[i];
  int initial = 1;
#pragma omp target map(from: initial)
  initial = omp_is_initial_device();
  printf("dot %.2f\nsquares %.2f\n", vec_dot(x, 4096), squares);
  printf("target regions ran on: %s\n", initial ? "the host (host fallback)" : "a device");
  return 0;
}
