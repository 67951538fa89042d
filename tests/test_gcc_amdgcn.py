"""GCC 12's amdgcn-amdhsa offload programs (samples/gcc_amdgcn), as GCC's own link builds them.

offlink refuses GCC's amdgcn-amdhsa objects in one line (toolchains/gcc/dialect.py,
check_buildable): it builds nvptx-none images only. These tests hold what its amdgcn target
must match once it exists, checked on GCC's own link of the sample (GCC 12.2's mkoffload:
lto1 to assembly, llvm-mc-13 and lld-13 from gcc-12-offload-amdgcn): the registration through
the LD_PRELOAD stand-in tests/gcc_offload/gomp_shim.c, the code object's ELF header and
target ID for -march=gfx906 and gfx900 (GCC 12's accel compiler knows fiji, gfx900, gfx906
and gfx908; gfx90a came with GCC 13, and GCC 12's own link refuses it; Debian's
gcc-12-offload-amdgcn has no libgomp or newlib for gfx908, where GCC's own link fails on
"incompatible mach"), and the program's host-fallback run; and that offlink's
link of the same objects is the one-line refusal, never an image for another target.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest
from conftest import ROOT, copy_sample, in_ci, run

from offlink.elf import STT_FUNC, STT_OBJECT, ElfFile

ACCEL = f"{os.uname().machine}-linux-gnu-accel-amdgcn-amdhsa-gcc-12"
pytestmark = pytest.mark.skipif(shutil.which(ACCEL) is None and not in_ci(),
                                reason="needs gcc-12-offload-amdgcn")

# GCC 12's registration of a GCN image (gcn/mkoffload.cc; libgomp's GOMP_VERSION 1 and
# GOMP_VERSION_GCN 2, GOMP_DEVICE_GCN 8).
GCN_VERSION = 0x10002
GOMP_DEVICE_GCN = 8
# The ELF header of an AMD GPU code object (LLVM's AMDGPUUsage; code object v4, as llvm-mc-13
# writes for GCC 12): EM_AMDGPU, ELFOSABI_AMDGPU_HSA, ABI version 2, e_flags' mach in the low
# byte, then the xnack and sramecc settings (0: unsupported, 1: any, 2: off, 3: on).
EM_AMDGPU = 224
ELFOSABI_AMDGPU_HSA = 64
ABI_VERSION_V4 = 2
MACH = {"gfx900": 0x2C, "gfx906": 0x2F, "gfx908": 0x30, "gfx90a": 0x3F}
FEATURE = {0: None, 1: "", 2: "-", 3: "+"}


def target_id(e_flags: int) -> str:
    """The code object's target ID (`gfx906:xnack-`), from its e_flags (code object v4)."""
    name = {v: k for k, v in MACH.items()}.get(e_flags & 0xFF, f"mach{e_flags & 0xFF:#x}")
    for feature, shift in (("sramecc", 10), ("xnack", 8)):
        sign = FEATURE[(e_flags >> shift) & 3]
        if sign:  # "any" and "unsupported" are not written
            name += f":{feature}{sign}"
    return name


def test_target_id_reads_the_code_object_v4_feature_bits():
    assert target_id(0x62F) == "gfx906:xnack-"
    assert target_id(0xB3F) == "gfx90a:sramecc-:xnack+"
    assert target_id(0x13F) == "gfx90a"


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("shim") / "gomp_shim.so"
    run(["gcc", "-O2", "-shared", "-fPIC", ROOT / "tests" / "gcc_offload" / "gomp_shim.c",
         "-o", out, "-ldl"])
    return out


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    return copy_sample("gcc_amdgcn", tmp_path_factory.mktemp("amdgcn"))


def gcc_build(sample: Path, gfx: str) -> Path:
    """GCC's own link of the sample for `gfx`, run (host fallback) and compared with
    expected.txt by the Makefile's gcc-run."""
    build = f"build-{gfx}"
    run(["make", "-s", "-C", sample, f"GFX={gfx}", f"BUILD={build}", "gcc-run"])
    return sample / build / "gcc_amdgcn.gcc"


def registered(binary: Path, shim: Path) -> tuple[list[list[str]], bytes]:
    log = binary.parent / "gomp.log"
    log.unlink(missing_ok=True)
    out = run([binary], env={**os.environ, "LD_PRELOAD": str(shim), "GOMP_SHIM_LOG": str(log)})
    assert out.stdout == (binary.parent.parent / "expected.txt").read_text()
    return [ln.split() for ln in log.read_text().splitlines()], Path(f"{log}.gcn").read_bytes()


