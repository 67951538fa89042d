"""Each format's fast paths held to its construct declaration (offlink/formats/declarations.py),
one section per format: the struct layouts are the declaration's, field for field; real blobs
(formats/golden/) and random ones read and written through both agree, byte for byte; and
every field the declaration has is read by the fast reader. The C table core's constants are
held to the same declaration in test_ctable.py."""

from __future__ import annotations

import os
import re
import struct
import zlib
from pathlib import Path

import pytest
from construct import Array, Const, CString, Enum, FormatField, Padded, Renamed, Struct
from hypothesis import given, settings
from hypothesis import strategies as st
from test_formats import golden_table_specs

from offlink import _pytable
from offlink.formats import declarations as decl
from offlink.formats import offload_binary as ob
from offlink.formats import offload_entries as oe
from offlink.formats import payload as pl
from offlink.formats import table as tf

GOLDEN = Path(__file__).resolve().parent.parent / "formats" / "golden"
PURE = os.environ.get("OFFLINK_PURE_PYTHON", "") not in ("", "0")
EXAMPLES = settings(max_examples=150, deadline=None)


def struct_codes(fmt: str) -> list[str]:
    """A little-endian struct format as one code per field ("8s" one field, "16x" 16 pads)."""
    assert fmt.startswith("<"), fmt
    out = []
    for count, code in re.findall(r"(\d*)([a-zA-Z?])", fmt[1:]):
        n = int(count or 1)
        out += [f"{n}s"] if code == "s" else [code] * n
    return out


def declared_codes(con) -> list[str]:
    """The struct codes of a fixed-size construct declaration, one per field."""
    while isinstance(con, (Renamed, Enum)):
        con = con.subcon
    if isinstance(con, Struct):
        return [code for sub in con.subcons for code in declared_codes(sub)]
    if isinstance(con, Array):
        return declared_codes(con.subcon) * con.count
    if isinstance(con, FormatField):
        assert con.fmtstr.startswith("<"), con.fmtstr
        code = con.fmtstr[1:]
        return [{"L": "I", "l": "i"}.get(code, code)]  # the same 4 bytes under "<"
    if isinstance(con, Const):
        return [f"{con.sizeof()}s"]
    if isinstance(con, Padded):
        return ["x"] * con.sizeof()
    raise AssertionError(f"not a fixed-size field: {con!r}")


def field_offsets(con: Struct) -> dict[str, int]:
    """Each named field's offset in a fixed-size declaration."""
    out, pos = {}, 0
    for sub in con.subcons:
        if sub.name:
            out[sub.name] = pos
        pos += sub.sizeof()
    return out


def fields(parsed) -> dict:
    """A parsed construct Container as a plain dict of its declared fields."""
    return {k: (str(v) if isinstance(v, str) else v) for k, v in parsed.items()
            if not k.startswith("_")}


@pytest.mark.parametrize("declared, fast", [
    (decl.TableHeader, tf.HEADER_STRUCT),
    (decl.TableTargetEntry, tf.TARGET_STRUCT),
    (decl.TableSymbolRow, tf.SYMBOL_STRUCT),
    (decl.TableIndexNode, tf.INDEX_NODE_STRUCT),
    (decl.TableIndexLeaf, tf.INDEX_LEAF_STRUCT),
    (decl.PayloadHeaderV1, pl.V1_HEADER_STRUCT),
    (decl.PayloadHeader, pl.HEADER_STRUCT),
    (decl.OffloadBinaryHeader, ob.HEADER),
    (decl.OffloadBinaryEntry, ob.ENTRY),
    (decl.OffloadBinaryString, ob.STRING),
    (decl.OffloadBinaryStringV2, ob.STRING_V2),
    (decl.OffloadEntryV1, oe.ENTRY_V1),
    (decl.OffloadEntryV2, oe.ENTRY_V2),
], ids=lambda x: getattr(x, "format", None) or "")
def test_struct_layouts_are_the_declarations(declared, fast):
    """Every struct the fast paths read or write has the declaration's fields, in its order,
    of its widths and signedness: one unpacked value per declared field."""
    assert struct_codes(fast.format) == declared_codes(declared)
    assert fast.size == declared.sizeof()


