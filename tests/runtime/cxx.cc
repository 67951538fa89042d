// offlink.h from C++: extern "C" linkage, the typed macro; also compiled as target code.
#include <offlink.h>
#include <cstdio>

extern "C" int twice(int x) { return 2 * x + (OFFLINK_IS_TARGET ? 1000 : 0); }

#if !OFFLINK_IS_TARGET
int main() {
  int (*f)(int) = OFFLINK_TRANSLATE(OFFLINK_TABLE, twice);
  std::printf("twice: %d\n", f(21));
  const char *name = offlink_target_name(OFFLINK_TABLE);
  std::printf("target: %s\n", name ? name : "(null)");
  return 0;
}
#endif
