"""Pure-Python table core: the fallback of offlink._ctable, with the same methods and answers.

Both cores raise ValueError(code, message) with the spec's error code (formats/table.md).
"""

from __future__ import annotations

import operator
import struct
import zlib
from array import array
from bisect import bisect_right

from .formats.table import (
    CRC_OFFSET,
    HEADER_SIZE,
    HEADER_STRUCT,
    IMAGE_KIND_NAMES,
    INDEX_FANOUT,
    INDEX_LEAF_STRUCT,
    INDEX_NODE_SIZE,
    KEY_PAD,
    MAGIC,
    SYMBOL_KIND_NAMES,
    SYMBOL_SIZE,
    SYMBOL_STRUCT,
    TARGET_SIZE,
    TARGET_STRUCT,
    VERSION,
    index_key,
    index_layers,
    index_size,
    index_span,
    internal_keys,
)

MESSAGES = {
    "truncated": "table is truncated",
    "bad-magic": "not an offload table (bad magic)",
    "bad-version": "unsupported table version",
    "bad-header": "corrupt table header",
    "bad-checksum": "table checksum mismatch",
    "bad-offset": "table offset out of bounds",
    "bad-string": "corrupt name in table",
    "bad-kind": "unknown kind in table",
    "unsorted": "table rows not sorted by name",
    "bad-index": "corrupt address index",
    "bad-image-checksum": "image checksum mismatch",
}


def _fail(code: str, detail: str = "") -> ValueError:
    return ValueError(code, MESSAGES[code] + (f" ({detail})" if detail else ""))


def _in(off: int, size: int, lo: int, hi: int) -> bool:
    return lo <= off and size <= hi - off if off <= hi else False


class Core:
    """A validated table over a bytes-like buffer (kept, not copied)."""

    backend = "python"

    def __init__(self, buf) -> None:
        mv = memoryview(buf).cast("B")
        self._buf = mv
        size = len(mv)
        if size < HEADER_SIZE:
            raise _fail("truncated", f"{size} bytes")
        (magic, version, header_size, flags, total, meta, crc, n_t, n_s, s_size, t_off, s_off,
         i_off, str_off) = HEADER_STRUCT.unpack_from(mv, 0)
        if magic != MAGIC:
            raise _fail("bad-magic")
        if version != VERSION:
            raise _fail("bad-version", f"version {version}")
        if header_size != HEADER_SIZE or flags != 0:
            raise _fail("bad-header")
        if total > size:
            raise _fail("truncated", f"{size} of {total} bytes")
        if meta < HEADER_SIZE or meta > total:
            raise _fail("bad-header")
        head = bytearray(mv[:HEADER_SIZE])
        head[CRC_OFFSET : CRC_OFFSET + 4] = b"\0\0\0\0"
        actual = zlib.crc32(mv[HEADER_SIZE:meta], zlib.crc32(head))
        if actual != crc:
            raise _fail("bad-checksum")
        for off, length in ((t_off, n_t * TARGET_SIZE), (s_off, n_s * SYMBOL_SIZE),
                            (i_off, index_size(n_s)), (str_off, s_size)):
            if off % 8 or not _in(off, length, HEADER_SIZE, meta):
                raise _fail("bad-offset")
        if str_off + s_size != meta:
            raise _fail("bad-offset")
        self.total_size, self.meta_size = total, meta
        self.n_targets, self.n_symbols = n_t, n_s
        self._t_off, self._s_off, self._str_off, self._s_size = t_off, s_off, str_off, s_size
        self._targets = []
        for i in range(n_t):
            noff, nlen, kind, _fl, icrc, ioff, isize = TARGET_STRUCT.unpack_from(
                mv, t_off + i * TARGET_SIZE)
            name = self._name(noff, nlen)
            if kind not in IMAGE_KIND_NAMES:
                raise _fail("bad-kind", f"image kind {kind}")
            if not _in(ioff, isize, meta, total):
                raise _fail("bad-offset")
            self._targets.append((name, kind, ioff, isize, icrc))
        rows = list(SYMBOL_STRUCT.iter_unpack(mv[s_off : s_off + n_s * SYMBOL_SIZE]))
        names = []
        prev = None
        for noff, nlen, _ho, _sz, kind, _fl in rows:
            name = self._name(noff, nlen)
            if kind not in SYMBOL_KIND_NAMES:
                raise _fail("bad-kind", f"symbol kind {kind}")
            if prev is not None and not prev < name:
                raise _fail("unsorted")
            prev = name
            names.append(name)
        self._names = names
        self._rows = rows
        self._keys, self._key_rows = _check_index(mv[i_off : i_off + index_size(n_s)], rows)
        self._by_name = {n: i for i, n in enumerate(names)}

    def _name(self, off: int, length: int) -> bytes:
        if not _in(off, length + 1, 0, self._s_size):
            raise _fail("bad-string")
        start = self._str_off + off
        raw = bytes(self._buf[start : start + length + 1])
        if raw[-1] != 0 or 0 in raw[:-1]:
            raise _fail("bad-string")
        return raw[:-1]

    # -- the methods both cores share ---------------------------------------------------------

    def symbol(self, row: int) -> tuple[bytes, int, int, int]:
        row = _index(row, self.n_symbols, "symbol row")
        _noff, _nlen, host_offset, size, kind, _fl = self._rows[row]
        return self._names[row], host_offset, size, kind

    def target(self, index: int) -> tuple[bytes, int, int, int, int]:
        """(name, kind, image offset, image size, image crc32)."""
        return self._targets[_index(index, self.n_targets, "target index")]

    def lookup(self, name: bytes) -> int:
        if not isinstance(name, bytes):
            raise TypeError(f"lookup() needs bytes, not {type(name).__name__}")
        return self._by_name.get(name, -1)

    def find(self, offset: int) -> int:
        offset = operator.index(offset)
        pos = bisect_right(self._keys, offset) - 1
        if pos < 0:
            return -1
        row = self._key_rows[pos]
        _noff, _nlen, start, size, _kind, _fl = self._rows[row]
        return row if offset - start < size else -1

    def find_many(self, offsets, base: int = 0) -> array:
        """Rows (-1 for a miss) for a buffer of 64-bit addresses, as array('q'); each is taken
        as (address - base) wrapped to int64."""
        view = memoryview(offsets).cast("B").cast("q")
        base = operator.index(base)
        return array("q", (self.find((o - base + _2_63) % _2_64 - _2_63) for o in view))

    def check_image(self, index: int) -> None:
        index = _index(index, self.n_targets, "target index")
        _name, _kind, off, size, crc = self._targets[index]
        if zlib.crc32(self._buf[off : off + size]) != crc:
            raise _fail("bad-image-checksum", f"target {index}")

    # Table's fast path: find/lookup straight to a cached object, no Python frame in between.

    def bind(self, base: int, make) -> None:
        """find_symbol/lookup_symbol return make(name, base + host_offset, size, kind,
        host_offset) for a row, made once and cached."""
        self._base, self._make = operator.index(base), make
        self._made: list = [None] * self.n_symbols

    def _made_object(self, row: int):
        obj = self._made[row]
        if obj is None:
            name, host_offset, size, kind = self.symbol(row)
            obj = self._made[row] = self._make(name, self._base + host_offset, size, kind,
                                               host_offset)
        return obj

    def find_symbol(self, address: int):
        if not hasattr(self, "_make"):
            raise RuntimeError("Core.bind() has not been called")
        row = self.find(operator.index(address) - self._base)
        return None if row < 0 else self._made_object(row)

    def lookup_symbol(self, name):
        if not hasattr(self, "_make"):
            raise RuntimeError("Core.bind() has not been called")
        raw = name.encode() if isinstance(name, str) else name
        row = self.lookup(raw)
        if row < 0 and b"." in raw:  # the host's spelling of a GCC nvptx row (as the C core)
            row = self.lookup(raw.replace(b".", b"$"))
        return None if row < 0 else self._made_object(row)


