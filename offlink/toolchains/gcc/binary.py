"""What GCC's own offload link (`gcc -fopenmp -foffload=nvptx-none`) put into a binary.

The host tables `.gnu.offload_funcs` (kernel addresses) and `.gnu.offload_vars` (address,
size; bit 63: `declare target link`), paired by position with the names of mkoffload's image
(`func_mappings`, `var_mappings`, `ptx_objs`: the C arrays its generated constructor hands
GOMP_offload_register_ver; found by their symbols, so a stripped binary shows the host tables
alone). toolchains/binaries.py says what this module answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import struct

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
LINK_BIT = 1 << 63  # GCC's .gnu.offload_vars size word: a `declare target link` variable
REGISTRATIONS = ("GOMP_offload_register_ver", "GOMP_offload_register")
GCN = "amdgcn-amdhsa"
TARGETS = (NVPTX, GCN)
INIT_KERNELS = ("_init_array", "_fini_array")  # crt0's kernels in a GCN image: no host entry
VAR_TABLE = ".offload_var_table"  # a GCN image's variable table (mkoffload's label)
RUNTIME = "libgomp"
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
    host = host_names(elf, {a for a, _ in funcs} | {a for a, _ in variables})
    for i, (address, _) in enumerate(funcs):
        name = func_names[i] if func_names and i < len(func_names) else host.get(address, "")
        out.entries.append(Entry(name or f"{GCC_FUNCS}[{i}]", "function", address, 0,
                                 differs(host.get(address), name)))
    for i, (address, size) in enumerate(variables):
        name = var_names[i] if var_names and i < len(var_names) else host.get(address, "")
        kind = "link-variable" if size & LINK_BIT else "variable"
        out.entries.append(Entry(name or f"{GCC_VARS}[{i}]", kind, address, size & ~LINK_BIT,
                                 differs(host.get(address), name)))
    if out.registration is None:
        out.notes.append("no GOMP_offload_register_ver call: the host tables are there but no "
                         "image is registered, so every target region runs on the host")
    return out


# mkoffload's constructor `init` as the host compiler writes it (mkoffload compiles its C file
# unoptimised): GOMP_offload_register_ver (VERSION, __OFFLOAD_TABLE__, DEVICE, &target_data),
# its arguments loaded last to first: `lea target_data(%rip),%rax` (`mov $target_data,%rax`
# in a non-PIE link the linker relaxed); `mov %rax,%rcx; mov $DEVICE,%edx; lea
# __OFFLOAD_TABLE__(%rip),%rax` (or its `mov $...,%rax`); `mov %rax,%rsi; mov $VERSION,%edi`.
# GCC 12's and GCC 14-16's, from gcc and g++, PIE, non-PIE and DSO alike; `fini` repeats it
# for the unregister call. Read from the code, so a stripped binary (no `init`, no
# `target_data` symbol) is read as well.
_CONSTRUCTOR = re.compile(rb"\x48(\x8d\x05|\xc7\xc0)(.{4})\x48\x89\xc1\xba(.{4})"
                          rb"\x48(?:\x8d\x05|\xc7\xc0).{4}\x48\x89\xc6\xbf(.{4})", re.S)
# The same call optimised (offlink's registration, gcc/gomp.py, and GCC's at -O1 and above):
# `lea target_data(%rip),%rcx; mov $DEVICE,%edx`, then `lea __OFFLOAD_TABLE__(%rip),%rsi` and
# `mov $VERSION,%edi` in either order.
_OPTIMISED = re.compile(rb"\x48\x8d\x0d(.{4})\xba(.{4})(?:\x48\x8d\x35.{4}\xbf(.{4})|"
                        rb"\xbf(.{4})\x48\x8d\x35.{4})", re.S)
DEVICES = {5: NVPTX, 8: GCN}  # GOMP_DEVICE_NVIDIA_PTX, GOMP_DEVICE_GCN


def registered(elf: ElfFile, memory: Memory, notes: list[str]) -> list[tuple[str, int, int]]:
    """(target, version, address of mkoffload's target_data) of every registration call."""
    found: dict[int, tuple[str, int, int]] = {}
    for section in elf.sections:
        if not section.sh_flags & SHF_EXECINSTR or section.sh_type != SHT_PROGBITS:
            continue
        code = bytes(elf.content(section))
        calls = [(m.start(), m.group(1) == b"\x8d\x05", m.group(2), m.group(3), m.group(4))
                 for m in _CONSTRUCTOR.finditer(code)]
        calls += [(m.start(), True, m.group(1), m.group(2), m.group(3) or m.group(4))
                  for m in _OPTIMISED.finditer(code)]
        for at, relative, where, device_word, version_word in calls:
            device, version = (struct.unpack("<I", w)[0] for w in (device_word, version_word))
            if device not in DEVICES or not 1 <= version >> 16 <= 3:
                continue
            data = struct.unpack("<i", where)[0]
            if relative:  # RIP-relative: from the next instruction
                data += section.sh_addr + at + 7
            found.setdefault(data, (DEVICES[device], version, data))
    if not found:
        notes.append("no mkoffload constructor found in the code (GOMP_offload_register_ver "
                     "called otherwise): the device names and images are not known")
    return sorted(found.values(), key=lambda d: TARGETS.index(d[0]))


def _mask(version: int) -> int:
    """Bytes before the data proper: GOMP_VERSION 2 (GCC 13) put the `requires` mask first."""
    return 8 if version >> 16 >= 2 else 0


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
    "link-variable": f"a `declare target link` variable in GCC's host table {GCC_VARS}"}


def claims(target: str) -> bool:
    return target in TARGETS


def device_only(name: str, where: list[str], exported: bool) -> str:
    """A name the images define but GCC's host tables do not list."""
    what = "variable" if "(variable" in where[0] else "function"
    how = (f"called by name in target regions; not reachable through a host pointer (GCC's "
           f"tables list kernels and variables only: GCC 14+ has `declare target indirect`)"
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
