"""The fatbin container (as CUDA's fatbinary writes it, cuobjdump reads the same): the one
reader of its bytes, for the CUDA target, `offlink inspect` and `offlink extract`."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import FormatError

# The header and each entry's first fields (an entry's sm at +28, its flags at +40).
FATBIN_MAGIC = 0xBA55ED50
FATBIN_HEADER = struct.Struct("<IHHQ")  # magic, version, header_size, size of the entries
FATBIN_ENTRY = struct.Struct("<HHIQ")  # kind, version, header_size, payload size (padded)
FATBIN_PTX, FATBIN_ELF = 1, 2
FATBIN_COMPRESSED = 0x2000 | 0x8000  # flag bits of a compressed entry (older, CUDA 13)


@dataclass(frozen=True)
class FatbinEntry:
    kind: int  # FATBIN_PTX or FATBIN_ELF
    sm: int  # e.g. 90
    data: bytes  # the cubin, or the PTX text (trailing NULs removed)


def is_fatbin(data: bytes) -> bool:
    return len(data) >= 4 and struct.unpack_from("<I", data)[0] == FATBIN_MAGIC


def fatbin_entries(data: bytes, where: str) -> list[FatbinEntry]:
    """The images of a fatbin, every offset checked; compressed entries are refused."""
    if len(data) < FATBIN_HEADER.size or not is_fatbin(data):
        raise FormatError(f"{where}: not a fatbin")
    _, _, header_size, size = FATBIN_HEADER.unpack_from(data)
    end = header_size + size
    if header_size < FATBIN_HEADER.size or end > len(data):
        raise FormatError(f"{where}: truncated fatbin")
    out = []
    pos = header_size
    while pos < end:
        if end - pos < 64:
            raise FormatError(f"{where}: truncated fatbin entry at offset {pos}")
        kind, _, entry_header, payload = FATBIN_ENTRY.unpack_from(data, pos)
        sm = struct.unpack_from("<I", data, pos + 28)[0]
        flags = struct.unpack_from("<Q", data, pos + 40)[0]
        start = pos + entry_header
        if entry_header < 64 or start + payload > end:
            raise FormatError(f"{where}: corrupt fatbin entry at offset {pos}")
        if flags & FATBIN_COMPRESSED:
            raise FormatError(f"{where}: compressed fatbin entry at offset {pos} (offlink "
                              f"builds with -no-compress)")
        body = data[start : start + payload]
        if kind == FATBIN_PTX:
            body = body.rstrip(b"\0")
        if kind in (FATBIN_PTX, FATBIN_ELF):
            out.append(FatbinEntry(kind, sm, body))
        pos = start + payload
    return out


def fatbin_archs(image: bytes) -> list[str]:
    """The architectures a fatbin holds code for (sm_NN, compute_NN for PTX), from the entries'
    headers only and never an error (inspect shows what it can): a compressed entry
    (fatbinary's default for PTX, made by another tool) names its architecture as well as a
    plain one."""
    found = {(e.kind == FATBIN_PTX, e.sm) for _, _, entries in fatbin_containers(image)[:1]
             for e in entries if e.kind in (FATBIN_PTX, FATBIN_ELF)}
    return [f"{'compute' if ptx else 'sm'}_{sm}" for ptx, sm in sorted(found)]


@dataclass(frozen=True)
class FatbinHeaderEntry:
    """One entry of a fatbin as its header says it, read without a check that fails."""
    kind: int  # FATBIN_PTX, FATBIN_ELF, or another kind fatbinary knows
    sm: int
    compressed: bool
    data: bytes  # the payload as stored (compressed ones too)


def fatbin_containers(section: bytes) -> list[tuple[int, int, list[FatbinHeaderEntry]]]:
    """Every fatbin laid one after another in a section (nvcc's `.nv_fatbin`): (its offset,
    its end, its entries), from the headers only and never an error, for inspect: a
    truncated or corrupt container ends the walk."""
    out = []
    pos = 0
    while pos + FATBIN_HEADER.size <= len(section) and is_fatbin(section[pos:]):
        _, _, header_size, size = FATBIN_HEADER.unpack_from(section, pos)
        end = min(pos + header_size + size, len(section))
        entries = []
        entry = pos + header_size
        while header_size and entry + 64 <= end:
            kind, _, entry_header, payload = FATBIN_ENTRY.unpack_from(section, entry)
            if entry_header < 64:
                break
            sm = struct.unpack_from("<I", section, entry + 28)[0]
            flags = struct.unpack_from("<Q", section, entry + 40)[0]
            body = section[entry + entry_header : entry + entry_header + payload]
            entries.append(FatbinHeaderEntry(kind, sm, bool(flags & FATBIN_COMPRESSED), body))
            entry += entry_header + payload
        out.append((pos, end, entries))
        if end <= pos:
            break
        pos = (end + 7) & ~7
    return out
