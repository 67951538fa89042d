"""Fortran through LLVM (issue 23 item 5): samples/flang_openmp (a module with `declare target`
variables, target regions in two CUs) compiled by flang-new-19 for an NVIDIA GPU
(`-fopenmp --offload-arch=sm_80`: each CU's device code a relocatable cubin) and linked both
ways, flang's own link (clang-linker-wrapper, nvlink) and offlink's. Without a GPU both programs
run their target regions on the host (libomptarget's fallback) and print expected.txt; the sm_80
images are compared byte for byte (offlink's, extracted, and the one flang's link writes with
-Wl,--save-temps): this program's are the same (a per-CU cubin link is what clang's link runs).

flang's own x86_64 offload links fail here (`__kmpc_target_init`), so the host plugin is not
the world of this test. flang-22's own sm_80 link fails too (no `libompdevice` for nvptx in
Debian's LLVM 22): offlink refuses clang 21+'s NVIDIA device runtime in one line, tested below.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from conftest import copy_sample, make_sample, needs_tool, run

LLVM_BIN = "/usr/lib/llvm-19/bin"
LLVM_LIB = "/usr/lib/llvm-19/lib"
TARGET = "openmp-nvptx64-nvidia-cuda"


def _cuda_home() -> str:
    from offlink.errors import ToolError
    from offlink.toolchains.cuda_toolkit import cuda_home

    try:
        return cuda_home()
    except ToolError:
        return ""


CUDA_HOME = _cuda_home()
needs_flang19 = needs_tool(
    shutil.which("flang-new-19") is None or not Path(LLVM_BIN, "clang-linker-wrapper").exists()
    or not CUDA_HOME, "flang-new-19, clang-tools-19 or CUDA (ptxas, nvlink) missing (.ci/run "
    "installs flang-19 and clang-tools-19, and CUDA into .ci/cuda)")


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{LLVM_BIN}:{CUDA_HOME}/bin:{os.environ['PATH']}"}


@needs_flang19
def test_flang19_program_linked_both_ways(offlink, tmp_path):
    s = copy_sample("flang_openmp", tmp_path)
    make_sample(offlink, s, "run", "flang-run", CUDA_PATH=CUDA_HOME)
    expected = (s / "expected.txt").read_text()
    assert (s / "build" / "output.txt").read_text() == expected
    assert (s / "build" / "output.flang.txt").read_text() == expected
    # The same kernels and globals: flang's own image (kept by --save-temps) and offlink's.
    build = s / "build"
    run(["flang-new-19", "-fopenmp", "--offload-arch=sm_80", "field.o", "main.o", "-o",
         "own", "-Wl,--save-temps"], cwd=build, env=_env())
    run([offlink, "extract", build / "flang_openmp", "--target", TARGET, "--output",
         build / "image.offlink"])
    ours, own = (build / "image.offlink").read_bytes(), (build / "own.nvptx64.sm_80.img")
    assert ours == own.read_bytes(), "offlink's sm_80 image is not flang's own link's"
    names = run([offlink, "inspect", build / "flang_openmp"]).stdout
    for name in ("_QMfieldEvalues", "_QMfieldEfactor", "_QMfieldEupdates",
                 "__QMfieldPscale_values_l13", "__QQmain_l15"):
        assert name in names, names


@needs_tool(shutil.which("flang-22") is None or not CUDA_HOME,
            "flang-22 or CUDA missing (.ci/run installs flang-22, and CUDA into .ci/cuda)")
def test_flang22_nvidia_objects_are_refused_in_one_line(offlink, tmp_path):
    """flang-22's sm_80 objects want LLVM 21+'s device runtime (`-lompdevice`), which Debian's
    LLVM 22 does not ship (flang-22's own link fails too): one line saying where offlink
    looked, exit 1, no program."""
    (tmp_path / "t.f90").write_text("program t\ninteger :: x = 0\n!$omp target map(tofrom: x)\n"
                                    "x = 1\n!$omp end target\nprint *, x\nend program t\n")
    env = {**os.environ, "PATH": f"/usr/lib/llvm-22/bin:{CUDA_HOME}/bin:{os.environ['PATH']}"}
    words = ["-fopenmp", "--offload-arch=sm_80"]
    run(["flang-22", "-O2", *words, "-c", "t.f90", "-o", "t.o"], cwd=tmp_path, env=env)
    proc = run([offlink, "link", "flang-22", *words, "t.o", "-o", "t"], cwd=tmp_path,
               env=env, check=False)
    assert proc.returncode == 1
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("offlink: error: target " + TARGET), err
    assert "libompdevice.a is not in /usr/lib/llvm-22/lib " in err[0], err
    assert not (tmp_path / "t").exists()
