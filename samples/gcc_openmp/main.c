#include <omp.h>
#include <stdio.h>
#include "common.h"

int main(void) {
  static int x[N], y[N];
  for (int i = 0; i < N; i++) {
    x[i] = i % 7;
    y[i] = 1;
  }
  saxpy_run(3, x, y, N);
  int saxpy_calls = saxpy_run(1, x, y, N);
  long sum = stats_sum(y, N);
  int initial = 1;
#pragma omp target map(from: initial)
  initial = omp_is_initial_device();
  printf("saxpy calls: %d\n", saxpy_calls);
  printf("stats calls: %d\n", stats_calls());
  printf("sum of y: %ld\n", sum);
  printf("y[5] = %d\n", y[5]);
  printf("target regions ran on: %s\n", initial ? "the host (host fallback)" : "a device");
  return 0;
}
