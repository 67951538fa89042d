"""GCC's offload code in a linked binary (GCC 12-16's own link, or offlink's link of GCC's
objects): its host tables, its registrations and mkoffload's data.

The host tables `.gnu.offload_funcs` (kernel addresses), `.gnu.offload_vars` (address, size;
bit 63: `declare target link`) and, from GCC 14, `.gnu.offload_ind_funcs`, paired by position
with the device names of mkoffload's data. That data is found through the registration call's
own arguments (`registered`: decoded from the code that loads them), never by the arrays'
symbols, which g++ mangles (`_ZL8ptx_objs`) and strip removes: nvptx's PTX texts and function
and variable names, GCN's code object and kernels (its variables named by the image's own
`.offload_var_table`), each registration's version word and, from GCC 13, its `omp requires`
mask (`requires_mask`: gcc/gomp.py's warning about a library of the link whose mask differs).
toolchains/binaries.py says what this module answers.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable

from ...elf import SHT_PROGBITS, STT_OBJECT, ElfFile, loaded_words
from ...errors import FormatError
from ...formats.table import SECTION as TABLE_SECTION
from ..binaries import (
    Entry,
    Image,
    Memory,
    Offload,
    Registered,
    defines,
    differs,
    host_names,
    image_archs,
    registration,
)
from .dialect import TARGET as NVPTX
from .dialect import compile_options, offload_options, table_slots

GCC_FUNCS, GCC_VARS = ".gnu.offload_funcs", ".gnu.offload_vars"
GCC_IND_FUNCS = ".gnu.offload_ind_funcs"  # GCC 14+: `declare target indirect` functions
LINK_BIT = 1 << 63  # GCC's .gnu.offload_vars size word: a `declare target link` variable
REGISTRATIONS = ("GOMP_offload_register_ver", "GOMP_offload_register")
GCN = "amdgcn-amdhsa"
TARGETS = (NVPTX, GCN)
INIT_KERNELS = ("_init_array", "_fini_array")  # crt0's kernels in a GCN image: no host entry
VAR_TABLE = ".offload_var_table"  # a GCN image's variable table (mkoffload's label)
RUNTIME = "libgomp"
TITLE = "GCC's offload code (host tables .gnu.offload_funcs/vars)"  # how inspect names its view
SHF_EXECINSTR = 0x4
PLUGINS = {NVPTX: "libgomp-plugin-nvptx.so.1", "amdgcn-amdhsa": "libgomp-plugin-gcn.so.1"}
RUNTIMES = ()  # the libraries its programs need to start, by name
RUNTIME_FIX = ""
NO_REGISTRATION_FIX = ("link with gcc and the same -foffload= as the compiles (mkoffload writes "
                       "the registration), or with `offlink link --gomp-register`")


def read(elf: ElfFile, sections: set[str]) -> Offload | None:
    if GCC_FUNCS not in sections and GCC_VARS not in sections:
        return None
    funcs = table_slots(elf, GCC_FUNCS, 8) or []
    variables = table_slots(elf, GCC_VARS, 16) or []
    indirect = table_slots(elf, GCC_IND_FUNCS, 8) or []
    out = Offload("gcc", registration(elf, REGISTRATIONS))
    memory = Memory(elf)
    devices = [] if out.registration is None else registered(elf, memory, out.notes)
    func_names: list[str] | None = None
    var_names: list[str] | None = None
    for target, version, data in devices:
        out.registered.append(Registered(target, version, f"a constructor's call "
                                         f"{out.registration}({version:#x}, ..., "
                                         f"&target_data at {data:#x})"))
        read_target = _nvptx if target == NVPTX else _gcn
        try:
            funcs_of, vars_of, image = read_target(elf, memory, version, data,
                                                   TABLE_SECTION in sections)
        except FormatError as e:
            out.notes.append(f"{target}: mkoffload's data at {data:#x} not read: {e}")
            continue
        if image is not None:
            out.images.append(image)
        func_names = funcs_of if func_names is None else func_names
        var_names = vars_of if var_names is None else var_names
        if len(funcs_of) != len(funcs):
            out.notes.append(f"{len(funcs)} host functions ({GCC_FUNCS}) but {len(funcs_of)} "
                             f"{target} names: libgomp pairs them by position and refuses the "
                             f"image ('expected {len(funcs)}, have {len(funcs_of)}')")
        if vars_of is not None and len(vars_of) != len(variables):
            out.notes.append(f"{len(variables)} host variables ({GCC_VARS}) but "
                             f"{len(vars_of)} {target} names: libgomp refuses the image")
    host = host_names(elf, {a for a, _ in funcs + variables + indirect})
    for i, (address, _) in enumerate(funcs):
        name = func_names[i] if func_names and i < len(func_names) else host.get(address, "")
        out.entries.append(Entry(name or f"{GCC_FUNCS}[{i}]", "function", address, 0,
                                 differs(host.get(address), name)))
    for i, (address, size) in enumerate(variables):
        name = var_names[i] if var_names and i < len(var_names) else host.get(address, "")
        kind = "link-variable" if size & LINK_BIT else "variable"
        out.entries.append(Entry(name or f"{GCC_VARS}[{i}]", kind, address, size & ~LINK_BIT,
                                 differs(host.get(address), name)))
    for i, (address, _) in enumerate(indirect):  # the device pairs them by position too
        out.entries.append(Entry(host.get(address, f"{GCC_IND_FUNCS}[{i}]"),
                                 "indirect-function", address, 0, None))
    if out.registration is None:
        out.notes.append("no GOMP_offload_register_ver call: the host tables are there but no "
                         "image is registered, so every target region runs on the host")
    return out


# The registration call, GOMP_offload_register_ver (VERSION, __OFFLOAD_TABLE__, DEVICE,
# &target_data), as x86-64 code loads its arguments: `mov $DEVICE,%edx` (ba imm32) and, a few
# instructions on, `mov $VERSION,%edi` (bf imm32); before them %rcx gets &target_data, by `lea
# target_data(%rip),%rcx` or by a `lea` (or, in a non-PIE link the linker relaxed, `mov
# $target_data,%reg`) into another register and a `mov %reg,%rcx`. So GCC 12's mkoffload
# constructors (unoptimised), GCC 14-16's (their `lea`s in another order), offlink's own
# registration (gcc/gomp.py, optimised), from gcc and g++, PIE, non-PIE and DSO alike; `fini`'s
# unregister call repeats them. Read from the code, a stripped binary is read as well. The
# pattern is a lookahead, so matches may overlap: a 0xba byte inside the `lea`'s displacement
# (`48 8d 0d 29 ba 1f 00` then `ba 08 00 00 00`) must not hide the `mov $8,%edx` after it.
_ARGUMENTS = re.compile(rb"(?=\xba(.{4}).{0,16}?\xbf(.{2}[\x01-\x03]\x00))", re.S)
_RIP_LEA = {0x05 | r << 3: r for r in range(8)}  # ModRM of `lea disp(%rip),%r64`
RCX = 1
DEVICES = {5: NVPTX, 8: GCN}  # GOMP_DEVICE_NVIDIA_PTX, GOMP_DEVICE_GCN


def _rcx_source(code: bytes, start: int, end: int, address: int) -> int | None:
    """The address the instructions in code[start:end] leave in %rcx (`address`: where
    code[0] is loaded), or None."""
    window = code[start:end]
    want = RCX
    for i in range(len(window) - 3, -1, -1):  # the last load of the register wanted
        rex, op, modrm = window[i], window[i + 1], window[i + 2]
        if rex != 0x48:
            continue
        if op == 0x89 and modrm >> 6 == 3 and modrm & 7 == want:  # mov %src,%want
            want = (modrm >> 3) & 7
        elif op == 0x8D and _RIP_LEA.get(modrm) == want and i + 7 <= len(window):
            disp = struct.unpack_from("<i", window, i + 3)[0]
            return address + start + i + 7 + disp
        elif op == 0xC7 and modrm == 0xC0 | want and i + 7 <= len(window):
            return struct.unpack_from("<i", window, i + 3)[0]
    return None


def registered(elf: ElfFile, memory: Memory, notes: list[str]) -> list[tuple[str, int, int]]:
    """(target, version, address of the target_data) of every registration call."""
    found: dict[int, tuple[str, int, int]] = {}
    for section in elf.sections:
        if not section.sh_flags & SHF_EXECINSTR or section.sh_type != SHT_PROGBITS:
            continue
        code = bytes(elf.content(section))
        for m in _ARGUMENTS.finditer(code):
            device, version = (struct.unpack("<I", m.group(i))[0] for i in (1, 2))
            if device not in DEVICES:
                continue
            data = _rcx_source(code, max(0, m.start() - 32), m.end(2), section.sh_addr)
            if data is not None:
                found.setdefault(data, (DEVICES[device], version, data))
    if not found:
        notes.append("no registration call found in the code (GOMP_offload_register_ver "
                     "called otherwise): the device names and images are not known")
    return sorted(found.values(), key=lambda d: TARGETS.index(d[0]))


def _mask(version: int) -> int:
    """Bytes before the data proper: GOMP_VERSION 2 (GCC 13) put the `requires` mask first."""
    return 8 if version >> 16 >= 2 else 0


_MASK_BITS = 0x2FF  # the clauses, GOMP_REQUIRES_TARGET_USED and atomic_default_mem_order's


def requires_mask(elf: ElfFile) -> int | None:
    """The `omp requires` mask a binary of GCC's offload code registers with libgomp: the first
    word of the data of its GOMP_VERSION 2+ registrations (GCC 13+'s mkoffload or offlink's
    gcc/gomp.py), found as `read` finds them (the registration call's arguments, so a stripped
    library is read too); the first that is not 0. None where there is no such registration or
    the word is not a mask."""
    if elf.section(GCC_FUNCS) is None and elf.section(GCC_VARS) is None:
        return None
    memory = Memory(elf)
    masks = [memory.word(data) for _target, version, data in registered(elf, memory, [])
             if _mask(version)]
    mask = next((m for m in masks if m), masks[0] if masks else None)
    return mask if mask is not None and not mask & ~_MASK_BITS else None


def _nvptx(elf: ElfFile, memory: Memory, version: int, data: int, linked_by_offlink: bool):
    """GCC's nvptx_data: {[mask,] ptx_objs, ptx_num, var_names, var_num, fn_descs, fn_num[,
    ind_fn_num]}; ptx_obj {code, size}; fn_desc {name, dim[3]} (16 bytes)."""
    at = data + _mask(version)
    objs, ptx_num = memory.word(at), memory.u32(at + 8)
    var_at, var_num = memory.word(at + 16), memory.u32(at + 24)
    fn_at, fn_num = memory.word(at + 32), memory.u32(at + 40)
    func_names = [memory.cstr(memory.word(fn_at + 16 * i)) for i in range(fn_num)]
    var_names = [memory.cstr(memory.word(var_at + 8 * i)) for i in range(var_num)]
    if linked_by_offlink:
        return func_names, var_names, None  # the PTX is the table's, copied in at start
    ptx, offsets = [], []
    for i in range(ptx_num):
        code, size = memory.word(objs + 16 * i), memory.word(objs + 16 * i + 8)
        text, offset = memory.bytes_at(code, size)
        ptx.append(text.rstrip(b"\0"))
        offsets.append(offset)
    image = b"\0".join(ptx)  # as offlink's nvptx-none image: one PTX text per CU
    archs = sorted({m.decode() for m in re.findall(rb"^\s*\.target\s+(sm_\w+)", image, re.M)},
                   key=lambda a: (len(a), a))
    return func_names, var_names, Image(
        NVPTX, tuple(archs), "ptx", "gcc-mkoffload", image,
        offsets[0] if len(offsets) == 1 else None, f"mkoffload's ptx_objs ({ptx_num} texts)")


GCN_KERNEL_INFO = 32  # {name, oacc_dims[3], sgpr_count, vgpr_count}


def _gcn(elf: ElfFile, memory: Memory, version: int, data: int, linked_by_offlink: bool):
    """GCC's gcn_image_desc: {[mask,] gcn_image {size, image}*, kernel_count, kernel_infos[,
    ind_func_count], global_variable_count}: the kernels after crt0's _init_array and
    _fini_array pair with the host functions by position; the variables are the image's
    `.offload_var_table` rows, named by the image's symbols at their addresses."""
    at = data + _mask(version)
    image_at, count, infos = memory.word(at), memory.u32(at + 8), memory.word(at + 16)
    kernels = [memory.cstr(memory.word(infos + GCN_KERNEL_INFO * i)) for i in range(count)]
    func_names = [k for k in kernels if k not in INIT_KERNELS]
    size, code = memory.word(image_at), memory.word(image_at + 8)
    blob, offset = memory.bytes_at(code, size)
    var_names = _gcn_variables(blob)
    arch = image_archs("shared-object", blob)
    image = None if linked_by_offlink else Image(GCN, tuple(arch), "elf", "gcc-mkoffload",
                                                  blob, offset, "mkoffload's gcn_image")
    return func_names, var_names, image


