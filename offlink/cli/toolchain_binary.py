"""What a toolchain's own offload link put into a binary: GCC's, clang's, nvcc's (read-only).

For `offlink inspect` and `extract` of binaries offlink did not link, so that "what did my link
put where" can be compared with offlink's own `.openmp_target`:

- GCC (`gcc -fopenmp -foffload=nvptx-none` linking): the host tables `.gnu.offload_funcs`
  (kernel addresses) and `.gnu.offload_vars` (address, size; bit 63: `declare target link`),
  paired by position with the names of mkoffload's image (`func_mappings`, `var_mappings`,
  `ptx_objs`: the C arrays its generated constructor hands GOMP_offload_register_ver; found by
  their symbols, so a stripped binary shows the host tables alone).
- clang 17-22 (`clang -fopenmp -fopenmp-targets=...` linking): the offload entries of every
  generation (32-byte rows in `omp_offloading_entries` up to 19, 56-byte rows there in 20 and
  in `llvm_offload_entries` from 21; dynamic relocations applied; read by the LLVM dialect)
  and the OffloadBinary images of `.llvm.offloading`.
- nvcc: the `.nv_fatbin` section, its architectures and the kernels of its cubins.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from ..elf import STT_FILE, STT_SECTION, ElfFile, Symbol, loaded_words
from ..errors import FormatError

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from ..toolchains.llvm.dialect import OffloadEntry

GCC_FUNCS, GCC_VARS = ".gnu.offload_funcs", ".gnu.offload_vars"
LINK_BIT = 1 << 63  # GCC's .gnu.offload_vars size word: a `declare target link` variable
NV_FATBIN = ".nv_fatbin"
REGISTRATIONS = {"gcc": ("GOMP_offload_register_ver", "GOMP_offload_register"),
                 "llvm": ("__tgt_register_lib",),
                 "cuda": ("__cudaRegisterFatBinary", "__cudaRegisterLinkedBinary")}


@dataclass(frozen=True)
class Entry:
    name: str  # as the device image names it (GCC: as in the PTX, main$_omp_fn$0)
    kind: str  # function, variable, indirect-function, link-variable
    address: int  # the host address (st_value terms), 0 where there is none
    size: int  # a variable's bytes; 0 for a function
    host_name: str | None  # the host symbol at `address` where it differs from `name`


@dataclass(frozen=True)
class Image:
    triple: str
    archs: tuple[str, ...]
    kind: str  # ptx, elf, bc, cubin, fatbin
    producer: str  # openmp, cuda, hip, gcc-mkoffload, nvcc
    data: bytes
    file_offset: int | None  # where its first byte lies in the file, where it lies whole


@dataclass
class Offload:
    toolchain: str  # gcc, llvm, cuda
    registration: str | None  # the registration call the binary makes, as its symbols say
    entries: list[Entry] = field(default_factory=list)
    images: list[Image] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read(elf: ElfFile) -> list[Offload]:
    """Every toolchain's offload code in a linked binary (none: an empty list)."""
    found = []
    names = {s.name for s in elf.sections}
    if GCC_FUNCS in names or GCC_VARS in names:
        found.append(_gcc(elf))
    from ..formats.offload_binary import SECTION as LLVM_SECTION

    if LLVM_SECTION in names or any(n in names for n in LLVM_ENTRY_SECTIONS):
        found.append(_llvm(elf))
    if NV_FATBIN in names:
        found.append(_cuda(elf))
    return found


# -- shared helpers -------------------------------------------------------------------------

class _Memory:
    """The loaded view of a linked binary: words with dynamic relocations applied, strings and
    bytes at addresses."""

    def __init__(self, elf: ElfFile):
        self.elf = elf
        self.words: dict[int, dict[int, int]] = {}  # section index -> offset -> word

    def section_at(self, address: int):
        for i, s in enumerate(self.elf.sections):
            if s.sh_addr and s.sh_addr <= address < s.sh_addr + s.sh_size:
                return i, s
        raise FormatError(f"{self.elf.name}: address {address:#x} is in no section")

    def word(self, address: int) -> int:
        i, s = self.section_at(address)
        if i not in self.words:
            self.words[i] = loaded_words(self.elf, s, 8)
        off = address - s.sh_addr
        if off not in self.words[i]:
            raise FormatError(f"{self.elf.name}: no word at {address:#x}")
        return self.words[i][off]

    def u32(self, address: int) -> int:
        _, s = self.section_at(address)
        return struct.unpack_from("<I", bytes(self.elf.content(s)), address - s.sh_addr)[0]

    def bytes_at(self, address: int, size: int) -> tuple[bytes, int]:
        """`size` bytes at `address`, and their file offset."""
        _, s = self.section_at(address)
        off = address - s.sh_addr
        if s.sh_type == 8 or off + size > s.sh_size:  # SHT_NOBITS, or past the section
            raise FormatError(f"{self.elf.name}: {size} bytes at {address:#x} are not in the file")
        return bytes(self.elf.content(s)[off : off + size]), s.sh_offset + off

    def cstr(self, address: int) -> str:
        _, s = self.section_at(address)
        data = bytes(self.elf.content(s))
        off = address - s.sh_addr
        end = data.find(b"\0", off)
        if end < 0:
            raise FormatError(f"{self.elf.name}: unterminated name at {address:#x}")
        return data[off:end].decode("utf-8", "replace")


