"""Link time of GCC offload programs (gcc -fopenmp -foffload=nvptx-none): offlink vs GCC.

For a program of N CUs (each with two target regions, a `declare target` global and a
static), the objects are compiled once; then each way of linking is timed (median of
--repeat runs, round-robin so a busy machine slows every row alike):

  gcc own          gcc -fopenmp -foffload=nvptx-none ... (mkoffload: all device code, every
                   link), also after the one-CU change (it recompiles everything either way)
  offlink cold     offlink link with an empty compile cache
  offlink 1 CU     offlink link after one CU changed (its object recompiled, not timed); with
                   offlink's per-CU compile cache, only that CU's device code is compiled again
  offlink nothing  offlink link again with nothing changed (every CU and the image cached)
  offlink no cache the one-CU-changed link with OFFLINK_NO_CACHE=1 (--no-cache-row)
  host only        gcc -fopenmp -foffload=disable (no device code at all: the floor)

Several offlink commands (--offlink LABEL=CMD, repeatable; e.g. a checkout of main and this
tree) are timed in the same run, each with its own cache. Times are wall seconds and, in
parentheses, the CPU seconds of all processes of the link; the ratio table divides each
offlink row by GCC's own link (wall, and CPU).

Both sides link with the same words (LINK_WORDS: GCC's own link and offlink's). --release N
times GCC N (`gcc-N`; 13-16 live in the chroots of tests/chroots, so run it there:
`tests/chroots/run.sh .ci/chroots/trixie python3 benchmarks/gcc_offload/bench.py --release 14`).

Usage: python benchmarks/gcc_offload/bench.py [--cus 30,300] [--repeat 5] [--release N]
           [--offlink LABEL=CMD ...] [--no-cache-row]
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CFLAGS = ["-O2", "-fopenmp", "-foffload=nvptx-none"]
# Both links' words: -foffload=nvptx-none (where the amdgcn offload compiler is installed too)
# and the ISA this machine's ptxas (CUDA 13) takes.
LINK_WORDS = ["-O2", "-fopenmp", "-foffload=nvptx-none",
              "-foffload-options=nvptx-none=-misa=sm_80"]
CC = "gcc"  # gcc-N under --release N

OFFLINK_ROWS = ("cold", "1 CU changed", "nothing changed", "1 CU changed, no cache")
CU = """\
#pragma omp declare target
int g_{k} = {k};
static int s = {k} + {bump};
#pragma omp end declare target

