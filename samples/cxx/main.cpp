// A C++ program whose namespace functions, template instance and static data member run on
// the host target through the offload table.
#include <cstdio>
#include <offlink.h>
#include "geom.hpp"

int main()
{
  const void *table = OFFLINK_TABLE;
  auto t_side = OFFLINK_TRANSLATE(table, &geom::side);
  auto t_area = OFFLINK_TRANSLATE(table, &geom::area);
  int (*host_twice)(int) = &geom::twice<int>;
  auto t_twice = OFFLINK_TRANSLATE(table, host_twice);
  std::printf("side: host %s, target %s\n", geom::side(), t_side());
  std::printf("area(2, 3): host %.1f, target %.1f\n", geom::area(2, 3), t_area(2, 3));
  std::printf("twice<int>(5): host %d, target %d\n", host_twice(5), t_twice(5));
  std::printf("Counter::count: host %d\n", geom::Counter::count);
  if (offlink_update_from(table, &geom::Counter::count) != 0)
    std::printf("update_from failed: %s\n", offlink_last_error());
  std::printf("Counter::count after update_from: %d\n", geom::Counter::count);
  return 0;
}
