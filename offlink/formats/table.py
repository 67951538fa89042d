"""The `.openmp_target` table, format version 1 (spec: formats/table.md): its constants, its
layout and its writer.

declarations.py declares the table with construct: the reference. `build_table` writes it
with `struct` and the C core or `offlink._pytable` read it; tests hold each of them to the
declaration (benchmarks/formats/RESULTS.md: why not construct itself).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import NamedTuple

from ..errors import FormatError

MAGIC = b"OFFLINK\0"
VERSION = 1
SECTION = ".openmp_target"
SYMBOL = "__OPENMP_TARGET__"


def image_symbol(k: int, suffix: str = "") -> str:
    """The symbol offlink's placeholder object (link/reserve.py) defines at the start (suffix
    "") or just after the end ("_end") of image `k`; registrations name their images by it."""
    return f"__offlink_image_{k}{suffix}"


IMAGE_ALIGN = 64
SECTION_ALIGN = 64

IMAGE_KINDS = {"shared-object": 1, "cubin": 2, "fatbin": 3, "ptx": 4, "nvptx-none": 5,
               "amdgcn-amdhsa": 6}
SYMBOL_KINDS = {"function": 1, "variable": 2, "indirect-function": 3, "link-variable": 4}
# The image kinds whose image is PTX text (kind 5, GCC's nvptx image: one text per CU,
# NUL-separated).
PTX_TEXT_KINDS = tuple(k for k, v in IMAGE_KINDS.items() if v in (4, 5))
IMAGE_KIND_NAMES = {v: k for k, v in IMAGE_KINDS.items()}
SYMBOL_KIND_NAMES = {v: k for k, v in SYMBOL_KINDS.items()}

# The address index: a static B+ tree of 32-bit keys (formats/table.md, "Address index").
INDEX_FANOUT = 16  # keys per node: 16 x i32 fill one 64-byte cache line
KEY_MIN, KEY_MAX, KEY_PAD = -(2**31), 2**31 - 2, 2**31 - 1
SPAN_MAX = 2**32 - 1

# The struct layouts of the writer and of offlink._pytable: field for field those of
# declarations.py (tests/test_format_declarations.py holds them to it).
HEADER_STRUCT = struct.Struct("<8sHHIQQIIIIQQQQ16x")
TARGET_STRUCT = struct.Struct("<IIHHIQQ8x")
SYMBOL_STRUCT = struct.Struct("<IIqQHH4x")
INDEX_NODE_STRUCT = struct.Struct(f"<{INDEX_FANOUT}i")
INDEX_LEAF_STRUCT = struct.Struct(f"<{INDEX_FANOUT}i{2 * INDEX_FANOUT}I")  # keys, (row, span)s
HEADER_SIZE, TARGET_SIZE, SYMBOL_SIZE = HEADER_STRUCT.size, TARGET_STRUCT.size, SYMBOL_STRUCT.size
INDEX_NODE_SIZE, INDEX_LEAF_SIZE = INDEX_NODE_STRUCT.size, INDEX_LEAF_STRUCT.size
CRC_OFFSET = 32  # of meta_crc32 in the header


def index_layers(n: int) -> list[int]:
    """Node counts per layer, leaves first: [leaf blocks, layer 1, ..., root layer]."""
    layers = [-(-n // INDEX_FANOUT)]
    while layers[-1] > 1:
        layers.append(-(-layers[-1] // (INDEX_FANOUT + 1)))
    return layers


def index_size(n: int) -> int:
    layers = index_layers(n)
    return INDEX_LEAF_SIZE * layers[0] + INDEX_NODE_SIZE * sum(layers[1:])


def index_key(host_offset: int) -> int:
    """A row's key: its host_offset clamped to [KEY_MIN, KEY_MAX] (KEY_PAD marks padding)."""
    return min(max(host_offset, KEY_MIN), KEY_MAX)


def index_span(size: int) -> int:
    """A row's span: its size, SPAN_MAX for every size that does not fit 32 bits."""
    return min(size, SPAN_MAX)


def internal_keys(leaf_keys: Sequence[int], n: int) -> list[list[int]]:
    """The keys of the internal layers, root layer first, from the leaf keys (padded).

    Key j of node i in layer h is the first key of leaf block (17 i + j + 1) * 17^(h-1), the
    leftmost leaf under that node's child j + 1, or KEY_PAD when there is no such child."""
    layers = index_layers(n)
    out = []
    for h in range(1, len(layers)):
        step = (INDEX_FANOUT + 1) ** (h - 1)
        keys = []
        for i in range(layers[h]):
            for j in range(INDEX_FANOUT):
                block = ((INDEX_FANOUT + 1) * i + j + 1) * step
                keys.append(leaf_keys[block * INDEX_FANOUT] if block < layers[0] else KEY_PAD)
        out.append(keys)
    return out[::-1]


