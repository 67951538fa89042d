#define LEN 1024
extern double weights[LEN];
#pragma omp declare target(weights)
void vec_init(double w);
double vec_dot(const double *x, int n);
