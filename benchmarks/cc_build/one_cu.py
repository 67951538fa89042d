"""CPU time of one warm (or, with --cold, cold) `offlink cc` of a zlib CU against the plain
compile.

    python benchmarks/cc_build/one_cu.py [--runs 15] [--cu adler32] [--offlink-h] [--cold]
                                         SRC [SRC...]

Each SRC is an offlink source tree (an export: COMMON.md), run as `PYTHONPATH=SRC python -m
offlink cc`. The CU is compiled with zlib's shared-library flags (as CMake gives them) in a
scratch copy of tests/real_projects/zlib, once per tree to fill its cache, then the plain
compile and each tree's are timed interleaved; the figure is user+sys of the process tree.
--offlink-h includes offlink.h (`-include`, as the samples' CUs do), which tests the target
macros: the object cache then keys the host's preprocessed code too. --cold empties each
tree's cache of its entries before every timed compile (the compiler's remembered identity
stays, as for every compile of a build but its first), so each is a cold compile: the target
preprocessing, the host compile, objcopy and the target compile; `SRC (no target compile)`
is the same with OFFLINK_CC_TARGET_COMPILE=0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def cpu(argv: list[str], cwd: Path, env: dict) -> float:
    before = os.times()
    subprocess.run(argv, cwd=cwd, env=env, check=True)
    after = os.times()
    return (after.children_user - before.children_user
            + after.children_system - before.children_system)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--cu", default="adler32")
    ap.add_argument("--offlink-h", action="store_true")
    ap.add_argument("--cold", action="store_true", help="time cold compiles")
    ap.add_argument("src", nargs="+")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="one-cu-"))
    try:
        z = work / "z"
        shutil.copytree(ROOT / "tests" / "real_projects" / "zlib", z)
        conf = (z / "zconf.h.cmakein").read_text()
        (z / "zconf.h").write_text("\n".join(line for line in conf.splitlines()
                                             if not line.startswith("#cmakedefine")))
        cu = args.cu
        cmd = ["gcc", "-DZLIB_DLL", "-D_LARGEFILE64_SOURCE=1", "-I.", "-O3", "-DNDEBUG",
               "-fPIC", "-MD", "-MT", f"{cu}.o", "-MF", f"{cu}.o.d", "-o", f"{cu}.o", "-c",
               f"{cu}.c"]
        if args.offlink_h:
            cmd[1:1] = ["-include", "offlink.h", "-I", str(ROOT / "offlink" / "runtime")]
        variants = {"plain": (cmd, dict(os.environ))}
        for i, src in enumerate(args.src):
            env = {**os.environ, "PYTHONPATH": src, "OFFLINK_CACHE_DIR": str(work / f"c{i}")}
            variants[src] = ([sys.executable, "-m", "offlink", "cc", *cmd], env)
            if args.cold:
                variants[f"{src} (no target compile)"] = (
                    variants[src][0], {**env, "OFFLINK_CACHE_DIR": str(work / f"n{i}"),
                                       "OFFLINK_CC_TARGET_COMPILE": "0"})
        for argv, env in variants.values():  # fill each cache
            subprocess.run(argv, cwd=z, env=env, check=True)
        total = dict.fromkeys(variants, 0.0)
        load = os.getloadavg()[0]
        for _ in range(args.runs):
            for name, (argv, env) in variants.items():
                if args.cold and "OFFLINK_CACHE_DIR" in env:
                    shutil.rmtree(Path(env["OFFLINK_CACHE_DIR"]) / "objects")
                total[name] += cpu(argv, z, env)
        what = f"{cu}.c with offlink.h" if args.offlink_h else f"{cu}.c"
        what += ", cold" if args.cold else ""
        print(f"{what}, {args.runs} runs, load {load:.2f} at the start: " + ", ".join(
            f"{name} {t / args.runs * 1000:.1f} ms" for name, t in total.items()))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
