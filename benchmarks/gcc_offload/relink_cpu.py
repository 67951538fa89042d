"""CPU seconds of a relink with nothing changed (every CU and the image cached), or with one CU
changed (--one-changed: cu0 recompiled with a new body before each round, as bench.py does),
for several offlink trees side by side: run in a folder holding the program's objects (`objs`
lists them, e.g. the cus300 folder bench.py builds) with OFFLINK_CACHE_DIR set (each tree gets
a cache of its own below it).

    python relink_cpu.py [--one-changed] [--rounds N] LABEL=PYTHONPATH ...
        (interleaved; median and minimum of N rounds, 7 by default)
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import change_one  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--one-changed", action="store_true")
ap.add_argument("--rounds", type=int, default=7)
ap.add_argument("trees", nargs="+", metavar="LABEL=PYTHONPATH")
args = ap.parse_args()
objs = open("objs").read().split()
trees = {k: os.path.abspath(t) for k, t in (a.split("=", 1) for a in args.trees)}
res: dict[str, list[float]] = {k: [] for k in trees}
# A cache per tree (below OFFLINK_CACHE_DIR): with one, the second tree of a round would find
# the changed CU compiled by the first.
cache = os.environ.get("OFFLINK_CACHE_DIR") or sys.exit("set OFFLINK_CACHE_DIR")
env = {k: dict(os.environ, PYTHONPATH=t, OFFLINK_CACHE_DIR=os.path.join(cache, f"tree{i}"))
       for i, (k, t) in enumerate(trees.items())}
env = {k: {n: v for n, v in e.items() if n != "PYTHONDONTWRITEBYTECODE"} for k, e in env.items()}
link = [sys.executable, "-m", "offlink", "link", "gcc", "-fopenmp", *objs, "-o", "p"]
for k in trees:  # fills each tree's cache and bytecode
    subprocess.run(link, env=env[k], check=True)
for i in range(args.rounds):
    if args.one_changed:  # a constant no earlier round used: not timed
        change_one(Path("."), 1000 + os.getpid() % 1000 * 100 + i)
    for k in trees:
        b = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(link, env=env[k], check=True)
        a = resource.getrusage(resource.RUSAGE_CHILDREN)
        res[k].append(a.ru_utime - b.ru_utime + a.ru_stime - b.ru_stime)
what = "one CU changed" if args.one_changed else "nothing changed"
for k, v in res.items():
    print(f"{k}: {what}, {len(objs)} objects: median CPU {statistics.median(v):.3f} s "
          f"(min {min(v):.3f}), load average {os.getloadavg()[0]:.1f}")
