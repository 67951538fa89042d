/* offlink runtime: find this module's offload table and use its target code and data.
 *
 * Build:  cc $(offlink config --cflags) app.c $(offlink config --libs)
 *
 * Every module (the executable and each shared library) linked by offlink carries its own
 * table, found through the weak hidden symbol __OPENMP_TARGET__; OFFLINK_TABLE is that
 * module's table, NULL in a module linked without offlink.  The runtime keeps one registry
 * of tables, initialised lazily on first use of each (thread-safe): it validates the table,
 * picks a target, loads its image and resolves every offered name in it.
 *
 * When no target can be used (no table, a corrupt one, no image, no loader, a load error),
 * the program runs on the host: translate returns the host pointer and updates are no-ops.
 * offlink_last_error() says why.
 *
 * Environment, read once (when the first module registers) and ignored altogether in a
 * secure-execution program (setuid, setgid, file capabilities: secure_getenv), so that it
 * cannot choose what such a program loads or from where:
 *   OFFLINK_TARGET=NAME    use this target (`host` means x86_64-pc-linux-gnu); `none`: run
 *                          on the host.  Default: the first target that loads.
 *   OFFLINK_MANDATORY=1    running host code where a target was asked for is a hard error,
 *                          "offlink: error: ..." on stderr and exit status 1 (the library's
 *                          only exit): a module with a table that cannot run on a target,
 *                          and offlink_translate of a pointer that no row of the table offers
 *                          or whose row the target's image lacks.  A module without a table
 *                          (OFFLINK_TABLE NULL) is no error.
 *   OFFLINK_LIBCUDA, OFFLINK_CUDA_DEVICE   the CUDA driver library and device; also
 *   OFFLINK_CUDA_SYNC_LAUNCH, OFFLINK_CUDA_INFO (runtime_cuda.c)
 *   TMPDIR                 where an image goes when it cannot be loaded from memory (memfd)
 *
 * A table is registered when its module is loaded and unregistered when it is dlclose()d;
 * each row is checked before use: a variable must be no larger than the host object it
 * points at (the st_size of the symbol there; a stripped, unexported one must at least not
 * run into the next row) and a function must lie in the module's code, else the module runs
 * on the host; a variable in read-only memory (const data, RELRO) is translated and copied
 * to the target, but offlink_update_from refuses to write it.
 *
 * Telling the sides apart: the link compiles target code with
 *   -D__OFFLINK_TARGET__="<target name>"   (a string literal, e.g. "x86_64-pc-linux-gnu")
 *   -D__OFFLINK_TARGET_HOST__=1            (only for a target that runs in-process on the
 *                                           host CPU, i.e. a shared-object image)
 * and host code without either.  OFFLINK_IS_TARGET and OFFLINK_SIDE below wrap them.
 * The CUDA target (nvptx64-nvidia-cuda) defines __OFFLINK_TARGET_CUDA__=1 and compiles the CU
 * with nvcc; see "CUDA kernels and device data" below for writing one source for both sides.
 * In target code the API below is a set of inline stand-ins (an image needs no runtime
 * library, and target code is already where its data is): translate returns its argument,
 * updates do nothing and return 0, OFFLINK_TABLE is NULL.
 */
#ifndef OFFLINK_H
#define OFFLINK_H

#include <stddef.h>

#ifdef __OFFLINK_TARGET__
#define OFFLINK_IS_TARGET 1
#define OFFLINK_SIDE __OFFLINK_TARGET__ /* the target's name */
#else
#define OFFLINK_IS_TARGET 0
#define OFFLINK_SIDE "host"
#endif

/* offlink_translate keeping the type of `p` (a function, a function pointer or an object
 * pointer), so a call reads OFFLINK_TRANSLATE(OFFLINK_TABLE, add)(1, 2).  GNU C / C++. */
#define OFFLINK_TRANSLATE(table, p)                                                                \
  ((__typeof__(&*(p)))offlink_translate((table), (const void *)(p)))

