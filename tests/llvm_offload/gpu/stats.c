/* One CU of the GPU program: a kernel with a reduction that calls another CU's function, and
   a static of its own (a namesake of field.c's). */
#include "gpu.h"

#pragma omp begin declare target
static int bias = 1000;
#pragma omp end declare target

long field_sum(int n) {
  long s = 0;
#pragma omp target teams distribute parallel for reduction(+ : s) map(tofrom : s)
  for (int i = 0; i < n; i++) s += add_bias(i) * scale + bias;
  return s;
}
