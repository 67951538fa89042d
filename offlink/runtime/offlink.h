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
 * Environment:
 *   OFFLINK_TARGET=NAME    use this target (`host` means x86_64-pc-linux-gnu); `none`: run
 *                          on the host.  Default: the first target that loads.
 *   OFFLINK_MANDATORY=1    a module with a table that cannot run on a target is a hard
 *                          error: "offlink: error: ..." on stderr and exit status 1.
 *
 * Telling the sides apart: the link compiles target code with
 *   -D__OFFLINK_TARGET__="<target name>"   (a string literal, e.g. "x86_64-pc-linux-gnu")
 *   -D__OFFLINK_TARGET_HOST__=1            (only for a target that runs in-process on the
 *                                           host CPU, i.e. a shared-object image)
 * and host code without either.  OFFLINK_IS_TARGET and OFFLINK_SIDE below wrap them.
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

#endif /* __OFFLINK_TARGET__ */

#ifdef __cplusplus
}
#endif
#endif /* OFFLINK_H */
