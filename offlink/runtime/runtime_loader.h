/* offlink runtime, private: what an image loader sees of the runtime.
 *
 * Each image kind is loaded through a `struct loader` (runtime_setup.c picks it by the
 * target's image kind).  A loader reaches its module through the accessors below, so the
 * module's layout stays private to the runtime's own files (runtime_internal.h). */
#ifndef OFFLINK_RUNTIME_LOADER_H
#define OFFLINK_RUNTIME_LOADER_H

#include "table.h"

#include <stddef.h>
#include <stdint.h>

struct module;

/* resolve's result for a name the image does not have: the row has no counterpart on this
 * target (a table for several targets has rows that only some images define).  translate
 * leaves such a pointer unchanged; update, lookup and launch of it fail with a message. */
#define OFL_RESOLVE_ABSENT 1

/* A message's size (its NUL included): a module's, and offlink_last_error()'s. */
#define OFL_ERROR_SIZE 512

/* How one image kind is loaded and reached.  Each returns 0 or -1: load and resolve run at
 * setup and ofl_note() why in the module's message, the copies and launch run per call and
 * ofl_set_error().  launch may be NULL (the kind runs nothing by itself: offlink_launch then
 * says "run on the host"). */
struct loader {
  uint16_t kind;
  int (*load)(struct module *m, const ofl_target *tg);
  int (*resolve)(struct module *m, const ofl_symbol *s, uintptr_t *out);
  int (*copy_to)(struct module *m, uintptr_t dst, const void *src, size_t n);
  int (*copy_from)(struct module *m, void *dst, uintptr_t src, size_t n);
  /* After a failed setup, a setup another thread won, or the module's unregistration (its
   * dlclose): nothing uses the image any more.  Called with no runtime lock held. */
  void (*unload)(struct module *m);
  int (*launch)(struct module *m, uintptr_t kernel, const char *name, unsigned grid,
                unsigned block, size_t shared_bytes, void **args);
};

/* The loader's own data for a module (NULL until its load sets it). */
void *ofl_loader_data(struct module *m);
void ofl_set_loader_data(struct module *m, void *data);
/* The module's file, for messages. */
const char *ofl_module_where(const struct module *m);
/* Add a reason to the module's setup message (why it runs on the host). */
void ofl_note(struct module *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An environment variable the runtime reads: read once, with secure_getenv (NULL in a
 * setuid/setgid/setcap program), from a fixed list in runtime_env.c. */
const char *ofl_getenv(const char *name);
/* Set this thread's offlink_last_error(). */
void ofl_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Whether a row of this kind is a variable (else a function). */
static inline int ofl_is_variable(uint16_t kind) {
  return kind == OFL_SYM_VARIABLE || kind == OFL_SYM_LINK_VARIABLE;
}

/* runtime_so.c: a shared object, run in-process. */
extern const struct loader ofl_so_loader;
/* runtime_cuda.c: cubin and fatbin images through the CUDA driver. */
extern const struct loader ofl_cubin_loader;
extern const struct loader ofl_fatbin_loader;

#endif /* OFFLINK_RUNTIME_LOADER_H */
