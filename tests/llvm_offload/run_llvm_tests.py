"""Run LLVM's own offload tests (llvm-project offload/test) both ways: linked by clang
(clang-linker-wrapper) and by offlink, on libomptarget's x86_64 plugin.

    python tests/llvm_offload/run_llvm_tests.py DIR [NAME...] [--offlink PATH] [--json OUT]
        [--jobs N]

DIR holds the tests (offload/test of LLVM 19.1.7's sources, as tests/llvm_offload/fetch.sh
unpacks them, or a folder below it); NAMEs are paths below DIR, all C/C++ tests by default.
`--release 22` runs LLVM 22.1.8's tests (fetch.sh DEST 22) with clang-22 and libomptarget 22
(lit's host target there is x86_64-unknown-linux-gnu; omp.h is libomp-22-dev's, unpacked by
tests/llvm_offload/omp22.sh; libomp is 19's, the one libomp5 Debian has; FileCheck and not
are llvm-19-tools').
The tests are not part of offlink's repository; this script is. Each test's `// RUN:` lines
are run as lit would run them with offload/test/lit.cfg for the `x86_64-pc-linux-gnu`
target, with the lit substitutions these tests use; `%libomptarget-compile*` becomes a
compile step then a link, either clang's or `offlink link clang-19 ...`. REQUIRES /
UNSUPPORTED / XFAIL lines are read against the features lit.cfg gives that target with
Debian's libomptarget. A test matches when both links give the same result (pass or fail)
and passes when its RUN lines (FileCheck included) succeed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

TRIPLE = "x86_64-pc-linux-gnu"
CLANG, CLANGXX = "clang-19", "clang++-19"
LLVM_BIN = "/usr/lib/llvm-19/bin"
LLVM_LIB = "/usr/lib/llvm-19/lib"
OPENMP_FLAGS = f"-fopenmp -fopenmp-targets={TRIPLE}"
# lit.cfg's features for a host target: its triple, `host`, `unified_shared_memory` (assumed
# for every target but old GPUs), `ompt` (Debian's libomptarget exports
# ompt_libomptarget_connect) and the compiler's (OpenMPTesting.cmake: clang, clang-19,
# clang-19.1). Not here: gpu and the GPU triples, `flang` (no Fortran
# compiler), `libc` (no GPU libc), `libomptarget-debug` (Debian builds it without
# LIBOMPTARGET_DEBUG output).
FEATURES = frozenset({TRIPLE, "host", "unified_shared_memory", "ompt", "clang", "clang-19",
                      "clang-19.1"})
# Targets lit.cfg knows but this machine lacks: lit makes their substitutions `echo
# ignored-command`; `true` here (an echo piped to a command that does not read can die of
# SIGPIPE, which pipefail turns into a failure now and then).
# The other host triples and the -LTO configurations are other lit targets too.
OTHER_TARGETS = (r"(?:nvptx64-nvidia-cuda(?:-JIT)?(?:-LTO)?|amdgcn-amd-amdhsa(?:-JIT)?(?:-LTO)?"
                 r"|aarch64-unknown-linux-gnu(?:-LTO)?|s390x-ibm-linux-gnu(?:-LTO)?"
                 r"|powerpc64(?:le)?-ibm-linux-gnu(?:-LTO)?"
                 rf"|{TRIPLE}-(?:JIT-)?LTO)")
TIMEOUT_S = 120
EXTRA_FLAGS = ""  # more of lit's %flags for a release (configure)
DEVICERTL = True  # lit.cfg 19 links libomptarget.devicertl.a into every test, 22 not for hosts
TOOLS_BIN = LLVM_BIN  # FileCheck, not


def configure(release: int, omp_include: str = "") -> None:
    """Set this module's release-dependent values (19 is the default) for LLVM `release`."""
    global TRIPLE, CLANG, CLANGXX, LLVM_LIB, OPENMP_FLAGS, FEATURES, OTHER_TARGETS
    global EXTRA_FLAGS, DEVICERTL, LLVM_BIN
    if release == 19:
        return
    if release != 22:
        raise SystemExit(f"run_llvm_tests.py: LLVM 19 and 22 are known, not {release}")
    TRIPLE = "x86_64-unknown-linux-gnu"  # lit.cfg 22's host_targets
    CLANG, CLANGXX = "clang-22", "clang++-22"
    LLVM_BIN, LLVM_LIB = "/usr/lib/llvm-22/bin", "/usr/lib/llvm-22/lib"
    OPENMP_FLAGS = f"-fopenmp -fopenmp-targets={TRIPLE}"
    # no `ompt`: libomptarget 22 exports no ompt_libomptarget_connect (lit's
    # has_libomptarget_ompt would be off)
    FEATURES = frozenset({TRIPLE, "host", "unified_shared_memory", "clang", "clang-22",
                          "clang-22.1"})
    OTHER_TARGETS = (r"(?:nvptx64-nvidia-cuda(?:-JIT)?(?:-LTO)?"
                     r"|amdgcn-amd-amdhsa(?:-JIT)?(?:-LTO)?|spirv64-intel(?:-LTO)?"
                     r"|aarch64-unknown-linux-gnu(?:-LTO)?|s390x-ibm-linux-gnu(?:-LTO)?"
                     r"|powerpc64(?:le)?-ibm-linux-gnu(?:-LTO)?|x86_64-pc-linux-gnu(?:-LTO)?"
                     rf"|{TRIPLE}-(?:JIT-)?LTO)")
    omp = omp_include or os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), ".ci", "libomp-22-dev", "include")
    EXTRA_FLAGS = f"-I {shlex.quote(omp)} -L /usr/lib/llvm-19/lib"
    DEVICERTL = False