def host_names(binary: Path) -> dict[int, str]:
    return {s.st_value: s.name for s in ElfFile.open(binary).symbols()
            if s.defined and s.st_type in (STT_FUNC, STT_OBJECT)}


@pytest.mark.parametrize("gfx", ["gfx906", "gfx900"])
def test_gccs_own_link_registers_one_gcn_code_object(sample, shim, gfx):
    binary = gcc_build(sample, gfx)
    lines, image = registered(binary, shim)
    heads = [ln for ln in lines if ln[0] in ("register", "unregister")]
    assert [h[0] for h in heads] == ["register", "unregister"] and heads[0][1:] == heads[1][1:]
    head = heads[0]
    assert head[1:4] == [hex(GCN_VERSION), str(GOMP_DEVICE_GCN), "gcn"]
    assert int(head[4]) == len(image)
    assert head[5:] == ["kernels", "4/2", "vars", "1/1"]
    first = lines[:lines.index(heads[1])]
    kernels = [ln[1] for ln in first if ln[0] == "kernel"]
    funcs = [int(ln[1]) for ln in first if ln[0] == "func"]
    variables = [(int(ln[1]), int(ln[2])) for ln in first if ln[0] == "var"]
    # mkoffload's kernels: the constructor and destructor kernels first, then one per host
    # function slot, in the host table's order (libgomp's plugin pairs them by position).
    names = host_names(binary)
    assert kernels == ["_init_array", "_fini_array", "main._omp_fn.0",
                       "weighted_sum._omp_fn.0"]
    assert [names[a] for a in funcs] == kernels[2:]
    assert [(names[a], size) for a, size in variables] == [("weights", 32)]
    # The code object: the plugin finds each kernel's descriptor and the variables' table
    # (`.offload_var_table`, mkoffload's name for the CUs' joined .gnu.offload_vars) by name.
    ident = image[:16]
    assert ident[:4] == b"\x7fELF" and ident[7] == ELFOSABI_AMDGPU_HSA
    assert ident[8] == ABI_VERSION_V4
    e_type, e_machine = struct.unpack_from("<HH", image, 16)
    e_flags = struct.unpack_from("<I", image, 48)[0]
    assert (e_type, e_machine) == (3, EM_AMDGPU)  # ET_DYN
    assert e_flags & 0xFF == MACH[gfx]
    assert target_id(e_flags) == {"gfx906": "gfx906:xnack-", "gfx900": "gfx900:xnack-"}[gfx]
    symbols = {s.name: s for s in ElfFile(image, "image").symbols()}
    assert {f"{k}.kd" for k in kernels} <= set(symbols)
    table = symbols[".offload_var_table"]
    assert table.st_value == next(s.st_value for n, s in symbols.items()
                                  if n.startswith(".offload_var_table."))


def test_gcc_12s_own_link_refuses_gfx90a(sample):
    """GCC 12's accel compiler has no gfx90a (GCC 13 added it): its own link fails in
    mkoffload's compile, so an amdgcn target in offlink has no gfx90a image to match."""
    proc = run(["make", "-s", "-C", sample, "GFX=gfx90a", "BUILD=build-gfx90a", "gcc-run"],
               check=False)
    assert proc.returncode != 0
    assert "unrecognized argument in option \u2018-march=gfx90a\u2019" in proc.stderr
    assert "valid arguments to \u2018-march=\u2019 are: fiji gfx900 gfx906 gfx908" in proc.stderr


def test_offlinks_link_of_gcn_objects_is_one_line_and_no_image(offlink, sample):
    proc = run(["make", "-s", "-C", sample, f"OFFLINK={offlink}", "BUILD=build-offlink", "run"],
               check=False)
    assert proc.returncode != 0
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith("offlink:")]
    assert said == [
        "offlink: error: GCC's own link would build an offload image for amdgcn-amdhsa "
        "(-foffload=amdgcn-amdhsa asks for it); offlink builds nvptx-none only: link with "
        "-foffload=nvptx-none or with GCC's own link"]
    assert not (sample / "build-offlink" / "gcc_amdgcn").exists()
