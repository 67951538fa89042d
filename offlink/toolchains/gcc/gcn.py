"""GCC's `amdgcn-amdhsa` offload images (GCC 12, 14, 15, 16) built one CU at a time: the steps,
as plain functions, and the link target that runs them (GccGcnTarget, at the end).

Each step is checked against GCC 12's own link of the same objects (tests/test_gcc_amdgcn.py):
GCC's mkoffload (gcn/mkoffload.cc)
compiles every CU of the program together (`<accel gcc> -S -m64 -xlto -mgomp ... -o X.1.s`),
rewrites that assembly (process_asm: the host function table dropped, a global
`.offload_var_table` label put before the joined variable tables, the kernels and their
register counts read), assembles and links it with GCC's device libraries (the accel driver,
which runs llvm-mc-13 and lld-13 from gcc-12-offload-amdgcn) into one HSA code object, and writes
a C file registering it with libgomp. Here each CU is compiled to assembly alone
(`compile_argv`), rewritten alone (`read_asm`, `without_func_tables`), assembled alone
(`assemble_argv`), and the objects are linked after `VAR_TABLE_START` (`link_argv`): lld joins
the CUs' `.gnu.offload_vars` in input order, so `.offload_var_table` starts the same table.
`c_source` writes the registration as GCC 12's mkoffload does (gomp.py puts it in the link's
libgomp registration, beside nvptx-none's): GOMP_VERSION 1 and
GOMP_VERSION_GCN 2 (0x10002), GOMP_DEVICE_GCN 8, target_data a `gcn_image_desc` {the image
{size, bytes}, the kernels (`_init_array`, `_fini_array`, then one per host function slot, in
the host table's order: libgomp's plugin pairs them by position), the variable count (the
plugin reads the variables' addresses from `.offload_var_table` in the image)}.

GCC 14, 15 and 16 (tests/test_gcc_later.py, against each release's own link): every CU's
compile writes its `requires` mask (GCC_OFFLOAD_OMP_REQUIRES_FILE, kept at the end of its
assembly); process_asm keeps the function tables and puts global `.offload_func_table` and
`.offload_ind_func_table` labels before them too (the start object has all three); the
registration is 0x30003, `gcn_data` {mask, the image, the kernels, the indirect functions'
count, the variables' count}; the multilib, the linker and the xnack/sram-ecc words are those
the release's accel driver and mkoffload choose (multilib, linker, later_flags).
"""

from __future__ import annotations

import functools
import os
import re

from ... import run as runner
from ...elf import ElfFile, elf_files
from ...errors import FormatError, LinkError, ToolError, UsageError
from ...model import Offer
from ...plugins import Target
from . import dialect as gcc
from .nvptx import (
    GCC_LIBRARIES,
    REQUIRES_FILE,
    _driver_words,
    _host_side,
    _tag,
    accel_libdir,
    device_libraries,
    missing_symbols,
    mkoffload_library,
    release,
    run_compile,
    written_mask,
)

NAME = "amdgcn-amdhsa"
GOMP_VERSION = 1  # GCC 12
GOMP_VERSION_GCN = 2
GOMP_DEVICE_GCN = 8
VERSION = GOMP_VERSION << 16 | GOMP_VERSION_GCN  # GOMP_VERSION_PACK
DEFAULT_ARCH = "fiji"  # GCC 12's accel compiler without -march= (gfx803)
# GCC 12's -march= values and their ELF e_flags machine (LLVM's AMDGPUUsage, EF_AMDGPU_MACH).
MACH = {"fiji": 0x2A, "gfx900": 0x2C, "gfx906": 0x2F, "gfx908": 0x30}
# The libraries the accel driver links an image with: mkoffload's -lgomp, then its link spec's.
LIBRARIES = ["-lgomp", "-lgcc", "-lc", "-lgcc"]
# mkoffload's own kernels, from crt0.o: they run the image's constructors and destructors.
INIT_KERNELS = ("_init_array", "_fini_array")


class DeviceTables:
    """What mkoffload's process_asm reads from a CU's assembly: the host function table's
    names and the variable table's (name, size) rows, in order, and each kernel's register
    counts and OpenACC launch dimensions."""

    def __init__(self):
        self.functions: list[str] = []
        self.variables: list[tuple[str, int]] = []
        self.regcounts: dict[str, tuple[int, int]] = {}
        self.dims: dict[str, tuple[int, int, int]] = {}
        self.indirect: list[str] = []  # GCC 14+: `.gnu.offload_ind_funcs`
        self.mask: int | None = None  # GCC 13+: the CU's `omp requires` mask (REQUIRES_LINE)


