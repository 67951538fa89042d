"""A link with no target code (offlink passes it through), several offlinks round robin.

    python benchmarks/health/no_target.py [--runs 21] NAME=COMMAND...

Each COMMAND is an offlink (e.g. "env PYTHONPATH=/tmp/x python -m offlink"); the plain
`gcc` link of the same three objects is timed beside them. Prints the median wall and CPU
(user+sys of the process tree) milliseconds of each.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    before = os.times()
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user
           + after.children_system - before.children_system)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("offlinks", nargs="+", metavar="NAME=COMMAND")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for i in range(3):
            (work / f"p{i}.c").write_text(f"int f{i}(void) {{ return {i}; }}\n" +
                                         ("int main(void) { return 0; }\n" if i == 0 else ""))
            subprocess.run(["gcc", "-O2", "-c", f"p{i}.c"], cwd=work, check=True)
        objs = ["p0.o", "p1.o", "p2.o"]
        links = {"plain gcc": ["gcc", *objs, "-o", "plain.out"]}
        for spec in args.offlinks:
            name, _, command = spec.partition("=")
            links[name] = [*shlex.split(command), "link", "gcc", *objs, "-o", f"{name}.out"]
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in links}
        for argv in links.values():  # warm the page cache
            timed(argv, work)
        for _ in range(args.runs):
            for name, argv in links.items():
                times[name].append(timed(argv, work))
    print(f"no target code, median of {args.runs} interleaved runs (ms): wall (CPU)")
    for name, runs in times.items():
        wall = statistics.median(t[0] for t in runs) * 1000
        cpu = statistics.median(t[1] for t in runs) * 1000
        print(f"  {name:12} {wall:7.1f} ({cpu:.1f})")


if __name__ == "__main__":
    main()
