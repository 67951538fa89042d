"""The two formats: construct declarations, the fast struct paths and golden blobs agree."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from offlink.errors import FormatError
from offlink.formats import payload as pl
from offlink.formats import table as tf

GOLDEN = Path(__file__).resolve().parent.parent / "formats" / "golden"


def golden_table() -> bytes:
    images = [tf.ImageSpec("x86_64-pc-linux-gnu", "shared-object", b"\x7fELF" + bytes(range(60))),
              tf.ImageSpec("nvptx64-nvidia-cuda", "cubin", b"CUBIN" * 7)]
    rows = [tf.RowSpec("twice", 0x1000, 1, "function"),
            tf.RowSpec("counter", -0x40, 4, "variable"),
            tf.RowSpec("weights", 0x2000, 32, "variable"),
            tf.RowSpec("dispatch", 0x1100, 1, "indirect-function"),
            tf.RowSpec("big", 0x3000, 4096, "link-variable")]
    return tf.build_table(images, rows)


def golden_payload() -> bytes:
    return pl.build_record(pl.Payload("x86_64-pc-linux-gnu", "c", "a.c", "gcc", ("-O2", "-g"),
                                       b"int twice(int x) { return 2 * x; }\n", ("twice",)))


def test_golden_blobs_unchanged():
    # A change here is a format change: bump the version and say so in formats/*.md.
    assert golden_table() == (GOLDEN / "table-v1.bin").read_bytes()
    assert golden_payload() == (GOLDEN / "payload-v1.bin").read_bytes()


def test_sizes_match_the_spec():
    assert (tf.Header.sizeof(), tf.TargetEntry.sizeof(), tf.SymbolRow.sizeof()) == (96, 40, 32)
    assert tf.HEADER_STRUCT.size == 96 and tf.TARGET_STRUCT.size == 40
    assert tf.SYMBOL_STRUCT.size == 32


def test_construct_and_struct_paths_agree():
    blob = golden_table()
    h = tf.Header.parse(blob)
    fast = tf.HEADER_STRUCT.unpack_from(blob, 0)
    assert (h.version, h.header_size, h.total_size, h.meta_size, h.meta_crc32, h.n_targets,
            h.n_symbols) == (fast[1], fast[2], fast[4], fast[5], fast[6], fast[7], fast[8])
    assert h.total_size == len(blob)
    rows = [tf.SymbolRow.parse(blob[h.symbols_off + i * 32:]) for i in range(h.n_symbols)]
    pool = blob[h.strings_off:h.meta_size]
    names = [pool[r.name_off:r.name_off + r.name_len].decode() for r in rows]
    assert names == sorted(names) == ["big", "counter", "dispatch", "twice", "weights"]
    assert [str(r.kind) for r in rows] == ["link-variable", "variable", "indirect-function",
                                           "function", "variable"]
    targets = [tf.TargetEntry.parse(blob[h.targets_off + i * 40:]) for i in range(h.n_targets)]
    for t in targets:
        image = blob[t.image_off:t.image_off + t.image_size]
        assert t.image_off % 64 == 0 and zlib.crc32(image) == t.image_crc32
    index = tf.AddressIndex(h.n_symbols).parse(blob[h.index_off:])
    assert sorted(index.key) == sorted(r.host_offset for r in rows)
    assert [rows[r].host_offset for r in index.row] == list(index.key)


def test_compiled_construct_agrees_with_interpreted():
    blob = golden_table()
    for decl, data in ((tf.Header, blob), (tf.TargetEntry, blob[96:]),
                       (tf.SymbolRow, blob[176:])):
        assert decl.compile().parse(data) == decl.parse(data)
    assert pl.RecordHeader.compile().parse(golden_payload()) == \
        pl.RecordHeader.parse(golden_payload())


def test_checksum_covers_metadata():
    blob = bytearray(golden_table())
    h = tf.Header.parse(blob)
    struct.pack_into("<I", blob, tf.CRC_OFFSET, 0)
    assert zlib.crc32(bytes(blob[:h.meta_size])) == h.meta_crc32


def test_eytzinger_layout_is_in_order():
    pairs = [(k, k) for k in range(10)]
    tree = tf.eytzinger(pairs)
    # Node 1 (index 0) holds the median of an in-order walk of 10 nodes: the 7th smallest.
    assert tree[0] == (6, 6)
    assert sorted(tree) == pairs


def test_reserved_layout_fits_a_subset_of_rows():
    names = ["alpha", "beta", "gamma"]
    layout = tf.reserve(names, ["x86_64-pc-linux-gnu"], [100])
    full = tf.build_table([tf.ImageSpec("x86_64-pc-linux-gnu", "shared-object", b"i" * 100)],
                          [tf.RowSpec(n, i, 1, "function") for i, n in enumerate(names)], layout)
    part = tf.build_table([tf.ImageSpec("x86_64-pc-linux-gnu", "shared-object", b"i" * 100)],
                          [tf.RowSpec("beta", 1, 1, "function")], layout)
    assert len(full) == len(part) == layout.total_size
    off = layout.image_offsets[0]
    assert full[off:off + 100] == part[off:off + 100] == b"i" * 100


def test_duplicate_row_names_are_refused():
    with pytest.raises(FormatError, match="duplicate symbol name 'x'"):
        tf.build_table([], [tf.RowSpec("x", 0, 1, "function"), tf.RowSpec("x", 8, 1, "function")])


def test_payload_round_trip_and_concatenation():
    rec = golden_payload()
    assert len(rec) % 8 == 0
    (p,) = pl.parse_records(rec, "a.o")
    assert p.source == "a.c" and p.options == ("-O2", "-g") and p.offered == ("twice",)
    # `ld -r` concatenates same-named sections: both records come back, in order.
    other = pl.build_record(pl.Payload("x86_64-pc-linux-gnu", "c++", "b.cc", "g++", (), b"x"))
    both = pl.parse_records(rec + other, "ab.o")
    assert [q.source for q in both] == ["a.c", "b.cc"]


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b[:10], "truncated payload header"),
    (lambda b: b[:-20], "truncated payload"),
    (lambda b: b"X" + b[1:], "bad magic"),
    (lambda b: b[:8] + b"\x09\x00" + b[10:], "payload version 9"),
    (lambda b: b[:40] + bytes([b[40] ^ 0xFF]) + b[41:], "checksum mismatch"),
])
def test_payload_corruption_is_one_clear_error(mutate, message):
    with pytest.raises(FormatError, match=message):
        pl.parse_records(mutate(golden_payload()), "a.o: section gnu.target_lto_x")
