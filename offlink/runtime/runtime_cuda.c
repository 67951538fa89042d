/* offlink runtime: the CUDA loader (target nvptx64-nvidia-cuda; cubin and fatbin images).
 *
 * The driver is opened with dlopen("libcuda.so.1") -- never linked, so a program runs on a
 * machine without one -- and every entry point is taken from cuGetProcAddress_v2 (a plain
 * dlsym gives the oldest ABI of versioned functions such as cuModuleGetGlobal).  An image is
 * loaded with cuLibraryLoadData and its rows found by name with cuLibraryGetKernel and
 * cuLibraryGetGlobal; a driver older than CUDA 12.0 gets the module API instead.  A fatbin
 * with no cubin for the GPU but with PTX has its CUs' relocatable PTX JIT-linked (cuLink*).
 *
 * translate gives the CUkernel (CUfunction with the module API) of a kernel and the device
 * address of a variable.  Launches and updates go on the calling thread's own stream, the
 * driver's per-thread default stream (CU_STREAM_PER_THREAD), and wait for that stream alone,
 * since offlink.h says both are done on return: threads launching at once run their kernels
 * side by side instead of each waiting for every other's (a cuCtxSynchronize on the NULL
 * stream did that).  Streams of our own making (cuStreamCreate) would need destroying when
 * their thread exits, from a pthread key destructor, which must not outlive a dlclose()d
 * library holding this runtime; the driver's per-thread stream lives and dies with its thread
 * and context.  It waits for work on the legacy NULL stream (other code's, never offlink's),
 * as every launch did before.
 *
 * Environment (read once, ignored in secure-execution programs: ofl_getenv): OFFLINK_LIBCUDA
 * (the driver library to open instead of libcuda.so.1: tests, unusual installs),
 * OFFLINK_CUDA_DEVICE (the device ordinal, default 0), OFFLINK_CUDA_SYNC_LAUNCH=1 (the old
 * way, kept to measure against: launch on the NULL stream, wait with cuCtxSynchronize, copy
 * with cuMemcpyHtoD/DtoH), OFFLINK_CUDA_INFO=1 (one line on stderr per kernel that ran on the
 * GPU, so a test on a real device can see which did). */

#define _GNU_SOURCE
#include "offlink.h"
#include "runtime_loader.h"
#include "table.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the driver API, as much as is used (cuda.h is not needed to build the runtime) ---- */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUlib_st *CUlibrary;
typedef struct CUkern_st *CUkernel;
typedef struct CUstream_st *CUstream;
typedef struct CUlinkState_st *CUlinkState;
typedef int CUjit_option;
typedef int CUlibraryOption;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_NOT_FOUND = 500,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_INPUT_PTX = 1,
};

/* The per-thread default stream, a handle every driver API call that takes a stream knows. */
#define CU_STREAM_PER_THREAD ((CUstream)0x2)

/* The entry points and the CUDA version whose ABI we call them with (cuGetProcAddress gives
 * the newest one at or below it: _v2 of cuMemcpyHtoD(Async), cuModuleGetGlobal, cuCtxPushCurrent,
 * cuDevicePrimaryCtxRelease, cuLinkCreate and cuLinkAddData). */
#define API_VERSION 12000

