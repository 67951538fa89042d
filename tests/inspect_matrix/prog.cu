// The program of tests/test_inspect_matrix.py for nvcc: a kernel, a device function kept out of
// line, a device variable, and a function of the host alone.
#include <cstdio>
__device__ int bias = 3;
__device__ __noinline__ int scale(int x) { return 2 * x + bias; }
__global__ void run(int *out) { out[threadIdx.x] = scale(threadIdx.x); }
int host_only(int x) { return x - 1; }
int main() { printf("%d\n", host_only(run == nullptr)); return 0; }
