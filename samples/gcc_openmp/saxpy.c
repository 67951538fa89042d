#include "common.h"

#pragma omp declare target
int scale = 2;
static int calls;           /* a static: stats.c has one of the same name */
#pragma omp end declare target

int saxpy_run(int a, const int *x, int *y, int n) {
#pragma omp target teams distribute parallel for map(to: x[0:n]) map(tofrom: y[0:n])
  for (int i = 0; i < n; i++)
    y[i] = a * x[i] * scale + square(y[i] % 8);
#pragma omp target
  calls++;
#pragma omp target update from(calls)
  return calls;
}
