/* offlink runtime, private: a loaded module's own dynamic symbols, looked up by name
 * through its hash table (DT_GNU_HASH or DT_HASH), never by a scan of its symbol table.
 * For the shared-object loader, the row checks and the interposed addresses. */
#ifndef OFFLINK_RUNTIME_DYNSYMS_H
#define OFFLINK_RUNTIME_DYNSYMS_H

#include <link.h>
#include <stddef.h>
#include <stdint.h>

struct dynsyms {
  uintptr_t base;
  const ElfW(Sym) * sym;
  const char *str;
  size_t strsz;
  const uint32_t *gnu;  /* DT_GNU_HASH */
  const uint32_t *sysv; /* DT_HASH */
  const ElfW(Half) * versym;
};


/* From the module's dynamic section (`dyn`; base: its load bias).  0, or -1 when it has no
 * symbol table, string table or hash table. */
int ofl_dynsyms_open(struct dynsyms *d, uintptr_t base, const ElfW(Dyn) * dyn);
/* The same from the module's program headers (its PT_DYNAMIC). */
int ofl_dynsyms_of_module(struct dynsyms *d, uintptr_t base, const ElfW(Phdr) * phdr,
                          ElfW(Half) phnum);
/* The symbol `name` of this module (defined or not), or NULL: one hash-table probe. */
const ElfW(Sym) * ofl_dynsyms_find(const struct dynsyms *d, const char *name);
/* The number of dynamic symbols (the hash tables are the only place that says). */
uint32_t ofl_dynsyms_count(const struct dynsyms *d);

#endif /* OFFLINK_RUNTIME_DYNSYMS_H */
