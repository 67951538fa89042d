/* offlink runtime: one registry of the modules' offload tables, each set up on first use
 * (API and environment: offlink.h; table format: formats/table.md, parsed by table.c).
 *
 * A module record is created once per table and never freed: lookups walk an append-only
 * list with acquire loads and take no lock once the record is ready.  Setting a record up
 * (validate, choose a target, load its image, resolve every row) happens once, under the
 * record's own lock, so one module's slow image load never blocks another's first use.
 *
 * Image kinds are loaded through a small table of loaders (runtime_loader.h); this file has
 * the in-process shared-object loader (target x86_64-pc-linux-gnu), runtime_cuda.c the CUDA
 * one (cubin and fatbin images, through the driver). */

#define _GNU_SOURCE
#include "offlink.h"
#include "runtime_loader.h"
#include "table.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Not in glibc 2.36's headers; the kernel (6.3+) value.  Refused with EINVAL by older
 * kernels (then retried without), required when vm.memfd_noexec=2.  MFD_EXEC never. */
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

#define HOST_TARGET "x86_64-pc-linux-gnu"
#define ERROR_SIZE 512

/* Per row, what translate and update need: kept in one array, filled once at setup. */
struct entry {
  int64_t host_offset; /* from the table */
  uint64_t size;
  uintptr_t host;   /* the object the program uses: the row's own, or its interposer */
  uintptr_t target; /* the row's start in the target's address space; 0: none there */
};

/* A second host address of a row: in a shared library, a variable the executable refers to
 * is copied into the executable (a copy relocation) and the library's code uses that copy;
 * a function's address taken in a non-PIE executable is its PLT entry there. */
struct alias {
  uintptr_t host;
  uint32_t row;
};

enum { MODULE_NEW, MODULE_READY };

struct module {
  /* Key, immutable once published.  total_size and meta_crc32 as read at registration tell
   * a table apart from another module's later loaded at the same address (dlclose). */
  const unsigned char *table;
  uint64_t key_total;
  uint32_t key_crc;
  struct module *next;

  pthread_mutex_t setup_lock;
  atomic_int state;

  /* Written by setup, read-only once state is MODULE_READY. */
  ofl_table t;
  const struct loader *loader; /* NULL: this module runs on the host */
  const char *target_name;
  struct entry *entries; /* n_symbols, allocated at setup */
  struct alias *aliases; /* sorted by host; few, and only in shared libraries */
  uint32_t n_aliases;
  void *loader_data;
  ElfW(Addr) load_base; /* the module's segments, to check that rows point into them */
  const ElfW(Phdr) * phdr;
  ElfW(Half) phnum;
  int is_main;            /* the executable: nothing interposes its symbols */
  char where[256];        /* the module's file, for messages */
  char error[ERROR_SIZE]; /* why it runs on the host; "" when it has no table at all */
};

static _Atomic(struct module *) modules;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

static _Thread_local const char *last_error;
static _Thread_local char error_buf[ERROR_SIZE];
static _Thread_local struct module *setting_up; /* re-entry from an image's constructor */
static _Thread_local int exiting;
static atomic_int exit_started;

static const struct loader *loader_for(uint16_t kind);

static const char *kind_name(uint16_t kind) {
  static const char *const names[] = {"?", "shared-object", "cubin", "fatbin", "ptx", "nvptx-none"};
  return kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

/* ---- errors ----------------------------------------------------------------------- */

/* Messages are one line, whatever bytes a damaged table puts into the names in them. */
static void one_line(char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f)
      *s = '?';
}

static void vset_error(const char *fmt, va_list ap) {
  vsnprintf(error_buf, sizeof error_buf, fmt, ap);
  one_line(error_buf);
  last_error = error_buf;
}

static void set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vset_error(fmt, ap);
  va_end(ap);
}

/* Add a reason to the module's message; several targets may each fail, "; " between. */
static void vnote(struct module *m, const char *fmt, va_list ap) {
  size_t used = strlen(m->error);
  if (used && used + 2 < sizeof m->error) {
    memcpy(m->error + used, "; ", 3);
    used += 2;
  }
  vsnprintf(m->error + used, sizeof m->error - used, fmt, ap);
  one_line(m->error + used);
}

