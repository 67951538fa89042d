/* What the GPU program's CUs share (tests/llvm_offload/gpu). */
#pragma omp begin declare target
int twice(int x);
int add_bias(int x);
extern int scale;
#pragma omp end declare target
#pragma omp begin declare target indirect
int square(int x);
#pragma omp end declare target
long field_sum(int n);
