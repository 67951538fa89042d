int g = 5;
#pragma omp declare target(g)
int twice(int x) {
  int r = 0;
#pragma omp target map(from: r)
  r = 2 * x + g;
  return r;
}