/* ---- CUDA kernels and device data: one source for the host and for CUDA ----------------
 *
 *   OFFLINK_DEVICE_DATA float total;                     a __device__ variable, offered
 *   OFFLINK_KERNEL void scale(int n, float a, float *x) {  a __global__ kernel, offered
 *     OFFLINK_FOR(i, n) x[i] *= a;                         grid-stride loop over [0, n)
 *   }
 *   OFFLINK_LAUNCH(OFFLINK_TABLE, scale, blocks, threads, n, 2.0f, OFFLINK_TRANSLATE(OFFLINK_TABLE, x));
 *
 * In a CU compiled for CUDA (nvcc, __OFFLINK_TARGET_CUDA__): OFFLINK_KERNEL is
 * `extern "C" __global__` (C linkage: the kernel's name is its plain name on both sides),
 * OFFLINK_DEVICE_DATA `__device__`, OFFLINK_DEVICE (helpers kernels call) `__host__ __device__`.
 * Everywhere else they are plain C (`extern "C"` for kernels in C++), so the host build of a
 * kernel is an ordinary function: the host fallback, run as ONE call.  That is why kernels are
 * written grid-stride with OFFLINK_FOR: any number of threads covers [0, n), the GPU's grid as
 * well as the single host "thread".  Kernels that need __syncthreads() or shared memory have
 * no such host fallback; guard them with __OFFLINK_TARGET_CUDA__.
 * A CUDA CU is compiled as CUDA C++ (its host parts too), so C sources must also be valid C++
 * there (cast malloc's result), or keep host-only code in CUs built without the CUDA target.
 * OFFLINK_ATOMIC_ADD(p, v): *p += v, atomically (atomicAdd on the GPU); p is evaluated more
 * than once on the host. */
#if defined(__OFFLINK_TARGET_CUDA__) && defined(__CUDACC__)
#define OFFLINK_KERNEL extern "C" __global__
#define OFFLINK_DEVICE __host__ __device__
#define OFFLINK_DEVICE_DATA __device__
#define OFFLINK_THREAD_INDEX ((size_t)blockIdx.x * blockDim.x + threadIdx.x)
#define OFFLINK_THREAD_COUNT ((size_t)gridDim.x * blockDim.x)
#define OFFLINK_ATOMIC_ADD(p, v) ((void)atomicAdd((p), (v)))
#else
#ifdef __cplusplus
#define OFFLINK_KERNEL extern "C"
#else
#define OFFLINK_KERNEL
#endif
#define OFFLINK_DEVICE
#define OFFLINK_DEVICE_DATA
#define OFFLINK_THREAD_INDEX ((size_t)0)
#define OFFLINK_THREAD_COUNT ((size_t)1)
/* A compare-and-swap loop: __atomic_fetch_add takes no floating-point operands. */
#define OFFLINK_ATOMIC_ADD(p, v)                                                                   \
  do {                                                                                             \
    __typeof__(*(p)) offlink_old_, offlink_new_;                                                   \
    __atomic_load((p), &offlink_old_, __ATOMIC_RELAXED);                                           \
    do                                                                                             \
      offlink_new_ = offlink_old_ + (v);                                                           \
    while (!__atomic_compare_exchange((p), &offlink_old_, &offlink_new_, 0, __ATOMIC_RELAXED,     \
                                      __ATOMIC_RELAXED));                                          \
  } while (0)
#endif
#define OFFLINK_FOR(i, n)                                                                          \
  for (size_t i = OFFLINK_THREAD_INDEX; i < (size_t)(n); i += OFFLINK_THREAD_COUNT)

/* offlink_launch's result when the module runs on the host: run the kernel's host build. */
#define OFFLINK_ON_HOST 1

