/* One-dimensional heat diffusion on the device: a parallel loop with gang and vector
   parallelism, a kernels region, a reduction, and a `declare create` pair of arrays. */
#include "heat.h"

float grid[N], next[N];

#pragma acc routine seq
static float blend(float left, float mid, float right) {
  return 0.25f * left + 0.5f * mid + 0.25f * right;
}

void heat_steps(int steps) {
  for (int s = 0; s < steps; s++) {
#pragma acc parallel loop present(grid, next) num_gangs(4) vector_length(32)
    for (int i = 1; i < N - 1; i++)
      next[i] = blend(grid[i - 1], grid[i], grid[i + 1]);
#pragma acc kernels present(grid, next)
    for (int i = 1; i < N - 1; i++)
      grid[i] = next[i];
  }
}

float heat_sum(void) {
  float sum = 0;
#pragma acc parallel loop present(grid) reduction(+:sum)
  for (int i = 0; i < N; i++)
    sum += grid[i];
  return sum;
}
