/* The program of tests/test_inspect_matrix.py, compiled as C and as C++: one target region (a
   kernel), a declare target function and variable, and a function of the host alone. */
#include <stdio.h>
#pragma omp declare target
int bias = 3;
__attribute__((noinline)) int scale(int x) { return 2 * x + bias; }
#pragma omp end declare target

int host_only(int x) { return x - 1; }

int run(void) {
  int out[8];
#pragma omp target map(from: out)
  for (int i = 0; i < 8; i++) out[i] = scale(i);
  return host_only(out[7]);
}

int main(void) { printf("%d\n", run()); return 0; }
