"""LLVM's offload objects (`clang -fopenmp -fopenmp-targets=T -c`, clang 17-22): reading the
dialect.

Such an object carries its device code in `.llvm.offloading` (OffloadBinary: per image a
triple, an arch, a kind of code, a producer) and its host side in `omp_offloading_entries`
(`__tgt_offload_entry` rows, seed 001: address, name, size, flags; clang 20's 56-byte rows,
and clang 21's `llvm_offload_entries` of every kind: formats/offload_entries.py). The device
code has the
same rows by name. Each image becomes one CU for target `openmp-<triple>` (toolchains/llvm/openmp.py
compiles and links it); the rows' names are what the CU offers. Plain data in, plain data
out.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from ...elf import (
    SHT_RELA,
    SHT_SYMTAB,
    STT_FILE,
    STT_SECTION,
    SYMBOL_ENTRY,
    ElfFile,
    Section,
    loaded_words,
    rela_entries,
)
from ...errors import FormatError
from ...formats import offload_entries as entries_format
from ...formats.offload_binary import (
    ENTRIES_SECTION,
    ENTRY_INDIRECT,
    ENTRY_LINK,
    SECTION,
    parse_binaries,
)
from ...formats.payload import Payload
from ...model import CU
from .relocatable import linked_at_relocatable, relocatable_link  # noqa: F401 (the dialect's)

TARGET_PREFIX = "openmp-"
RUNTIME = "libomptarget"  # what its host code calls (__tgt_target_kernel, ...)
MADE_BY = "an LLVM offload object (clang -fopenmp-targets)"
# The host side's rows of each offload kind (clang 19: OpenMP's, and CUDA's with
# --offload-new-driver); a CU's target is `<kind>-<triple>`.
ENTRY_SECTIONS = {"openmp": ENTRIES_SECTION, "cuda": "cuda_offloading_entries"}
# The payload's code kind for an OffloadBinary image kind.
CODE_KINDS = {"elf": "object", "bc": "llvm-bc"}


class OffloadEntry(NamedTuple):
    """One `__tgt_offload_entry` row with its name resolved."""

    name: str
    size: int
    flags: int
    symbol: str = ""  # the host symbol its address relocation names (objects only)

    @property
    def kind(self) -> str:
        """The table's kind for this row."""
        if self.flags & ENTRY_INDIRECT:
            return "indirect-function"
        if self.flags & ENTRY_LINK:
            return "link-variable"
        return "variable" if self.size else "function"  # size 0: a kernel (target region)


def producer(elf: ElfFile) -> str:
    """The clang that made an object, from its `.comment` ("... clang version 19.1.7 ...")
    as a command name (`clang-19`), or `clang` when it does not say."""
    section = elf.section(".comment")
    text = bytes(elf.content(section)).decode("utf-8", "replace") if section else ""
    for word in text.replace("\0", " ").split("clang version ")[1:]:
        major = word.split(".")[0]
        if major.isdigit():
            return f"clang-{major}"
    return "clang"




class SymbolTable:
    """An object's symbols read one at a time by index: a clang object has hundreds, and a
    link reads few of them (its file name, the entries' names), 300 objects at a time."""

    def __init__(self, elf: ElfFile):
        table = next((s for s in elf.sections if s.sh_type == SHT_SYMTAB), None)
        self.raw = elf.content(table) if table is not None else memoryview(b"")
        self.first_global = 0
        self.strtab = b""
        if table is not None:
            if not 0 < table.sh_link < len(elf.sections):
                raise FormatError(f"{elf.name}: corrupt symbol table (bad string table link)")
            self.strtab = bytes(elf.content(elf.sections[table.sh_link]))
            self.first_global = _sh_info(elf, table)
        self.count = len(self.raw) // SYMBOL_ENTRY.size

    def __len__(self) -> int:
        return self.count

    def name(self, index: int) -> str:
        off = SYMBOL_ENTRY.unpack_from(self.raw, index * SYMBOL_ENTRY.size)[0]
        end = self.strtab.find(b"\0", off)
        return self.strtab[off : end if end >= 0 else None].decode("utf-8", "replace")

    def entry(self, index: int) -> tuple[int, int, int]:
        """(st_type, st_shndx, st_value) of symbol `index`."""
        _n, info, _o, shndx, value, _s = SYMBOL_ENTRY.unpack_from(self.raw,
                                                                  index * SYMBOL_ENTRY.size)
        return info & 0xF, shndx, value


def _sh_info(elf: ElfFile, section: Section) -> int:
    """A section header's sh_info (Section leaves it out): for a symbol table, the index of
    its first global symbol."""
    return struct.unpack_from("<I", elf.data, elf.e_shoff + section.index * 64 + 44)[0]


