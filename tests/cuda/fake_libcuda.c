/* A fake CUDA driver (libcuda.so.1) for testing offlink's CUDA loader without a GPU.
 *
 * It implements the entry points runtime_cuda.c takes from cuGetProcAddress_v2, on "device
 * memory" that is host memory: cuLibraryLoadData (and cuModuleLoadData) read a real cubin --
 * alone or the matching one in a fatbin -- and give every kernel (STO_CUDA_ENTRY) and global
 * variable of its symbol table a handle or a zeroed buffer of the symbol's size; lookups are
 * by name.  cuLink* "JIT-links" PTX by reading `.entry` and `.global` lines.  cuLaunchKernel
 * runs `fake_launch_<kernel>(void **params, unsigned grid, unsigned block)` when the program
 * defines one (exported: link it with -rdynamic), so a test can check what a kernel got.
 * Work runs when it is queued, on any stream; the log names the stream each launch, copy and
 * wait was on: NULL (the legacy stream) or pts<T>, the per-thread default stream
 * (CU_STREAM_PER_THREAD) of the calling thread, T numbering the threads in the order they
 * first used one.  The context stack is per thread, as the driver's is.
 *
 * Environment:
 *   FAKE_CUDA_DEVICES=N       devices (default 1; 0: cuInit says CUDA_ERROR_NO_DEVICE)
 *   FAKE_CUDA_SM=NN           the device's compute capability (default 80)
 *   FAKE_CUDA_NO_LIBRARY=1    no cuLibrary and cuKernel entry points (a pre-12.0 driver)
 *   FAKE_CUDA_HIDE=a,b        names the lookups report as CUDA_ERROR_NOT_FOUND
 *   FAKE_CUDA_LOG=FILE        append one line per driver call to FILE
 *
 * Build: cc -shared -fPIC -Wl,-soname,libcuda.so.1 fake_libcuda.c -o libcuda.so.1 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
  OK = 0,
  INVALID_VALUE = 1,
  NOT_INITIALIZED = 3,
  NO_DEVICE = 100,
  INVALID_DEVICE = 101,
  INVALID_IMAGE = 200,
  INVALID_CONTEXT = 201,
  NO_BINARY_FOR_GPU = 209,
  INVALID_PTX = 218,
  INVALID_HANDLE = 400,
  NOT_FOUND = 500,
};

#define MAX_SYMS 256
#define MAX_LIBS 16

struct sym {
  char name[128];
  int kernel;
  size_t size;
  unsigned char *mem; /* variables: their "device" bytes */
};

struct lib {
  int n;
  struct sym syms[MAX_SYMS];
};

static struct lib *libs[MAX_LIBS];
static int initialised;
static _Thread_local int ctx_depth; /* pushes minus pops: what is current */
static int fake_ctx;                /* the primary context's address is the handle */

static int last_thread;                  /* threads that used their per-thread stream */
static _Thread_local int thread_number; /* this one's, 0 until it does */

static void logf_(const char *fmt, ...) {
  const char *path = getenv("FAKE_CUDA_LOG");
  if (!path || !*path)
    return;
  FILE *f = fopen(path, "a");
  if (!f)
    return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  fclose(f);
}

static int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

static int hidden(const char *name) {
  const char *list = getenv("FAKE_CUDA_HIDE");
  size_t n = strlen(name);
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && memcmp(p, name, n) == 0)
      return 1;
    p = end ? end + 1 : p + len;
  }
  return 0;
}

/* ---- reading images ------------------------------------------------------------------- */