struct driver {
  CUresult (*Init)(unsigned);
  CUresult (*GetErrorName)(CUresult, const char **);
  CUresult (*DeviceGetCount)(int *);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*DevicePrimaryCtxRelease)(CUdevice);
  CUresult (*CtxPushCurrent)(CUcontext);
  CUresult (*CtxPopCurrent)(CUcontext *);
  CUresult (*CtxSynchronize)(void);
  CUresult (*LibraryLoadData)(CUlibrary *, const void *, CUjit_option *, void **, unsigned,
                              CUlibraryOption *, void **, unsigned);
  CUresult (*LibraryGetKernel)(CUkernel *, CUlibrary, const char *);
  CUresult (*LibraryGetGlobal)(CUdeviceptr *, size_t *, CUlibrary, const char *);
  CUresult (*LibraryUnload)(CUlibrary);
  CUresult (*KernelGetFunction)(CUfunction *, CUkernel);
  CUresult (*ModuleLoadData)(CUmodule *, const void *);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*ModuleGetGlobal)(CUdeviceptr *, size_t *, CUmodule, const char *);
  CUresult (*ModuleUnload)(CUmodule);
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, CUstream, void **, void **);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
  CUresult (*LinkCreate)(unsigned, CUjit_option *, void **, CUlinkState *);
  CUresult (*LinkAddData)(CUlinkState, int, void *, size_t, const char *, unsigned,
                          CUjit_option *, void **);
  CUresult (*LinkComplete)(CUlinkState, void **, size_t *);
  CUresult (*LinkDestroy)(CUlinkState);
  int library_api; /* cuLibrary* present (CUDA 12.0+) */
  int jit_link;    /* cuLink* present */
  int sync_launch; /* OFFLINK_CUDA_SYNC_LAUNCH: the NULL stream and cuCtxSynchronize */
  int info;        /* OFFLINK_CUDA_INFO: a line per kernel run */
};

static struct driver drv;
static char drv_error[256]; /* why the driver cannot be used; "" when it can */
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static const char *err_name(CUresult r) {
  static _Thread_local char buf[32];
  const char *name = NULL;
  if (drv.GetErrorName && drv.GetErrorName(r, &name) == CUDA_SUCCESS && name)
    return name;
  snprintf(buf, sizeof buf, "CUDA error %d", r);
  return buf;
}

typedef CUresult (*get_proc_v2_fn)(const char *, void **, int, unsigned long long, int *);
typedef CUresult (*get_proc_v1_fn)(const char *, void **, int, unsigned long long);

static int env_flag(const char *name) {
  const char *v = ofl_getenv(name);
  return v && *v && strcmp(v, "0") != 0;
}

