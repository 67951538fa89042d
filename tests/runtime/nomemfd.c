/* LD_PRELOAD shim: memfd_create fails as it does on an old kernel or in a sandbox, so the
 * runtime must load images through a temporary file. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/mman.h>

int memfd_create(const char *name, unsigned int flags) {
  (void)name;
  (void)flags;
  errno = ENOSYS;
  return -1;
}
