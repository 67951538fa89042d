/* The second CU of tests/gcc_offload/later (main.c): its own static `hidden`. */
#pragma omp declare target
static int hidden = 100;
int scale = 3;
int mul (int x) { return scale * x + hidden; }
#pragma omp end declare target

int other (int x)
{
  int r = 0;
  #pragma omp target map(tofrom: r)
  r = mul (x);
  return r;
}
