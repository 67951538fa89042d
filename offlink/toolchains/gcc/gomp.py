"""libgomp's registration of offlink's `nvptx-none` image, as GCC's mkoffload writes it, so
libgomp can run target regions on a GPU: made by default wherever GCC's own link would make it
(`-foffload=disable` on the link line turns GCC's offloading off; OFFLINK_GOMP_REGISTER=0 leaves
the registration out; `--gomp-register`, once the way to ask for it, is accepted and changes
nothing).

Unverified on a real GPU. Per link, one generated C file (compiled by the host compiler, byte
for byte the same for the same names and PTX file sizes) holds what GCC 12's mkoffload writes:
the PTX files (`ptx_objs`, pointing into the image in `.openmp_target`, so it is stored once),
the variable and function names (`var_mappings`, `func_mappings` with launch dimensions) and
the `nvptx_tdata` struct, a constructor calling
`GOMP_offload_register_ver(0x10001, __OFFLOAD_TABLE__, 5, &target_data)` and a destructor
calling `GOMP_offload_unregister_ver` likewise. libgomp pairs host table slot i with name i
(target.c, gomp_load_image_to_device), so the names are written in the order of the linked
binary's `.gnu.offload_funcs`/`.gnu.offload_vars`, each slot named by offlink's by-name
pairing; where the link put the CUs' tables in another order than the inputs suggested, the
C file is written again in the binary's order and the host link runs once more.

`__OFFLOAD_TABLE__` spans those sections as in GCC's link: crtoffloadbegin.o (from the GCC
install) comes before every input and crtoffloadend.o after them. The table itself is
crtoffloadtable.o's four pointers, defined in the generated file instead of taking that object:
GCC 12's crtoffloadtable.o keeps them in `.rodata`, which gives a PIE text relocations (GCC's
own link warns "relocation ... in read-only section"); compiled -fPIC here they go to
`.data.rel.ro`. GCC 12's interface, checked against Debian's 12.2 libgomp: GOMP_VERSION 1,
GOMP_VERSION_NVIDIA_PTX 1 (the plugin refuses a larger device version), GOMP_DEVICE_NVIDIA_PTX
5; `nvptx_tdata` is {ptx_objs, ptx_num, var_names, var_num, fn_descs, fn_num} (GCC 13 adds
omp_requires_mask in front and GOMP_VERSION 2, GCC 14 ind_fn_num at the end).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ... import plugins, settings
from ... import run as runner
from ...elf import ElfFile
from ...errors import LinkError, UsageError
from ...formats.table import image_symbol
from ..llvm.omptarget import compile_c
from . import dialect as gcc
from . import gcn
from .gcn import NAME as GCN
from .nvptx import NAME

GOMP_VERSION = 1  # GCC 12 (libgomp refuses a library version above it)
GOMP_VERSION_NVIDIA_PTX = 1
GOMP_DEVICE_NVIDIA_PTX = 5
VERSION = GOMP_VERSION << 16 | GOMP_VERSION_NVIDIA_PTX  # GOMP_VERSION_PACK
GOMP_DIM_MAX = 3
GCC_MAJOR = "12"
SOURCE = "offlink-gomp-register.c"
CRT_BEGIN, CRT_END = "crtoffloadbegin.o", "crtoffloadend.o"


def ptx_parts(image: bytes) -> list[bytes]:
    """The image's PTX files, as mkoffload cuts them (at each NUL; none after a final NUL)."""
    if not image:
        return []
    parts = image.split(b"\0")
    if image.endswith(b"\0"):
        parts.pop()
    return parts