static void driver_open(void) {
  drv.sync_launch = env_flag("OFFLINK_CUDA_SYNC_LAUNCH");
  drv.info = env_flag("OFFLINK_CUDA_INFO");
  const char *path = ofl_getenv("OFFLINK_LIBCUDA");
  if (!path || !*path)
    path = "libcuda.so.1";
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(drv_error, sizeof drv_error, "no CUDA driver (%s)", dlerror());
    return;
  }
  /* dlsym's void * to a function pointer through memcpy: ISO C has no cast between them. */
  get_proc_v2_fn get2 = NULL;
  get_proc_v1_fn get1 = NULL;
  void *sym = dlsym(h, "cuGetProcAddress_v2");
  memcpy(&get2, &sym, sizeof get2);
  if (!get2) {
    sym = dlsym(h, "cuGetProcAddress");
    memcpy(&get1, &sym, sizeof get1);
  }
  if (!get2 && !get1) {
    snprintf(drv_error, sizeof drv_error,
             "%s has no cuGetProcAddress (a CUDA driver older than 11.3)", path);
    return;
  }
  struct {
    const char *name;
    void **slot;
    int required;
  } want[] = {
      {"cuInit", (void **)&drv.Init, 1},
      {"cuGetErrorName", (void **)&drv.GetErrorName, 0},
      {"cuDeviceGetCount", (void **)&drv.DeviceGetCount, 1},
      {"cuDeviceGet", (void **)&drv.DeviceGet, 1},
      {"cuDeviceGetAttribute", (void **)&drv.DeviceGetAttribute, 1},
      {"cuDevicePrimaryCtxRetain", (void **)&drv.DevicePrimaryCtxRetain, 1},
      {"cuDevicePrimaryCtxRelease", (void **)&drv.DevicePrimaryCtxRelease, 1},
      {"cuCtxPushCurrent", (void **)&drv.CtxPushCurrent, 1},
      {"cuCtxPopCurrent", (void **)&drv.CtxPopCurrent, 1},
      {"cuCtxSynchronize", (void **)&drv.CtxSynchronize, 1},
      {"cuModuleLoadData", (void **)&drv.ModuleLoadData, 1},
      {"cuModuleGetFunction", (void **)&drv.ModuleGetFunction, 1},
      {"cuModuleGetGlobal", (void **)&drv.ModuleGetGlobal, 1},
      {"cuModuleUnload", (void **)&drv.ModuleUnload, 1},
      {"cuMemcpyHtoD", (void **)&drv.MemcpyHtoD, 1},
      {"cuMemcpyDtoH", (void **)&drv.MemcpyDtoH, 1},
      {"cuLaunchKernel", (void **)&drv.LaunchKernel, 1},
      {"cuStreamSynchronize", (void **)&drv.StreamSynchronize, 1},
      {"cuMemcpyHtoDAsync", (void **)&drv.MemcpyHtoDAsync, 1},
      {"cuMemcpyDtoHAsync", (void **)&drv.MemcpyDtoHAsync, 1},
      {"cuLibraryLoadData", (void **)&drv.LibraryLoadData, 0},
      {"cuLibraryGetKernel", (void **)&drv.LibraryGetKernel, 0},
      {"cuLibraryGetGlobal", (void **)&drv.LibraryGetGlobal, 0},
      {"cuLibraryUnload", (void **)&drv.LibraryUnload, 0},
      {"cuKernelGetFunction", (void **)&drv.KernelGetFunction, 0},
      {"cuLinkCreate", (void **)&drv.LinkCreate, 0},
      {"cuLinkAddData", (void **)&drv.LinkAddData, 0},
      {"cuLinkComplete", (void **)&drv.LinkComplete, 0},
      {"cuLinkDestroy", (void **)&drv.LinkDestroy, 0},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    void *fn = NULL;
    int status = 0;
    CUresult r = get2 ? get2(want[i].name, &fn, API_VERSION, 0, &status)
                      : get1(want[i].name, &fn, API_VERSION, 0);
    if (r != CUDA_SUCCESS || !fn) {
      fn = NULL;
      if (want[i].required) {
        snprintf(drv_error, sizeof drv_error, "the CUDA driver (%s) has no %s", path,
                 want[i].name);
        return;
      }
    }
    *want[i].slot = fn;
  }
  drv.library_api = drv.LibraryLoadData && drv.LibraryGetKernel && drv.LibraryGetGlobal &&
                    drv.LibraryUnload;
  drv.jit_link = drv.LinkCreate && drv.LinkAddData && drv.LinkComplete && drv.LinkDestroy;
  CUresult r = drv.Init(0);
  if (r == CUDA_ERROR_NO_DEVICE)
    snprintf(drv_error, sizeof drv_error, "no CUDA device (cuInit: %s)", err_name(r));
  else if (r != CUDA_SUCCESS)
    snprintf(drv_error, sizeof drv_error, "the CUDA driver does not start (cuInit: %s)",
             err_name(r));
  /* The handle stays open for the life of the process: images and contexts depend on it. */
}

/* ---- the fatbin container (as fatbinary writes it; offlink/toolchains/offlink/cuda.py reads it too) -- */

#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_PTX 1
#define FATBIN_ELF 2
#define FATBIN_COMPRESSED (0x2000u | 0x8000u)

struct fat_entry {
  uint16_t kind;
  uint32_t sm;
  uint64_t flags;
  const unsigned char *data;
  uint64_t size;
};

/* Bounds of the entries: [*pos, *end) inside img; -1 if the header does not fit. */
static int fatbin_open(const unsigned char *img, uint64_t size, uint64_t *pos, uint64_t *end) {
  if (size < 16 || ofl_le(img, 4) != FATBIN_MAGIC)
    return -1;
  uint64_t header = ofl_le(img + 6, 2), body = ofl_le(img + 8, 8);
  if (header < 16 || header > size || body > size - header)
    return -1;
  *pos = header;
  *end = header + body;
  return 0;
}

