#include "common.h"

/* A `declare target link` variable: in the table, kind link-variable. Not used in a region:
   GCC 12's host fallback does not see the host's copy of one (with GCC's own link too). */
int squares[64];
#pragma omp declare target link(squares)

#pragma omp declare target
static int calls;           /* a static: saxpy.c has one of the same name */
int square(int v) { return v * v; }
#pragma omp end declare target

long stats_sum(const int *y, int n) {
  long sum = 0;
#pragma omp target teams distribute parallel for reduction(+: sum) map(to: y[0:n])
  for (int i = 0; i < n; i++)
    sum += y[i];
#pragma omp target
  calls += 10;
#pragma omp target update from(calls)
  return sum;
}

int stats_calls(void) { return calls; }
