/* The second target region, in another CU: a reduction over the same weights. */
#include "common.h"

int weighted_sum(const int *v) {
  int s = 0;
#pragma omp target teams distribute parallel for reduction(+: s) map(to: v[0:N])
  for (int i = 0; i < N; i++)
    s += v[i] * weights[i];
  return s;
}
