"""libomptarget's registration of a module's images, as clang's link writes it (clang 19's
clang-linker-wrapper, llvm/Frontend/Offloading/OffloadWrapper.cpp; seed 002).

One generated C file per link, compiled by the link's C driver: a `__tgt_device_image` per
image, whose start and end are the placeholder's `__offlink_image_K` and `__offlink_image_K_end`
in this module's `.openmp_target` (link/reserve.py: the image is stored once, where the table
says it is; the text names images by index only, so a relink that changes an image's size
takes the compiled object from the cache), whose
entries are the linker-merged `omp_offloading_entries` rows (`__start_`/`__stop_`, the rows
the CUs' host objects carry), a `__tgt_bin_desc` over them, and a constructor calling
`__tgt_register_lib` and registering `__tgt_unregister_lib` with atexit (which in a shared
library runs at dlclose), as clang 19's wrapper does. Its priority is 100, so it runs where
clang's runs: clang 19 gives its constructor 101 (the first one not reserved for the system,
so it runs after the system's constructors and before the user's, LLVM's #86830) and puts its
object first in the link, so it comes before the user's own priority-101 constructors; offlink's
object comes last in the link, where 101 would come after those. The table's rows are read from
the same merged entries after the link (llvm/openmp.py), so libomptarget and the table see
one list.
"""

from __future__ import annotations

import os

from ... import run as runner

SOURCE = "offlink-omptarget-register.c"

# The entry rows as clang 19 lays them out (seed 001), for every registration written here.
ENTRY_C = """\
#define HIDDEN __attribute__((visibility("hidden")))
struct __tgt_offload_entry {
  void *addr;
  char *name;
  unsigned long size;
  int flags;
  int reserved;
};
"""

_PROLOGUE = """\
/* Written by offlink link: libomptarget registration of this module's offload images
   (clang 19's clang-linker-wrapper layout). */
""" + ENTRY_C + """\
struct __tgt_device_image {
  void *ImageStart;
  void *ImageEnd;
  struct __tgt_offload_entry *EntriesBegin;
  struct __tgt_offload_entry *EntriesEnd;
};
struct __tgt_bin_desc {
  int NumDeviceImages;
  struct __tgt_device_image *DeviceImages;
  struct __tgt_offload_entry *HostEntriesBegin;
  struct __tgt_offload_entry *HostEntriesEnd;
};
extern struct __tgt_offload_entry __start_omp_offloading_entries[] HIDDEN;
extern struct __tgt_offload_entry __stop_omp_offloading_entries[] HIDDEN;
extern void __tgt_register_lib(struct __tgt_bin_desc *);
extern void __tgt_unregister_lib(struct __tgt_bin_desc *);
extern int atexit(void (*)(void));

/* Zero rows of our own, so the section (and __start_/__stop_) exists with no entries. */
__attribute__((section("omp_offloading_entries"), used))
static struct __tgt_offload_entry dummy_entry[0];
"""

_EPILOGUE = """\
static struct __tgt_bin_desc desc = {
  sizeof(images) / sizeof(images[0]), images,
  __start_omp_offloading_entries, __stop_omp_offloading_entries
};

static void unregister_lib(void) { __tgt_unregister_lib(&desc); }

__attribute__((constructor(100))) static void register_lib(void) {
  __tgt_register_lib(&desc);
  atexit(unregister_lib);
}
"""


def c_source(indexes: list[int]) -> str:
    """The registration of the table's images at these indexes (the placeholder's symbols)."""
    from ...formats.table import image_symbol

    names = [(image_symbol(k), image_symbol(k, "_end")) for k in indexes]
    externs = "".join(f"extern char {a}[] HIDDEN, {b}[] HIDDEN;\n" for a, b in names)
    rows = ",\n".join(f"  {{{a}, {b},\n"
                      f"   __start_omp_offloading_entries, __stop_omp_offloading_entries}}"
                      for a, b in names)
    return (_PROLOGUE + externs + "\nstatic struct __tgt_device_image images[] = {\n" + rows
            + "\n};\n\n" + _EPILOGUE)


def c_compiler(driver: str) -> str:
    name = os.path.basename(driver)
    if "clang" in name or "gcc" in name or name in ("cc", "c++", "g++"):
        return driver.replace("clang++", "clang").replace("g++", "gcc")
    return "cc"


def build(plan, images, indexes: list[int], workdir: str, cache=None) -> str:
    """Write and compile the registration of `images`, the table's images at `indexes` (or
    take the object from the cache: it depends only on the C text and the compiler); the
    object's path."""
    text = c_source(indexes)
    return compile_c(plan, text, SOURCE, "the libomptarget registration", workdir, cache)


def compile_c(plan, text: str, source: str, what: str, workdir: str, cache=None) -> str:
    """Compile a generated registration `source` with the link's C driver in the work folder
    (or take the object from the cache: it depends only on the C text and the compiler)."""
    with open(os.path.join(workdir, source), "w", encoding="ascii") as f:
        f.write(text)
    obj = source[:-2] + ".o"
    path = os.path.join(workdir, obj)
    argv = [c_compiler(plan.driver), "-c", "-O2", "-fPIC", "-fno-lto", "-w", source, "-o", obj]
    key = None
    if cache is not None:
        import hashlib

        ident = cache.tool_identity(argv[0]) or argv[0]
        key = hashlib.sha256("\0".join(["omptarget-registration", ident, *argv, text])
                             .encode()).hexdigest()
        hit = cache.get(key)
        if hit is not None:
            with open(path, "wb") as f:
                f.write(hit.data)
            return path
    # Relative names, in the work folder: nothing of its path reaches the object.
    runner.run(argv, f"compiling {what}", cwd=workdir)
    if cache is not None and key is not None:
        with open(path, "rb") as f:
            cache.put(key, {}, f.read())
    return path