def _host_names(elf: ElfFile, addresses: set[int]) -> dict[int, str]:
    """address -> the name of a function or object symbol there (global names first)."""
    at: dict[int, list[Symbol]] = {}
    for s in elf.symbols() + elf.symbols(dynamic=True):
        if s.st_value in addresses and s.defined and s.name and \
                s.st_type not in (STT_SECTION, STT_FILE):
            at.setdefault(s.st_value, []).append(s)
    return {a: sorted(syms, key=lambda s: (not s.is_global, s.name))[0].name
            for a, syms in at.items()}


def _registration(elf: ElfFile, toolchain: str) -> str | None:
    names = {s.name for s in elf.symbols(dynamic=True)} | {s.name for s in elf.symbols()}
    return next((r for r in REGISTRATIONS[toolchain] if r in names), None)


def _symbol(elf: ElfFile, name: str) -> Symbol | None:
    return next((s for s in elf.symbols() if s.name == name and s.defined), None)


# -- GCC ------------------------------------------------------------------------------------

def _gcc(elf: ElfFile) -> Offload:
    from ..toolchains.gcc.dialect import table_slots

    funcs = table_slots(elf, GCC_FUNCS, 8) or []
    variables = table_slots(elf, GCC_VARS, 16) or []
    out = Offload("gcc", _registration(elf, "gcc"))
    memory = _Memory(elf)
    func_names, var_names, images = _mkoffload_nvptx(elf, memory, out.notes)
    out.images = images
    if func_names is not None and len(func_names) != len(funcs):
        out.notes.append(f"{len(funcs)} host functions ({GCC_FUNCS}) but {len(func_names)} "
                         f"device names: libgomp pairs them by position and refuses the image "
                         f"('expected {len(funcs)}, have {len(func_names)}')")
    if var_names is not None and len(var_names) != len(variables):
        out.notes.append(f"{len(variables)} host variables ({GCC_VARS}) but {len(var_names)} "
                         f"device names: libgomp refuses the image")
    host = _host_names(elf, {a for a, _ in funcs} | {a for a, _ in variables})
    for i, (address, _) in enumerate(funcs):
        name = func_names[i] if func_names and i < len(func_names) else host.get(address, "")
        out.entries.append(Entry(name or f"{GCC_FUNCS}[{i}]", "function", address, 0,
                                 _differs(host.get(address), name)))
    for i, (address, size) in enumerate(variables):
        name = var_names[i] if var_names and i < len(var_names) else host.get(address, "")
        kind = "link-variable" if size & LINK_BIT else "variable"
        out.entries.append(Entry(name or f"{GCC_VARS}[{i}]", kind, address, size & ~LINK_BIT,
                                 _differs(host.get(address), name)))
    if out.registration is None:
        out.notes.append("no GOMP_offload_register_ver call: the host tables are there but no "
                         "image is registered, so every target region runs on the host")
    return out


