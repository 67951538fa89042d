/* An OpenMP offload program in three CUs, built with gcc -fopenmp -foffload=nvptx-none. */
#ifndef GCC_OPENMP_COMMON_H
#define GCC_OPENMP_COMMON_H
#define N 1000

#pragma omp declare target
extern int scale;           /* defined in saxpy.c */
int square(int v);          /* defined in stats.c, called from saxpy.c's target region */
#pragma omp end declare target
extern int squares[64];     /* declare target link in stats.c (GCC 12 drops the link clause
                               when it comes before the definition) */

int saxpy_run(int a, const int *x, int *y, int n);  /* returns saxpy.c's static count */
long stats_sum(const int *y, int n);
int stats_calls(void);                               /* stats.c's static count */
#endif