def source_name(elf: ElfFile, fallback: str, table: SymbolTable | None = None) -> str:
    """The object's source file: its first STT_FILE symbol (a local, near the start)."""
    table = table or SymbolTable(elf)
    for i in range(1, min(len(table), table.first_global or len(table))):
        st_type = table.entry(i)[0]
        if st_type == STT_FILE:
            name = table.name(i)
            if name:
                return name
    return fallback


def cus_of(elf: ElfFile, section: Section, origin: str) -> list:
    """One CU per OpenMP image in the object's `.llvm.offloading` section; none in a clang 21+
    relocatable link's output (`.llvm.offloading.relocatable`: its image is linked and
    registered by the object itself, its entries in a section of its own, renamed as
    clang-linker-wrapper renames them, which clang's final link leaves alone too)."""
    if section.name != SECTION:
        return []
    where = f"{origin}: section {section.name}"
    images = parse_binaries(bytes(elf.content(section)), where)
    compiler = producer(elf)
    table = SymbolTable(elf)
    source = source_name(elf, os.path.basename(origin), table)
    refuse_unknown_entry_sections(elf, origin)
    offered = {kind: tuple(e.name for e in entries_of_kind(elf, kind, table))
               for kind in ENTRY_SECTIONS}  # the host side's rows
    out = []
    for i, img in enumerate(images):
        if img.offload_kind not in ENTRY_SECTIONS:
            raise FormatError(f"{where}: a {img.offload_kind} image ({img.triple}); offlink "
                              f"reads clang's OpenMP and CUDA offload images only")
        kind = CODE_KINDS.get(img.image_kind)
        if kind is None or not img.triple:
            raise FormatError(f"{where}: image {i} is {img.image_kind!r} for "
                              f"{img.triple or 'no triple'}; offlink reads ELF objects and "
                              f"LLVM bitcode")
        # (clang-linker-wrapper gives an image of arch "generic", clang 22+'s for CPU targets, none)
        arch = "" if img.arch == "generic" else img.arch
        options = (f"--target={img.triple}", *((f"-march={arch}",) if arch else ()))
        payload = Payload(f"{img.offload_kind}-{img.triple}", kind, source, compiler, options,
                          img.image, offered[img.offload_kind])
        out.append(CU(origin if len(images) == 1 else f"{origin}#{i}", payload))
    return out


def relink_state(cu) -> list | None:
    """What the relink's record (link/relink.py) keeps of a CU `cus_of` made besides its
    payload: nothing (a plain CU whose code is its image's bytes); None for another
    dialect's CU."""
    if type(cu) is CU and cu.payload.target.startswith(_KINDS):
        return []
    return None


def relink_cu(origin: str, payload, state: list):
    """The CU `relink_state` recorded, with its payload (whose code is read again only where
    it is needed)."""
    return CU(origin, payload)


_KINDS = tuple(f"{kind}-" for kind in ENTRY_SECTIONS)


# Driver words that make clang run its own device link and libomptarget registration
# (clang-linker-wrapper), at a final link and, since clang 19, at `-r` too.
DRIVER_OFFLOAD_WORDS = ("-fopenmp-targets=", "--offload-arch=", "-foffload-lto",
                        "-fno-offload-lto", "--offload-new-driver", "-fgpu-rdc")
# Words clang reads only when it offloads: without the words above they are unused, a
# warning (an error under -Werror, as LLVM's is_initial_device test links).
OFFLOAD_ONLY_WORDS = frozenset({"-nogpulib", "-nogpulibc"})


def is_offload_driver_word(word: str) -> bool:
    """A word of a clang link line that belongs to clang's own offload link."""
    return word.startswith(DRIVER_OFFLOAD_WORDS) or word in OFFLOAD_ONLY_WORDS


def without_offload_driver(argv: list[str]) -> list[str]:
    """A clang link line without the words that start clang's own offload link, so `-r`
    concatenates the CUs' `.llvm.offloading` and entries as `ld -r` does (offlink links the
    device code when the program is linked)."""
    if "clang" not in os.path.basename(argv[0]):
        return argv
    return [argv[0], *(w for w in argv[1:] if not is_offload_driver_word(w))]


def relocatable_argv(argv: list[str]) -> list[str]:
    """A `-r` link without the words that make clang 19+ link the device code at `-r` time
    (clang 21+'s CUs that offlink links at `-r` itself: relocatable.py)."""
    return without_offload_driver(argv)


def _string_at(elf: ElfFile, shndx: int, offset: int, where: str,
               contents: dict[int, bytes]) -> str:
    if shndx >= len(elf.sections):
        raise FormatError(f"{where}: entry name in section {shndx}, which does not exist")
    data = contents.get(shndx)
    if data is None:
        data = contents[shndx] = bytes(elf.content(elf.sections[shndx]))
    end = data.find(b"\0", offset)
    if offset >= len(data) or end < 0:
        raise FormatError(f"{where}: entry name out of bounds")
    return data[offset:end].decode("utf-8", "replace")


