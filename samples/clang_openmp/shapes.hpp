#ifndef SHAPES_HPP
#define SHAPES_HPP
namespace geom {
#pragma omp declare target
struct Circle {
  double r;
  static double unit;
  double area() const;
};
template <typename T> T twice(T x) { return x + x; }
#pragma omp end declare target
double total_area(const Circle *cs, int n);
}  // namespace geom
#endif
