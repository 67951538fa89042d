"""libgomp's registration of offlink's `nvptx-none` image, as GCC's mkoffload writes it, so
libgomp can run target regions on a GPU: made by default wherever GCC's own link would make it
(`-foffload=disable` on the link line turns GCC's offloading off; OFFLINK_GOMP_REGISTER=0 leaves
the registration out; `--gomp-register`, once the way to ask for it, is accepted and changes
nothing).

Unverified on a real GPU. Per link, a generated C file (compiled by the host compiler, byte
for byte the same for the same numbers of names and PTX files, so a relink takes its object
from the cache) and an object offlink writes itself (`names_object`: no compiler runs) hold
what the objects' GCC release's mkoffload writes (LAYOUTS, checked against each release's own
link under -save-temps): the PTX files (`ptx_objs`, pointing into the image in
`.openmp_target`, so it is stored once), the variable and function names (`var_mappings`,
`func_mappings` with launch dimensions: the names object's) and the `nvptx_tdata` struct, a
constructor calling
`GOMP_offload_register_ver(VERSION, __OFFLOAD_TABLE__, 5, &target_data)` and a destructor
calling `GOMP_offload_unregister_ver` likewise. libgomp pairs host table slot i with name i
(target.c, gomp_load_image_to_device), so the names are written in the order of the linked
binary's `.gnu.offload_funcs`/`.gnu.offload_vars` (and GCC 14+'s `.gnu.offload_ind_funcs`),
each slot named by offlink's by-name pairing; where the link put the CUs' tables in another
order than the inputs suggested, the names are written again in the binary's order and the host
link runs once more.

What changed after GCC 12 (nvptx/mkoffload.cc and libgomp/target.c of each release):
- GCC 13 (GOMP_VERSION 2, 0x20001): `nvptx_tdata` starts with `omp_requires_mask`, the
  program's `omp requires` clauses, which every CU's accel compile writes to
  GCC_OFFLOAD_OMP_REQUIRES_FILE (nvptx.py keeps each CU's in its object; combined_mask joins
  them as lto1 does). Under `requires reverse_offload` mkoffload adds a PTX file of its own,
  `$offload_func_table` (func_table).
- GCC 14, 15, 16 (GOMP_VERSION 3, 0x30001): `ind_fn_num` at the end, a PTX file
  `$offload_ind_func_table` naming the `declare target indirect` functions (ind_func_table),
  and a six-word host table (crtoffloadtable.o's: funcs, vars, ind_funcs, begin and end each).

`__OFFLOAD_TABLE__` spans those sections as in GCC's link: crtoffloadbegin.o (from the GCC
install) comes before every input and crtoffloadend.o after them. The table itself is
crtoffloadtable.o's pointers, defined in the generated file instead of taking that object:
GCC 12's crtoffloadtable.o keeps them in `.rodata`, which gives a PIE text relocations (GCC's
own link warns "relocation ... in read-only section"); compiled -fPIC here they go to
`.data.rel.ro` (as GCC 14+'s lto-wrapper compiles its own). GOMP_VERSION_NVIDIA_PTX is 1 in
every release (the plugin refuses a larger device version), GOMP_DEVICE_NVIDIA_PTX 5.
"""

from __future__ import annotations

import os
import re
import struct
import sys
from typing import NamedTuple

from ... import plugins, settings
from ... import run as runner
from ...elf import DataTable, ElfFile, data_object
from ...errors import LinkError, OfflinkError, UsageError
from ...formats.table import image_symbol
from ...model import find_library
from ...plugins import host_e_machine
from ..llvm.omptarget import compile_c
from . import dialect as gcc
from . import gcn
from .gcn import NAME as GCN
from .nvptx import NAME, cu_masks

GOMP_DEVICE_NVIDIA_PTX = 5
GOMP_DIM_MAX = 3
SOURCE = "offlink-gomp-register.c"
NAMES_OBJECT = "offlink-gomp-names.o"  # names_object's, beside the C file's object


