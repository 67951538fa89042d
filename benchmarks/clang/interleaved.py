"""One kind of link, many times, round robin: clang's own link and each offlink given.

bench.py's medians of 5-9 runs move by ±50 ms on a shared 2-CPU machine, the size of what is
measured for clang's default objects; this runs one case (cold, one CU changed or nothing
changed) N times for each link in turn, on bench.py's 30-CU program (clang-22 objects by
default), and prints the median and mean wall and CPU seconds of each.

  cold      offlink with an empty cache, every time
  one       cu0.o replaced by another version (compiled from cu0.c, as a build would) first
  nothing   the same objects again

Usage: python benchmarks/clang/interleaved.py [--release 19|22] MODE N NAME=COMMAND...
  e.g. interleaved.py cold 15 "before=env PYTHONPATH=/tmp/old python -m offlink" \\
                              "after=env PYTHONPATH=$PWD python -m offlink"
"""

from __future__ import annotations

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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402


def timed(argv, cwd, env) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("cold", "one", "nothing"))
    ap.add_argument("n", type=int)
    ap.add_argument("offlinks", nargs="+", help="NAME=COMMAND")
    ap.add_argument("--release", type=int, default=22, choices=(19, 22))
    a = ap.parse_args()
    mode, n, release = a.mode, a.n, a.release
    offlinks = dict(o.split("=", 1) for o in a.offlinks)
    clang = f"clang-{release}"
    lib = f"/usr/lib/llvm-{release}/lib"
    flags = ["-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu", f"-L{lib}",
             "-L/usr/lib/llvm-19/lib"]
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed offlink: from bytecode
    with tempfile.TemporaryDirectory(prefix="offlink-interleaved-") as tmp:
        d = Path(tmp)
        sources = bench.write_program(d, 30)
        cflags = ["-O2", "-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu"]
        for s in sources:
            subprocess.run([clang, *cflags, "-c", s, "-o", s[:-2] + ".o"], cwd=d, check=True)
        versions = []  # cu0.o's other versions, each compiled from a cu0.c
        for i in range(n if mode == "one" else 0):
            v = d / f"v{i}"
            v.mkdir()
            (v / "cu0.c").write_text(bench.cu_source(0, i + 1))
            subprocess.run([clang, *cflags, "-c", "cu0.c", "-o", "cu0.o"], cwd=v, check=True)
            versions.append(v / "cu0.o")
        objs = ["main.o", *(f"cu{k}.o" for k in range(30))]
        links = {"clang own": [clang, *flags, *objs, "-lm", "-o", "prog.clang"]}
        for name, command in offlinks.items():
            links[name] = [*shlex.split(command), "link", clang, *flags, *objs, "-lm", "-o",
                           f"prog.{name}"]
            subprocess.run(links[name], cwd=d, check=True, capture_output=True,
                           env=dict(env, OFFLINK_CACHE_DIR=str(d / f"cache-{name}")))
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in links}
        for i in range(n):
            if mode == "one":
                shutil.copy(versions[i], d / "cu0.o")
            for name, argv in links.items():
                cache = d / (f"cold-{name}" if mode == "cold" else f"cache-{name}")
                if mode == "cold":
                    shutil.rmtree(cache, ignore_errors=True)
                times[name].append(timed(argv, d, dict(env, OFFLINK_CACHE_DIR=str(cache))))
    print(f"{clang}, 30 CUs, x86_64, {mode}: {n} runs each, round robin; "
          f"{os.cpu_count()} CPUs")
    print("| link | wall median | wall mean | CPU median | CPU mean |")
    print("|---|---:|---:|---:|---:|")
    for name, v in times.items():
        w, c = [x for x, _ in v], [y for _, y in v]
        print(f"| {name} | {statistics.median(w):.3f} | {statistics.mean(w):.3f} | "
              f"{statistics.median(c):.3f} | {statistics.mean(c):.3f} |")


if __name__ == "__main__":
    main()
