"""The CUDA runtime's registration of a module's fatbin, as clang's link writes it for CUDA
objects built with `--offload-new-driver -fgpu-rdc` (clang 19's clang-linker-wrapper,
llvm/Frontend/Offloading/OffloadWrapper.cpp, wrapCudaBinary; its --save-temps module shows it).

One generated C file per link, compiled by the link's C driver: a `__fatbinwrapper` (magic
0x466243b1, version 1) in `.nvFatBinSegment` whose data pointer is the fatbin in this module's
`.openmp_target`, the placeholder's `__offlink_image_K` (link/reserve.py: the image is stored
once, where the table says it is, and the text is the same on a relink), and a constructor of
priority 101 that calls `__cudaRegisterFatBinary`, then, for each linker-merged
`cuda_offloading_entries` row, `__cudaRegisterFunction` (size 0: a kernel) or
`__cudaRegisterVar` (a global: extern and constant from the row's flags; managed, surface and
texture rows are skipped, as clang 19 skips them), then `__cudaRegisterFatBinaryEnd`, and
registers `__cudaUnregisterFatBinary` with atexit. The program links the CUDA runtime
(`-lcudart`) as it does for clang's link.
"""

from __future__ import annotations

from ... import plugins
from ...errors import LinkError
from ...formats.table import image_symbol
from .omptarget import ENTRY_C, compile_c

SOURCE = "offlink-cudart-register.c"
FATBIN_MAGIC = 0x466243B1

_TEXT = """\
/* Written by offlink link: the CUDA runtime's registration of this module's fatbin
   (clang 19's clang-linker-wrapper layout for --offload-new-driver objects). */
""" + ENTRY_C + """\
struct fatbin_wrapper {
  int magic;
  int version;
  const void *data;
  void *unused;
};
extern struct __tgt_offload_entry __start_cuda_offloading_entries[] HIDDEN;
extern struct __tgt_offload_entry __stop_cuda_offloading_entries[] HIDDEN;
extern char %(image)s[] HIDDEN;
extern void **__cudaRegisterFatBinary(const void *);
extern void __cudaRegisterFatBinaryEnd(void **);
extern void __cudaUnregisterFatBinary(void **);
extern int __cudaRegisterFunction(void **, const void *, char *, const char *, int, void *,
                                  void *, void *, void *, int *);
extern void __cudaRegisterVar(void **, void *, char *, const char *, int, unsigned long, int,
                              int);
extern int atexit(void (*)(void));

/* Zero rows of our own, so the section (and __start_/__stop_) exists with no entries. */
__attribute__((section("cuda_offloading_entries"), used))
static struct __tgt_offload_entry dummy_entry[0];

__attribute__((section(".nvFatBinSegment"), aligned(8)))
static const struct fatbin_wrapper wrapper = {%(magic)#x, 1, %(image)s, 0};

static void **handle;

static void unregister_fatbin(void) { __cudaUnregisterFatBinary(handle); }

__attribute__((constructor(101))) static void register_fatbin(void) {
  handle = __cudaRegisterFatBinary(&wrapper);
  for (struct __tgt_offload_entry *e = __start_cuda_offloading_entries;
       e != __stop_cuda_offloading_entries; ++e) {
    if (e->size == 0)
      __cudaRegisterFunction(handle, e->addr, e->name, e->name, -1, 0, 0, 0, 0, 0);
    else if ((e->flags & 7) == 0)  /* a global; 1 managed, 2 surface, 3 texture: skipped */
      __cudaRegisterVar(handle, e->addr, e->name, e->name, (e->flags >> 3) & 1, e->size,
                        (e->flags >> 4) & 1, 0);
  }
  __cudaRegisterFatBinaryEnd(handle);
  atexit(unregister_fatbin);
}
"""


def c_source(index: int) -> str:
    """The registration of the fatbin that is the table's image `index`."""
    return _TEXT % {"magic": FATBIN_MAGIC, "image": image_symbol(index)}


class CudartRegistration(plugins.Registration):
    """The CUDA runtime's registration, as the link's registry finds it."""

    name = "cudart"

    def build(self, plan, images, indexes, workdir, cache=None):
        return build(plan, images, indexes, workdir, cache)


def build(plan, images, indexes: list[int], workdir: str, cache=None) -> str:
    if len(images) != 1:
        raise LinkError("the CUDA runtime registers one fatbin per module")
    return compile_c(plan, c_source(indexes[0]), SOURCE, "the CUDA runtime registration",
                     workdir, cache)