static uint64_t rd(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static int add_sym(struct lib *l, const char *name, size_t namelen, int kernel, size_t size) {
  if (l->n == MAX_SYMS || namelen >= sizeof l->syms[0].name)
    return -1;
  struct sym *s = &l->syms[l->n++];
  memcpy(s->name, name, namelen);
  s->name[namelen] = '\0';
  s->kernel = kernel;
  s->size = size;
  if (!kernel && !(s->mem = calloc(1, size ? size : 1)))
    return -1;
  return 0;
}

/* The kernels and global variables of a cubin; the size is unknown, so every read is
 * checked against what ELF itself says. */
static CUresult read_cubin(const unsigned char *p, struct lib *l) {
  if (memcmp(p, "\x7f" "ELF", 4) != 0 || p[4] != 2 || p[5] != 1)
    return INVALID_IMAGE;
  uint64_t shoff = rd(p + 0x28, 8);
  unsigned shentsize = (unsigned)rd(p + 0x3A, 2), shnum = (unsigned)rd(p + 0x3C, 2);
  if (shentsize != 64 || shnum == 0 || shnum > 4096 || shoff > (1u << 30))
    return INVALID_IMAGE;
  for (unsigned i = 0; i < shnum; i++) {
    const unsigned char *sh = p + shoff + 64ull * i;
    if (rd(sh + 4, 4) != 2) /* SHT_SYMTAB */
      continue;
    uint64_t off = rd(sh + 24, 8), size = rd(sh + 32, 8), link = rd(sh + 40, 4);
    if (link >= shnum || size > (1u << 26))
      return INVALID_IMAGE;
    const unsigned char *str = p + rd(p + shoff + 64 * link + 24, 8);
    uint64_t strsize = rd(p + shoff + 64 * link + 32, 8);
    for (uint64_t k = 24; k + 24 <= size; k += 24) {
      const unsigned char *st = p + off + k;
      unsigned info = st[4], other = st[5], shndx = (unsigned)rd(st + 6, 2);
      uint64_t name = rd(st, 4), stsize = rd(st + 16, 8);
      unsigned bind = info >> 4, type = info & 0xF;
      if (shndx == 0 || shndx >= shnum || (bind != 1 && bind != 2) || name >= strsize)
        continue;
      const char *nm = (const char *)str + name;
      size_t len = strnlen(nm, strsize - name);
      if (type == 2 && (other & 0x10)) {
        if (add_sym(l, nm, len, 1, 1))
          return INVALID_IMAGE;
      } else if (type == 1 || type == 13) {
        if (add_sym(l, nm, len, 0, stsize))
          return INVALID_IMAGE;
      }
    }
  }
  return OK;
}

/* PTX: `.visible .entry NAME(` and `.visible .global [.align N] .TYPE NAME[DIM]...;` */
static CUresult read_ptx(const char *ptx, struct lib *l) {
  for (const char *line = ptx; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : 0) {
    while (*line == ' ' || *line == '\t')
      line++;
    if (strncmp(line, ".visible ", 9) != 0)
      continue;
    const char *p = line + 9;
    if (strncmp(p, ".entry ", 7) == 0) {
      p += 7;
      size_t n = strcspn(p, "( \n");
      if (add_sym(l, p, n, 1, 1))
        return INVALID_PTX;
    } else if (strncmp(p, ".global ", 8) == 0) {
      p += 8;
      if (strncmp(p, ".align ", 7) == 0)
        p = strchr(p + 7, ' ') + 1;
      size_t width = (size_t)atoi(p + 2) / 8; /* .b32 .f32 .u64 ... */
      p = strchr(p, ' ') + 1;
      size_t n = strcspn(p, "[ ;=\n");
      size_t size = width;
      for (const char *d = p + n; *d == '['; d = strchr(d, ']') + 1)
        size *= (size_t)atoi(d + 1);
      if (add_sym(l, p, n, 0, size))
        return INVALID_PTX;
    }
  }
  return OK;
}

#define JIT_MAGIC "FAKEJIT\n" /* what cuLinkComplete gives: the linked PTX texts */

/* A cubin, a fatbin (the best cubin for this device, as the driver picks) or a JIT result. */
static CUresult load(const void *image, struct lib **out, const char *api) {
  if (!initialised)
    return NOT_INITIALIZED;
  if (ctx_depth <= 0 && strcmp(api, "cuModuleLoadData") == 0)
    return INVALID_CONTEXT;
  const unsigned char *p = image;
  struct lib *l = calloc(1, sizeof *l);
  if (!l)
    return INVALID_VALUE;
  int dev = env_int("FAKE_CUDA_SM", 80);
  CUresult r;
  if (memcmp(p, JIT_MAGIC, 8) == 0) {
    logf_("%s jit", api);
    r = read_ptx((const char *)p + 8, l);
  } else if (rd(p, 4) == 0xBA55ED50u) {
    uint64_t pos = rd(p + 6, 2), end = pos + rd(p + 8, 8);
    const unsigned char *best = NULL;
    unsigned best_sm = 0;
    while (pos + 64 <= end) {
      const unsigned char *e = p + pos;
      unsigned kind = (unsigned)rd(e, 2), sm = (unsigned)rd(e + 28, 4);
      uint64_t header = rd(e + 4, 4), size = rd(e + 8, 8);
      if (kind == 2 && sm / 10 == (unsigned)dev / 10 && sm <= (unsigned)dev && sm > best_sm) {
        best = e + header;
        best_sm = sm;
      }
      pos += header + size;
    }
    if (!best) {
      logf_("%s fatbin: no cubin for sm_%d", api, dev);
      free(l);
      return NO_BINARY_FOR_GPU;
    }
    logf_("%s fatbin sm_%u", api, best_sm);
    r = read_cubin(best, l);
  } else {
    unsigned sm = (unsigned)(rd(p + 0x30, 4) >> 8 & 0xff); /* e_flags: EF_CUDA_SM */
    if (memcmp(p, "\x7f" "ELF", 4) == 0 && (sm / 10 != (unsigned)dev / 10 || sm > (unsigned)dev)) {
      logf_("%s cubin sm_%u: not for sm_%d", api, sm, dev);
      free(l);
      return NO_BINARY_FOR_GPU;
    }
    logf_("%s cubin sm_%u", api, sm);
    r = read_cubin(p, l);
  }
  if (r != OK) {
    free(l);
    return r;
  }
  for (int i = 0; i < MAX_LIBS; i++)
    if (!libs[i]) {
      libs[i] = l;
      *out = l;
      return OK;
    }
  free(l);
  return INVALID_VALUE;
}

static struct sym *find(struct lib *l, const char *name, int kernel) {
  if (!l || hidden(name))
    return NULL;
  for (int i = 0; i < l->n; i++)
    if (l->syms[i].kernel == kernel && strcmp(l->syms[i].name, name) == 0)
      return &l->syms[i];
  return NULL;
}

/* [p, p+n) inside one variable of a loaded image: what a device pointer must be. */
static int device_range(CUdeviceptr p, size_t n) {
  for (int i = 0; i < MAX_LIBS; i++)
    for (int k = 0; libs[i] && k < libs[i]->n; k++) {
      struct sym *s = &libs[i]->syms[k];
      uintptr_t start = (uintptr_t)s->mem;
      if (s->mem && p >= start && p - start <= s->size && n <= s->size - (p - start))
        return 1;
    }
  return 0;
}

/* ---- the entry points ---------------------------------------------------------------- */

static CUresult cuInit(unsigned flags) {
  logf_("cuInit %u", flags);
  if (env_int("FAKE_CUDA_DEVICES", 1) == 0)
    return NO_DEVICE;
  initialised = 1;
  return OK;
}

static CUresult cuGetErrorName(CUresult r, const char **s) {
  switch (r) {
  case NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; break;
  case NO_BINARY_FOR_GPU: *s = "CUDA_ERROR_NO_BINARY_FOR_GPU"; break;
  case NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
  case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
  case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
  case INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; break;
  default: return INVALID_VALUE;
  }
  return OK;
}

static CUresult cuDeviceGetCount(int *n) {
  *n = initialised ? env_int("FAKE_CUDA_DEVICES", 1) : 0;
  return initialised ? OK : NOT_INITIALIZED;
}

static CUresult cuDeviceGet(int *dev, int ordinal) {
  if (ordinal < 0 || ordinal >= env_int("FAKE_CUDA_DEVICES", 1))
    return INVALID_DEVICE;
  *dev = ordinal;
  return OK;
}

static CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
  (void)dev;
  int sm = env_int("FAKE_CUDA_SM", 80);
  if (attr == 75)
    *v = sm / 10;
  else if (attr == 76)
    *v = sm % 10;
  else
    return INVALID_VALUE;
  return OK;
}

static CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  logf_("cuDevicePrimaryCtxRetain %d", dev);
  *ctx = &fake_ctx;
  return OK;
}

static CUresult cuDevicePrimaryCtxRelease(int dev) {
  logf_("cuDevicePrimaryCtxRelease %d", dev);
  return OK;
}

static CUresult cuCtxPushCurrent(void *ctx) {
  if (ctx != &fake_ctx)
    return INVALID_CONTEXT;
  ctx_depth++;
  return OK;
}

static CUresult cuCtxPopCurrent(void **ctx) {
  if (ctx_depth <= 0)
    return INVALID_CONTEXT;
  ctx_depth--;
  *ctx = &fake_ctx;
  return OK;
}

/* What tests/gpu/timing.c's driver-API twin uses instead of a push: the context stays. */
static CUresult cuCtxSetCurrent(void *ctx) {
  if (ctx && ctx != &fake_ctx)
    return INVALID_CONTEXT;
  ctx_depth = ctx ? 1 : 0;
  return OK;
}

static CUresult cuCtxSynchronize(void) {
  logf_("cuCtxSynchronize");
  return ctx_depth > 0 ? OK : INVALID_CONTEXT;
}

#define PER_THREAD ((void *)0x2) /* CU_STREAM_PER_THREAD */

/* The legacy stream or this thread's per-thread stream; no other handle is valid here. */
static int stream_ok(void *stream) { return !stream || stream == PER_THREAD; }

