"""`offlink extract` on every kind of input it reads, built here: offlink cc objects, GCC's and
clang's offload objects, linked binaries (offlink's and clang's) and archives of them."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import needs_tool, run

from offlink.elf import ElfFile
from offlink.toolchains.gcc.dialect import accel_compiler

TRIPLE = "x86_64-pc-linux-gnu"
ACCEL = accel_compiler("12")
CLANG = "clang-19"
PACKAGER = "clang-offload-packager-19"
pytestmark = [
    needs_tool(shutil.which(ACCEL) is None, f"{ACCEL} missing (apt-get install "
               f"gcc-12-offload-nvptx; .ci/run installs it)"),
    needs_tool(shutil.which(CLANG) is None or shutil.which(PACKAGER) is None
               or not Path("/usr/lib/llvm-19/lib/libomptarget.so").exists(),
               "clang-19 or libomptarget missing (apt-get install clang-19 libomp-19-dev; "
               ".ci/run installs them)"),
]

SOURCE = """\
int twice(int x) { return 2 * x; }
#pragma omp declare target
int g = 3;
#pragma omp end declare target
int main(void) {
  int r = 0;
#pragma omp target map(from: r)
  r = twice(g);
  return r - 6;
}
"""
OTHER = "int thrice(int x) { return 3 * x; }\n"
# What `lib.a --all` gives: one file per image, named after the archive, member, target and
# architecture; the two members called off.o are numbered in archive order.
ARCHIVE_NAMES = ["lib.a-off.o-x86_64-pc-linux-gnu-0.i",
                 "lib.a-gcc.o-nvptx-none-sm_80.o",
                 "lib.a-llvm.o-openmp-x86_64-pc-linux-gnu.o",
                 "lib.a-off.o-x86_64-pc-linux-gnu-1.i"]


@pytest.fixture(scope="module")
def files(offlink, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("extract")
    (d / "k.c").write_text(SOURCE)
    (d / "other").mkdir()
    (d / "other" / "off.c").write_text(OTHER)
    run([offlink, "cc", "gcc", "-c", "k.c", "-o", "off.o"], cwd=d)
    run([offlink, "cc", "gcc", "-c", "off.c", "-o", "off.o"], cwd=d / "other")
    run(["gcc", "-fopenmp", "-foffload=nvptx-none", "-foffload-options=nvptx-none=-misa=sm_80",
         "-c", "k.c", "-o", "gcc.o"], cwd=d)
    run([CLANG, "-O2", "-fopenmp", f"-fopenmp-targets={TRIPLE}", "-c", "k.c", "-o", "llvm.o"],
        cwd=d)
    run([CLANG, "-fopenmp", f"-fopenmp-targets={TRIPLE}", "llvm.o", "-o", "llvm-app"], cwd=d)
    run([offlink, "link", "gcc", "off.o", "-o", "off-app"], cwd=d)
    run(["ar", "rc", "lib.a", "off.o", "gcc.o", "llvm.o"], cwd=d)
    run(["ar", "q", "lib.a", "other/off.o"], cwd=d)  # a second member called off.o
    run(["ld", "-r", "off.o", "other/off.o", "-o", "both.o"], cwd=d)  # two records, one target
    (d / "plain.c").write_text(OTHER)
    run(["gcc", "-c", "plain.c", "-o", "plain.o"], cwd=d)
    return d


def extract(offlink, cwd, *args, check=True) -> subprocess.CompletedProcess:
    return run([offlink, "extract", *args], cwd=cwd, check=check)


def fails(proc, *fragments) -> str:
    """One line, `offlink: error: ...`, non-zero, nothing on stdout."""
    assert proc.returncode != 0, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("offlink: error: "), proc.stderr
    assert all(f in lines[0] for f in fragments), lines[0]
    assert proc.stdout == ""
    return lines[0]


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_offlink_cc_object_gives_its_target_code(offlink, files, tmp_path):
    extract(offlink, files, "off.o", "--target", "host", "-o", tmp_path / "k.i")
    code = (tmp_path / "k.i").read_text()
    assert code.startswith('# 0 "k.c"') and "int twice(int x)" in code
    run(["gcc", "-fPIC", "-c", tmp_path / "k.i", "-o", tmp_path / "k.o"])  # the target compile


def test_gcc_object_gives_what_the_accel_compiler_reads(offlink, files, tmp_path):
    """Only the .gnu.offload_lto_* sections, compiled by GCC's accel compiler as mkoffload's
    compile would: the target region and the variable are in its PTX."""
    extract(offlink, files, "gcc.o", "--target", "nvptx-none", "-o", tmp_path / "dev.o")
    names = [s.name for s in ElfFile.open(tmp_path / "dev.o").sections if s.name]
    assert names and all(n.startswith(".gnu.offload_lto_") or n == ".shstrtab" for n in names)
    run([ACCEL, "-xlto", "-m64", "-mgomp", "-fopenmp", "-foffload-abi=lp64", "-fPIC",
         "-misa=sm_80", "-O2", "-S", tmp_path / "dev.o", "-o", tmp_path / "dev.ptx"])
    ptx = (tmp_path / "dev.ptx").read_text()
    assert '//:FUNC_MAP "main$_omp_fn$0"' in ptx and '//:VAR_MAP "g"' in ptx
    assert not [n for n in os.listdir(tempfile.gettempdir()) if n.startswith("offlink-extract-")]


@pytest.mark.parametrize("name, kind", [("llvm.o", 1), ("llvm-app", 3)])
def test_clang_object_and_binary_give_what_the_packager_gives(offlink, files, tmp_path, name,
                                                               kind):
    out = tmp_path / "mine"
    extract(offlink, files, name, "--triple", TRIPLE, "-o", out)
    run([PACKAGER, name, f"--image=file={tmp_path / 'theirs'},triple={TRIPLE}"], cwd=files)
    assert out.read_bytes() == (tmp_path / "theirs").read_bytes()
    assert ElfFile.open(out).e_type == kind  # ET_REL in the object, ET_DYN once linked


def test_archive_all_one_file_per_member_image(offlink, files, tmp_path):
    proc = extract(offlink, files, "lib.a", "--all", "-o", f"{tmp_path}/out/")
    assert proc.stdout.splitlines() == [f"{tmp_path}/out/{n}" for n in ARCHIVE_NAMES]
    assert listing(tmp_path / "out") == sorted(ARCHIVE_NAMES)
    out = tmp_path / "out"
    assert "twice" in (out / ARCHIVE_NAMES[0]).read_text()
    assert "thrice" in (out / ARCHIVE_NAMES[3]).read_text()
    assert (out / ARCHIVE_NAMES[1]).read_bytes() == _extracted(offlink, files, "gcc.o")
    assert (out / ARCHIVE_NAMES[2]).read_bytes() == _extracted(offlink, files, "llvm.o")
    first = {n: (out / n).read_bytes() for n in ARCHIVE_NAMES}
    extract(offlink, files, "lib.a", "--all", "-o", f"{tmp_path}/again/")
    assert {n: (tmp_path / "again" / n).read_bytes() for n in ARCHIVE_NAMES} == first


def _extracted(offlink, files, name: str) -> bytes:
    """The one image of a file, through stdout."""
    return subprocess.run([offlink, "extract", name, "--all", "-o", "-"], cwd=files,
                          capture_output=True, check=True).stdout


def test_several_inputs_and_records(offlink, files, tmp_path):
    """Linked binaries of both kinds, and an `ld -r` object holding two CUs' records."""
    proc = extract(offlink, files, "off-app", "llvm-app", "both.o", "--all", "-o",
                   f"{tmp_path}/")
    names = ["off-app-x86_64-pc-linux-gnu.so", "llvm-app-openmp-x86_64-pc-linux-gnu.so",
             "both.o-x86_64-pc-linux-gnu-0.i", "both.o-x86_64-pc-linux-gnu-1.i"]
    assert proc.stdout.splitlines() == [f"{tmp_path}/{n}" for n in names]
    assert "twice" in (tmp_path / names[2]).read_text()
    assert "thrice" in (tmp_path / names[3]).read_text()
    assert ElfFile.open(tmp_path / names[0]).e_type == 3


