/* offlink runtime: setting a module up, with no lock held (the registry, runtime_registry.c,
 * publishes the result): find the loaded module the table lies in, validate the table
 * (table.c), check every row against the module's segments and host objects
 * (runtime_sizes.c), find the addresses the program really uses (runtime_aliases.c), then
 * choose a target and load its image through the loader of its kind: runtime_so.c for a
 * shared object run in-process (target x86_64-pc-linux-gnu), runtime_cuda.c for cubin and
 * fatbin images.  What failed is noted in the module's message: it then runs on the host. */

#define _GNU_SOURCE
#include "runtime_internal.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOST_TARGET "x86_64-pc-linux-gnu"

static const struct loader *const loaders[] = {&ofl_so_loader, &ofl_cubin_loader,
                                               &ofl_fatbin_loader};

static const struct loader *loader_for(uint16_t kind) {
  for (size_t i = 0; i < sizeof loaders / sizeof loaders[0]; i++)
    if (loaders[i]->kind == kind)
      return loaders[i];
  return NULL;
}

static const char *kind_name(uint16_t kind) {
  static const char *const names[] = {"?", "shared-object", "cubin", "fatbin", "ptx", "nvptx-none",
                                      "amdgcn-amdhsa"};
  return kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

/* ---- the module's message, and what loaders see of it (runtime_loader.h) --------------- */

/* Add a reason to the module's message; several targets may each fail, "; " between. */
void ofl_note(struct module *m, const char *fmt, ...) {
  size_t used = strlen(m->error);
  if (used && used + 2 < sizeof m->error) {
    memcpy(m->error + used, "; ", 3);
    used += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->error + used, sizeof m->error - used, fmt, ap);
  va_end(ap);
  ofl_one_line(m->error + used);
}

void *ofl_loader_data(struct module *m) { return m->loader_data; }
void ofl_set_loader_data(struct module *m, void *data) { m->loader_data = data; }
const char *ofl_module_where(const struct module *m) { return m->where; }

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
uint64_t ofl_locate(const void *addr, struct module *m) {
  struct locate l = {(uintptr_t)addr, 0, m};
  if (m)
    snprintf(m->where, sizeof m->where, "%s", program_invocation_name);
  dl_iterate_phdr(locate_cb, &l);
  return l.avail;
}

/* Where a row's host bytes lie: -1 (with *why) outside any one loaded segment of the module,
 * or a function outside its code; 1 for a variable in read-only memory (a read-only segment
 * or the RELRO range: const data), which translate and update_to may use but update_from
 * must not write; 0 otherwise.  The checksum catches accidents; this keeps a deliberately
 * forged table from aiming copies or calls elsewhere. */
static int row_place(const struct module *m, const ofl_symbol *s, const char **why) {
  uintptr_t addr = (uintptr_t)m->table + (uintptr_t)s->host_offset;
  int variable = ofl_is_variable(s->kind), relro = 0;
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

/* ---- choosing and loading a target ---------------------------------------------------- */

static int use_target(struct module *m, uint32_t index) {
  ofl_target tg;
  ofl_table_target(&m->t, index, &tg);
  const struct loader *ld = loader_for(tg.kind);
  if (!ld) {
    ofl_note(m, "%s: target '%.*s': this runtime cannot load %s images", m->where, (int)tg.name_len,
             tg.name, kind_name(tg.kind));
    return -1;
  }
  if (ofl_table_check_image(&m->t, index) != OFL_OK) {
    ofl_note(m, "%s: target '%.*s': %s (%s)", m->where, (int)tg.name_len, tg.name,
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
      ofl_note(m, "%s: OFFLINK_TARGET=none: running on the host", m->where);
      return;
    }
    int64_t i = ofl_table_target_index(&m->t, want, strlen(want));
    if (i < 0 && strcmp(want, "host") == 0)
      i = ofl_table_target_index(&m->t, HOST_TARGET, strlen(HOST_TARGET));
    if (i < 0)
      ofl_note(m, "%s: OFFLINK_TARGET=%s: no such target in the offload table", m->where, want);
    else
      use_target(m, (uint32_t)i);
    return;
  }
  if (m->t.n_targets == 0)
    ofl_note(m, "%s: the offload table has no targets", m->where);
  for (uint32_t i = 0; i < m->t.n_targets; i++)
    if (use_target(m, i) == 0)
      return;
}

void ofl_setup(struct module *m) {
  uint64_t avail = ofl_locate(m->table, m);
  if (avail == 0) {
    ofl_note(m, "%p is not inside a loaded module (not an offload table)", (const void *)m->table);
    return;
  }
  /* The magic first, before anything else is read as a table. */
  if (avail < sizeof OFL_MAGIC - 1 || memcmp(m->table, OFL_MAGIC, sizeof OFL_MAGIC - 1) != 0) {
    /* gold resolves an undefined weak hidden symbol to the module's load base: the ELF
     * header is there, and the module simply has no table. */
    if (avail >= SELFMAG && memcmp(m->table, ELFMAG, SELFMAG) == 0)
      return;
    ofl_note(m, "%s: offload table: %s (%s)", m->where, ofl_status_message(OFL_BAD_MAGIC),
             ofl_status_code(OFL_BAD_MAGIC));
    return;
  }
  int status = ofl_table_open(&m->t, m->table, avail);
  if (status != OFL_OK) {
    ofl_note(m, "%s: offload table: %s (%s)", m->where, ofl_status_message(status),
             ofl_status_code(status));
    return;
  }
  /* One allocation for all rows, here and never on the lookup path. */
  m->entries = calloc(m->t.n_symbols ? m->t.n_symbols : 1, sizeof *m->entries);
  if (!m->entries) {
    ofl_note(m, "%s: out of memory", m->where);
    return;
  }
  for (uint32_t row = 0; row < m->t.n_symbols; row++) {
    ofl_symbol s;
    ofl_table_symbol(&m->t, row, &s);
    const char *why = NULL;
    int place = row_place(m, &s, &why);
    if (place < 0) {
      ofl_note(m, "%s: offload table: '%s' %s", m->where, s.name, why);
      return;
    }
    m->entries[row].readonly = place == 1;
    m->entries[row].host_offset = s.host_offset;
    m->entries[row].size = s.size;
    m->entries[row].host = (uintptr_t)m->table + (uintptr_t)s.host_offset;
  }
  if (ofl_check_sizes(m) != 0 || ofl_find_aliases(m) != 0)
    return;
  choose_target(m);
}

void ofl_discard(struct module *m) {
  if (!m)
    return;
  if (m->loader)
    m->loader->unload(m);
  free(m->entries);
  free(m->aliases);
  free(m);
}