# GCC 13+: the CU's `omp requires` mask, kept at the end of its assembly (the compiled object
# the cache keeps), as nvptx.py keeps it in the PTX.
REQUIRES_LINE = "; offlink: omp_requires {:#x}\n"
_REQUIRES = re.compile(r"^; offlink: omp_requires (0x[0-9a-f]+)$", re.M)


_SECTION = re.compile(r"^\s*\.(?:section|text|data|bss)\b")
_QUAD = re.compile(r"^\s*\.8byte\s+(\S+)\s*$")
_DIMS = re.compile(r"^\s*;; OPENACC-DIMS: (-?\d+), (-?\d+), (-?\d+) : (\S+)\s*$")
_META_NAME = re.compile(r"^\s*- \.name:\s+(\S+)\s*$")
# (gfx10+ follow the count with a comment: `.vgpr_count: 24 ; wavefrontsize64 counts ...`)
_META_COUNT = re.compile(r"^\s*\.(sgpr|vgpr)_count:\s+(\d+)\s*(?:;.*)?$")


def read_asm(asm: str) -> DeviceTables:
    """The CU's tables, as process_asm reads them (its states: code, metadata, variable
    table, function table)."""
    out = DeviceTables()
    state = "code"
    kernel = ""
    counts: dict[str, int] = {}
    lines = iter(asm.splitlines())
    for line in lines:
        if state == "code":
            m = _DIMS.match(line)
            if m:
                out.dims[m.group(4)] = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif state == "metadata":
            m = _META_NAME.match(line)
            if m:
                kernel, counts = m.group(1), {}
            m = _META_COUNT.match(line)
            if m and kernel:
                counts[m.group(1)] = int(m.group(2))
                if len(counts) == 2:
                    out.regcounts[kernel] = (counts["sgpr"], counts["vgpr"])
        elif state == "vars":
            m = _QUAD.match(line)
            if m:
                size = _QUAD.match(next(lines, ""))
                if size is None or not size.group(1).lstrip("-").isdigit():
                    raise ValueError(f"a variable table row of {m.group(1)} without its size")
                # `declare target link`: bit 63 set, which the assembly writes as negative.
                out.variables.append((m.group(1), int(size.group(1)) % (1 << 64)))
        elif state in ("funcs", "ind"):
            m = _QUAD.match(line)
            if m:
                (out.functions if state == "funcs" else out.indirect).append(m.group(1))
        stripped = line.strip()
        if stripped.startswith(".section"):
            state = ("vars" if ".gnu.offload_vars" in stripped else
                     "funcs" if ".gnu.offload_funcs" in stripped else
                     "ind" if ".gnu.offload_ind_funcs" in stripped else "code")
        elif stripped == ".amdgpu_metadata":
            state = "metadata"
        elif stripped == ".end_amdgpu_metadata" or _SECTION.match(line):
            state = "code"
    m = _REQUIRES.search(asm)
    out.mask = int(m.group(1), 16) if m else None
    return out


def without_func_tables(asm: str) -> str:
    """The CU's assembly less its `.gnu.offload_funcs` sections (as process_asm writes it:
    the host function table's relocations have no use in the image)."""
    out = []
    skipping = False
    for line in asm.splitlines(keepends=True):
        if _SECTION.match(line) or line.strip() == ".amdgpu_metadata":
            skipping = line.strip().startswith(".section") and ".gnu.offload_funcs" in line
        if not skipping:
            out.append(line)
    return "".join(out)


def target_directive(asm: str) -> str:
    """The CU's `.amdgcn_target "..."` line (the target ID its objects are assembled for)."""
    m = re.search(r'^\s*\.amdgcn_target\s+"[^"]*"\s*$', asm, re.M)
    if m is None:
        raise ValueError("no .amdgcn_target line (not GCC's GCN assembly?)")
    return m.group(0).strip()


def var_table_start(directive: str, later: bool = False) -> str:
    """The assembly of the object linked before every CU's: the global `.offload_var_table`
    label at the start of `.gnu.offload_vars` (process_asm puts it before the first CU's rows;
    lld joins the CUs' sections in input order after it); `later` (GCC 14+, whose
    process_asm keeps the function tables), `.offload_func_table` and
    `.offload_ind_func_table` at the start of theirs too."""
    tables = [(".gnu.offload_vars", ".offload_var_table")]
    if later:
        tables += [(".gnu.offload_funcs", ".offload_func_table"),
                   (".gnu.offload_ind_funcs", ".offload_ind_func_table")]
    align = "\t.p2align 3\n" if later else ""
    return f"\t{directive}\n" + "".join(
        f"\t.section\t{section},\"aw\"\n{align}\t.global {label}\n"
        f"\t.type {label}, @object\n{label}:\n" for section, label in tables)


