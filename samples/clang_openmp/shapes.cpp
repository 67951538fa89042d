// The C++ part: a namespace, a class with device member functions, a template and a static
// member that is a declare target variable, across two CUs.
#include "shapes.hpp"

#include <cmath>

namespace geom {
#pragma omp declare target
double Circle::unit = 1.0;
double Circle::area() const { return 3.14159265358979 * r * r * unit; }
#pragma omp end declare target

double total_area(const Circle *cs, int n) {
  double sum = 0.0;
#pragma omp target teams distribute parallel for reduction(+: sum) map(to: cs[0:n])
  for (int i = 0; i < n; i++)
    sum += cs[i].area() + twice(0.0);
  return sum;
}
}  // namespace geom