class Layout(NamedTuple):
    """What one GCC release's nvptx mkoffload writes (its gcc/config/nvptx/mkoffload.cc and
    libgomp/target.c; checked against each release's own link under -save-temps)."""

    version: int  # GOMP_VERSION_PACK (GOMP_VERSION, GOMP_VERSION_NVIDIA_PTX)
    requires: bool  # nvptx_data starts with omp_requires_mask (GOMP_VERSION 2+)
    indirect: bool  # ind_fn_num last, the `$offload_ind_func_table` file, a six-word host
    #                 table (funcs, vars, ind_funcs: begin and end each; GOMP_VERSION 3+)


# GCC 12: GOMP_VERSION 1 (libgomp refuses a library version above its own); 13: 2; 14, 15
# and 16 (16.2: its libgomp takes GOMP_VERSION 3 still): 3; GOMP_VERSION_NVIDIA_PTX 1.
LAYOUTS = {"12": Layout(0x10001, False, False), "13": Layout(0x20001, True, False),
           "14": Layout(0x30001, True, True), "15": Layout(0x30001, True, True),
           "16": Layout(0x30001, True, True)}

# gomp-constants.h: the `omp requires` clauses a mask holds (GOMP_REQUIRES_*), as GCC names
# them (omp-general.cc, omp_requires_to_name)
REQUIRES_REVERSE_OFFLOAD = 0x80
REQUIRES_NAMES = ((0x10, "unified_address"), (0x20, "unified_shared_memory"),
                  (0x40, "self_maps"), (REQUIRES_REVERSE_OFFLOAD, "reverse_offload"))


def requires_clauses(mask: int) -> str:
    """The clauses of a mask as GCC names them ("none" for a CU that has no `requires`)."""
    return ", ".join(n for bit, n in REQUIRES_NAMES if mask & bit) or "none"


def combined_mask(labels: list[str], masks: list[int | None]) -> int:
    """The program's `requires` mask from its CUs' (link order), as GCC 13+'s lto1 combines
    them (input_offload_tables): the first CU's that is not 0; a CU whose mask is not 0 and
    differs from it is refused in one line naming both CUs and both sets of clauses (GCC's
    lto1 refuses them too, naming neither)."""
    first = None
    for label, mask in zip(labels, masks):
        if not mask:
            continue
        if first is None:
            first = (label, mask)
        elif mask != first[1]:
            raise LinkError(f"{first[0]} has `omp requires` {requires_clauses(first[1])} and "
                            f"{label} {requires_clauses(mask)}: the CUs of one program must "
                            f"agree (GCC's link refuses them too: \"OpenMP 'requires' "
                            f"directive with non-identical clauses in multiple compilation "
                            f"units\"; libgomp would abort at run time)")
    return first[1] if first else 0


def library_mask(path: str) -> int | None:
    """The `omp requires` mask a shared library registers with libgomp, read as `offlink
    inspect` reads it (gcc/binary.py); None where it has none (GCC 12, or no registration)."""
    # inspect's reader, imported only by a link that has a shared library to read
    # (benchmarks/gcc_offload/RESULTS.md)
    from . import binary

    try:
        return binary.requires_mask(ElfFile.open(path))
    except (OfflinkError, OSError, ValueError):
        return None


def library_masks(plan, mask: int, output: str) -> None:
    """A warning for each shared library of the link whose registered `requires` mask differs
    from the program's (`mask`, not 0): libgomp refuses the pair at run time (GCC's own program
    prints libgomp's message, then hangs at exit), which offlink cannot refuse at link time
    (the library may be linked again)."""
    if not mask:
        return
    for i in plan.inputs:
        path = i.path if i.kind == "file" else find_library(i.path, plan, i.static)
        if not path or not (path.endswith(".so") or ".so." in os.path.basename(path)):
            continue
        theirs = library_mask(path)
        if theirs and theirs != mask:
            print(f"offlink: warning: {output} has `omp requires` {requires_clauses(mask)} "
                  f"and {path} {requires_clauses(theirs)}: libgomp refuses the two at run "
                  f"time (its \"OpenMP 'requires' directive\" error), and GCC's own program "
                  f"then hangs at exit",
                  file=sys.stderr)