def arch(options) -> str:
    """The -march= the accel compiler gets (the last one), GCC 12's default without one."""
    found = [o[len("-march="):] for o in options if o.startswith("-march=")]
    return found[-1] if found else DEFAULT_ARCH


def device_flags(options) -> list[str]:
    """The xnack and sram-ecc words GCC 12's mkoffload gives its assemble-and-link step:
    -mxnack only where the options say so, the last -msram-ecc= (`any` without one)."""
    xnack = "-mno-xnack"
    sram = "-msram-ecc=any"
    for o in options:
        if o in ("-mxnack", "-mno-xnack"):
            xnack = o
        elif o in ("-msram-ecc=on", "-msram-ecc=off", "-msram-ecc=any"):
            sram = o
    return [xnack, sram]


def compile_argv(compiler: str, options, source: str, output: str,
                 gcc_release: int = 12) -> list[str]:
    """One CU's accel compile to assembly, as mkoffload's compile of the whole program
    (`-mgomp` for OpenMP only: OpenACC has no -mgomp multilib; GCC 15+ adds
    -mfake-exceptions); GCC 13+'s lto1 writes the CU's `requires` mask where REQUIRES_FILE
    says."""
    gomp = [] if "-fopenacc" in options and "-fopenmp" not in options else ["-mgomp"]
    if gcc_release >= 15:
        gomp.append("-mfake-exceptions")
    env = ["env", f"{REQUIRES_FILE}={output}.omp_requires"] if gcc_release >= 13 else []
    return [*env, compiler, "-S", "-m64", "-xlto", *gomp, *options, source, "-o", output]


def assemble_argv(shown: str, asm: str, output: str) -> list[str]:
    """The assembler's command for one CU: the one line the accel driver shows under `-###`
    for `-c STEP.s -o STEP.o` with the CU's -march= and device_flags (`shown`), with the
    files put in. GCC 12's driver runs its `as` (llvm-mc-13) there."""
    commands = [_driver_words(line) for line in shown.splitlines() if line.startswith(" ")]
    if len(commands) != 1 or os.path.basename(commands[0][0]) != "as":
        raise ValueError("the accel driver's -### shows no single assembler command")
    return [output if w == "offlink-step.o" else asm if w == "offlink-step.s" else w
            for w in commands[0]]


def assemble_probe(compiler: str, options, directive: str = "") -> list[str]:
    """The accel driver's command whose `-###` output assemble_argv reads; with the CUs'
    `.amdgcn_target` directive (GCC 14+), the words GCC 14+'s mkoffload gives from it
    (later_flags) and the -march the options name, none where they name none (the driver's
    default: gfx900 for 14 and 15, gfx90a for 16)."""
    if directive:
        march = [w for w in options if w.startswith("-march=")][-1:]
        return [compiler, *march, *later_flags(directive), "-c", "offlink-step.s", "-o",
                "offlink-step.o", "-###"]
    return [compiler, f"-march={arch(options)}", *device_flags(options), "-c",
            "offlink-step.s", "-o", "offlink-step.o", "-###"]


# Processors whose code objects carry the xnack and the sramecc feature (LLVM's AMDGPUUsage).
_XNACK = re.compile(r"^gfx9")
_SRAMECC = re.compile(r"^gfx9(?:06|08|0a|4|-4-generic)")


def later_flags(directive: str) -> list[str]:
    """GCC 14+'s mkoffload's xnack and sram-ecc words for the CUs' target ID
    (`.amdgcn_target "amdgcn-unknown-amdhsa--gfx900:xnack-"`): `on`/`off` as the ID says,
    `any` where the processor has the feature and the ID leaves it open, none where the
    processor lacks it (gfx900: `-mxnack=off` alone; gfx90a: `-mxnack=any -msram-ecc=any`,
    as their links show)."""
    target = directive.split('"')[1].rsplit("--", 1)[-1]
    processor, *features = target.split(":")
    out = []
    for name, word, has in (("xnack", "-mxnack", _XNACK), ("sramecc", "-msram-ecc",
                                                          _SRAMECC)):
        said = [f[-1] for f in features if f.startswith(name)]
        if said:
            out.append(f"{word}={'on' if said[0] == '+' else 'off'}")
        elif has.match(processor):
            out.append(f"{word}=any")
    return out


