"""Link time of clang OpenMP offload programs: offlink vs clang's own link.

For a program of N CUs (each with FUNCS `declare target` functions with loops and math calls,
a `declare target` global and a target region calling them all), the objects are compiled
once; then each way of linking is timed (median of --repeat runs, round-robin):

  clang own              clang-19 -fopenmp -fopenmp-targets=T ... (clang-linker-wrapper)
  clang own, 1 CU changed  the same after cu0.c changed (its object recompiled, not timed)
  offlink cold           offlink link with an empty compile cache
  offlink 1 CU changed   after cu0.c changed; the other CUs' device objects from the cache
  offlink nothing changed  the same objects again
  host only              clang-19 -fopenmp ... (no offload target: the floor)

Modes: `elf` (clang's default for x86_64: each CU's device code is an object, clang's link
only links them) and `lto` (-foffload-lto: bitcode, which clang's link compiles as one
whole-program LTO on every link and offlink compiles per CU). Times are wall seconds and, in
parentheses, the CPU seconds of all processes of the link. Both programs' output is compared.
offlink runs with its bytecode written (PYTHONDONTWRITEBYTECODE is dropped), as an installed
offlink does.

With `--arch sm_80` the programs are built for an NVIDIA GPU (`--offload-arch=sm_80`; CUDA's
ptxas and nvlink from --cuda-path, default /usr/local/cuda): `elf` is then clang's default
(each CU's device code a relocatable cubin), `lto` its bitcode. No GPU is needed to link;
the programs are not run (their images are compared instead: offlink's and clang's).

Several offlinks can be compared in one run, interleaved (`--offlink NAME=COMMAND`, given
more than once: e.g. two exports of offlink run as `env PYTHONPATH=DIR python -m offlink`);
their rows are then named `offlink[NAME] ...`.

With `--arch gfx90a` the programs are built for an AMD GPU (`--offload-arch=gfx90a`, ROCm's
device libraries from rocm-device-libs, ld.lld-19): each CU's device code is bitcode in either
mode, which clang's link compiles as one whole-program LTO on every link and offlink per CU.
No AMD GPU is needed: the programs run their host fallback, and their output is compared.

With `--release 22` the objects are clang-22's (56-byte entries in llvm_offload_entries) and
every link names `-L/usr/lib/llvm-22/lib -L/usr/lib/llvm-19/lib` (libomptarget 22, libomp 19).
With a GPU `--arch`, clang-22 needs LLVM 22's device runtime (`--device-runtime DIR`, default
.ci/llvm-22-devrt: tests/device_runtime/build.sh): the sm_80 compiles name its bitcode
(`--libomptarget-nvptx-bc-path=DIR/lib/nvptx64-nvidia-cuda`), gfx90a compiles ask for code
object 5 (ROCm's device libraries here have no 6), the compiles take LLVM 22's omp.h
(.ci/libomp-22-dev), and every link names its folder
(`-Xoffload-linker -LDIR/lib/<triple>`); gfx90a links need lld-22.

Usage: python benchmarks/clang/bench.py [--cus 30,300] [--modes elf,lto] [--repeat 5]
       [--arch sm_80 [--cuda-path DIR] | --arch gfx90a] [--release 19|22]
       [--device-runtime DIR]
       [--offlink [NAME=]COMMAND ...]
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLANG = "clang-19"
TRIPLE = "x86_64-pc-linux-gnu"
OFFLOAD = ["-fopenmp", f"-fopenmp-targets={TRIPLE}"]
LLVM_LIB = "/usr/lib/llvm-19/lib"
LIB_DIRS: list[str] = []  # -L words every link names (--release 22)
COMPILE_ONLY: list[str] = []  # words of the compiles alone (--release 22 on a GPU)
FUNCS = 24
OFFLINK_ROWS = ("cold", "1 CU changed", "nothing changed")


def rows(names: list[str]) -> list[str]:
    """The table's rows for offlinks of these names ("" for a single unnamed one)."""
    return ["clang own", "clang own, 1 CU changed",
            *(f"offlink{f'[{n}]' if n else ''} {r}" for n in names for r in OFFLINK_ROWS),
            "host only"]


def cu_source(k: int, bump: int) -> str:
    fs = []
    for j in range(FUNCS):
        fs.append(f"""double f{k}_{j}(double x, int n) {{
  double s = {j}.0 + {bump};
  for (int i = 0; i < n; i++)
    s += sin(x * i + {j}) * exp(-x * {j % 5 + 1}) + sqrt(fabs(s) + {k % 7});
  return s / (n + 1);
}}
""")
    calls = " + ".join(f"f{k}_{j}(x, {j % 8 + 4})" for j in range(FUNCS))
    return f"""#include <math.h>
#pragma omp declare target
double g_{k} = {k}.5;
{''.join(fs)}#pragma omp end declare target

double work_{k}(double x) {{
  double r = 0.0;
#pragma omp target map(tofrom: r) firstprivate(x)
  r = g_{k} + {calls};
  return r;
}}
"""


