"""clang's links through the driver's kept `-###` expansion (offlink/toolchains/llvm/expansion.py).

A relink of clang OpenMP objects starts no clang driver: the image link and the host link run
the linker job the driver printed for the same words on an earlier link, while every file and
folder the driver found is as it was. Proven on a real program (two CUs, libomptarget 19's
x86_64 plugin) against clang-19's own link and against offlink's link with the driver run as
given (no cache); and, in-process, that a changed linker, a new file beside it, another
environment or other words ask the driver again.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from conftest import needs_tool, run

from offlink.cache.store import Cache
from offlink.toolchains.llvm import expansion

CLANG = "clang-19"
LLVM_LIB = "/usr/lib/llvm-19/lib"
OFFLOAD = ["-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu"]
needs_clang = needs_tool(
    shutil.which(CLANG) is None or shutil.which("clang-linker-wrapper-19") is None
    or not Path(LLVM_LIB, "libomptarget.so").exists(),
    "clang-19, clang-tools-19 or libomp-19-dev missing (.ci/run installs them)")

CU = """#pragma omp declare target
double scale_{k} = {k}.5;
double f_{k}(double x) {{ return x * scale_{k} + {c}; }}
#pragma omp end declare target
double work_{k}(double x) {{
  double r = 0;
#pragma omp target map(tofrom: r) firstprivate(x)
  r = f_{k}(x);
  return r;
}}
"""
MAIN = """#include <stdio.h>
double work_0(double); double work_1(double);
int main(void) { printf("%.3f %.3f\\n", work_0(2.0), work_1(3.0)); return 0; }
"""


def compile_cu(d: Path, k: int, c: int) -> None:
    (d / f"cu{k}.c").write_text(CU.format(k=k, c=c))
    run([CLANG, "-O2", *OFFLOAD, "-c", f"cu{k}.c", "-o", f"cu{k}.o"], cwd=d)


def logging_driver(d: Path) -> tuple[str, Path]:
    """A `clang-19` that writes each command it is given to a log, then runs clang-19 (its
    folder goes first on PATH: the image link's driver is the release's `clang-19` too)."""
    log = d / "driver.log"
    shim = d / "bin" / CLANG
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{shutil.which(CLANG)}" "$@"\n')
    shim.chmod(0o755)
    return str(shim), log


@needs_clang
def test_a_relink_with_one_cu_changed_starts_no_clang_driver(offlink, tmp_path):
    d = tmp_path
    driver, log = logging_driver(d)
    made = time.time()
    (d / "main.c").write_text(MAIN)
    run([CLANG, "-O2", "-c", "main.c", "-o", "main.o"], cwd=d)
    compile_cu(d, 0, 1)
    compile_cu(d, 1, 2)
    # A tool changed in the last 2 s has its identity probed again by every link (the
    # cache's racy-file rule): this one has settled before the first link.
    time.sleep(max(0.0, made + 2.1 - time.time()))
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(d / "cache"),
           "PATH": f"{Path(driver).parent}:{os.environ['PATH']}"}
    objs = ["main.o", "cu0.o", "cu1.o"]
    link = [offlink, "link", CLANG, *OFFLOAD, *objs, f"-L{LLVM_LIB}", "-o", "app"]
    run_env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB}

    said = run(link, cwd=d, env={**env, "OFFLINK_VERBOSE": "1"}).stderr
    first = log.read_text().splitlines()
    assert sum(line.startswith("-### ") for line in first) == 2, first  # image and host
    # The image link's asked first; the driver's identity (its --version, a cache key's) only
    # once both answers are in: nothing on the way to the host link waits for it.
    asked = [i for i, line in enumerate(first) if line.startswith("-### ")]
    assert "--target=" in first[asked[0]] and "--target=" not in first[asked[1]], first
    assert first.index("--version") > asked[1], first
    # Both asked beside the earlier stages, in a scratch folder (expansion.expand_early), and
    # given to the links; kept in the cache while the host link ran (the next link finds them).
    assert said.count(", printed by -### beside the earlier stages:") == 2, said
    assert run(["./app"], cwd=d, env=run_env).stdout == "2.000 6.500\n"

    compile_cu(d, 1, 7)  # one CU changed: a new image, a new host link
    log.write_text("")
    run(link, cwd=d, env=env)
    assert log.read_text() == ""  # neither link started the driver
    out = run(["./app"], cwd=d, env=run_env).stdout
    run([CLANG, *OFFLOAD, *objs, f"-L{LLVM_LIB}", "-o", "app.clang"], cwd=d)
    assert out == run(["./app.clang"], cwd=d, env=run_env).stdout == "2.000 11.500\n"

    # The driver run as given (no cache, so no expansion) writes the very same bytes.
    run([offlink, "link", CLANG, *OFFLOAD, *objs, f"-L{LLVM_LIB}", "-o", "app.driver"],
        cwd=d, env={**env, "OFFLINK_NO_CACHE": "1"})
    assert sum(line.startswith("-fopenmp") or line.startswith("--target") for line in
               log.read_text().splitlines()) == 2  # image and host link by the driver
    assert (d / "app").read_bytes() == (d / "app.driver").read_bytes()


@pytest.fixture
def counting(monkeypatch, tmp_path):
    """In-process: a cache in tmp_path, every file taken as settled, `-###` runs counted."""
    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(expansion, "_SETTLED", -1.0)
    calls = []
    real = expansion.expand

    def expand(argv, asked=None):
        calls.append(list(argv))
        return real(argv, asked)

    monkeypatch.setattr(expansion, "expand", expand)
    return Cache.open(True), calls


@needs_clang
def test_what_the_driver_found_changing_asks_it_again(counting, tmp_path, monkeypatch):
    cache, calls = counting
    tools = tmp_path / "tools"  # -B: clang takes `ld` from here (a path it adds itself)
    tools.mkdir()
    ld = tools / "ld"
    ld.write_text('#!/bin/sh\nexec /usr/bin/ld "$@"\n')
    ld.chmod(0o755)
    (tmp_path / "a.o").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    work = str(tmp_path / "work-1")
    argv = [CLANG, f"-B{tools}", "a.o", "-o", f"{work}/out"]

    job, notes = expansion.linker_job(argv, work, cache)
    assert job[0] == str(ld) and f"{work}/out" in job and len(calls) == 1
    # Another link: another work folder, the same words otherwise: from the cache.
    again = expansion.linker_job([*argv[:-1], str(tmp_path / "work-2/out")],
                                 str(tmp_path / "work-2"), cache)
    assert again[0] == [w.replace("work-1", "work-2") for w in job] and len(calls) == 1

    ld2 = tools / "ld.new"  # the linker replaced (a new inode, as an upgrade puts it)
    ld2.write_text('#!/bin/sh\nexec /usr/bin/ld "$@"\n')
    ld2.chmod(0o755)
    os.replace(ld2, ld)
    expansion.linker_job(argv, work, cache)
    assert len(calls) == 2
    expansion.linker_job(argv, work, cache)
    assert len(calls) == 2

    (tools / "crtbegin.o").write_bytes(b"")  # a new file in a folder the driver searched
    expansion.linker_job(argv, work, cache)
    assert len(calls) == 3

    monkeypatch.setenv("LIBRARY_PATH", str(tmp_path))  # an environment the driver reads
    expansion.linker_job(argv, work, cache)
    assert len(calls) == 4

    expansion.linker_job([*argv, "-lm"], work, cache)  # other words
    assert len(calls) == 5


@needs_clang
def test_the_driver_runs_itself_where_an_expansion_cannot_stand_for_it(counting, tmp_path,
                                                                       monkeypatch):
    cache, calls = counting
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.o").write_bytes(b"")
    (tmp_path / "b.c").write_text("int b;\n")
    (tmp_path / "words").write_text("a.o\n")
    for argv in ([CLANG, "a.o", "b.c", "-o", "out"],  # a compile and a link: two jobs
                 [CLANG, "@words", "-o", "out"],  # a response file: its words are not keyed
                 [CLANG, "-v", "a.o", "-o", "out"],  # the driver would print its commands
                 [CLANG, "missing.o", "-o", "out"],  # the driver fails: it says why itself
                 ["gcc", "a.o", "-o", "out"]):  # GCC's driver runs collect2
        assert expansion.linker_job(argv, str(tmp_path / "w"), cache) is None, argv
    assert expansion.linker_job([CLANG, "a.o", "-o", "out"], "", None) is None  # no cache


@needs_clang
def test_the_drivers_warnings_are_shown_from_the_cache_too(counting, tmp_path, monkeypatch):
    cache, calls = counting
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.o").write_bytes(b"")
    argv = [CLANG, "-Wa,-nothing", "a.o", "-o", "out"]  # assembler words, unused by a link
    first = expansion.linker_job(argv, str(tmp_path / "w"), cache)
    second = expansion.linker_job(argv, str(tmp_path / "w"), cache)
    assert len(calls) == 1 and first == second
    assert any("argument unused during compilation: '-Wa,-nothing'" in n for n in first[1])


@needs_clang
def test_a_run_of_objects_asked_as_its_first_is_the_drivers_own_answer(counting, tmp_path,
                                                                        monkeypatch):
    """expand_early asks for an image link's objects (one run of its words, not written yet)
    with the first alone standing for them, and puts the run back in its answer's place: the
    same job as the driver's own answer for the whole link, with one stand-in made."""
    cache, calls = counting
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "w"
    work.mkdir()
    objs = [str(work / "t" / f"{k:04d}-cu{k}.o") for k in range(4)]
    argv = [CLANG, "--target=x86_64-pc-linux-gnu", "-O2", "-Wl,--no-undefined", *objs,
            "-shared", "-lm", "-o", str(work / "t" / "image")]
    expansion.use(cache, str(work))
    try:
        expansion.expand_early(argv, objs)
        expansion.join_early()
        early = expansion.linker_job(argv, str(work), cache)
        made = sorted(p.name for p in (work / ".expand" / "t").iterdir())
    finally:
        expansion.use(None)
    assert made == ["0000-cu0.o"]  # the first stood for the run
    assert len(calls) == 1 and len(calls[0]) == len(argv) - 3
    for o in objs:
        Path(o).parent.mkdir(exist_ok=True)
        Path(o).write_bytes(b"")
    own = expansion.expand(argv)[0]
    assert early[0] == own and [w for w in own if w in objs] == objs


def test_job_lines_are_read_as_clang_quotes_them():
    line = r' "/usr/bin/ld" "a b" "q\"uote" "back\\slash" "\$HOME" ""'
    assert expansion.parse_job(line) == ["/usr/bin/ld", "a b", 'q"uote', "back\\slash",
                                         "$HOME", ""]
