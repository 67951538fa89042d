#include <stdio.h>

#include "users.h"

#define N 1000

int main(void)
{
    static double x[N];
    for (int i = 0; i < N; i++)
        x[i] = i;
    vec_scale(N, x);
    printf("x[10] = %.1f\n", x[10]);
    printf("sum = %.1f\n", stats_sum(N, x));
    printf("above 1000: %d\n", count_above(N, x, 1000.0));
    return 0;
}
