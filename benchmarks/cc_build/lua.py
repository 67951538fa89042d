"""Lua 5.4.6 built with its own makefile (`make -j2`, CC="offlink cc gcc"), plainly and cold
through each offlink tree.

    python benchmarks/cc_build/lua.py [--runs 3] [--lua tests/real_projects/lua] SRC [SRC...]

Each SRC is an offlink source tree (an export: COMMON.md), run as `PYTHONPATH=SRC python -m
offlink`. Every run cleans each build folder (`make clean`) and builds with an empty cache,
the variants interleaved; the figures are medians, CPU = user+sys of make and everything under
it. Unlike zlib, no source is compiled twice (no static and shared objects), so each CU costs
a host compile and a target compile.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def make_variants(work: Path, srcs: list[str], label: str) -> dict[str, list[str]]:
    """The make words of each build: plain, then `CC=offlink cc gcc` through each tree."""
    variants: dict[str, list[str]] = {"plain": []}
    for i, src in enumerate(srcs):
        wrapper = work / f"offlink-{i}"
        wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{src}" exec "{sys.executable}" -m '
                           'offlink "$@"\n')
        wrapper.chmod(0o755)
        variants[f"{label} ({src})"] = [f"CC={wrapper} cc gcc"]
    return variants


def report(times: dict[str, list[tuple[float, float]]], runs: int, load: float) -> None:
    """Print the medians of each build's (wall, CPU) runs, and their ratios to plain's."""
    pw = statistics.median(w for w, _ in times["plain"])
    pc = statistics.median(c for _, c in times["plain"])
    print(f"load average {load:.2f} at the start; medians of {runs} interleaved runs\n")
    print("| build | wall (s) | / plain | CPU (s) | / plain | runs (wall/CPU) |")
    print("|---|---:|---:|---:|---:|---|")
    for name, t in times.items():
        w = statistics.median(x for x, _ in t)
        c = statistics.median(x for _, x in t)
        each = ", ".join(f"{a:.2f}/{b:.2f}" for a, b in t)
        print(f"| {name} | {w:.2f} | {w / pw:.2f}x | {c:.2f} | {c / pc:.2f}x | {each} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lua", default=str(ROOT / "tests" / "real_projects" / "lua"))
    ap.add_argument("src", nargs="+")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lua-build-"))
    try:
        variants = make_variants(work, args.src, "cold")
        for n in range(len(variants)):
            shutil.copytree(args.lua, work / str(n))
        env = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
        env["OFFLINK_PROGRESS"] = "0"
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
        load = os.getloadavg()[0]
        for run in range(args.runs):
            for n, (name, cc) in enumerate(variants.items()):
                folder = work / str(n)
                subprocess.run(["make", "-s", "-C", folder, "clean"], check=True,
                               stdout=subprocess.DEVNULL)
                before = os.times()
                start = time.perf_counter()
                subprocess.run(["make", "-s", "-j2", "-C", folder, *cc,
                                "MYCFLAGS=-std=c99 -DLUA_USE_LINUX", "MYLIBS=-ldl"],
                               env={**env, "OFFLINK_CACHE_DIR": str(work / f"cache-{n}-{run}")},
                               check=True, stdout=subprocess.DEVNULL)
                wall = time.perf_counter() - start
                after = os.times()
                times[name].append((wall, after.children_user - before.children_user
                                    + after.children_system - before.children_system))
        report(times, args.runs, load)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
