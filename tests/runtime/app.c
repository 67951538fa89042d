/* Runtime test program.  Compiled twice from this one source: as the host program, and with
 * -D__OFFLINK_TARGET__=... as the target image, whose code answers differently (BIAS, SIDE)
 * so the output shows which side ran.  argv[1] picks a scenario; output is `key: value`. */
#define _GNU_SOURCE
#include <offlink.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if OFFLINK_IS_TARGET
#define BIAS 1000
#else
#define BIAS 0
#endif

/* Offered: rows of the table, defined on both sides. */
const char *side(void) { return OFFLINK_SIDE; }
int op_add(int a, int b) { return a + b + BIAS; }
int op_sub(int a, int b) { return a - b + BIAS; }
int op_mul(int a, int b) { return a * b + BIAS; }
int counter = 1;
double vec[8];
int bump(void) { return ++counter; }
void vec_scale(double k) {
  for (int i = 0; i < 8; i++)
    vec[i] *= k;
}

#if !OFFLINK_IS_TARGET
int host_only(void) { return 7; } /* the test may add it as a row the image lacks */
static int helper(void) { return 1; }

typedef int (*op_fn)(int, int);
static op_fn ops[] = {op_add, op_sub, op_mul}; /* a table of host function pointers */

static const char *err(void) {
  const char *e = offlink_last_error();
  return e ? e : "(null)";
}

static void show_side(void) {
  const char *name = offlink_target_name(OFFLINK_TABLE);
  printf("table: %s\n", OFFLINK_TABLE ? "set" : "null");
  printf("host: %s\n", side());
  printf("side: %s\n", OFFLINK_TRANSLATE(OFFLINK_TABLE, side)());
  printf("target: %s\n", name ? name : "(null)");
  printf("error: %s\n", err());
}

static void basic(void) {
  show_side();
  for (int i = 0; i < 3; i++) {
    op_fn f = OFFLINK_TRANSLATE(OFFLINK_TABLE, ops[i]);
    printf("op%d: %d\n", i, f(7, 3));
  }
  printf("lookup: %s\n", offlink_lookup(OFFLINK_TABLE, "op_add") ==
                                 offlink_translate(OFFLINK_TABLE, (const void *)op_add)
                             ? "same"
                             : "different");
  printf("lookup-missing: %s\n", offlink_lookup(OFFLINK_TABLE, "nope") ? "found" : "null");
}

static void vars(void) {
  counter = 5;
  printf("update_to: %d\n", offlink_update_to(OFFLINK_TABLE, &counter));
  printf("bump: %d\n", OFFLINK_TRANSLATE(OFFLINK_TABLE, bump)());
  printf("host-counter: %d\n", counter);
  printf("update_from: %d\n", offlink_update_from(OFFLINK_TABLE, &counter));
  printf("counter: %d\n", counter);

  for (int i = 0; i < 8; i++)
    vec[i] = i;
  double *t = OFFLINK_TRANSLATE(OFFLINK_TABLE, vec);
  printf("interior: %s\n", OFFLINK_TRANSLATE(OFFLINK_TABLE, &vec[3]) == t + 3 ? "ok" : "bad");
  printf("update_to: %d\n", offlink_update_to(OFFLINK_TABLE, &vec[3])); /* all of vec */
  OFFLINK_TRANSLATE(OFFLINK_TABLE, vec_scale)(10);
  printf("range: %d\n", offlink_update_from_range(OFFLINK_TABLE, &vec[2], 2 * sizeof vec[0]));
  printf("vec:");
  for (int i = 0; i < 8; i++)
    printf(" %g", vec[i]);
  printf("\n");
  vec[7] = -1;
  printf("range_to: %d\n", offlink_update_to_range(OFFLINK_TABLE, &vec[7], sizeof vec[0]));
  printf("update_from: %d\n", offlink_update_from(OFFLINK_TABLE, vec));
  printf("vec:");
  for (int i = 0; i < 8; i++)
    printf(" %g", vec[i]);
  printf("\n");
}

