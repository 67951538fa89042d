"""Run LLVM's own offload tests (llvm-project offload/test/offloading) both ways: linked by
clang (clang-linker-wrapper) and by offlink, on libomptarget's x86_64 plugin.

    python tests/llvm_offload/run_llvm_tests.py DIR [NAME...] [--offlink PATH] [--json OUT]

DIR holds the tests (a checkout's offload/test/offloading, or copies of some of its files).
The tests are not part of offlink's repository; this script is. Each test's `// RUN:` lines
are run as lit would run them for the `x86_64-pc-linux-gnu` target, with the few lit
substitutions these tests use; `%libomptarget-compile*` becomes a compile step then a link,
either clang's or `offlink link clang-19 ...`. A test matches when both links give the same
result (pass or fail) and passes when its RUN lines (FileCheck included) succeed.
"""

from __future__ import annotations

import argparse
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
# What keeps a test off this machine, from its REQUIRES/UNSUPPORTED lines.
GPU_ONLY = re.compile(r"^//\s*REQUIRES:.*\b(gpu|amdgpu|nvptx|amdgcn|nvidiagpu|amdgpu)\b", re.M)
NOT_X86 = re.compile(r"^//\s*UNSUPPORTED:.*\bx86_64-(pc|unknown)-linux-gnu\b(?!-)", re.M)


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
    *.c|*.cpp|*.cc) srcs+=("$1"); args+=("$(basename "$1").o"); shift; continue;;
    -l|-L|-rpath) args+=("$1" "$2"); shift 2; continue;;
    *.o|*.a|*.so|-l*|-L*) args+=("$1"); shift; continue;;
  esac
  args+=("$1"); flags+=("$1"); shift
done
if [ $compile_only = 1 ]; then exec "$cc" "${{flags[@]}}" -c "${{srcs[@]}}" -o "$out"; fi
for s in "${{srcs[@]}}"; do "$cc" "${{flags[@]}}" -c "$s" -o "$(basename "$s").o"; done
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


def substitute(line: str, src: str, tmp: str, cc: str) -> str:
    def compile_(lang: str, opt: str) -> str:
        compiler = CLANGXX if lang == "xx" else CLANG
        return f"{cc} {compiler} {OPENMP_FLAGS} {opt} {shlex.quote(src)} -o {tmp}"

    for lang in ("xx", ""):
        for opt, flag in (("opt", "-O3"), ("", "")):
            name = f"%libomptarget-compile{opt}{lang}"
            line = line.replace(f"{name}-run-and-check-generic",
                                f"{compile_(lang, flag)} && {tmp} | "
                                f"{LLVM_BIN}/FileCheck {shlex.quote(src)}")
            line = line.replace(f"{name}-and-run-generic", f"{compile_(lang, flag)} && {tmp}")
            line = line.replace(f"{name}-generic", compile_(lang, flag))
    line = line.replace("%libomptarget-run-fail-generic", f"{LLVM_BIN}/not --crash {tmp}")
    line = line.replace("%libomptarget-run-generic", tmp)
    line = line.replace("%fcheck-generic", f"{LLVM_BIN}/FileCheck {shlex.quote(src)}")
    line = line.replace("%clangxx-generic", f"{cc} {CLANGXX} {OPENMP_FLAGS}")
    line = line.replace("%clang-generic", f"{cc} {CLANG} {OPENMP_FLAGS}")
    line = line.replace("%not", f"{LLVM_BIN}/not")
    line = re.sub(r"(?<![\w/])not ", f"{LLVM_BIN}/not ", line)
    line = line.replace("%t", tmp).replace("%s", shlex.quote(src))
    line = line.replace("%S", shlex.quote(os.path.dirname(src)))
    return line


def run_test(path: str, mode: str, offlink: str, work: str) -> tuple[str, str]:
    """('pass' | 'fail' | 'excluded', detail)."""
    text = open(path, encoding="utf-8", errors="replace").read()
    if GPU_ONLY.search(text):
        return "excluded", "REQUIRES a GPU"
    if NOT_X86.search(text):
        return "excluded", "UNSUPPORTED on x86_64-pc-linux-gnu"
    lines = run_lines(text)
    if not lines:
        return "excluded", "no RUN line"
    left = [ln for ln in lines if "%" in substitute(ln, path, "T", "CC").replace("%%", "")]
    if left:
        return "excluded", f"a lit substitution this script lacks: {left[0][:80]}"
    cc = driver_script(mode, offlink, work)
    tmp = os.path.join(work, f"{os.path.basename(path)}.{mode}")
    env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB, "OMP_NUM_THREADS": "2"}
    env.pop("LIBOMPTARGET_INFO", None)
    for line in lines:
        cmd = substitute(line, path, tmp, cc)
        try:
            proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return "fail", f"timeout: {cmd[:120]}"
        if proc.returncode != 0:
            return "fail", (proc.stderr or proc.stdout).strip()[-300:]
    return "pass", ""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--offlink", default=shutil.which("offlink") or "offlink")
    ap.add_argument("--json")
    a = ap.parse_args()
    names = a.names or sorted(n for n in os.listdir(a.dir) if n.endswith((".c", ".cpp")))
    results = {}
    for name in names:
        path = os.path.abspath(os.path.join(a.dir, name))
        with tempfile.TemporaryDirectory(prefix="llvm-offload-") as work:
            clang = run_test(path, "clang", a.offlink, work)
            if clang[0] == "excluded":
                results[name] = {"clang": clang, "offlink": clang}
            else:
                results[name] = {"clang": clang, "offlink": run_test(path, "offlink",
                                                                     a.offlink, work)}
        r = results[name]
        print(f"{name:50} clang {r['clang'][0]:8} offlink {r['offlink'][0]:8} "
              f"{(r['offlink'][1] or r['clang'][1])[:100]!r}", flush=True)
    both = sum(r["clang"][0] == r["offlink"][0] == "pass" for r in results.values())
    differ = [n for n, r in results.items() if r["clang"][0] != r["offlink"][0]]
    print(f"{both} of {len(results)} pass both ways; differ: {', '.join(differ) or 'none'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
