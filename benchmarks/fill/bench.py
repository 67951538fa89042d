"""Fill + verify on a small and a ~200 MB binary: offlink's stages 7 and 8 against
`objcopy --update-section` writing the same table.

    python benchmarks/fill/bench.py [--mib 200] [--runs 7]
                                    [--offlink LABEL=CMD ...] [--out benchmarks/fill/RESULTS.md]

Two programs, linked through `offlink link` with the host target: `small` (main.c, lib.c)
and `big`, the same plus an object holding a MIB-MiB `.rodata` blob (`.incbin`), so the
binary differs in size and nothing else. Each link runs with --timings; the "fill" and
"verify" stages are read from its report (median of --runs links, interleaved). objcopy's row
is `objcopy --update-section .openmp_target=TABLE BIN OUT` with the table the link wrote.
Several --offlink commands (e.g. a checkout of main and this tree) are run side by side, so
their figures come from the same machine at the same time.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIB = """\
int lib_value = 5;
int lib_twice(int x) { return 2 * x; }
"""
MAIN = """\
#include <stdio.h>
#include <offlink.h>
int lib_twice(int);
int main(void) {
  int (*twice)(int) = offlink_translate(OFFLINK_TABLE, (const void *)lib_twice);
  printf("%d\\n", twice(21));
  return 0;
}
"""
BLOB = """\
__asm__(".section .rodata.blob,\\"a\\"\\n.globl blob\\nblob:\\n.incbin \\"blob.bin\\"\\n.previous");
"""


def sh(argv, cwd, env=None) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"failed: {shlex.join(map(str, argv))}\n{proc.stdout}{proc.stderr}")
    return proc


def stages(stderr: str) -> dict[str, float]:
    line = next(ln for ln in stderr.splitlines() if ln.startswith("offlink: timing (ms):"))
    words = line.split(":", 2)[2].split()
    return {words[i]: float(words[i + 1]) for i in range(0, len(words) - 1, 2)}


def build(d: Path, offlink: list[str], mib: int) -> None:
    (d / "lib.c").write_text(LIB)
    (d / "main.c").write_text(MAIN)
    (d / "blob.c").write_text(BLOB)
    with open(d / "blob.bin", "wb") as f:  # not sparse: the linker copies every byte
        chunk = bytes(range(256)) * 4096
        for _ in range(mib):
            f.write(chunk)
    cflags = sh([*offlink, "config", "--cflags"], d).stdout.split()
    for name in ("lib", "main"):
        sh([*offlink, "cc", "gcc", "-O2", *cflags, "-c", f"{name}.c", "-o", f"{name}.o"], d)
    sh(["gcc", "-c", "blob.c", "-o", "blob.o"], d)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=200)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--offlink", action="append", default=[],
                    help="LABEL=CMD (repeatable); default: this tree's python -m offlink")
    args = ap.parse_args()
    tools = [o.partition("=")[::2] for o in args.offlink] or \
        [("this tree", f"{sys.executable} -m offlink")]
    tools = [(label, shlex.split(cmd)) for label, cmd in tools]
    env = dict(os.environ, OFFLINK_TIMINGS="1", OFFLINK_NO_CACHE="1")
    # An installed offlink has its bytecode compiled: without it, every run compiles the
    # modules it imports again (about 0.1 s of CPU).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    results: dict[tuple[str, str], dict[str, list[float]]] = {}
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="offlink-bench-fill-") as tmp:
        d = Path(tmp)
        build(d, tools[0][1], args.mib)
        libs = sh([*tools[0][1], "config", "--libs"], d).stdout.split()
        programs = {"small": ["main.o", "lib.o"], "big": ["main.o", "lib.o", "blob.o"]}
        for _ in range(args.runs):  # interleaved, so load slows every row alike
            for prog, objs in programs.items():
                for label, offlink in tools:
                    out = f"{prog}.out"
                    proc = sh([*offlink, "link", "gcc", *objs, *libs, "-o", out], d, env)
                    st = stages(proc.stderr)
                    row = results.setdefault((prog, label), {"fill": [], "verify": []})
                    row["fill"].append(st["fill"])
                    row["verify"].append(st["verify"])
                    if sh([f"./{out}"], d).stdout != "42\n":
                        sys.exit(f"{prog} linked by {label} does not run right")
                sizes[prog] = os.path.getsize(d / out)
                sh(["objcopy", "-O", "binary", "--only-section=.openmp_target", out,
                    "table.bin"], d)
                t0 = time.perf_counter()
                sh(["objcopy", "--update-section", ".openmp_target=table.bin", out,
                    f"{prog}.copy"], d)
                ms = (time.perf_counter() - t0) * 1000
                results.setdefault((prog, "objcopy"), {"fill": [], "verify": []})["fill"] \
                    .append(ms)
                os.unlink(d / f"{prog}.copy")
    print(f"median of {args.runs} runs, milliseconds; {os.cpu_count()} CPUs; load average "
          f"{os.getloadavg()[0]:.1f} at the end")
    print("| what | fill | verify | fill + verify |")
    print("|---|---:|---:|---:|")
    for prog in programs:
        for label in [*(lb for lb, _ in tools), "objcopy"]:
            r = results[(prog, label)]
            f = statistics.median(r["fill"])
            v = statistics.median(r["verify"]) if r["verify"] else 0.0
            both = statistics.median(a + b for a, b in zip(r["fill"], r["verify"])) \
                if r["verify"] else f
            name = f"{prog} ({sizes[prog] / 2**20:.1f} MiB), {label}"
            if label == "objcopy":
                print(f"| {name}: objcopy --update-section | {f:.1f} | | {f:.1f} |")
            else:
                print(f"| {name} | {f:.1f} | {v:.1f} | {both:.1f} |")


if __name__ == "__main__":
    main()
