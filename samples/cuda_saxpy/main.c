/* Host code only: fills the data, copies it to the device, launches the kernels, copies the
 * results back.  Without a GPU every step falls back to the host (offlink.h). */
#include <stdio.h>

#include "saxpy.h"

int main(void) {
  const void *t = OFFLINK_TABLE;
  for (int i = 0; i < N; i++) {
    x[i] = (float)i;
    y[i] = (float)(N - i);
  }
  total = 0.0f;
  if (offlink_update_to(t, x) || offlink_update_to(t, y) || offlink_update_to(t, &total)) {
    fprintf(stderr, "update_to: %s\n", offlink_last_error());
    return 1;
  }
  /* The kernels get device addresses; on the host, translate returns x and y themselves. */
  float *dx = OFFLINK_TRANSLATE(t, x), *dy = OFFLINK_TRANSLATE(t, y);
  unsigned threads = 128, blocks = (N + threads - 1) / threads;
  if (OFFLINK_LAUNCH(t, saxpy, blocks, threads, N, 2.0f, (const float *)dx, dy) ||
      OFFLINK_LAUNCH(t, sum, blocks, threads, N, (const float *)dy)) {
    fprintf(stderr, "launch: %s\n", offlink_last_error());
    return 1;
  }
  if (offlink_update_from(t, y) || offlink_update_from(t, &total)) {
    fprintf(stderr, "update_from: %s\n", offlink_last_error());
    return 1;
  }
  const char *where = offlink_target_name(t);
  printf("ran on: %s\n", where ? where : "host");
  printf("y[0] = %.1f\ny[1] = %.1f\ny[%d] = %.1f\n", y[0], y[1], N - 1, y[N - 1]);
  printf("total = %.1f\n", total);
  return 0;
}
