/* offlink runtime: the host objects' sizes, so that no copy is larger than the object a row
 * points at.  The sizes come from the module's file (its .symtab), else from its dynamic
 * symbols (runtime_dynsyms.h). */

#define _GNU_SOURCE
#include "runtime_dynsyms.h"
#include "runtime_internal.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
int ofl_check_sizes(struct module *m) {
  int any = 0;
  for (uint32_t row = 0; row < m->t.n_symbols && !any; row++) {
    ofl_symbol s;
    ofl_table_symbol(&m->t, row, &s);
    any = ofl_is_variable(s.kind);
  }
  if (!any)
    return 0;
  struct sizemap map = {NULL, 0};
  if (sizes_from_file(m, &map) != 0) {
    struct dynsyms d;
    if (ofl_dynsyms_of_module(&d, m->load_base, m->phdr, m->phnum) == 0) {
      uint32_t n = ofl_dynsyms_count(&d);
      if (sizemap_init(&map, n) == 0)
        sizemap_add(&map, m->load_base, d.sym, n);
    }
  }
  int status = 0;
  for (uint32_t row = 0; row < m->t.n_symbols && status == 0; row++) {
    ofl_symbol s;
    ofl_table_symbol(&m->t, row, &s);
    if (!ofl_is_variable(s.kind) || s.size == 0)
      continue;
    uint64_t object = sizemap_get(&map, (uintptr_t)m->table + (uintptr_t)s.host_offset);
    if (object && s.size > object) {
      ofl_note(m,
               "%s: offload table: variable '%s' is %llu bytes but the host object there is %llu",
               m->where, s.name, (unsigned long long)s.size, (unsigned long long)object);
      status = -1;
    } else if (!object) {
      int64_t next = ofl_table_floor(&m->t, s.host_offset + (int64_t)(s.size - 1));
      ofl_symbol o;
      if (next >= 0 &&
          (ofl_table_symbol(&m->t, (uint32_t)next, &o), o.host_offset > s.host_offset)) {
        ofl_note(m, "%s: offload table: variable '%s' (%llu bytes) runs into '%s'", m->where,
                 s.name, (unsigned long long)s.size, o.name);
        status = -1;
      }
    }
  }
  free(map.slot);
  return status;
}