def directives(text: str, keyword: str) -> list[str]:
    """The comma-separated items of every `KEYWORD:` in a `//` line (lit's REQUIRES and kin:
    lit finds the keyword anywhere in a line, as in LLVM 22's sanitizer/use_after_free_3.c's
    "// threshold. REQUIRES: large_allocation_memory_pool")."""
    items = []
    for m in re.finditer(rf"^\s*//.*?\b{keyword}:(.*)$", text, re.M):
        items += [i.strip() for i in m.group(1).split(",") if i.strip()]
    return items


def holds(expression: str, features: frozenset[str] | None = None) -> bool:
    """A lit boolean expression (`a && !(b || c)`) over the features; `*` matches all."""
    features = FEATURES if features is None else features
    if expression == "*":
        return True
    tokens = re.findall(r"&&|\|\||!|\(|\)|[^\s&|!()]+", expression)
    words = {"&&": " and ", "||": " or ", "!": " not ", "(": "(", ")": ")"}
    python = "".join(words.get(t, str(t in features)) for t in tokens)
    return bool(eval(python, {"__builtins__": {}}))  # only True/False/and/or/not here


def why_not_run(text: str) -> str | None:
    """Why lit would not run the test for x86_64-pc-linux-gnu here (None: it would)."""
    for item in directives(text, "REQUIRES"):
        if not holds(item):
            return f"REQUIRES: {item}"
    for item in directives(text, "UNSUPPORTED"):
        if holds(item):
            return f"UNSUPPORTED: {item}"
    for item in directives(text, "XFAIL"):
        if holds(item):
            return f"XFAIL: {item}"
    return None


def driver_script(mode: str, offlink: str, work: str) -> str:
    """A small compile-and-link driver standing for `%clang-generic`: with -c it compiles;
    otherwise it compiles each source alone, then links the objects by clang or offlink."""
    path = os.path.join(work, f"cc-{mode}")
    link = (f'"{offlink}" link "$cc"' if mode == "offlink" else '"$cc"')
    with open(path, "w") as f:
        f.write(f"""#!/bin/bash
set -e
cc="$1"; shift
args=(); flags=(); srcs=(); out=a.out; compile_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out="$2"; shift 2; continue;;
    -c) compile_only=1;;
    *.c|*.cpp|*.cc) srcs+=("$1"); args+=("cu/$(basename "$1").o"); shift; continue;;
    -l|-L|-rpath) args+=("$1" "$2"); shift 2; continue;;
    -I) flags+=("$1" "$2"); shift 2; continue;;
    *.o|*.a|*.so|-l*|-L*|-Wl,*) args+=("$1"); shift; continue;;
  esac
  args+=("$1"); flags+=("$1"); shift
done
if [ $compile_only = 1 ]; then exec "$cc" "${{flags[@]}}" -c "${{srcs[@]}}" -o "$out"; fi
mkdir -p cu  # not beside %t: extern.c's own %t.o would be overwritten
for s in "${{srcs[@]}}"; do "$cc" "${{flags[@]}}" -c "$s" -o "cu/$(basename "$s").o"; done
exec {link} "${{args[@]}}" -o "$out"
""")
    os.chmod(path, 0o755)
    return path


