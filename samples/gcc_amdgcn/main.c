/* The first target region: scales a vector on the device by the declare-target weights. */
#include <stdio.h>

#include "common.h"

#pragma omp declare target
int weights[N] = {1, 2, 3, 4, 5, 6, 7, 8};
#pragma omp end declare target

int main(void) {
  int v[N];
  for (int i = 0; i < N; i++)
    v[i] = 10 + i;
#pragma omp target teams distribute parallel for map(tofrom: v)
  for (int i = 0; i < N; i++)
    v[i] *= weights[i];
  for (int i = 0; i < N; i++)
    printf("v[%d] = %d\n", i, v[i]);
  printf("weighted sum = %d\n", weighted_sum(v));
  return 0;
}
