"""clang's OpenMP objects for AMD GPUs (clang-19 -fopenmp --offload-arch=gfx90a -c: each CU's
device code is bitcode) linked by offlink and by clang's own link (clang-linker-wrapper's
whole-program device LTO, ld.lld). No AMD GPU here: the images are compared, and the programs
run their host fallback (OMP_TARGET_OFFLOAD default)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import jsonschema
import pytest
from conftest import copy_sample, needs_tool, run

CLANG, CLANGXX = "clang-19", "clang++-19"
LLVM_LIB = "/usr/lib/llvm-19/lib"
DEVICE_LIBS = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"  # rocm-device-libs
AMD = ["-fopenmp", "--offload-arch=gfx90a", f"--rocm-device-lib-path={DEVICE_LIBS}"]
TARGET = "openmp-amdgcn-amd-amdhsa"
needs_amd = needs_tool(
    shutil.which(CLANGXX) is None or shutil.which("ld.lld-19") is None
    or shutil.which("clang-linker-wrapper-19") is None and
    not os.path.exists("/usr/lib/llvm-19/bin/clang-linker-wrapper")
    or not os.path.isdir(DEVICE_LIBS) or shutil.which("llvm-lto2-19") is None,
    "clang-19, clang-tools-19, llvm-19, lld-19 and rocm-device-libs make and link gfx90a "
    "objects (.ci/run installs them)")
ONE_CU = """#include <stdio.h>
#pragma omp declare target
int scale = 3;
#pragma omp end declare target
int main(void) {
  int a[64], s = 0;
#pragma omp target teams distribute parallel for map(from: a)
  for (int i = 0; i < 64; i++) a[i] = i * scale;
  for (int i = 0; i < 64; i++) s += a[i];
  printf("sum %d\\n", s);
  return 0;
}
"""


def _commands(stderr: str, tool: str) -> list[str]:
    """The commands --verbose shows as run, not those taken from the cache."""
    return [m for m in re.split(r"(?=offlink: )", stderr)
            if m.startswith("offlink: ") and tool in m and "from cache" not in m]


@pytest.fixture(scope="module")
def amd(offlink, tmp_path_factory) -> Path:
    """samples/clang_openmp's C++ program (2 CUs) for gfx90a, linked by offlink and by clang
    (--save-temps keeps its image: prog.clang.amdgcn.gfx90a.img)."""
    s = copy_sample("clang_openmp", tmp_path_factory.mktemp("amd"))
    for n in ("main_cxx", "shapes"):
        run([CLANGXX, "-O2", *AMD, "-c", s / f"{n}.cpp", "-o", s / f"{n}.o"])
    objs = [s / "main_cxx.o", s / "shapes.o"]
    run([offlink, "link", CLANGXX, *AMD, *objs, "-o", s / "prog"])
    run([CLANGXX, *AMD, *objs, "-o", s / "prog.clang", "-Wl,--save-temps"], cwd=s)
    run([offlink, "extract", s / "prog", "--target", TARGET, "--output", s / "prog.img"])
    return s


def _notes(image: Path) -> list[str]:
    """The kernels' names and descriptor symbols in the code object's AMDGPU metadata note."""
    out = run(["llvm-readelf-19", "--notes", image]).stdout
    return sorted(re.findall(r"^\s+\.(?:name|symbol):\s+(\S+)$", out, re.M))


def _dynsyms(image: Path) -> list[tuple[str, str, str, str]]:
    out = run(["llvm-readelf-19", "--dyn-syms", "-W", image]).stdout
    rows = [line.split() for line in out.splitlines() if re.match(r"\s+\d+:", line)]
    return sorted((r[3], r[4], r[5], r[7]) for r in rows if len(r) >= 8)


@needs_amd
def test_amd_image_has_clangs_kernels_and_variables(offlink, amd):
    """The same kernels (the metadata note's names and .kd descriptors) and the same exported
    symbols (kernels, their environments, declare target variables, the device environment)
    as clang's own image; an amdgcn shared object, registered with libomptarget."""
    mine, theirs = amd / "prog.img", amd / "prog.clang.amdgcn.gfx90a.img"
    head = mine.read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and head[16] == 3 and int.from_bytes(head[18:20],
                                                                          "little") == 224
    assert _notes(mine) == _notes(theirs) and len(_notes(mine)) == 4
    assert _dynsyms(mine) == _dynsyms(theirs)
    info = json.loads(run([offlink, "inspect", "--json", amd / "prog"]).stdout)
    jsonschema.validate(info, json.loads((Path(__file__).parents[1] / "offlink" / "cli" /
                                          "inspect.schema.json").read_text()))
    table = info["table"]
    assert [(t["name"], t["archs"]) for t in table["targets"]] == [(TARGET, ["gfx90a"])]
    kernels = {n for n in _notes(theirs) if not n.endswith(".kd")}
    assert {s["name"] for s in table["symbols"]} == kernels | {"_ZN4geom6Circle4unitE"}
    assert "__tgt_register_lib" in run(["nm", "-D", amd / "prog"]).stdout


@needs_amd
def test_amd_programs_print_the_same(amd):
    """No AMD GPU here: both programs run their target regions on the host (libomptarget
    finds no device for the image) and print the same."""
    env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB}
    env.pop("OMP_TARGET_OFFLOAD", None)
    mine = run([amd / "prog"], env=env).stdout
    assert mine == run([amd / "prog.clang"], env=env).stdout
    assert mine.startswith("total area: ") and "twice(21) on the device: 42" in mine


