"""Each toolchain's offload code in a linked binary (GCC's, clang's, nvcc's), read-only,
whoever linked it: the one reading `offlink inspect`, `--symbol`, `--address`, `--explain` and
`extract` share, so that a toolchain's own link and offlink's link of the same objects can be
compared field by field (cli/inspect_cmd.py adds offlink's table). Here: the plain data they show
(`Offload`: a toolchain's entries, images and notes), the loaded view a reader reads a binary
by, and the table of the toolchains' `binary` modules (one line each). Each of those modules
has:

- `read(elf, sections) -> Offload | None`: its offload code in a linked binary (`sections`: the
  binary's section names), None where it has none;
- `NO_REGISTRATION_FIX`: how to link so that its runtime gets the images;
- `RUNTIMES`: the libraries (name prefixes) its programs need to start, `RUNTIME_FIX` how to
  make the loader find one;
- `findings(offload, loadable, device)`: what this machine lacks to run its images, as
  (finding, evidence, fix) triples (`loadable(soname)`: where the loader finds a library, or None;
  `device(triple, what)`: the findings of a device's driver);
- `module_findings(targets, symbols)`: the same for its targets in an offlink-linked module's
  table (`targets`: their names, `symbols`: the binary's symbol names);
- `not_offered(table, name) -> str | None`: why a name of its targets has no row, in its terms;
- `extract_target(image)`: the target `offlink extract` files an image under (None: they are
  read as fat objects' are, e.g. clang's OffloadBinaries);
- for `inspect --symbol`: `ENTRY_TERMS` (an entry's kind in its words),
  `claims(target)` (whether an offlink table's target is its), `device_only(name, where,
  exported)` (a name its images define that no entry lists), `unnamed(triples) -> str | None`
  (what its images of those triples may hold under no symbol: why a device image that names no
  such function may still hold its code).

GCC's also reads its offload objects (`object_image`), offlink's the architectures of `offlink
cc`'s payloads (`payload_archs`).
"""

from __future__ import annotations

import importlib
import re
import struct
from dataclasses import dataclass, field
from types import ModuleType

from ..elf import ELF_MAGIC, EM_AMDGPU, STT_FILE, STT_SECTION, ElfFile, Symbol, loaded_words
from ..errors import FormatError
from ..formats.cubin import cubin_arch
from ..formats.fatbin import fatbin_archs
from ..formats.table import PTX_TEXT_KINDS

# toolchain -> its module, in the order a binary's offload code is read
TOOLCHAINS = {"gcc": "offlink.toolchains.gcc.binary",
              "llvm": "offlink.toolchains.llvm.binary",
              "cuda": "offlink.toolchains.offlink.binary"}


OWN = "offlink.toolchains.offlink.own"  # offlink's own runtime's terms (its table's view)


def module(toolchain: str) -> ModuleType:
    """A toolchain's `binary` module, loaded on use."""
    return importlib.import_module(TOOLCHAINS[toolchain])


def module_for(toolchain: str) -> ModuleType:
    """The module whose terms a view's answers are in: a toolchain's, or offlink's own."""
    return importlib.import_module(OWN if toolchain == "offlink" else TOOLCHAINS[toolchain])


def modules() -> list[ModuleType]:
    return [module(toolchain) for toolchain in TOOLCHAINS]


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
    where: str = ""  # the section (or symbol) it was read from


@dataclass(frozen=True)
class Registered:
    """One registration call the binary makes: for which target, with which version."""

    target: str
    version: int | None  # the version word the call passes (GCC's GOMP_VERSION_PACK)
    evidence: str  # what it was read from


@dataclass
class Offload:
    toolchain: str  # gcc, llvm, cuda, offlink
    registration: str | None  # the registration call the binary makes, as its symbols say
    entries: list[Entry] = field(default_factory=list)
    images: list[Image] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    registered: list[Registered] = field(default_factory=list)


