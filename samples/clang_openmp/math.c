/* Device functions (declare target), an indirect one, and a region calling through a pointer. */
#include "common.h"

#pragma omp declare target
double poly(double x) { return 0.5 * x * x + 1.0; }
int square(int x) { return x * x; }
#pragma omp end declare target

#pragma omp begin declare target indirect
int add_one(int x) { return x + 1 + square(0); }
#pragma omp end declare target

int host_only(int x) { return x - 1; }

int call_through(int (*fn)(int), int v) {
  int r = 0;
#pragma omp target map(tofrom: r) firstprivate(fn, v)
  r = fn(v);
  return r;
}
