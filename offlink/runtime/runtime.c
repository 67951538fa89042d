/* offlink runtime: one registry of the modules' offload tables, each set up on first use
 * (API and environment: offlink.h; table format: formats/table.md, parsed by table.c).
 *
 * Every module that links this library registers its own table from a constructor and
 * unregisters it from a destructor (as libomptarget's __tgt_register_lib and
 * __tgt_unregister_lib do), so a dlclose()d library's record and image are freed and a
 * library later loaded at the same address starts afresh.  A table first seen through the
 * API (a module that reaches another module's copy of the runtime) is registered then.
 *
 * Records live in an append-only list walked with acquire loads; a dead record (its module
 * unregistered) is reused.  Setting a module up (validate, choose a target, load its image,
 * resolve every row) builds a private `struct module` with no lock held, and publishes it
 * with one store: the image loaders take the dynamic loader's lock, and a thread that holds
 * that lock (a constructor run by dlopen) may use the same module.  A thread that finds
 * another one setting the module up waits for it a short while, then sets it up itself;
 * the first result published wins and the others are unloaded.
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
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* Not in glibc 2.36's headers; the kernel (6.3+) value.  Refused with EINVAL by older
 * kernels (then retried without), required when vm.memfd_noexec=2.  MFD_EXEC never. */
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

#define HOST_TARGET "x86_64-pc-linux-gnu"
#define ERROR_SIZE 512
/* How long a thread waits for another one's setup of the same module before it sets the
 * module up itself (the other may be blocked on the dynamic loader's lock, held by this one). */
#define SETUP_WAIT_NS 100000000L

/* Per row, what translate and update need: kept in one array, filled once at setup. */
struct entry {
  int64_t host_offset; /* from the table */
  uint64_t size;
  uintptr_t host;   /* the object the program uses: the row's own, or its interposer */
  uintptr_t target; /* the row's start in the target's address space; 0: none there */
  int readonly;     /* a variable in read-only memory: update_from must not write it */
};

/* A second host address of a row: in a shared library, a variable the executable refers to
 * is copied into the executable (a copy relocation) and the library's code uses that copy;
 * a function's address taken in a non-PIE executable is its PLT entry there. */
struct alias {
  uintptr_t host;
  uint32_t row;
};

/* One module's set-up state: built by one thread with no lock held, read-only once
 * published in its record.  Loaders see it as `struct module` (runtime_loader.h). */