def read(elf: ElfFile) -> list[Offload]:
    """Every toolchain's offload code in a linked binary (none: an empty list)."""
    sections = {s.name for s in elf.sections}
    found = [reader.read(elf, sections) for reader in modules()]
    return [offload for offload in found if offload is not None]


def not_offered(table, name: str) -> str | None:
    """Why `name`, defined in the host code, has no row in `table`, in the terms of the
    toolchain whose targets the table holds; None for offlink's own."""
    for reader in modules():
        said = reader.not_offered(table, name)
        if said is not None:
            return said
    return None


def unnamed(toolchain: str, triples: list[str]) -> str | None:
    """What a toolchain's images of `triples` may hold under no symbol, in its terms; None
    where they name all they hold (or the view is offlink's own)."""
    return module(toolchain).unnamed(triples) if toolchain in TOOLCHAINS else None


# -- what the readers share ------------------------------------------------------------------
class Memory:
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


def host_names(elf: ElfFile, addresses: set[int]) -> dict[int, str]:
    """address -> the name of a function or object symbol there (global names first)."""
    at: dict[int, list[Symbol]] = {}
    for s in elf.symbols() + elf.symbols(dynamic=True):
        if s.st_value in addresses and s.defined and s.name and \
                s.st_type not in (STT_SECTION, STT_FILE):
            at.setdefault(s.st_value, []).append(s)
    return {a: sorted(syms, key=lambda s: (not s.is_global, s.name))[0].name
            for a, syms in at.items()}


def registration(elf: ElfFile, calls: tuple[str, ...]) -> str | None:
    """The first of these registration calls the binary's symbols name, or None."""
    names = {s.name for s in elf.symbols(dynamic=True)} | {s.name for s in elf.symbols()}
    return next((r for r in calls if r in names), None)


def symbol(elf: ElfFile, name: str) -> Symbol | None:
    return next((s for s in elf.symbols() if s.name == name and s.defined), None)


def differs(host: str | None, name: str) -> str | None:
    return host if host and host != name else None


def defines(image: bytes, target: str, name: str) -> bool:
    """Whether an ELF image of `target` defines `name` (its symbol table)."""
    try:
        return any(s.name == name and s.defined for s in ElfFile(image, target).symbols())
    except FormatError:
        return False


def image_archs(kind: str, image: bytes) -> list[str]:
    """The CUDA architectures an image holds code for (sm_NN: machine code, compute_NN: PTX
    for the driver's JIT), an AMD GPU code object's (gfxNNN); empty for other images."""
    if kind == "cubin":
        return [a] if (a := _cubin_arch(image)) else []
    if kind == "fatbin":
        return fatbin_archs(image)
    if kind in PTX_TEXT_KINDS:
        found = {m.decode() for m in re.findall(rb"^\s*\.target\s+(sm_\w+)", image, re.M)}
        return sorted(found, key=lambda a: (len(a), a))
    if kind == "shared-object" or image[:4] == ELF_MAGIC:  # an ELF image of any kind
        return [a] if (a := _amdgpu_arch(image)) else []
    return []


# LLVM's EF_AMDGPU_MACH_AMDGCN_* values (e_flags & 0xff of an amdgcn ELF), the common ones.
_AMDGPU_MACHS = {0x2a: "gfx803", 0x2c: "gfx900", 0x2f: "gfx906", 0x30: "gfx908", 0x3f: "gfx90a",
                 0x40: "gfx940", 0x4c: "gfx942", 0x36: "gfx1030", 0x41: "gfx1100"}


def _amdgpu_arch(image: bytes) -> str | None:
    """An HSA code object's GPU (EM_AMDGPU), from e_flags; None for other ELF files."""
    try:
        elf = ElfFile(image, "image")
    except FormatError:
        return None
    if elf.e_machine != EM_AMDGPU:
        return None
    mach = elf.e_flags & 0xFF
    return _AMDGPU_MACHS.get(mach, f"amdgcn-mach-{mach:#x}")


def _cubin_arch(image: bytes) -> str | None:
    try:
        arch = cubin_arch(image, "image")
    except FormatError:
        return None
    return None if arch == "sm_0" else arch
