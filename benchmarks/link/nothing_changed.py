"""The relink with nothing changed at N CUs (issue 11: goal <= plain + 150 ms), wall and CPU.

    python benchmarks/link/nothing_changed.py [--cus 1000] [--runs 5] [--offlink PATH]
                                              [--offlink-src DIR] [--before-src DIR]
                                              [--project DIR] [--out FILE]

The project comes from gen.py (N CUs with system headers, 2 offered functions each), its fat
objects built by `make -j<CPUs> objects` through `offlink cc` with the link's cache, as a build
system does: the first link after that build finds every target object there ("first link
after the build"; with OFFLINK_CC_TARGET_COMPILE=0 it would compile them all). Then the plain
host link and the relink with nothing changed run interleaved, --runs times each; wall and CPU
(user+sys of the process and its children) are medians. --before-src DIR also relinks with
an older offlink's source tree (run as `python -m offlink` with DIR first on PYTHONPATH),
interleaved with the others; --offlink-src DIR runs the measured offlink the same way (an
export of a revision: both sides then pay the same start-up, with no editable install's
import hook on either). The trees share the cache (entries are keyed by content: a format
one tree does not share is compiled anew by its warm-up link). --project DIR keeps the generated
project and its cache in DIR and reuses them when DIR holds a built one of the same size
(the objects' build takes minutes at 1000 CUs); the build time is then not reported.

Both offlink source trees are byte-compiled first (python -m compileall), as an installed
package is: with PYTHONDONTWRITEBYTECODE=1 in the environment every offlink process would
otherwise compile its modules from source, ~100 ms a process.
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
sys.path.insert(0, str(HERE))
import gen  # noqa: E402


def cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def timed(argv: list[str], cwd: Path, env: dict) -> tuple[float, float, str]:
    """Wall and CPU seconds (user+sys, children included) and the stderr of one command."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(argv[:6])} ...\n{err[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime, err


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cus", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--offlink", default=shutil.which("offlink") or
                    str(Path(sys.executable).parent / "offlink"))
    ap.add_argument("--offlink-src", default="",
                    help="run offlink from this source tree (python -m offlink, DIR first on "
                         "PYTHONPATH), as --before-src does, instead of --offlink")
    ap.add_argument("--before-src", default="")
    ap.add_argument("--project", default="")
    ap.add_argument("--out", default=str(HERE / "RESULTS-nothing-changed.md"))
    args = ap.parse_args()
    compile_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    trees = [HERE.parent.parent / "offlink", *([args.offlink_src] if args.offlink_src else []),
             *([args.before_src] if args.before_src else [])]
    for tree in trees:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree)], env=compile_env,
                       check=True, stdout=subprocess.DEVNULL)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="offlink-nc-") as tmp:
        root = Path(args.project) if args.project else Path(tmp) / "p"
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")}
        env.update(OFFLINK_PROGRESS="0", OFFLINK_CACHE_DIR=str(root / "cache"))
        built = (root / "shape").exists() and (root / "shape").read_text().split() == \
            [str(args.cus), "2"] and (root / "main.o").exists()
        build = None
        if not built:
            gen.generate(root, args.cus, 2)
            build = time.perf_counter()
            subprocess.run(["make", "-s", f"-j{cpus()}", "-C", root, f"OFFLINK={args.offlink}",
                            "objects"], env=env, check=True)
            build = time.perf_counter() - build
        libs = subprocess.run([args.offlink, "config", "--libs"], env=env, check=True,
                              capture_output=True, text=True).stdout.split()
        objs = [*(f"cu{i:04d}.o" for i in range(args.cus)), "main.o", *libs, "-lm"]
        words = ["link", "--timings", "gcc", *objs, "-o"]  # and the output
        link = [args.offlink, *words, "app"]
        lenv = env
        if args.offlink_src:
            lenv = {**env, "PYTHONPATH": args.offlink_src}
            link = [sys.executable, "-m", "offlink", *words, "app"]
        first = timed(link, root, lenv)
        stats = next((ln for ln in first[2].splitlines() if " CUs, " in ln), "")
        variants = {"plain host link (gcc)": (["gcc", *objs, "-o", "plain"], env),
                    "offlink relink, nothing changed": (link, lenv)}
        if args.before_src:
            benv = {**env, "PYTHONPATH": args.before_src}
            blink = [sys.executable, "-m", "offlink", *words, "app-before"]
            timed(blink, root, benv)  # warm its cache
            variants["before (--before-src), nothing changed"] = (blink, benv)
        res: dict[str, list[tuple[float, float]]] = {n: [] for n in variants}
        for _ in range(args.runs):
            for name, (argv, e) in variants.items():
                res[name].append(timed(argv, root, e)[:2])
    med = {n: (statistics.median(w for w, _ in r) * 1000, statistics.median(c for _, c in r)
               * 1000) for n, r in res.items()}
    pw, pc = med["plain host link (gcc)"]
    lines = [
        f"# Relink with nothing changed, {args.cus + 1} CUs", "",
        f"Command: `python benchmarks/link/nothing_changed.py --cus {args.cus} --runs "
        f"{args.runs}" + (" --offlink-src DIR" if args.offlink_src else "") +
        (" --before-src DIR" if args.before_src else "") +
        (" --project DIR" if args.project else "") + "`", "",
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {cpus()} CPUs, Python "
        f"{platform.python_version()}, load average {load:.2f} at the start. Medians of "
        f"{args.runs} interleaved runs.", "",
        (f"Objects built through `offlink cc` (make -j{cpus()}): {build:.1f} s wall. "
         if build is not None else "Objects of an earlier build (--project). ") +
        f"First link {'after that build' if build is not None else 'of this run'}: "
        f"{first[0] * 1000:.0f} ms wall, {first[1] * 1000:.0f} ms CPU "
        f"(`{stats.removeprefix('offlink: ')}`).", "",
        "| link | wall (ms) | - plain (ms) | CPU (ms) | - plain (ms) |",
        "|---|---:|---:|---:|---:|",
    ]
    for n, (w, c) in med.items():
        lines.append(f"| {n} | {w:.0f} | {w - pw:+.0f} | {c:.0f} | {c - pc:+.0f} |")
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
