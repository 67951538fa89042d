"""LLVM's offload formats as clang 19 writes them (formats/offload-binary.md).

- OffloadBinary, section `.llvm.offloading` of a clang offload object (llvm/Object/
  OffloadBinary.h, version 1): a header, entries (image kind, offload kind, flags, a string
  map with at least `triple` and `arch`, the image), the strings and images. A relocatable
  link concatenates binaries; each starts 8-aligned.
- `__tgt_offload_entry`'s flags (seed 001), of the rows of section `omp_offloading_entries`
  (offload_entries.py reads the rows, every generation).

declarations.py declares the OffloadBinary with construct: the reference. The link reads it
with `struct` (benchmarks/formats/RESULTS.md says why), held to it by the tests.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import FormatError

SECTION = ".llvm.offloading"
ENTRIES_SECTION = "omp_offloading_entries"
MAGIC = b"\x10\xff\x10\xad"
VERSION = 1
SHT_LLVM_OFFLOADING = 0x6FFF4C0B

# OffloadBinary.h: ImageKind and OffloadKind (the latter a bit mask).
IMAGE_KINDS = {0: "none", 1: "elf", 2: "bc", 3: "cubin", 4: "fatbin", 5: "ptx"}
OFFLOAD_KINDS = {0: "none", 1: "openmp", 2: "cuda", 4: "hip"}

# __tgt_offload_entry flags (omptarget.h, OpenMPOffloadMappingFlags in clang 19).
ENTRY_LINK = 1  # declare target link
ENTRY_CTOR = 2
ENTRY_DTOR = 4
ENTRY_INDIRECT = 8  # declare target indirect

# The layouts of declarations.py's OffloadBinaryHeader, OffloadBinaryEntry and
# OffloadBinaryString, field for field.
HEADER = struct.Struct("<4sIQQQ")
ENTRY = struct.Struct("<HHIQQQQ")
STRING = struct.Struct("<QQ")


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


def parse_binaries(data: bytes, where: str) -> list[OffloadImage]:
    """Every image of every OffloadBinary in a `.llvm.offloading` section (several after
    `ld -r`), in order."""
    out: list[OffloadImage] = []
    pos = 0
    while pos < len(data):
        if not any(data[pos:pos + HEADER.size]):
            pos += 8  # padding between concatenated binaries
            continue
        if len(data) - pos < HEADER.size:
            raise FormatError(f"{where}: truncated OffloadBinary header at {pos:#x}")
        magic, version, size, entry_off, entry_size = HEADER.unpack_from(data, pos)
        if magic != MAGIC:
            raise FormatError(f"{where}: not an OffloadBinary at {pos:#x} (bad magic)")
        if version != VERSION:
            raise FormatError(f"{where}: OffloadBinary version {version} (offlink reads "
                              f"{VERSION}, clang 17-22's; 2 is LLVM 23's)")
        if size < HEADER.size or pos + size > len(data) or entry_off + entry_size > size:
            raise FormatError(f"{where}: OffloadBinary at {pos:#x} claims {size} bytes, "
                              f"out of bounds")
        blob = data[pos:pos + size]
        if entry_size % ENTRY.size:
            raise FormatError(f"{where}: OffloadBinary entry size {entry_size} is not a "
                              f"multiple of {ENTRY.size}")
        for e in range(entry_off, entry_off + entry_size, ENTRY.size):
            ik, ok, flags, soff, nstr, ioff, isize = ENTRY.unpack_from(blob, e)
            if soff + nstr * STRING.size > size or ioff + isize > size:
                raise FormatError(f"{where}: OffloadBinary entry at {pos + e:#x} is out of "
                                  f"bounds")
            strings = {}
            for k, v in STRING.iter_unpack(blob[soff:soff + nstr * STRING.size]):
                strings[_cstr(blob, k, where)] = _cstr(blob, v, where)
            out.append(OffloadImage(IMAGE_KINDS.get(ik, f"kind-{ik}"),
                                    OFFLOAD_KINDS.get(ok, f"kind-{ok}"), flags, strings,
                                    bytes(blob[ioff:ioff + isize])))
        pos += (size + 7) // 8 * 8
    return out


def build_binary(images: list[OffloadImage]) -> bytes:
    """One OffloadBinary holding `images` (as OffloadBinary::write lays it out: header,
    entries, string map, strings, then each image 8-aligned); for tests and for wrapping."""
    kinds = {v: k for k, v in IMAGE_KINDS.items()}
    offloads = {v: k for k, v in OFFLOAD_KINDS.items()}
    entry_off = HEADER.size
    maps_off = entry_off + ENTRY.size * len(images)
    n_strings = sum(len(i.strings) for i in images)
    strings_off = maps_off + STRING.size * n_strings
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
            maps += STRING.pack(intern(k), intern(v))
    pos = (strings_off + len(strtab) + 7) // 8 * 8
    image_offsets = []
    for img in images:
        image_offsets.append(pos)
        pos = (pos + len(img.image) + 7) // 8 * 8
    out = bytearray(pos)
    out[:HEADER.size] = HEADER.pack(MAGIC, VERSION, pos, entry_off, ENTRY.size * len(images))
    for i, img in enumerate(images):
        out[entry_off + i * ENTRY.size:entry_off + (i + 1) * ENTRY.size] = ENTRY.pack(
            kinds[img.image_kind], offloads[img.offload_kind], img.flags, map_offsets[i],
            len(img.strings), image_offsets[i], len(img.image))
        out[image_offsets[i]:image_offsets[i] + len(img.image)] = img.image
    out[maps_off:maps_off + len(maps)] = maps
    out[strings_off:strings_off + len(strtab)] = strtab
    return bytes(out)
