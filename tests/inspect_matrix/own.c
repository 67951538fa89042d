/* The program of tests/test_inspect_matrix.py on offlink's own runtime (`offlink cc`): offered
   functions and a variable, and a function of the host alone. */
#include <offlink.h>
#include <stdio.h>

int bias = 3;
int scale(int x) { return 2 * x + bias; }
#ifndef __OFFLINK_TARGET__
int host_only(int x) { return x - 1; }

int main(void) {
  int (*t)(int) = (int (*)(int))offlink_translate(OFFLINK_TABLE, (const void *)scale);
  printf("%d\n", host_only(t(3)));
  return 0;
}
#endif