static const char *stream_name(void *stream, char *buf, size_t size) {
  if (!stream)
    return "NULL";
  if (stream != PER_THREAD)
    return "INVALID";
  if (!thread_number)
    thread_number = __atomic_add_fetch(&last_thread, 1, __ATOMIC_RELAXED);
  snprintf(buf, size, "pts%d", thread_number);
  return buf;
}

static CUresult cuStreamSynchronize(void *stream) {
  char buf[16];
  logf_("cuStreamSynchronize %s", stream_name(stream, buf, sizeof buf));
  if (ctx_depth <= 0)
    return INVALID_CONTEXT;
  return stream_ok(stream) ? OK : INVALID_HANDLE;
}

static CUresult cuLibraryLoadData(struct lib **lib, const void *code, void *o, void **ov,
                                  unsigned no, void *lo, void **lov, unsigned nlo) {
  (void)o, (void)ov, (void)no, (void)lo, (void)lov, (void)nlo;
  return load(code, lib, "cuLibraryLoadData");
}

static CUresult cuModuleLoadData(struct lib **mod, const void *code) {
  return load(code, mod, "cuModuleLoadData");
}

static CUresult get_kernel(struct sym **k, struct lib *l, const char *name, const char *api) {
  *k = find(l, name, 1);
  logf_("%s %s%s", api, name, *k ? "" : ": not found");
  return *k ? OK : NOT_FOUND;
}

static CUresult cuLibraryGetKernel(struct sym **k, struct lib *l, const char *name) {
  return get_kernel(k, l, name, "cuLibraryGetKernel");
}

static CUresult cuModuleGetFunction(struct sym **k, struct lib *l, const char *name) {
  return get_kernel(k, l, name, "cuModuleGetFunction");
}

static CUresult get_global(CUdeviceptr *p, size_t *bytes, struct lib *l, const char *name,
                           const char *api) {
  if (ctx_depth <= 0)
    return INVALID_CONTEXT; /* a global's address is per context */
  struct sym *s = find(l, name, 0);
  logf_("%s %s%s", api, name, s ? "" : ": not found");
  if (!s)
    return NOT_FOUND;
  *p = (CUdeviceptr)(uintptr_t)s->mem;
  *bytes = s->size;
  return OK;
}

static CUresult cuLibraryGetGlobal(CUdeviceptr *p, size_t *bytes, struct lib *l,
                                   const char *name) {
  return get_global(p, bytes, l, name, "cuLibraryGetGlobal");
}

