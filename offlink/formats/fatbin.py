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
    if len(image) < FATBIN_HEADER.size or not is_fatbin(image):
        return []
    _, _, header_size, size = FATBIN_HEADER.unpack_from(image)
    end, pos = min(header_size + size, len(image)), header_size
    found = set()
    while header_size and pos + 64 <= end:
        kind, _, entry_header, payload = FATBIN_ENTRY.unpack_from(image, pos)
        if kind in (FATBIN_PTX, FATBIN_ELF):
            found.add((kind == FATBIN_PTX, int.from_bytes(image[pos + 28:pos + 32], "little")))
        if entry_header < 64:
            break
        pos += entry_header + payload
    return [f"{'compute' if ptx else 'sm'}_{sm}" for ptx, sm in sorted(found)]
