"""Differential tests: the C core (offlink._ctable) and the pure-Python core (offlink._pytable)
give the same answers on random valid tables and random queries, and the same error (code and
message) on random corruptions, with and without the checksum recomputed."""

from __future__ import annotations

import os
import struct
import zlib
from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offlink import _pytable
from offlink.formats import table as fmt

try:
    from offlink import _ctable
except ImportError as e:  # a failure below unless the pure core alone is asked for
    _ctable, _MISSING = None, str(e)


@pytest.fixture(autouse=True)
def _both_cores():
    if _ctable is None:
        if os.environ.get("OFFLINK_PURE_PYTHON", "") not in ("", "0"):
            pytest.skip("offlink._ctable is not built (OFFLINK_PURE_PYTHON is set)")
        pytest.fail(f"offlink._ctable is not importable: {_MISSING}")
    global CORES
    CORES = (_pytable.Core, _ctable.Core)


CORES: tuple = ()
SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

I64 = (-(2**63), 2**63 - 1)

# Names: a tiny alphabet makes prefixes and near-misses common; the wide one covers UTF-8.
names = st.one_of(
    st.text("ab_", max_size=5),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=8),
)
# Offsets: a narrow range makes overlaps and equal keys common; the wide one covers int64.
host_offsets = st.one_of(st.integers(-64, 256), st.integers(*I64),
                         st.sampled_from([I64[0], I64[1], 0, -1]))
sizes = st.one_of(st.integers(0, 48), st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 2**64 - 1]))
rows = st.lists(
    st.builds(fmt.RowSpec, names, host_offsets, sizes, st.sampled_from(list(fmt.SYMBOL_KINDS))),
    max_size=40, unique_by=lambda r: r.name)
images = st.lists(
    st.builds(fmt.ImageSpec, st.sampled_from(["host", "x86_64-pc-linux-gnu", "nvptx64", ""]),
              st.sampled_from(list(fmt.IMAGE_KINDS)), st.binary(max_size=80)),
    max_size=3)


@st.composite
def tables(draw) -> tuple[bytes, list[fmt.RowSpec]]:
    rs = draw(rows)
    return fmt.build_table(draw(images), rs), rs


def _call(fn, *args):
    """A call's outcome as plain data: its result, or its exception's type and arguments."""
    try:
        result = fn(*args)
    except Exception as e:  # noqa: BLE001 - the exception is the observation
        return ("raised", type(e).__name__, e.args)
    return ("returned", result.tolist() if isinstance(result, array) else result)


def _make(*args):
    return args


def observe(core_cls, buf, offsets, names_, base) -> list:
    """Everything a caller can see of a table through one core."""
    opened = _call(core_cls, buf)
    if opened[0] == "raised":
        return [opened]
    core = opened[1]
    out = [core.total_size, core.meta_size, core.n_targets, core.n_symbols]
    out += [_call(core.symbol, i) for i in range(-1, core.n_symbols + 1)]
    out += [_call(core.target, i) for i in range(-1, core.n_targets + 1)]
    out += [_call(core.check_image, i) for i in range(-1, core.n_targets + 1)]
    out += [_call(core.lookup, n) for n in names_]
    out += [_call(core.find, o) for o in offsets]
    in_range = [o for o in offsets if I64[0] <= o <= I64[1]]
    out.append(_call(core.find_many, array("q", in_range)))
    out.append(_call(core.find_many, array("q", in_range), base))
    core.bind(base, _make)
    out += [_call(core.find_symbol, o + base) for o in offsets]
    out += [_call(core.lookup_symbol, n) for n in names_]
    return out


def _queries(rs, extra_offsets, extra_names):
    offsets = set(extra_offsets)
    for r in rs:
        end = r.host_offset + r.size
        offsets.update((r.host_offset - 1, r.host_offset, r.host_offset + 1, end - 1, end))
    names_ = [r.name.encode() for r in rs] + [n.encode() for n in extra_names]
    names_ += [n[:-1] for n in names_ if n] + [n + b"\0" for n in names_[:3]]
    return sorted(offsets), names_


