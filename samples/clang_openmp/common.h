/* Shared declarations of the clang_openmp sample (three CUs). */
#ifndef COMMON_H
#define COMMON_H

#define N 1000

#pragma omp declare target
extern double scale;          /* defined in vec.c, used on the device by every CU */
extern int calls;             /* a device-side counter, read back with target update */
double poly(double x);        /* defined in math.c, called from vec.c's target region */
int square(int x);
#pragma omp end declare target

#pragma omp begin declare target indirect
int add_one(int x);           /* indirect: callable through a host function pointer */
#pragma omp end declare target

void saxpy(int n, double a, const double *x, double *y);
double dot(int n, const double *x, const double *y);
int call_through(int (*fn)(int), int v);
int host_only(int x);         /* not declare target: a pointer to it is a "miss" */

#endif
