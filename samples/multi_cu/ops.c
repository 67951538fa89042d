/* Arithmetic operations offered for offload, reached through a table of host function
 * pointers that main translates at run time. */
#include "sample.h"

static int calls; /* one per CU and per side: never paired with vec.c's `calls` */

int op_add(int a, int b) { calls++; return a + b; }
int op_sub(int a, int b) { calls++; return a - b; }
#ifdef __OFFLINK_TARGET__
/* The target build of op_mul is deliberately different, so the output shows which ran. */
int op_mul(int a, int b) { calls++; return a * b + 1000; }
#else
int op_mul(int a, int b) { calls++; return a * b; }
#endif

int ops_calls(void) { return calls; }

const char *ops_side(void)
{
#ifdef __OFFLINK_TARGET__
  return __OFFLINK_TARGET__;
#else
  return "host";
#endif
}