_VERSION_LINE = re.compile(rb"\n\.version ([^\n\0]*)")
_TARGET_LINE = re.compile(rb"\n\.target sm_([^\n\0]*)")
_FUNC_DECL = "// BEGIN GLOBAL FUNCTION DECL: "


def _dummy_head(ptx: bytes, number: bytes, where: str) -> list[bytes]:
    """The head of a PTX file mkoffload adds: the last `.version` and `.target` of `ptx`, then
    its dummy function (`.file N`, `__dummy$func` and `__dummy$func2` for file 2)."""
    versions, targets = _VERSION_LINE.findall(ptx), _TARGET_LINE.findall(ptx)
    if not versions or not targets:
        raise LinkError(f"libgomp registration: the nvptx-none image has no .version or "
                        f".target line{where}")
    dummy = b"__dummy$func" + (number if number != b"1" else b"")
    return [b".version " + versions[-1], b".target sm_" + targets[-1],
            b'.file ' + number + b' "<dummy>"', b".func " + dummy + b" ( );",
            b".func " + dummy + b" ( )", b"{", b"}"]


def ind_func_table(image: bytes, names: list[str]) -> bytes:
    """The PTX file GCC 14+'s mkoffload adds for `declare target indirect` functions
    (process(), `if (ind_func_ids)`): the `.version` and `.target` the image's last such
    lines say, a dummy function, an `.extern` declaration of each function (its
    `// BEGIN GLOBAL FUNCTION DECL:` line's next line from the first `.func` on) and
    `$offload_ind_func_table`, the functions in host table order; byte for byte as
    mkoffload's C strings make it (no newline but the last)."""
    out = _dummy_head(image, b"2", "")
    for name in names:
        line = _declaration(image, name)
        if b".func" not in line:
            raise LinkError(f"libgomp registration: indirect function '{name}' is declared "
                            f"without .func in the nvptx-none image")
        out.append(b".extern " + line[line.index(b".func"):])
    out.append(b".visible .global .align 8 .u64 $offload_ind_func_table[] = {"
               + ",".join(names).encode() + b"};\n")
    return b"".join(out)


def is_nohost(name: str) -> bool:
    """Whether a target region runs on the host only (a `device (ancestor: 1)` region: the
    device calls it back through `$offload_func_table`)."""
    return name.endswith("$nohost") or "$nohost$" in name


def func_table(image: bytes, funcs: list[str]) -> bytes:
    """The PTX file GCC 13+'s mkoffload adds under `requires reverse_offload` (process(),
    `if (func_ids && ...)`): the `.version` and `.target` its scan had at the end of the last
    file with MAP lines (version2, sm_ver2), a dummy function, an `.extern` declaration of
    every host-only region (its `// BEGIN GLOBAL FUNCTION DECL:` line's next line less its
    `.visible `) and `$offload_func_table`: each function of func_mappings' order, 0 for
    those that are not host-only."""
    parts = ptx_parts(image)
    mapped = [i for i, p in enumerate(parts) if b"\n//:FUNC_MAP " in p
              or b"\n//:IND_FUNC_MAP " in p]
    upto = b"\0".join(parts[:mapped[-1] + 1]) if mapped else b""
    out = _dummy_head(upto, b"1", " before its last FUNC_MAP")
    for name in filter(is_nohost, funcs):
        line = _declaration(image, name)
        if not line.startswith(b".visible "):
            raise LinkError(f"libgomp registration: host-only region '{name}' is not "
                            f".visible in the nvptx-none image")
        out.append(b".extern " + line[len(b".visible "):])
    out.append(b".visible .global .align 8 .u64 $offload_func_table[] = {"
               + ",".join(n if is_nohost(n) else "0" for n in funcs).encode() + b"};\n")
    return b"".join(out)


def _declaration(image: bytes, name: str) -> bytes:
    """The line after the image's first `// BEGIN GLOBAL FUNCTION DECL: NAME` line."""
    at = image.find((_FUNC_DECL + name + "\n").encode())
    if at < 0:
        raise LinkError(f"libgomp registration: no declaration of function '{name}' in the "
                        f"nvptx-none image (GCC's mkoffload: \"Cannot find function "
                        f"declaration\")")
    return image[at + len(_FUNC_DECL) + len(name) + 1:].split(b"\n", 1)[0]


