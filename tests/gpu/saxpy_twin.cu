/* samples/cuda_saxpy's twin built by nvcc alone (the CUDA runtime, no offlink): the same
 * kernels.c, the same steps through cudaMemcpyToSymbol and <<<>>>, the same output. */
#include <cstdio>
#include <cuda_runtime.h>

#include "kernels.c"

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));                                  \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

int main(void) {
  static float hx[N], hy[N];
  float ht = 0.0f;
  for (int i = 0; i < N; i++) {
    hx[i] = (float)i;
    hy[i] = (float)(N - i);
  }
  CHECK(cudaMemcpyToSymbol(x, hx, sizeof hx));
  CHECK(cudaMemcpyToSymbol(y, hy, sizeof hy));
  CHECK(cudaMemcpyToSymbol(total, &ht, sizeof ht));
  float *dx, *dy;
  CHECK(cudaGetSymbolAddress((void **)&dx, x));
  CHECK(cudaGetSymbolAddress((void **)&dy, y));
  unsigned threads = 128, blocks = (N + threads - 1) / threads;
  saxpy<<<blocks, threads>>>(N, 2.0f, dx, dy);
  CHECK(cudaGetLastError());
  sum<<<blocks, threads>>>(N, dy);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpyFromSymbol(hy, y, sizeof hy));
  CHECK(cudaMemcpyFromSymbol(&ht, total, sizeof ht));
  printf("ran on: nvptx64-nvidia-cuda\n");
  printf("y[0] = %.1f\ny[1] = %.1f\ny[%d] = %.1f\n", hy[0], hy[1], N - 1, hy[N - 1]);
  printf("total = %.1f\n", ht);
  return 0;
}
