"""Binary size of GCC offload programs: offlink's link (libgomp registration on, by default)
against GCC's own offload link of the same objects.

The samples gcc_openmp (C OpenMP, 3 CUs), gcc_openacc (C OpenACC), gcc_fortran (Fortran
OpenMP, module variables) and gcc_amdgcn (C OpenMP for amdgcn-amdhsa, -march=gfx906) are built
with `make`, which links each both ways; the program with a shared library is gcc_openmp's sources as libss.so (saxpy.c, stats.c) and an executable
(main.c), each linked both ways. Prints a Markdown table: bytes, and offlink / GCC.

Usage: python benchmarks/gcc_offload/sizes.py [--offlink CMD]
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OFFLOAD = ["-fopenmp", "-foffload=nvptx-none"]
ISA = "-foffload-options=-misa=sm_80"  # CUDA 12+'s ptxas refuses GCC 12's default (sm_30)


def sh(argv, cwd) -> None:
    subprocess.run([str(a) for a in argv], cwd=cwd, check=True, capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--offlink", default=str(ROOT / ".venv" / "bin" / "offlink"))
    args = ap.parse_args()
    offlink = shlex.split(args.offlink)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("gcc_openmp", "gcc_openacc", "gcc_fortran", "gcc_amdgcn"):
            s = Path(tmp) / name
            shutil.copytree(ROOT / "samples" / name, s)
            prog = s / "build" / name
            sh(["make", "-s", f"OFFLINK={shlex.join(offlink)}", "run", "gcc-run"], s)
            rows.append((name, prog.stat().st_size, prog.with_suffix(".gcc").stat().st_size))
        d = Path(tmp) / "dso"
        d.mkdir()
        src = ROOT / "samples" / "gcc_openmp"
        for n in ("main", "saxpy", "stats"):
            sh(["gcc", "-O2", *OFFLOAD, "-fPIC", "-c", src / f"{n}.c", "-o", f"{n}.o"], d)
        for way, link in (("offlink", [*offlink, "link", "gcc", *OFFLOAD]),
                          ("gcc", ["gcc", *OFFLOAD, ISA])):
            (d / way).mkdir()
            sh([*link, "-shared", "../saxpy.o", "../stats.o", "-o", "libss.so"], d / way)
            sh([*link, "../main.o", "-L.", "-lss", "-Wl,-rpath,$ORIGIN", "-o", "app"], d / way)
        for f in ("libss.so", "app"):
            rows.append((f"exe + DSO: {f}", (d / "offlink" / f).stat().st_size,
                         (d / "gcc" / f).stat().st_size))
    print("| program | offlink link | GCC's own link | offlink / GCC |")
    print("|---|---:|---:|---:|")
    for name, mine, theirs in rows:
        print(f"| {name} | {mine:,} | {theirs:,} | {mine / theirs:.3f} |")


if __name__ == "__main__":
    main()