struct module {
  const unsigned char *table;
  ofl_table t;
  const struct loader *loader; /* NULL: this module runs on the host */
  const char *target_name;
  struct entry *entries; /* n_symbols */
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

/* A registered table.  `table` NULL: the record is dead (its module unregistered) and may be
 * reused; `generation` changes at each death, so a setup that started before it is dropped. */
struct record {
  _Atomic(const unsigned char *) table;
  struct record *next; /* immutable once published */
  atomic_uint generation;
  _Atomic(struct module *) ready;
  atomic_int setting; /* a thread is setting the module up */
  /* Registered lazily (first seen through the API, no constructor): its key also holds
   * total_size and meta_crc32, to tell it from another module's later loaded there.  Each
   * use reads the key with no lock; it is written under registry_lock. */
  atomic_int lazy;
  _Atomic(uint64_t) key_total;
  _Atomic(uint32_t) key_crc;
  pthread_mutex_t lock; /* guards publishing; never held across the loader */
  pthread_cond_t done;
};

static _Atomic(struct record *) records;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

/* The records this thread is setting up (an image constructor may come back here). */
struct busy {
  const struct record *rec;
  struct busy *outer;
};
static _Thread_local struct busy *setting_up;

static _Thread_local const char *last_error;
static _Thread_local char error_buf[ERROR_SIZE];
static _Thread_local int exiting;
static atomic_int exit_started;
static atomic_int process_exiting; /* exit() has begun: destructors free nothing */

static const struct loader *loader_for(uint16_t kind);

static const char *kind_name(uint16_t kind) {
  static const char *const names[] = {"?", "shared-object", "cubin", "fatbin", "ptx", "nvptx-none",
                                      "amdgcn-amdhsa"};
  return kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

/* ---- the environment: read once, ignored in secure-execution (setuid, setcap) programs -- */

static const char *const env_names[] = {"OFFLINK_TARGET",      "OFFLINK_MANDATORY",
                                        "OFFLINK_LIBCUDA",     "OFFLINK_CUDA_DEVICE",
                                        "OFFLINK_CUDA_SYNC_LAUNCH", "OFFLINK_CUDA_INFO",
                                        "TMPDIR"};
static char *env_values[sizeof env_names / sizeof env_names[0]];
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void note_exit(void) { atomic_store(&process_exiting, 1); }

static void env_read(void) {
  for (size_t i = 0; i < sizeof env_names / sizeof env_names[0]; i++) {
    const char *v = secure_getenv(env_names[i]);
    env_values[i] = v ? strdup(v) : NULL;
  }
  /* Runs before the destructors that exit() runs (the loader's own handler came first). */
  atexit(note_exit);
}

const char *ofl_getenv(const char *name) {
  pthread_once(&env_once, env_read);
  for (size_t i = 0; i < sizeof env_names / sizeof env_names[0]; i++)
    if (strcmp(env_names[i], name) == 0)
      return env_values[i];
  return NULL;
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

/* A module's message as this thread's error: copied, since unregistering frees the module. */
static void keep_error(const char *msg) {
  memcpy(error_buf, msg, strlen(msg) + 1); /* both ERROR_SIZE, one line already */
  last_error = error_buf;
}

static void set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
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

static void note(struct module *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
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
      if (l->m) {
        l->m->load_base = info->dlpi_addr;
        l->m->phdr = info->dlpi_phdr;
        l->m->phnum = info->dlpi_phnum;
        l->m->is_main = !*info->dlpi_name;
        snprintf(l->m->where, sizeof l->m->where, "%s",
                 *info->dlpi_name ? info->dlpi_name : program_invocation_name);
      }
      return 1;
    }
  }
  return 0;
}

/* Readable bytes from `addr` to the end of the loaded segment it lies in (0: none), and the
 * module's segments into *m when m is not NULL.  Every read of a table is bounded by it, so
 * that a corrupt total_size or meta_size cannot make the checksum walk off the mapping. */
static uint64_t locate(const void *addr, struct module *m) {
  struct locate l = {(uintptr_t)addr, 0, m};
  if (m)
    snprintf(m->where, sizeof m->where, "%s", program_invocation_name);
  dl_iterate_phdr(locate_cb, &l);
  return l.avail;
}

static int is_variable(uint16_t kind) {
  return kind == OFL_SYM_VARIABLE || kind == OFL_SYM_LINK_VARIABLE;
}

/* Where a row's host bytes lie: -1 (with *why) outside any one loaded segment of the module,
 * or a function outside its code; 1 for a variable in read-only memory (a read-only segment
 * or the RELRO range: const data), which translate and update_to may use but update_from
 * must not write; 0 otherwise.  The checksum catches accidents; this keeps a deliberately
 * forged table from aiming copies or calls elsewhere. */
static int row_place(const struct module *m, const ofl_symbol *s, const char **why) {
  uintptr_t addr = (uintptr_t)m->table + (uintptr_t)s->host_offset;
  int variable = is_variable(s->kind), relro = 0;
  for (ElfW(Half) i = 0; i < m->phnum; i++) {
    const ElfW(Phdr) *ph = &m->phdr[i];
    if (ph->p_type == PT_GNU_RELRO && addr - (m->load_base + ph->p_vaddr) < ph->p_memsz)
      relro = 1;
  }
  for (ElfW(Half) i = 0; i < m->phnum; i++) {
    const ElfW(Phdr) *ph = &m->phdr[i];
    uintptr_t start = m->load_base + ph->p_vaddr;
    if (ph->p_type != PT_LOAD || addr < start || addr - start >= ph->p_memsz ||
        s->size > ph->p_memsz - (addr - start))
      continue;
    if (!variable && !(ph->p_flags & PF_X)) {
      *why = "is a function outside the module's code";
      return -1;
    }
    return variable && (relro || !(ph->p_flags & PF_W));
  }
  *why = "lies outside the module";
  return -1;
}

/* ---- a loaded module's own dynamic symbols, looked up by name through its hash table ---- */

struct dynsyms {
  uintptr_t base;
  const ElfW(Sym) * sym;
  const char *str;
  size_t strsz;
  const uint32_t *gnu;  /* DT_GNU_HASH */
  const uint32_t *sysv; /* DT_HASH */
  const ElfW(Half) * versym;
};

/* glibc relocates these entries of a writable .dynamic in place; a read-only one (and other
 * loaders) keeps the link-time address. */
static uintptr_t dyn_ptr(uintptr_t base, ElfW(Addr) p) { return base && p < base ? base + p : p; }

static int dynsyms_open(struct dynsyms *d, uintptr_t base, const ElfW(Dyn) * dyn) {
  memset(d, 0, sizeof *d);
  d->base = base;
  for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
    switch (dyn->d_tag) {
    case DT_SYMTAB:
      d->sym = (const ElfW(Sym) *)dyn_ptr(base, dyn->d_un.d_ptr);
      break;
    case DT_STRTAB:
      d->str = (const char *)dyn_ptr(base, dyn->d_un.d_ptr);
      break;
    case DT_STRSZ:
      d->strsz = dyn->d_un.d_val;
      break;
    case DT_GNU_HASH:
      d->gnu = (const uint32_t *)dyn_ptr(base, dyn->d_un.d_ptr);
      break;
    case DT_HASH:
      d->sysv = (const uint32_t *)dyn_ptr(base, dyn->d_un.d_ptr);
      break;
    case DT_VERSYM:
      d->versym = (const ElfW(Half) *)dyn_ptr(base, dyn->d_un.d_ptr);
      break;
    }
  }
  return d->sym && d->str && (d->gnu || d->sysv) ? 0 : -1;
}

