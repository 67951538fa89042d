// clang_openmp's C++ program: two CUs, a template used on the device in both.
#include <cstdio>

#include "shapes.hpp"

int main() {
  geom::Circle cs[4] = {{1.0}, {2.0}, {0.5}, {3.0}};
  std::printf("total area: %.4f\n", geom::total_area(cs, 4));
  int t = 0;
#pragma omp target map(from: t)
  t = geom::twice(21);
  std::printf("twice(21) on the device: %d\n", t);
  geom::Circle::unit = 2.0;
#pragma omp target update to(geom::Circle::unit)
  std::printf("total area, unit 2: %.4f\n", geom::total_area(cs, 4));
  return 0;
}