# -- the `.openmp_target` table ------------------------------------------------------------

def construct_table(images: list[tf.ImageSpec], rows: list[tf.RowSpec]) -> bytes:
    """A table built by the declaration alone (the layout from table.py's `reserve`)."""
    ordered = sorted(rows, key=lambda r: r.name.encode())
    pool, at = bytearray(), {}
    for raw in [i.target.encode() for i in images] + [r.name.encode() for r in ordered]:
        if raw not in at:
            at[raw] = len(pool)
            pool += raw + b"\0"
    lay = tf.meta_layout(len(images), len(ordered), len(pool))
    layout = tf.reserve([r.name for r in ordered], [i.target for i in images],
                        [len(i.image) for i in images])
    out = bytearray(layout.total_size)

    def put(offset: int, data: bytes) -> None:
        out[offset:offset + len(data)] = data

    targets = [dict(name_off=at[img.target.encode()], name_len=len(img.target.encode()),
                    kind=img.kind, flags=0, image_crc32=zlib.crc32(img.image), image_off=off,
                    image_size=len(img.image))
               for img, off in zip(images, layout.image_offsets)]
    put(lay["targets_off"], Array(len(targets), decl.TableTargetEntry).build(targets))
    for img, off in zip(images, layout.image_offsets):
        put(off, img.image)
    symbols = [dict(name_off=at[row.name.encode()], name_len=len(row.name.encode()),
                    host_offset=row.host_offset, size=row.size, kind=row.kind, flags=0)
               for row in ordered]
    put(lay["symbols_off"], Array(len(symbols), decl.TableSymbolRow).build(symbols))
    if ordered:
        n = len(ordered)
        pairs = sorted((r.host_offset, k, r.size) for k, r in enumerate(ordered))
        pad = -n % tf.INDEX_FANOUT
        keys = [tf.index_key(h) for h, _, _ in pairs] + [tf.KEY_PAD] * pad
        entries = [dict(row=k, span=tf.index_span(s)) for _, k, s in pairs]
        entries += [dict(row=0, span=0)] * pad
        f = tf.INDEX_FANOUT
        leaves = [dict(key=keys[b:b + f], entry=entries[b:b + f]) for b in range(0, len(keys), f)]
        nodes = [layer[i:i + f] for layer in tf.internal_keys(keys, n)
                 for i in range(0, len(layer), f)]
        put(lay["index_off"], decl.TableAddressIndex(n).build(dict(node=nodes, leaf=leaves)))
    put(lay["strings_off"], bytes(pool))
    header = dict(version=tf.VERSION, header_size=decl.TableHeader.sizeof(), flags=0,
                  total_size=layout.total_size, meta_size=lay["meta_size"], meta_crc32=0,
                  n_targets=len(images), n_symbols=len(ordered), strings_size=len(pool),
                  targets_off=lay["targets_off"], symbols_off=lay["symbols_off"],
                  index_off=lay["index_off"], strings_off=lay["strings_off"])
    put(0, decl.TableHeader.build(header))
    header["meta_crc32"] = zlib.crc32(bytes(out[:lay["meta_size"]]))
    put(0, decl.TableHeader.build(header))
    return bytes(out)


def cores():
    yield _pytable.Core
    if not PURE:
        from offlink import _ctable

        yield _ctable.Core


def read_through(core, blob: bytes) -> tuple[list, list]:
    """What a table core reads of every row and target: each declared field but the reserved
    flags (formats/table.md: 0, ignored by readers), the names resolved."""
    c = core(blob)
    rows = [c.symbol(i) for i in range(c.n_symbols)]
    targets = [c.target(i) for i in range(c.n_targets)]
    return rows, targets