def _gcn_variables(blob: bytes) -> list[str] | None:
    """The names of the variables an amdgcn image's `.offload_var_table` lists, in order."""
    elf = ElfFile(blob, GCN)
    table = next((s for s in elf.symbols() if s.name == VAR_TABLE and s.defined), None)
    if table is None:
        return None
    section = next(s for s in elf.sections if s.sh_addr <= table.st_value < s.sh_addr
                   + max(s.sh_size, 1) and s.sh_addr)
    words = loaded_words(elf, section, 8)
    at: dict[int, str] = {}
    for s in elf.symbols():
        if s.defined and s.st_type == STT_OBJECT and s.is_global:
            at.setdefault(s.st_value, s.name)
    names = []
    off = table.st_value - section.sh_addr
    while off in words and off + 8 in words and words[off] in at:
        names.append(at[words[off]])
        off += 16
    return names


def findings(offload: dict, loadable: Callable[[str], str | None],
             device: Callable[[str, str], list[tuple[str, str, str]]]
             ) -> list[tuple[str, str, str]]:
    out = []
    for image in offload["images"]:
        plugin = PLUGINS.get(image["triple"])
        if plugin and loadable(plugin) is None:
            out.append((f"libgomp's plugin {plugin} is not installed: libgomp cannot use "
                        f"the {image['triple']} image", f"the {image['triple']} image "
                        f"({image['where']}); {plugin} not on the loader's path",
                        "install the toolchain's offload plugin (Debian: "
                        "libgomp-plugin-nvptx1 / libgomp-plugin-amdgcn1)"))
        out += device(image["triple"], f"{image['triple']} image")
    return out