def refuse_unknown_entry_sections(elf: ElfFile, origin: str) -> None:
    """One error for an offload entries section offlink does not know (hip_offloading_entries,
    a later release's name): its rows would be missing from the table."""
    for s in elf.sections:
        if s.sh_type != SHT_RELA and entries_format.is_entries_section(s.name) \
                and s.name not in entries_format.SECTIONS:
            raise FormatError(f"{origin}: section {s.name} holds offload entries offlink does "
                              f"not read (it reads {', '.join(entries_format.SECTIONS)})")


def entries_of_kind(elf: ElfFile, kind: str = "openmp",
                    table: SymbolTable | None = None) -> list[OffloadEntry]:
    """An object's rows of one offload kind, whichever generation wrote them: the kind's own
    section (clang 17-20) and `llvm_offload_entries` filtered by Kind (clang 21+)."""
    out = []
    for name, section_kind in entries_format.SECTIONS.items():
        if section_kind in (kind, None):
            out += object_entries(elf, name, table, kind)
    return out


def object_entries(elf: ElfFile, name: str = ENTRIES_SECTION,
                   table: SymbolTable | None = None,
                   kind: str | None = None) -> list[OffloadEntry]:
    """The `omp_offloading_entries` (or `name`) rows of a relocatable object (host or device
    side), of offload `kind` (all when None), with names read through their relocations, in
    section order."""
    section = elf.section(name)
    if section is None:
        return []
    where = f"{elf.name}: {name}"
    content = bytes(elf.content(section))
    found = entries_format.rows(name, content, where, kind)
    rela = next((s for s in elf.sections if s.sh_type == SHT_RELA
                 and s.name == ".rela" + name), None)
    relocs: dict[int, tuple[int, int]] = {}
    if rela is not None:
        for r_offset, r_info, r_addend in rela_entries(elf, rela):
            relocs[r_offset] = (r_info >> 32, r_addend)
    symbols = table or SymbolTable(elf)
    strings: dict[int, bytes] = {}  # section index -> content (the names share a section)
    out = []
    for row in found:
        off, size, flags = row.addr_at, row.size, row.flags
        if row.name_at not in relocs:
            raise FormatError(f"{where}: the entry at {row.offset:#x} has no name")
        index, addend = relocs[row.name_at]
        if index >= len(symbols):
            raise FormatError(f"{where}: bad symbol index {index}")
        st_type, st_shndx, st_value = symbols.entry(index)
        base = 0 if st_type == STT_SECTION else st_value
        name = _string_at(elf, st_shndx, base + addend, where, strings)
        host = ""
        if off in relocs and relocs[off][0] < len(symbols):
            host = symbols.name(relocs[off][0])
        out.append(OffloadEntry(name, size, flags, host))
    return out


# -- the linked binary ----------------------------------------------------------------------



def linked_entries_of_kind(elf: ElfFile, kind: str = "openmp"
                           ) -> list[tuple[int, OffloadEntry]]:
    """linked_entries of one offload kind, from every section that holds such rows."""
    out = []
    for name, section_kind in entries_format.SECTIONS.items():
        if section_kind in (kind, None):
            out += linked_entries(elf, name, kind)
    return out


def linked_entries(elf: ElfFile, name: str = ENTRIES_SECTION,
                   kind: str | None = None) -> list[tuple[int, OffloadEntry]]:
    """(host address, row) of every `omp_offloading_entries` (or `name`) row of a linked
    executable or shared library: what libomptarget (or the CUDA runtime) reads at run time,
    with the dynamic relocations of a PIE or DSO applied."""
    section = elf.section(name)
    if section is None or not section.sh_addr:
        return []
    content = bytes(elf.content(section))
    words = loaded_words(elf, section, 8)
    # The rows as loaded (relocated pointers in): a 32-byte row's first word is its address,
    # never zero, where a 56-byte row has Reserved=0 and its Version in the file.
    loaded = bytearray(content)
    for off, value in words.items():
        loaded[off:off + 8] = value.to_bytes(8, "little")
    content_for_rows = bytes(loaded)
    out = []
    for row in entries_format.rows(name, content_for_rows, f"{elf.name}: {name}", kind):
        name_addr = words[row.name_at]
        if not name_addr and not words[row.addr_at] and not row.size:
            continue  # a zero row (none are written, but a dummy could be)
        out.append((words[row.addr_at],
                    OffloadEntry(_read_cstr(elf, name_addr), row.size, row.flags)))
    return out


def _read_cstr(elf: ElfFile, address: int) -> str:
    for s in elf.sections:
        if s.sh_addr and s.sh_addr <= address < s.sh_addr + s.sh_size and s.sh_type != 8:
            data = bytes(elf.content(s))
            off = address - s.sh_addr
            end = data.find(b"\0", off)
            if end >= 0:
                return data[off:end].decode("utf-8", "replace")
    raise FormatError(f"{elf.name}: {ENTRIES_SECTION}: an entry's name at {address:#x} is in "
                      f"no section")