/* The entry at *pos, moving *pos past it: 1, or 0 at the end, or -1 when corrupt. */
static int fatbin_next(const unsigned char *img, uint64_t *pos, uint64_t end, struct fat_entry *e) {
  if (*pos >= end)
    return 0;
  if (end - *pos < 64)
    return -1;
  const unsigned char *p = img + *pos;
  uint64_t header = ofl_le(p + 4, 4), payload = ofl_le(p + 8, 8);
  if (header < 64 || header > end - *pos || payload > end - *pos - header)
    return -1;
  e->kind = (uint16_t)ofl_le(p, 2);
  e->sm = (uint32_t)ofl_le(p + 28, 4);
  e->flags = ofl_le(p + 40, 8);
  e->data = p + header;
  e->size = payload;
  *pos += header + payload;
  return 1;
}

/* ---- one loaded image ------------------------------------------------------------------ */

struct cuda_image {
  CUdevice dev;
  int ordinal;
  unsigned cc; /* compute capability, e.g. 90 */
  CUcontext ctx;
  CUlibrary lib; /* library API */
  CUmodule mod;  /* module API (a pre-12.0 driver) */
  void *jit;     /* a JIT-linked cubin: kept as long as the image is loaded */
  char target[64];
};

static int push(struct cuda_image *img, CUresult *r) {
  *r = drv.CtxPushCurrent(img->ctx);
  return *r == CUDA_SUCCESS ? 0 : -1;
}

static void pop(void) {
  CUcontext ignored;
  drv.CtxPopCurrent(&ignored);
}

/* JIT-link the relocatable PTX of every CU for the best `sm` not above the GPU's, into a
 * cubin for it.  *out is malloc'd.  0, or -1 with why[]. */
static int jit_link(const ofl_target *tg, unsigned cc, void **out, char *why, size_t why_size) {
  uint64_t pos, end;
  struct fat_entry e;
  unsigned best = 0;
  int st;
  fatbin_open(tg->image, tg->image_size, &pos, &end);
  while ((st = fatbin_next(tg->image, &pos, end, &e)) == 1)
    if (e.kind == FATBIN_PTX && e.sm <= cc && e.sm > best && !(e.flags & FATBIN_COMPRESSED))
      best = e.sm;
  if (st < 0 || best == 0) {
    snprintf(why, why_size, st < 0 ? "corrupt fatbin" : "no cubin or PTX for sm_%u", cc);
    return -1;
  }
  if (!drv.jit_link) {
    snprintf(why, why_size, "no cubin for sm_%u, and the driver cannot JIT-link PTX", cc);
    return -1;
  }
  char log[1024] = "";
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[] = {log, (void *)(uintptr_t)sizeof log};
  CUlinkState link;
  CUresult r = drv.LinkCreate(2, opts, vals, &link);
  if (r != CUDA_SUCCESS) {
    snprintf(why, why_size, "cuLinkCreate: %s", err_name(r));
    return -1;
  }
  int n = 0;
  fatbin_open(tg->image, tg->image_size, &pos, &end);
  while (r == CUDA_SUCCESS && fatbin_next(tg->image, &pos, end, &e) == 1) {
    if (e.kind != FATBIN_PTX || e.sm != best || (e.flags & FATBIN_COMPRESSED))
      continue;
    /* PTX is text: the driver reads it up to its NUL, which must lie inside the entry. */
    const unsigned char *nul = memchr(e.data, 0, e.size);
    if (!nul) {
      snprintf(why, why_size, "PTX entry without its terminating NUL");
      drv.LinkDestroy(link);
      return -1;
    }
    char name[32];
    snprintf(name, sizeof name, "cu%d.ptx", n++);
    r = drv.LinkAddData(link, CU_JIT_INPUT_PTX, (void *)e.data, (size_t)(nul - e.data) + 1, name,
                        0, NULL, NULL);
  }
  void *cubin = NULL;
  size_t size = 0;
  if (r == CUDA_SUCCESS)
    r = drv.LinkComplete(link, &cubin, &size);
  if (r != CUDA_SUCCESS) {
    snprintf(why, why_size, "JIT link of the compute_%u PTX: %s%s%s", best, err_name(r),
             log[0] ? ": " : "", log);
    drv.LinkDestroy(link);
    return -1;
  }
  /* The cubin belongs to the link state; keep a copy for as long as the image is used. */
  *out = malloc(size ? size : 1);
  if (*out)
    memcpy(*out, cubin, size);
  drv.LinkDestroy(link);
  if (!*out) {
    snprintf(why, why_size, "out of memory");
    return -1;
  }
  return 0;
}

