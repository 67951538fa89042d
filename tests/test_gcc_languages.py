"""GCC's offloading beyond C OpenMP, linked by offlink with no offlink option: OpenACC in C
(samples/gcc_openacc), C++ and Fortran, Fortran OpenMP with module variables
(samples/gcc_fortran). Each program is built by GCC's own link and by offlink's, both run (host
fallback: no GPU here) with the same output, and both register the same with libgomp, seen
through the LD_PRELOAD stand-in (tests/gcc_offload/gomp_shim.c): the version, device type,
slot counts, kernel names with their launch dimensions (OpenACC's come from the FUNC_MAP
lines), variables by size, in the same order; the binary within 1.15x GCC's own.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, copy_sample, make_sample, need_tool, run
from test_gcc_offload import HAVE_GCC_OFFLOAD, NO_GCC_OFFLOAD, registrations

GFORTRAN = shutil.which("gfortran-12") or shutil.which("gfortran")
GXX = shutil.which("g++-12") or shutil.which("g++")
ISA = "-foffload-options=-misa=sm_80"  # CUDA 12+'s ptxas refuses GCC 12's default (sm_30)


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    need_tool(HAVE_GCC_OFFLOAD, NO_GCC_OFFLOAD)
    out = tmp_path_factory.mktemp("shim") / "gomp_shim.so"
    run(["gcc", "-O2", "-shared", "-fPIC", ROOT / "tests" / "gcc_offload" / "gomp_shim.c",
         "-o", out])
    return out


def calls(binary: Path, shim: Path) -> tuple[str, list[tuple]]:
    """(the program's output, per register call: its header words less the PTX count, the
    kernels with their launch dimensions, the variables' sizes), with the unregister calls
    checked to say the same."""
    out, lines, _ = registrations(binary, shim, binary.parent / f"{binary.name}.log")
    got: list[list] = []
    for ln in lines:
        if ln[0] in ("register", "unregister"):
            got.append([ln[0], tuple(ln[1:3] + ln[5:]), [], []])
        elif ln[0] == "func":
            got[-1][2].append((ln[1], *ln[3:]))
        elif ln[0] == "var":
            got[-1][3].append(ln[3])
    registered = [tuple(g[1:]) for g in got if g[0] == "register"]
    # unregistered at exit in the reverse order (the executable's destructor first)
    assert registered and registered == [tuple(g[1:]) for g in got
                                         if g[0] == "unregister"][::-1]
    return out, [(h, tuple(f), tuple(v)) for h, f, v in registered]


# offlink's key of a region outlined from a function that is not external (a static, a
# template instance, Fortran's MAIN__): GCC's name qualified by its CU, `$<source>$<hash>`, so
# that two CUs' namesakes stay apart (dialects/gcc.py, pair); libgomp pairs by position.
_CU_QUALIFIER = re.compile(r"\$[A-Za-z0-9_]+\$[0-9a-f]{8}$")


def same_as_gcc(mine: Path, theirs: Path, shim: Path, expected: str | None = None) -> list:
    out, registered = calls(mine, shim)
    gcc_out, gcc_registered = calls(theirs, shim)
    assert out == gcc_out and (expected is None or out == expected)
    assert [(h, tuple((_CU_QUALIFIER.sub("", f[0]), *f[1:]) for f in fs), v)
            for h, fs, v in registered] == gcc_registered
    # GCC's own size within 15%, or within one page where a small program's table tips a
    # segment over a page boundary (the 26 KB OpenACC sample: 25,816 -> 30,376 bytes, of
    # which ~900 are the table and 4 KB the next segment's alignment).
    assert mine.stat().st_size <= max(1.15 * theirs.stat().st_size,
                                      theirs.stat().st_size + 4096 + 1024)
    return registered


def test_c_openacc_sample(offlink, shim, tmp_path):
    s = copy_sample("gcc_openacc", tmp_path)
    make_sample(offlink, s, "run", "gcc-run")
    registered = same_as_gcc(s / "build" / "gcc_openacc", s / "build" / "gcc_openacc.gcc",
                             shim, (s / "expected.txt").read_text())
    (head, funcs, variables), = registered
    assert head == ("0x10001", "5", "funcs", "3/3", "vars", "2/2")
    # OpenACC's launch dimensions reach libgomp: num_gangs(4) vector_length(32) -> 4 1 32
    assert ("heat_steps$_omp_fn$0", "4", "1", "32") in funcs


def test_fortran_openmp_sample_with_module_variables(offlink, shim, tmp_path):
    need_tool(GFORTRAN is not None, "gfortran-12 missing (apt-get install gfortran-12)")
    s = copy_sample("gcc_fortran", tmp_path)
    make_sample(offlink, s, "run", "gcc-run", FC=GFORTRAN)
    registered = same_as_gcc(s / "build" / "gcc_fortran", s / "build" / "gcc_fortran.gcc",
                             shim, (s / "expected.txt").read_text())
    (head, funcs, variables), = registered
    assert head == ("0x10001", "5", "funcs", "2/2", "vars", "3/3")
    assert variables == ("4", "4", "2048")  # factor, updates, values(512)


CXX_ACC = r"""
#include <cstdio>
#include <vector>
template <typename T> struct Sum {
  static T over(const T *v, int n) {
    T s = 0;
#pragma acc parallel loop copyin(v[0:n]) reduction(+:s) num_gangs(2) vector_length(64)
    for (int i = 0; i < n; i++) s += v[i] * 2;
    return s;
  }
};
int main() {
  std::vector<double> v(1000);
  for (int i = 0; i < 1000; i++) v[i] = i * 0.5;
  std::printf("%.1f %d\n", Sum<double>::over(v.data(), 1000), Sum<int>::over(nullptr, 0));
  return 0;
}
"""

FORTRAN_ACC = """\
program acc
  implicit none
  integer, parameter :: n = 1000
  real :: a(n), total
  integer :: i
  a = [(real(i), i = 1, n)]
  total = 0
  !$acc parallel loop copyin(a) reduction(+:total) num_gangs(8) vector_length(32)
  do i = 1, n
    total = total + 2 * a(i)
  end do
  !$acc kernels copy(a)
  a(:) = a(:) + 1
  !$acc end kernels
  print '(f12.1, f8.1)', total, a(10)
end program acc
"""


@pytest.mark.parametrize("language", ["c++", "fortran"])
def test_openacc_in_cxx_and_fortran(offlink, shim, tmp_path, language):
    driver = GXX if language == "c++" else GFORTRAN
    need_tool(driver is not None, f"the GCC 12 {language} driver missing")
    source = tmp_path / ("acc.cc" if language == "c++" else "acc.f90")
    source.write_text(CXX_ACC if language == "c++" else FORTRAN_ACC)
    offload = ["-fopenacc", "-foffload=nvptx-none"]
    run([driver, "-O2", *offload, "-c", source, "-o", "acc.o"], cwd=tmp_path)
    run([offlink, "link", driver, *offload, ISA, "acc.o", "-o", "acc"], cwd=tmp_path)
    run([driver, *offload, ISA, "acc.o", "-o", "acc.gcc"], cwd=tmp_path)
    (head, funcs, _), = same_as_gcc(tmp_path / "acc", tmp_path / "acc.gcc", shim)
    assert all(len(f) == 4 for f in funcs) and any(f[1:] != ("0", "0", "0") for f in funcs)


def test_openacc_and_openmp_in_one_program_is_one_line(offlink, shim, tmp_path):
    """GCC 12's link fails on it (mkoffload: "either '-fopenacc' or '-fopenmp' must be set");
    offlink says why in one line."""
    (tmp_path / "a.c").write_text("int a(void) { int x = 0;\n#pragma acc parallel copy(x)\n"
                                  "x = 1;\nreturn x; }\n")
    (tmp_path / "b.c").write_text("int a(void);\nint main(void) { int y = 0;\n"
                                  "#pragma omp target map(tofrom: y)\ny = 2;\n"
                                  "return a() + y - 3; }\n")
    run(["gcc", "-O2", "-fopenacc", "-foffload=nvptx-none", "-c", "a.c"], cwd=tmp_path)
    run(["gcc", "-O2", "-fopenmp", "-foffload=nvptx-none", "-c", "b.c"], cwd=tmp_path)
    proc = run([offlink, "link", "gcc", "-fopenacc", "-fopenmp", "-foffload=nvptx-none",
                "a.o", "b.o", "-o", "prog"], cwd=tmp_path, check=False)
    assert proc.returncode != 0 and proc.stderr.splitlines() == [
        "offlink: error: a.c (a.o) is OpenACC (-fopenacc) and b.c (b.o) OpenMP (-fopenmp): "
        "GCC 12's offload link builds an image for one of them per program (its mkoffload: "
        "\"either '-fopenacc' or '-fopenmp' must be set\"), and so does offlink"]


def test_shared_library_sample(offlink, shim, tmp_path):
    """The library and the executable each register their own image, as with GCC's link."""
    s = copy_sample("gcc_shared", tmp_path)
    make_sample(offlink, s, "run", "gcc-run")
    b = s / "build"
    registered = same_as_gcc(b / "offlink" / "app", b / "gcc" / "app", shim,
                             (s / "expected.txt").read_text())
    assert [head for head, _, _ in registered] == [
        ("0x10001", "5", "funcs", "2/2", "vars", "1/1"),  # libvec.so (its constructor first)
        ("0x10001", "5", "funcs", "2/2", "vars", "0/0")]  # the executable
    mine, theirs = (b / d / "libvec.so" for d in ("offlink", "gcc"))
    assert mine.stat().st_size <= 1.15 * theirs.stat().st_size