def write_program(d: Path, n: int) -> list[str]:
    decls = "".join(f"double work_{k}(double);\n" for k in range(n))
    calls = "".join(f"  sum += work_{k}(0.{k % 9 + 1});\n" for k in range(n))
    (d / "main.c").write_text(f"#include <stdio.h>\n{decls}int main(void) {{\n"
                              f"  double sum = 0;\n{calls}  printf(\"%.6f\\n\", sum);\n"
                              f"  return 0;\n}}\n")
    for k in range(n):
        (d / f"cu{k}.c").write_text(cu_source(k, 0))
    return ["main.c", *(f"cu{k}.c" for k in range(n))]


def sh(argv, cwd, env=None) -> str:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"failed: {shlex.join(map(str, argv))}\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def timed(argv, cwd, env=None) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    sh(argv, cwd, env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def bench(n: int, mode: str, repeat: int, offlinks: dict[str, list[str]], work: Path,
          gpu: bool = False):
    d = work / f"{mode}-{n}"
    d.mkdir()
    cflags = ["-O2", *OFFLOAD, *COMPILE_ONLY, *(["-foffload-lto"] if mode == "lto" else [])]
    lflags = [*OFFLOAD, *(["-foffload-lto"] if mode == "lto" else []), *LIB_DIRS]
    sources = write_program(d, n)
    objs = []
    for src in sources:
        objs.append(src[:-2] + ".o")
    # compile in parallel: not timed
    procs = [subprocess.Popen([CLANG, *cflags, "-c", s, "-o", o], cwd=d)
             for s, o in zip(sources, objs)]
    if any(p.wait() for p in procs):
        sys.exit("compile failed")
    clang_link = [CLANG, *lflags, *objs, "-lm", "-o", "prog.clang"]
    host_link = [CLANG, "-fopenmp", *objs, "-lm", f"-L{LLVM_LIB}", *LIB_DIRS, "-lomptarget", "-o",
                 "prog.host"]
    env = dict(os.environ)
    links, warm = {}, {}
    for i, (name, offlink) in enumerate(offlinks.items()):
        links[name] = [*offlink, "link", CLANG, *lflags, *objs, "-lm", "-o", f"prog.offlink{i}"]
        warm[name] = dict(env, OFFLINK_CACHE_DIR=str(work / f"cache-warm-{mode}-{n}-{i}"))
        sh(links[name], d, warm[name])
    label = {name: f"offlink{f'[{name}]' if name else ''}" for name in offlinks}
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in rows(list(offlinks))}
    for i in range(repeat):
        times["host only"].append(timed(host_link, d))
        times["clang own"].append(timed(clang_link, d))
        for j, name in enumerate(offlinks):
            cold_dir = work / f"cache-cold-{mode}-{n}-{i}-{j}"
            cold = dict(env, OFFLINK_CACHE_DIR=str(cold_dir))
            times[f"{label[name]} cold"].append(timed(links[name], d, cold))
            shutil.rmtree(cold_dir, ignore_errors=True)
            times[f"{label[name]} nothing changed"].append(timed(links[name], d, warm[name]))
        (d / "cu0.c").write_text(cu_source(0, i + 1))
        sh([CLANG, *cflags, "-c", "cu0.c", "-o", "cu0.o"], d)
        times["clang own, 1 CU changed"].append(timed(clang_link, d))
        for name in offlinks:
            times[f"{label[name]} 1 CU changed"].append(timed(links[name], d, warm[name]))
    for i, name in enumerate(offlinks):
        if gpu:  # no GPU to run them on: the images must be the same
            sh([*offlinks[name], "extract", f"prog.offlink{i}", "--target",
                "openmp-nvptx64-nvidia-cuda", "--output", "image.offlink"], d)
            sh([CLANG, *lflags, *objs, "-lm", "-o", "prog.clang", "-Wl,--save-temps"], d)
            if mode == "elf" and (d / "image.offlink").read_bytes() != \
                    (d / "prog.clang.nvptx64.sm_80.img").read_bytes():
                sys.exit(f"{mode} {n} CUs: {label[name]}'s image is not clang's")
            continue
        run_env = dict(env, LD_LIBRARY_PATH=LLVM_LIB)
        out = sh([f"./prog.offlink{i}"], d, run_env)
        ref = sh(["./prog.clang"], d, run_env)
        if out != ref:
            sys.exit(f"{mode} {n} CUs: the programs disagree: {label[name]} {out!r}, "
                     f"clang {ref!r}")
    return {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v),
                min(w for w, _ in v), max(w for w, _ in v))
            for k, v in times.items()}


