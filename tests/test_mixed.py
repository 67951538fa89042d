"""One `offlink link` of fat objects in several dialects: GCC's (gcc -foffload=nvptx-none),
LLVM's (clang -fopenmp-targets=) and offlink's own (offlink cc).

GCC's objects call libgomp at run time and clang's libomptarget (with libomp): one program
cannot hold both, so that mix is refused before any work, in one line naming both files.
offlink's own objects call neither runtime and link beside either.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import needs_tool, run

from offlink.toolchains.gcc import dialect as gcc

CLANG = "clang-19"
TRIPLE = "x86_64-pc-linux-gnu"
LLVM_LIB = "/usr/lib/llvm-19/lib"
HAVE_CLANG = shutil.which(CLANG) is not None and Path(LLVM_LIB, "libomptarget.so").exists()
needs_clang = needs_tool(not HAVE_CLANG, "clang-19 or libomptarget missing (apt-get install "
                                         "clang-19 libomp-19-dev)")
HAVE_GCC_OFFLOAD = (shutil.which(gcc.accel_compiler("12")) is not None
                    and shutil.which("nvptx-none-ld") is not None)
needs_gcc_offload = needs_tool(not HAVE_GCC_OFFLOAD, "GCC's nvptx offloading missing (apt-get "
                                                     "install gcc-12-offload-nvptx nvptx-tools)")

SOURCES = {
    "gcc_part.c": "int gsq(int x) { int r;\n#pragma omp target map(from: r)\n"
                  "  r = x * x;\n  return r; }\n",
    "clang_part.c": "int csq(int x) { int r;\n#pragma omp target map(from: r)\n"
                    "  r = x * x + 1;\n  return r; }\n",
    "own_part.c": "int osq(int x) { return x * x + 2; }\n",
}


def main_calling(*names: str) -> str:
    decls = " ".join(f"int {n}(int);" for n in names)
    calls = ", ".join(f"{n}(3)" for n in names)
    fmt = " ".join(["%d"] * len(names))
    return f'#include <stdio.h>\n{decls}\nint main(void) {{ printf("{fmt}\\n", {calls}); }}\n'


@pytest.fixture
def objects(offlink, tmp_path) -> Path:
    for name, text in SOURCES.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def gcc_object(d: Path) -> str:
    run(["gcc", "-O2", "-fopenmp", "-foffload=nvptx-none", "-c", "gcc_part.c"], cwd=d)
    return "gcc_part.o"


def clang_object(d: Path) -> str:
    run([CLANG, "-O2", "-fopenmp", f"-fopenmp-targets={TRIPLE}", "-c", "clang_part.c"], cwd=d)
    return "clang_part.o"


def own_object(offlink: str, d: Path) -> str:
    run([offlink, "cc", "gcc", "-O2", "-c", "own_part.c"], cwd=d)
    return "own_part.o"


@needs_gcc_offload
@needs_clang
@pytest.mark.parametrize("driver", ["gcc", CLANG])
def test_gcc_and_clang_offload_objects_are_refused_in_one_line_before_any_work(
        offlink, objects, driver):
    g, c = gcc_object(objects), clang_object(objects)
    (objects / "main.c").write_text(main_calling("gsq", "csq"))
    (objects / "prog").write_bytes(b"the previous output\n")
    # --verbose: any work (a target compile, a cache look-up, a link) would print a line.
    r = run([offlink, "link", "--verbose", driver, "-fopenmp", "main.c", g, c, "-o", "prog"],
            cwd=objects, check=False)
    assert r.returncode != 0
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("offlink: error: gcc_part.o is a GCC offload object")
    for word in ("clang_part.o", "libgomp", "libomptarget", "one program cannot use both"):
        assert word in lines[0]
    assert (objects / "prog").read_bytes() == b"the previous output\n"
    assert sorted(p.name for p in objects.iterdir()) == sorted(
        [*SOURCES, "main.c", "prog", g, c])


@needs_gcc_offload
def test_offlink_and_gcc_offload_objects_link_and_run_together(offlink, objects):
    g, o = gcc_object(objects), own_object(offlink, objects)
    (objects / "main.c").write_text(main_calling("gsq", "osq"))
    run([offlink, "link", "gcc", "-fopenmp", "-foffload=nvptx-none",
         "-foffload-options=-misa=sm_80", "main.c", g, o, "-o", "prog"], cwd=objects)
    assert run(["./prog"], cwd=objects).stdout == "9 11\n"
    shown = run([offlink, "inspect", "prog"], cwd=objects).stdout
    assert "nvptx-none" in shown and TRIPLE in shown and "osq" in shown


@needs_clang
def test_offlink_and_clang_offload_objects_link_and_run_together(offlink, objects):
    c, o = clang_object(objects), own_object(offlink, objects)
    (objects / "main.c").write_text(main_calling("csq", "osq"))
    run([offlink, "link", CLANG, "-fopenmp", f"-fopenmp-targets={TRIPLE}", "main.c", c, o, "-o",
         "prog"], cwd=objects)
    env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB, "LIBOMPTARGET_INFO": "16"}
    r = run(["./prog"], cwd=objects, env=env)
    assert r.stdout.splitlines()[-1] == "10 11"
    assert "Launching kernel __omp_offloading_" in r.stdout + r.stderr  # on libomptarget
    shown = run([offlink, "inspect", "prog"], cwd=objects).stdout
    assert f"openmp-{TRIPLE}" in shown and "osq" in shown


@needs_gcc_offload
@needs_clang
def test_a_relink_reading_one_file_again_checks_the_runtimes_of_all(offlink, objects,
                                                                     monkeypatch):
    """A relink that reads a rewritten file alone (link/relink.py keeps its record per file)
    checks the runtimes of every file, as a whole link does: offlink's object rewritten as a
    GCC offload object beside clang's is refused."""
    from offlink.errors import LinkError
    from offlink.link import extract
    from offlink.link.pipeline import LinkOptions, link

    c, o = clang_object(objects), own_object(offlink, objects)
    (objects / "main.c").write_text(main_calling("csq", "osq"))
    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(objects / "cache"))
    monkeypatch.setenv("OFFLINK_PROGRESS", "0")
    monkeypatch.setattr("offlink.cache.freshness.SETTLED", 0.0)  # stamps trusted at once
    monkeypatch.chdir(objects)
    argv = [CLANG, "-fopenmp", f"-fopenmp-targets={TRIPLE}", "main.c", c, o, "-o", "prog"]
    (objects / "cache").mkdir()
    for _ in range(2):  # the second records the inputs
        assert link(argv, LinkOptions()) == 0
    reads: list[str] = []
    real = extract._read
    monkeypatch.setattr(extract, "_read", lambda p: reads.append(p) or real(p))
    shutil.copy(objects / gcc_object(objects), objects / "own_part.new")
    os.replace(objects / "own_part.new", objects / o)
    with pytest.raises(LinkError, match=r"^clang_part.o is an LLVM offload object .* and "
                                        r"own_part.o is a GCC offload object .*one program "
                                        r"cannot use both"):
        link(argv, LinkOptions())
    assert reads == [o]
