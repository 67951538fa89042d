#ifndef GEOM_HPP
#define GEOM_HPP
namespace geom {
struct Counter {
  static int count; // a static data member, offered like any variable
};
double area(double w, double h);
const char *side();
template <typename T> T twice(T x)
{
  Counter::count++;
#ifdef __OFFLINK_TARGET__
  return x + x + 100; // the target instance differs, to show which one ran
#else
  return x + x;
#endif
}
extern template int twice<int>(int);
} // namespace geom
#endif