#ifdef __cplusplus
extern "C" {
#endif

#ifndef __OFFLINK_TARGET__

/* Defined by offlink at offset 0 of this module's `.openmp_target` section; undefined (so
 * NULL) in a module without one.  Hidden: each module sees its own. */
extern const char __OPENMP_TARGET__[] __attribute__((weak, visibility("hidden")));
#define OFFLINK_TABLE ((const void *)__OPENMP_TARGET__)

#define OFFLINK_API __attribute__((visibility("default")))

/* Host function or variable address (a pointer into a variable too) -> its counterpart in
 * the target in use.  The pointer unchanged where it has none, or when running on the host
 * (seed 000: __kmpc_target_translate_fptr).  Functions match their exact address only.
 * In a shared library, the executable's copy of a variable (a copy relocation) and its PLT
 * entry for a function count as the library's own addresses. */
OFFLINK_API void *offlink_translate(const void *table, const void *host_ptr);

/* Copy the whole offered variable that contains host_var, host -> target (update_to) or
 * target -> host (update_from).  0 on success, and when running on the host (the data is
 * already there); -1 when host_var is in no offered variable or the copy fails. */
OFFLINK_API int offlink_update_to(const void *table, const void *host_var);
OFFLINK_API int offlink_update_from(const void *table, void *host_var);

/* The same for [host_ptr, host_ptr + size), which must lie inside one offered variable. */
OFFLINK_API int offlink_update_to_range(const void *table, const void *host_ptr, size_t size);
OFFLINK_API int offlink_update_from_range(const void *table, void *host_ptr, size_t size);

/* Target address of the offered function or variable `name`; NULL when there is no such
 * name or no target in use. */
OFFLINK_API void *offlink_lookup(const void *table, const char *name);

/* Name of the target in use for this table (e.g. "x86_64-pc-linux-gnu"), or NULL when the
 * module runs on the host.  Initialises the table, so it also reports a failure early. */
OFFLINK_API const char *offlink_target_name(const void *table);

/* One line saying why the last call in this thread failed or fell back to the host; NULL
 * if nothing failed yet.  Like errno, a later successful call does not clear it. */
OFFLINK_API const char *offlink_last_error(void);

/* Called by the library itself, from a constructor and a destructor in every module that
 * links it (as libomptarget's __tgt_register_lib / __tgt_unregister_lib): the module's table
 * is registered when the module is loaded and forgotten, its image unloaded, when it is
 * dlclose()d (not at exit: other threads may still use it).  A program never needs to call
 * them; a table first used before its module's constructor ran is registered then. */
OFFLINK_API void __offlink_register_module(const void *table);
OFFLINK_API void __offlink_unregister_module(const void *table);

/* Launch the kernel whose host build is `kernel` (an OFFLINK_KERNEL) on the CUDA device the
 * module's table uses: grid x block threads (1-D), shared_bytes of dynamic shared memory,
 * args as for cuLaunchKernel (one pointer to each argument, of the kernel's parameter type).
 * Waits for the kernel to finish.  0 when it ran on the device; OFFLINK_ON_HOST when the
 * module runs on the host or on a target that launches nothing (call the host build then:
 * OFFLINK_LAUNCH does); -1 on error (not an offered kernel, a kernel missing from the device
 * image, a failed launch: offlink_last_error() says which). */
OFFLINK_API int offlink_launch(const void *table, const void *kernel, unsigned grid,
                               unsigned block, size_t shared_bytes, void **args);

#else /* target side: inline stand-ins, see above */

#define OFFLINK_TABLE ((const void *)0)

static inline void *offlink_translate(const void *table, const void *host_ptr) {
  (void)table;
  return (void *)host_ptr;
}
static inline int offlink_update_to(const void *table, const void *host_var) {
  (void)table;
  (void)host_var;
  return 0;
}
static inline int offlink_update_from(const void *table, void *host_var) {
  (void)table;
  (void)host_var;
  return 0;
}
static inline int offlink_update_to_range(const void *table, const void *host_ptr, size_t size) {
  (void)table;
  (void)host_ptr;
  (void)size;
  return 0;
}
static inline int offlink_update_from_range(const void *table, void *host_ptr, size_t size) {
  (void)table;
  (void)host_ptr;
  (void)size;
  return 0;
}
static inline void *offlink_lookup(const void *table, const char *name) {
  (void)table;
  (void)name;
  return (void *)0;
}
static inline const char *offlink_target_name(const void *table) {
  (void)table;
  return __OFFLINK_TARGET__;
}
static inline const char *offlink_last_error(void) { return (const char *)0; }
static inline int offlink_launch(const void *table, const void *kernel, unsigned grid,
                                 unsigned block, size_t shared_bytes, void **args) {
  (void)table;
  (void)kernel;
  (void)grid;
  (void)block;
  (void)shared_bytes;
  (void)args;
  return OFFLINK_ON_HOST;
}

#endif /* __OFFLINK_TARGET__ */

#ifdef __cplusplus
}
#endif

/* OFFLINK_LAUNCH(table, kernel, grid, block, args...): offlink_launch with the arguments
 * given as values (1 to 12 of them), then, when the module runs on the host, the kernel's host
 * build called with them.  0 or -1 (offlink_last_error()).  Each argument is evaluated once.
 * In C the device gets each argument as the type it has at the call (as with cuLaunchKernel):
 * write 2.0f for a float parameter, not 2.  In C++ they are converted to the parameter types.
 * In the device compile of a CUDA CU it does nothing (host code is not compiled there). */
#if defined(__OFFLINK_TARGET_CUDA__) && defined(__CUDACC__)
#define OFFLINK_LAUNCH(table, kernel, grid, block, ...) 0
#elif defined(__cplusplus)
template <class T> struct offlink_identity_ {
  typedef T type;
};
template <class... P>
static inline int offlink_launch_cxx_(const void *table, void (*kernel)(P...), unsigned grid,
                                      unsigned block, typename offlink_identity_<P>::type... a) {
  void *args[] = {(void *)&a..., nullptr};
  int rc = offlink_launch(table, (const void *)kernel, grid, block, 0, args);
  if (rc == OFFLINK_ON_HOST) {
    kernel(a...);
    rc = 0;
  }
  return rc;
}
#define OFFLINK_LAUNCH(table, kernel, grid, block, ...)                                            \
  offlink_launch_cxx_((table), (kernel), (grid), (block), __VA_ARGS__)
#else
/* GNU C: a statement expression; each argument copied once into a variable of its type. */
#define OFFLINK_LAUNCH(table, kernel, grid, block, ...)                                            \
  OFFLINK_LAUNCH_N_(OFFLINK_NARGS_(__VA_ARGS__), table, kernel, grid, block, __VA_ARGS__)
