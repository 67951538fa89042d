/* Variables offered for offload: a scalar, an array and a counter the target updates. */
#include "sample.h"

static int calls;

double scale = 2.0;
double weights[4] = {1.0, 2.0, 3.0, 4.0};
int hits;

double weighted_sum(void)
{
  double s = 0;
  calls++;
  for (int i = 0; i < 4; i++)
    s += weights[i] * scale;
  hits++;
  return s;
}

int vec_calls(void) { return calls; }
