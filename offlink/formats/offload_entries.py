"""LLVM's offload entry rows, every generation (llvm/Frontend/Offloading/Utility.h; seed 001).

- generation 1 (clang 17-19): `__tgt_offload_entry` {addr, name, size, i32 flags, i32
  reserved}, 32 bytes, in `omp_offloading_entries` (OpenMP) or `cuda_offloading_entries`;
- generation 2 (clang 20): {u64 Reserved=0, u16 Version=1, u16 Kind, u32 Flags, ptr Address,
  ptr SymbolName, u64 Size, u64 Data, ptr AuxAddr}, 56 bytes, in those same sections (align 1);
- generation 3 (clang 21+): the same 56 bytes, every kind in `llvm_offload_entries` (align 8),
  told apart by Kind (1 OpenMP, 2 CUDA, 4 HIP).

libomptarget >= 20 takes both row sizes (a row whose first 8 bytes are non-zero is a 32-byte
one); offlink tells them apart the same way, plus Version=1, in a linked binary and by the
same fields in a relocatable object (whose pointer fields are zero: RELA relocations). Anything
else (another section, version or kind) is a FormatError naming what it is.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import FormatError

# The layouts of declarations.py's OffloadEntryV1 and OffloadEntryV2, field for field.
ENTRY_V1 = struct.Struct("<QQQii")
ENTRY_V2 = struct.Struct("<QHHIQQQQQ")
ENTRY_VERSION = 1  # the 56-byte row's Version field, the only one LLVM 20-22 writes
# OpenMP's flag of a row that carries the `#pragma omp requires` clauses for libomptarget
# (clang 19: in `reserved`, no name; clang 21+: in Data, named ".requires"), with no address:
# no symbol, no table row.
REGISTER_REQUIRES = 0x10
KINDS = {1: "openmp", 2: "cuda", 4: "hip"}
KIND_NUMBERS = {v: k for k, v in KINDS.items()}
READ_KINDS = ("openmp", "cuda")  # the kinds offlink links

# Section -> the offload kind of its rows (None: every kind, by the row's Kind field).
SECTIONS = {"omp_offloading_entries": "openmp", "cuda_offloading_entries": "cuda",
            "llvm_offload_entries": None}
ALL_KINDS_SECTION = "llvm_offload_entries"
# Sections of this shape that offlink does not know (hip_offloading_entries, a future name).
ENTRY_SECTION_SUFFIXES = ("_offloading_entries", "_offload_entries")


def is_entries_section(name: str) -> bool:
    """A section name that looks like an offload entries section, known or not."""
    return name.endswith(ENTRY_SECTION_SUFFIXES)


class Row(NamedTuple):
    """One entry row: where it is and what it says (its pointer fields by offset, so a caller
    reads them through relocations or loaded words)."""

    offset: int  # of the row in its section
    kind: str  # "openmp", "cuda"
    size: int
    flags: int
    addr_at: int  # offset of the Address field in the section
    name_at: int  # offset of the SymbolName field
    generation: int


def _is_v2(content: bytes) -> bool:
    """Whether a per-kind section's rows are 56-byte ones: Reserved 0 and Version 1 in every
    56-byte slot (a 32-byte row's first 8 bytes are its address, its next 8 its name pointer:
    zero in an object, an address in a linked binary)."""
    if not content or len(content) % ENTRY_V2.size:
        return False
    return all(ENTRY_V2.unpack_from(content, off)[:2] == (0, ENTRY_VERSION)
               for off in range(0, len(content), ENTRY_V2.size))


def generation_of(section: str, content: bytes) -> int:
    """The generation of a section's rows (1, 2 or 3)."""
    if section == ALL_KINDS_SECTION:
        return 3
    return 2 if _is_v2(content) else 1


def rows(section: str, content: bytes, where: str, kind: str | None = None) -> list[Row]:
    """The rows of an entries section (of `kind` only, when given), in order. `where` names
    the object and section for errors."""
    if section not in SECTIONS:
        raise FormatError(f"{where}: offload entries section {section!r}, which offlink does "
                          f"not read (it reads {', '.join(SECTIONS)})")
    gen = generation_of(section, content)
    out = []
    if gen == 1:
        if len(content) % ENTRY_V1.size:
            raise FormatError(f"{where} is {len(content)} bytes, not a multiple of "
                              f"{ENTRY_V1.size} (clang 17-19's rows) nor of {ENTRY_V2.size} "
                              f"(clang 20-22's)")
        row_kind = SECTIONS[section]
        if kind is not None and kind != row_kind:
            return []
        for off in range(0, len(content), ENTRY_V1.size):
            _a, _n, size, flags, _r = ENTRY_V1.unpack_from(content, off)
            if row_kind == "openmp" and flags & REGISTER_REQUIRES:
                continue  # clang 19's requires row (its clauses in `reserved`), no entry
            out.append(Row(off, row_kind, size, flags, off, off + 8, 1))
        return out
    if len(content) % ENTRY_V2.size:
        raise FormatError(f"{where} is {len(content)} bytes, not a multiple of "
                          f"{ENTRY_V2.size} (clang 21-22's rows)")
    for off in range(0, len(content), ENTRY_V2.size):
        reserved, version, number, flags, _a, _n, size, _d, _x = \
            ENTRY_V2.unpack_from(content, off)
        i = off // ENTRY_V2.size
        if version != ENTRY_VERSION:
            raise FormatError(f"{where}: entry {i} has version {version}; offlink reads "
                              f"version {ENTRY_VERSION} (clang 20-22's 56-byte rows)")
        row_kind = KINDS.get(number)
        if row_kind not in READ_KINDS:
            said = f"{row_kind} ({number})" if row_kind else f"{number}, unknown"
            raise FormatError(f"{where}: entry {i} is of offload kind {said}; offlink reads "
                              f"OpenMP (1) and CUDA (2) entries")
        if SECTIONS[section] is not None and row_kind != SECTIONS[section]:
            raise FormatError(f"{where}: entry {i} is a {row_kind} entry in the "
                              f"{SECTIONS[section]} section")
        if reserved:
            raise FormatError(f"{where}: entry {i} has a non-zero reserved field")
        if row_kind == "openmp" and flags & REGISTER_REQUIRES:
            continue  # the program's requirements, not an entry of the image
        if kind is None or row_kind == kind:
            out.append(Row(off, row_kind, size, flags, off + 16, off + 24, gen))
    return out


def row_size(generation: int) -> int:
    return ENTRY_V1.size if generation == 1 else ENTRY_V2.size
