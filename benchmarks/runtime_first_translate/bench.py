"""First `offlink_translate` of a big table: the time of the module's setup (validate, load the
image, resolve every row), at 2.75k .. 44k rows, in an executable and in a shared library.

    python benchmarks/runtime_first_translate/bench.py [--reps N] [ROWS ...]

Each program is built as the link builds it (DESIGN.md, "The data flow"): one generated C
source (a quarter of its rows variables, the rest functions) compiled as the target image (a
self-bound shared object) and as the host module; the host link with a reserved
`.openmp_target` of the exact size; the table written into it after the link. The program
times its first offlink_translate with CLOCK_MONOTONIC, then checks that every row translates
into the image. Median of --reps runs (default 5), each a fresh process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from offlink.elf import ElfFile  # noqa: E402
from offlink.formats.table import (  # noqa: E402
    SECTION,
    ImageSpec,
    RowSpec,
    build_table,
    layout_size,
)
from offlink.runtime import build  # noqa: E402

HOST = "x86_64-pc-linux-gnu"
CC = os.environ.get("CC", "gcc")
DEFAULT_ROWS = [2750, 5500, 11000, 22000, 44000]

RESERVE = """\
\t.section .openmp_target,"a",@progbits
\t.balign 64
\t.weak __OPENMP_TARGET__
\t.hidden __OPENMP_TARGET__
\t.type __OPENMP_TARGET__, @object
\t.size __OPENMP_TARGET__, TABLE_SIZE
__OPENMP_TARGET__:
\t.zero TABLE_SIZE
\t.section .note.GNU-stack,"",@progbits
"""

MAIN = r"""
#define _GNU_SOURCE
#include <offlink.h>
#include <stdio.h>
#include <time.h>
extern const void *const row_addr[];
extern const unsigned row_count;
API int first_translate(void) {
  struct timespec a, b, ca, cb;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ca);
  clock_gettime(CLOCK_MONOTONIC, &a);
  const void *t = offlink_translate(OFFLINK_TABLE, row_addr[0]);
  clock_gettime(CLOCK_MONOTONIC, &b);
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cb);
  if (!offlink_target_name(OFFLINK_TABLE) || t == row_addr[0]) {
    fprintf(stderr, "not set up: %s\n", offlink_last_error());
    return 1;
  }
  unsigned moved = 0;
  for (unsigned i = 0; i < row_count; i++)
    moved += offlink_translate(OFFLINK_TABLE, row_addr[i]) != row_addr[i];
  printf("%.3f %.3f %u\n", (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6,
         (cb.tv_sec - ca.tv_sec) * 1e3 + (cb.tv_nsec - ca.tv_nsec) / 1e6, moved);
  return moved != row_count;
}
"""


def names(n: int) -> list[tuple[str, str]]:
    return [(f"{'var' if i % 4 == 0 else 'fn'}_{i:06d}_offered_symbol",
             "variable" if i % 4 == 0 else "function") for i in range(n)]


def source(rows: list[tuple[str, str]], shared: bool) -> str:
    out = ["#include <offlink.h>", "#if OFFLINK_IS_TARGET", "#define B 1", "#else",
           "#define B 0", "#endif"]
    for name, kind in rows:
        out.append(f"long {name}[2] = {{B, 2}};" if kind == "variable" else
                   f"long {name}(long x) {{ return x + B; }}")
    out.append("#if !OFFLINK_IS_TARGET")
    visible = '__attribute__((visibility("default")))' if shared else ""
    out.append(f"#define API {visible}")
    out.append("const void *const row_addr[] = {" +
               ",".join(f"(const void *){n}" for n, _ in rows) + "};")
    out.append(f"const unsigned row_count = {len(rows)};")
    out.append(MAIN)
    if not shared:
        out.append("int main(void) { return first_translate(); }")
    out.append("#endif")
    return "\n".join(out) + "\n"


def cc(*args: object) -> None:
    subprocess.run([CC, *map(str, args)], check=True)


def make(work: Path, n: int, shared: bool) -> Path:
    """The program for n rows; for a shared library, an executable that calls into it."""
    tag = f"{'so' if shared else 'exe'}-{n}"
    rows = names(n)
    src = work / f"{tag}.c"
    src.write_text(source(rows, shared))
    image = work / f"{tag}.image.so"
    cc("-O0", "-fPIC", "-shared", "-Wl,-Bsymbolic", f'-D__OFFLINK_TARGET__="{HOST}"',
       "-D__OFFLINK_TARGET_HOST__=1", *build.cflags(), src, "-o", image)
    data = image.read_bytes()
    size = layout_size([r for r, _ in rows], [HOST], [len(data)])
    reserve = work / f"{tag}.S"
    reserve.write_text(RESERVE)
    out = work / (f"lib{tag}.so" if shared else tag)
    mode = ["-fPIC", "-shared"] if shared else ["-fPIE", "-pie"]
    cc("-O0", *mode, *build.cflags(), f"-DTABLE_SIZE={size}", src, reserve, *build.libs(),
       "-o", out)
    elf = ElfFile.open(out)
    sec = elf.section(SECTION)
    assert sec is not None and sec.sh_size == size
    syms = {s.name: s for s in elf.symbols() if s.defined and s.is_global}
    specs = [RowSpec(r, syms[r].st_value - sec.sh_addr,
                     1 if kind == "function" else syms[r].st_size, kind) for r, kind in rows]
    table = build_table([ImageSpec(HOST, "shared-object", data)], specs)
    with open(out, "r+b") as f:
        f.seek(sec.sh_offset)
        f.write(table)
    if not shared:
        return out
    main = work / f"main-{tag}.c"
    main.write_text("int first_translate(void);\nint main(void) { return first_translate(); }\n")
    exe = work / f"main-{tag}"
    cc("-O0", main, out, f"-Wl,-rpath,{work}", "-o", exe)
    return exe


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("rows", nargs="*", type=int, default=DEFAULT_ROWS)
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFLINK_")}
    print(f"# {CC}; median of {args.reps} runs; load average "
          f"{' '.join(open('/proc/loadavg').read().split()[:3])}")
    print("| rows | executable: wall ms | cpu ms | shared library: wall ms | cpu ms |")
    print("|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="offlink-first-translate-") as tmp:
        for n in args.rows:
            cells = []
            for shared in (False, True):
                prog = make(Path(tmp), n, shared)
                times, cpu = [], []
                for _ in range(args.reps):
                    done = subprocess.run([str(prog)], capture_output=True, text=True, env=env)
                    if done.returncode != 0:
                        sys.exit(f"{prog.name}: {done.stderr.strip() or done.stdout.strip()}")
                    ms, cpu_ms, moved = done.stdout.split()
                    assert int(moved) == n, f"{prog.name}: {moved} of {n} rows translated"
                    times.append(float(ms))
                    cpu.append(float(cpu_ms))
                cells += [f"{statistics.median(times):.2f}", f"{statistics.median(cpu):.2f}"]
            print(f"| {n} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