def c_source(index: int, image: bytes, funcs: list[str], variables: list[str],
             dims: dict[str, tuple[int, ...]]) -> str:
    """The registration, as GCC 12's mkoffload writes it (nvptx/mkoffload.cc, process), for
    host table slot i named funcs[i] / variables[i]. The PTX files are not copied: each
    `ptx_objs` row points into the table's image `index` (the placeholder's
    `__offlink_image_K`, link/reserve.py), at the file and its NUL, as mkoffload's
    `sizeof (ptx_code_N)` counts it: the image is stored once. The constructor finds the
    files (a NUL after each) before registering, so the text depends on their number, not
    their sizes: a relink after one CU changed takes the compiled object from the cache."""
    for n in (*funcs, *variables):
        if not n or any(c in n for c in '"\\\n') or not n.isascii():
            raise LinkError(f"libgomp registration: cannot name '{n}' in C")
    if image and not image.endswith(b"\0"):
        raise LinkError("libgomp registration: the nvptx-none image does not end with a NUL "
                        "(nvptx-none-ld ends every PTX file with one)")
    symbol = image_symbol(index)
    w = [f"/* Written by offlink link: libgomp registration of the nvptx-none image\n"
         f"   (GCC {GCC_MAJOR}'s mkoffload layout; the PTX is the table's image {index}). */",
         "#include <stdint.h>", "", f'extern const char {symbol}[] __attribute__ '
         f'((__visibility__ ("hidden")));', ""]
    parts = len(ptx_parts(image))
    w.append(f"static struct ptx_obj {{\n  const char *code;\n  __SIZE_TYPE__ size;\n"
             f"}} ptx_objs[{parts}];  /* the image's {parts} PTX files: set by init */\n")
    w.append("static const char *const var_mappings[] = {")
    w.append(",\n".join(f'\t"{n}"' for n in variables))
    w += ["};", ""]
    w.append(f"static const struct nvptx_fn {{\n  const char *name;\n"
             f"  unsigned short dim[{GOMP_DIM_MAX}];\n}} func_mappings[] = {{")
    rows = []
    for n in funcs:
        d = dims.get(n, ())[:GOMP_DIM_MAX]
        rows.append(f'\t{{"{n}"' + "".join(f", {v:#x}" for v in d) + "}")
    w.append(",\n".join(rows))
    w += ["};", ""]
    w.append("""static const struct nvptx_tdata {
  const struct ptx_obj *ptx_objs;
  unsigned ptx_num;
  const char *const *var_names;
  unsigned var_num;
  const struct nvptx_fn *fn_names;
  unsigned fn_num;
} target_data = {
  ptx_objs, sizeof (ptx_objs) / sizeof (ptx_objs[0]),
  var_mappings, sizeof (var_mappings) / sizeof (var_mappings[0]),
  func_mappings, sizeof (func_mappings) / sizeof (func_mappings[0])
};

extern void GOMP_offload_register_ver (unsigned, const void *, int, const void *);
extern void GOMP_offload_unregister_ver (unsigned, const void *, int, const void *);

/* crtoffloadtable.o's table, over what crtoffloadbegin.o and crtoffloadend.o delimit. */
#define HIDDEN __attribute__ ((__visibility__ ("hidden")))
extern const void *const __offload_func_table[] HIDDEN;
extern const void *const __offload_funcs_end[] HIDDEN;
extern const void *const __offload_var_table[] HIDDEN;
extern const void *const __offload_vars_end[] HIDDEN;
const void *const __OFFLOAD_TABLE__[] HIDDEN = {
  &__offload_func_table, &__offload_funcs_end, &__offload_var_table, &__offload_vars_end
};
""")
    for fn, call in (("constructor", "init"), ("destructor", "fini")):
        what = "register" if call == "init" else "unregister"
        split = "" if call == "fini" else (
            f"  const char *p = {symbol};\n"
            f"  for (unsigned i = 0; i < sizeof (ptx_objs) / sizeof (ptx_objs[0]); i++)\n"
            f"    {{\n      ptx_objs[i].code = p;\n"
            f"      ptx_objs[i].size = __builtin_strlen (p) + 1;\n"
            f"      p += ptx_objs[i].size;\n    }}\n")
        w.append(f"static __attribute__((__{fn}__)) void {call} (void)\n{{\n{split}"
                 f"  GOMP_offload_{what}_ver ({VERSION:#x}, __OFFLOAD_TABLE__, "
                 f"{GOMP_DEVICE_NVIDIA_PTX}/*NVIDIA_PTX*/, &target_data);\n}}\n")
    return "\n".join(w)


def crt_object(compiler: str, name: str) -> str:
    out = runner.run([compiler, f"-print-file-name={name}"], f"{compiler} -print-file-name")
    path = out.stdout.decode().strip()
    if not os.path.isabs(path) or not os.path.isfile(path):
        raise LinkError(f"libgomp registration: {compiler} has no {name} (a GCC built with "
                        f"offloading has; Debian: gcc-{GCC_MAJOR}-offload-nvptx)")
    return path


KEEP_SCRIPT = """\
/* Written by offlink link: GCC's offload host tables survive --gc-sections. */
SECTIONS
{
  .gnu.offload_funcs : { KEEP (*(.gnu.offload_funcs)) }
  .gnu.offload_vars : { KEEP (*(.gnu.offload_vars)) }
}
INSERT AFTER .data.rel.ro;
"""


