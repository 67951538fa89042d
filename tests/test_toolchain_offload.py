"""`offlink cc` and compiles that carry GCC's or clang's own offload code: passed through untouched
(no payload of offlink's, nothing said, no lief), unless --offload-target asks for offlink's
targets; plan tests with literal command lines, then the real compilers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLES, need_tool, run

from offlink.cc.plan import plan_compile
from offlink.cc.toolchain_offload import offload_word

GCC_NVPTX = ["-fopenmp", "-foffload=nvptx-none", "-foffload-options=nvptx-none=-misa=sm_80"]
CLANG_X86 = ["-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu"]


@pytest.mark.parametrize("argv, word", [
    (["gcc", "-O2", "-fopenmp", "-foffload=nvptx-none", "-c", "a.c"], "-foffload=nvptx-none"),
    (["gcc", "-fopenmp", "-foffload-options=nvptx-none=-misa=sm_80", "-c", "a.c"],
     "-foffload-options=nvptx-none=-misa=sm_80"),
    (["gcc", "-fopenacc", "-c", "a.c", "-o", "a.o"], "-fopenacc"),
    (["gcc", "-fopenmp", "-foffload=-lm", "-c", "a.c"], "-foffload=-lm"),
    (["clang-19", "-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu", "-c", "a.c"],
     "-fopenmp-targets=x86_64-pc-linux-gnu"),
    (["clang", "-fopenmp", "--offload-arch=sm_80", "-c", "a.c"], "--offload-arch=sm_80"),
    (["clang++", "-x", "cuda", "--cuda-gpu-arch=sm_90", "-c", "a.cu"], "--cuda-gpu-arch=sm_90"),
    (["clang", "-fopenmp", "--offload=nvptx64", "-c", "a.c"], "--offload=nvptx64"),
    # none of the toolchain's: offlink's own payload as before
    (["gcc", "-fopenmp", "-c", "a.c"], None),
    (["gcc", "-fopenmp", "-foffload=disable", "-c", "a.c"], None),
    (["clang", "-fopenmp", "-c", "a.c", "-o", "offload=x.o"], None),
    (["gcc", "-O2", "-Dfoffload=1", "-c", "a.c"], None),
])
def test_which_words_carry_the_toolchains_offload_code(argv, word):
    assert offload_word(argv[1:]) == word


def test_a_response_file_is_read_as_the_compiler_reads_it(tmp_path):
    rsp = tmp_path / "flags.rsp"
    rsp.write_text("-O2 -fopenmp\n'-foffload=nvptx-none'\n")
    assert offload_word(["-c", f"@{rsp}", "a.c"]) == "-foffload=nvptx-none"
    assert offload_word(["-c", f"@{tmp_path / 'missing.rsp'}", "a.c"]) is None


@pytest.mark.parametrize("argv", [
    ["gcc", "-O2", *GCC_NVPTX, "-c", "a.c", "-o", "a.o"],
    ["clang-19", "-O2", *CLANG_X86, "-fPIC", "-c", "a.c", "-o", "a.o"],
    ["cc", "-fopenacc", "-c", "a.c"],
])
def test_no_plan_for_a_toolchain_offload_compile_unless_asked(argv):
    assert plan_compile(argv, ["host"], asked=False) is None
    plan = plan_compile(argv, ["host"], asked=True)  # --offload-target host: offlink's too
    assert plan is not None and len(plan.targets) == 1
    assert plan_compile(["gcc", "-fopenmp", "-c", "a.c"], ["host"], asked=False) is not None


def fake_compiler(tmp_path: Path) -> tuple[Path, Path]:
    """A `gcc` that writes the words it was given, one a line, and an object."""
    said = tmp_path / "argv.txt"
    gcc = tmp_path / "bin" / "gcc"
    gcc.parent.mkdir()
    gcc.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{said}"\n: > a.o\n')
    gcc.chmod(0o755)
    return gcc, said


@pytest.mark.parametrize("flags", [GCC_NVPTX, ["-fopenacc"]])
def test_cc_execs_the_compile_untouched_says_nothing_and_imports_nothing(tmp_path, flags):
    gcc, said = fake_compiler(tmp_path)
    argv = [str(gcc), "-O2", *flags, "-MD", "-c", "a.c", "-o", "a.o"]
    env = {**os.environ, "OFFLINK_PROGRESS": "0"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "offlink", "cc", *argv],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert said.read_text().splitlines() == argv[1:]
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert not imported & {"lief", "offlink.cc.fatcache", "offlink.cc.plan", "offlink.toolchains",
                           "offlink.link.pipeline", "subprocess"}
    said_lines = [line for line in proc.stderr.splitlines() if not line.startswith("import time:")]
    assert said_lines == []


def test_asked_for_it_offlink_adds_its_payload_too(tmp_path, offlink):
    need_tool(shutil.which("x86_64-linux-gnu-accel-nvptx-none-gcc-12"), "gcc-12-offload-nvptx")
    src = SAMPLES / "users_openmp" / "util.c"
    run([offlink, "cc", "--offload-target", "host", "gcc", "-O2", *GCC_NVPTX, "-c", src, "-o",
         tmp_path / "util.o"])
    sections = run(["readelf", "-SW", tmp_path / "util.o"]).stdout
    assert "gnu.target_lto_x86_64-pc-linux-gnu" in sections and ".gnu.offload_lto_" in sections


@pytest.mark.parametrize("compiler, flags", [("gcc", GCC_NVPTX), ("clang-19", CLANG_X86)])
def test_real_compiles_give_the_compilers_object_byte_for_byte(tmp_path, offlink, compiler, flags):
    need_tool(shutil.which(compiler), f"{compiler} is not installed")
    if compiler == "gcc":
        need_tool(shutil.which("x86_64-linux-gnu-accel-nvptx-none-gcc-12"),
                  "gcc-12-offload-nvptx is not installed")
    src = SAMPLES / "users_openmp" / "util.c"
    # GCC names its LTO sections with a random number unless given a seed
    common = [compiler, "-O2", *flags, "-frandom-seed=1", "-c", src, "-o"]
    plain = run([*common, tmp_path / "plain.o"])
    through = run([offlink, "cc", *common, tmp_path / "through.o"])
    assert through.stderr == plain.stderr == ""
    assert (tmp_path / "through.o").read_bytes() == (tmp_path / "plain.o").read_bytes()


def test_compile_and_link_in_one_step_compiles_as_the_compiler_then_links(tmp_path, offlink):
    need_tool(shutil.which("clang-19"), "clang-19 is not installed")
    sample = SAMPLES / "users_openmp"
    app = tmp_path / "app"
    run([offlink, "cc", "clang-19", "-O2", *CLANG_X86, f"-I{sample}",
         *(sample / f"{n}.c" for n in ("main", "util", "vecops", "stats")), "-o", app])
    out = run([app], env={**os.environ, "LD_LIBRARY_PATH": "/usr/lib/llvm-19/lib",
                          "OMP_TARGET_OFFLOAD": "MANDATORY"}).stdout
    assert out == (sample / "expected.txt").read_text()
    assert "openmp-x86_64-pc-linux-gnu" in run([offlink, "inspect", app]).stdout