def run_lines(text: str) -> list[str]:
    lines, cur = [], ""
    for m in re.finditer(r"^\s*//\s*RUN:(.*)$", text, re.M):
        part = m.group(1).strip()
        if part.endswith("\\"):
            cur += part[:-1] + " "
            continue
        lines.append(cur + part)
        cur = ""
    return lines


def lit_flags(src: str) -> str:
    """lit.cfg's %flags for a host target on Linux, Debian's folders standing for the build's:
    the test root's includes, the libraries' folder (searched and in the rpath), -nogpulib."""
    root = os.path.dirname(os.path.dirname(src))
    while os.path.basename(root) != "test" and os.path.dirname(root) != root:
        root = os.path.dirname(root)
    return (f"-I {shlex.quote(root)} -L {LLVM_LIB} {EXTRA_FLAGS} -nogpulib "
            f"-Wl,-rpath,{LLVM_LIB}").replace("  ", " ")


def substitute(line: str, src: str, tmp: str, cc: str) -> str:
    flags = lit_flags(src)
    devicertl = f"{LLVM_LIB}/libomptarget.devicertl.a" if DEVICERTL else ""

    def compile_(lang: str, opt: str, extra: str = "") -> str:
        compiler = CLANGXX if lang == "xx" else CLANG
        return (f"{cc} {compiler} {OPENMP_FLAGS} {extra} {flags} {opt} {shlex.quote(src)} "
                f"-o {tmp} {devicertl}")

    line = re.sub(rf"%[\w-]+-{OTHER_TARGETS}(?![\w-])", "true ignored-command", line)
    line = re.sub(rf"(%[\w-]+)-{TRIPLE}(?![\w-])", r"\1-generic", line)  # this target's own
    line = line.replace("%libomptarget-compilexxx-generic-force-usm",
                        compile_("xx", "", "-fopenmp-force-usm"))
    for lang in ("xx", ""):
        for opt, flag in (("opt", "-O3"), ("", "")):
            name = f"%libomptarget-compile{opt}{lang}"
            line = line.replace(f"{name}-run-and-check-generic",
                                f"{compile_(lang, flag)} && {tmp} | "
                                f"{TOOLS_BIN}/FileCheck {shlex.quote(src)}")
            line = line.replace(f"{name}-and-run-generic", f"{compile_(lang, flag)} && {tmp}")
            line = line.replace(f"{name}-generic", compile_(lang, flag))
    line = line.replace("%libomptarget-run-fail-generic", f"{TOOLS_BIN}/not --crash {tmp}")
    line = line.replace("%libomptarget-run-generic", tmp)
    line = line.replace("%fcheck-plain-generic", f"{TOOLS_BIN}/FileCheck")
    line = line.replace("%fcheck-generic", f"{TOOLS_BIN}/FileCheck {shlex.quote(src)}")
    line = line.replace("%clangxx-generic", f"{cc} {CLANGXX} {OPENMP_FLAGS} {flags}")
    line = line.replace("%clang-generic", f"{cc} {CLANG} {OPENMP_FLAGS} {flags}")
    # lit's plain %clang/%clangxx: the compiler alone, no offloading, so no link to compare
    line = re.sub(r"%clangxx\b", CLANGXX, line)
    line = re.sub(r"%clang\b", CLANG, line)
    line = line.replace("%openmp_flags", "-fopenmp").replace("%flags", flags)
    line = line.replace("%not", f"{TOOLS_BIN}/not")
    line = re.sub(r"(?<![\w/])not ", f"{TOOLS_BIN}/not ", line)
    line = line.replace("%T", shlex.quote(os.path.dirname(tmp)))
    line = line.replace("%t", tmp).replace("%s", shlex.quote(src))
    line = line.replace("%S", shlex.quote(os.path.dirname(src)))
    return line


