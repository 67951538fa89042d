/* One CU of the GPU program: device functions the other CUs' kernels call, its own static (a
   namesake of main.c's and stats.c's), a declare target variable, an indirect function. No
   kernel here: a CU whose functions other CUs call and which calls the device runtime itself
   is refused for AMD GPUs (docs/llvm.md). */
#include "gpu.h"

#pragma omp begin declare target
static int bias = 7;
int scale = 3;

int twice(int x) { return 2 * x + bias - 7; }

int add_bias(int x) { return x + bias; }
#pragma omp end declare target

#pragma omp begin declare target indirect
int square(int x) { return x * x; }
#pragma omp end declare target