@needs_amd
def test_amd_one_cu_image_is_clangs_byte_for_byte(offlink, tmp_path):
    """With one CU, its compile with the device runtime is clang's whole LTO: the same
    resolutions, the same llvm-lto2 code, the same ld.lld; the image is clang's exactly."""
    (tmp_path / "k.c").write_text(ONE_CU)
    run([CLANG, "-O2", *AMD, "-c", tmp_path / "k.c", "-o", tmp_path / "k.o"])
    run([offlink, "link", CLANG, *AMD, tmp_path / "k.o", "-o", tmp_path / "k"])
    run([CLANG, *AMD, tmp_path / "k.o", "-o", tmp_path / "k.clang", "-Wl,--save-temps"],
        cwd=tmp_path)
    run([offlink, "extract", tmp_path / "k", "--target", TARGET, "--output", tmp_path / "k.img"])
    assert (tmp_path / "k.img").read_bytes() == \
        (tmp_path / "k.clang.amdgcn.gfx90a.img").read_bytes()
    env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB}
    assert run([tmp_path / "k"], env=env).stdout == "sum 6048\n"
    # at the link line's -O3 too (llvm-lto2 -O3 --cg-opt-level=3, the wrapper's --opt-level)
    run([offlink, "link", CLANG, *AMD, "-O3", tmp_path / "k.o", "-o", tmp_path / "k3"])
    run([CLANG, *AMD, "-O3", tmp_path / "k.o", "-o", tmp_path / "k3.clang", "-Wl,--save-temps"],
        cwd=tmp_path)
    run([offlink, "extract", tmp_path / "k3", "--target", TARGET, "--output",
         tmp_path / "k3.img"])
    assert (tmp_path / "k3.img").read_bytes() == \
        (tmp_path / "k3.clang.amdgcn.gfx90a.img").read_bytes()
    # -O0: LLVM 19 cannot compile the runtime (clang's own link fails as well): one line
    r = run([offlink, "link", CLANG, *AMD, "-O0", tmp_path / "k.o", "-o", tmp_path / "k0"],
            check=False)
    assert r.returncode != 0 and not (tmp_path / "k0").exists()
    assert r.stderr.splitlines() == [
        f"offlink: error: target {TARGET}: LLVM 19 cannot compile the AMD GPU device runtime "
        f"at -O0 (clang's own link fails too); link at -O1 or above"]


@needs_amd
def test_amd_device_runtime_is_the_one_clangs_link_extracts():
    """libomptarget-amdgpu-gfx90a.bc, which offlink compiles each CU with, is the bitcode of
    libomptarget.devicertl.a's gfx90a member (what clang-linker-wrapper's -lomptarget.devicertl
    gives its LTO)."""
    from offlink.elf import ElfFile, archive_members
    from offlink.formats.offload_binary import SECTION, parse_binaries

    path = f"{LLVM_LIB}/libomptarget.devicertl.a"
    data = Path(path).read_bytes()
    member = next(m for m in archive_members(data, path) if m.name.endswith("-gfx90a.o"))
    elf = ElfFile(bytes(member.data), member.name)
    images = parse_binaries(bytes(elf.content(elf.section(SECTION))), member.name)
    assert [(i.triple, i.arch) for i in images] == [("amdgcn-amd-amdhsa", "gfx90a")]
    assert images[0].image == Path(f"{LLVM_LIB}/libomptarget-amdgpu-gfx90a.bc").read_bytes()


