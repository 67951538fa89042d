"""The readers of what offlink takes from objects it did not write, under mutation: a fat
object's payload records (versions 1 and 2, eager and lazy) and clang's OffloadBinary
(`.llvm.offloading`). Whatever the bytes, a reader gives records or raises FormatError (the
one-line `offlink: error: ...`), never another exception, and never inflates past a record's
declared size. The C table core has its own libFuzzer run (test_fuzz.py)."""

from __future__ import annotations

import struct
import zlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_format_declarations import field_offsets

from offlink.errors import FormatError
from offlink.formats import declarations as decl
from offlink.formats import offload_binary as ob
from offlink.formats import payload as pl

HEAD = field_offsets(decl.PayloadHeader)
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _record(
    code: bytes, version: int = 2, stored: bytes | None = None, code_size: int | None = None
) -> bytes:
    """A record as offlink writes one (version 2), or as an older offlink did (version 1);
    `stored` replaces the compressed code (valid lengths and CRC around it)."""

    body = decl.PayloadBody.build(
        dict(
            target="x86_64-pc-linux-gnu",
            code_kind="c",
            source="a.c",
            compiler="gcc",
            options=["-O2"],
            offered=["f", "g"],
            code=zlib.compress(code, 6) if stored is None else stored,
        )
    )
    body += b"\0" * (-len(body) % 8)
    crc = zlib.crc32(body)
    if version == 1:
        head = dict(version=1, flags=pl.FLAG_ZLIB, body_crc32=crc, body_size=len(body))
        return decl.PayloadHeaderV1.build(head) + body
    size = len(code) if code_size is None else code_size
    return (
        decl.PayloadHeader.build(
            dict(version=2, flags=pl.FLAG_ZLIB, body_crc32=crc, body_size=len(body), code_size=size)
        )
        + body
    )


SEEDS = [
    _record(b"int f(void) { return 1; }\n" * 40),
    _record(b"x" * 5000) + _record(b"int g;\n"),  # two records, as ld -r concatenates them
    _record(b"int h(void) { return 2; }\n" * 20, version=1),
]


def _mutations():
    """A valid record with a few bytes overwritten, a cut, or a length field forged."""
    seed = st.sampled_from(SEEDS)
    flips = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6)
    cut = st.one_of(st.none(), st.integers(0, 10_000))
    lengths = st.sampled_from([HEAD["body_size"], HEAD["code_size"]])
    forged = st.one_of(st.none(), st.tuples(lengths, st.integers(0, 2**64 - 1)))
    return st.tuples(seed, flips, cut, forged, st.booleans())


def _apply(seed: bytes, flips, cut, forged, fix_crc: bool = False) -> bytes:
    data = bytearray(seed)
    for at, value in flips:
        if data:
            data[at % len(data)] = value
    if forged is not None and len(data) >= forged[0] + 8:
        struct.pack_into("<Q", data, forged[0], forged[1])  # body_size or code_size
    if cut is not None:
        del data[cut % (len(data) + 1) :]
    if fix_crc and len(data) >= decl.PayloadHeader.sizeof():  # past the checksum, to the body
        version = struct.unpack_from("<H", data, HEAD["version"])[0]
        header = decl.PayloadHeaderV1 if version == 1 else decl.PayloadHeader
        at = header.sizeof()
        size = struct.unpack_from("<Q", data, HEAD["body_size"])[0]
        struct.pack_into("<I", data, HEAD["body_crc32"], zlib.crc32(data[at : at + size]))
    return bytes(data)


def _read_all(data: bytes, lazy: bool) -> None:
    for p in pl.parse_records(data, "fuzz.o", lazy=lazy):
        code = p.code  # lazy: inflated here, with the same checks
        assert len(code) <= 256 << 20
        _ = p.code_id, p.offered, p.options


@SETTINGS
@given(_mutations(), st.booleans())
def test_payload_reader_gives_records_or_one_format_error(mutation, lazy):
    data = _apply(*mutation)
    try:
        _read_all(data, lazy)
    except FormatError as e:
        assert str(e).startswith("fuzz.o: ") and "\n" not in str(e)


@SETTINGS
@given(st.binary(max_size=600), st.booleans())
def test_payload_reader_on_random_bytes(data, lazy):
    try:
        _read_all(pl.MAGIC + data if data[:1] == b"\x01" else data, lazy)
    except FormatError:
        pass


@SETTINGS
@given(st.integers(1, 2**20), st.integers(0, 4096), st.sampled_from([1, 2]))
def test_code_that_inflates_past_its_size_is_refused(extra, declared, version):
    """A zlib bomb in a record with valid lengths and CRC: version 2 stops one byte past
    code_size; version 1 (no code_size) past the 256 MiB limit, which extra stays under, so
    there it is read: the limit is checked by test_formats."""
    bomb = zlib.compress(b"a" * (declared + extra), 9)
    record = _record(b"a" * declared, version=version, stored=bomb)
    if version == 1:
        assert len(pl.parse_records(record, "fuzz.o", lazy=True)[0].code) == declared + extra
        return
    try:
        _read_all(record, lazy=True)
    except FormatError as e:
        assert "corrupt payload" in str(e) and "inflates to more" in str(e), e
    else:
        raise AssertionError("a record whose code inflates past code_size was read")


def _binary() -> bytes:
    images = [
        ob.OffloadImage(
            "bc",
            "openmp",
            0,
            {"triple": "x86_64-pc-linux-gnu", "arch": "", "producer": "clang"},
            b"BC" * 50,
        ),
        ob.OffloadImage(
            "elf",
            "openmp",
            0,
            {"triple": "nvptx64-nvidia-cuda", "arch": "sm_80"},
            b"\x7fELF" + b"\0" * 60,
        ),
    ]
    one = ob.build_binary(images)
    return one + b"\0" * (-len(one) % 8) + one  # as ld -r concatenates them


# The header's size and entries' place, the first entry's strings' and image's place and size.
BINARY_LENGTHS = [field_offsets(decl.OffloadBinaryHeader)[f]
                  for f in ("size", "entry_offset", "entry_size")]
BINARY_LENGTHS += [decl.OffloadBinaryHeader.sizeof() + field_offsets(decl.OffloadBinaryEntry)[f]
                   for f in ("string_offset", "num_strings", "image_offset")]


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
    st.one_of(st.none(), st.integers(0, 10_000)),
    st.one_of(
        st.none(),
        st.tuples(
            st.sampled_from(BINARY_LENGTHS), st.integers(0, 2**64 - 1)
        ),
    ),
)
def test_offload_binary_reader_gives_images_or_one_format_error(flips, cut, forged):
    data = _apply(_binary(), flips, cut, forged)
    try:
        images = ob.parse_binaries(data, "fuzz.o")
    except FormatError as e:
        assert str(e).startswith("fuzz.o: ") and "\n" not in str(e)
    else:
        assert all(len(i.image) <= len(data) for i in images)


def test_the_seeds_are_read():
    """The mutations start from records and binaries the readers accept."""
    for seed in SEEDS:
        _read_all(seed, lazy=True)
    assert len(ob.parse_binaries(_binary(), "seed")) == 4