static int dynsyms_of_module(struct dynsyms *d, uintptr_t base, const ElfW(Phdr) * phdr,
                             ElfW(Half) phnum) {
  for (ElfW(Half) i = 0; i < phnum; i++)
    if (phdr[i].p_type == PT_DYNAMIC)
      return dynsyms_open(d, base, (const ElfW(Dyn) *)(base + phdr[i].p_vaddr));
  return -1;
}

static int dynsym_is(const struct dynsyms *d, uint32_t i, const char *name) {
  if (d->versym && (d->versym[i] & 0x8000)) /* a hidden (non-default) version */
    return 0;
  return d->sym[i].st_name < d->strsz && strcmp(d->str + d->sym[i].st_name, name) == 0;
}

/* The symbol `name` of this module (defined or not), or NULL: one hash-table probe. */
static const ElfW(Sym) * dynsyms_find(const struct dynsyms *d, const char *name) {
  const unsigned char *p = (const unsigned char *)name;
  if (d->gnu) {
    uint32_t h = 5381;
    for (; *p; p++)
      h = h * 33 + *p;
    uint32_t nbuckets = d->gnu[0], symoffset = d->gnu[1], bloom_size = d->gnu[2];
    if (nbuckets == 0)
      return NULL;
    const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(d->gnu + 4) + bloom_size);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t i = buckets[h % nbuckets];
    if (i < symoffset)
      return NULL;
    for (;; i++) {
      uint32_t h2 = chain[i - symoffset];
      if ((h | 1) == (h2 | 1) && dynsym_is(d, i, name))
        return &d->sym[i];
      if (h2 & 1)
        return NULL;
    }
  }
  uint32_t h = 0, g;
  for (; *p; p++) {
    h = (h << 4) + *p;
    g = h & 0xf0000000u;
    h ^= g >> 24;
    h &= ~g;
  }
  uint32_t nbucket = d->sysv[0], nchain = d->sysv[1];
  if (nbucket == 0)
    return NULL;
  const uint32_t *chain = d->sysv + 2 + nbucket;
  for (uint32_t i = d->sysv[2 + h % nbucket]; i && i < nchain; i = chain[i])
    if (dynsym_is(d, i, name))
      return &d->sym[i];
  return NULL;
}

/* The number of dynamic symbols (the hash tables are the only place that says). */
static uint32_t dynsyms_count(const struct dynsyms *d) {
  if (!d->gnu)
    return d->sysv[1];
  uint32_t nbuckets = d->gnu[0], symoffset = d->gnu[1], bloom_size = d->gnu[2], last = 0;
  const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(d->gnu + 4) + bloom_size);
  const uint32_t *chain = buckets + nbuckets;
  for (uint32_t b = 0; b < nbuckets; b++)
    if (buckets[b] > last)
      last = buckets[b];
  if (last < symoffset)
    return symoffset;
  while (!(chain[last - symoffset] & 1))
    last++;
  return last + 1;
}