CRT_BEGIN, CRT_END = "crtoffloadbegin.o", "crtoffloadend.o"


def ptx_parts(image: bytes) -> list[bytes]:
    """The image's PTX files, as mkoffload cuts them (at each NUL; none after a final NUL)."""
    if not image:
        return []
    parts = image.split(b"\0")
    if image.endswith(b"\0"):
        parts.pop()
    return parts


NAMES = ("__offlink_gomp_var_names", "__offlink_gomp_fn_names")  # names_object's arrays
FN_DESC = (8 + 2 * GOMP_DIM_MAX + 7) // 8 * 8  # struct nvptx_fn: a pointer and the dims


def c_source(index: int, image: bytes, funcs: list[str], variables: list[str],
             release: str = "12", mask: int = 0, indirect: tuple[str, ...] = ()) -> str:
    """The registration's code, as GCC `release`'s mkoffload writes it (nvptx/mkoffload.cc,
    process; LAYOUTS), for len(funcs) functions, len(variables) variables and len(indirect)
    indirect functions (`mask`: the program's `omp requires` mask, GCC 13+). The names and
    launch dimensions are not in it: `var_mappings` and `func_mappings` are names_object's
    arrays, and mkoffload's own PTX files (func_table, ind_func_table) its strings. The PTX
    files are not copied: each `ptx_objs` row points into the table's image `index` (the
    placeholder's `__offlink_image_K`, link/reserve.py), at the file and its NUL, as
    mkoffload's `sizeof (ptx_code_N)` counts it: the image is stored once. The constructor
    finds the files (a NUL after each) before registering. So the text depends on the
    numbers of names and files, not on the names or sizes: a relink after one CU changed
    (its statics' names carry a hash of the CU: `s$cu0_c$1ff1aaeb`) takes the compiled object
    from the cache. GCC 14+'s `$offload_ind_func_table` file, where there are indirect
    functions, is the last row (ind_func_table)."""
    layout = LAYOUTS[release]
    if image and not image.endswith(b"\0"):
        raise LinkError("libgomp registration: the nvptx-none image does not end with a NUL "
                        "(nvptx-none-ld ends every PTX file with one)")
    if indirect and not layout.indirect:
        raise LinkError(f"libgomp registration: GCC {release} has no `declare target "
                        f"indirect` functions")
    symbol = image_symbol(index)
    w = [f"/* Written by offlink link: libgomp registration of the nvptx-none image\n"
         f"   (GCC {release}'s mkoffload layout; the PTX is the table's image {index}, the\n"
         f"   names and mkoffload's own PTX files are offlink-gomp-names.o's). */",
         "#include <stdint.h>", "", "#define HIDDEN __attribute__ ((__visibility__ (\"hidden\")))",
         f"extern const char {symbol}[] HIDDEN;", ""]
    parts = len(ptx_parts(image))
    extra = extra_names(layout, funcs, mask, indirect)
    for name in extra:
        w.append(f"extern const char __offlink_gomp_{name}[] HIDDEN;  /* mkoffload's "
                 f"`${'offload_' + name}` file */")
    rows = parts + len(extra)
    w.append(f"static struct ptx_obj {{\n  const char *code;\n  __SIZE_TYPE__ size;\n"
             f"}} ptx_objs[{rows}];  /* the image's {parts} PTX files: set by init */\n")
    w.append(f"struct nvptx_fn {{\n  const char *name;\n  unsigned short dim[{GOMP_DIM_MAX}];"
             f"\n}};")
    w.append(f"extern const char *const {NAMES[0]}[{len(variables)}] HIDDEN;")
    w.append(f"extern const struct nvptx_fn {NAMES[1]}[{len(funcs)}] HIDDEN;\n")
    head = "  uintptr_t omp_requires_mask;\n" if layout.requires else ""
    tail = "  unsigned ind_fn_num;\n" if layout.indirect else ""
    w.append(f"""static const struct nvptx_tdata {{
{head}  const struct ptx_obj *ptx_objs;
  unsigned ptx_num;
  const char *const *var_names;
  unsigned var_num;
  const struct nvptx_fn *fn_names;
  unsigned fn_num;
{tail}}} target_data = {{
  {f"{mask}, " if layout.requires else ""}ptx_objs, {rows},
  {NAMES[0]}, {len(variables)},
  {NAMES[1]}, {len(funcs)}{f", {len(indirect)}" if layout.indirect else ""}
}};

extern void GOMP_offload_register_ver (unsigned, const void *, int, const void *);
extern void GOMP_offload_unregister_ver (unsigned, const void *, int, const void *);
""")
    names = ["func_table", "funcs_end", "var_table", "vars_end"]
    if layout.indirect:
        names += ["ind_func_table", "ind_funcs_end"]
    w.append("/* crtoffloadtable.o's table, over what crtoffloadbegin.o and crtoffloadend.o "
             "delimit. */")
    w += [f"extern const void *const __offload_{n}[] HIDDEN;" for n in names]
    w.append("const void *const __OFFLOAD_TABLE__[] HIDDEN = {\n  "
             + ", ".join(f"&__offload_{n}" for n in names) + "\n};\n")
    for fn, call in (("constructor", "init"), ("destructor", "fini")):
        what = "register" if call == "init" else "unregister"
        split = "" if call == "fini" else (
            f"  const char *p = {symbol};\n"
            f"  for (unsigned i = 0; i < {parts}; i++)\n"
            f"    {{\n      ptx_objs[i].code = p;\n"
            f"      ptx_objs[i].size = __builtin_strlen (p) + 1;\n"
            f"      p += ptx_objs[i].size;\n    }}\n")
        if call == "init":
            for k, name in enumerate(extra, parts):
                split += (f"  ptx_objs[{k}].code = __offlink_gomp_{name};\n"
                          f"  ptx_objs[{k}].size = __builtin_strlen (__offlink_gomp_{name})"
                          f" + 1;\n")
        w.append(f"static __attribute__((__{fn}__)) void {call} (void)\n{{\n{split}"
                 f"  GOMP_offload_{what}_ver ({layout.version:#x}, __OFFLOAD_TABLE__, "
                 f"{GOMP_DEVICE_NVIDIA_PTX}/*NVIDIA_PTX*/, &target_data);\n}}\n")
    return "\n".join(w)


