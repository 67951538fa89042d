"""What the struct paths of offlink/formats save over construct's own (compiled) parsers and
builders of the same declarations (offlink/formats/declarations.py), on the operations they
serve: importing construct, reading a 1000-CU link's payloads, writing one record (`offlink
cc`), writing and reading a 20000-row table, reading 1000 OffloadBinaries and their entries;
and what importing json, offlink._pytable and dataclasses can add to a relink.

    python benchmarks/formats/bench.py [--repeat 5]

Each figure is the best of --repeat runs (timeit), in ms; "import construct" is the best of
as many fresh interpreters, against one that imports nothing; each module's import is the CPU
time it takes in a fresh interpreter that has imported offlink.elf, offlink.formats.table and
re (every link with target code has), median and best of --repeat: an upper bound of what it
adds to a link, which may have loaded some of what it imports. Compile offlink first
(`python -m compileall -q offlink`): with PYTHONDONTWRITEBYTECODE set, an edited module is
compiled again on every import.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import timeit
import zlib

from construct import Array

from offlink import _pytable
from offlink.formats import declarations as decl
from offlink.formats import offload_binary as ob
from offlink.formats import offload_entries as oe
from offlink.formats import payload as pl
from offlink.formats import table as tf


def best(fn, repeat: int) -> float:
    return min(timeit.repeat(fn, number=1, repeat=repeat)) * 1e3


def interpreter(code: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def import_after_relink(module: str, repeat: int) -> tuple[float, float]:
    code = (f"import offlink.elf, offlink.formats.table, re, time\n"
            f"t = time.process_time()\nimport {module}\nprint((time.process_time() - t) * 1e3)")
    times = [float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                  text=True).stdout) for _ in range(repeat)]
    return statistics.median(times), min(times)


def payload_rows(repeat: int):
    code = b"int f%d(int x) { return x * %d; }\n" * 200
    sections = [pl.build_record(pl.Payload("x86_64-pc-linux-gnu", "c", f"cu{i}.c", "gcc",
                                           ("-O2",), code % tuple(range(400)), (f"f{i}",)))
                for i in range(1000)]
    header, body = decl.PayloadHeader.compile(), decl.PayloadBody.compile()

    def by_construct():
        for s in sections:
            h = header.parse(s)
            data = s[decl.PayloadHeader.sizeof():decl.PayloadHeader.sizeof() + h.body_size]
            assert zlib.crc32(data) == h.body_crc32
            body.parse(data)

    read = ("read 1000 CUs' payload records (link, lazy)",
            best(lambda: [pl.parse_records(s, "x.o", lazy=True) for s in sections], repeat),
            best(by_construct, repeat))
    p = pl.parse_records(sections[0], "x.o")[0]
    fields = dict(target=p.target, code_kind=p.code_kind, source=p.source, compiler=p.compiler,
                  options=list(p.options), offered=list(p.offered))

    def write_by_construct():
        packed = zlib.compress(p.code, 4)
        b = body.build(dict(fields, code=packed))
        b += bytes(-len(b) % 8)
        header.build(dict(version=2, flags=1, body_crc32=zlib.crc32(b), body_size=len(b),
                          code_size=len(p.code)))

    write = ("write one record (offlink cc)", best(lambda: pl.build_record(p), repeat),
             best(write_by_construct, repeat))
    return [read, write]


def table_rows(repeat: int):
    n = 20000
    rows = [tf.RowSpec(f"symbol_{i:05d}", 64 * i, 8, "variable") for i in range(n)]
    blob = tf.build_table([], rows)
    h = decl.TableHeader.parse(blob)
    symbols = Array(n, decl.TableSymbolRow).compile()
    plain = [dict(name_off=0, name_len=12, host_offset=64 * i, size=8, kind="variable", flags=0)
             for i in range(n)]
    pairs = [(64 * i, i, 8) for i in range(n)]
    lo, hi, span = tf.KEY_MIN, tf.KEY_MAX, tf.SPAN_MAX
    return [
        ("index keys and spans of 20000 rows: build_index's inline clamps, against "
         "index_key() and index_span() called per row",
         best(lambda: ([lo if k < lo else hi if k > hi else k for k, _r, _s in pairs],
                       [s if s < span else span for _k, _r, s in pairs]), repeat),
         None, best(lambda: ([tf.index_key(k) for k, _r, _s in pairs],
                             [tf.index_span(s) for _k, _r, s in pairs]), repeat)),
        ("write a 20000-row table: its rows", best(lambda: b"".join(
            [tf.SYMBOL_STRUCT.pack(0, 12, 64 * i, 8, 2, 0) for i in range(n)]), repeat),
         best(lambda: symbols.build(plain), repeat)),
        ("write a 20000-row table (link's fill), whole", best(lambda: tf.build_table([], rows),
                                                              repeat), None),
        ("read a 20000-row table: its rows (pure-Python core)",
         best(lambda: list(tf.SYMBOL_STRUCT.iter_unpack(
             blob[h.symbols_off:h.symbols_off + n * tf.SYMBOL_SIZE])), repeat),
         best(lambda: symbols.parse(blob[h.symbols_off:]), repeat)),
        ("read a 20000-row table (pure-Python core), whole",
         best(lambda: _pytable.Core(blob), repeat), None),
    ]


def llvm_rows(repeat: int):
    image = ob.OffloadImage("elf", "openmp", 0, {"triple": "x86_64-pc-linux-gnu", "arch": ""},
                            b"\x7fELF" + bytes(2000))
    blobs = [ob.build_binary([image]) for _ in range(1000)]
    header, entry = decl.OffloadBinaryHeader.compile(), decl.OffloadBinaryEntry.compile()

    def by_construct():
        for b in blobs:
            head = header.parse(b)
            entry.parse(b[head.entry_offset:])

    entries = oe.ENTRY_V2.pack(0, 1, 1, 0, 0, 0, 4, 0, 0) * 1000
    rows = Array(1000, decl.OffloadEntryV2).compile()
    return [("read 1000 OffloadBinaries (clang objects)",
             best(lambda: [ob.parse_binaries(b, "x.o") for b in blobs], repeat),
             best(by_construct, repeat)),
            ("read 1000 entry rows (clang-22)",
             best(lambda: oe.rows("llvm_offload_entries", entries, "x.o"), repeat),
             best(lambda: rows.parse(entries), repeat))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    bare = interpreter("pass", repeat)
    with_construct = interpreter("import construct", repeat)
    print("| operation | struct (ms) | construct, compiled (ms) | other (ms) |")
    print("|---|---:|---:|---:|")
    print(f"| import construct (fresh interpreter, less a bare one) | 0 | "
          f"{with_construct - bare:.1f} | |")
    for name, *times in payload_rows(repeat) + table_rows(repeat) + llvm_rows(repeat):
        times += [None] * (3 - len(times))
        print(f"| {name} | " + " | ".join("" if t is None else f"{t:.2f}" for t in times) + " |")
    print()
    print("| import, after offlink.elf, offlink.formats.table and re "
          "| CPU median (ms) | CPU best (ms) |")
    print("|---|---:|---:|")
    for module in ("json", "offlink._pytable", "dataclasses"):
        median, least = import_after_relink(module, repeat)
        print(f"| {module} | {median:.2f} | {least:.2f} |")


if __name__ == "__main__":
    main()