/* ---- the host objects' sizes: no copy larger than the object the row points at ---------- */

/* Address -> the largest st_size of an object symbol starting there (open addressing). */
struct sizemap {
  struct sizeslot {
    uintptr_t addr;
    uint64_t size;
  } * slot;
  size_t mask;
};

static void sizemap_put(struct sizemap *map, uintptr_t addr, uint64_t size) {
  size_t i = (size_t)((addr >> 3) * 0x9E3779B97F4A7C15ull) & map->mask;
  while (map->slot[i].addr && map->slot[i].addr != addr)
    i = (i + 1) & map->mask;
  map->slot[i].addr = addr;
  if (size > map->slot[i].size)
    map->slot[i].size = size;
}

static uint64_t sizemap_get(const struct sizemap *map, uintptr_t addr) {
  if (!map->slot)
    return 0;
  size_t i = (size_t)((addr >> 3) * 0x9E3779B97F4A7C15ull) & map->mask;
  for (; map->slot[i].addr; i = (i + 1) & map->mask)
    if (map->slot[i].addr == addr)
      return map->slot[i].size;
  return 0;
}

static int sizemap_init(struct sizemap *map, size_t count) {
  size_t cap = 16;
  while (cap < 2 * count + 1)
    cap *= 2;
  map->slot = calloc(cap, sizeof *map->slot);
  map->mask = cap - 1;
  return map->slot ? 0 : -1;
}

static void sizemap_add(struct sizemap *map, uintptr_t base, const ElfW(Sym) * sym, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((ELF64_ST_TYPE(sym[i].st_info) == STT_OBJECT) && sym[i].st_shndx != SHN_UNDEF &&
        sym[i].st_shndx != SHN_ABS && sym[i].st_size > 0 && base + sym[i].st_value)
      sizemap_put(map, base + sym[i].st_value, sym[i].st_size);
}

/* The static symbol table (.symtab) of the module's file, when the file is the one loaded: a
 * section at the table's address holds the same header bytes.  0 when it was used. */
static int sizes_from_file(const struct module *m, struct sizemap *map) {
  const char *path = m->is_main ? "/proc/self/exe" : m->where;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  struct stat st;
  void *file = MAP_FAILED;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size >= sizeof(ElfW(Ehdr)))
    file = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (file == MAP_FAILED)
    return -1;
  const unsigned char *f = file;
  uint64_t fsize = (uint64_t)st.st_size;
  const ElfW(Ehdr) *eh = file;
  int used = -1;
  if (memcmp(f, ELFMAG, SELFMAG) != 0 || f[EI_CLASS] != ELFCLASS64 ||
      eh->e_shentsize != sizeof(ElfW(Shdr)) || eh->e_shoff > fsize ||
      (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr)) > fsize - eh->e_shoff)
    goto out;
  const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(f + eh->e_shoff);
  const ElfW(Shdr) *symtab = NULL;
  int same = 0;
  uintptr_t table_vaddr = (uintptr_t)m->table - m->load_base;
  size_t head = m->t.meta_size < 64 ? (size_t)m->t.meta_size : 64;
  for (ElfW(Half) i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type == SHT_SYMTAB)
      symtab = &sh[i];
    if (sh[i].sh_type == SHT_PROGBITS && sh[i].sh_addr == table_vaddr && sh[i].sh_size >= head &&
        sh[i].sh_offset <= fsize && head <= fsize - sh[i].sh_offset &&
        memcmp(f + sh[i].sh_offset, m->table, head) == 0)
      same = 1;
  }
  if (!same || !symtab || symtab->sh_entsize != sizeof(ElfW(Sym)) || symtab->sh_offset > fsize ||
      symtab->sh_size > fsize - symtab->sh_offset)
    goto out;
  size_t n = symtab->sh_size / sizeof(ElfW(Sym));
  if (sizemap_init(map, n) != 0)
    goto out;
  sizemap_add(map, m->load_base, (const ElfW(Sym) *)(f + symtab->sh_offset), n);
  used = 0;
out:
  munmap(file, (size_t)st.st_size);
  return used;
}

/* Each variable row against the host object it points at: its size must not exceed the
 * st_size of an object symbol that starts there (the file's .symtab, else the module's
 * dynamic symbols).  A row with no symbol there (a stripped, unexported variable) must at
 * least not run into the next row.  The row's segment was checked already. */