@needs_amd
def test_amd_relink_compiles_only_the_changed_cu(offlink, amd, tmp_path):
    """Cold: each CU compiled once; nothing changed: the image from the cache; one CU changed:
    that CU alone compiled (its own key), the image linked again."""
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
    shutil.copy(amd / "shapes.o", tmp_path / "shapes.o")
    link = [offlink, "link", "--verbose", "--timings", CLANGXX, *AMD, amd / "main_cxx.o",
            tmp_path / "shapes.o", "-o", tmp_path / "app"]
    cold = run(link, env=env).stderr
    assert len(_commands(cold, "llvm-lto2 run")) == 2
    again = run(link, env=env).stderr
    assert not _commands(again, "llvm-lto2 run") and "image from cache" in again
    for f in ("shapes.cpp", "shapes.hpp"):
        shutil.copy(amd / f, tmp_path / f)
    with open(tmp_path / "shapes.cpp", "a") as f:
        f.write("\n#pragma omp declare target\nint extra = 1;\n#pragma omp end declare target\n")
    run([CLANGXX, "-O2", *AMD, "-c", tmp_path / "shapes.cpp", "-o", tmp_path / "shapes.o"])
    changed = run(link, env=env).stderr
    compiled = _commands(changed, "llvm-lto2 run")
    assert len(compiled) == 1 and "shapes" in compiled[0] and "image linked" in changed
    rows = json.loads(run([offlink, "inspect", "--json", tmp_path / "app"]).stdout)["table"]
    assert "extra" in {s["name"] for s in rows["symbols"]}


@needs_amd
@needs_tool(shutil.which("clang-22") is None, "clang-22 (.ci/run installs it)")
def test_amd_clang22_objects_without_their_device_runtime_are_refused(offlink, tmp_path):
    """clang 21+ give AMD GPU images the device runtime as libompdevice.a, which no Debian
    package has: where clang's device link would not find it, one line says where offlink
    looked and how to name it; nothing written (tests/test_clang22_gpu.py links them)."""
    (tmp_path / "k.c").write_text(ONE_CU)
    run(["clang-22", "-O2", "-fopenmp", "--offload-arch=gfx90a", "-nogpulib", "-c",
         tmp_path / "k.c", "-o", tmp_path / "k.o"])
    r = run([offlink, "link", "clang-22", "-fopenmp", "--offload-arch=gfx90a", tmp_path / "k.o",
             "-o", tmp_path / "k"], check=False)
    assert r.returncode != 0 and not (tmp_path / "k").exists()
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"offlink: error: target {TARGET}: clang-22's OpenMP device runtime "
                           f"libompdevice.a is not in "), line
    assert line.endswith("name its folder with -Xoffload-linker-amdgcn-amd-amdhsa -L<dir>"), line


@needs_amd
def test_amd_runtime_call_across_cus_is_refused_in_one_line(offlink, tmp_path):
    """A function another CU's kernel calls that calls the device runtime would see its own
    CU's copy of the runtime (no kernel of its CU set it up): refused, nothing written."""
    (tmp_path / "a.c").write_text("#include <omp.h>\n#pragma omp declare target\n"
                                  "int tid(void) { return omp_get_thread_num(); }\n"
                                  "#pragma omp end declare target\n")
    (tmp_path / "b.c").write_text("#include <stdio.h>\n#pragma omp declare target\n"
                                  "int tid(void);\n#pragma omp end declare target\n"
                                  "int main(void) {\n  int t = -1;\n"
                                  "#pragma omp target map(from: t)\n  t = tid();\n"
                                  "  printf(\"%d\\n\", t);\n  return 0;\n}\n")
    for n in ("a", "b"):
        run([CLANG, "-O2", *AMD, "-c", tmp_path / f"{n}.c", "-o", tmp_path / f"{n}.o"])
    r = run([offlink, "link", CLANG, *AMD, tmp_path / "a.o", tmp_path / "b.o", "-o",
             tmp_path / "p"], check=False)
    assert r.returncode != 0 and not (tmp_path / "p").exists()
    assert r.stderr.splitlines() == [
        f"offlink: error: target {TARGET}: a CU defines a function other CUs may call that "
        f"calls the device runtime; offlink's per-CU AMD GPU link gives each CU its own copy "
        f"of the runtime and does not link such programs yet"]
