#include "users.h"

#pragma omp declare target
int bias = 3;
double scale(double x) { return 2.0 * x + bias; }
#pragma omp end declare target

int count_above(int n, const double *x, double limit)
{
    int count = 0;
#pragma omp target teams distribute parallel for reduction(+ : count) map(to : x[0 : n])
    for (int i = 0; i < n; i++)
        count += x[i] > limit;
    return count;
}