queries = st.tuples(
    st.lists(st.one_of(st.integers(*I64), st.integers(-(2**66), 2**66)), max_size=10),
    st.lists(names, max_size=5),
    st.one_of(st.just(0), st.integers(0, 2**64 - 1), st.integers(-(2**65), 2**65)),
)


def assert_same(buf, offsets, names_, base=0):
    py, c = (observe(core, buf, offsets, names_, base) for core in CORES)
    assert c == py


@SETTINGS
@given(table=tables(), q=queries)
def test_valid_tables_same_answers(table, q):
    buf, rs = table
    extra_offsets, extra_names, base = q
    offsets, names_ = _queries(rs, extra_offsets, extra_names)
    assert_same(buf, offsets, names_, base)
    # and both are right, not merely equal: find and lookup against a direct definition
    core = _ctable.Core(buf)
    by_name = {r.name.encode(): r for r in rs}
    for n in names_:
        row = core.lookup(n)
        assert (row >= 0) == (n in by_name)
        if row >= 0:
            assert core.symbol(row)[0] == n
    pairs = sorted((r.host_offset, core.lookup(r.name.encode())) for r in rs)
    for o in offsets:
        below = [p for p in pairs if p[0] <= o]
        want = -1
        if below:
            start, row = below[-1]
            want = row if o - start < core.symbol(row)[2] else -1
        assert core.find(o) == want


# -- corruptions ---------------------------------------------------------------------------

# (offset, struct format) of every header field a corruption may target.
HEADER_FIELDS = [(8, "<H"), (10, "<H"), (12, "<I"), (16, "<Q"), (24, "<Q"), (32, "<I"),
                 (36, "<I"), (40, "<I"), (44, "<I"), (48, "<Q"), (56, "<Q"), (64, "<Q"),
                 (72, "<Q"), (80, "<Q")]
TARGET_FIELDS = [(0, "<I"), (4, "<I"), (8, "<H"), (10, "<H"), (12, "<I"), (16, "<Q"), (24, "<Q")]
ROW_FIELDS = [(0, "<I"), (4, "<I"), (8, "<q"), (16, "<Q"), (24, "<H"), (26, "<H")]


def _fix_crc(buf: bytearray) -> None:
    """Recompute meta_crc32 where the header says where the metadata ends."""
    if len(buf) < fmt.HEADER_SIZE:
        return
    meta = struct.unpack_from("<Q", buf, 24)[0]
    if fmt.HEADER_SIZE <= meta <= len(buf):
        struct.pack_into("<I", buf, fmt.CRC_OFFSET, 0)
        struct.pack_into("<I", buf, fmt.CRC_OFFSET, zlib.crc32(bytes(buf[:meta])))


def _interesting(size: int) -> st.SearchStrategy[int]:
    return st.sampled_from([0, 1, 7, 8, 9, 95, 96, 97, size - 1, size, size + 1, 2**31,
                            2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1])