/* Which code to load for a GPU of compute capability cc: the image itself when it is a cubin
 * or a fatbin with a cubin the GPU runs (same major version, minor not above the GPU's; the
 * driver picks it), else PTX JIT-linked here. */
static int pick_code(const ofl_target *tg, unsigned cc, const void **code, void **jit, char *why,
                     size_t why_size) {
  *code = tg->image;
  *jit = NULL;
  if (tg->kind != OFL_IMAGE_FATBIN)
    return 0;
  uint64_t pos, end;
  struct fat_entry e;
  int st;
  if (fatbin_open(tg->image, tg->image_size, &pos, &end) != 0) {
    snprintf(why, why_size, "the image is not a fatbin");
    return -1;
  }
  while ((st = fatbin_next(tg->image, &pos, end, &e)) == 1)
    if (e.kind == FATBIN_ELF && e.sm / 10 == cc / 10 && e.sm <= cc)
      return 0;
  if (st < 0) {
    snprintf(why, why_size, "corrupt fatbin");
    return -1;
  }
  if (jit_link(tg, cc, jit, why, why_size) != 0)
    return -1;
  *code = *jit;
  return 0;
}

/* The stream this thread launches and copies on: its own, or the legacy NULL stream under
 * OFFLINK_CUDA_SYNC_LAUNCH. */
static CUstream thread_stream(void) { return drv.sync_launch ? NULL : CU_STREAM_PER_THREAD; }

static void release(struct cuda_image *img) {
  if (img->lib)
    drv.LibraryUnload(img->lib);
  if (img->mod && push(img, &(CUresult){0}) == 0) {
    drv.ModuleUnload(img->mod);
    pop();
  }
  if (img->ctx)
    drv.DevicePrimaryCtxRelease(img->dev);
  free(img->jit);
  free(img);
}