def build_index(pairs: Sequence[tuple[int, int, int]]) -> bytes:
    """The address index of (host_offset, row, size) triples sorted by host_offset, row."""
    n = len(pairs)
    if n == 0:
        return b""
    blocks = index_layers(n)[0]
    pad = blocks * INDEX_FANOUT - n
    # index_key and index_span, inline (benchmarks/formats/RESULTS.md).
    keys = [KEY_MIN if h < KEY_MIN else KEY_MAX if h > KEY_MAX else h for h, _r, _s in pairs]
    keys += [KEY_PAD] * pad
    entries = [0] * (2 * (n + pad))
    entries[0 : 2 * n : 2] = [r for _h, r, _s in pairs]
    entries[1 : 2 * n : 2] = [s if s < SPAN_MAX else SPAN_MAX for _h, _r, s in pairs]
    nodes = [k for layer in internal_keys(keys, n) for k in layer]
    out = bytearray(struct.pack(f"<{len(nodes)}i", *nodes))
    for b in range(blocks):
        out += INDEX_LEAF_STRUCT.pack(*keys[b * INDEX_FANOUT : (b + 1) * INDEX_FANOUT],
                         *entries[2 * b * INDEX_FANOUT : 2 * (b + 1) * INDEX_FANOUT])
    return bytes(out)


class ImageSpec(NamedTuple):
    """One target's image as the writer sees it."""

    target: str
    kind: str
    image: bytes


class RowSpec(NamedTuple):
    """One offered symbol as the writer sees it; host_offset is relative to the table."""

    name: str
    host_offset: int
    size: int
    kind: str


def name_key(name: bytes) -> bytes:
    """Sort key of the spec: bytewise, a prefix first (Python's bytes order is exactly that)."""
    return name


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


class Layout(NamedTuple):
    """Where the images go and how big the table is, fixed before the host link."""

    image_offsets: tuple[int, ...]
    total_size: int


def reserve(names: Sequence[str], targets: Sequence[str], image_sizes: Sequence[int]) -> Layout:
    """The layout of a table with at most these row names; a table with a subset of the rows
    (host definitions the linker discarded) fits in it with its images in the same place."""
    unique = {s.encode() for s in [*names, *targets]}
    end = meta_layout(len(targets), len(names), sum(len(s) + 1 for s in unique))["meta_size"]
    offsets = []
    for size in image_sizes:
        end = _align(end, IMAGE_ALIGN)
        offsets.append(end)
        end += size
    return Layout(tuple(offsets), _align(end, 8))


def layout_size(names: Sequence[str], targets: Sequence[str], image_sizes: Sequence[int]) -> int:
    """Exact size of a table with these row names, targets and image sizes."""
    return reserve(names, targets, image_sizes).total_size


def meta_layout(n_targets: int, n_symbols: int, strings_size: int) -> dict[str, int]:
    """Where the header's parts go (targets_off, symbols_off, index_off, strings_off) and
    the metadata's size (meta_size), for these counts and this size of the string pool."""
    targets_off = HEADER_SIZE
    symbols_off = targets_off + n_targets * TARGET_SIZE
    # The index starts on a cache line (the section is 64-aligned), so each node is one line.
    index_off = _align(symbols_off + n_symbols * SYMBOL_SIZE, INDEX_NODE_SIZE)
    strings_off = _align(index_off + index_size(n_symbols), 8)
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
    # Sorted by the encoded names (name_key), each encoded once: a relink writes thousands.
    encoded = [r.name.encode() for r in rows]
    order = sorted(range(len(rows)), key=encoded.__getitem__)
    ordered = [rows[i] for i in order]
    names = [encoded[i] for i in order]
    if any(map(bytes.__eq__, names, names[1:])):
        a = next(a for a, b in zip(ordered, ordered[1:]) if a.name == b.name)
        raise FormatError(f"duplicate symbol name '{a.name}' in the offload table")
    pool = bytearray()
    offsets: dict[bytes, int] = {}

    def intern(raw: bytes) -> tuple[int, int]:
        if raw not in offsets:
            offsets[raw] = len(pool)
            pool.extend(raw + b"\0")
        return offsets[raw], len(raw)

    target_names = [intern(img.target.encode()) for img in images]
    row_names = [intern(raw) for raw in names]
    lay = meta_layout(len(images), len(ordered), len(pool))
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
    bad = next((row for row in ordered if row.kind not in SYMBOL_KINDS), None)
    if bad is not None:
        raise FormatError(f"unknown symbol kind '{bad.kind}' for '{bad.name}'")
    pack, kinds = SYMBOL_STRUCT.pack, SYMBOL_KINDS
    symbols = b"".join([pack(noff, nlen, row.host_offset, row.size, kinds[row.kind], 0)
                        for row, (noff, nlen) in zip(ordered, row_names)])
    out[lay["symbols_off"] : lay["symbols_off"] + len(symbols)] = symbols
    pairs = sorted(zip([row.host_offset for row in ordered], range(len(ordered)),
                       [row.size for row in ordered]))
    index = build_index(pairs)
    out[lay["index_off"] : lay["index_off"] + len(index)] = index
    out[lay["strings_off"] : meta_size] = pool
    HEADER_STRUCT.pack_into(
        out, 0, MAGIC, VERSION, HEADER_SIZE, 0, total, meta_size, 0, len(images), len(ordered),
        len(pool), lay["targets_off"], lay["symbols_off"], lay["index_off"], lay["strings_off"],
    )
    struct.pack_into("<I", out, CRC_OFFSET, zlib.crc32(bytes(out[:meta_size])))
    return bytes(out)
