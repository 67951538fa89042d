/* offlink runtime, private: what the runtime's own files share (runtime*.c, README's
 * Layout says which does what).
 *
 * A module's set-up state (`struct module`) is built by runtime_setup.c, published by the
 * registry (runtime_registry.c) and read by the API (runtime.c); the row checks
 * (runtime_sizes.c) and the interposed addresses (runtime_aliases.c) fill parts of it.
 * Image loaders see none of it: runtime_loader.h. */
#ifndef OFFLINK_RUNTIME_INTERNAL_H
#define OFFLINK_RUNTIME_INTERNAL_H

#include "runtime_loader.h"
#include "table.h"

#include <link.h>
#include <stdint.h>

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
  int is_main;                /* the executable: nothing interposes its symbols */
  char where[256];            /* the module's file, for messages */
  char error[OFL_ERROR_SIZE]; /* why it runs on the host; "" when it has no table at all */
};


/* runtime_setup.c: setting a module up (validate the table, check its rows, choose a target,
 * load its image, resolve every row), and undoing it. */
/* Readable bytes from `addr` to the end of the loaded segment it lies in (0: none), and the
 * module's segments into *m when m is not NULL. */
uint64_t ofl_locate(const void *addr, struct module *m);
/* Set up m (m->table set, the rest zero); what failed is in m->error. */
void ofl_setup(struct module *m);
/* Unload m's image and free it (NULL: nothing). */
void ofl_discard(struct module *m);

/* runtime_registry.c: the module of `table`, set up; NULL when there is none (no table, out
 * of memory, or this thread is setting it up right now and came back through an image
 * constructor). */
struct module *ofl_module_of(const void *table);

/* runtime_sizes.c: each variable row no larger than the host object it points at. */
int ofl_check_sizes(struct module *m);

/* runtime_aliases.c: the addresses the program really uses for a shared library's rows. */
int ofl_find_aliases(struct module *m);

/* runtime_env.c: the environment, read now if not yet; whether exit() has begun. */
void ofl_read_env(void);
int ofl_process_exiting(void);

/* runtime.c: a message made one line (a damaged table's names may hold any bytes). */
void ofl_one_line(char *s);

#endif /* OFFLINK_RUNTIME_INTERNAL_H */