static int check_sizes(struct module *m) {
  int any = 0;
  for (uint32_t row = 0; row < m->t.n_symbols && !any; row++) {
    ofl_symbol s;
    ofl_table_symbol(&m->t, row, &s);
    any = is_variable(s.kind);
  }
  if (!any)
    return 0;
  struct sizemap map = {NULL, 0};
  if (sizes_from_file(m, &map) != 0) {
    struct dynsyms d;
    if (dynsyms_of_module(&d, m->load_base, m->phdr, m->phnum) == 0) {
      uint32_t n = dynsyms_count(&d);
      if (sizemap_init(&map, n) == 0)
        sizemap_add(&map, m->load_base, d.sym, n);
    }
  }
  int status = 0;
  for (uint32_t row = 0; row < m->t.n_symbols && status == 0; row++) {
    ofl_symbol s;
    ofl_table_symbol(&m->t, row, &s);
    if (!is_variable(s.kind) || s.size == 0)
      continue;
    uint64_t object = sizemap_get(&map, (uintptr_t)m->table + (uintptr_t)s.host_offset);
    if (object && s.size > object) {
      note(m, "%s: offload table: variable '%s' is %llu bytes but the host object there is %llu",
           m->where, s.name, (unsigned long long)s.size, (unsigned long long)object);
      status = -1;
    } else if (!object) {
      int64_t next = ofl_table_floor(&m->t, s.host_offset + (int64_t)(s.size - 1));
      ofl_symbol o;
      if (next >= 0 && (ofl_table_symbol(&m->t, (uint32_t)next, &o), o.host_offset > s.host_offset)) {
        note(m, "%s: offload table: variable '%s' (%llu bytes) runs into '%s'", m->where, s.name,
             (unsigned long long)s.size, o.name);
        status = -1;
      }
    }
  }
  free(map.slot);
  return status;
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
  const char *want = ofl_getenv("OFFLINK_TARGET");
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

/* The loaded objects, to find which one holds an address (few: a program's libraries). */
struct objects {
  struct object {
    uintptr_t base;
    const ElfW(Phdr) * phdr;
    ElfW(Half) phnum;
  } * o;
  size_t n, cap;
};

static int objects_cb(struct dl_phdr_info *info, size_t size, void *data) {
  struct objects *all = data;
  (void)size;
  if (all->n == all->cap) {
    size_t cap = all->cap ? 2 * all->cap : 16;
    struct object *o = realloc(all->o, cap * sizeof *o);
    if (!o)
      return 1;
    all->o = o;
    all->cap = cap;
  }
  all->o[all->n++] = (struct object){info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum};
  return 0;
}

static const struct object *object_at(const struct objects *all, uintptr_t addr) {
  for (size_t k = 0; k < all->n; k++)
    for (ElfW(Half) i = 0; i < all->o[k].phnum; i++) {
      const ElfW(Phdr) *ph = &all->o[k].phdr[i];
      if (ph->p_type == PT_LOAD && addr - (all->o[k].base + ph->p_vaddr) < ph->p_memsz)
        return &all->o[k];
    }
  return NULL;
}

/* For a shared library, the address the program really uses for each exported row: what the
 * dynamic linker binds the name to (dlsym(RTLD_DEFAULT) looks it up the same way).  Where
 * that is another object, it becomes the row's host object and a second key for translate.
 * Each row costs hash-table probes, never a scan of a symbol table (dladdr does one). */
static int find_aliases(struct module *m) {
  if (m->is_main || m->t.n_symbols == 0 || is_symbolic(m))
    return 0;
  struct dynsyms own;
  if (dynsyms_of_module(&own, m->load_base, m->phdr, m->phnum) != 0)
    return 0; /* no dynamic symbols: nothing of it can be interposed */
  struct objects all = {NULL, 0, 0};
  int status = 0;
  for (uint32_t row = 0; row < m->t.n_symbols; row++) {
    ofl_symbol s;
    ofl_table_symbol(&m->t, row, &s);
    struct entry *e = &m->entries[row];
    /* Only a default-visibility dynamic symbol of this very object can be interposed. */
    const ElfW(Sym) *sym = dynsyms_find(&own, s.name);
    if (!sym || sym->st_shndx == SHN_UNDEF || m->load_base + sym->st_value != e->host ||
        ELF64_ST_VISIBILITY(sym->st_other) != STV_DEFAULT)
      continue;
    uintptr_t live = (uintptr_t)dlsym(RTLD_DEFAULT, s.name);
    if (!live || live == e->host)
      continue;
    int variable = is_variable(s.kind);
    if (variable) {
      /* Only a copy of this very variable (same name, same size) replaces it. */
      if (!all.o)
        dl_iterate_phdr(objects_cb, &all);
      const struct object *o = object_at(&all, live);
      struct dynsyms theirs;
      const ElfW(Sym) *copy = NULL;
      if (o && dynsyms_of_module(&theirs, o->base, o->phdr, o->phnum) == 0)
        copy = dynsyms_find(&theirs, s.name);
      if (!copy || copy->st_shndx == SHN_UNDEF || o->base + copy->st_value != live ||
          copy->st_size != s.size)
        continue; /* not a copy of this variable: leave the row as the table says */
    }
    if (!m->aliases) {
      m->aliases = calloc(m->t.n_symbols, sizeof *m->aliases);
      if (!m->aliases) {
        note(m, "%s: out of memory", m->where);
        status = -1;
        break;
      }
    }
    m->aliases[m->n_aliases].host = live;
    m->aliases[m->n_aliases].row = row;
    m->n_aliases++;
    if (variable)
      e->host = live; /* the library's own copy is no longer what anyone reads */
  }
  free(all.o);
  if (m->n_aliases)
    qsort(m->aliases, m->n_aliases, sizeof *m->aliases, alias_cmp);
  return status;
}

static void setup(struct module *m) {
  uint64_t avail = locate(m->table, m);
  if (avail == 0) {
    note(m, "%p is not inside a loaded module (not an offload table)", (const void *)m->table);
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
    const char *why = NULL;
    int place = row_place(m, &s, &why);
    if (place < 0) {
      note(m, "%s: offload table: '%s' %s", m->where, s.name, why);
      return;
    }
    m->entries[row].readonly = place == 1;
    m->entries[row].host_offset = s.host_offset;
    m->entries[row].size = s.size;
    m->entries[row].host = (uintptr_t)m->table + (uintptr_t)s.host_offset;
  }
  if (check_sizes(m) != 0 || find_aliases(m) != 0)
    return;
  choose_target(m);
}

static void discard(struct module *m) {
  if (!m)
    return;
  if (m->loader)
    m->loader->unload(m);
  free(m->entries);
  free(m->aliases);
  free(m);
}

/* ---- the registry ------------------------------------------------------------------- */

static struct record *find_record(const unsigned char *table) {
  for (struct record *r = atomic_load_explicit(&records, memory_order_acquire); r; r = r->next)
    if (atomic_load_explicit(&r->table, memory_order_acquire) == table)
      return r;
  return NULL;
}

/* A record for `table`: a dead one reused, or a new one.  Called with registry_lock held. */
static struct record *new_record(const unsigned char *table, int lazy, uint64_t total,
                                 uint32_t crc) {
  struct record *r;
  for (r = atomic_load_explicit(&records, memory_order_acquire); r; r = r->next)
    if (!atomic_load_explicit(&r->table, memory_order_relaxed))
      break;
  if (!r) {
    if (!(r = calloc(1, sizeof *r)))
      return NULL;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->done, NULL);
    r->next = atomic_load_explicit(&records, memory_order_relaxed);
    atomic_store_explicit(&records, r, memory_order_release);
  }
  atomic_store(&r->lazy, lazy);
  atomic_store(&r->key_total, total);
  atomic_store(&r->key_crc, crc);
  atomic_store_explicit(&r->table, table, memory_order_release);
  return r;
}