@pytest.mark.parametrize("args, names", [
    (["--target", "host"], [ARCHIVE_NAMES[0], ARCHIVE_NAMES[3]]),
    (["--arch", "sm_80"], [ARCHIVE_NAMES[1]]),
    (["--triple", TRIPLE], [ARCHIVE_NAMES[0], ARCHIVE_NAMES[2], ARCHIVE_NAMES[3]]),
    (["--target", f"openmp-{TRIPLE}", "--target", "nvptx-none"], ARCHIVE_NAMES[1:3]),
    (["--all", "--triple", "nvptx-none"], [ARCHIVE_NAMES[1]]),
])
def test_selection(offlink, files, tmp_path, args, names):
    extract(offlink, files, "lib.a", *args, "-o", f"{tmp_path}/")
    assert listing(tmp_path) == sorted(names)


@pytest.mark.parametrize("args, message", [
    (["lib.a", "--target", "cuda"], "lib.a: no target 'nvptx64-nvidia-cuda' (targets: "
                                    f"{TRIPLE}, nvptx-none, openmp-{TRIPLE})"),
    (["lib.a", "--arch", "sm_90"], "lib.a: no arch 'sm_90' (archs: nvptx-none: sm_80)"),
    (["lib.a", "--target", "host", "--arch", "sm_80"],
     f"lib.a: no target '{TRIPLE}' with --arch sm_80"),
    (["off-app", "--target", "nvptx-none"], "off-app: no target 'nvptx-none'"),
    (["plain.o", "--all"], "plain.o: no target code"),
    (["k.c", "--all"], "k.c: not an ELF file"),
    (["nosuch.o", "--all"], "nosuch.o: No such file or directory"),
    (["lib.a", "--all", "--target", "host"], "--all and --target go alone"),
    (["lib.a"], "say which images"),
])
def test_a_selection_of_nothing_is_one_line(offlink, files, tmp_path, args, message):
    fails(extract(offlink, files, *args, "-o", f"{tmp_path}/out/", check=False), message)
    assert listing(tmp_path) == []


