/* GCC 14+'s `declare target indirect` (tests/test_inspect_matrix.py): a host function pointer
   called in a target region. */
#include <stdio.h>
#pragma omp begin declare target indirect
int twice(int x) { return 2 * x; }
#pragma omp end declare target
int main(void) {
  int (*f)(int) = twice; int r = 0;
#pragma omp target map(from: r)
  r = f(21);
  printf("%d\n", r);
  return 0;
}