_2_63, _2_64 = 1 << 63, 1 << 64


def _check_index(index: memoryview, rows: list) -> tuple[list[int], list[int]]:
    """Step 11, as the C core's check_index: the leaf slots in order, then every internal key
    recomputed from the leaves. Returns the slots' exact host_offsets and rows, for bisect."""
    n = len(rows)
    if n == 0:
        return [], []
    layers = index_layers(n)
    n_nodes = sum(layers[1:])
    leaf_keys: list[int] = []
    slots: list[int] = []
    for block in INDEX_LEAF_STRUCT.iter_unpack(index[n_nodes * INDEX_NODE_SIZE :]):
        leaf_keys.extend(block[:INDEX_FANOUT])
        slots.extend(block[INDEX_FANOUT:])
    starts: list[int] = []
    for p in range(len(leaf_keys)):
        key, row, span = leaf_keys[p], slots[2 * p], slots[2 * p + 1]
        if p >= n:
            if (key, row, span) != (KEY_PAD, 0, 0):
                raise _fail("bad-index")
            continue
        if row >= n:
            raise _fail("bad-index")
        start, size = rows[row][2], rows[row][3]
        if key != index_key(start) or span != index_span(size) or (starts and start < starts[-1]):
            raise _fail("bad-index")
        starts.append(start)
    want = [k for layer in internal_keys(leaf_keys, n) for k in layer]
    if list(struct.unpack_from(f"<{len(want)}i", index, 0)) != want:
        raise _fail("bad-index")
    return starts, slots[: 2 * n : 2]


def _index(value, limit: int, what: str) -> int:
    """An index in [0, limit): TypeError for a non-integer, IndexError otherwise (as the C core)."""
    value = operator.index(value)
    if not 0 <= value < limit:
        raise IndexError(f"{what} out of range")
    return value
