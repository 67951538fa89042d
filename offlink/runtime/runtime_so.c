/* offlink runtime: the shared-object loader (target x86_64-pc-linux-gnu), run in-process.
 *
 * The image is written to an anonymous in-memory file (memfd) and dlopen()ed from
 * /proc/self/fd, else from a temporary file in $TMPDIR removed once loaded; its rows are
 * found through its own dynamic symbols' hash table (runtime_dynsyms.h).  Copies are
 * memmove: target and host share the address space. */

#define _GNU_SOURCE
#include "runtime_dynsyms.h"
#include "runtime_loader.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
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
  const char *where = ofl_module_where(m);
  char name[64], path[4096], first[OFL_ERROR_SIZE] = "";
  struct so_image *img = calloc(1, sizeof *img);
  if (!img) {
    ofl_note(m, "%s: out of memory", where);
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
      ofl_note(m, "%s: target '%.*s': cannot load the image: %s; from %s: %s%s", where,
               (int)tg->name_len, tg->name, first, dir, why,
               noexec ? " (mounted noexec: set TMPDIR to another directory)" : "");
      free(img);
      return -1;
    }
  }
  if (dlinfo(img->handle, RTLD_DI_LINKMAP, &img->map) != 0)
    img->map = NULL;
  img->have_syms = img->map && ofl_dynsyms_open(&img->syms, img->map->l_addr, img->map->l_ld) == 0;
  ofl_set_loader_data(m, img);
  return 0;
}

/* Each row is one probe of the image's own hash table: linear in the rows in all (dladdr,
 * which scans the whole symbol table, ran per row before and made the first use quadratic). */
static int so_resolve(struct module *m, const ofl_symbol *s, uintptr_t *out) {
  struct so_image *img = ofl_loader_data(m);
  const char *where = ofl_module_where(m);
  const ElfW(Sym) *sym = NULL;
  void *addr = NULL;
  if (img->have_syms) {
    sym = ofl_dynsyms_find(&img->syms, s->name);
    if (!sym || sym->st_shndx == SHN_UNDEF || ELF64_ST_BIND(sym->st_info) == STB_LOCAL) {
      /* dlsym would search the image's dependencies too; a row must be the image's own. */
      ofl_note(m, "%s: '%s' is not defined in the image", where, s->name);
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
    ofl_note(m, "%s: '%s' is not defined in the image", where, s->name);
    return -1;
  }
  /* A copy of the host's size must fit the image's variable. */
  if (ofl_is_variable(s->kind) && sym && sym->st_size != s->size) {
    ofl_note(m, "%s: variable '%s' is %llu bytes on the host but %llu in the image", where,
             s->name, (unsigned long long)s->size, (unsigned long long)sym->st_size);
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
  struct so_image *img = ofl_loader_data(m);
  if (!img)
    return;
  dlclose(img->handle);
  if (img->fd >= 0)
    close(img->fd);
  free(img);
  ofl_set_loader_data(m, NULL);
}

const struct loader ofl_so_loader = {
    OFL_IMAGE_SHARED_OBJECT, so_load, so_resolve, so_copy_to, so_copy_from, so_unload, NULL,
};