int work_{k}(int n) {{
  int r = 0;
#pragma omp target map(tofrom: r)
  r = n * g_{k} + s;
#pragma omp target teams distribute parallel for reduction(+: r)
  for (int i = 0; i < n; i++)
    r += i % {m};
  return r;
}}
"""


def write_program(d: Path, n: int) -> list[str]:
    decls = "".join(f"int work_{k}(int);\n" for k in range(n))
    calls = "".join(f"  sum += work_{k}(100);\n" for k in range(n))
    (d / "main.c").write_text(f"#include <stdio.h>\n{decls}int main(void) {{\n  long sum = 0;\n"
                              f"{calls}  printf(\"%ld\\n\", sum);\n  return 0;\n}}\n")
    for k in range(n):
        (d / f"cu{k}.c").write_text(CU.format(k=k, m=k + 2, bump=0))
    return ["main.c", *(f"cu{k}.c" for k in range(n))]


def sh(argv, cwd, env=None) -> None:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"failed: {shlex.join(map(str, argv))}\n{proc.stdout}{proc.stderr}")


def timed(argv, cwd, env=None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    sh(argv, cwd, env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def compile_all(d: Path, sources: list[str]) -> list[str]:
    objs = []
    for src in sources:
        obj = src[:-2] + ".o"
        sh([CC, *CFLAGS, "-c", src, "-o", obj], d)
        objs.append(obj)
    return objs


def change_one(d: Path, bump: int) -> None:
    """A new body for cu0 (a constant no earlier run used), recompiled: not timed."""
    (d / "cu0.c").write_text(CU.format(k=0, m=2, bump=bump))
    sh([CC, *CFLAGS, "-c", "cu0.c", "-o", "cu0.o"], d)


def bench(n: int, repeat: int, tools: list[tuple[str, list[str]]], work: Path,
          no_cache_row: bool) -> dict[str, tuple[float, float]]:
    d = work / f"cus{n}"
    d.mkdir()
    objs = compile_all(d, write_program(d, n))
    env = dict(os.environ)
    gcc_link = [CC, *LINK_WORDS, *objs, "-o", "prog.gcc"]
    host_link = [CC, "-O2", "-fopenmp", "-foffload=disable", *objs, "-o", "prog.host"]
    rows = ["gcc own", "gcc own, 1 CU changed", "host only"]
    for label, _ in tools:
        rows += [f"offlink {r} [{label}]" for r in OFFLINK_ROWS
                 if no_cache_row or "no cache" not in r]
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in rows}
    warm = {}
    for t, (label, offlink) in enumerate(tools):
        warm[label] = dict(env, OFFLINK_CACHE_DIR=str(work / f"cache-warm-{n}-{t}"))
        sh([*offlink, "link", CC, *LINK_WORDS, *objs, "-o",
            f"prog.offlink{t}"], d, warm[label])  # a cache with every CU, for "1 CU changed"
    for i in range(repeat):
        times["host only"].append(timed(host_link, d))
        times["gcc own"].append(timed(gcc_link, d))
        for t, (label, offlink) in enumerate(tools):
            link = [*offlink, "link", CC, *LINK_WORDS, *objs, "-o", f"prog.offlink{t}"]
            cold = dict(env, OFFLINK_CACHE_DIR=str(work / f"cache-cold-{n}-{t}-{i}"))
            times[f"offlink cold [{label}]"].append(timed(link, d, cold))
            shutil.rmtree(work / f"cache-cold-{n}-{t}-{i}")
        change_one(d, i + 1)
        times["gcc own, 1 CU changed"].append(timed(gcc_link, d))
        for t, (label, offlink) in enumerate(tools):
            link = [*offlink, "link", CC, *LINK_WORDS, *objs, "-o", f"prog.offlink{t}"]
            times[f"offlink 1 CU changed [{label}]"].append(timed(link, d, warm[label]))
            times[f"offlink nothing changed [{label}]"].append(timed(link, d, warm[label]))
            if no_cache_row:
                times[f"offlink 1 CU changed, no cache [{label}]"].append(
                    timed(link, d, dict(env, OFFLINK_NO_CACHE="1")))
    ref = subprocess.run(["./prog.gcc"], cwd=d, capture_output=True, text=True).stdout
    for t, (label, _) in enumerate(tools):
        out = subprocess.run([f"./prog.offlink{t}"], cwd=d, capture_output=True,
                             text=True).stdout
        if out != ref:
            sys.exit(f"{n} CUs: the programs disagree: offlink [{label}] {out!r}, gcc {ref!r}")
    return {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
            for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cus", default="30,300")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--offlink", action="append", default=[],
                    help="LABEL=CMD, repeatable (default: this tree=this Python's -m offlink)")
    ap.add_argument("--release", default="12", help="the GCC release: gcc-N (default: gcc, 12)")
    ap.add_argument("--no-cache-row", action="store_true",
                    help="also time the one-CU-changed link with OFFLINK_NO_CACHE=1")
    args = ap.parse_args()
    global CC
    CC = "gcc" if args.release == "12" else f"gcc-{args.release}"
    if not shutil.which(f"x86_64-linux-gnu-accel-nvptx-none-gcc-{args.release}"):
        sys.exit(f"needs gcc-{args.release}-offload-nvptx and nvptx-tools")
    given = [o.partition("=")[::2] for o in args.offlink] or \
        [("this tree", f"{sys.executable} -m offlink")]
    tools = [(label, shlex.split(cmd)) for label, cmd in given]
    counts = [int(c) for c in args.cus.split(",")]
    # An installed offlink has its bytecode compiled: without it, every run compiles the
    # modules it imports again (about 0.1 s of CPU).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory(prefix="offlink-bench-gcc-") as tmp:
        results = {n: bench(n, args.repeat, tools, Path(tmp), args.no_cache_row)
                   for n in counts}
    print(f"GCC {args.release} ({CC}); median of {args.repeat} runs, seconds: wall (CPU of "
          f"all processes); "
          f"{os.cpu_count()} CPUs, OFFLINK_JOBS={os.environ.get('OFFLINK_JOBS', 'default')}, "
          f"load average {os.getloadavg()[0]:.1f} at the end")
    rows = list(results[counts[0]])
    print("| link | " + " | ".join(f"{n} CUs" for n in counts) + " |")
    print("|---|" + "---:|" * len(counts))
    for r in rows:
        print(f"| {r} | " + " | ".join(f"{results[n][r][0]:.3f} ({results[n][r][1]:.3f})"
                                       for n in counts) + " |")
    print()
    print("offlink / GCC's own link (wall, CPU); a changed CU against GCC's link after the "
          "same change")
    print("| link | " + " | ".join(f"{n} CUs" for n in counts) + " |")
    print("|---|" + "---:|" * len(counts))
    for r in rows:
        if not r.startswith("offlink"):
            continue
        ref = "gcc own, 1 CU changed" if "changed" in r else "gcc own"
        print(f"| {r} | " + " | ".join(
            f"{results[n][r][0] / results[n][ref][0]:.2f}x "
            f"({results[n][r][1] / results[n][ref][1]:.2f}x)" for n in counts) + " |")


if __name__ == "__main__":
    main()