static int cuda_load(struct module *m, const ofl_target *tg) {
  const char *where = ofl_module_where(m);
  pthread_once(&drv_once, driver_open);
  if (drv_error[0]) {
    ofl_note(m, "%s: target '%s': %s", where, tg->name, drv_error);
    return -1;
  }
  int ordinal = 0, count = 0;
  const char *want = ofl_getenv("OFFLINK_CUDA_DEVICE");
  if (want && *want) {
    char *rest;
    long v = strtol(want, &rest, 10);
    if (*rest || v < 0 || v > 1024) {
      ofl_note(m, "%s: OFFLINK_CUDA_DEVICE=%s is not a device number", where, want);
      return -1;
    }
    ordinal = (int)v;
  }
  CUresult r = drv.DeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count == 0) {
    ofl_note(m, "%s: target '%s': no CUDA device (cuDeviceGetCount: %s, %d devices)", where,
             tg->name, err_name(r), count);
    return -1;
  }
  if (ordinal >= count) {
    ofl_note(m, "%s: OFFLINK_CUDA_DEVICE=%d, but there are %d CUDA devices", where, ordinal,
             count);
    return -1;
  }
  struct cuda_image *img = calloc(1, sizeof *img);
  if (!img) {
    ofl_note(m, "%s: out of memory", where);
    return -1;
  }
  snprintf(img->target, sizeof img->target, "%s", tg->name);
  img->ordinal = ordinal;
  int major = 0, minor = 0;
  char why[1024] = "";
  const char *step = "cuDeviceGet";
  r = drv.DeviceGet(&img->dev, ordinal);
  if (r == CUDA_SUCCESS) {
    step = "cuDeviceGetAttribute";
    r = drv.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, img->dev);
  }
  if (r == CUDA_SUCCESS)
    r = drv.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, img->dev);
  if (r == CUDA_SUCCESS) {
    step = "cuDevicePrimaryCtxRetain";
    r = drv.DevicePrimaryCtxRetain(&img->ctx, img->dev);
  }
  if (r == CUDA_SUCCESS) {
    step = "cuCtxPushCurrent";
    push(img, &r);
  }
  if (r == CUDA_SUCCESS) {
    const void *code;
    unsigned cc = (unsigned)(major * 10 + minor);
    img->cc = cc;
    if (pick_code(tg, cc, &code, &img->jit, why, sizeof why) != 0) {
      pop();
      ofl_note(m, "%s: target '%s': GPU %d (sm_%u): %s", where, tg->name, ordinal, cc, why);
      release(img);
      return -1;
    }
    step = drv.library_api ? "cuLibraryLoadData" : "cuModuleLoadData";
    r = drv.library_api ? drv.LibraryLoadData(&img->lib, code, NULL, NULL, 0, NULL, NULL, 0)
                        : drv.ModuleLoadData(&img->mod, code);
    pop();
    if (r == CUDA_SUCCESS) {
      ofl_set_loader_data(m, img);
      return 0;
    }
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU)
      snprintf(why, sizeof why, " (the image has no code for sm_%u)", cc);
  }
  ofl_note(m, "%s: target '%s': %s: %s%s", where, tg->name, step, err_name(r), why);
  release(img);
  return -1;
}

static int cuda_resolve(struct module *m, const ofl_symbol *s, uintptr_t *out) {
  struct cuda_image *img = ofl_loader_data(m);
  const char *where = ofl_module_where(m);
  CUresult r;
  const char *call;
  if (s->kind == OFL_SYM_FUNCTION || s->kind == OFL_SYM_INDIRECT_FUNCTION) {
    if (drv.library_api) {
      CUkernel k = NULL;
      call = "cuLibraryGetKernel";
      r = drv.LibraryGetKernel(&k, img->lib, s->name);
      *out = (uintptr_t)k;
    } else {
      CUfunction f = NULL;
      call = "cuModuleGetFunction";
      r = drv.ModuleGetFunction(&f, img->mod, s->name);
      *out = (uintptr_t)f;
    }
  } else {
    /* A global's address is per context: look it up with ours current. */
    CUdeviceptr p = 0;
    size_t bytes = 0;
    call = drv.library_api ? "cuLibraryGetGlobal" : "cuModuleGetGlobal";
    if (push(img, &r) == 0) {
      r = drv.library_api ? drv.LibraryGetGlobal(&p, &bytes, img->lib, s->name)
                          : drv.ModuleGetGlobal(&p, &bytes, img->mod, s->name);
      pop();
    }
    if (r == CUDA_SUCCESS && bytes != s->size) {
      ofl_note(m, "%s: variable '%s' is %llu bytes on the host but %zu on the device", where,
               s->name, (unsigned long long)s->size, bytes);
      return -1;
    }
    *out = (uintptr_t)p;
  }
  if (r == CUDA_ERROR_NOT_FOUND)
    return OFL_RESOLVE_ABSENT; /* e.g. a host-target-only row of a table for two targets */
  if (r != CUDA_SUCCESS || *out == 0) {
    ofl_note(m, "%s: target '%s': %s('%s'): %s", where, img->target, call, s->name, err_name(r));
    return -1;
  }
  return 0;
}

/* One copy, done on return (offlink.h): on the thread's stream, waited for alone; under
 * OFFLINK_CUDA_SYNC_LAUNCH the synchronous copy on the legacy stream. */
