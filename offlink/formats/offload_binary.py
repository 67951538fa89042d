"""LLVM's offload formats as clang writes them (formats/offload-binary.md).

- OffloadBinary, section `.llvm.offloading` of a clang offload object (llvm/Object/
  OffloadBinary.h): a header, entries (image kind, offload kind, flags, a string map with at
  least `triple` and `arch`, the image), the strings and images. A relocatable link
  concatenates binaries; each starts 8-aligned. Version 1 (clang 17-22): one entry, the
  header's fifth field its size in bytes, 16-byte string pairs. Version 2 (LLVM 23): the fifth
  field counts the entries (several images under one header), string pairs of 24 bytes (the
  value's size added). Version 3 (LLVM's development line, after 23): a 40-byte header whose
  InflatedSize, where not 0, says everything after the header is compressed (zlib or zstd)
  and how large it is inflated.
- `__tgt_offload_entry`'s flags (seed 001), of the rows of section `omp_offloading_entries`
  (offload_entries.py reads the rows, every generation).

declarations.py declares the OffloadBinary with construct: the reference. The link reads it
with `struct` (benchmarks/formats/RESULTS.md says why), held to it by the tests.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from ..errors import FormatError

SECTION = ".llvm.offloading"
ENTRIES_SECTION = "omp_offloading_entries"
MAGIC = b"\x10\xff\x10\xad"
VERSION = 1  # what build_binary writes unless told
VERSIONS = (1, 2, 3)  # what parse_binaries reads
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SHT_LLVM_OFFLOADING = 0x6FFF4C0B

# OffloadBinary.h: ImageKind and OffloadKind (the latter a bit mask).
IMAGE_KINDS = {0: "none", 1: "elf", 2: "bc", 3: "cubin", 4: "fatbin", 5: "ptx"}
OFFLOAD_KINDS = {0: "none", 1: "openmp", 2: "cuda", 4: "hip"}

# __tgt_offload_entry flags (omptarget.h, OpenMPOffloadMappingFlags in clang 19).
ENTRY_LINK = 1  # declare target link
ENTRY_CTOR = 2
ENTRY_DTOR = 4
ENTRY_INDIRECT = 8  # declare target indirect

# The layouts of declarations.py's OffloadBinaryHeader, OffloadBinaryEntry,
# OffloadBinaryString (version 1), OffloadBinaryStringV2 (2 and 3) and the InflatedSize that
# version 3's header adds, field for field.
HEADER = struct.Struct("<4sIQQQ")
INFLATED = struct.Struct("<Q")
ENTRY = struct.Struct("<HHIQQQQ")
STRING = struct.Struct("<QQ")
STRING_V2 = struct.Struct("<QQQ")


class OffloadImage(NamedTuple):
    """One image of an OffloadBinary."""

    image_kind: str  # "elf", "bc", "cubin", "fatbin", "ptx"
    offload_kind: str  # "openmp", "cuda", "hip"
    flags: int
    strings: dict[str, str]  # "triple", "arch", and whatever else the producer put there
    image: bytes

    @property
    def triple(self) -> str:
        return self.strings.get("triple", "")

    @property
    def arch(self) -> str:
        return self.strings.get("arch", "")


def _cstr(data: bytes, off: int, where: str) -> str:
    end = data.find(b"\0", off)
    if off >= len(data) or end < 0:
        raise FormatError(f"{where}: string at {off:#x} runs past the binary")
    return data[off:end].decode("utf-8", "replace")


def _inflate(blob: bytes, entries_off: int, inflated: int, where: str) -> bytes:
    """A compressed version 3 binary as OffloadBinary::create inflates it: the header kept
    (its Size the inflated size, its InflatedSize 0), the rest decompressed."""
    if entries_off > len(blob) or inflated < entries_off:
        raise FormatError(f"{where}: compressed OffloadBinary out of bounds")
    body = blob[entries_off:]
    if body[:4] == ZSTD_MAGIC:
        raise FormatError(f"{where}: OffloadBinary version 3 compressed with zstd; offlink "
                          f"reads zlib-compressed ones (Python's zlib; no zstd here)")
    try:
        out = zlib.decompress(body)
    except zlib.error as e:
        raise FormatError(f"{where}: compressed OffloadBinary does not inflate ({e})") from None
    if entries_off + len(out) != inflated:
        raise FormatError(f"{where}: compressed OffloadBinary inflates to {len(out)} bytes, not "
                          f"{inflated - entries_off}")
    head = bytearray(blob[:entries_off])
    head[8:16] = inflated.to_bytes(8, "little")
    head[32:40] = bytes(8)
    return bytes(head) + out


def parse_binaries(data: bytes, where: str) -> list[OffloadImage]:
    """Every image of every OffloadBinary in a `.llvm.offloading` section (several after
    `ld -r`; several per binary from version 2), in order."""
    out: list[OffloadImage] = []
    pos = 0
    while pos < len(data):
        if not any(data[pos:pos + HEADER.size]):
            pos += 8  # padding between concatenated binaries
            continue
        if len(data) - pos < HEADER.size:
            raise FormatError(f"{where}: truncated OffloadBinary header at {pos:#x}")
        magic, version, size, entry_off, entries = HEADER.unpack_from(data, pos)
        if magic != MAGIC:
            raise FormatError(f"{where}: not an OffloadBinary at {pos:#x} (bad magic)")
        if version not in VERSIONS:
            raise FormatError(f"{where}: OffloadBinary version {version} (offlink reads 1, "
                              f"clang 17-22's, 2, LLVM 23's, and 3, LLVM's development line's)")
        header = HEADER.size + (INFLATED.size if version >= 3 else 0)
        if size < header or pos + size > len(data):
            raise FormatError(f"{where}: OffloadBinary at {pos:#x} claims {size} bytes, "
                              f"out of bounds")
        blob = data[pos:pos + size]
        inflated = INFLATED.unpack_from(blob, HEADER.size)[0] if version >= 3 else 0
        if inflated:
            blob = _inflate(blob, entry_off, inflated, where)
        out += _images(blob, version, entry_off, entries, pos, where)
        pos += (size + 7) // 8 * 8
    return out


def _images(blob: bytes, version: int, entry_off: int, entries: int, pos: int,
            where: str) -> list[OffloadImage]:
    """The images of one (inflated) OffloadBinary; `entries` is the header's fifth field: the
    entries' size in bytes (version 1) or their count."""
    size = len(blob)
    if version == 1:
        if entries % ENTRY.size:
            raise FormatError(f"{where}: OffloadBinary entry size {entries} is not a "
                              f"multiple of {ENTRY.size}")
        entries //= ENTRY.size
    pair = STRING if version == 1 else STRING_V2
    if entry_off > size or entries > (size - entry_off) // ENTRY.size:
        raise FormatError(f"{where}: OffloadBinary at {pos:#x} claims {size} bytes, out of "
                          f"bounds")
    out = []
    for e in range(entry_off, entry_off + entries * ENTRY.size, ENTRY.size):
        ik, ok, flags, soff, nstr, ioff, isize = ENTRY.unpack_from(blob, e)
        if soff + nstr * pair.size > size or ioff + isize > size:
            raise FormatError(f"{where}: OffloadBinary entry at {pos + e:#x} is out of bounds")
        strings = {}
        for fields in pair.iter_unpack(blob[soff:soff + nstr * pair.size]):
            key = _cstr(blob, fields[0], where)
            if version == 1:
                strings[key] = _cstr(blob, fields[1], where)
            elif fields[1] + fields[2] > size:
                raise FormatError(f"{where}: OffloadBinary string at {fields[1]:#x} runs past "
                                  f"the binary")
            else:
                strings[key] = blob[fields[1]:fields[1] + fields[2]].decode("utf-8", "replace")
        out.append(OffloadImage(IMAGE_KINDS.get(ik, f"kind-{ik}"),
                                OFFLOAD_KINDS.get(ok, f"kind-{ok}"), flags, strings,
                                bytes(blob[ioff:ioff + isize])))
    return out