def read_declared(blob: bytes) -> tuple[list, list]:
    """The same, read through the declaration."""
    h = decl.TableHeader.parse(blob)
    pool = blob[h.strings_off:h.strings_off + h.strings_size]

    def name(entry) -> bytes:
        return pool[entry.name_off:entry.name_off + entry.name_len]

    rows = Array(h.n_symbols, decl.TableSymbolRow).parse(blob[h.symbols_off:])
    targets = Array(h.n_targets, decl.TableTargetEntry).parse(blob[h.targets_off:])
    return ([(name(r), r.host_offset, r.size, int(r.kind)) for r in rows],
            [(name(t), int(t.kind), t.image_off, t.image_size, t.image_crc32) for t in targets])


def test_table_golden_blob_is_the_declarations():
    """The golden table (test_formats.py writes it with build_table) is what the declaration
    builds, and every core reads it as the declaration does."""
    blob = (GOLDEN / "table-v1.bin").read_bytes()
    assert construct_table(*golden_table_specs()) == blob
    assert field_offsets(decl.TableHeader)["meta_crc32"] == tf.CRC_OFFSET
    for core in cores():
        assert read_through(core, blob) == read_declared(blob)
    for con in (decl.TableHeader, decl.TableTargetEntry, decl.TableSymbolRow):
        assert con.compile().parse(blob) == con.parse(blob)


# Text a NUL-terminated name can hold.
c_chars = st.characters(blacklist_characters="\0", blacklist_categories=("Cs",))
names = st.text(c_chars, min_size=1, max_size=12)
table_rows = st.lists(st.tuples(names, st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**64 - 1),
                                st.sampled_from(sorted(tf.SYMBOL_KINDS))),
                      max_size=40, unique_by=lambda r: r[0].encode())
table_images = st.lists(st.tuples(names, st.sampled_from(sorted(tf.IMAGE_KINDS)),
                                  st.binary(max_size=80)), max_size=3, unique_by=lambda i: i[0])


@EXAMPLES
@given(table_rows, table_images)
def test_table_writer_and_readers_agree_with_the_declaration(rows, images):
    """build_table writes what the declaration builds, byte for byte; each core reads every
    row and target of it as the declaration does."""
    images = [tf.ImageSpec(*i) for i in images]
    rows = [tf.RowSpec(*r) for r in rows]
    blob = tf.build_table(images, rows)
    assert blob == construct_table(images, rows)  # the address index included
    declared = read_declared(blob)
    for core in cores():
        assert read_through(core, blob) == declared
        c = core(blob)
        assert [c.lookup(name) for name, *_ in declared[0]] == list(range(len(rows)))


def test_table_cores_read_every_header_field():
    """Each declared header field, changed (the checksum made right again but for
    meta_crc32's own), is seen by every core: each refuses the table, with the same code."""
    blob = (GOLDEN / "table-v1.bin").read_bytes()
    good = decl.TableHeader.parse(blob)
    for sub in decl.TableHeader.subcons:
        if not sub.name:
            continue  # padding
        data = bytearray(blob)
        changed = fields(good)
        if sub.name == "magic":  # a Const: the declaration builds no other value
            data[:8] = b"OFFLINX\0"
        else:
            changed[sub.name] += len(blob) if sub.name == "total_size" else 8
            data[:decl.TableHeader.sizeof()] = decl.TableHeader.build(changed)
        if sub.name != "meta_crc32":
            data[tf.CRC_OFFSET:tf.CRC_OFFSET + 4] = bytes(4)
            meta = min(changed["meta_size"], len(data))
            struct.pack_into("<I", data, tf.CRC_OFFSET, zlib.crc32(bytes(data[:meta])))
        codes = set()
        for core in cores():
            with pytest.raises(ValueError) as e:
                core(bytes(data))
            codes.add(e.value.args[0])
        assert len(codes) == 1 and codes <= set(_pytable.MESSAGES), (sub.name, codes)


# -- the payload record ---------------------------------------------------------------------