/* A module's constructor (every module that links this library has one, below). */
void __offlink_register_module(const void *table) {
  pthread_once(&env_once, env_read);
  if (!table)
    return;
  pthread_mutex_lock(&registry_lock);
  struct record *r = find_record(table);
  if (r)
    atomic_store(&r->lazy, 0); /* first seen through the API before its constructor ran */
  else
    new_record(table, 0, 0, 0);
  pthread_mutex_unlock(&registry_lock);
}

/* A module's destructor: forget its table and unload its image, so that nothing answers for
 * a module no longer there.  Not while the process exits (other threads may still run). */
void __offlink_unregister_module(const void *table) {
  /* At exit the record stays: a later destructor or exit handler may still use the table. */
  if (!table || atomic_load(&process_exiting))
    return;
  pthread_mutex_lock(&registry_lock);
  struct record *r = find_record(table);
  struct module *m = NULL;
  if (r) {
    pthread_mutex_lock(&r->lock);
    atomic_fetch_add(&r->generation, 1);
    m = atomic_exchange(&r->ready, NULL);
    atomic_store(&r->setting, 0);
    atomic_store_explicit(&r->table, NULL, memory_order_release);
    pthread_mutex_unlock(&r->lock);
  }
  pthread_mutex_unlock(&registry_lock);
  discard(m); /* no runtime lock held: unloading runs the image's destructors */
}

