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

Each LLVM release's wrapper writes its own entry rows (formats/offload_entries.py), and so does
this text: clang 17-19's 32-byte rows in `omp_offloading_entries`, clang 20's 56-byte rows there,
clang 21+'s 56-byte rows in `llvm_offload_entries` (as `llvm-offload-wrapper-22 --kind=openmp`
prints it; libomptarget 21+ skips the rows of other kinds). The rest is the same in 19 and 22.
"""

from __future__ import annotations

import os
import subprocess
import sys

from ... import plugins
from ... import run as runner
from ...cache.store import in_thread
from ...digest import sha256
from ...errors import ToolError
from ...formats.table import image_symbol

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

# The 56-byte rows of clang 20 and later (llvm/Frontend/Offloading/Utility.h).
ENTRY_C_V2 = """\
#define HIDDEN __attribute__((visibility("hidden")))
struct __tgt_offload_entry {
  unsigned long Reserved;
  unsigned short Version;
  unsigned short Kind;
  unsigned int Flags;
  void *Address;
  char *SymbolName;
  unsigned long Size;
  unsigned long Data;
  void *AuxAddr;
};
"""

# Entry generation -> (the wrapper's release, its entry rows, their section).
GENERATIONS = {1: ("clang 19", ENTRY_C, "omp_offloading_entries"),
               2: ("clang 20", ENTRY_C_V2, "omp_offloading_entries"),
               3: ("clang 21-22", ENTRY_C_V2, "llvm_offload_entries")}

_PROLOGUE = """\
/* Written by offlink link: libomptarget registration of this module's offload images
   (RELEASE's clang-linker-wrapper layout). */
ENTRY\
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
extern struct __tgt_offload_entry __start_SECTION[] HIDDEN;
extern struct __tgt_offload_entry __stop_SECTION[] HIDDEN;
extern void __tgt_register_lib(struct __tgt_bin_desc *);
extern void __tgt_unregister_lib(struct __tgt_bin_desc *);
extern int atexit(void (*)(void));

/* Zero rows of our own, so the section (and __start_/__stop_) exists with no entries. */
__attribute__((section("SECTION"), used))
static struct __tgt_offload_entry dummy_entry[0];
"""

_EPILOGUE = """\
static struct __tgt_bin_desc desc = {
  sizeof(images) / sizeof(images[0]), images,
  __start_SECTION, __stop_SECTION
};

static void unregister_lib(void) { __tgt_unregister_lib(&desc); }

__attribute__((constructor(100))) static void register_lib(void) {
  __tgt_register_lib(&desc);
  atexit(unregister_lib);
}
"""


def c_source(indexes: list[int], generation: int = 1) -> str:
    """The registration of the table's images at these indexes (the placeholder's symbols),
    with the entry rows of `generation` (GENERATIONS)."""
    release, entry, section = GENERATIONS[generation]

    names = [(image_symbol(k), image_symbol(k, "_end")) for k in indexes]
    externs = "".join(f"extern char {a}[] HIDDEN, {b}[] HIDDEN;\n" for a, b in names)
    rows = ",\n".join(f"  {{{a}, {b},\n"
                      f"   __start_SECTION, __stop_SECTION}}"
                      for a, b in names)
    prologue = _PROLOGUE.replace("ENTRY", entry)
    if generation == 3:  # llvm-offload-wrapper-22's dummy is a constant (section flags "a")
        prologue = prologue.replace("static struct __tgt_offload_entry dummy_entry",
                                    "static const struct __tgt_offload_entry dummy_entry")
    text = (prologue + externs
            + "\nstatic struct __tgt_device_image images[] = {\n" + rows + "\n};\n\n" + _EPILOGUE)
    return text.replace("RELEASE", release).replace("SECTION", section)


class OmptargetRegistration(plugins.Registration):
    """libomptarget's registration, as the link's registry finds it: its compile started
    beside the device links (`start`), under a file name known before (the host link's
    early `-###` names it)."""

    name = "omptarget"

    def start(self, plan, targets, indexes, workdir, cache):
        start(plan, targets, indexes, workdir, cache)

    def object_name(self, workdir):
        return os.path.join(workdir, object_name(SOURCE))

    def discard(self):
        discard()

    def build(self, plan, images, indexes, workdir, cache=None):
        return build(plan, images, indexes, workdir, cache)


def c_compiler(driver: str) -> str:
    name = os.path.basename(driver)
    if "clang" in name or "gcc" in name or name in ("cc", "c++", "g++"):
        return driver.replace("clang++", "clang").replace("g++", "gcc")
    return "cc"


def build(plan, images, indexes: list[int], workdir: str, cache=None) -> str:
    """The registration object of `images`, the table's images at `indexes`: `c_source`
    compiled (or the object taken from the cache: it depends only on the C text and the
    compiler); the object's path."""
    text = c_source(indexes, getattr(images[0].target, "entry_generation", 1))
    return compile_c(plan, text, SOURCE, "the libomptarget registration", workdir, cache)


