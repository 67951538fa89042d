/* Timings for the GPU check (run.sh), linked by offlink with busy.c's CUDA image:
 *   timing first                 first offlink_translate (driver, context, image load) and
 *                                first offlink_launch, then the median of later launches
 *   timing direct IMAGE          the same with the driver API alone on IMAGE (this program's
 *                                own image, offlink extract'ed): cuModuleLoadData, cuLaunchKernel
 *   timing threads T L R         T threads launching busy L times each (R rounds) at once:
 *                                the wall time, and each element's count checked (L + 1)
 * One "name: value" line per figure on stdout; exit status 1 on any failed call. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <offlink.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LANES 256
#define THREADS 8
extern OFFLINK_DEVICE_DATA float lanes[THREADS * LANES];
OFFLINK_KERNEL void busy(int n, int rounds, float *v);

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#define REPEATS 101

static int first(void) {
  const void *t = OFFLINK_TABLE;
  double t0 = now_ms();
  float *v = OFFLINK_TRANSLATE(t, lanes);
  double t1 = now_ms();
  const char *target = offlink_target_name(t);
  if (OFFLINK_LAUNCH(t, busy, 1, LANES, LANES, 1, v)) {
    fprintf(stderr, "launch: %s\n", offlink_last_error());
    return 1;
  }
  double t2 = now_ms(), each[REPEATS];
  for (int i = 0; i < REPEATS; i++) {
    double s = now_ms();
    if (OFFLINK_LAUNCH(t, busy, 1, LANES, LANES, 1, v)) {
      fprintf(stderr, "launch: %s\n", offlink_last_error());
      return 1;
    }
    each[i] = now_ms() - s;
  }
  qsort(each, REPEATS, sizeof each[0], cmp);
  printf("offlink target: %s\n", target ? target : "host");
  printf("offlink first translate: %.3f ms\n", t1 - t0);
  printf("offlink first launch: %.3f ms\n", t2 - t1);
  printf("offlink next launch (median of %d): %.1f us\n", REPEATS, each[REPEATS / 2] * 1e3);
  return 0;
}

/* ---- the driver API alone ---- */
typedef int CUresult;
typedef int (*get_proc_fn)(const char *, void **, int, unsigned long long, int *);
static struct {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(int *, int);
  CUresult (*DevicePrimaryCtxRetain)(void **, int);
  CUresult (*CtxSetCurrent)(void *);
  CUresult (*ModuleLoadData)(void **, const void *);
  CUresult (*ModuleGetFunction)(void **, void *, const char *);
  CUresult (*ModuleGetGlobal)(unsigned long long *, size_t *, void *, const char *);
  CUresult (*LaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, void *, void **, void **);
  CUresult (*CtxSynchronize)(void);
} cu;