static const unsigned char *key_of(const unsigned char *table, uint64_t *total, uint32_t *crc) {
  /* Read only once the bytes are known to be mapped, up to the end of meta_crc32. */
  if (locate(table, NULL) < OFL_HDR_META_CRC32 + 4)
    return NULL;
  *total = ofl_le(table + OFL_HDR_TOTAL_SIZE, 8);
  *crc = (uint32_t)ofl_le(table + OFL_HDR_META_CRC32, 4);
  return table;
}

/* The record of `table`, registered now if its module has no constructor of ours. */
static struct record *record_of(const unsigned char *table) {
  struct record *r = find_record(table);
  uint64_t total = 0;
  uint32_t crc = 0;
  if (r && !atomic_load(&r->lazy))
    return r;
  if (!key_of(table, &total, &crc)) /* not in any module: a record that says so */
    total = crc = 0;
  if (r && atomic_load(&r->key_total) == total && atomic_load(&r->key_crc) == crc)
    return r;
  pthread_mutex_lock(&registry_lock);
  if (r && atomic_load(&r->table) == table && atomic_load(&r->lazy) &&
      (atomic_load(&r->key_total) != total || atomic_load(&r->key_crc) != crc)) {
    /* Another module's table, now at the address of one that went without a destructor. */
    pthread_mutex_lock(&r->lock);
    atomic_fetch_add(&r->generation, 1);
    atomic_store(&r->ready, NULL); /* its image stays loaded: its module never said */
    atomic_store(&r->setting, 0);
    atomic_store(&r->key_total, total);
    atomic_store(&r->key_crc, crc);
    pthread_mutex_unlock(&r->lock);
  } else if (!(r = find_record(table)))
    r = new_record(table, 1, total, crc);
  pthread_mutex_unlock(&registry_lock);
  if (!r)
    set_error("out of memory");
  return r;
}

static int is_setting_up(const struct record *r) {
  for (const struct busy *b = setting_up; b; b = b->outer)
    if (b->rec == r)
      return 1;
  return 0;
}

/* The module of `table`, set up; NULL when there is none (no table, out of memory, or this
 * thread is setting it up right now and came back through an image constructor). */
static struct module *module_of(const void *table) {
  if (!table)
    return NULL;
  struct record *r = record_of(table);
  if (!r)
    return NULL;
  struct module *m = atomic_load_explicit(&r->ready, memory_order_acquire);
  if (m)
    return m;
  if (is_setting_up(r))
    return NULL;
  unsigned generation = atomic_load(&r->generation);
  if (atomic_exchange(&r->setting, 1)) {
    /* Another thread sets it up: wait for it, but not for ever (see SETUP_WAIT_NS). */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += SETUP_WAIT_NS;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->lock);
    while (!(m = atomic_load(&r->ready)) && atomic_load(&r->setting) &&
           pthread_cond_timedwait(&r->done, &r->lock, &until) == 0)
      ;
    pthread_mutex_unlock(&r->lock);
    if (m)
      return m;
  }
  struct module *mine = calloc(1, sizeof *mine);
  if (!mine) {
    set_error("out of memory");
    return NULL;
  }
  mine->table = table;
  struct busy self = {r, setting_up};
  setting_up = &self;
  setup(mine);
  setting_up = self.outer;
  pthread_mutex_lock(&r->lock);
  m = atomic_load(&r->ready);
  if (!m && atomic_load(&r->generation) == generation && atomic_load(&r->table) == table) {
    atomic_store_explicit(&r->ready, mine, memory_order_release);
    m = mine;
    mine = NULL;
  }
  atomic_store(&r->setting, 0);
  pthread_cond_broadcast(&r->done);
  pthread_mutex_unlock(&r->lock);
  discard(mine); /* another thread's setup won (or the module went away meanwhile) */
  return m;
}

