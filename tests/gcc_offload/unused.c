/* An archive member the link does not need: its target code must not reach the table. */
#pragma omp declare target
static int calls;
int unused_value = 7;
#pragma omp end declare target

int unused_entry(void) {
  int r = 0;
#pragma omp target map(from: r)
  r = unused_value + calls;
  return r;
}
