/* A multi-CU program whose functions and variables run on the host target through the
 * offload table: function pointers translated, variables copied both ways. */
#include <stdio.h>
#include <offlink.h>
#include "sample.h"

typedef int (*binop)(int, int);

static const struct { const char *name; binop fn; } ops[] = {
  {"add", op_add}, {"sub", op_sub}, {"mul", op_mul},
};

int main(void)
{
  const void *table = OFFLINK_TABLE;
  const char *(*side)(void) = offlink_translate(table, (const void *)ops_side);
  printf("table: %s\n", table ? "present" : "absent");
  printf("side: host code says %s, translated code says %s\n", ops_side(), side());

  for (unsigned i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    binop t = (binop)offlink_translate(table, (const void *)ops[i].fn);
    printf("%s(7, 3): host %d, target %d\n", ops[i].name, ops[i].fn(7, 3), t(7, 3));
  }
  int (*t_ops_calls)(void) = offlink_translate(table, (const void *)ops_calls);
  printf("ops calls: host %d, target %d\n", ops_calls(), t_ops_calls());

  /* Variables: the target has its own copies until they are updated. */
  double (*t_sum)(void) = offlink_translate(table, (const void *)weighted_sum);
  printf("weighted_sum before update: host %.1f, target %.1f\n", weighted_sum(), t_sum());
  scale = 10.0;
  weights[2] = 30.0;
  if (offlink_update_to(table, &scale) != 0 || offlink_update_to(table, &weights[2]) != 0)
    printf("update_to failed: %s\n", offlink_last_error());
  printf("weighted_sum after update: host %.1f, target %.1f\n", weighted_sum(), t_sum());
  hits = 0;
  if (offlink_update_from(table, &hits) != 0)
    printf("update_from failed: %s\n", offlink_last_error());
  printf("target hits copied back: %d\n", hits);
  int (*t_vec_calls)(void) = offlink_translate(table, (const void *)vec_calls);
  printf("vec calls: host %d, target %d\n", vec_calls(), t_vec_calls());

  /* A pointer the table does not know comes back unchanged. */
  int local = 0;
  printf("unknown pointer unchanged: %s\n",
         offlink_translate(table, &local) == (void *)&local ? "yes" : "no");
  return 0;
}