def build_binary(images: list[OffloadImage], version: int = VERSION,
                 compress: bool = False) -> bytes:
    """One OffloadBinary holding `images`, as OffloadBinary::write lays it out (header,
    entries, string map, strings, then the images, 8-aligned; version 1 one image per binary
    as clang 17-22 write it, but several are read). `compress` (version 3): the rest after
    the header zlib-compressed, as OffloadBinary::write(..., compression::Params) writes it.
    For tests (no tool here writes version 3) and for wrapping."""
    kinds = {v: k for k, v in IMAGE_KINDS.items()}
    offloads = {v: k for k, v in OFFLOAD_KINDS.items()}
    pair = STRING if version == 1 else STRING_V2
    entry_off = HEADER.size + (INFLATED.size if version >= 3 else 0)
    maps_off = entry_off + ENTRY.size * len(images)
    n_strings = sum(len(i.strings) for i in images)
    strings_off = maps_off + pair.size * n_strings
    strtab = bytearray()
    str_at: dict[str, int] = {}

    def intern(s: str) -> int:
        if s not in str_at:
            str_at[s] = strings_off + len(strtab)
            strtab.extend(s.encode() + b"\0")
        return str_at[s]

    maps = bytearray()
    map_offsets = []
    for img in images:
        map_offsets.append(maps_off + len(maps))
        for k, v in sorted(img.strings.items()):
            maps += pair.pack(intern(k), intern(v), *(() if version == 1 else
                                                        (len(v.encode()),)))
    pos = (strings_off + len(strtab) + 7) // 8 * 8
    image_offsets = []
    for img in images:
        image_offsets.append(pos)
        pos += len(img.image) if version > 1 else (len(img.image) + 7) // 8 * 8
    pos = (pos + 7) // 8 * 8
    out = bytearray(pos)
    fifth = ENTRY.size * len(images) if version == 1 else len(images)
    out[:HEADER.size] = HEADER.pack(MAGIC, version, pos, entry_off, fifth)
    for i, img in enumerate(images):
        out[entry_off + i * ENTRY.size:entry_off + (i + 1) * ENTRY.size] = ENTRY.pack(
            kinds[img.image_kind], offloads[img.offload_kind], img.flags, map_offsets[i],
            len(img.strings), image_offsets[i], len(img.image))
        out[image_offsets[i]:image_offsets[i] + len(img.image)] = img.image
    out[maps_off:maps_off + len(maps)] = maps
    out[strings_off:strings_off + len(strtab)] = strtab
    if not compress:
        return bytes(out)
    if version < 3:
        raise ValueError("only version 3 binaries are compressed")
    body = zlib.compress(bytes(out[entry_off:]))
    head = bytearray(out[:entry_off])
    head[8:16] = (entry_off + len(body)).to_bytes(8, "little")
    head[32:40] = len(out).to_bytes(8, "little")
    packed = bytes(head) + body
    return packed + bytes(-len(packed) % 8)
