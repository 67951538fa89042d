"""CPU seconds of a relink with nothing changed (every CU and the image cached), for several
offlink trees side by side: run in a folder holding the program's objects (`objs` lists them,
e.g. the cus300 folder bench.py builds) with OFFLINK_CACHE_DIR set.

    python relink_cpu.py LABEL=PYTHONPATH ...   (7 rounds, interleaved; median and minimum)
"""

import os
import resource
import statistics
import subprocess
import sys

objs = open("objs").read().split()
trees = dict(a.split("=", 1) for a in sys.argv[1:])
res: dict[str, list[float]] = {k: [] for k in trees}
env = {k: dict(os.environ, PYTHONPATH=t) for k, t in trees.items()}
env = {k: {n: v for n, v in e.items() if n != "PYTHONDONTWRITEBYTECODE"} for k, e in env.items()}
link = [sys.executable, "-m", "offlink", "link", "gcc", "-fopenmp", *objs, "-o", "p"]
for k in trees:  # fills each tree's cache and bytecode
    subprocess.run(link, env=env[k], check=True)
for _ in range(7):
    for k in trees:
        b = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(link, env=env[k], check=True)
        a = resource.getrusage(resource.RUSAGE_CHILDREN)
        res[k].append(a.ru_utime - b.ru_utime + a.ru_stime - b.ru_stime)
for k, v in res.items():
    print(f"{k}: nothing changed, {len(objs)} objects: median CPU {statistics.median(v):.3f} s "
          f"(min {min(v):.3f})")
