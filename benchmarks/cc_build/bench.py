"""A real C project (zlib 1.3.1, CMake + Ninja, -j2) built plainly and through offlink
(`offlink cc` as the compiler launcher, `offlink link` as the linker launcher).

    python benchmarks/cc_build/bench.py [--runs 3] [--zlib tests/real_projects/zlib]
                                        [--offlink PATH | --src DIR] [--before-src DIR]
                                        [--out benchmarks/cc_build/RESULTS.md]

Each build folder is configured once (not timed); each run then cleans it (`ninja clean`) and
times `cmake --build . -j2`, with the wall time and the CPU time (user+sys) of the build and
every process under it. The variants run interleaved, one of each per run:

- plain: no offlink;
- cold: offlink with an empty cache (target compiles in `offlink cc`, the link finds them);
- cold, cc target compile off: OFFLINK_CC_TARGET_COMPILE=0 (every target compile at link time,
  as before);
- warm: offlink with the cache the cold build of this run left, in the same build folder (a
  rebuild after `ninja clean`);
- with --before-src DIR, "cold (before)" and "warm (before)": the same two with an older
  offlink's source tree (`python -m offlink` with DIR first on PYTHONPATH), in a folder of
  their own. --src DIR runs this side the same way (an export of this tree, as COMMON.md
  asks, so that neither side pays the editable install's import hook alone).

Both offlink source trees are byte-compiled first (python -m compileall), as an installed
package is: with PYTHONDONTWRITEBYTECODE=1 in the environment every `offlink cc` would
otherwise compile its modules from source (~100 ms a process).
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def timed(argv: list[str], cwd: Path, env: dict) -> tuple[float, float]:
    """Wall and CPU (user+sys of the command and all its children) seconds."""
    before = os.times()
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    wall = time.perf_counter() - start
    after = os.times()
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(argv)}\n{proc.stdout.decode()[-4000:]}")
    return wall, (after.children_user - before.children_user
                  + after.children_system - before.children_system)


def wrapper(path: Path, src: str) -> Path:
    """A script running `python -m offlink` from the source tree `src`."""
    path.write_text(f'#!/bin/sh\nPYTHONPATH="{src}" exec "{sys.executable}" -m offlink "$@"\n')
    path.chmod(0o755)
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--zlib", default=str(ROOT / "tests" / "real_projects" / "zlib"))
    ap.add_argument("--offlink", default=shutil.which("offlink") or
                    str(Path(sys.executable).parent / "offlink"))
    ap.add_argument("--before-src", default="")
    ap.add_argument("--src", default="", help="run offlink from this source tree instead")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    args = ap.parse_args()
    compile_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    trees = [args.src or ROOT / "offlink", *([args.before_src] if args.before_src else [])]
    for tree in trees:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree)], env=compile_env,
                       check=True, stdout=subprocess.DEVNULL)
    work = Path(tempfile.mkdtemp(prefix="cc-build-"))
    try:
        src = work / "src"
        shutil.copytree(args.zlib, src)
        base = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
        base["OFFLINK_PROGRESS"] = "0"
        offlink = wrapper(work / "offlink-src", args.src) if args.src else args.offlink
        launch = [f"-DCMAKE_C_COMPILER_LAUNCHER={offlink};cc",
                  f"-DCMAKE_C_LINKER_LAUNCHER={offlink};link"]
        variants = {"plain": ([], {}), "cold": (launch, {}),
                    "cold, cc target compile off": (launch, {"OFFLINK_CC_TARGET_COMPILE": "0"}),
                    "warm": (launch, {})}
        # "warm" rebuilds the "cold" build's folder (CMake puts the build folder on the
        # include path, so the preprocessed code and the cache keys depend on it).
        folder = {"plain": "b0", "cold": "b1", "cold, cc target compile off": "b2",
                  "warm": "b1"}
        if args.before_src:
            before = wrapper(work / "offlink-before", args.before_src)
            old = [f"-DCMAKE_C_COMPILER_LAUNCHER={before};cc",
                   f"-DCMAKE_C_LINKER_LAUNCHER={before};link"]
            variants.update({"cold (before)": (old, {}), "warm (before)": (old, {})})
            folder.update({"cold (before)": "b3", "warm (before)": "b3"})
        for name, (options, _) in variants.items():
            if not (work / folder[name]).exists():
                subprocess.run(["cmake", "-S", src, "-B", work / folder[name], "-G", "Ninja",
                                "-DCMAKE_BUILD_TYPE=Release", *options], env=base, check=True,
                               stdout=subprocess.DEVNULL)
        times: dict[str, list[tuple[float, float]]] = {n: [] for n in variants}
        load = os.getloadavg()[0]
        for run in range(args.runs):
            for name, (_, extra) in variants.items():
                # cold for "cold", then warm for "warm" (each build folder its own cache)
                cache = work / f"cache{run}-{folder[name]}"
                build = work / folder[name]
                subprocess.run(["ninja", "clean"], cwd=build, check=True,
                               stdout=subprocess.DEVNULL)
                env = {**base, **extra, "OFFLINK_CACHE_DIR": str(cache)}
                times[name].append(timed(["cmake", "--build", ".", "-j2"], build, env))
                print(name, run, times[name][-1], file=sys.stderr)
        med = {n: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t))
               for n, t in times.items()}
        pw, pc = med["plain"]
        lines = [
            "# A real C project's build through offlink cc (zlib 1.3.1, CMake + Ninja -j2)",
            "",
            f"Command: `python benchmarks/cc_build/bench.py --runs {args.runs}"
            + (" --src DIR" if args.src else "")
            + (" --before-src DIR" if args.before_src else "") + "`",
            "",
            f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}, load average {load:.2f} at the start. "
            f"Medians of {args.runs} interleaved runs; CPU = user+sys of the build and all "
            f"its processes.",
            "",
            "| build | wall (s) | / plain | CPU (s) | / plain | runs (wall/CPU) |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for n, (w, c) in med.items():
            each = ", ".join(f"{a:.2f}/{b:.2f}" for a, b in times[n])
            lines.append(f"| {n} | {w:.2f} | {w / pw:.2f}x | {c:.2f} | {c / pc:.2f}x | {each} |")
        text = "\n".join(lines) + "\n"
        print(text)
        Path(args.out).write_text(text)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