@pytest.mark.parametrize("name, header", [("payload-v1.bin", decl.PayloadHeaderV1),
                                          ("payload-v2.bin", decl.PayloadHeader)])
def test_payload_golden_records_are_the_declarations(name, header):
    """Each golden record, read through the declaration, builds back to the same bytes and
    holds what the fast reader reads, field for field."""
    blob = (GOLDEN / name).read_bytes()
    head = header.parse(blob)
    body = decl.PayloadBody.parse(blob[header.sizeof():])
    rebuilt = header.build(head) + decl.PayloadBody.build(body)
    assert rebuilt + bytes(-len(rebuilt) % 8) == blob
    assert header.compile().parse(blob) == head
    assert decl.PayloadBody.compile().parse(blob[header.sizeof():]) == body
    (p,) = pl.parse_records(blob, name)
    assert (p.target, p.code_kind, p.source, p.compiler, p.options, p.offered) == \
        (body.target, str(body.code_kind), body.source, body.compiler, tuple(body.options),
         tuple(body.offered))
    assert p.code == (zlib.decompress(body.code) if head.flags & pl.FLAG_ZLIB else body.code)


texts = st.text(max_size=30)
payloads = st.builds(dict, target=texts, code_kind=st.sampled_from(sorted(pl.CODE_KINDS)),
                     source=texts, compiler=texts, options=st.lists(texts, max_size=5),
                     offered=st.lists(texts, max_size=5), code=st.binary(max_size=300))


@EXAMPLES
@given(payloads)
def test_payload_fast_paths_agree_with_the_declaration(p):
    """The struct writer writes the declared body, byte for byte; the struct reader reads all
    seven declared fields of a body the declaration built; a whole record written by
    build_record parses through the declaration to what was written."""
    body = decl.PayloadBody.build(p)
    assert pl._build_body(**{("kind" if k == "code_kind" else k): v for k, v in p.items()}) == body
    assert pl._parse_body(body) == (p["target"], p["code_kind"], p["source"], p["compiler"],
                                    tuple(p["options"]), tuple(p["offered"]), p["code"])
    record = pl.build_record(pl.Payload(p["target"], p["code_kind"], p["source"],
                                        p["compiler"], tuple(p["options"]), p["code"],
                                        tuple(p["offered"])))
    head = decl.PayloadHeader.parse(record)
    assert fields(head) == dict(magic=pl.MAGIC, version=pl.VERSION, flags=pl.FLAG_ZLIB,
                                body_crc32=zlib.crc32(record[pl.HEADER_SIZE:]),
                                body_size=len(record) - pl.HEADER_SIZE, code_size=len(p["code"]))
    back = fields(decl.PayloadBody.parse(record[pl.HEADER_SIZE:]))
    assert zlib.decompress(back.pop("code")) == p["code"]
    assert back == {k: v for k, v in p.items() if k != "code"}


@EXAMPLES
@given(payloads, st.booleans())
def test_payload_records_the_declaration_builds_are_read(p, compressed):
    """A record built by the declaration alone (either header version, code stored raw or
    deflated) is read by parse_records, eager and lazy, with every field."""
    code = zlib.compress(p["code"]) if compressed else p["code"]
    body = decl.PayloadBody.build({**p, "code": code})
    body += bytes(-len(body) % 8)
    head = dict(version=2, flags=pl.FLAG_ZLIB if compressed else 0, body_crc32=zlib.crc32(body),
                body_size=len(body), code_size=len(p["code"]))
    for record in (decl.PayloadHeader.build(head) + body,
                   decl.PayloadHeaderV1.build({**head, "version": 1}) + body):
        for lazy in (False, True):
            (got,) = pl.parse_records(record, "x.o", lazy=lazy)
            assert (got.target, got.code_kind, got.source, got.compiler, got.options,
                    got.offered, got.code) == (p["target"], p["code_kind"], p["source"],
                                               p["compiler"], tuple(p["options"]),
                                               tuple(p["offered"]), p["code"])


