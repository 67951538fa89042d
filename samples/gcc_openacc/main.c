#include <openacc.h>
#include <stdio.h>
#include "heat.h"

int main(void) {
  for (int i = 0; i < N; i++)
    grid[i] = next[i] = (i == N / 2) ? 1024.0f : 0.0f;
#pragma acc update device(grid, next)
  heat_steps(50);
#pragma acc update self(grid)
  printf("sum %.3f\n", heat_sum());
  printf("middle %.3f edge %.3f\n", grid[N / 2], grid[N / 2 + 20]);
  printf("compute regions ran on: %s\n",
         acc_get_device_type() == acc_device_host ? "the host (host fallback)" : "a device");
  return 0;
}