@functools.cache
def multilib(compiler: str, march: str | None) -> str:
    """The accel compiler's multilib folder for `march` (GCC 16 groups processors into
    generic multilibs: gfx90a's is gfx9-generic), as `-print-multi-directory` says."""
    out = runner.run([compiler, *([f"-march={march}"] if march else []),
                      "-print-multi-directory"], f"{compiler} -print-multi-directory")
    return out.stdout.decode().strip() or "."


@functools.cache
def linker(compiler: str) -> str:
    """The accel compiler's own `ld` (GCC 14+ keep it among its programs, not its libraries),
    as `-print-prog-name=ld` names it."""
    out = runner.run([compiler, "-print-prog-name=ld"], f"{compiler} -print-prog-name")
    return out.stdout.decode().strip()


def link_argv(libdir: str, march: str, objects: list[str], output: str,
              options=(), folder: str | None = None, ld: str | None = None) -> list[str]:
    """The image link as the accel driver's collect2 runs it (lld-13 as `ld`): a position-
    independent executable exporting every symbol, crt0.o of the -march multilib first, that
    multilib's folder (`folder`, as the driver names it; GCC 12's: the -march) and the base
    folder searched, the objects (VAR_TABLE_START's first), the link's own -l words, then the
    libraries."""
    if folder is None:
        folder = "." if march == DEFAULT_ARCH else march
    multilib = os.path.normpath(os.path.join(libdir, folder))
    extra = [mkoffload_library(o) for o in options if o.startswith("-l")]
    return [ld or os.path.join(libdir, "ld"), "--pie", "--export-dynamic", "-o", output,
            os.path.join(multilib, "crt0.o"), f"-L{multilib}", f"-L{libdir}", *objects,
            *extra, *LIBRARIES]


def kernels(functions: list[str], tables: list[DeviceTables]
            ) -> list[tuple[str, tuple[int, int, int], int, int]]:
    """The registration's kernels (name, OpenACC dims, sgpr and vgpr counts) as mkoffload lists
    them: its own two, then `functions` (the host function table's names, in its order), each
    with the counts and dims its CU's assembly gave (0 where none)."""
    regcounts: dict[str, tuple[int, int]] = {}
    dims: dict[str, tuple[int, int, int]] = {}
    for t in tables:
        regcounts.update(t.regcounts)
        dims.update(t.dims)
    return [(n, dims.get(n, (0, 0, 0)), *regcounts.get(n, (0, 0)))
            for n in (*INIT_KERNELS, *functions)]


# The registration's C text (c_source), as GCC 12's mkoffload writes it, and GCC 14+'s
# (gcn_data: the `requires` mask first, the indirect functions' count before the variables').
_REGISTRATION = """/* Written by offlink: libgomp registration of an amdgcn-amdhsa image
   (GCC {release}'s mkoffload layout). */
#include <stddef.h>

extern const unsigned char {symbol}[] __attribute__ ((__visibility__ ("hidden")));

static const int gcn_num_vars = {var_count};

static const struct hsa_kernel_description {{
  const char *name;
  int oacc_dims[3];
  int sgpr_count;
  int vgpr_count;
}} gcn_kernels[] = {{
{table}
}};

static const struct gcn_image {{
  size_t size;
  const void *image;
}} gcn_image = {{
  {size},
  {symbol}
}};

static const struct gcn_image_desc {{
{mask_field}  const struct gcn_image *gcn_image;
  unsigned kernel_count;
  const struct hsa_kernel_description *kernel_infos;
{ind_field}  unsigned global_variable_count;
}} target_data = {{
{mask_value}  &gcn_image,
  sizeof (gcn_kernels) / sizeof (gcn_kernels[0]),
  gcn_kernels,
{ind_value}  gcn_num_vars
}};

extern void GOMP_offload_register_ver (unsigned, const void *, int, const void *);
extern void GOMP_offload_unregister_ver (unsigned, const void *, int, const void *);

/* crtoffloadtable.o's table, over what crtoffloadbegin.o and crtoffloadend.o delimit. */
#define HIDDEN __attribute__ ((__visibility__ ("hidden")))
extern const void *const __offload_func_table[] HIDDEN;
extern const void *const __offload_funcs_end[] HIDDEN;
extern const void *const __offload_var_table[] HIDDEN;
extern const void *const __offload_vars_end[] HIDDEN;
{ind_table}const void *const __OFFLOAD_TABLE__[] HIDDEN = {{
  &__offload_func_table, &__offload_funcs_end, &__offload_var_table, &__offload_vars_end{ind_words}
}};

static __attribute__((constructor)) void init (void)
{{
  GOMP_offload_register_ver ({VERSION:#x}, __OFFLOAD_TABLE__, {GOMP_DEVICE_GCN}/*GCN*/,
                             &target_data);
}}

static __attribute__((destructor)) void fini (void)
{{
  GOMP_offload_unregister_ver ({VERSION:#x}, __OFFLOAD_TABLE__, {GOMP_DEVICE_GCN}/*GCN*/,
                               &target_data);
}}
"""


