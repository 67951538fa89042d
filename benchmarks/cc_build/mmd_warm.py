"""Lua 5.4.6 rebuilt with a warm cache, compiled with the handwritten-makefile idiom `-MMD -MP`
(`make -j2`, CC="offlink cc gcc"), plainly and through each offlink tree.

    python benchmarks/cc_build/mmd_warm.py [--runs 3] [--lua DIR] [--shipped] SRC [SRC...]

Each SRC is an offlink source tree (an export: COMMON.md), run as `PYTHONPATH=SRC python -m
offlink`. Lua's CFLAGS are given without its -march=native and with -MMD -MP; with
`--shipped`, Lua's own CFLAGS as its makefile has them (-march=native, no depfiles), only
MYCFLAGS without readline (not installed here). Each offlink tree first fills its own cache
with one untimed build; then every run cleans each build folder (`make clean`) and builds
again, the variants interleaved. Figures are medians, CPU = user+sys of make and everything
under it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from lua import make_variants, report  # this folder's lua.py (sys.path[0])

ROOT = Path(__file__).resolve().parent.parent.parent
CFLAGS = ("CFLAGS=-Wall -O2 -std=c99 -DLUA_USE_LINUX -fno-stack-protector -fno-common "
          "-MMD -MP")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lua", default=str(ROOT / "tests" / "real_projects" / "lua"))
    ap.add_argument("--shipped", action="store_true", help="Lua's own CFLAGS (-march=native)")
    ap.add_argument("src", nargs="+")
    args = ap.parse_args()
    flags = "MYCFLAGS=-std=c99 -DLUA_USE_LINUX" if args.shipped else CFLAGS
    work = Path(tempfile.mkdtemp(prefix="lua-mmd-"))
    try:
        variants = make_variants(work, args.src, "warm")
        env = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
        env["OFFLINK_PROGRESS"] = "0"

        def build(n: int, cc: list[str]) -> tuple[float, float]:
            folder = work / str(n)
            subprocess.run(["make", "-s", "-C", folder, "clean"], check=True,
                           stdout=subprocess.DEVNULL)
            before = os.times()
            start = time.perf_counter()
            subprocess.run(["make", "-s", "-j2", "-C", folder, *cc, flags, "MYLIBS=-ldl"],
                           env={**env, "OFFLINK_CACHE_DIR": str(work / f"cache-{n}")},
                           check=True, stdout=subprocess.DEVNULL)
            after = os.times()
            return time.perf_counter() - start, (after.children_user - before.children_user
                                                 + after.children_system
                                                 - before.children_system)

        for n, cc in enumerate(variants.values()):
            shutil.copytree(args.lua, work / str(n))
            if cc:
                build(n, cc)  # fills this tree's cache
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
        load = os.getloadavg()[0]
        for _ in range(args.runs):
            for n, (name, cc) in enumerate(variants.items()):
                times[name].append(build(n, cc))
        report(times, args.runs, load)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
