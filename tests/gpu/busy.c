/* The kernel the GPU check times (tests/gpu/timing.c): each thread of the grid spins `rounds`
 * dependent multiply-adds, then adds 1 to its element, so a launch takes long enough on one
 * block for concurrent launches to show, and the counts say every launch ran once. */
#include <offlink.h>

#define LANES 256   /* elements (threads of the one block) a host thread launches on */
#define THREADS 8   /* host threads at most */

OFFLINK_DEVICE_DATA float lanes[THREADS * LANES];

OFFLINK_KERNEL void busy(int n, int rounds, float *v) {
  OFFLINK_FOR(i, n) {
    float a = (float)i;
    for (int r = 0; r < rounds; r++)
      a = a * 0.999f + 0.5f;
    v[i] += 1.0f + (a == 12345.5f); /* a tends to 500: the loop is kept, the sum is exact */
  }
}