# GOMP_VERSION_PACK (GOMP_VERSION, GOMP_VERSION_GCN) by release: GCC 12's, and GCC 14-16's
# (libgomp's GOMP_VERSION 3); GCC 13's is not checked here (no gcc-13-offload-amdgcn).
VERSIONS = {"12": VERSION, "14": 0x30003, "15": 0x30003, "16": 0x30003}


def c_source(symbol: str, size: int, rows, var_count: int, alone: bool = True,
             gcc_release: str = "12", mask: int = 0, ind_count: int = 0) -> str:
    """The registration, as GCC 12's mkoffload writes it (process_asm, process_obj and main):
    `rows` from kernels(), the image the `size` bytes at `symbol` (not copied: where offlink
    stores the image), and __OFFLOAD_TABLE__ over what crtoffloadbegin.o and crtoffloadend.o
    delimit (as gomp.py defines it). Not `alone`: to follow gomp.py's nvptx-none registration
    in one file, which defines that table (and `target_data`, `init`, `fini`): the names here
    get a `gcn_` prefix and the table is not defined again."""
    for name, *_ in rows:
        if not name or any(c in name for c in '"\\\n') or not name.isascii():
            raise ValueError(f"cannot name '{name}' in C")
    table = ",\n".join(f'  {{"{n}", {{{d[0]}, {d[1]}, {d[2]}}}, {s}, {v}}}'
                       for n, d, s, v in rows)
    later = gcc_release != "12"
    text = _REGISTRATION.format(
        symbol=symbol, var_count=var_count, table=table, size=size,
        VERSION=VERSIONS[gcc_release], GOMP_DEVICE_GCN=GOMP_DEVICE_GCN, release=gcc_release,
        mask_field="  unsigned long omp_requires_mask;\n" if later else "",
        mask_value=f"  {mask},\n" if later else "",
        ind_field="  unsigned ind_func_count;\n" if later else "",
        ind_value=f"  {ind_count},\n" if later else "",
        ind_table=("extern const void *const __offload_ind_func_table[] HIDDEN;\n"
                   "extern const void *const __offload_ind_funcs_end[] HIDDEN;\n"
                   if later else ""),
        ind_words=(",\n  &__offload_ind_func_table, &__offload_ind_funcs_end" if later
                   else ""))
    if alone:
        return text
    head, _, rest = text.partition("/* crtoffloadtable.o's table")
    rest = "static __attribute__" + rest.split("static __attribute__", 1)[1]
    for old, new in (("target_data", "gcn_target_data"), (" init (void)", " gcn_init (void)"),
                     (" fini (void)", " gcn_fini (void)"),
                     ("struct hsa_kernel_description", "struct gcn_kernel_description"),
                     ("#include <stddef.h>", "#include <stddef.h>\n"
                      "extern const void *const __OFFLOAD_TABLE__[];")):
        head, rest = head.replace(old, new), rest.replace(old, new)
    return head + rest


# -- the code object's header (LLVM's AMDGPUUsage, code object v3/v4) ----------------------

EM_AMDGPU = 224
ELFOSABI_AMDGPU_HSA = 64
_FEATURE = {0: "", 1: "", 2: "-", 3: "+"}  # unsupported, any, off, on (v4)


def e_flags(image: bytes) -> int:
    """The code object's e_flags; an error for another ELF machine."""
    elf = ElfFile(image, "the amdgcn-amdhsa image")
    if elf.e_machine != EM_AMDGPU:
        raise ValueError(f"not an AMD GPU code object (e_machine {elf.e_machine})")
    return elf.e_flags


