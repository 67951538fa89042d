/* GCC 14+'s `declare target indirect` (tests/test_inspect_matrix.py): prog.c's program, and a
   host function pointer called in a target region. */
#include <stdio.h>
#pragma omp begin declare target
int bias = 3;
__attribute__((noinline)) int scale(int x) { return 2 * x + bias; }
#pragma omp end declare target
#pragma omp begin declare target indirect
__attribute__((noinline)) int twice(int x) { return 2 * x; }
#pragma omp end declare target

int host_only(int x) { return x - 1; }

int run(void) {
  int (*f)(int) = twice; int out[8];
#pragma omp target map(from: out)
  for (int i = 0; i < 8; i++) out[i] = f(scale(i));
  return host_only(out[7]);
}

int main(void) { printf("%d\n", run()); return 0; }
