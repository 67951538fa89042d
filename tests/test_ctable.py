"""The C table core: which backend is loaded, its header against the construct declaration,
its C API from C (any buffer alignment), and the extension's own behaviour."""

from __future__ import annotations

import gc
import os
import re
import shutil
import subprocess
import sys
import weakref
import zlib
from array import array
from pathlib import Path

import pytest
from test_format_declarations import construct_table, field_offsets

from offlink import _pytable, table
from offlink.formats import declarations as decl
from offlink.formats import table as fmt

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "offlink" / "runtime"
PURE = os.environ.get("OFFLINK_PURE_PYTHON", "") not in ("", "0")

CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler on PATH")


def test_backend_is_c_unless_pure_python_is_asked_for():
    """Fails when the extension should be there and is not (a silent fallback would hide a
    broken build: pyproject marks the extension optional)."""
    if PURE:
        assert table.backend() == "python"
        return
    try:
        from offlink import _ctable
    except ImportError as e:  # pragma: no cover - the failure this test exists for
        pytest.fail(f"offlink._ctable is not importable ({e}); build it with `pip install -e .`"
                    " or set OFFLINK_PURE_PYTHON=1 to test the pure-Python core alone")
    assert table.backend() == "c"
    assert _ctable.Core.backend == "c"
    assert table.Table.from_bytes(_sample()).backend == "c"


def _sample() -> bytes:
    return fmt.build_table(
        [fmt.ImageSpec("x86_64-pc-linux-gnu", "shared-object", b"\x7fELF" + bytes(60)),
         fmt.ImageSpec("nvptx64-nvidia-cuda", "cubin", b"cubin!")],
        [fmt.RowSpec("main_kernel", 0x100, 1, "function"),
         fmt.RowSpec("counter", 0x2000, 8, "variable"),
         fmt.RowSpec("table", 0x3000, 4096, "variable"),
         fmt.RowSpec("fp", 0x180, 1, "indirect-function"),
         fmt.RowSpec("linked", -0x40, 16, "link-variable")],
    )


# -- the header against the declaration (offlink/formats/declarations.py) --------------------


def _expected_constants() -> dict[str, int]:
    want = {
        "OFL_VERSION": fmt.VERSION,
        "OFL_HEADER_SIZE": decl.TableHeader.sizeof(),
        "OFL_TARGET_SIZE": decl.TableTargetEntry.sizeof(),
        "OFL_SYMBOL_SIZE": decl.TableSymbolRow.sizeof(),
        "OFL_INDEX_FANOUT": decl.TableIndexNode.count,
        "OFL_INDEX_NODE_SIZE": decl.TableIndexNode.sizeof(),
        "OFL_INDEX_LEAF_SIZE": decl.TableIndexLeaf.sizeof(),
        "OFL_KEY_MIN": fmt.KEY_MIN,
        "OFL_KEY_MAX": fmt.KEY_MAX,
        "OFL_KEY_PAD": fmt.KEY_PAD,
        "OFL_SPAN_MAX": fmt.SPAN_MAX,
        "OFL_IMAGE_ALIGN": fmt.IMAGE_ALIGN,
        "OFL_REGION_ALIGN": 8,
    }
    for prefix, struct in (("HDR", decl.TableHeader), ("TGT", decl.TableTargetEntry),
                           ("ROW", decl.TableSymbolRow)):
        for name, off in field_offsets(struct).items():
            want[f"OFL_{prefix}_{name.upper()}"] = off
    for name, value in fmt.IMAGE_KINDS.items():
        want[f"OFL_IMAGE_{name.upper().replace('-', '_')}"] = value
    for name, value in fmt.SYMBOL_KINDS.items():
        want[f"OFL_SYM_{name.upper().replace('-', '_')}"] = value
    for i, code in enumerate(_pytable.MESSAGES, start=1):
        want[f"OFL_{code.upper().replace('-', '_')}"] = i
    return want


def _header_text_constants() -> dict[str, int]:
    """table.h's integer #defines and enumerators, read from its text."""
    text = (RUNTIME / "table.h").read_text()
    found = re.findall(r"^#define (OFL_\w+) ([-()\w ]+?)\s*(?:/\*.*)?$", text, re.M)
    found += re.findall(r"^\s+(OFL_\w+) = (\d+),", text, re.M)
    values = {"UINT32_MAX": str(2**32 - 1)}
    out = {}
    for name, value in found:
        value = values.get(value.strip(), value)
        assert re.fullmatch(r"[-() \d]+", value), (name, value)
        out[name] = int(eval(value))  # digits, minus signs and parentheses only
    return out


def test_header_text_matches_the_construct_declaration():
    """Without a C compiler: each constant the declaration fixes, as table.h's text spells
    it (the compiled check below covers the macros' use)."""
    got = _header_text_constants()
    want = _expected_constants()
    assert {name: got.get(name) for name in want} == want


