"""Wall and CPU time of warm `offlink cc` hits (served by warm.py from the recipe), checkouts
interleaved.

    python benchmarks/cc_build/warm_hit.py [--runs 30] TREE [TREE...]

Each TREE is a checkout with its own `make venv` (its .venv/bin/offlink runs it). A small C
source including <stdio.h> is compiled as `offlink cc gcc -O2 -MD -MF x.o.d -c x.c -o x.o` in
a scratch folder, once per tree to fill its own cache (OFFLINK_CC_TARGET_COMPILE=0), then
timed in turn, the order alternating run by run. Prints medians: wall, and CPU (user+sys of
the process and the preprocessor it runs).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("tree", nargs="+")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="warm-hit-"))
    (work / "x.c").write_text("#include <stdio.h>\nint f(int a) { return a * 2; }\n")
    (work / "tmp").mkdir()
    argv = ["cc", "gcc", "-O2", "-MD", "-MF", "x.o.d", "-c", "x.c", "-o", "x.o"]
    envs = {t: {**os.environ, "OFFLINK_CC_TARGET_COMPILE": "0", "OFFLINK_PROGRESS": "0",
                "OFFLINK_CACHE_DIR": str(work / f"cache-{i}"), "TMPDIR": str(work / "tmp")}
            for i, t in enumerate(args.tree)}
    walls: dict[str, list[float]] = {t: [] for t in args.tree}
    cpus: dict[str, list[float]] = {t: [] for t in args.tree}
    for t in args.tree:
        subprocess.run([f"{t}/.venv/bin/offlink", *argv], check=True, env=envs[t], cwd=work)
    for i in range(args.runs):
        for t in args.tree if i % 2 == 0 else args.tree[::-1]:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run([f"{t}/.venv/bin/offlink", *argv], check=True, env=envs[t], cwd=work)
            walls[t].append((time.perf_counter() - start) * 1000)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus[t].append((after.ru_utime - before.ru_utime + after.ru_stime
                            - before.ru_stime) * 1000)
    shutil.rmtree(work)
    for t in args.tree:
        print(f"{t}: wall {statistics.median(walls[t]):.1f} ms, "
              f"CPU {statistics.median(cpus[t]):.1f} ms (medians of {args.runs})")


if __name__ == "__main__":
    main()
