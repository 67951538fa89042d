/* GCC 14+ offload sample (tests/test_gcc_later.py): declare target variables (one static, as
   calls.c has one of the same name), target regions in two CUs, and `declare target indirect`
   functions called on the device through host function pointers. */
#include <stdio.h>

#pragma omp declare target
int counter = 5;
static int hidden = 7;
int twice (int x) { return 2 * x; }
int thrice (int x) { return 3 * x; }
#pragma omp end declare target
#ifndef NO_INDIRECT /* GCC 13 has no `declare target indirect` */
#pragma omp declare target indirect to(twice, thrice)
#endif

extern int other (int);

int main (void)
{
  int (*fns[2]) (int) = { twice, thrice };
  int r[2] = { 0, 0 };
  for (int i = 0; i < 2; i++)
    {
      int (*fn) (int) = fns[i];
      #pragma omp target map(tofrom: r[i:1]) firstprivate(fn)
      r[i] = fn (counter) + hidden;
    }
  printf ("%d %d %d\n", r[0], r[1], other (4));
  return 0;
}