@st.composite
def corruptions(draw):
    buf, _rs = draw(tables())
    out = bytearray(buf)
    h = fmt.HEADER_STRUCT.unpack_from(buf, 0)
    n_targets, n_symbols, t_off, s_off = h[7], h[8], h[10], h[11]
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["byte", "header", "target", "row", "index", "swap"]))
        if how == "byte":
            pos = draw(st.integers(0, len(out) - 1))
            out[pos] = draw(st.integers(0, 255))
            continue
        if how == "swap" and n_symbols >= 2:  # two rows' names: the order breaks, nothing else
            i, j = (s_off + fmt.SYMBOL_SIZE * draw(st.integers(0, n_symbols - 1)) for _ in "ij")
            out[i : i + 8], out[j : j + 8] = out[j : j + 8], out[i : i + 8]
            continue
        if how == "header":
            off, form = draw(st.sampled_from(HEADER_FIELDS))
        elif how == "target" and n_targets:
            i = draw(st.integers(0, n_targets - 1))
            f_off, form = draw(st.sampled_from(TARGET_FIELDS))
            off = t_off + i * fmt.TARGET_SIZE + f_off
        elif how == "row" and n_symbols:
            i = draw(st.integers(0, n_symbols - 1))
            f_off, form = draw(st.sampled_from(ROW_FIELDS))
            off = s_off + i * fmt.SYMBOL_SIZE + f_off
        elif how == "index" and n_symbols:
            # Any 32-bit field of the index: a node key, a leaf key, a row or a span.
            i = draw(st.integers(0, fmt.index_size(n_symbols) // 4 - 1))
            off, form = h[12] + 4 * i, draw(st.sampled_from(["<i", "<I"]))
        else:
            continue
        bits = struct.calcsize(form) * 8
        # Near the old value and near the pool's end find off-by-one errors; the rest, range.
        old = struct.unpack_from(form, out, off)[0]
        value = draw(st.one_of(_interesting(len(out)), st.integers(0, 2**bits - 1),
                               st.integers(old - 2, old + 2),
                               st.integers(h[9] - 2, h[9] + 1)))
        value %= 2**bits
        if form[1].islower():  # signed
            value = value - 2**bits if value >= 2 ** (bits - 1) else value
        struct.pack_into(form, out, off, value)
    cut = draw(st.sampled_from(["none", "none", "truncate", "extend"]))
    if cut == "truncate":
        del out[draw(st.integers(0, len(out))):]
    elif cut == "extend":
        out += bytes(draw(st.integers(1, 16)))
    if draw(st.booleans()):
        _fix_crc(out)
    return bytes(out)


@settings(SETTINGS, max_examples=1000)
@given(buf=corruptions(), q=queries)
def test_corruptions_same_error(buf, q):
    extra_offsets, extra_names, base = q
    assert_same(buf, extra_offsets + [0, -1, 1], [n.encode() for n in extra_names], base)


@SETTINGS
@given(data=st.binary(max_size=512), fix=st.booleans())
def test_arbitrary_bytes_same_error(data, fix):
    buf = bytearray(fmt.MAGIC + data) if data[:1] != b"!" else bytearray(data)
    if fix:
        _fix_crc(buf)
    assert_same(bytes(buf), [0, 1], [b"a"])


def test_every_error_code_is_reachable_and_agrees():
    """One hand-made corruption per code, so a change in either core's order shows here."""
    base = bytearray(fmt.build_table(
        [fmt.ImageSpec("host", "shared-object", b"image")],
        [fmt.RowSpec("a", 16, 8, "variable"), fmt.RowSpec("b", 0, 1, "function")]))
    h = fmt.HEADER_STRUCT.unpack_from(base, 0)
    t_off, s_off, i_off = h[10], h[11], h[12]

    def edit(off, form, value, fix=True):
        out = bytearray(base)
        struct.pack_into(form, out, off, value)
        if fix:
            _fix_crc(out)
        return bytes(out)

    cases = {
        "truncated": bytes(base[:50]),
        "bad-magic": edit(0, "<B", ord("X")),
        "bad-version": edit(8, "<H", 2),
        "bad-header": edit(12, "<I", 1),
        "bad-checksum": edit(s_off + 16, "<Q", 9, fix=False),
        "bad-offset": edit(56, "<Q", 2**64 - 8),
        "bad-string": edit(s_off + 4, "<I", 2**32 - 1),
        "bad-kind": edit(t_off + 8, "<H", 9),
        "unsorted": edit(s_off + fmt.SYMBOL_SIZE + 0, "<I",
                         struct.unpack_from("<I", base, s_off)[0]),
        "bad-index": edit(i_off, "<i", 5),
    }
    for code, buf in cases.items():
        errors = [_call(core, buf) for core in CORES]
        assert errors[0] == errors[1], code
        assert errors[0][:2] == ("raised", "ValueError") and errors[0][2][0] == code, errors
    image_off = _pytable.Core(bytes(base)).target(0)[2]
    bad = bytearray(base)
    bad[image_off] ^= 1
    for core in CORES:
        with pytest.raises(ValueError) as e:
            core(bytes(bad)).check_image(0)
        assert e.value.args == ("bad-image-checksum", "image checksum mismatch (target 0)")