def gc_sections(argv: list[str]) -> bool:
    """Whether the link collects unused sections: the last of --gc-sections and
    --no-gc-sections, as -Wl, or -Xlinker words or the linker's own."""
    on = False
    words = iter(argv[1:])
    for a in words:
        items = a[4:].split(",") if a.startswith("-Wl,") else \
            [next(words, "")] if a == "-Xlinker" else [a]
        for w in items:
            if w in ("--gc-sections", "-gc-sections"):
                on = True
            elif w in ("--no-gc-sections", "-no-gc-sections"):
                on = False
    return on


def driver_adds_crt(driver: str, args: list[str]) -> bool:
    """Whether a link by `driver` with `args` gets crtoffloadbegin.o/crtoffloadend.o from
    GCC's own specs (`%{fopenacc|fopenmp:crtoffloadbegin%O%s}`; the last of -fX/-fno-X
    counts)."""
    name = os.path.basename(driver)
    if "clang" in name or not ("gcc" in name or "g++" in name or "gfortran" in name
                               or name in ("cc", "c++")):
        return False
    if any(a in ("-nostartfiles", "-nostdlib", "-r") for a in args):
        return False
    live = {"-fopenmp": False, "-fopenacc": False}
    for a in args:
        if a in live:
            live[a] = True
        elif a.startswith("-fno-") and "-f" + a[5:] in live:
            live["-f" + a[5:]] = False
    return any(live.values())


class _Driver:
    """What omptarget.compile_c reads of a link plan: the driver that compiles the C file."""

    def __init__(self, driver: str):
        self.driver = driver


class GompRegistration(plugins.Registration):
    """libgomp's registration, as the link's registry finds it: made by default where GCC's
    targets' images are linked (as GCC's own link makes it), but where
    OFFLINK_GOMP_REGISTER=0 leaves it out (--gomp-register then wins); it rewrites the host
    link and relinks until the host table's order holds (`Registration`)."""

    name = "gomp"
    option = "--gomp-register"
    relinks = True

    def enabled(self, asked: bool) -> bool:
        return asked or settings.flag("OFFLINK_GOMP_REGISTER")

    def host_step(self, plan, images, workdir, cache, asked):
        return Registration.for_link(plan, images, workdir, asked, cache)


