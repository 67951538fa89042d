/* Vector kernels: target regions with parallel loops, using another CU's functions. */
#include "common.h"

#pragma omp declare target
double scale = 2.0;
int calls = 0;
#pragma omp end declare target

void saxpy(int n, double a, const double *x, double *y) {
#pragma omp target teams distribute parallel for map(to: x[0:n]) map(tofrom: y[0:n])
  for (int i = 0; i < n; i++)
    y[i] = a * x[i] + poly(y[i]) * scale;
#pragma omp target
  calls += 1;
}

double dot(int n, const double *x, const double *y) {
  double sum = 0.0;
#pragma omp target teams distribute parallel for reduction(+: sum) map(to: x[0:n], y[0:n])
  for (int i = 0; i < n; i++)
    sum += x[i] * y[i];
#pragma omp target
  calls += 1;
  return sum;
}