/* The module if it runs on a target; NULL to run on the host, with the reason recorded. */
static struct module *usable(const void *table) {
  struct module *m = module_of(table);
  if (!m || m->loader)
    return m;
  if (m->error[0]) {
    keep_error(m->error);
    if (mandatory())
      fatal(m->error);
  }
  return NULL;
}

/* Each module that links this library registers its own table (the hidden __OPENMP_TARGET__
 * of that module) with whichever copy of the runtime the module's calls bind to. */
__attribute__((constructor)) static void register_this_module(void) {
  __offlink_register_module(OFFLINK_TABLE);
}

__attribute__((destructor)) static void unregister_this_module(void) {
  __offlink_unregister_module(OFFLINK_TABLE);
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
    set_error("%s: %p is not an offered function or variable (OFFLINK_MANDATORY)", m->where,
              host_ptr);
    return;
  }
  const char *module = info.dli_fname[0] ? info.dli_fname : m->where; /* "": the program */
  unsigned long long offset = (unsigned long long)((uintptr_t)host_ptr - (uintptr_t)map->l_addr);
  char near[320] = "";
  if (info.dli_sname && info.dli_saddr)
    snprintf(near, sizeof near, ", nearest symbol '%s'+%#llx", info.dli_sname,
             (unsigned long long)((uintptr_t)host_ptr - (uintptr_t)info.dli_saddr));
  set_error("%s: %p (%s(+%#llx)%s) is not an offered function or variable (OFFLINK_MANDATORY); "
            "`offlink inspect %s --address +%#llx` says what is there", m->where, host_ptr, module,
            offset, near, module, offset);
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
        set_error("%s: '%s' is not in the image of target %s (OFFLINK_MANDATORY)", m->where,
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
  if (!to_target && e->readonly) {
    set_error("'%s' lies in read-only memory of %s: nothing is copied back into it", s.name,
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
  struct dynsyms syms; /* the image's own dynamic symbols; valid when have_syms */
  int have_syms;
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
    const char *dir = ofl_getenv("TMPDIR");
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
  img->have_syms = img->map && dynsyms_open(&img->syms, img->map->l_addr, img->map->l_ld) == 0;
  m->loader_data = img;
  return 0;
}

/* Each row is one probe of the image's own hash table: linear in the rows in all (dladdr,
 * which scans the whole symbol table, ran per row before and made the first use quadratic). */
static int so_resolve(struct module *m, const ofl_symbol *s, uintptr_t *out) {
  struct so_image *img = m->loader_data;
  const ElfW(Sym) *sym = NULL;
  void *addr = NULL;
  if (img->have_syms) {
    sym = dynsyms_find(&img->syms, s->name);
    if (!sym || sym->st_shndx == SHN_UNDEF || ELF64_ST_BIND(sym->st_info) == STB_LOCAL) {
      /* dlsym would search the image's dependencies too; a row must be the image's own. */
      note(m, "%s: '%s' is not defined in the image", m->where, s->name);
      return -1;
    }
    unsigned type = ELF64_ST_TYPE(sym->st_info);
    if (type == STT_GNU_IFUNC || type == STT_TLS)
      addr = dlsym(img->handle, s->name); /* the resolver's choice, this thread's block */
    else
      addr = (void *)(img->map->l_addr + sym->st_value);
  } else {
    dlerror();
    addr = dlsym(img->handle, s->name);
    Dl_info info;
    struct link_map *owner = NULL;
    if (addr && img->map && dladdr1(addr, &info, (void **)&owner, RTLD_DL_LINKMAP) &&
        owner != img->map)
      addr = NULL;
    if (addr && !(dladdr1(addr, &info, (void **)&sym, RTLD_DL_SYMENT) && sym &&
                  info.dli_saddr == addr))
      sym = NULL;
  }
  if (!addr) {
    note(m, "%s: '%s' is not defined in the image", m->where, s->name);
    return -1;
  }
  /* A copy of the host's size must fit the image's variable. */
  if (is_variable(s->kind) && sym && sym->st_size != s->size) {
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
