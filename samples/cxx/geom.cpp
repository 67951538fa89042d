// A namespace, a static data member and an explicit template instance, offered by their
// mangled names.
#include "geom.hpp"
#include <offlink.h>

namespace geom {
int Counter::count = 0;
double area(double w, double h) { return w * h; }
const char *side() { return OFFLINK_SIDE; }
template int twice<int>(int);
} // namespace geom
