/* A shared library with its own target region and declare target variable: it registers its
   own image with libomptarget, apart from the program's. */
#pragma omp declare target
int counter_base = 1000;
#pragma omp end declare target

int counter_bump(int by) {
  int r = 0;
#pragma omp target map(from: r) firstprivate(by)
  {
    counter_base += by;
    r = counter_base;
  }
  return r;
}