def run_test(path: str, mode: str, offlink: str, work: str) -> tuple[str, str]:
    """('pass' | 'fail' | 'excluded', detail); `work` is this run's own empty folder."""
    text = open(path, encoding="utf-8", errors="replace").read()
    why = why_not_run(text)
    if why:
        return "excluded", why
    lines = run_lines(text)
    if not lines:
        return "excluded", "no RUN line"
    left = [ln for ln in lines if "%" in substitute(ln, path, "T", "CC").replace("%%", "")]
    if left:
        return "excluded", f"a lit substitution this script lacks: {left[0][:80]}"
    cc = driver_script(mode, offlink, work)
    tmp = os.path.join(work, os.path.basename(path))
    env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB, "OMP_NUM_THREADS": "2"}
    env.pop("LIBOMPTARGET_INFO", None)
    for line in lines:
        cmd = substitute(line, path, tmp, cc)
        try:
            proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return "fail", f"timeout: {cmd[:120]}"
        if proc.returncode != 0:
            return "fail", f"{line[:60]}: " + (proc.stderr or proc.stdout).strip()[-300:]
    return "pass", ""


def find_tests(root: str) -> list[str]:
    """Every C and C++ test below root (lit's suffixes less .f90; Inputs is not tests)."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "Inputs")
        rel = os.path.relpath(folder, root)
        found += [os.path.normpath(os.path.join(rel, f)) for f in files
                  if f.endswith((".c", ".cpp", ".cc"))]
    return sorted(found)


def compare(root: str, name: str, offlink: str) -> dict[str, tuple[str, str]]:
    """One test, built and run with clang's link, then (unless excluded) with offlink's."""
    path = os.path.abspath(os.path.join(root, name))
    result = {}
    for mode in ("clang", "offlink"):
        with tempfile.TemporaryDirectory(prefix=f"llvm-offload-{mode}-") as work:
            result[mode] = run_test(path, mode, offlink, work)
        if result[mode][0] == "excluded":
            return {"clang": result[mode], "offlink": result[mode]}
    return result


def run_suite(root: str, names: list[str], offlink: str, jobs: int,
              report=None) -> dict[str, dict[str, tuple[str, str]]]:
    """compare() over names, `jobs` at a time; report(name, result) as each ends."""
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(compare, root, n, offlink): n for n in names}
        for future in concurrent.futures.as_completed(futures):
            results[futures[future]] = future.result()
            if report:
                report(futures[future], results[futures[future]])
    return dict(sorted(results.items()))


def line(name: str, r: dict[str, tuple[str, str]]) -> str:
    return (f"{name:50} clang {r['clang'][0]:8} offlink {r['offlink'][0]:8} "
            f"{(r['offlink'][1] or r['clang'][1])[:100]!r}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--offlink", default=shutil.which("offlink") or "offlink")
    ap.add_argument("--json")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--lto", action="store_true",
                    help="compile and link with -foffload-lto too (the device code as bitcode, "
                         "device LTO at the link); the tests are still this target's")
    ap.add_argument("--release", type=int, default=19, help="LLVM 19 (default) or 22")
    a = ap.parse_args()
    configure(a.release)
    if a.lto:
        global OPENMP_FLAGS
        OPENMP_FLAGS += " -foffload-lto"
    names = a.names or find_tests(a.dir)
    offlink = shutil.which(a.offlink) or a.offlink
    results = run_suite(a.dir, names, os.path.abspath(offlink), a.jobs,
                        lambda n, r: print(line(n, r), flush=True))
    both = sum(r["clang"][0] == r["offlink"][0] == "pass" for r in results.values())
    differ = [n for n, r in results.items() if r["clang"][0] != r["offlink"][0]]
    print(f"{both} of {len(results)} pass both ways; differ: {', '.join(differ) or 'none'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
