/* offlink runtime: the API (offlink.h) over the registry's set-up modules, and the errors it
 * reports (offlink_last_error, OFFLINK_MANDATORY).
 *
 * The runtime's files, by job: runtime_registry.c (the module records, registered from each
 * module's constructor, set up on first use), runtime_setup.c (setting a module up: the
 * table and its rows checked, a target chosen, its image loaded), runtime_sizes.c and
 * runtime_aliases.c (two of the row checks), runtime_dynsyms.c (a loaded module's dynamic
 * symbols by name), runtime_env.c (the environment), and the image loaders
 * (runtime_loader.h): runtime_so.c, runtime_cuda.c.  table.c parses the table. */

#define _GNU_SOURCE
#include "offlink.h"
#include "runtime_internal.h"

#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Thread_local const char *last_error;
static _Thread_local char error_buf[OFL_ERROR_SIZE];
static _Thread_local int exiting;
static atomic_int exit_started;

/* ---- errors ----------------------------------------------------------------------- */

/* Messages are one line, whatever bytes a damaged table puts into the names in them. */
void ofl_one_line(char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f)
      *s = '?';
}

/* A module's message as this thread's error: copied, since unregistering frees the module. */
static void keep_error(const char *msg) {
  memcpy(error_buf, msg, strlen(msg) + 1); /* both OFL_ERROR_SIZE, one line already */
  last_error = error_buf;
}

void ofl_set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error_buf, sizeof error_buf, fmt, ap);
  va_end(ap);
  ofl_one_line(error_buf);
  last_error = error_buf;
}

static int mandatory(void) {
  const char *v = ofl_getenv("OFFLINK_MANDATORY");
  return v && *v && strcmp(v, "0") != 0;
}

/* OFFLINK_MANDATORY: a module that cannot use a target ends the program, as libgomp does
 * for OMP_TARGET_OFFLOAD=MANDATORY; the only exit() in the library.  exit() once only:
 * concurrent exit() is undefined, and a destructor that comes back here on the exiting
 * thread just runs on the host. */
static void fatal(const char *msg) {
  if (exiting)
    return;
  if (atomic_exchange(&exit_started, 1))
    for (;;)
      pause();
  exiting = 1;
  fprintf(stderr, "offlink: error: %s\n", msg);
  fflush(stderr);
  exit(1);
}

/* The module if it runs on a target; NULL to run on the host, with the reason recorded. */
static struct module *usable(const void *table) {
  struct module *m = ofl_module_of(table);
  if (!m || m->loader)
    return m;
  if (m->error[0]) {
    keep_error(m->error);
    if (mandatory())
      fatal(m->error);
  }
  return NULL;
}

/* ---- the API ------------------------------------------------------------------------ */

/* The row whose host object contains p, and that object's start in *base; or -1. */
static int64_t find_row(const struct module *m, uintptr_t p, uintptr_t *base) {
  int64_t row = ofl_table_find(&m->t, (int64_t)(p - (uintptr_t)m->table));
  if (row >= 0) {
    *base = (uintptr_t)m->table + (uintptr_t)m->entries[row].host_offset;
    return row;
  }
  size_t lo = 0, hi = m->n_aliases; /* the last alias at or below p */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->aliases[mid].host <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0 || p - m->aliases[lo - 1].host >= m->entries[m->aliases[lo - 1].row].size)
    return -1;
  *base = m->aliases[lo - 1].host;
  return m->aliases[lo - 1].row;
}

/* The error for a pointer that is no row: where it is as a module and an offset, as glibc's
 * backtrace_symbols prints it (`prog(+0x1234)`: the address less the module's load bias,
 * i.e. st_value, which `offlink inspect MODULE --address +0x1234` reads), and the nearest
 * exported symbol, as dladdr finds them.  A stack or heap pointer is in no module. */
static void not_offered_error(const struct module *m, const void *host_ptr) {
  Dl_info info;
  struct link_map *map = NULL;
  if (!dladdr1(host_ptr, &info, (void **)&map, RTLD_DL_LINKMAP) || !info.dli_fname || !map) {
    ofl_set_error("%s: %p is not an offered function or variable (OFFLINK_MANDATORY)", m->where,
                  host_ptr);
    return;
  }
  const char *module = info.dli_fname[0] ? info.dli_fname : m->where; /* "": the program */
  unsigned long long offset = (unsigned long long)((uintptr_t)host_ptr - (uintptr_t)map->l_addr);
  char near[320] = "";
  if (info.dli_sname && info.dli_saddr)
    snprintf(near, sizeof near, ", nearest symbol '%s'+%#llx", info.dli_sname,
             (unsigned long long)((uintptr_t)host_ptr - (uintptr_t)info.dli_saddr));
  ofl_set_error("%s: %p (%s(+%#llx)%s) is not an offered function or variable "
                "(OFFLINK_MANDATORY); `offlink inspect %s --address +%#llx` says what is there",
                m->where, host_ptr, module, offset, near, module, offset);
}

