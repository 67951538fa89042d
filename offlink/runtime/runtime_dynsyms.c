/* offlink runtime: a loaded module's own dynamic symbols, looked up by name through its
 * hash table (runtime_dynsyms.h). */

#define _GNU_SOURCE
#include "runtime_dynsyms.h"

#include <elf.h>
#include <string.h>

/* glibc relocates these entries of a writable .dynamic in place; a read-only one (and other
 * loaders) keeps the link-time address. */
static uintptr_t dyn_ptr(uintptr_t base, ElfW(Addr) p) { return base && p < base ? base + p : p; }

int ofl_dynsyms_open(struct dynsyms *d, uintptr_t base, const ElfW(Dyn) * dyn) {
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

int ofl_dynsyms_of_module(struct dynsyms *d, uintptr_t base, const ElfW(Phdr) * phdr,
                          ElfW(Half) phnum) {
  for (ElfW(Half) i = 0; i < phnum; i++)
    if (phdr[i].p_type == PT_DYNAMIC)
      return ofl_dynsyms_open(d, base, (const ElfW(Dyn) *)(base + phdr[i].p_vaddr));
  return -1;
}

static int dynsym_is(const struct dynsyms *d, uint32_t i, const char *name) {
  if (d->versym && (d->versym[i] & 0x8000)) /* a hidden (non-default) version */
    return 0;
  return d->sym[i].st_name < d->strsz && strcmp(d->str + d->sym[i].st_name, name) == 0;
}

const ElfW(Sym) * ofl_dynsyms_find(const struct dynsyms *d, const char *name) {
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

uint32_t ofl_dynsyms_count(const struct dynsyms *d) {
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