static CUresult cuModuleGetGlobal(CUdeviceptr *p, size_t *bytes, struct lib *l,
                                  const char *name) {
  return get_global(p, bytes, l, name, "cuModuleGetGlobal");
}

static CUresult unload(struct lib *l) {
  for (int i = 0; i < MAX_LIBS; i++)
    if (libs[i] == l) {
      logf_("unload");
      libs[i] = NULL;
      for (int k = 0; k < l->n; k++)
        free(l->syms[k].mem);
      free(l);
      return OK;
    }
  return INVALID_HANDLE;
}

static CUresult cuLibraryUnload(struct lib *l) { return unload(l); }
static CUresult cuModuleUnload(struct lib *l) { return unload(l); }

static CUresult cuKernelGetFunction(struct sym **f, struct sym *k) {
  if (ctx_depth <= 0)
    return INVALID_CONTEXT;
  *f = k;
  return OK;
}

static CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) {
  logf_("cuMemcpyHtoD %zu", n);
  if (ctx_depth <= 0 || !device_range(dst, n))
    return ctx_depth <= 0 ? INVALID_CONTEXT : INVALID_VALUE;
  memcpy((void *)(uintptr_t)dst, src, n);
  return OK;
}

static CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) {
  logf_("cuMemcpyDtoH %zu", n);
  if (ctx_depth <= 0 || !device_range(src, n))
    return ctx_depth <= 0 ? INVALID_CONTEXT : INVALID_VALUE;
  memcpy(dst, (const void *)(uintptr_t)src, n);
  return OK;
}

static CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, void *stream) {
  char buf[16];
  logf_("cuMemcpyHtoDAsync %zu %s", n, stream_name(stream, buf, sizeof buf));
  if (ctx_depth <= 0 || !device_range(dst, n) || !stream_ok(stream))
    return ctx_depth <= 0 ? INVALID_CONTEXT : stream_ok(stream) ? INVALID_VALUE : INVALID_HANDLE;
  memcpy((void *)(uintptr_t)dst, src, n);
  return OK;
}

static CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, void *stream) {
  char buf[16];
  logf_("cuMemcpyDtoHAsync %zu %s", n, stream_name(stream, buf, sizeof buf));
  if (ctx_depth <= 0 || !device_range(src, n) || !stream_ok(stream))
    return ctx_depth <= 0 ? INVALID_CONTEXT : stream_ok(stream) ? INVALID_VALUE : INVALID_HANDLE;
  memcpy(dst, (const void *)(uintptr_t)src, n);
  return OK;
}

typedef void (*emulation)(void **params, unsigned grid, unsigned block);

static CUresult cuLaunchKernel(struct sym *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shared, void *stream,
                               void **params, void **extra) {
  (void)extra;
  if (ctx_depth <= 0)
    return INVALID_CONTEXT;
  if (!f || !f->kernel || !stream_ok(stream))
    return INVALID_HANDLE;
  char buf[16];
  logf_("cuLaunchKernel %s grid %ux%ux%u block %ux%ux%u shared %u stream %s", f->name, gx, gy,
        gz, bx, by, bz, shared, stream_name(stream, buf, sizeof buf));
  char name[160];
  snprintf(name, sizeof name, "fake_launch_%s", f->name);
  emulation run = (emulation)dlsym(RTLD_DEFAULT, name);
  if (run)
    run(params, gx, bx);
  return OK;
}

/* JIT linking: the PTX texts joined after JIT_MAGIC, read back by load(). */
struct link {
  char *text;
  size_t len;
};

static CUresult cuLinkCreate(unsigned n, int *opts, void **vals, struct link **out) {
  (void)n, (void)opts, (void)vals;
  *out = calloc(1, sizeof **out);
  return *out ? OK : INVALID_VALUE;
}

