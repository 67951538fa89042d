/* A GCC OpenMP program for the GPU check: declare-target variables and several kernels.  On a
 * device the host's copies stay as they were until `target update from`, so the line "host
 * table[3] before update" says where the regions ran (3.0 on a device, 4.5 on the host). */
#include <omp.h>
#include <stdio.h>

#define N 4096

#pragma omp declare target
int counter;
float table[N];
static float weight(int i) { return 0.5f * (float)(i % 8); }
#pragma omp end declare target

int main(void) {
  for (int i = 0; i < N; i++)
    table[i] = (float)i;
  counter = 5;
#pragma omp target update to(table, counter)
  int initial = 1;
#pragma omp target map(from: initial)
  initial = omp_is_initial_device();
#pragma omp target teams distribute parallel for
  for (int i = 0; i < N; i++)
    table[i] = table[i] * weight(i);
#pragma omp target
  counter += 10;
  double sum = 0.0; /* every term a multiple of 0.5 below 2^14: exact in any order */
#pragma omp target teams distribute parallel for reduction(+ : sum) map(tofrom : sum)
  for (int i = 0; i < N; i++)
    sum += table[i];
  int teams = 0;
#pragma omp target teams num_teams(4) map(tofrom : teams)
  if (omp_get_team_num() == 0)
    teams = omp_get_num_teams();
  printf("host table[3] before update: %.1f\n", table[3]);
#pragma omp target update from(table, counter)
  printf("table[3] = %.1f, table[4095] = %.1f\n", table[3], table[N - 1]);
  printf("counter = %d\n", counter);
  printf("sum = %.1f\n", sum);
  printf("teams > 0: %d\n", teams > 0);
  printf("target regions ran on: %s\n", initial ? "the host (host fallback)" : "a device");
  return 0;
}