#define OFFLINK_LAUNCH_N_(n, table, kernel, grid, block, ...)                                     \
  ({                                                                                               \
    OFFLINK_CAT_(OFFLINK_D, n)(__VA_ARGS__) void *offlink_args_[] = {OFFLINK_CAT_(OFFLINK_P, n)}; \
    int offlink_rc_ =                                                                              \
        offlink_launch((table), (const void *)(kernel), (grid), (block), 0, offlink_args_);       \
    if (offlink_rc_ == OFFLINK_ON_HOST) {                                                          \
      (kernel)(OFFLINK_CAT_(OFFLINK_V, n));                                                        \
      offlink_rc_ = 0;                                                                             \
    }                                                                                              \
    offlink_rc_;                                                                                   \
  })
#define OFFLINK_CAT_(a, n) OFFLINK_CAT_I_(a, n)
#define OFFLINK_CAT_I_(a, n) a##n##_
#define OFFLINK_NARGS_(...) OFFLINK_NARGS_I_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define OFFLINK_NARGS_I_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, n, ...) n
/* The k-th argument from the end goes into offlink_a<k>_, so the lists below run n..1. */
#define OFFLINK_D1_(a) __auto_type offlink_a1_ = (a);
#define OFFLINK_D2_(a, ...) __auto_type offlink_a2_ = (a); OFFLINK_D1_(__VA_ARGS__)
#define OFFLINK_D3_(a, ...) __auto_type offlink_a3_ = (a); OFFLINK_D2_(__VA_ARGS__)
#define OFFLINK_D4_(a, ...) __auto_type offlink_a4_ = (a); OFFLINK_D3_(__VA_ARGS__)
#define OFFLINK_D5_(a, ...) __auto_type offlink_a5_ = (a); OFFLINK_D4_(__VA_ARGS__)
#define OFFLINK_D6_(a, ...) __auto_type offlink_a6_ = (a); OFFLINK_D5_(__VA_ARGS__)
#define OFFLINK_D7_(a, ...) __auto_type offlink_a7_ = (a); OFFLINK_D6_(__VA_ARGS__)
#define OFFLINK_D8_(a, ...) __auto_type offlink_a8_ = (a); OFFLINK_D7_(__VA_ARGS__)
#define OFFLINK_D9_(a, ...) __auto_type offlink_a9_ = (a); OFFLINK_D8_(__VA_ARGS__)
#define OFFLINK_D10_(a, ...) __auto_type offlink_a10_ = (a); OFFLINK_D9_(__VA_ARGS__)
#define OFFLINK_D11_(a, ...) __auto_type offlink_a11_ = (a); OFFLINK_D10_(__VA_ARGS__)
#define OFFLINK_D12_(a, ...) __auto_type offlink_a12_ = (a); OFFLINK_D11_(__VA_ARGS__)
#define OFFLINK_P1_ (void *)&offlink_a1_
#define OFFLINK_P2_ (void *)&offlink_a2_, OFFLINK_P1_
#define OFFLINK_P3_ (void *)&offlink_a3_, OFFLINK_P2_
#define OFFLINK_P4_ (void *)&offlink_a4_, OFFLINK_P3_
#define OFFLINK_P5_ (void *)&offlink_a5_, OFFLINK_P4_
#define OFFLINK_P6_ (void *)&offlink_a6_, OFFLINK_P5_
#define OFFLINK_P7_ (void *)&offlink_a7_, OFFLINK_P6_
#define OFFLINK_P8_ (void *)&offlink_a8_, OFFLINK_P7_
#define OFFLINK_P9_ (void *)&offlink_a9_, OFFLINK_P8_
#define OFFLINK_P10_ (void *)&offlink_a10_, OFFLINK_P9_
#define OFFLINK_P11_ (void *)&offlink_a11_, OFFLINK_P10_
#define OFFLINK_P12_ (void *)&offlink_a12_, OFFLINK_P11_
#define OFFLINK_V1_ offlink_a1_
#define OFFLINK_V2_ offlink_a2_, OFFLINK_V1_
#define OFFLINK_V3_ offlink_a3_, OFFLINK_V2_
#define OFFLINK_V4_ offlink_a4_, OFFLINK_V3_
#define OFFLINK_V5_ offlink_a5_, OFFLINK_V4_
#define OFFLINK_V6_ offlink_a6_, OFFLINK_V5_
#define OFFLINK_V7_ offlink_a7_, OFFLINK_V6_
#define OFFLINK_V8_ offlink_a8_, OFFLINK_V7_
#define OFFLINK_V9_ offlink_a9_, OFFLINK_V8_
#define OFFLINK_V10_ offlink_a10_, OFFLINK_V9_
#define OFFLINK_V11_ offlink_a11_, OFFLINK_V10_
#define OFFLINK_V12_ offlink_a12_, OFFLINK_V11_
#endif
#endif /* OFFLINK_H */