static CUresult cuLinkAddData(struct link *l, int type, void *data, size_t size, const char *name,
                              unsigned n, int *opts, void **vals) {
  (void)n, (void)opts, (void)vals;
  if (type != 1 || size == 0 || ((char *)data)[size - 1] != '\0')
    return INVALID_VALUE; /* PTX, NUL included in the size */
  logf_("cuLinkAddData %s %zu", name, size);
  char *grown = realloc(l->text, l->len + size + 8);
  if (!grown)
    return INVALID_VALUE;
  if (!l->len) {
    memcpy(grown, JIT_MAGIC, 8);
    l->len = 8;
  }
  memcpy(grown + l->len, data, size - 1);
  l->len += size - 1;
  grown[l->len] = '\0';
  l->text = grown;
  return OK;
}

static CUresult cuLinkComplete(struct link *l, void **cubin, size_t *size) {
  if (!l->text)
    return INVALID_VALUE;
  logf_("cuLinkComplete");
  *cubin = l->text;
  *size = l->len + 1;
  return OK;
}

static CUresult cuLinkDestroy(struct link *l) {
  free(l->text);
  free(l);
  return OK;
}

/* ---- cuGetProcAddress ------------------------------------------------------------------- */

static const struct {
  const char *name;
  void *fn;
  int library; /* part of the CUDA 12.0 library API */
} entries[] = {
    {"cuInit", (void *)cuInit, 0},
    {"cuGetErrorName", (void *)cuGetErrorName, 0},
    {"cuDeviceGetCount", (void *)cuDeviceGetCount, 0},
    {"cuDeviceGet", (void *)cuDeviceGet, 0},
    {"cuDeviceGetAttribute", (void *)cuDeviceGetAttribute, 0},
    {"cuDevicePrimaryCtxRetain", (void *)cuDevicePrimaryCtxRetain, 0},
    {"cuDevicePrimaryCtxRelease", (void *)cuDevicePrimaryCtxRelease, 0},
    {"cuCtxPushCurrent", (void *)cuCtxPushCurrent, 0},
    {"cuCtxPopCurrent", (void *)cuCtxPopCurrent, 0},
    {"cuCtxSetCurrent", (void *)cuCtxSetCurrent, 0},
    {"cuCtxSynchronize", (void *)cuCtxSynchronize, 0},
    {"cuLibraryLoadData", (void *)cuLibraryLoadData, 1},
    {"cuLibraryGetKernel", (void *)cuLibraryGetKernel, 1},
    {"cuLibraryGetGlobal", (void *)cuLibraryGetGlobal, 1},
    {"cuLibraryUnload", (void *)cuLibraryUnload, 1},
    {"cuKernelGetFunction", (void *)cuKernelGetFunction, 1},
    {"cuModuleLoadData", (void *)cuModuleLoadData, 0},
    {"cuModuleGetFunction", (void *)cuModuleGetFunction, 0},
    {"cuModuleGetGlobal", (void *)cuModuleGetGlobal, 0},
    {"cuModuleUnload", (void *)cuModuleUnload, 0},
    {"cuMemcpyHtoD", (void *)cuMemcpyHtoD, 0},
    {"cuMemcpyDtoH", (void *)cuMemcpyDtoH, 0},
    {"cuLaunchKernel", (void *)cuLaunchKernel, 0},
    {"cuStreamSynchronize", (void *)cuStreamSynchronize, 0},
    {"cuMemcpyHtoDAsync", (void *)cuMemcpyHtoDAsync, 0},
    {"cuMemcpyDtoHAsync", (void *)cuMemcpyDtoHAsync, 0},
    {"cuLinkCreate", (void *)cuLinkCreate, 0},
    {"cuLinkAddData", (void *)cuLinkAddData, 0},
    {"cuLinkComplete", (void *)cuLinkComplete, 0},
    {"cuLinkDestroy", (void *)cuLinkDestroy, 0},
};

__attribute__((visibility("default"))) CUresult
cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                    int *status) {
  (void)flags;
  if (status)
    *status = 0;
  *pfn = NULL;
  if (version < 12000) /* the runtime asks for the CUDA 12.0 ABI of each entry point */
    return INVALID_VALUE;
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
    if (strcmp(entries[i].name, symbol) == 0) {
      if (entries[i].library && env_int("FAKE_CUDA_NO_LIBRARY", 0))
        break;
      *pfn = entries[i].fn;
      return OK;
    }
  if (status)
    *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
  return NOT_FOUND;
}
