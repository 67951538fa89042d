"""The `.openmp_target` table, format version 1: declared once here (spec: formats/table.md).

The construct declarations are the reference. `build_table` writes a table from plain data;
bulk reading goes through `struct` in `offlink.table` (construct costs ~15 us a row).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from construct import (
    Array,
    Const,
    Enum,
    Int16ul,
    Int32ul,
    Int64sl,
    Int64ul,
    Padding,
    Struct,
)

MAGIC = b"OFFLINK\0"
VERSION = 1
SECTION = ".openmp_target"
SYMBOL = "__OPENMP_TARGET__"
IMAGE_ALIGN = 64
SECTION_ALIGN = 64

IMAGE_KINDS = {"shared-object": 1, "cubin": 2, "fatbin": 3, "ptx": 4, "nvptx-none": 5}
SYMBOL_KINDS = {"function": 1, "variable": 2, "indirect-function": 3, "link-variable": 4}
IMAGE_KIND_NAMES = {v: k for k, v in IMAGE_KINDS.items()}
SYMBOL_KIND_NAMES = {v: k for k, v in SYMBOL_KINDS.items()}

Header = Struct(
    "magic" / Const(MAGIC),
    "version" / Int16ul,
    "header_size" / Int16ul,
    "flags" / Int32ul,
    "total_size" / Int64ul,
    "meta_size" / Int64ul,
    "meta_crc32" / Int32ul,
    "n_targets" / Int32ul,
    "n_symbols" / Int32ul,
    "strings_size" / Int32ul,
    "targets_off" / Int64ul,
    "symbols_off" / Int64ul,
    "index_off" / Int64ul,
    "strings_off" / Int64ul,
    Padding(16),
)

TargetEntry = Struct(
    "name_off" / Int32ul,
    "name_len" / Int32ul,
    "kind" / Enum(Int16ul, **IMAGE_KINDS),
    "flags" / Int16ul,
    "image_crc32" / Int32ul,
    "image_off" / Int64ul,
    "image_size" / Int64ul,
    Padding(8),
)

SymbolRow = Struct(
    "name_off" / Int32ul,
    "name_len" / Int32ul,
    "host_offset" / Int64sl,
    "size" / Int64ul,
    "kind" / Enum(Int16ul, **SYMBOL_KINDS),
    "flags" / Int16ul,
    Padding(4),
)


def AddressIndex(n: int) -> Struct:  # noqa: N802 - a construct factory, named like one
    return Struct("key" / Array(n, Int64sl), "row" / Array(n, Int32ul))


HEADER_SIZE = Header.sizeof()
TARGET_SIZE = TargetEntry.sizeof()
SYMBOL_SIZE = SymbolRow.sizeof()
assert (HEADER_SIZE, TARGET_SIZE, SYMBOL_SIZE) == (96, 40, 32)

# Field offsets used by fast readers (the C core checks its own against these in the tests).
HEADER_STRUCT = struct.Struct("<8sHHIQQIIIIQQQQ16x")
TARGET_STRUCT = struct.Struct("<IIHHIQQ8x")
SYMBOL_STRUCT = struct.Struct("<IIqQHH4x")
CRC_OFFSET = 32


@dataclass(frozen=True)
class ImageSpec:
    """One target's image as the writer sees it."""

    target: str
    kind: str
    image: bytes


@dataclass(frozen=True)
class RowSpec:
    """One offered symbol as the writer sees it; host_offset is relative to the table."""

    name: str
    host_offset: int
    size: int
    kind: str


def name_key(name: bytes) -> bytes:
    """Sort key of the spec: bytewise, a prefix first (Python's bytes order is exactly that)."""
    return name