def module_findings(targets: list[str], symbols: set[str]) -> list[tuple[str, str, str]]:
    if "nvptx-none" in targets and "GOMP_offload_register_ver" not in symbols:
        return [("the nvptx-none image of GCC's objects is in the table but not registered "
                 "with libgomp: GCC's target regions run on the host (offlink's table serves "
                 "offlink_translate only)", "target nvptx-none in .openmp_target; no "
                 "GOMP_offload_register_ver in the symbol tables",
                 "link with `offlink link --gomp-register`")]
    return []


def in_image(target, name: str) -> bool:
    """Whether a target's image defines `name`: GCC's PTX by its definition comment (the
    accel compiler writes one per function: `// BEGIN [GLOBAL ]FUNCTION DEF: NAME`, and
    `.global`/`.const` lines for variables), an ELF image by its symbol table."""
    if target.name == "nvptx-none":
        word = re.escape(name.encode())
        return re.search(rb"^// BEGIN (GLOBAL )?(FUNCTION DEF|VAR DEF): " + word + rb"$",
                         target.image, re.M) is not None
    return defines(target.image, target.name, name)


ENTRY_TERMS = {
    "function": f"a kernel (a target region's outlined function) in GCC's host table {GCC_FUNCS}",
    "variable": f"a `declare target` variable in GCC's host table {GCC_VARS}",
    "link-variable": f"a `declare target link` variable in GCC's host table {GCC_VARS}",
    "indirect-function": f"a `declare target indirect` function in GCC's host table "
                         f"{GCC_IND_FUNCS} (GCC 14+): reachable through a host pointer "
                         f"(libgomp translates it to the device's)"}


