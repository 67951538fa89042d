/* The GPU program: kernels calling another CU's functions, statics per CU, a `declare target
   indirect` function called through a host pointer, reductions (sum and max). */
#include <stdio.h>
#include "gpu.h"

#pragma omp begin declare target
static int bias = 100; /* field.c has a `bias` of its own */
#pragma omp end declare target

int main(void) {
  int n = 1000, top = 0;
  long s = 0;
#pragma omp target teams distribute parallel for reduction(+ : s) map(tofrom : s)
  for (int i = 0; i < n; i++) s += twice(i) + bias;
  printf("sum of twice(i) + bias: %ld\n", s);

#pragma omp target teams distribute parallel for reduction(max : top) map(tofrom : top)
  for (int i = 0; i < n; i++) top = top > (i * 37) % 101 ? top : (i * 37) % 101;
  printf("max: %d\n", top);

  int (*f)(int) = square;
  int sq = 0;
#pragma omp target map(from : sq)
  sq = f(9);
  printf("square(9) through a pointer: %d\n", sq);

  printf("field_sum(100): %ld\n", field_sum(100));
  return 0;
}