def target_id(flags: int) -> str:
    """The target ID (`gfx906:xnack-`) of code object v4 e_flags: the processor, then
    sramecc and xnack where on (+) or off (-)."""
    mach = flags & 0xFF
    name = next((k if k != "fiji" else "gfx803" for k, v in MACH.items() if v == mach),
                f"mach{mach:#x}")
    for feature, shift in (("sramecc", 10), ("xnack", 8)):
        name += f":{feature}{_FEATURE[(flags >> shift) & 3]}" if _FEATURE[
            (flags >> shift) & 3] else ""
    return name


# -- the link target ------------------------------------------------------------------------
#
# GccGcnTarget: GCC's amdgcn-amdhsa objects compiled one CU at a time (each CU's assembly is
# its compiled object, so the compile cache keeps it and the registration's tables are read
# from it), assembled and linked into one image per link (link_image), registered with
# libgomp by gomp.py beside the nvptx-none image.



def pair(entries, tables: DeviceTables, tag: str, label: str,
         global_functions) -> list:
    """Host table slots with their device names, within one CU: by position within each kind,
    as GCC's link pairs them (the GCN assembly's tables list the host names, in the host
    table's order), checked by name. A static's key is qualified with `tag`, as nvptx's."""
    out = []
    for kind, dev in (("function", tables.functions),
                      ("variable", [n for n, _ in tables.variables]),
                      (gcc.INDIRECT, tables.indirect)):
        listed = [e for e in entries if e.kind == kind]
        if len(listed) != len(dev):
            raise LinkError(f"{label}: the host table lists {len(listed)} {kind} slots and the "
                            f"amdgcn-amdhsa code {len(dev)} (is the accel compiler the same "
                            f"GCC version?)")
    devices = {"function": iter(tables.functions), gcc.INDIRECT: iter(tables.indirect),
               "variable": iter(n for n, _ in tables.variables)}
    suffix = "." + tag.replace("$", "_")
    for host in entries:
        if host.kind == gcc.INDIRECT and host.local:
            raise LinkError(f"{label}: static function '{host.host_name}' is `declare target "
                            f"indirect`: offlink cannot name it program-wide; give it "
                            f"external linkage")
        found = next(devices[host.kind])
        name = found[:-len(suffix)] if found.endswith(suffix) else found
        qualify = host.local
        if host.kind == "function" and "._omp_fn." in host.host_name:
            qualify = host.host_name.split("._omp_fn.", 1)[0] not in global_functions
        if name != host.host_name + (".linkptr" if host.link else "") and not host.local:
            raise LinkError(f"{label}: host table entry '{host.host_name}' is '{name}' in the "
                            f"amdgcn-amdhsa code")
        out.append(gcc.Entry(host, name, name + suffix if qualify else name))
    return out


def rename(asm: str, renames: dict[str, str]) -> str:
    """Rename assembly symbols (definitions, uses, metadata, the kernel descriptors' `.kd`),
    whole names only."""
    if not renames:
        return asm
    names = "|".join(re.escape(n) for n in sorted(renames, key=len, reverse=True))
    token = re.compile(rf"(?<![\w$.])({names})(?![\w$]|\.\d)")
    return token.sub(lambda m: renames[m.group(1)], asm)


