/* The library: a `declare target` array set and read in target regions. */
#include "vec.h"

double weights[LEN];

void vec_init(double w) {
#pragma omp target teams distribute parallel for
  for (int i = 0; i < LEN; i++)
    weights[i] = w * (i % 10);
}

double vec_dot(const double *x, int n) {
  double sum = 0;
#pragma omp target teams distribute parallel for reduction(+:sum) map(to: x[0:n])
  for (int i = 0; i < n; i++)
    sum += weights[i % LEN] * x[i];
  return sum;
}
