/* offlink runtime: a shared library's rows at the addresses the program really uses.
 *
 * In a shared library, a variable the executable refers to is copied into the executable (a
 * copy relocation) and the library's code uses that copy; a function's address taken in a
 * non-PIE executable is its PLT entry there.  Such a second address becomes an alias of the
 * row (translate answers for it), and a copied variable's copy its host object. */

#define _GNU_SOURCE
#include "runtime_dynsyms.h"
#include "runtime_internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdlib.h>

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
int ofl_find_aliases(struct module *m) {
  if (m->is_main || m->t.n_symbols == 0 || is_symbolic(m))
    return 0;
  struct dynsyms own;
  if (ofl_dynsyms_of_module(&own, m->load_base, m->phdr, m->phnum) != 0)
    return 0; /* no dynamic symbols: nothing of it can be interposed */
  struct objects all = {NULL, 0, 0};
  int status = 0;
  for (uint32_t row = 0; row < m->t.n_symbols; row++) {
    ofl_symbol s;
    ofl_table_symbol(&m->t, row, &s);
    struct entry *e = &m->entries[row];
    /* Only a default-visibility dynamic symbol of this very object can be interposed. */
    const ElfW(Sym) *sym = ofl_dynsyms_find(&own, s.name);
    if (!sym || sym->st_shndx == SHN_UNDEF || m->load_base + sym->st_value != e->host ||
        ELF64_ST_VISIBILITY(sym->st_other) != STV_DEFAULT)
      continue;
    uintptr_t live = (uintptr_t)dlsym(RTLD_DEFAULT, s.name);
    if (!live || live == e->host)
      continue;
    int variable = ofl_is_variable(s.kind);
    if (variable) {
      /* Only a copy of this very variable (same name, same size) replaces it. */
      if (!all.o)
        dl_iterate_phdr(objects_cb, &all);
      const struct object *o = object_at(&all, live);
      struct dynsyms theirs;
      const ElfW(Sym) *copy = NULL;
      if (o && ofl_dynsyms_of_module(&theirs, o->base, o->phdr, o->phnum) == 0)
        copy = ofl_dynsyms_find(&theirs, s.name);
      if (!copy || copy->st_shndx == SHN_UNDEF || o->base + copy->st_value != live ||
          copy->st_size != s.size)
        continue; /* not a copy of this variable: leave the row as the table says */
    }
    if (!m->aliases) {
      m->aliases = calloc(m->t.n_symbols, sizeof *m->aliases);
      if (!m->aliases) {
        ofl_note(m, "%s: out of memory", m->where);
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