static void note(struct module *m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vnote(m, fmt, ap);
  va_end(ap);
}

/* For loaders in other files (runtime_loader.h). */
void ofl_note(struct module *m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vnote(m, fmt, ap);
  va_end(ap);
}

void ofl_set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vset_error(fmt, ap);
  va_end(ap);
}

void *ofl_loader_data(struct module *m) { return m->loader_data; }
void ofl_set_loader_data(struct module *m, void *data) { m->loader_data = data; }
const char *ofl_module_where(const struct module *m) { return m->where; }

static int mandatory(void) {
  const char *v = getenv("OFFLINK_MANDATORY");
  return v && *v && strcmp(v, "0") != 0;
}

/* OFFLINK_MANDATORY: a module that cannot use a target ends the program, as libgomp does
 * for OMP_TARGET_OFFLOAD=MANDATORY.  exit() once only: concurrent exit() is undefined, and
 * a destructor that comes back here on the exiting thread just runs on the host. */
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

/* ---- where the table lives ---------------------------------------------------------- */

struct locate {
  uintptr_t addr;
  uint64_t avail; /* readable bytes from addr to the end of its segment */
  struct module *m;
};

static int locate_cb(struct dl_phdr_info *info, size_t size, void *data) {
  struct locate *l = data;
  (void)size;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R))
      continue;
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (l->addr >= start && l->addr - start < ph->p_memsz) {
      l->avail = ph->p_memsz - (l->addr - start);
      l->m->load_base = info->dlpi_addr;
      l->m->phdr = info->dlpi_phdr;
      l->m->phnum = info->dlpi_phnum;
      l->m->is_main = !*info->dlpi_name;
      snprintf(l->m->where, sizeof l->m->where, "%s",
               *info->dlpi_name ? info->dlpi_name : program_invocation_name);
      return 1;
    }
  }
  return 0;
}

/* Bound every read of the table by its loaded segment, so that a corrupt total_size or
 * meta_size cannot make the checksum walk off the mapping. */
static uint64_t locate(struct module *m) {
  struct locate l = {(uintptr_t)m->table, 0, m};
  snprintf(m->where, sizeof m->where, "%s", program_invocation_name);
  dl_iterate_phdr(locate_cb, &l);
  return l.avail;
}

/* Whether a row's host bytes lie in one loaded segment of the module.  The checksum catches
 * accidents; this keeps a deliberately forged table from aiming copies elsewhere. */
static int row_in_module(const struct module *m, const ofl_symbol *s) {
  uintptr_t addr = (uintptr_t)m->table + (uintptr_t)s->host_offset;
  for (ElfW(Half) i = 0; i < m->phnum; i++) {
    const ElfW(Phdr) *ph = &m->phdr[i];
    uintptr_t start = m->load_base + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && addr >= start && addr - start < ph->p_memsz &&
        s->size <= ph->p_memsz - (addr - start))
      return 1;
  }
  return 0;
}

/* ---- choosing and loading a target ---------------------------------------------------- */

static int use_target(struct module *m, uint32_t index) {
  ofl_target tg;
  ofl_table_target(&m->t, index, &tg);
  const struct loader *ld = loader_for(tg.kind);
  if (!ld) {
    note(m, "%s: target '%.*s': this runtime cannot load %s images", m->where, (int)tg.name_len,
         tg.name, kind_name(tg.kind));
    return -1;
  }
  if (ofl_table_check_image(&m->t, index) != OFL_OK) {
    note(m, "%s: target '%.*s': %s (%s)", m->where, (int)tg.name_len, tg.name,
         ofl_status_message(OFL_BAD_IMAGE_CHECKSUM), ofl_status_code(OFL_BAD_IMAGE_CHECKSUM));
    return -1;
  }
  if (ld->load(m, &tg) != 0)
    return -1;
  for (uint32_t row = 0; row < m->t.n_symbols; row++) {
    ofl_symbol s;
    ofl_table_symbol(&m->t, row, &s);
    int found = ld->resolve(m, &s, &m->entries[row].target);
    if (found == OFL_RESOLVE_ABSENT)
      m->entries[row].target = 0;
    else if (found != 0) {
      ld->unload(m);
      return -1;
    }
  }
  m->target_name = tg.name; /* NUL-terminated: table.c checked it */
  m->loader = ld;
  m->error[0] = '\0'; /* an earlier target's failure no longer matters */
  return 0;
}