@dataclass
class Registration(plugins.HostStep):
    """The registration of one link's nvptx-none image: its C file, object and host inputs."""

    compiler: str
    data: bytes  # the image
    cus: list  # (label, source, entries) per CU, as the target paired them
    workdir: str
    index: int = 0  # the image's index in the table (its placeholder symbol)
    cache: object = None  # the link's cache (link/cache.py), for the compiled object
    order: dict[str, list[str]] = field(default_factory=dict)  # kind -> keys, table order
    relinks: int = 0
    option = "libgomp registration"  # what asked for it, in the pipeline's messages

    gcn: tuple | None = None  # (index, size, cus, tables) of an amdgcn-amdhsa image

    @classmethod
    def for_link(cls, plan, images, workdir: str, required: bool,
                 cache=None) -> Registration | None:
        """The registration of this link's nvptx-none and amdgcn-amdhsa images (one C file:
        a register call for each, as GCC's link makes one mkoffload file for each); without
        either, None, or an error when --gomp-register asked for one."""
        index = next((k for k, i in enumerate(images) if i.target.name == NAME), None)
        gcn_index = next((k for k, i in enumerate(images) if i.target.name == GCN), None)
        image = None if index is None else images[index]
        if image is None and gcn_index is None:
            if not required:
                return None
            raise UsageError(f"--gomp-register: no {NAME} image in this link (it registers "
                             f"GCC's own offload objects, gcc -fopenmp -foffload={NAME})")
        gcn = None
        if gcn_index is not None:
            g = images[gcn_index]
            gcn = (gcn_index, len(g.data), g.target.link_entries(g.path),  # type: ignore
                   g.target.link_tables(g.path))  # type: ignore[attr-defined]
        cus = image.target.link_entries(image.path) if image is not None \
            else gcn[2]  # type: ignore[attr-defined,index]
        driver = os.path.basename(plan.driver)
        compiler = plan.driver if ("gcc" in driver or "clang" in driver
                                   or driver in ("cc", "c++", "g++")) else "cc"
        version = runner.run([compiler, "-dumpversion"], f"{compiler} -dumpversion")
        major = version.stdout.decode().strip().split(".")[0]
        if major != GCC_MAJOR:
            raise UsageError(f"offlink writes GCC {GCC_MAJOR}'s libgomp registration; the host "
                             f"compiler {compiler} is version {major} (link with gcc-"
                             f"{GCC_MAJOR}, or -foffload=disable for a host-only program)")
        reg = cls(compiler, image.data if image is not None else b"", cus, workdir,
                  index if index is not None else -1, cache)
        reg.gcn = gcn
        reg.order = {kind: [e.key for _l, _s, entries in cus for e in entries
                            if e.host.kind == kind] for kind in ("function", "variable")}
        return reg

    def text(self) -> str:
        """The C file: the nvptx-none image's registration, then the amdgcn-amdhsa one's."""
        out = ""
        if self.index >= 0:
            dims = gcc.func_dims(self.data.decode("utf-8", "replace"))
            out = c_source(self.index, self.data, self.order["function"],
                           self.order["variable"], dims)
        if self.gcn is not None:
            index, size, cus, tables = self.gcn
            # The amdgcn-amdhsa key of each slot, by the CU and host symbol the order's
            # keys (nvptx-none's where both are built) name.
            slot = {(label, e.host.kind, e.host.host_name): e.key
                    for label, _s, entries in cus for e in entries}
            mine = {e.key: slot.get((label, e.host.kind, e.host.host_name), e.key)
                    for label, _s, entries in self.cus for e in entries}
            funcs = [mine.get(k, k) for k in self.order["function"]]
            out += gcn.c_source(image_symbol(index), size, gcn.kernels(funcs, tables),
                                len(self.order["variable"]), alone=self.index < 0)
        return out

    @property
    def object_path(self) -> str:
        return os.path.join(self.workdir, SOURCE[:-2] + ".o")

    def build(self) -> None:
        text = self.text()

        # A relink with the same names, order and PTX file sizes takes the object from the
        # cache (its text names the image by its symbol, not its bytes).
        compile_c(_Driver(self.compiler), text, SOURCE, "the libgomp registration",
                  self.workdir, self.cache)

    def host_argv(self, host: list[str], extra_at: int) -> list[str]:
        """The host link with crtoffloadbegin.o before every input, and the registration and
        crtoffloadend.o after them (`extra_at`: where offlink's own inputs start). GCC's
        driver adds the two itself to a -fopenmp or -fopenacc link (its startfile and endfile
        specs) unless -nostartfiles or -nostdlib. Under --gc-sections a linker script keeps
        the CUs' host tables (KEEP_SCRIPT)."""
        keep = self._keep_tables(host)
        if driver_adds_crt(host[0], host[1:extra_at]):
            return [*host[:extra_at], self.object_path, *keep, *host[extra_at:]]
        begin = crt_object(self.compiler, CRT_BEGIN)
        end = crt_object(self.compiler, CRT_END)
        return [host[0], begin, *host[1:extra_at], self.object_path, end, *keep,
                *host[extra_at:]]

    def _keep_tables(self, host: list[str]) -> list[str]:
        """`-Wl,-T,SCRIPT` keeping `.gnu.offload_funcs`/`.gnu.offload_vars` where the link
        collects unused sections: nothing refers to the CUs' tables, so --gc-sections drops
        them (GCC's own link then registers N names against 0 slots, which libgomp refuses
        on a device); the tables keep their target regions and variables, as they should."""
        if not gc_sections(host):
            return []
        path = os.path.join(self.workdir, "offlink-gomp-keep.ld")
        with open(path, "w", encoding="ascii") as f:
            f.write(KEEP_SCRIPT)
        name = os.path.basename(host[0])
        return ["-T", path] if name == "ld" or name.startswith("ld.") else [f"-Wl,-T,{path}"]

    def check(self, path: str) -> bool:
        """Whether the linked binary's host table is in the registered order; if the CUs'
        tables landed in another order, the C file is rewritten in it (relink, then check
        again). A slot offlink cannot name, or an entry the table lacks, is an error."""
        found = gcc.slot_keys(ElfFile.open(path), self.cus)
        actual: dict[str, list[str]] = {}
        for kind, keys in found.items():
            named = [k for k in keys if k is not None]
            if len(named) != len(keys):
                raise LinkError(f"libgomp registration: {len(keys) - len(named)} of the "
                                f"{len(keys)} {kind} slots of the host table come from no "
                                f"input offlink paired (objects with GCC offload tables "
                                f"offlink did not read?)")
            if sorted(named) != sorted(self.order[kind]):
                raise LinkError(f"libgomp registration: the linked host table has "
                                f"{len(keys)} {kind} slots where the CUs have "
                                f"{len(self.order[kind])} (did -Wl,--gc-sections remove "
                                f"them?); libgomp pairs them by position")
            actual[kind] = named
        if actual == self.order:
            return True
        if self.relinks:
            raise LinkError("libgomp registration: the host table's order changed between two "
                            "links of the same inputs")
        self.order = actual
        self.relinks += 1
        self.build()
        return False