def eytzinger(pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Lay out sorted pairs in Eytzinger (BFS) order: out[k-1] is node k of the in-order tree."""
    n = len(pairs)
    out: list[tuple[int, int]] = [(0, 0)] * n
    it = iter(pairs)
    # Iterative in-order walk of nodes 1..n.
    stack: list[int] = []
    k = 1
    while stack or k <= n:
        while k <= n:
            stack.append(k)
            k *= 2
        k = stack.pop()
        out[k - 1] = next(it)
        k = 2 * k + 1
    return out


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


@dataclass(frozen=True)
class Layout:
    """Where the images go and how big the table is, fixed before the host link."""

    image_offsets: tuple[int, ...]
    total_size: int


def reserve(names: Sequence[str], targets: Sequence[str], image_sizes: Sequence[int]) -> Layout:
    """The layout of a table with at most these row names; a table with a subset of the rows
    (host definitions the linker discarded) fits in it with its images in the same place."""
    unique = {s.encode() for s in [*names, *targets]}
    end = _meta_layout(len(targets), len(names), sum(len(s) + 1 for s in unique))["meta_size"]
    offsets = []
    for size in image_sizes:
        end = _align(end, IMAGE_ALIGN)
        offsets.append(end)
        end += size
    return Layout(tuple(offsets), _align(end, 8))


def layout_size(names: Sequence[str], targets: Sequence[str], image_sizes: Sequence[int]) -> int:
    """Exact size of a table with these row names, targets and image sizes."""
    return reserve(names, targets, image_sizes).total_size


def _meta_layout(n_targets: int, n_symbols: int, strings_size: int) -> dict[str, int]:
    targets_off = HEADER_SIZE
    symbols_off = targets_off + n_targets * TARGET_SIZE
    index_off = symbols_off + n_symbols * SYMBOL_SIZE
    strings_off = _align(index_off + n_symbols * 12, 8)
    return {
        "targets_off": targets_off,
        "symbols_off": symbols_off,
        "index_off": index_off,
        "strings_off": strings_off,
        "meta_size": strings_off + strings_size,
    }


def build_table(images: Sequence[ImageSpec], rows: Sequence[RowSpec],
                layout: Layout | None = None) -> bytes:
    """Write a complete table. Rows are sorted here; duplicate names are refused.

    With a layout (from `reserve`), the images go where it put them and the table has its size.
    """
    from ..errors import FormatError

    ordered = sorted(rows, key=lambda r: name_key(r.name.encode()))
    for a, b in zip(ordered, ordered[1:]):
        if a.name == b.name:
            raise FormatError(f"duplicate symbol name '{a.name}' in the offload table")
    pool = bytearray()
    offsets: dict[bytes, int] = {}

    def intern(text: str) -> tuple[int, int]:
        raw = text.encode()
        if raw not in offsets:
            offsets[raw] = len(pool)
            pool.extend(raw + b"\0")
        return offsets[raw], len(raw)

    target_names = [intern(img.target) for img in images]
    row_names = [intern(r.name) for r in ordered]
    lay = _meta_layout(len(images), len(ordered), len(pool))
    meta_size = lay["meta_size"]

    if layout is None:
        layout = reserve([r.name for r in ordered], [i.target for i in images],
                         [len(i.image) for i in images])
    image_offsets = layout.image_offsets
    total = layout.total_size
    if (images and image_offsets[0] < meta_size) or len(image_offsets) != len(images) \
            or total < meta_size:
        raise FormatError("the table does not fit the space reserved for it")

    out = bytearray(total)
    pos = lay["targets_off"]
    for img, (noff, nlen), ioff in zip(images, target_names, image_offsets):
        if img.kind not in IMAGE_KINDS:
            raise FormatError(f"unknown image kind '{img.kind}' for target '{img.target}'")
        TARGET_STRUCT.pack_into(
            out, pos, noff, nlen, IMAGE_KINDS[img.kind], 0, zlib.crc32(img.image), ioff,
            len(img.image),
        )
        out[ioff : ioff + len(img.image)] = img.image
        pos += TARGET_SIZE
    pos = lay["symbols_off"]
    for row, (noff, nlen) in zip(ordered, row_names):
        if row.kind not in SYMBOL_KINDS:
            raise FormatError(f"unknown symbol kind '{row.kind}' for '{row.name}'")
        SYMBOL_STRUCT.pack_into(out, pos, noff, nlen, row.host_offset, row.size,
                                SYMBOL_KINDS[row.kind], 0)
        pos += SYMBOL_SIZE
    pairs = sorted((row.host_offset, i) for i, row in enumerate(ordered))
    tree = eytzinger(pairs)
    n = len(tree)
    if n:
        struct.pack_into(f"<{n}q", out, lay["index_off"], *(k for k, _ in tree))
        struct.pack_into(f"<{n}I", out, lay["index_off"] + 8 * n, *(r for _, r in tree))
    out[lay["strings_off"] : meta_size] = pool
    HEADER_STRUCT.pack_into(
        out, 0, MAGIC, VERSION, HEADER_SIZE, 0, total, meta_size, 0, len(images), len(ordered),
        len(pool), lay["targets_off"], lay["symbols_off"], lay["index_off"], lay["strings_off"],
    )
    struct.pack_into("<I", out, CRC_OFFSET, zlib.crc32(bytes(out[:meta_size])))
    return bytes(out)
