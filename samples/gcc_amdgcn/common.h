/* Shared between the two CUs: a declare-target table both target regions read. */
#define N 8

#pragma omp declare target
extern int weights[N];
#pragma omp end declare target

int weighted_sum(const int *v);
