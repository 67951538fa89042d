/* OpenACC for tests/test_gcc_later.py: a parallel loop (launch dimensions in FUNC_MAP) and a
   declare create variable. */
#include <stdio.h>
#define N 64
float total;
#pragma acc declare create(total)
int main (void)
{
  float a[N];
  #pragma acc parallel loop copyout(a) num_gangs(2) vector_length(32)
  for (int i = 0; i < N; i++)
    a[i] = 2.0f * i;
  printf ("%g %g\n", a[1], a[N - 1]);
  return 0;
}