# -- LLVM's OffloadBinary -------------------------------------------------------------------

def construct_binaries(data: bytes) -> list[ob.OffloadImage]:
    """Every image of a `.llvm.offloading` section, read through the declarations (versions
    1-3; a compressed version 3 inflated as OffloadBinary::create does)."""
    out, pos = [], 0
    while pos < len(data):
        if not any(data[pos:pos + 8]):
            pos += 8
            continue
        head = decl.OffloadBinaryHeader.parse(data[pos:])
        blob = data[pos:pos + head.size]
        string, n = decl.OffloadBinaryStringV2, head.entry_size
        if head.version == 1:
            string = decl.OffloadBinaryString
            n = head.entry_size // decl.OffloadBinaryEntry.sizeof()
        elif head.version == 3:
            v3 = decl.OffloadBinaryHeaderV3.parse(blob)
            if v3.inflated_size:
                blob = decl.OffloadBinaryHeaderV3.build(dict(
                    v3, size=v3.inflated_size, inflated_size=0)) + \
                    zlib.decompress(blob[v3.entry_offset:])
        for e in Array(n, decl.OffloadBinaryEntry).parse(blob[head.entry_offset:]):
            pairs = Array(e.num_strings, string).parse(blob[e.string_offset:])
            strings = {CString("utf8").parse(blob[s.key_offset:]):
                       (CString("utf8").parse(blob[s.value_offset:]) if head.version == 1 else
                        blob[s.value_offset:s.value_offset + s.value_size].decode())
                       for s in pairs}
            out.append(ob.OffloadImage(ob.IMAGE_KINDS[e.image_kind],
                                       ob.OFFLOAD_KINDS[e.offload_kind], e.flags, strings,
                                       blob[e.image_offset:e.image_offset + e.image_size]))
        pos += -(-head.size // 8) * 8
    return out


@pytest.mark.parametrize("clang", [19, 22, 23])
def test_offload_binary_of_clang_is_read_as_declared(clang):
    """clang 19 and 22 write version 1, clang-23 (sid) version 2 (formats/golden/llvm)."""
    blob = (GOLDEN / "llvm" / f"clang{clang}.llvm.offloading.bin").read_bytes()
    assert decl.OffloadBinaryHeader.parse(blob).version == (2 if clang == 23 else 1)
    images = ob.parse_binaries(blob, "k.o")
    assert images == construct_binaries(blob) and len(images) == 1
    assert images[0].triple == "x86_64-pc-linux-gnu" and images[0].image[:4] == b"\x7fELF"
    assert images[0].arch == ("" if clang == 19 else "generic")
    twice = blob + bytes(-len(blob) % 8) + blob  # as ld -r concatenates them
    assert ob.parse_binaries(twice, "k.o") == construct_binaries(twice) == images * 2


image_strings = st.dictionaries(names, st.text(c_chars, max_size=12), max_size=4)
offload_images = st.lists(st.builds(
    ob.OffloadImage, st.sampled_from(sorted(set(ob.IMAGE_KINDS.values()))),
    st.sampled_from(sorted(set(ob.OFFLOAD_KINDS.values()))), st.integers(0, 2**32 - 1),
    image_strings, st.binary(max_size=60)), min_size=1, max_size=4)


@EXAMPLES
@given(offload_images)
def test_offload_binary_writer_and_reader_agree_with_the_declaration(images):
    blob = ob.build_binary(images)
    assert construct_binaries(blob) == ob.parse_binaries(blob, "x.o") == images
    head = decl.OffloadBinaryHeader.parse(blob)
    assert fields(head) == dict(magic=ob.MAGIC, version=ob.VERSION, size=len(blob),
                                entry_offset=decl.OffloadBinaryHeader.sizeof(),
                                entry_size=decl.OffloadBinaryEntry.sizeof() * len(images))


@EXAMPLES
@given(offload_images, st.sampled_from([(2, False), (3, False), (3, True)]))
def test_later_offload_binaries_are_read_as_declared(images, how):
    """Versions 2 and 3 (several images under one header, 24-byte string entries) and a
    compressed version 3 as LLVM's OffloadBinary::write lays them out: offlink's reader and
    the declarations read the same images back."""
    version, compress = how
    blob = ob.build_binary(images, version, compress)
    assert construct_binaries(blob) == ob.parse_binaries(blob, "x.o") == images
    if version == 3:
        head = decl.OffloadBinaryHeaderV3.parse(blob)
        assert head.entry_offset == decl.OffloadBinaryHeaderV3.sizeof() == 40
        assert (head.inflated_size > 0) == compress and head.size <= len(blob)


# -- LLVM's offload entry rows --------------------------------------------------------------

@pytest.mark.parametrize("clang, section, declared", [
    (19, "omp_offloading_entries", decl.OffloadEntryV1),
    (22, "llvm_offload_entries", decl.OffloadEntryV2)])
def test_offload_entries_of_clang_are_read_as_declared(clang, section, declared):
    content = (GOLDEN / "llvm" / f"clang{clang}.{section}.bin").read_bytes()
    parsed = Array(len(content) // declared.sizeof(), declared).parse(content)
    assert_rows_are(oe.rows(section, content, "k.o"), parsed, declared, 1 if clang == 19 else 3)
    assert len(parsed) == 2  # `g` and the target region


def assert_rows_are(rows, parsed, declared, generation: int) -> None:
    """The fast reader's rows hold the declared fields a link uses: size and flags as values,
    the kind, the address and name fields by their declared offsets (pointers, read elsewhere
    through relocations); reserved and version are checked (test_llvm_entries.py), data and
    aux_addr unused; OpenMP's requires rows left out."""
    size = declared.sizeof()
    kinds = [oe.KINDS[e.kind] if "kind" in e else "openmp" for e in parsed]
    assert [(r.offset, r.kind, r.size, r.flags, r.addr_at - r.offset, r.name_at - r.offset,
             r.generation) for r in rows] == [
        (k * size, kind, e.size, e.flags, field_offsets(declared)["addr"],
         field_offsets(declared)["name"], generation)
        for k, (e, kind) in enumerate(zip(parsed, kinds))
        if not (kind == "openmp" and e.flags & oe.REGISTER_REQUIRES)]


v2_rows = st.lists(st.builds(dict, reserved=st.just(0), version=st.just(oe.ENTRY_VERSION),
                             kind=st.sampled_from([oe.KIND_NUMBERS[k] for k in oe.READ_KINDS]),
                             flags=st.integers(0, 2**32 - 1), addr=st.integers(0, 2**64 - 1),
                             name=st.integers(0, 2**64 - 1), size=st.integers(0, 2**64 - 1),
                             data=st.integers(0, 2**64 - 1), aux_addr=st.integers(0, 2**64 - 1)),
                   min_size=1, max_size=6)
v1_rows = st.lists(st.builds(dict, addr=st.integers(1, 2**64 - 1), name=st.integers(0, 2**64 - 1),
                             size=st.integers(0, 2**64 - 1), flags=st.integers(-(2**31), 2**31 - 1),
                             reserved=st.integers(-(2**31), 2**31 - 1)),
                   min_size=1, max_size=6)


@EXAMPLES
@given(v1_rows, v2_rows)
def test_offload_entries_reader_agrees_with_the_declaration(v1, v2):
    content = b"".join(decl.OffloadEntryV1.build(r) for r in v1)
    parsed = Array(len(v1), decl.OffloadEntryV1).parse(content)
    assert_rows_are(oe.rows("omp_offloading_entries", content, "x.o"), parsed,
                    decl.OffloadEntryV1, 1)
    content = b"".join(decl.OffloadEntryV2.build(r) for r in v2)
    parsed = Array(len(v2), decl.OffloadEntryV2).parse(content)
    assert_rows_are(oe.rows("llvm_offload_entries", content, "x.o"), parsed,
                    decl.OffloadEntryV2, 3)
