// C++ for tests/test_gcc_later.py: a member function, a template and libm (sqrt) on the device.
#include <cstdio>
#include <cmath>
#pragma omp declare target
struct Acc { double v; double add(double x) { v += std::sqrt(x); return v; } };
template <typename T> T twice(T x) { return x + x; }
double total = 0;
#pragma omp end declare target
int main() {
  double r = 0;
  #pragma omp target map(tofrom: r)
  { Acc a{1.0}; r = a.add(twice(8.0)) + total; }
  std::printf("%g\n", r);
  return 0;
}