def parse_offlinks(words: list[str]) -> dict[str, list[str]]:
    """`[NAME=]COMMAND` words: name -> command ("" for a single unnamed one)."""
    out = {}
    for word in words:
        name, sep, command = word.partition("=")
        if not sep or " " in name or not name:
            name, command = "", word
        if name in out:
            sys.exit(f"--offlink {word!r}: name {name or '(none)'!r} given twice")
        out[name] = shlex.split(command)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cus", default="30,300")
    ap.add_argument("--modes", default="elf,lto")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--offlink", action="append", default=[],
                    help="[NAME=]COMMAND; more than once to compare offlinks in one run")
    ap.add_argument("--arch", default="",
                    help="an NVIDIA (sm_80) or AMD (gfx90a) GPU instead of x86_64")
    ap.add_argument("--cuda-path", default="/usr/local/cuda")
    ap.add_argument("--release", type=int, default=19, choices=(19, 22))
    ap.add_argument("--device-runtime", default=str(ROOT / ".ci" / "llvm-22-devrt"))
    args = ap.parse_args()
    if args.release == 22:
        global CLANG, LLVM_LIB
        CLANG, LLVM_LIB = "clang-22", "/usr/lib/llvm-22/lib"
        LIB_DIRS[:] = ["-L/usr/lib/llvm-22/lib", "-L/usr/lib/llvm-19/lib"]
    if args.arch.startswith("gfx"):
        OFFLOAD[:] = ["-fopenmp", f"--offload-arch={args.arch}",
                      "--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"]
    elif args.arch:
        OFFLOAD[:] = ["-fopenmp", f"--offload-arch={args.arch}",
                      f"--libomptarget-nvptx-bc-path={LLVM_LIB}",
                      f"--cuda-path={args.cuda_path}"]
    if args.release == 22 and args.arch:
        triple = "amdgcn-amd-amdhsa" if args.arch.startswith("gfx") else "nvptx64-nvidia-cuda"
        runtime = f"{args.device_runtime}/lib/{triple}"
        OFFLOAD[:] = [w for w in OFFLOAD if not w.startswith("--libomptarget-nvptx-bc-path=")]
        COMPILE_ONLY[:] = ["-Xarch_device", "-mcode-object-version=5"] if triple[0] == "a" \
            else [f"--libomptarget-nvptx-bc-path={runtime}"]
        # (ROCm's math wrappers include omp.h: LLVM 22's, tests/llvm_offload/omp22.sh)
        COMPILE_ONLY.append(f"-I{ROOT / '.ci' / 'libomp-22-dev' / 'include'}")
        LIB_DIRS[:] += ["-Xoffload-linker", f"-L{runtime}"]
    if not shutil.which(CLANG):
        sys.exit(f"needs {CLANG} (and libomp-19-dev; clang-22: liboffload-22-dev too)")
    # The default offlink is this tree's; a named one runs as given (PYTHONPATH is not set for
    # it: this tree's package would shadow the one it names).
    offlinks = parse_offlinks(args.offlink
                              or [f"env PYTHONPATH={ROOT} {sys.executable} -m offlink"])
    # An installed offlink runs from compiled bytecode (pip writes it). With
    # PYTHONDONTWRITEBYTECODE set and no __pycache__, every offlink process compiles its ~50
    # modules from source first (0.1-0.2 s a link): the untimed first link writes them.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    cols = [(m, int(c)) for c in args.cus.split(",") for m in args.modes.split(",")]
    results = {}
    with tempfile.TemporaryDirectory(prefix="offlink-bench-clang-") as tmp:
        for col in cols:  # each column as soon as it is measured (the 300s take long)
            results[col] = bench(col[1], col[0], args.repeat, offlinks, Path(tmp),
                                 args.arch.startswith("sm_"))
            print(f"{col[0]} {col[1]} CUs: " + "; ".join(
                f"{r} {w:.3f} [{lo:.3f}-{hi:.3f}] ({c:.3f})"
                for r, (w, c, lo, hi) in results[col].items()), flush=True)
    print(f"{CLANG}, {args.arch or TRIPLE}: median of {args.repeat} runs, seconds: wall "
          f"[its min-max] (CPU of all processes, median); "
          f"{os.cpu_count()} CPUs, {FUNCS} declare target functions per CU")
    print("| link | " + " | ".join(f"{m} {n} CUs" for m, n in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for r in rows(list(offlinks)):
        print(f"| {r} | " + " | ".join(
            "{:.3f} [{:.3f}-{:.3f}] ({:.3f})".format(*(results[c][r][i] for i in (0, 2, 3, 1)))
            for c in cols) + " |")


if __name__ == "__main__":
    main()
