/* A user's own OpenMP offload program: 4 CUs, a static library (vecops) and a shared one
 * (stats). Built by samples/users_openmp/{CMakeLists.txt,meson.build,Makefile} with the
 * toolchain's offload flags (GCC -foffload=..., clang -fopenmp-targets=...). */
#ifndef USERS_H
#define USERS_H

#pragma omp declare target
extern int bias;
double scale(double x);
#pragma omp end declare target

void vec_scale(int n, double *x);          /* vecops.c: libvecops.a */
double stats_sum(int n, const double *x);  /* stats.c: libstats.so */
int count_above(int n, const double *x, double limit);  /* util.c */

#endif