void *offlink_translate(const void *table, const void *host_ptr) {
  struct module *m = usable(table);
  if (!m)
    return (void *)host_ptr;
  uintptr_t base;
  int64_t row = find_row(m, (uintptr_t)host_ptr, &base);
  if (row < 0 || m->entries[row].target == 0) {
    if (mandatory()) { /* the program would run host code: an error, as for a whole module */
      ofl_symbol s;
      if (row >= 0)
        ofl_table_symbol(&m->t, (uint32_t)row, &s);
      if (row >= 0)
        ofl_set_error("%s: '%s' is not in the image of target %s (OFFLINK_MANDATORY)", m->where,
                      s.name, m->target_name);
      else
        not_offered_error(m, host_ptr);
      fatal(last_error);
    }
    return (void *)host_ptr;
  }
  return (void *)(m->entries[row].target + ((uintptr_t)host_ptr - base));
}

static int update(const void *table, const void *host_ptr, size_t size, int whole, int to_target) {
  struct module *m = usable(table);
  if (!m)
    return 0; /* on the host, the data is already where it is used */
  uintptr_t base;
  int64_t row = find_row(m, (uintptr_t)host_ptr, &base);
  if (row < 0) {
    ofl_set_error("%p is not inside an offered variable of %s", host_ptr, m->where);
    return -1;
  }
  ofl_symbol s;
  ofl_table_symbol(&m->t, (uint32_t)row, &s);
  if (s.kind != OFL_SYM_VARIABLE && s.kind != OFL_SYM_LINK_VARIABLE) {
    ofl_set_error("'%s' is a function, not a variable", s.name);
    return -1;
  }
  const struct entry *e = &m->entries[row];
  if (e->target == 0) {
    ofl_set_error("'%s' is not in the image of target %s", s.name, m->target_name);
    return -1;
  }
  uint64_t start = (uintptr_t)host_ptr - base; /* < e->size: find_row checked */
  if (whole) {
    start = 0;
    size = e->size;
  } else if (size > e->size - start) {
    ofl_set_error("%zu bytes at %p run past the end of '%s' (%llu bytes)", size, host_ptr, s.name,
                  (unsigned long long)e->size);
    return -1;
  }
  if (!to_target && e->readonly) {
    ofl_set_error("'%s' lies in read-only memory of %s: nothing is copied back into it", s.name,
                  m->where);
    return -1;
  }
  if (size == 0)
    return 0;
  void *host = (void *)(e->host + start);
  if (to_target)
    return m->loader->copy_to(m, e->target + start, host, size);
  return m->loader->copy_from(m, host, e->target + start, size);
}

int offlink_update_to(const void *table, const void *host_var) {
  return update(table, host_var, 0, 1, 1);
}

int offlink_update_from(const void *table, void *host_var) {
  return update(table, host_var, 0, 1, 0);
}

int offlink_update_to_range(const void *table, const void *host_ptr, size_t size) {
  return update(table, host_ptr, size, 0, 1);
}

int offlink_update_from_range(const void *table, void *host_ptr, size_t size) {
  return update(table, host_ptr, size, 0, 0);
}

void *offlink_lookup(const void *table, const char *name) {
  struct module *m = usable(table);
  if (!m || !name)
    return NULL;
  int64_t row = ofl_table_lookup(&m->t, name, strlen(name));
  if (row < 0) {
    ofl_set_error("no offered symbol '%s' in %s", name, m->where);
    return NULL;
  }
  if (m->entries[row].target == 0)
    ofl_set_error("'%s' is not in the image of target %s", name, m->target_name);
  return (void *)m->entries[row].target;
}

int offlink_launch(const void *table, const void *kernel, unsigned grid, unsigned block,
                   size_t shared_bytes, void **args) {
  struct module *m = usable(table);
  if (!m || !m->loader->launch)
    return OFFLINK_ON_HOST;
  uintptr_t base;
  int64_t row = find_row(m, (uintptr_t)kernel, &base);
  ofl_symbol s = {0};
  if (row >= 0)
    ofl_table_symbol(&m->t, (uint32_t)row, &s);
  if (row < 0 || base != (uintptr_t)kernel ||
      (s.kind != OFL_SYM_FUNCTION && s.kind != OFL_SYM_INDIRECT_FUNCTION)) {
    ofl_set_error("%p is not an offered kernel of %s", kernel, m->where);
    return -1;
  }
  if (m->entries[row].target == 0) {
    ofl_set_error("kernel '%s' is not in the image of target %s", s.name, m->target_name);
    return -1;
  }
  return m->loader->launch(m, m->entries[row].target, s.name, grid, block, shared_bytes, args);
}

const char *offlink_target_name(const void *table) {
  struct module *m = usable(table);
  return m ? m->target_name : NULL;
}

const char *offlink_last_error(void) {
  return last_error;
}