static void choose_target(struct module *m) {
  const char *want = getenv("OFFLINK_TARGET");
  if (want && *want) {
    if (strcmp(want, "none") == 0) {
      note(m, "%s: OFFLINK_TARGET=none: running on the host", m->where);
      return;
    }
    int64_t i = ofl_table_target_index(&m->t, want, strlen(want));
    if (i < 0 && strcmp(want, "host") == 0)
      i = ofl_table_target_index(&m->t, HOST_TARGET, strlen(HOST_TARGET));
    if (i < 0)
      note(m, "%s: OFFLINK_TARGET=%s: no such target in the offload table", m->where, want);
    else
      use_target(m, (uint32_t)i);
    return;
  }
  if (m->t.n_targets == 0)
    note(m, "%s: the offload table has no targets", m->where);
  for (uint32_t i = 0; i < m->t.n_targets; i++)
    if (use_target(m, i) == 0)
      return;
}

/* Whether the module binds its own symbols first (-Bsymbolic): then nothing interposes. */
static int is_symbolic(const struct module *m) {
  for (ElfW(Half) i = 0; i < m->phnum; i++) {
    const ElfW(Phdr) *ph = &m->phdr[i];
    if (ph->p_type != PT_DYNAMIC)
      continue;
    const ElfW(Dyn) *d = (const ElfW(Dyn) *)(m->load_base + ph->p_vaddr);
    for (size_t k = 0; k < ph->p_memsz / sizeof *d && d[k].d_tag != DT_NULL; k++)
      if (d[k].d_tag == DT_SYMBOLIC || (d[k].d_tag == DT_FLAGS && (d[k].d_un.d_val & DF_SYMBOLIC)))
        return 1;
  }
  return 0;
}

static int alias_cmp(const void *a, const void *b) {
  uintptr_t x = ((const struct alias *)a)->host, y = ((const struct alias *)b)->host;
  return (x > y) - (x < y);
}

/* For a shared library, the address the program really uses for each exported row: what the
 * dynamic linker binds the name to (dlsym(RTLD_DEFAULT) looks it up the same way).  Where
 * that is another object, it becomes the row's host object and a second key for translate. */
