"""offlink's two formats, the table and the payload: their golden blobs, what the spec says of
them, and how the readers meet corrupt records. test_format_declarations.py holds the struct
paths to the construct declarations."""

from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path

import pytest
from construct import Array

from offlink.errors import FormatError
from offlink.formats import declarations as decl
from offlink.formats import origins
from offlink.formats import payload as pl
from offlink.formats import table as tf

GOLDEN = Path(__file__).resolve().parent.parent / "formats" / "golden"


def golden_table_specs() -> tuple[list[tf.ImageSpec], list[tf.RowSpec]]:
    images = [tf.ImageSpec("x86_64-pc-linux-gnu", "shared-object", b"\x7fELF" + bytes(range(60))),
              tf.ImageSpec("nvptx64-nvidia-cuda", "cubin", b"CUBIN" * 7)]
    rows = [tf.RowSpec("twice", 0x1000, 1, "function"),
            tf.RowSpec("counter", -0x40, 4, "variable"),
            tf.RowSpec("weights", 0x2000, 32, "variable"),
            tf.RowSpec("dispatch", 0x1100, 1, "indirect-function"),
            tf.RowSpec("big", 0x3000, 4096, "link-variable")]
    return images, rows


def golden_table() -> bytes:
    return tf.build_table(*golden_table_specs())


def golden_payload() -> bytes:
    return pl.build_record(pl.Payload("x86_64-pc-linux-gnu", "c", "a.c", "gcc", ("-O2", "-g"),
                                       b"int twice(int x) { return 2 * x; }\n", ("twice",)))


def test_golden_blobs_unchanged():
    # A change here is a format change (bump the version and say so in formats/*.md), or a
    # change of how the writer deflates the code (its zlib level), which readers do not see.
    assert golden_table() == (GOLDEN / "table-v1.bin").read_bytes()
    assert golden_payload() == (GOLDEN / "payload-v2.bin").read_bytes()


def test_version_1_payloads_are_still_read():
    # Written by offlink before the header declared the code's size.
    (old,) = pl.parse_records((GOLDEN / "payload-v1.bin").read_bytes(), "old.o")
    assert old == pl.parse_records(golden_payload(), "new.o")[0]


def test_sizes_match_the_spec():
    sizes = (decl.TableHeader.sizeof(), decl.TableTargetEntry.sizeof(),
             decl.TableSymbolRow.sizeof(), decl.TableIndexLeaf.sizeof())
    assert sizes == (96, 40, 32, 192)
    assert (decl.PayloadHeaderV1.sizeof(), decl.PayloadHeader.sizeof()) == (24, 32)


def test_golden_table_is_as_the_spec_says():
    blob = golden_table()
    h = decl.TableHeader.parse(blob)
    assert h.total_size == len(blob)
    rows = Array(h.n_symbols, decl.TableSymbolRow).parse(blob[h.symbols_off:])
    pool = blob[h.strings_off:h.meta_size]
    names = [pool[r.name_off:r.name_off + r.name_len].decode() for r in rows]
    assert names == sorted(names) == ["big", "counter", "dispatch", "twice", "weights"]
    assert [str(r.kind) for r in rows] == ["link-variable", "variable", "indirect-function",
                                           "function", "variable"]
    targets = Array(h.n_targets, decl.TableTargetEntry).parse(blob[h.targets_off:])
    for t in targets:
        image = blob[t.image_off:t.image_off + t.image_size]
        assert t.image_off % 64 == 0 and zlib.crc32(image) == t.image_crc32
    index = decl.TableAddressIndex(h.n_symbols).parse(blob[h.index_off:])
    assert h.index_off % 64 == 0 and not index.node and len(index.leaf) == 1
    leaf = index.leaf[0]
    assert leaf.key == sorted(r.host_offset for r in rows) + [tf.KEY_PAD] * 11
    assert [rows[e.row].host_offset for e in leaf.entry[:5]] == leaf.key[:5]
    assert [e.span for e in leaf.entry[:5]] == [rows[e.row].size for e in leaf.entry[:5]]
    assert [(e.row, e.span) for e in leaf.entry[5:]] == [(0, 0)] * 11


def test_checksum_covers_metadata():
    blob = bytearray(golden_table())
    h = decl.TableHeader.parse(blob)
    struct.pack_into("<I", blob, tf.CRC_OFFSET, 0)
    assert zlib.crc32(bytes(blob[:h.meta_size])) == h.meta_crc32


