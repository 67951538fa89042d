"""Python side of the lookup benchmark: Table.find / Table.lookup per call against dict.get and
bisect on the same rows and queries, the batch form in lookups per second, and opening a table.

    python benchmarks/lookup/bench.py TABLE_FILE [TABLE_FILE ...]

Per-call figures are ns per loop iteration (the loop's own cost included, as a caller pays it;
an empty loop's cost is printed for reference), best of REPS runs, warm: every Symbol has been
made once (Table caches them). dict.get answers exact addresses only; bisect is the usual
`bisect_right` over a sorted list of starts plus the containment test.
"""

from __future__ import annotations

import random
import sys
import time
from array import array
from bisect import bisect_right
from pathlib import Path

try:
    import offlink  # noqa: F401 - the installed package (editable or not), if there is one
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from offlink import _pytable  # noqa: E402
from offlink.table import Table, backend  # noqa: E402

REPS = 7
QUERIES = 200_000
BATCH = 1 << 20
ADDRESS = 0x400000  # the table's sh_addr: addresses are as in the file's symbol table


def best(fn, reps: int = REPS) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return min(times)


def per_call(loop, items) -> float:
    return best(lambda: loop(items)) / len(items)


def bench(path: Path) -> None:
    buf = path.read_bytes()
    t_open = best(lambda: Table.from_bytes(buf, ADDRESS), 5) / 1e6
    t = Table.from_bytes(buf, ADDRESS)
    n = len(t)
    reps_py = 1 if n > 200_000 else 3
    t_open_py = best(lambda: _pytable.Core(buf), reps_py) / 1e6

    rnd = random.Random(7)
    symbols = t.symbols
    exact = [symbols[rnd.randrange(n)].address for _ in range(QUERIES)]
    variables = [s for s in symbols if s.size > 1]
    inner = []
    for _ in range(QUERIES):
        s = rnd.choice(variables)
        inner.append(s.address + rnd.randrange(1, s.size))
    names = [symbols[rnd.randrange(n)].name for _ in range(QUERIES)]

    by_address = {s.address: s for s in symbols}
    by_name = {s.name: s for s in symbols}
    order = sorted(symbols, key=lambda s: s.address)
    starts = [s.address for s in order]
    sizes = [s.size for s in order]

    find, lookup, core_find = t.find, t.lookup, t._core.find
    dget, nget = by_address.get, by_name.get

    def loop_find(qs):
        for a in qs:
            find(a)

    def loop_core_find(qs):
        for a in qs:
            core_find(a - ADDRESS)

    def loop_dict(qs):
        for a in qs:
            dget(a)

    def loop_bisect(qs):
        for a in qs:
            i = bisect_right(starts, a) - 1
            if i >= 0 and a - starts[i] < sizes[i]:
                order[i]

    def loop_lookup(qs):
        for name in qs:
            lookup(name)

    def loop_name_dict(qs):
        for name in qs:
            nget(name)

    def loop_empty(qs):
        for _ in qs:
            pass

    # Warm: make every Symbol the queries reach, and check the answers against the baselines.
    assert all(find(a) == by_address[a] for a in exact)
    assert all(find(a) == order[bisect_right(starts, a) - 1] for a in inner[:1000])
    assert all(lookup(s) == by_name[s] for s in names)

    rows = {
        "Table.find exact": per_call(loop_find, exact),
        "Table.find interior": per_call(loop_find, inner),
        "Core.find(a - address)": per_call(loop_core_find, exact),
        "dict.get exact": per_call(loop_dict, exact),
        "bisect exact": per_call(loop_bisect, exact),
        "bisect interior": per_call(loop_bisect, inner),
        "Table.lookup name": per_call(loop_lookup, names),
        "dict.get name": per_call(loop_name_dict, names),
        "empty loop": per_call(loop_empty, exact),
    }
    batch = array("Q", (symbols[rnd.randrange(n)].address + rnd.randrange(0, 2)
                        for _ in range(BATCH)))
    out = t.find_rows(batch)
    assert len(out) == BATCH
    t_batch = best(lambda: t.find_rows(batch))

    print(f"table {path.name}: {n} symbols, backend {backend()}")
    print(f"  open (Table.from_bytes): {t_open:.2f} ms; pure-Python core: {t_open_py:.1f} ms")
    for label, ns in rows.items():
        print(f"  {label:<22} {ns:7.1f} ns/call")
    print(f"  Table.find / dict.get: {rows['Table.find exact'] / rows['dict.get exact']:.2f}x;"
          f" Table.lookup / dict.get: {rows['Table.lookup name'] / rows['dict.get name']:.2f}x")
    print(f"  batch find_rows: {BATCH / t_batch * 1e3:.1f} M lookups/s"
          f" ({t_batch / BATCH:.1f} ns each, {BATCH} addresses)")


def main(argv: list[str]) -> None:
    for arg in argv:
        bench(Path(arg))


if __name__ == "__main__":
    main(sys.argv[1:])
