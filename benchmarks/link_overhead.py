"""Link time through offlink against the plain link, interleaved runs, medians.

    python benchmarks/link_overhead.py [--runs 15] [--offlink PATH] [--out FILE]

1. The three-CU sample (samples/multi_cu): `offlink link gcc ...` vs `gcc ...` on the same
   fat objects (the plain link gives a host-only program), cold (--no-cache: every target
   compile and the device link run) and as a relink with nothing changed (the cache).
2. A program with no target code: `offlink link gcc ...` vs `gcc ...` (the pass-through cost).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(argv, cwd) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def compare(name, a, b, cwd, runs) -> dict:
    ta, tb = [], []
    timed(a, cwd), timed(b, cwd)  # warm caches
    for _ in range(runs):
        ta.append(timed(a, cwd))
        tb.append(timed(b, cwd))
    ma, mb = statistics.median(ta), statistics.median(tb)
    return {"name": name, "offlink_ms": ma * 1000, "plain_ms": mb * 1000,
            "extra_ms": (ma - mb) * 1000, "ratio": ma / mb}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--offlink", default=str(Path(sys.executable).parent / "offlink"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "RESULTS-link.md"))
    args = ap.parse_args()
    off = args.offlink
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        sample = Path(tmp) / "multi_cu"
        shutil.copytree(ROOT / "samples" / "multi_cu", sample)
        subprocess.run(["make", "-s", "-C", sample, f"OFFLINK={off}"], check=True)
        libs = subprocess.run([off, "config", "--libs"], capture_output=True, text=True,
                              check=True).stdout.split()
        objs = ["build/main.o", "build/ops.o", "build/vec.o"]
        results.append(compare("3-CU sample (multi_cu), cold: --no-cache",
                               [off, "link", "--no-cache", "gcc", *objs, *libs, "-o", "a.out"],
                               ["gcc", *objs, *libs, "-o", "b.out"], sample, args.runs))
        results.append(compare("3-CU sample (multi_cu), relink: nothing changed (cache)",
                               [off, "link", "gcc", *objs, *libs, "-o", "a.out"],
                               ["gcc", *objs, *libs, "-o", "b.out"], sample, args.runs))
        plain = Path(tmp) / "plain"
        plain.mkdir()
        for i in range(3):
            (plain / f"p{i}.c").write_text(f"int f{i}(void) {{ return {i}; }}\n" +
                                          ("int main(void) { return 0; }\n" if i == 0 else ""))
            subprocess.run(["gcc", "-O2", "-c", f"p{i}.c"], cwd=plain, check=True)
        pobjs = ["p0.o", "p1.o", "p2.o"]
        results.append(compare("no target code (pass-through)",
                               [off, "link", "gcc", *pobjs, "-o", "a.out"],
                               ["gcc", *pobjs, "-o", "b.out"], plain, args.runs))
    lines = [
        "# Link overhead", "",
        f"Command: `python benchmarks/link_overhead.py --runs {args.runs}` "
        f"({time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, bytecode cache "
        f"{'off' if sys.dont_write_bytecode else 'on'}). Medians of {args.runs} interleaved runs.",
        "",
        "| link | offlink (ms) | plain gcc (ms) | extra (ms) | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(f"| {r['name']} | {r['offlink_ms']:.1f} | {r['plain_ms']:.1f} | "
                     f"{r['extra_ms']:.1f} | {r['ratio']:.2f} |")
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