def extra_names(layout, funcs: list[str], mask: int, indirect: tuple[str, ...]) -> list[str]:
    """The C names of mkoffload's own PTX files after the image's: `$offload_func_table`
    under `requires reverse_offload` (GCC 13+), `$offload_ind_func_table` where there are
    indirect functions (GCC 14+); extra_files makes their text."""
    names = []
    if layout.requires and mask & REQUIRES_REVERSE_OFFLOAD and funcs:
        names.append("func_table")
    if indirect:
        names.append("ind_func_table")
    return names


def extra_files(layout, image: bytes, funcs: list[str], mask: int,
                indirect: tuple[str, ...]) -> list[tuple[str, bytes]]:
    """mkoffload's own PTX files after the image's (extra_names), (C name, text)."""
    return [(name, func_table(image, funcs) if name == "func_table"
             else ind_func_table(image, list(indirect)))
            for name in extra_names(layout, funcs, mask, indirect)]


def names_object(e_machine: int, image: bytes, funcs: list[str], variables: list[str],
                 dims: dict[str, tuple[int, ...]], release: str = "12", mask: int = 0,
                 indirect: tuple[str, ...] = ()) -> bytes:
    """What c_source leaves out, as an object (elf.data_object: no compiler runs): the
    variables' names (`var_mappings`: a pointer each), the functions' (`func_mappings`: a
    pointer and GOMP_DIM_MAX launch dimensions each, 0 where `//:FUNC_MAP` gives none, as
    mkoffload's initializer leaves them), in host table order, and mkoffload's own PTX files
    (extra_files), each with its NUL."""
    for n in (*funcs, *variables, *indirect):
        if not n or "\0" in n:
            raise LinkError(f"libgomp registration: cannot name {n!r}")
    strings = bytearray()

    def string(data: bytes) -> int:
        at = len(strings)
        strings.extend(data + b"\0")
        return at

    var_names = [string(n.encode()) for n in variables]
    fn_names = [string(n.encode()) for n in funcs]
    fn_table = bytearray()
    for n in funcs:
        d = [v & 0xFFFF for v in dims.get(n, ())[:GOMP_DIM_MAX]]
        fn_table += struct.pack(f"<Q{GOMP_DIM_MAX}H", 0, *d, *[0] * (GOMP_DIM_MAX - len(d)))
        fn_table += bytes(-len(fn_table) % 8)
    tables = [DataTable(NAMES[0], bytes(8 * len(variables)),
                        tuple((8 * i, at) for i, at in enumerate(var_names))),
              DataTable(NAMES[1], bytes(fn_table),
                        tuple((FN_DESC * i, at) for i, at in enumerate(fn_names)))]
    layout = LAYOUTS[release]
    for name, data in extra_files(layout, image, funcs, mask, indirect):
        tables.append(DataTable(f"__offlink_gomp_{name}", data + b"\0"))
    return data_object(e_machine, bytes(strings), tables)