class GccGcnTarget(Target):
    name = NAME
    registration = "gomp"  # libgomp's (gomp.py)
    image_kind = NAME
    macro = "__OFFLINK_TARGET_AMDGCN_AMDHSA__"
    image_argv_reads_objects = True  # the registration's tables come from the CUs' assembly
    image_argv_reads_offers = True
    distributable = False
    not_distributable_because = ("its compile is GCC's accel compiler reading LTO bytecode "
                                 "(-xlto), which distcc and sccache run locally")

    def __init__(self) -> None:
        self._links: dict[str, list[tuple[str, str, list]]] = {}
        self._tables: dict[str, list[DeviceTables]] = {}
        self._steps: dict[str, tuple[list[str], str, str]] = {}  # output -> (objects, ...)
        self._fat_lto = False

    def capture_argv(self, compiler, preprocess_args, language, source, output):
        raise UsageError(f"target {NAME} takes GCC's own offload objects: compile with "
                         f"`gcc -fopenmp -foffload={NAME} -c` and link them with offlink link")

    def source_suffix(self, cu):
        return ".host.o"

    def compile_argv(self, cu, source, output):
        p = cu.payload
        if os.sep not in p.compiler and runner.which(p.compiler) is None:
            major = p.compiler.rsplit("-", 1)[-1]
            raise ToolError(f"target compile of {cu.label} for {NAME}: GCC's accel compiler "
                            f"'{p.compiler}' not found (install gcc-"
                            f"{major if major.isdigit() else '12'}-offload-amdgcn)")
        options = [o for o in p.options if not o.startswith(("-l", "-L"))]
        return compile_argv(p.compiler, options, source, output, release(cu))

    def identity_tool(self, cu, argv):
        return cu.payload.compiler

    def run_compile(self, children, argv, what):
        return run_compile(children, argv, what)

    def offers(self, cu, obj_path):
        """The CU's entries keyed by name; its statics renamed to their keys in the assembly
        (the compiled object) before the cache stores it."""
        with open(obj_path, encoding="utf-8", errors="surrogateescape") as f:
            asm = f.read()
        kept = asm
        if release(cu) >= 13 and _REQUIRES.search(asm) is None:
            asm += REQUIRES_LINE.format(written_mask(cu, obj_path, NAME))
        entries = self._pair(cu, asm)
        renames = {e.device_name: e.key for e in entries if e.key != e.device_name}
        if renames:
            asm = rename(asm, renames)
        if asm != kept:
            with open(obj_path, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(asm)
        return tuple(Offer(e.key, e.kind, e.host.size, e.host.strong) for e in entries)

    def _pair(self, cu, asm: str) -> list:
        hosts, functions = _host_side(cu)
        try:
            tables = read_asm(asm)
        except ValueError as e:
            raise LinkError(f"{cu.label}: its {NAME} assembly: {e}") from None
        return pair(list(hosts), tables, _tag(cu), cu.label, set(functions))

    def image_argv(self, plan, compiled, output):
        cus, tables, objects, options = [], [], [], ()
        for c in compiled:
            objects.append(c.object_path + ".o")
            options = c.cu.payload.options
            if not os.path.exists(c.object_path):  # --dry-run: the command alone
                continue
            with open(c.object_path, encoding="utf-8", errors="surrogateescape") as f:
                asm = f.read()
            tables.append(read_asm(asm))
            cus.append((c.cu.label, c.cu.payload.source, self._pair(c.cu, asm)))
        self._links[output] = cus
        self._tables[output] = tables
        compiler = compiled[0].cu.payload.compiler if compiled else ""
        libdir = accel_libdir(compiler) if compiler else ""
        start = output + ".var-table.o"
        later = bool(compiled) and release(compiled[0].cu) >= 14
        march = [o[len("-march="):] for o in options if o.startswith("-march=")][-1:]
        folder = multilib(compiler, march[0] if march else None) if later else None
        # GCC 14+: the link's libraries that have device versions, as for nvptx-none
        libraries = device_libraries(plan, str(release(compiled[0].cu))) if later else []
        return link_argv(libdir, arch(options), [start, *objects], output,
                         [*options, *(w for w in libraries if w not in options)], folder,
                         linker(compiler) if later else None)

    def link_image(self, argv, output, compiled):
        """Each CU's assembly rewritten as mkoffload's process_asm does and assembled, the
        `.offload_var_table` start assembled, then the lld link `argv`."""
        if not compiled:
            raise LinkError(f"device link for target {NAME}: no CU")
        options = compiled[0].cu.payload.options
        compiler = compiled[0].cu.payload.compiler
        later = release(compiled[0].cu) >= 14  # mkoffload keeps the function tables
        first = ""
        if later:
            with open(compiled[0].object_path, encoding="utf-8",
                      errors="surrogateescape") as f:
                first = target_directive(f.read())
        try:
            shown = runner.run(assemble_probe(compiler, options, first),
                        f"{compiler} -###").stdout.decode(errors="replace")
        except ToolError as e:
            raise ToolError(f"device link for target {NAME}: {e}") from None
        directive = ""
        for c in compiled:
            with open(c.object_path, encoding="utf-8", errors="surrogateescape") as f:
                asm = f.read()
            directive = directive or target_directive(asm)
            with open(c.object_path + ".2.s", "w", encoding="utf-8",
                      errors="surrogateescape") as f:
                f.write(asm if later else without_func_tables(asm))
            runner.run(assemble_argv(shown, c.object_path + ".2.s", c.object_path + ".o"),
                f"device link for target {NAME}: assembling {c.cu.label}")
        start = output + ".var-table"
        with open(start + ".s", "w", encoding="utf-8") as f:
            f.write(var_table_start(directive, later))
        runner.run(assemble_argv(shown, start + ".s", start + ".o"),
            f"device link for target {NAME}: the variable table's start")
        try:
            runner.run(argv, f"device link for target {NAME}")
        except ToolError as e:
            said = explain(e, argv, {c.object_path + ".o": c.cu.label for c in compiled},
                           GCC_LIBRARIES.get(str(release(compiled[0].cu)), ()))
            raise (said or e) from None

    def exports(self, image, path):
        return {s.name for s in ElfFile(image, path).symbols() if s.defined and s.name}

    def for_inputs(self, cus, plan=None):
        found = gcc.release_of(cus[0]) if cus else None
        self.release = found or "12"
        if self.release not in VERSIONS:
            raise UsageError(f"{cus[0].label}: offlink builds the {NAME} images of GCC "
                             f"{', '.join(VERSIONS)}; GCC {self.release}'s registration is not "
                             f"checked here: link with -foffload=nvptx-none, or with GCC "
                             f"{self.release}'s own link")
        kinds: dict[bool, str] = {}
        for cu in cus:
            kinds.setdefault(gcc.is_openacc(cu.payload.options), cu.label)
        if len(kinds) > 1:
            raise UsageError(f"{kinds[True]} is OpenACC (-fopenacc) and {kinds[False]} OpenMP "
                             f"(-fopenmp): GCC {self.release}'s offload link builds an image for "
                             f"one of them per program, and so does offlink")
        self._fat_lto = any(getattr(cu, "fat_lto", False) for cu in cus)
        return self

    def host_link_args(self, plan):
        driver = os.path.basename(plan.driver)
        if "clang" in driver or driver == "ld" or driver.startswith("ld."):
            return []
        fat = ["-fno-lto"] if self._fat_lto and not plan.lto else []
        return ["-foffload=disable", *fat]

    def host_addresses(self, elf, image):
        placed = gcc.place(elf, self._links.get(image.path, []))
        return {key: (p.address, p.size, p.kind) for key, p in placed.items()}

    def link_entries(self, image_path: str) -> list:
        """(label, source, paired entries) of every CU of the image, in link order."""
        return self._links.get(image_path, [])

    def link_tables(self, image_path: str) -> list[DeviceTables]:
        """The CUs' tables (register counts, OpenACC dims) of the image, in link order."""
        return self._tables.get(image_path, [])


# -- device-link errors --------------------------------------------------------------------
#
# lld's failures said in one line, as nvptx-none-ld's are (nvptx.py, explain): lld prints
# `error: undefined symbol: NAME` and `>>> referenced by OBJECT:(FUNCTION)` lines; the objects are
# the CUs' assembled ones, and GCC's device libraries for the -march (lib<name>.a in the link's
# first -L folder that has it) that define NAME name the fix. The command and lld's own lines come
# only under --verbose.

_LLD_UNDEFINED = re.compile(r"undefined symbol: (\S+)")
_LLD_REFERENCED = re.compile(r">>> referenced by ([^:\s]+)")


def explain(error: ToolError, argv: list[str], objects: dict[str, str],
            linked: tuple[str, ...] = ()) -> ToolError | None:
    """The one-line error for a failed lld link `argv` (`objects`: object path -> its CU's
    label), or None where lld named no undefined symbol (the error stays as it is)."""
    missing: dict[str, list[str]] = {}
    current = None
    for line in error.output.splitlines():
        m = _LLD_UNDEFINED.search(line)
        if m:
            current = m.group(1)
            missing.setdefault(current, [])
            continue
        r = _LLD_REFERENCED.search(line)
        label = objects.get(r.group(1)) if r else None
        if current is not None and label and label not in missing[current]:
            missing[current].append(label)
    return missing_symbols(NAME, "undefined symbol", list(missing), missing.__getitem__,
                           lambda lib, name: name in _library_definitions(argv, lib),
                           error, argv, linked)


def _library_definitions(argv: list[str], lib: str) -> frozenset[str]:
    """The symbols lib<lib>.a defines, from the device link's first -L folder that has it."""
    for d in (w[2:] for w in argv if w.startswith("-L")):
        path = os.path.join(d, f"lib{lib}.a")
        if os.path.isfile(path):
            return _archive_definitions(path)
    return frozenset()


@functools.lru_cache(maxsize=8)
def _archive_definitions(path: str) -> frozenset[str]:
    try:
        return frozenset(s.name for _, elf in elf_files(path) for s in elf.symbols()
                         if s.defined and s.name)
    except FormatError:
        return frozenset()