@pytest.mark.parametrize("n", [1, 16, 17, 272, 273, 5000])
def test_index_is_a_static_b_tree(n):
    # Offsets descend as names ascend, so the index order is not the row order; some rows
    # share an address.
    rows = [tf.RowSpec(f"r{i:05d}", 4 * (n - i - i % 3), i % 5, "variable") for i in range(n)]
    blob = tf.build_table([], rows)
    h = decl.TableHeader.parse(blob)
    layers = tf.index_layers(n)
    assert h.index_off % 64 == 0 and h.strings_off >= h.index_off + tf.index_size(n)
    index = decl.TableAddressIndex(n).parse(blob[h.index_off:])
    assert len(index.node) == sum(layers[1:]) and len(index.leaf) == layers[0] == -(-n // 16)
    keys = [k for leaf in index.leaf for k in leaf.key]
    entries = [e for leaf in index.leaf for e in leaf.entry]
    by_name = sorted(rows, key=lambda r: r.name)
    pairs = sorted((r.host_offset, i) for i, r in enumerate(by_name))
    assert keys == [k for k, _ in pairs] + [tf.KEY_PAD] * (16 * layers[0] - n)
    assert [e.row for e in entries[:n]] == [i for _, i in pairs]
    assert [e.span for e in entries[:n]] == [by_name[i].size for _, i in pairs]
    # Internal nodes, root first: key j of node i in layer h is the first key under child j+1.
    pos = 0
    for h_ in range(len(layers) - 1, 0, -1):
        step = 17 ** (h_ - 1)
        for i in range(layers[h_]):
            for j, key in enumerate(index.node[pos]):
                block = (17 * i + j + 1) * step
                assert key == (keys[16 * block] if block < layers[0] else tf.KEY_PAD)
            pos += 1
    assert pos == len(index.node)


def test_index_clamps_wide_keys_and_sizes():
    rows = [tf.RowSpec("a", -(2**63), 2**64 - 1, "variable"),
            tf.RowSpec("b", 2**40, 1, "function"),
            tf.RowSpec("c", 2**31 - 2, 2**32, "variable"),
            tf.RowSpec("d", 7, 2**32 - 2, "variable")]
    blob = tf.build_table([], rows)
    leaf = decl.TableAddressIndex(4).parse(blob[decl.TableHeader.parse(blob).index_off:]).leaf[0]
    assert leaf.key[:4] == [tf.KEY_MIN, 7, tf.KEY_MAX, tf.KEY_MAX]
    assert [(e.row, e.span) for e in leaf.entry[:4]] == [(0, tf.SPAN_MAX), (3, 2**32 - 2),
                                                         (2, tf.SPAN_MAX), (1, 1)]


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
    (lambda b: b[:10] + b"\x03\x00" + b[12:], r"corrupt payload \(unknown flags 0x0003\)"),
    (lambda b: b[:10] + b"\x00\x80" + b[12:], r"corrupt payload \(unknown flags 0x8000\)"),
    (lambda b: b[:40] + bytes([b[40] ^ 0xFF]) + b[41:], "checksum mismatch"),
])
def test_payload_corruption_is_one_clear_error(mutate, message):
    with pytest.raises(FormatError, match=message):
        pl.parse_records(mutate(golden_payload()), "a.o: section gnu.target_lto_x")


def test_struct_writer_refuses_a_field_too_long_for_its_prefix():
    with pytest.raises(FormatError, match="a.c: text too long for a payload"):
        pl.build_record(pl.Payload("t", "c", "a.c", "x" * 70000, (), b""))


@pytest.mark.parametrize("cut", [1, 7, 20])
def test_struct_reader_refuses_short_bodies(cut):
    body = golden_payload()[pl.HEADER_SIZE:]
    with pytest.raises(ValueError):
        pl._parse_body(body[:-cut - 8] if cut > 7 else body[:cut])


# -- inflation is bounded ------------------------------------------------------------------

def zero_bomb(mib: int) -> bytes:
    """The start of a zlib stream of `mib` MiB of zeros, about 1 KiB per MiB (no end: a reader
    that stops where it should never gets there)."""
    zeros = bytes(1 << 20)
    z = zlib.compressobj(9)
    first = z.compress(zeros) + z.flush(zlib.Z_FULL_FLUSH)
    again = z.compress(zeros) + z.flush(zlib.Z_FULL_FLUSH)  # the same bytes every time
    return first + again * (mib - 1)


