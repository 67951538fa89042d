"""Where a cold zlib build through offlink spends its CPU: offlink's own Python against the
tools it runs, per `offlink cc` and `offlink link`.

    python benchmarks/cc_build/breakdown.py [--runs 2] [--zlib tests/real_projects/zlib]
                                            SRC [SRC...]

Each SRC is an offlink source tree (an export: COMMON.md), run as `PYTHONPATH=SRC python -m
offlink` through a wrapper that times every call: `perf stat -i` gives the Python process's
own CPU (task-clock without its children), wait4 the whole tree's (user+sys). The tools'
share (the preprocessing, the host and target compiles, objcopy; the linker, the image link)
is the difference. zlib is configured once per tree (CMake, Ninja) and built cold (`ninja
clean`, an empty cache) with -j2, the trees interleaved. Needs perf.
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

WRAPPER = '''#!{python}
import os, sys, tempfile
fd, tmp = tempfile.mkstemp(prefix="perf-")
os.close(fd)
argv = ["perf", "stat", "-i", "-x,", "-e", "task-clock", "-o", tmp, sys.executable, "-m",
        "offlink", *sys.argv[1:]]
pid = os.posix_spawnp("perf", argv, {{**os.environ, "PYTHONPATH": {src!r}}})
_, status, usage = os.wait4(pid, 0)
with open(tmp) as f:
    own = next(float(line.split(",")[0]) for line in f if "task-clock" in line) / 1000
os.unlink(tmp)
with open({log!r}, "a") as f:
    f.write(f"{{sys.argv[1]}} {{own:.4f}} {{usage.ru_utime + usage.ru_stime:.4f}}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
'''


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--zlib", default=str(ROOT / "tests" / "real_projects" / "zlib"))
    ap.add_argument("src", nargs="+")
    args = ap.parse_args()
    if shutil.which("perf") is None:
        raise SystemExit("breakdown.py: needs perf (linux-perf)")
    work = Path(tempfile.mkdtemp(prefix="cc-breakdown-"))
    try:
        env = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
        env["OFFLINK_PROGRESS"] = "0"
        for i, src in enumerate(args.src):
            wrapper = work / f"offlink-{i}"
            wrapper.write_text(WRAPPER.format(python=sys.executable, src=src,
                                              log=str(work / f"log-{i}")))
            wrapper.chmod(0o755)
            shutil.copytree(args.zlib, work / f"src-{i}")
            subprocess.run(["cmake", "-S", work / f"src-{i}", "-B", work / f"b-{i}", "-G",
                            "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                            f"-DCMAKE_C_COMPILER_LAUNCHER={wrapper};cc",
                            f"-DCMAKE_C_LINKER_LAUNCHER={wrapper};link"], env=env, check=True,
                           stdout=subprocess.DEVNULL)
        print(f"load average {os.getloadavg()[0]:.2f} at the start; seconds of CPU, "
              "summed over the calls of one cold build\n")
        print("| tree | run | command | calls | offlink's Python | tools | all |")
        print("|---|---:|---|---:|---:|---:|---:|")
        for run in range(args.runs):
            for i, src in enumerate(args.src):
                log = work / f"log-{i}"
                log.unlink(missing_ok=True)
                build = work / f"b-{i}"
                subprocess.run(["ninja", "clean"], cwd=build, check=True,
                               stdout=subprocess.DEVNULL)
                cache = work / f"cache-{i}-{run}"
                subprocess.run(["ninja", "-j2"], cwd=build, check=True,
                               env={**env, "OFFLINK_CACHE_DIR": str(cache)},
                               stdout=subprocess.DEVNULL)
                sums: dict[str, list[float]] = {}
                for line in log.read_text().splitlines():
                    kind, own, total = line.split()
                    row = sums.setdefault(kind, [0, 0.0, 0.0])
                    row[0] += 1
                    row[1] += float(own)
                    row[2] += float(total)
                for kind, (calls, own, total) in sorted(sums.items()):
                    print(f"| {src} | {run} | {kind} | {calls:.0f} | {own:.2f} | "
                          f"{total - own:.2f} | {total:.2f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