def claims(target: str) -> bool:
    return target in TARGETS


def device_only(name: str, where: list[str], exported: bool) -> str:
    """A name the images define but GCC's host tables do not list."""
    what = "variable" if "(variable" in where[0] else "function"
    how = ("called by name in target regions; not reachable through a host pointer (GCC's "
           "tables list kernels and variables only: GCC 14+ has `declare target indirect`)"
           if what == "function" else "used by name in target regions; no host variable is "
           "mapped to it")
    return f"'{name}' is a declare target {what} in the images {', '.join(where)}, {how}"


def extract_target(image: Image) -> str | None:
    """The target `offlink extract` files an image under: its own (nvptx-none, amdgcn-amdhsa)."""
    return image.triple


def not_offered(table, name: str) -> str | None:
    gcc = [t for t in table.targets if t.name in TARGETS]
    if not gcc:
        return None
    held = [t.name for t in gcc if in_image(t, name)]
    where = (f"is in the {', '.join(held)} image (a `declare target` function or "
             f"variable GCC compiled for the device)" if held else
             "is not in the device image (not `declare target`)")
    return (f"'{name}' {where}, but GCC's offload tables list only target regions' "
            f"kernels and `declare target` variables, so the table has no row for it and "
            f"translate returns the host pointer. In a target region call it by name (it "
            f"resolves on the device); GCC 12 has no `declare target indirect` for a "
            f"host function pointer")


def object_image(elf: ElfFile) -> tuple[str, tuple[str, ...]]:
    """The target and architecture of a GCC offload object's `.gnu.offload_lto_*` sections, as
    an object of their own (what `x86_64-linux-gnu-accel-nvptx-none-gcc-12 -xlto ... -c`
    compiles): the architecture is the -misa of the object's -foffload-options, where it has
    one."""
    options = offload_options(compile_options(elf)[1], NVPTX)
    return NVPTX, tuple(o[len("-misa="):] for o in options if o.startswith("-misa="))[-1:]


def unnamed(triples: list[str]) -> str | None:
    """None: its images keep a symbol for each function they hold."""
    return None