static int find_aliases(struct module *m) {
  if (m->is_main || m->t.n_symbols == 0 || is_symbolic(m))
    return 0;
  for (uint32_t row = 0; row < m->t.n_symbols; row++) {
    ofl_symbol s;
    ofl_table_symbol(&m->t, row, &s);
    struct entry *e = &m->entries[row];
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    /* Only a default-visibility dynamic symbol of this very object can be interposed. */
    if (!dladdr1((void *)e->host, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym ||
        info.dli_saddr != (void *)e->host || !info.dli_sname || strcmp(info.dli_sname, s.name) ||
        ELF64_ST_VISIBILITY(sym->st_other) != STV_DEFAULT)
      continue;
    uintptr_t live = (uintptr_t)dlsym(RTLD_DEFAULT, s.name);
    if (!live || live == e->host)
      continue;
    int variable = s.kind == OFL_SYM_VARIABLE || s.kind == OFL_SYM_LINK_VARIABLE;
    const ElfW(Sym) *other = NULL;
    if (variable && (!dladdr1((void *)live, &info, (void **)&other, RTLD_DL_SYMENT) || !other ||
                     info.dli_saddr != (void *)live || other->st_size != s.size))
      continue; /* not a copy of this variable: leave the row as the table says */
    if (!m->aliases) {
      m->aliases = calloc(m->t.n_symbols, sizeof *m->aliases);
      if (!m->aliases) {
        note(m, "%s: out of memory", m->where);
        return -1;
      }
    }
    m->aliases[m->n_aliases].host = live;
    m->aliases[m->n_aliases].row = row;
    m->n_aliases++;
    if (variable)
      e->host = live; /* the library's own copy is no longer what anyone reads */
  }
  if (m->n_aliases)
    qsort(m->aliases, m->n_aliases, sizeof *m->aliases, alias_cmp);
  return 0;
}

static void setup(struct module *m) {
  uint64_t avail = locate(m);
  if (avail == 0) {
    note(m, "%p is not inside a loaded module (not an offload table)", (void *)m->table);
    return;
  }
  /* The magic first, before anything else is read as a table. */
  if (avail < sizeof OFL_MAGIC - 1 || memcmp(m->table, OFL_MAGIC, sizeof OFL_MAGIC - 1) != 0) {
    /* gold resolves an undefined weak hidden symbol to the module's load base: the ELF
     * header is there, and the module simply has no table. */
    if (avail >= SELFMAG && memcmp(m->table, ELFMAG, SELFMAG) == 0)
      return;
    note(m, "%s: offload table: %s (%s)", m->where, ofl_status_message(OFL_BAD_MAGIC),
         ofl_status_code(OFL_BAD_MAGIC));
    return;
  }
  int status = ofl_table_open(&m->t, m->table, avail);
  if (status != OFL_OK) {
    note(m, "%s: offload table: %s (%s)", m->where, ofl_status_message(status),
         ofl_status_code(status));
    return;
  }
  /* One allocation for all rows, here and never on the lookup path. */
  m->entries = calloc(m->t.n_symbols ? m->t.n_symbols : 1, sizeof *m->entries);
  if (!m->entries) {
    note(m, "%s: out of memory", m->where);
    return;
  }
  for (uint32_t row = 0; row < m->t.n_symbols; row++) {
    ofl_symbol s;
    ofl_table_symbol(&m->t, row, &s);
    if (!row_in_module(m, &s)) {
      note(m, "%s: offload table: '%s' lies outside the module", m->where, s.name);
      return;
    }
    m->entries[row].host_offset = s.host_offset;
    m->entries[row].size = s.size;
    m->entries[row].host = (uintptr_t)m->table + (uintptr_t)s.host_offset;
  }
  if (find_aliases(m) != 0)
    return;
  choose_target(m);
}

/* ---- the registry ------------------------------------------------------------------- */

static struct module *find_record(const unsigned char *table, uint64_t total, uint32_t crc) {
  for (struct module *m = atomic_load_explicit(&modules, memory_order_acquire); m; m = m->next)
    if (m->table == table && m->key_total == total && m->key_crc == crc)
      return m;
  return NULL;
}

/* The module record of `table`, set up; NULL when there is none (no table, out of memory,
 * or this thread is setting it up right now and came back through an image constructor). */
static struct module *module_of(const void *table) {
  if (!table)
    return NULL;
  const unsigned char *p = table;
  /* Safe to read before the magic check: a table is at least 96 bytes, and what gold gives
   * for a missing one is an ELF header (64 bytes). */
  uint64_t total;
  uint32_t crc;
  memcpy(&total, p + 16, sizeof total);
  memcpy(&crc, p + 32, sizeof crc);

  struct module *m = find_record(p, total, crc);
  if (!m) {
    pthread_mutex_lock(&registry_lock);
    m = find_record(p, total, crc);
    if (!m && (m = calloc(1, sizeof *m)) != NULL) {
      m->table = p;
      m->key_total = total;
      m->key_crc = crc;
      pthread_mutex_init(&m->setup_lock, NULL);
      m->next = atomic_load_explicit(&modules, memory_order_relaxed);
      atomic_store_explicit(&modules, m, memory_order_release);
    }
    pthread_mutex_unlock(&registry_lock);
    if (!m) {
      set_error("out of memory");
      return NULL;
    }
  }
  if (atomic_load_explicit(&m->state, memory_order_acquire) == MODULE_READY)
    return m;
  if (setting_up == m)
    return NULL;
  pthread_mutex_lock(&m->setup_lock);
  if (atomic_load_explicit(&m->state, memory_order_relaxed) != MODULE_READY) {
    struct module *outer = setting_up;
    setting_up = m;
    setup(m);
    setting_up = outer;
    atomic_store_explicit(&m->state, MODULE_READY, memory_order_release);
  }
  pthread_mutex_unlock(&m->setup_lock);
  return m;
}

/* The module if it runs on a target; NULL to run on the host, with the reason recorded. */
static struct module *usable(const void *table) {
  struct module *m = module_of(table);
  if (!m || m->loader)
    return m;
  if (m->error[0]) {
    last_error = m->error;
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

void *offlink_translate(const void *table, const void *host_ptr) {
  struct module *m = usable(table);
  if (!m)
    return (void *)host_ptr;
  uintptr_t base;
  int64_t row = find_row(m, (uintptr_t)host_ptr, &base);
  if (row < 0 || m->entries[row].target == 0)
    return (void *)host_ptr;
  return (void *)(m->entries[row].target + ((uintptr_t)host_ptr - base));
}

static int update(const void *table, const void *host_ptr, size_t size, int whole, int to_target) {
  struct module *m = usable(table);
  if (!m)
    return 0; /* on the host, the data is already where it is used */
  uintptr_t base;
  int64_t row = find_row(m, (uintptr_t)host_ptr, &base);
  if (row < 0) {
    set_error("%p is not inside an offered variable of %s", host_ptr, m->where);
    return -1;
  }
  ofl_symbol s;
  ofl_table_symbol(&m->t, (uint32_t)row, &s);
  if (s.kind != OFL_SYM_VARIABLE && s.kind != OFL_SYM_LINK_VARIABLE) {
    set_error("'%s' is a function, not a variable", s.name);
    return -1;
  }
  const struct entry *e = &m->entries[row];
  if (e->target == 0) {
    set_error("'%s' is not in the image of target %s", s.name, m->target_name);
    return -1;
  }
  uint64_t start = (uintptr_t)host_ptr - base; /* < e->size: find_row checked */
  if (whole) {
    start = 0;
    size = e->size;
  } else if (size > e->size - start) {
    set_error("%zu bytes at %p run past the end of '%s' (%llu bytes)", size, host_ptr, s.name,
              (unsigned long long)e->size);
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
    set_error("no offered symbol '%s' in %s", name, m->where);
    return NULL;
  }
  if (m->entries[row].target == 0)
    set_error("'%s' is not in the image of target %s", name, m->target_name);
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
    set_error("%p is not an offered kernel of %s", kernel, m->where);
    return -1;
  }
  if (m->entries[row].target == 0) {
    set_error("kernel '%s' is not in the image of target %s", s.name, m->target_name);
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

/* ---- loader: shared object, run in-process ------------------------------------------- */

struct so_image {
  void *handle;
  struct link_map *map;
  /* The memfd, open as long as the image is loaded: glibc matches loaded objects by path, so
   * a reused /proc/self/fd/N would hand back the first image again.  -1: a temporary file. */
  int fd;
};

static int write_all(int fd, const unsigned char *p, uint64_t n) {
  while (n) {
    ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : (size_t)n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += w;
    n -= (uint64_t)w;
  }
  return 0;
}

/* An anonymous in-memory file holding the image, or -1 with errno. */
static int memfd_image(const ofl_target *tg, char *name, size_t name_size) {
  snprintf(name, name_size, "offlink:%.*s", (int)tg->name_len, tg->name);
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_NOEXEC_SEAL);
  if (fd < 0 && errno == EINVAL) /* a kernel before 6.3 */
    fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0)
    return -1;
  if (write_all(fd, tg->image, tg->image_size) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

static int so_load(struct module *m, const ofl_target *tg) {
  char name[64], path[4096], first[ERROR_SIZE] = "";
  struct so_image *img = calloc(1, sizeof *img);
  if (!img) {
    note(m, "%s: out of memory", m->where);
    return -1;
  }
  img->fd = memfd_image(tg, name, sizeof name);
  if (img->fd >= 0) {
    snprintf(path, sizeof path, "/proc/self/fd/%d", img->fd);
    img->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!img->handle) {
      snprintf(first, sizeof first, "%s", dlerror());
      close(img->fd);
      img->fd = -1;
    }
  } else
    snprintf(first, sizeof first, "memfd_create: %s", strerror(errno));

  if (!img->handle) {
    /* No memfd (old kernel, seccomp, policy) or it could not be mapped executable: a
     * temporary file, removed once loaded. */
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
      dir = "/tmp";
    snprintf(path, sizeof path, "%s/offlink-image-XXXXXX", dir);
    int fd = mkostemp(path, O_CLOEXEC);
    const char *why = NULL;
    if (fd < 0)
      why = strerror(errno);
    else {
      if (write_all(fd, tg->image, tg->image_size) != 0)
        why = strerror(errno);
      close(fd);
      if (!why && !(img->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
        why = dlerror();
      unlink(path);
    }
    if (why) {
      struct statvfs vfs;
      int noexec = statvfs(dir, &vfs) == 0 && (vfs.f_flag & ST_NOEXEC);
      note(m, "%s: target '%.*s': cannot load the image: %s; from %s: %s%s", m->where,
           (int)tg->name_len, tg->name, first, dir, why,
           noexec ? " (mounted noexec: set TMPDIR to another directory)" : "");
      free(img);
      return -1;
    }
  }
  if (dlinfo(img->handle, RTLD_DI_LINKMAP, &img->map) != 0)
    img->map = NULL;
  m->loader_data = img;
  return 0;
}

static int so_resolve(struct module *m, const ofl_symbol *s, uintptr_t *out) {
  struct so_image *img = m->loader_data;
  dlerror();
  void *addr = dlsym(img->handle, s->name);
  if (!addr) {
    note(m, "%s: '%s' is not defined in the image", m->where, s->name);
    return -1;
  }
  /* dlsym also searches the image's dependencies; a row must be the image's own. */
  Dl_info info;
  struct link_map *owner = NULL;
  if (img->map && dladdr1(addr, &info, (void **)&owner, RTLD_DL_LINKMAP) && owner != img->map) {
    note(m, "%s: '%s' is not defined in the image (found in %s)", m->where, s->name,
         owner && owner->l_name[0] ? owner->l_name : "another module");
    return -1;
  }
  /* A copy of the host's size must fit the image's variable. */
  const ElfW(Sym) *sym = NULL;
  if ((s->kind == OFL_SYM_VARIABLE || s->kind == OFL_SYM_LINK_VARIABLE) &&
      dladdr1(addr, &info, (void **)&sym, RTLD_DL_SYMENT) && sym && info.dli_saddr == addr &&
      sym->st_size != s->size) {
    note(m, "%s: variable '%s' is %llu bytes on the host but %llu in the image", m->where, s->name,
         (unsigned long long)s->size, (unsigned long long)sym->st_size);
    return -1;
  }
  *out = (uintptr_t)addr;
  return 0;
}

static int so_copy_to(struct module *m, uintptr_t dst, const void *src, size_t n) {
  (void)m;
  memmove((void *)dst, src, n);
  return 0;
}

static int so_copy_from(struct module *m, void *dst, uintptr_t src, size_t n) {
  (void)m;
  memmove(dst, (const void *)src, n);
  return 0;
}

static void so_unload(struct module *m) {
  struct so_image *img = m->loader_data;
  if (!img)
    return;
  dlclose(img->handle);
  if (img->fd >= 0)
    close(img->fd);
  free(img);
  m->loader_data = NULL;
}

static const struct loader so_loader = {
    OFL_IMAGE_SHARED_OBJECT, so_load, so_resolve, so_copy_to, so_copy_from, so_unload, NULL,
};

static const struct loader *const loaders[] = {&so_loader, &ofl_cubin_loader, &ofl_fatbin_loader};

static const struct loader *loader_for(uint16_t kind) {
  for (size_t i = 0; i < sizeof loaders / sizeof loaders[0]; i++)
    if (loaders[i]->kind == kind)
      return loaders[i];
  return NULL;
}