def _compile_run(tmp_path: Path, source: str, *args: str, flags: tuple[str, ...] = ()) -> str:
    src = tmp_path / "prog.c"
    src.write_text(source)
    exe = tmp_path / "prog"
    subprocess.run([CC, "-std=c11", "-O1", "-Wall", "-Werror", *flags, f"-I{RUNTIME}", str(src),
                    str(RUNTIME / "table.c"), "-o", str(exe)], check=True)
    return subprocess.run([str(exe), *args], check=True, capture_output=True,
                          text=True).stdout


@needs_cc
def test_header_constants_match_the_construct_declaration(tmp_path):
    want = _expected_constants()
    # A macro the header lacks fails the compile, so the header covers every declared field.
    lines = "\n".join(f'  printf("{name} %lld\\n", (long long){name});' for name in want)
    out = _compile_run(tmp_path, f"""
#include <stdio.h>
#include "table.h"
int main(void) {{
{lines}
  printf("OFL_MAGIC_HEX ");
  for (size_t i = 0; i < sizeof OFL_MAGIC - 1; i++) printf("%02x", (unsigned char)OFL_MAGIC[i]);
  printf("\\n");
  for (int s = 0; s <= OFL_BAD_IMAGE_CHECKSUM; s++)
    printf("STATUS %d %s|%s\\n", s, ofl_status_code(s), ofl_status_message(s));
  return 0;
}}
""")
    got, status = {}, {}
    for line in out.splitlines():
        if line.startswith("STATUS "):
            _, num, text = line.split(" ", 2)
            status[int(num)] = tuple(text.split("|"))
        else:
            name, value = line.split(" ")
            got[name] = value if name == "OFL_MAGIC_HEX" else int(value)
    assert got.pop("OFL_MAGIC_HEX") == fmt.MAGIC.hex()
    assert got == want
    assert status.pop(0)[0] == "ok"
    assert status == {i: (code, msg) for i, (code, msg) in
                      enumerate(_pytable.MESSAGES.items(), start=1)}


CRC_PROG = r"""
#include <stdio.h>
#include <stdlib.h>
#include "table.h"
int main(int argc, char **argv) {
  FILE *f = fopen(argv[1], "rb");
  static unsigned char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  /* every start alignment, and chaining at an odd split */
  for (size_t off = 0; off < 8; off++)
    printf("%u\n", ofl_crc32(0, buf + off, n - off));
  printf("%u\n", ofl_crc32(ofl_crc32(0, buf, 13), buf + 13, n - 13));
  return 0;
}
"""


@needs_cc
def test_crc32_matches_zlib(tmp_path):
    data = os.urandom(4099)
    (tmp_path / "data").write_bytes(data)
    out = [int(x) for x in _compile_run(tmp_path, CRC_PROG, str(tmp_path / "data")).split()]
    assert out == [zlib.crc32(data[off:]) for off in range(8)] + [zlib.crc32(data)]


API_PROG = r"""
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "table.h"
/* argv: table file, then queries: "f:OFFSET" (find) or "l:NAME" (lookup). The table is opened
 * at every alignment 0..7 of its buffer; all must agree. */
int main(int argc, char **argv) {
  FILE *f = fopen(argv[1], "rb");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  unsigned char *table = malloc((size_t)n), *raw = malloc((size_t)n + 8);
  if (fread(table, 1, (size_t)n, f) != (size_t)n) return 2;
  fclose(f);
  for (int q = 2; q < argc; q++) {
    int64_t first = 0;
    for (int shift = 0; shift < 8; shift++) {
      memcpy(raw + shift, table, (size_t)n);
      ofl_table t;
      int st = ofl_table_open(&t, raw + shift, (uint64_t)n);
      if (st != OFL_OK) { printf("open %s\n", ofl_status_code(st)); return 0; }
      int64_t r = argv[q][0] == 'f' ? ofl_table_find(&t, strtoll(argv[q] + 2, NULL, 0))
                                    : ofl_table_lookup(&t, argv[q] + 2, strlen(argv[q] + 2));
      if (shift == 0) first = r;
      else if (r != first) { printf("alignment %d disagrees\n", shift); return 1; }
    }
    printf("%" PRId64 "\n", first);
  }
  return 0;
}
"""


@needs_cc
def test_c_api_agrees_with_the_pure_core_at_any_alignment(tmp_path):
    buf = _sample()
    (tmp_path / "t.bin").write_bytes(buf)
    core = _pytable.Core(buf)
    offsets = [-0x41, -0x40, -0x31, -0x30, 0, 0xFF, 0x100, 0x101, 0x180, 0x2007, 0x2008, 0x3FFF,
               0x4000, 2**63 - 1, -(2**63)]
    names = ["counter", "count", "counterx", "fp", "linked", "main_kernel", "table", "zzz", ""]
    queries = [f"f:{o}" for o in offsets] + [f"l:{n}" for n in names]
    out = [int(x) for x in _compile_run(tmp_path, API_PROG, str(tmp_path / "t.bin"),
                                        *queries).split()]
    want = [core.find(o) for o in offsets] + [core.lookup(n.encode()) for n in names]
    assert out == want