def test_output_to_stdout_is_one_image(offlink, files, tmp_path):
    extract(offlink, files, "off-app", "--target", "host", "-o", tmp_path / "image.so")
    out = subprocess.run([offlink, "extract", "off-app", "--target", "host", "-o", "-"],
                         cwd=files, capture_output=True, check=True).stdout
    assert out == (tmp_path / "image.so").read_bytes()
    fails(extract(offlink, files, "lib.a", "--target", "host", "-o", "-", check=False),
          "2 images match", "stdout takes one")


def test_output_file_is_one_image(offlink, files, tmp_path):
    fails(extract(offlink, files, "lib.a", "--all", "-o", tmp_path / "x", check=False),
          "4 images match", "name a folder (-o DIR/)")
    assert listing(tmp_path) == []


def test_without_output_into_the_current_folder(offlink, files, tmp_path):
    proc = extract(offlink, tmp_path, files / "lib.a", "--target", "host")
    assert proc.stdout.splitlines() == [ARCHIVE_NAMES[0], ARCHIVE_NAMES[3]]
    assert listing(tmp_path) == sorted([ARCHIVE_NAMES[0], ARCHIVE_NAMES[3]])


def test_never_overwrites_an_input(offlink, files, tmp_path):
    shutil.copy(files / "off.o", tmp_path / "off.o")
    before = (tmp_path / "off.o").read_bytes()
    fails(extract(offlink, tmp_path, "off.o", "--all", "-o", "./off.o", check=False),
          "input file 'off.o' is the same as output file './off.o'")
    # In a folder: the name it would write is a link to the input.
    (tmp_path / "out").mkdir()
    os.link(tmp_path / "off.o", tmp_path / "out" / "off.o-x86_64-pc-linux-gnu.i")
    fails(extract(offlink, tmp_path, "off.o", "--all", "-o", "out/", check=False),
          "is the same as output file 'out/off.o-x86_64-pc-linux-gnu.i'")
    assert (tmp_path / "off.o").read_bytes() == before
    assert listing(tmp_path) == ["off.o", "out"]
    assert listing(tmp_path / "out") == ["off.o-x86_64-pc-linux-gnu.i"]


def test_all_or_nothing_and_no_litter(offlink, files, tmp_path):
    """A folder in the way of one name: no file written, none left half-written."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ARCHIVE_NAMES[2]).mkdir()
    fails(extract(offlink, files, "lib.a", "--all", "-o", f"{tmp_path}/out/", check=False),
          f"out/{ARCHIVE_NAMES[2]}: Is a directory")
    assert listing(tmp_path / "out") == [ARCHIVE_NAMES[2]]
    # A write that fails (the file size limit) after one that did not: neither file is left,
    # and the folder made for them goes again.
    proc = subprocess.run([offlink, "extract", "off.o", "off-app", "--all", "-o",
                           f"{tmp_path}/new/"], capture_output=True, text=True, cwd=files,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE,
                                                                (4096, 4096)))
    fails(proc, "File too large")
    assert listing(tmp_path) == ["out"]


def test_short_output_option_takes_its_value(offlink, files, tmp_path):
    """`-o -V` names a file: -V there is no request for the version."""
    extract(offlink, tmp_path, files / "off-app", "--target", "host", "-o", "-V")
    assert listing(tmp_path) == ["-V"]


def test_objcopy_runs_only_for_a_selected_gcc_object(offlink, files, tmp_path):
    """GCC's sections are taken out (objcopy) only for an image that is written; when that
    fails, the error is objcopy's, and no folder or temporary file is left."""
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "objcopy"
    fake.write_text(f"#!/bin/sh\necho ran >> {tmp_path / 'ran'}\necho 'objcopy: broken'\n"
                    "exit 1\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    out = tmp_path / "out"
    run([offlink, "extract", "lib.a", "--target", "host", "-o", f"{out}/"], cwd=files, env=env)
    assert not (tmp_path / "ran").exists() and len(listing(out)) == 2
    proc = run([offlink, "extract", "lib.a", "--all", "-o", f"{tmp_path}/all/"], cwd=files,
               env=env, check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines()[0] == "objcopy: broken"
    assert proc.stderr.splitlines()[-1].startswith(
        "offlink: error: taking GCC's offload sections out of lib.a(gcc.o) failed")
    assert listing(tmp_path) == ["bin", "out", "ran"]
    assert not [n for n in os.listdir(tempfile.gettempdir()) if n.startswith("offlink-extract-")]