static void miss(void) {
  int local = 0;
  char *fn = (char *)(void *)op_add;
  printf("local: %s\n", offlink_translate(OFFLINK_TABLE, &local) == &local ? "same" : "moved");
  printf("static: %s\n", OFFLINK_TRANSLATE(OFFLINK_TABLE, helper) == helper ? "same" : "moved");
  printf("fn+1: %s\n", offlink_translate(OFFLINK_TABLE, fn + 1) == fn + 1 ? "same" : "moved");
  printf("update-local: %d\n", offlink_update_to(OFFLINK_TABLE, &local));
  printf("error: %s\n", err());
  printf("update-fn: %d\n", offlink_update_to(OFFLINK_TABLE, (const void *)op_add));
  printf("error: %s\n", err());
  printf("past-end: %d\n", offlink_update_to_range(OFFLINK_TABLE, &vec[6], 3 * sizeof vec[0]));
  printf("error: %s\n", err());
  printf("null-table: %s\n", offlink_translate(NULL, fn) == fn ? "same" : "moved");
  printf("null-update: %d\n", offlink_update_from(NULL, &counter));
  printf("null-target: %s\n", offlink_target_name(NULL) ? "set" : "null");
}

#define THREADS 8
static pthread_barrier_t barrier;
static const char *seen[THREADS];

static void *racer(void *arg) {
  const char *(*f)(void);
  pthread_barrier_wait(&barrier);
  f = OFFLINK_TRANSLATE(OFFLINK_TABLE, side);
  seen[(long)arg] = f();
  return NULL;
}

static void race(void) {
  pthread_t th[THREADS];
  pthread_barrier_init(&barrier, NULL, THREADS);
  for (long i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, racer, (void *)i);
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < THREADS; i++)
    printf("thread%d: %s\n", i, seen[i]);
}

/* The environment is read once, when the program starts: a later change does nothing. */
static void late_env(void) {
  setenv("OFFLINK_TARGET", "none", 1);
  show_side();
}

/* A "table" pointer 8 bytes before an inaccessible page: nothing may be read past it. */
static void edge(void) {
  long page = sysconf(_SC_PAGESIZE);
  char *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED || mprotect(p + page, page, PROT_NONE) != 0)
    return;
  int local = 0;
  const void *table = p + page - 8;
  printf("edge: %s\n", offlink_translate(table, &local) == &local ? "same" : "moved");
  printf("error: %s\n", err());
}

/* Read-only objects of vec's size, which a forged row may name: in RELRO (pointers that need
 * relocating, in a PIE) and in .rodata. */
static const void *const relro_ptrs[8] = {&counter, &counter, &counter, &counter,
                                          &counter, &counter, &counter, &counter};
static const double ro_limits[8] = {1, 2, 3, 4, 5, 6, 7, 8};

/* update_from into the read-only object `which` names. */
static void update_from_readonly(const char *which) {
  void *p = !strcmp(which, "relro_ptrs") ? (void *)relro_ptrs : (void *)ro_limits;
  printf("update-from: %d\n", offlink_update_from(OFFLINK_TABLE, p));
  printf("error: %s\n", err());
}

int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "basic";
  if (!strcmp(what, "basic"))
    basic();
  else if (!strcmp(what, "vars"))
    vars();
  else if (!strcmp(what, "miss"))
    miss();
  else if (!strcmp(what, "miss-static")) /* a pointer into the module that no row offers */
    printf("static: %s\n", OFFLINK_TRANSLATE(OFFLINK_TABLE, helper) == helper ? "same" : "moved");
  else if (!strcmp(what, "race"))
    race();
  else if (!strcmp(what, "late-env"))
    late_env();
  else if (!strcmp(what, "edge"))
    edge();
  else if (!strcmp(what, "update-from") && argc > 2)
    update_from_readonly(argv[2]);
  else
    return 2;
  return 0;
}
#endif