# Registration compiles started early (`start`), beside the device links: (work folder, source,
# C text) -> the running compiler, its output file and the object's cache key.
_STARTED: dict[tuple[str, str, str], tuple] = {}
_BEGINNING: list = []  # the threads starting them


def start(plan, targets, indexes: list[int], workdir: str, cache=None) -> None:
    """Start the compile `build` will want for the images of `targets` at `indexes` (one image
    per target, in their order), so a link whose cache lacks the object does not wait for it
    after the device links (~0.1 s of a cold link). `build` takes it when its text is the
    same, and compiles the text it wants otherwise: the object is the same either way."""
    text = c_source(indexes, getattr(targets[indexes[0]], "entry_generation", 1))
    # In a thread: its cache key waits for the compiler's identity, whose `--version` a cold
    # cache runs (cache.probe_early), and the link's next stages do not need it.

    # what fails there fails again, and is said, in compile_c
    _BEGINNING.append(in_thread(lambda: _begin(plan, text, SOURCE, workdir, cache)))


def _started() -> None:
    """Wait for the compiles `start` is starting (each then in _STARTED, or not started)."""
    while _BEGINNING:
        _BEGINNING.pop().join()


def _argv(plan, source: str) -> list[str]:
    return [c_compiler(plan.driver), "-c", "-O2", "-fPIC", "-fno-lto", "-w", source, "-o",
            object_name(source)]


def object_name(source: str) -> str:
    """The object a registration's source `source` compiles to (in the work folder)."""
    return source[:-2] + ".o"


def _key(cache, argv: list[str], text: str) -> str:
    ident = cache.tool_identity(argv[0]) or argv[0]
    return sha256("\0".join(["omptarget-registration", ident, *argv, text])
                          .encode()).hexdigest()


def _begin(plan, text: str, source: str, workdir: str, cache) -> None:
    """Start compiling `text` in the work folder unless the cache has its object."""
    argv = _argv(plan, source)
    # A compiler the cache does not know has no object in it: the compile starts at once
    # (its key, which waits for the compiler's `--version`, is made after).
    known = cache is not None and cache.knows_tool(argv[0])
    key = _key(cache, argv, text) if known else None
    if key is not None and os.path.exists(cache.path(key)):
        return  # compile_c takes it from the cache (or compiles it, the entry being corrupt)

    with open(os.path.join(workdir, source), "w", encoding="ascii") as f:
        f.write(text)
    said = open(os.path.join(workdir, source + ".out"), "w+b")
    if runner.VERBOSE:
        print(f"offlink: {runner.show(argv)}", file=sys.stderr, flush=True)
    try:
        proc = subprocess.Popen(argv, cwd=workdir, stdout=said, stderr=subprocess.STDOUT)
    except OSError:
        said.close()
        return  # compile_c runs it and says why it cannot
    _STARTED[(workdir, source, text)] = (proc, said, key)


def discard(workdir: str | None = None, source: str | None = None) -> None:
    """End the compiles started early that no `build` took (a link that failed before, or
    one `compile_c` is about to replace: those of `source` in `workdir`)."""
    _started()
    for k in [k for k in _STARTED if workdir is None or k[:2] == (workdir, source)]:
        proc, said, _ = _STARTED.pop(k)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        said.close()


def compile_c(plan, text: str, source: str, what: str, workdir: str, cache=None) -> str:
    """Compile a generated registration `source` with the link's C driver in the work folder
    (or take the object from the cache: it depends only on the C text and the compiler)."""
    argv = _argv(plan, source)
    obj = argv[-1]
    path = os.path.join(workdir, obj)
    _started()
    started = _STARTED.pop((workdir, source, text), None)
    if started is not None:
        proc, said, key = started
        status = proc.wait()
        said.seek(0)
        out = said.read().decode(errors="replace")
        said.close()
        if status != 0:
            code = status if status > 0 else 128 - status
            raise ToolError(f"compiling {what} failed (exit status {status}): "
                            f"{runner.show(argv)}", exit_code=code, output=out)
        if cache is not None:
            # A compiler the cache did not know: its key, which waits for its `--version`,
            # made now, once the early `-###` of the link's other commands have been asked.
            with open(path, "rb") as f:
                cache.put(key or _key(cache, argv, text), {}, f.read())
        return path
    discard(workdir, source)  # one started for another text: it must not write `obj` now
    with open(os.path.join(workdir, source), "w", encoding="ascii") as f:
        f.write(text)
    key = None
    if cache is not None:
        key = _key(cache, argv, text)
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