def crt_object(compiler: str, name: str, release: str = "12") -> str:
    out = runner.run([compiler, f"-print-file-name={name}"], f"{compiler} -print-file-name")
    path = out.stdout.decode().strip()
    if not os.path.isabs(path) or not os.path.isfile(path):
        raise LinkError(f"libgomp registration: {compiler} has no {name} (a GCC built with "
                        f"offloading has; Debian: gcc-{release}-offload-nvptx)")
    return path


KEEP_SCRIPT = """\
/* Written by offlink link: GCC's offload host tables survive --gc-sections. */
SECTIONS
{
  .gnu.offload_funcs : { KEEP (*(.gnu.offload_funcs)) }
  .gnu.offload_vars : { KEEP (*(.gnu.offload_vars)) }
  .gnu.offload_ind_funcs : { KEEP (*(.gnu.offload_ind_funcs)) }
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


def c_driver(driver: str) -> str:
    """The C compiler of a link by `driver`: the driver itself, the gcc beside a g++ or
    gfortran (`g++-14` -> `gcc-14`: the registration is C), else cc."""
    folder, name = os.path.split(driver)
    if "g++" in name or "gfortran" in name:
        return os.path.join(folder, name.replace("g++", "gcc").replace("gfortran", "gcc"))
    if "gcc" in name or "clang" in name or name in ("cc", "c++"):
        return driver
    return "cc"


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


def compiler_major(compiler: str, cache=None) -> str:
    """The GCC release of `compiler` (`-dumpversion`'s major), kept in the cache under the
    compiler's identity (its path, content and `--version`, remembered by its stamp), so a
    relink runs no compiler to ask."""
    identity = cache.tool_identity(compiler) if cache is not None else None
    key = cache.key("gcc-dumpversion", identity) if identity is not None else None
    hit = cache.get(key, count=False) if key is not None else None
    if hit is not None and isinstance(hit.meta.get("major"), str):
        return hit.meta["major"]
    version = runner.run([compiler, "-dumpversion"], f"{compiler} -dumpversion")
    major = version.stdout.decode().strip().split(".")[0]
    if key is not None:
        cache.put(key, {"major": major}, b"")
    return major


class Registration(plugins.HostStep):
    """The registration of one link's nvptx-none image: its C file, object and host inputs."""

    option = "libgomp registration"  # what asked for it, in the pipeline's messages

    def __init__(self, compiler: str, data: bytes, cus: list, workdir: str, index: int = 0,
                 cache: object = None):
        self.compiler = compiler
        self.data = data  # the image
        self.cus = cus  # (label, source, entries) per CU, as the target paired them
        self.workdir = workdir
        self.index = index  # the image's index in the table (its placeholder symbol); -1: none
        self.cache = cache  # the link's cache (link/cache.py), for the compiled object
        self.order: dict[str, list[str]] = {}  # kind -> keys, table order
        self.relinks = 0
        self.gcn: tuple | None = None  # (index, size, cus, tables) of an amdgcn-amdhsa image
        self.release = "12"  # the GCC release of the objects (LAYOUTS)
        self.mask = 0  # the program's `omp requires` mask (GCC 13+)

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
        release = getattr((image or images[gcn_index]).target, "release", "12")
        if release not in LAYOUTS:
            raise UsageError(f"offlink writes the libgomp registration of GCC "
                             f"{', '.join(LAYOUTS)}; these objects are GCC {release}'s")
        compiler = c_driver(plan.driver)
        major = compiler_major(compiler, cache)
        if major != release:
            raise UsageError(f"the offload objects are GCC {release}'s and the host compiler "
                             f"{compiler} is GCC {major}: libgomp {release} takes GCC "
                             f"{release}'s registration (link with gcc-{release}, or "
                             f"-foffload=disable for a host-only program)")
        reg = cls(compiler, image.data if image is not None else b"", cus, workdir,
                  index if index is not None else -1, cache)
        reg.gcn = gcn
        reg.release = release
        reg.order = {kind: [e.key for _l, _s, entries in cus for e in entries
                            if e.host.kind == kind]
                     for kind in ("function", "variable", gcc.INDIRECT)}
        if LAYOUTS[release].requires and image is not None:
            reg.mask = combined_mask([label for label, _s, _e in cus],
                                     cu_masks(image.data, len(cus)))
        elif LAYOUTS[release].requires and gcn is not None:  # amdgcn-amdhsa alone
            reg.mask = combined_mask([label for label, _s, _e in gcn[2]],
                                     [t.mask for t in gcn[3]])
        library_masks(plan, reg.mask, plan.output)
        return reg

    def text(self) -> str:
        """The C file: the nvptx-none image's registration, then the amdgcn-amdhsa one's."""
        out = ""
        if self.index >= 0:
            out = c_source(self.index, self.data, self.order["function"],
                           self.order["variable"], self.release, self.mask,
                           tuple(self.order[gcc.INDIRECT]))
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
                                len(self.order["variable"]), alone=self.index < 0,
                                gcc_release=self.release, mask=self.mask,
                                ind_count=len(self.order[gcc.INDIRECT]))
        return out

    def names(self) -> bytes | None:
        """The nvptx-none registration's names object (names_object), None without one."""
        if self.index < 0:
            return None
        dims = gcc.func_dims(self.data)
        return names_object(host_e_machine(), self.data, self.order["function"],
                            self.order["variable"], dims, self.release, self.mask,
                            tuple(self.order[gcc.INDIRECT]))

    @property
    def object_path(self) -> str:
        return os.path.join(self.workdir, SOURCE[:-2] + ".o")

    @property
    def names_path(self) -> str:
        return os.path.join(self.workdir, NAMES_OBJECT)

    def build(self) -> None:
        """The names object, written each link; the C file's object, compiled or (a relink
        with the same numbers of names and PTX files) taken from the cache: its text names
        neither the names nor the image's bytes."""
        names = self.names()
        if names is not None:
            with open(self.names_path, "wb") as f:
                f.write(names)
        compile_c(_Driver(self.compiler), self.text(), SOURCE, "the libgomp registration",
                  self.workdir, self.cache)

    def host_argv(self, host: list[str], extra_at: int) -> list[str]:
        """The host link with crtoffloadbegin.o before every input, and the registration and
        crtoffloadend.o after them (`extra_at`: where offlink's own inputs start). GCC's
        driver adds the two itself to a -fopenmp or -fopenacc link (its startfile and endfile
        specs) unless -nostartfiles or -nostdlib. Under --gc-sections a linker script keeps
        the CUs' host tables (KEEP_SCRIPT)."""
        keep = self._keep_tables(host)
        if driver_adds_crt(host[0], host[1:extra_at]):
            return [*host[:extra_at], *self._objects(), *keep, *host[extra_at:]]
        begin = crt_object(self.compiler, CRT_BEGIN, self.release)
        end = crt_object(self.compiler, CRT_END, self.release)
        return [host[0], begin, *host[1:extra_at], *self._objects(), end, *keep,
                *host[extra_at:]]

    def _objects(self) -> list[str]:
        """The registration's objects in the host link: the C file's, then the names'."""
        return [self.object_path, *([self.names_path] if self.index >= 0 else [])]

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