def _mkoffload_nvptx(elf: ElfFile, memory: _Memory, notes: list[str]):
    """(function names, variable names, images) of GCC 12's nvptx mkoffload arrays; (None,
    None, []) where their symbols are gone (a stripped binary) or it is not nvptx's."""
    syms = {n: _symbol(elf, n) for n in ("func_mappings", "var_mappings", "ptx_objs")}
    if syms["ptx_objs"] is None:
        notes.append("mkoffload's image arrays (ptx_objs, func_mappings, var_mappings) are not "
                     "in the symbol table (stripped, or not nvptx-none): the device names are "
                     "not known")
        return None, None, []
    funcs = syms["func_mappings"]
    variables = syms["var_mappings"]
    # struct nvptx_fn { const char *name; unsigned short dim[3]; }: 16 bytes
    func_names = [memory.cstr(memory.word(funcs.st_value + 16 * i))
                  for i in range(funcs.st_size // 16)] if funcs else []
    var_names = [memory.cstr(memory.word(variables.st_value + 8 * i))
                 for i in range(variables.st_size // 8)] if variables else []
    ptx = []  # struct ptx_obj { const char *code; size_t size; }
    objs = syms["ptx_objs"]
    offsets = []
    for i in range(objs.st_size // 16):
        code, size = memory.word(objs.st_value + 16 * i), memory.word(objs.st_value + 16 * i + 8)
        text, offset = memory.bytes_at(code, size)
        ptx.append(text.rstrip(b"\0"))
        offsets.append(offset)
    data = b"\0".join(ptx)  # as offlink's nvptx-none image: one PTX text per CU
    archs = sorted({m.decode() for m in re.findall(rb"^\s*\.target\s+(sm_\w+)", data, re.M)},
                   key=lambda a: (len(a), a))
    image = Image("nvptx-none", tuple(archs), "ptx", "gcc-mkoffload", data,
                  offsets[0] if len(offsets) == 1 else None)  # in pieces: one per CU
    return func_names, var_names, [image]


def _differs(host: str | None, name: str) -> str | None:
    return host if host and host != name else None


# -- clang ----------------------------------------------------------------------------------

# The host side's entry sections by LLVM generation. 19: `omp_offloading_entries` (OpenMP) and
# `cuda_offloading_entries`, 32-byte rows; 20: the same sections, 56-byte rows; 21+: one
# `llvm_offload_entries`, 56-byte rows.
LLVM_ENTRY_SECTIONS = ("omp_offloading_entries", "cuda_offloading_entries",
                       "llvm_offload_entries")


def llvm_entries(elf: ElfFile, section_name: str) -> list[tuple[int, OffloadEntry]]:
    """(host address, dialects.llvm.OffloadEntry) of one entry section of a linked binary,
    whatever the LLVM generation (32-byte rows of clang 17-19, 56-byte rows of 20+: the LLVM
    dialect reads every one, formats/offload_entries.py)."""
    from ..toolchains.llvm import dialect as llvm

    return llvm.linked_entries(elf, section_name)


def _llvm(elf: ElfFile) -> Offload:
    from ..formats.offload_binary import ENTRY_CTOR, ENTRY_DTOR, SECTION, parse_binaries

    out = Offload("llvm", _registration(elf, "llvm"))
    rows = [row for name in LLVM_ENTRY_SECTIONS for row in llvm_entries(elf, name)]
    host = _host_names(elf, {a for a, _ in rows})
    for address, e in rows:
        if e.flags & (ENTRY_CTOR | ENTRY_DTOR):
            continue  # a global constructor's or destructor's kernel: no user name
        out.entries.append(Entry(e.name, e.kind, address,
                                 e.size if "variable" in e.kind else 0,
                                 _differs(host.get(address), e.name)))
    section = elf.section(SECTION)
    if section is not None:
        content = bytes(elf.content(section))
        for img in parse_binaries(content, f"{elf.name}: section {SECTION}"):
            at = content.find(img.image)
            out.images.append(Image(img.triple, (img.arch,) if img.arch else (),
                                    img.image_kind, img.offload_kind, img.image,
                                    section.sh_offset + at if at >= 0 else None))
    if out.registration is None:
        out.notes.append("no __tgt_register_lib call: no image is registered with "
                         "libomptarget, so every target region runs on the host")
    return out


# -- nvcc -----------------------------------------------------------------------------------

def _cuda(elf: ElfFile) -> Offload:
    from ..formats.fatbin import FATBIN_ELF, fatbin_containers

    section = elf.section(NV_FATBIN)
    assert section is not None
    data = bytes(elf.content(section))
    out = Offload("cuda", _registration(elf, "cuda"))
    kernels: list[tuple[str, str, int]] = []
    for pos, end, entries in fatbin_containers(data):
        archs = []
        for e in entries:
            archs.append(f"{'sm' if e.kind == FATBIN_ELF else 'compute'}_{e.sm}")
            if e.kind == FATBIN_ELF and not e.compressed:
                kernels += _cubin_kernels(e.data)
            elif e.kind == FATBIN_ELF:
                out.notes.append(f"sm_{e.sm}: compressed cubin, its kernels not read (nvcc "
                                 f"-Xfatbin=-compress-all=false keeps them readable)")
        out.images.append(Image("nvptx64-nvidia-cuda", tuple(dict.fromkeys(archs)), "fatbin",
                                "nvcc", data[pos:end], section.sh_offset + pos))
    host = {s.name: s.st_value for s in elf.symbols() if s.defined and s.name}
    for name, kind, size in dict.fromkeys(kernels):  # the host stub or shadow: same name
        out.entries.append(Entry(name, kind, host.get(name, 0), size, None))
    return out


def _cubin_kernels(cubin: bytes) -> list[tuple[str, str, int]]:
    """(name, kind, size) of the global functions (kernels, and -rdc's extern device functions)
    and variables (`__device__`: STT_OBJECT, or CUDA's own object type 13) a cubin defines."""
    try:
        syms = ElfFile(cubin, "cubin").symbols()
    except FormatError:
        return []
    return [(s.name, "function" if s.st_type == 2 else "variable",
             0 if s.st_type == 2 else s.st_size)
            for s in syms if s.defined and s.is_global and s.st_type in (1, 2, 13)]
