"""What Lua's cold build through `offlink cc` would cost if each CU were compiled once, its
host object serving as its host-target code too (the decision issue 11 leaves open: that
object would have to be -fPIC, which Lua's makefile does not ask for). Nothing here changes
offlink; the build is measured in the parts that one compile would keep:

  plain        `make -j2 o` (the objects), then `make -j2` (liblua.a, the lua link)
  plain -fPIC  the same with -fPIC added to Lua's flags (the host compile's cost of PIC)
  cc, no target compile  `make -j2 o` through `offlink cc gcc` with an empty cache and
               OFFLINK_CC_TARGET_COMPILE=0: host compile, target preprocessing, Python,
               objcopy; then `make -j2` with every CU's target object in the cache (copied
               from a normal cold build's just before): the image link and the host link, no
               target compile
  cold         the normal cold build (for reference: host and target compile of each CU)

    python benchmarks/cc_build/lua_one_compile.py [--runs 3] SRC

SRC: an offlink source tree (an export, run as `PYTHONPATH=SRC python -m offlink`). CPU =
user+sys of make and everything under it; medians of the runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
FLAGS = "-std=c99 -DLUA_USE_LINUX"


def cpu_of(argv: list[str], env: dict[str, str]) -> float:
    before = os.times()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    after = os.times()
    return (after.children_user - before.children_user) + \
        (after.children_system - before.children_system)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lua", default=str(ROOT / "tests" / "real_projects" / "lua"))
    ap.add_argument("src")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lua-one-"))
    try:
        wrapper = work / "offlink"
        wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{args.src}" exec "{sys.executable}" -m '
                           'offlink "$@"\n')
        wrapper.chmod(0o755)
        base = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
        base["OFFLINK_PROGRESS"] = "0"
        tree = work / "lua"
        shutil.copytree(args.lua, tree)
        make = ["make", "-s", "-j2", "-C", str(tree), "MYLIBS=-ldl"]
        cc = f"CC={wrapper} cc gcc"
        rows: dict[str, list[float]] = {k: [] for k in (
            "plain", "plain -fPIC", "cc, no target compile: objects", "then the link, cache full",
            "cold")}
        for run in range(args.runs):
            def clean() -> None:
                subprocess.run(["make", "-s", "-C", str(tree), "clean"], check=True,
                               stdout=subprocess.DEVNULL)
            clean()
            rows["plain"].append(cpu_of([*make, f"MYCFLAGS={FLAGS}", "o"], base)
                                 + cpu_of([*make, f"MYCFLAGS={FLAGS}"], base))
            clean()
            rows["plain -fPIC"].append(cpu_of([*make, f"MYCFLAGS={FLAGS} -fPIC", "o"], base)
                                       + cpu_of([*make, f"MYCFLAGS={FLAGS} -fPIC"], base))
            clean()
            full = work / f"cache-{run}"
            rows["cold"].append(cpu_of([*make, cc, f"MYCFLAGS={FLAGS}"],
                                       dict(base, OFFLINK_CACHE_DIR=str(full))))
            clean()  # `full` now holds every CU's target object (and its fat object)
            empty = work / f"cache-{run}-objects"
            env = dict(base, OFFLINK_CACHE_DIR=str(empty))
            rows["cc, no target compile: objects"].append(
                cpu_of([*make, cc, f"MYCFLAGS={FLAGS}", "o"],
                       dict(env, OFFLINK_CC_TARGET_COMPILE="0")))
            # the same objects, linked with the target objects the cold build left
            shutil.copytree(full, empty, dirs_exist_ok=True)
            rows["then the link, cache full"].append(cpu_of([*make, cc, f"MYCFLAGS={FLAGS}"],
                                                            env))
        plain = statistics.median(rows["plain"])
        print(f"load average {os.getloadavg()[0]:.2f} at the end; medians of {args.runs} runs\n")
        print("| build | CPU (s) | / plain | runs |")
        print("|---|---:|---:|---|")
        for name, t in rows.items():
            m = statistics.median(t)
            print(f"| {name} | {m:.2f} | {m / plain:.2f}x | {', '.join(f'{x:.2f}' for x in t)} |")
        one = statistics.median(rows["cc, no target compile: objects"]) + \
            statistics.median(rows["then the link, cache full"])
        print(f"| one compile a CU (the two parts above) | {one:.2f} | {one / plain:.2f}x | |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