@needs_cc
def test_c_api_reads_a_table_the_declaration_builds(tmp_path):
    """A table built by the construct declaration alone, read by table.c: every row found by
    name and by address, as by the pure core."""
    rows = [fmt.RowSpec(f"r{i:03d}", 24 * i - 400, 1 + i % 23, "variable") for i in range(40)]
    buf = construct_table([fmt.ImageSpec("x86_64-pc-linux-gnu", "shared-object", b"so" * 9)],
                          rows)
    (tmp_path / "t.bin").write_bytes(buf)
    core = _pytable.Core(buf)
    offsets = [24 * i - 400 + d for i in range(40) for d in (0, 1, 23)]
    names = [r.name for r in rows] + ["r", "r0400"]
    queries = [f"f:{o}" for o in offsets] + [f"l:{n}" for n in names]
    out = [int(x) for x in _compile_run(tmp_path, API_PROG, str(tmp_path / "t.bin"),
                                        *queries).split()]
    assert out == [core.find(o) for o in offsets] + [core.lookup(n.encode()) for n in names]
    assert sorted(out[len(offsets):len(offsets) + 40]) == list(range(40))


@needs_cc
@pytest.mark.parametrize("flags", [(), ("-U__SSE2__",)], ids=["native", "portable"])
def test_index_search_agrees_with_the_pure_core(tmp_path, flags):
    # 5000 rows: two internal layers; a few offsets beyond 32 bits exercise the clamped ends.
    rows = [fmt.RowSpec(f"s{i:04d}", 16 * i - 40000, (7 * i) % 40, "variable")
            for i in range(5000)]
    rows += [fmt.RowSpec("far_lo", -(2**40), 2**41, "variable"),
             fmt.RowSpec("far_hi", 2**33, 2**64 - 1, "variable"),
             fmt.RowSpec("edge", 2**31 - 2, 3, "function")]
    buf = fmt.build_table([], rows)
    (tmp_path / "t.bin").write_bytes(buf)
    core = _pytable.Core(buf)
    offsets = [16 * i - 40000 + d for i in range(0, 5000, 37) for d in (-1, 0, 5, 39)]
    offsets += [-(2**63), -(2**40) - 1, -(2**40), -(2**31) - 1, -(2**31), 2**31 - 3, 2**31 - 2,
                2**31 - 1, 2**31, 2**33 - 1, 2**33, 2**63 - 1]
    out = [int(x) for x in _compile_run(tmp_path, API_PROG, str(tmp_path / "t.bin"),
                                        *(f"f:{o}" for o in offsets), flags=flags).split()]
    assert out == [core.find(o) for o in offsets]


# -- the extension itself ------------------------------------------------------------------


@pytest.fixture(scope="module")
def ctable():
    if PURE:
        pytest.skip("OFFLINK_PURE_PYTHON is set")
    from offlink import _ctable

    return _ctable


def test_extension_is_abi3(ctable):
    assert ctable.__file__.endswith(".abi3.so") or sys.platform == "win32"


def test_keeps_bytes_without_copying_and_copies_other_buffers(ctable):
    buf = _sample()
    before = sys.getrefcount(buf)
    core = ctable.Core(buf)
    assert sys.getrefcount(buf) == before + 1
    mutable = bytearray(buf)
    core2 = ctable.Core(mutable)
    mutable[:] = bytes(len(mutable))  # the Core validated a copy: later writes cannot reach it
    assert core2.symbol(0) == core.symbol(0)


def test_unaligned_and_typed_buffers(ctable):
    buf = _sample()
    views = (memoryview(b"\0" + buf)[1:], array("B", buf), memoryview(buf + bytes(4)).cast("I"))
    for view in views:
        a, b = ctable.Core(view), _pytable.Core(view)
        assert [a.symbol(i) for i in range(5)] == [b.symbol(i) for i in range(5)]


def test_bound_objects_are_collected(ctable):
    core = ctable.Core(_sample())

    class Maker:
        def __call__(self, *args):
            return self

    maker = Maker()
    maker.core = core
    core.bind(0, maker)  # a cycle: core -> make -> core, and core -> made list -> maker
    assert core.find_symbol(0x2004) is maker
    ref = weakref.ref(maker)
    del maker, core
    gc.collect()
    assert ref() is None


def test_find_many_accepts_any_8_byte_buffer(ctable):
    core = ctable.Core(_sample())
    addrs = array("Q", [0x1000 + 0x2004, 0x1000 - 0x3F, 5])
    want = [0, 2, -1]  # rows (sorted by name): counter, linked, none
    assert core.find_many(addrs, 0x1000).tolist() == want
    assert core.find_many(addrs.tobytes(), 0x1000).tolist() == want
    assert core.find_many(array("q"), 0).tolist() == []
    with pytest.raises(TypeError):
        core.find_many(b"1234567")


def test_table_uses_the_batch_and_cached_paths():
    t = table.Table.from_bytes(_sample(), address=0x400000)
    sym = t.find(0x400000 + 0x2003)
    assert sym is not None and sym.name == "counter" and sym.address == 0x402000
    assert t.find(0x400000 + 0x2003) is sym  # made once
    assert t.lookup("counter") is sym
    assert t.lookup("nope") is None and t.find(0) is None
    rows = t.find_rows(array("Q", [0x402000, 0x403FFF, 0x404000, 0]))
    assert rows.tolist() == [0, 4, -1, -1]