static int cuda_copy(struct module *m, CUdeviceptr device, void *host, size_t n, int to_device) {
  struct cuda_image *img = ofl_loader_data(m);
  const char *call = "cuCtxPushCurrent";
  CUresult r;
  if (push(img, &r) == 0) {
    CUstream s;
    if (drv.sync_launch) {
      call = to_device ? "cuMemcpyHtoD" : "cuMemcpyDtoH";
      r = to_device ? drv.MemcpyHtoD(device, host, n) : drv.MemcpyDtoH(host, device, n);
    } else {
      s = thread_stream();
      call = to_device ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync";
      r = to_device ? drv.MemcpyHtoDAsync(device, host, n, s)
                    : drv.MemcpyDtoHAsync(host, device, n, s);
      if (r == CUDA_SUCCESS) {
        call = "cuStreamSynchronize";
        r = drv.StreamSynchronize(s);
      }
    }
    pop();
  }
  if (r != CUDA_SUCCESS) {
    ofl_set_error("%s of %zu bytes: %s", call, n, err_name(r));
    return -1;
  }
  return 0;
}

static int cuda_copy_to(struct module *m, uintptr_t dst, const void *src, size_t n) {
  return cuda_copy(m, (CUdeviceptr)dst, (void *)src, n, 1);
}

static int cuda_copy_from(struct module *m, void *dst, uintptr_t src, size_t n) {
  return cuda_copy(m, (CUdeviceptr)src, dst, n, 0);
}

static int cuda_launch(struct module *m, uintptr_t kernel, const char *name, unsigned grid,
                       unsigned block, size_t shared_bytes, void **args) {
  struct cuda_image *img = ofl_loader_data(m);
  CUresult r;
  const char *call = "cuCtxPushCurrent";
  if (grid == 0 || block == 0 || shared_bytes > UINT32_MAX) {
    ofl_set_error("kernel '%s': grid %u x block %u, %zu shared bytes: not a launch", name, grid,
                  block, shared_bytes);
    return -1;
  }
  if (push(img, &r) == 0) {
    CUfunction f = (CUfunction)kernel;
    /* A CUkernel is context-independent; the function it is in this context launches. */
    if (drv.library_api && drv.KernelGetFunction) {
      call = "cuKernelGetFunction";
      r = drv.KernelGetFunction(&f, (CUkernel)kernel);
    }
    CUstream s = thread_stream();
    if (r == CUDA_SUCCESS) {
      call = "cuLaunchKernel";
      r = drv.LaunchKernel(f, grid, 1, 1, block, 1, 1, (unsigned)shared_bytes, s, args, NULL);
    }
    /* offlink.h: the kernel is done on return.  Errors of the kernel itself show here. */
    if (r == CUDA_SUCCESS) {
      call = drv.sync_launch ? "cuCtxSynchronize" : "cuStreamSynchronize";
      r = drv.sync_launch ? drv.CtxSynchronize() : drv.StreamSynchronize(s);
    }
    pop();
  }
  if (r != CUDA_SUCCESS) {
    ofl_set_error("kernel '%s': %s: %s", name, call, err_name(r));
    return -1;
  }
  if (drv.info)
    fprintf(stderr, "offlink: cuda: kernel '%s' ran on GPU %d (sm_%u), grid %u x block %u, %s\n",
            name, img->ordinal, img->cc, grid, block,
            drv.sync_launch ? "NULL stream" : "the thread's stream");
  return 0;
}

static void cuda_unload(struct module *m) {
  struct cuda_image *img = ofl_loader_data(m);
  if (img)
    release(img);
  ofl_set_loader_data(m, NULL);
}

const struct loader ofl_cubin_loader = {
    OFL_IMAGE_CUBIN, cuda_load,   cuda_resolve, cuda_copy_to,
    cuda_copy_from,  cuda_unload, cuda_launch,
};

const struct loader ofl_fatbin_loader = {
    OFL_IMAGE_FATBIN, cuda_load,   cuda_resolve, cuda_copy_to,
    cuda_copy_from,   cuda_unload, cuda_launch,
};