#define CHECK(call)                                                                                \
  do {                                                                                             \
    CUresult r_ = (call);                                                                          \
    if (r_ != 0) {                                                                                 \
      fprintf(stderr, "%s: CUDA error %d\n", #call, r_);                                           \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

static int direct(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  rewind(f);
  char *image = malloc((size_t)size);
  if (!image || fread(image, 1, (size_t)size, f) != (size_t)size) {
    fprintf(stderr, "%s: cannot read\n", path);
    return 1;
  }
  fclose(f);
  double t0 = now_ms();
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  void *sym = h ? dlsym(h, "cuGetProcAddress_v2") : NULL;
  get_proc_fn get;
  memcpy(&get, &sym, sizeof get);
  if (!get) {
    fprintf(stderr, "no CUDA driver: %s\n", h ? "no cuGetProcAddress_v2" : dlerror());
    return 1;
  }
  struct {
    const char *name;
    void **slot;
  } want[] = {{"cuInit", (void **)&cu.Init},
              {"cuDeviceGet", (void **)&cu.DeviceGet},
              {"cuDevicePrimaryCtxRetain", (void **)&cu.DevicePrimaryCtxRetain},
              {"cuCtxSetCurrent", (void **)&cu.CtxSetCurrent},
              {"cuModuleLoadData", (void **)&cu.ModuleLoadData},
              {"cuModuleGetFunction", (void **)&cu.ModuleGetFunction},
              {"cuModuleGetGlobal", (void **)&cu.ModuleGetGlobal},
              {"cuLaunchKernel", (void **)&cu.LaunchKernel},
              {"cuCtxSynchronize", (void **)&cu.CtxSynchronize}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    CHECK(get(want[i].name, want[i].slot, 12000, 0, NULL));
  int dev;
  void *ctx, *mod, *fn;
  unsigned long long v;
  size_t bytes;
  CHECK(cu.Init(0));
  CHECK(cu.DeviceGet(&dev, 0));
  CHECK(cu.DevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cu.CtxSetCurrent(ctx));
  CHECK(cu.ModuleLoadData(&mod, image));
  CHECK(cu.ModuleGetGlobal(&v, &bytes, mod, "lanes"));
  CHECK(cu.ModuleGetFunction(&fn, mod, "busy"));
  double t1 = now_ms();
  int n = LANES, rounds = 1;
  void *args[] = {&n, &rounds, &v};
  CHECK(cu.LaunchKernel(fn, 1, 1, 1, LANES, 1, 1, 0, NULL, args, NULL));
  CHECK(cu.CtxSynchronize());
  double t2 = now_ms(), each[REPEATS];
  for (int i = 0; i < REPEATS; i++) {
    double s = now_ms();
    CHECK(cu.LaunchKernel(fn, 1, 1, 1, LANES, 1, 1, 0, NULL, args, NULL));
    CHECK(cu.CtxSynchronize());
    each[i] = now_ms() - s;
  }
  qsort(each, REPEATS, sizeof each[0], cmp);
  printf("direct load (dlopen to cuModuleGetFunction): %.3f ms\n", t1 - t0);
  printf("direct first launch: %.3f ms\n", t2 - t1);
  printf("direct next launch (median of %d): %.1f us\n", REPEATS, each[REPEATS / 2] * 1e3);
  return 0;
}

/* ---- threads launching at once ---- */
static pthread_barrier_t start;
static int launches, rounds_each, failed;

static void *worker(void *arg) {
  const void *t = OFFLINK_TABLE;
  float *v = OFFLINK_TRANSLATE(t, lanes) + (size_t)arg * LANES;
  /* One launch first, untimed: the driver makes the thread's stream then. */
  int rc = OFFLINK_LAUNCH(t, busy, 1, LANES, LANES, 1, v);
  pthread_barrier_wait(&start);
  for (int i = 0; i < launches && rc == 0; i++)
    rc = OFFLINK_LAUNCH(t, busy, 1, LANES, LANES, rounds_each, v);
  if (rc) {
    fprintf(stderr, "thread %zu: launch: %s\n", (size_t)arg, offlink_last_error());
    __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
  }
  pthread_barrier_wait(&start);
  return NULL;
}

static int threads(int n, int l, int r) {
  const void *t = OFFLINK_TABLE;
  if (n < 1 || n > THREADS || l < 1 || r < 0) {
    fprintf(stderr, "threads: 1..%d threads, at least 1 launch\n", THREADS);
    return 1;
  }
  launches = l;
  rounds_each = r;
  memset(lanes, 0, sizeof lanes);
  if (offlink_update_to(t, lanes)) {
    fprintf(stderr, "update_to: %s\n", offlink_last_error());
    return 1;
  }
  pthread_t tid[THREADS];
  pthread_barrier_init(&start, NULL, (unsigned)n + 1);
  for (int i = 0; i < n; i++)
    pthread_create(&tid[i], NULL, worker, (void *)(size_t)i);
  pthread_barrier_wait(&start); /* every thread made its stream */
  double t0 = now_ms();
  pthread_barrier_wait(&start); /* every thread's launches returned */
  double t1 = now_ms();
  for (int i = 0; i < n; i++)
    pthread_join(tid[i], NULL);
  if (failed || offlink_update_from(t, lanes)) {
    fprintf(stderr, "threads: %s\n", failed ? "a launch failed" : offlink_last_error());
    return 1;
  }
  int bad = 0;
  for (int i = 0; i < n * LANES; i++)
    bad += lanes[i] != (float)(l + 1);
  const char *target = offlink_target_name(t);
  printf("threads %d x %d launches of %d rounds on %s: %.3f ms, %s\n", n, l, r,
         target ? target : "host", t1 - t0, bad ? "COUNTS WRONG" : "counts ok");
  return bad != 0;
}

/* What tests/cuda/fake_libcuda.c runs for busy (found with dlsym: link with -rdynamic), so
 * the CPU tests see every thread's launches through the runtime's device path. */
void fake_launch_busy(void **params, unsigned grid, unsigned block) {
  (void)grid, (void)block;
  int n = *(int *)params[0];
  float *v = *(float **)params[2];
  for (int i = 0; i < n; i++)
    v[i] += 1.0f;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "first") == 0)
    return first();
  if (argc == 3 && strcmp(argv[1], "direct") == 0)
    return direct(argv[2]);
  if (argc == 5 && strcmp(argv[1], "threads") == 0)
    return threads(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
  fprintf(stderr, "usage: timing first | direct IMAGE | threads T L R\n");
  return 2;
}