def forged_record(stored: bytes, code_size: int | None, flags: int = pl.FLAG_ZLIB) -> bytes:
    """A record with valid CRC around `stored` code; version 1 when `code_size` is None."""
    body = decl.PayloadBody.build(dict(target="x86_64-pc-linux-gnu", code_kind="c",
                                       source="a.c", compiler="gcc", options=[], offered=[],
                                       code=stored))
    body += bytes(-len(body) % 8)
    if code_size is None:
        head = decl.PayloadHeaderV1.build(dict(version=1, flags=flags,
                                               body_crc32=zlib.crc32(body), body_size=len(body)))
    else:
        head = decl.PayloadHeader.build(dict(version=2, flags=flags, body_crc32=zlib.crc32(body),
                                             body_size=len(body), code_size=code_size))
    return head + body


def parse_peak(record: bytes) -> tuple[str, int]:
    """The error parsing `record` raises, and the most memory Python held meanwhile."""
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(FormatError) as e:
            pl.parse_records(record, "a.o: section gnu.target_lto_x")
        return str(e.value), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_inflation_stops_at_the_size_the_header_declares():
    bomb = zero_bomb(1024)  # 1 MiB that inflates to 1 GiB
    message, peak = parse_peak(forged_record(bomb, 4096))
    assert message == ("a.o: section gnu.target_lto_x: corrupt payload (the code inflates to "
                       "more than the 4096 bytes its header declares)")
    assert peak < len(bomb) * 3 + (1 << 20)  # the record and its copies, not the code


def test_version_1_inflation_is_bounded_by_the_limit(monkeypatch):
    monkeypatch.setattr(pl, "MAX_CODE_SIZE", 1 << 20, raising=False)
    message, peak = parse_peak(forged_record(zero_bomb(64), None))
    assert message.endswith("corrupt payload (the code inflates to more than the "
                            "1048576-byte limit)")
    assert peak < 4 << 20


def test_declared_code_size_is_checked():
    code = b"int twice(int x) { return 2 * x; }\n"
    packed = zlib.compress(code)
    (p,) = pl.parse_records(forged_record(packed, len(code)), "a.o")
    assert p.code == code
    for record, message in [
        (forged_record(packed, len(code) + 1), f"inflates to {len(code)} bytes, its header "
                                               f"declares {len(code) + 1}"),
        (forged_record(packed, len(code) - 1), f"more than the {len(code) - 1} bytes"),
        (forged_record(packed, pl.MAX_CODE_SIZE + 1), "more than the 268435456-byte limit"),
        (forged_record(packed + b"junk", len(code)), "bad compressed code"),
        (forged_record(packed[:-3], len(code)), "bad compressed code"),
        (forged_record(b"\x78\x9c\xff\xff", len(code)), "bad compressed code"),
        (forged_record(code, len(code) + 8, flags=0), "the header declares 43 bytes of code, "
                                                      "the record holds 35"),
    ]:
        with pytest.raises(FormatError, match=re.escape(message)):
            pl.parse_records(record, "a.o")
    (p,) = pl.parse_records(forged_record(code, len(code), flags=0), "a.o")
    assert p.code == code


def test_code_over_the_limit_is_not_written(monkeypatch):
    monkeypatch.setattr(pl, "MAX_CODE_SIZE", 100)
    with pytest.raises(FormatError, match="more than a payload holds"):
        pl.build_record(pl.Payload("x86_64-pc-linux-gnu", "c", "big.c", "gcc", (), bytes(101)))


def test_origins_bytes_are_compact_json_in_link_line_order():
    data = origins.encode({"b\n\u00e9": "x.o", "a": "y.o"}, {"c\"": "x.o"}, ["y.o", "x.o"])
    assert data == ('offlink.origins 1\n{"cus":["y.o","x.o"],"rows":[["a",0],["b\\n\u00e9",1]],'
                    '"left_out":[["c\\"",1]]}').encode()
    assert origins.decode(data, "f") == origins.Origins({"a": "y.o", "b\n\u00e9": "x.o"},
                                                        {"c\"": "x.o"}, ("y.o", "x.o"))
