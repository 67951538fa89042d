"""GCC 12's amdgcn-amdhsa offload programs (samples/gcc_amdgcn), as GCC's own link builds them.

offlink's amdgcn-amdhsa target (toolchains/gcc/gcn.py) against GCC's own link of the sample
(GCC 12.2's mkoffload: lto1 to assembly, llvm-mc-13 and lld-13 from gcc-12-offload-amdgcn):
the registration through the LD_PRELOAD stand-in tests/gcc_offload/gomp_shim.c, the code
object's ELF header and target ID for -march=gfx906 and gfx900 (GCC 12's accel compiler
knows fiji, gfx900, gfx906 and gfx908; gfx90a came with GCC 13, and GCC 12's own link
refuses it; Debian's gcc-12-offload-amdgcn has no libgomp or newlib for gfx908, where GCC's
own link fails on "incompatible mach"), and the program's host-fallback run; then offlink's
steps and its link of the same objects, with and without -foffload= (both targets by
default).
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest
from conftest import ROOT, copy_sample, needs_tool, run

from offlink.elf import STT_FUNC, STT_OBJECT, ElfFile
from offlink.toolchains.gcc import gcn

ACCEL = f"{os.uname().machine}-linux-gnu-accel-amdgcn-amdhsa-gcc-12"
pytestmark = needs_tool(shutil.which(ACCEL) is None, "needs gcc-12-offload-amdgcn")

assert (gcn.VERSION, gcn.GOMP_DEVICE_GCN) == (0x10002, 8)  # GCC 12's libgomp
ELFOSABI_AMDGPU_HSA = 64
ABI_VERSION_V4 = 2  # code object v4, as llvm-mc-13 writes it for GCC 12 (not for fiji: v3)


def test_target_id_reads_the_code_object_v4_feature_bits():
    assert gcn.target_id(0x62F) == "gfx906:xnack-"
    assert gcn.target_id(0xB30) == "gfx908:sramecc-:xnack+"
    assert gcn.target_id(0x12C) == "gfx900"
    assert gcn.target_id(0x3F) == "mach0x3f"  # gfx90a: not a GCC 12 target


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
    assert head[1:4] == [hex(gcn.VERSION), str(gcn.GOMP_DEVICE_GCN), "gcn"]
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
    assert (e_type, e_machine) == (3, gcn.EM_AMDGPU)  # ET_DYN
    assert e_flags == gcn.e_flags(image) and e_flags & 0xFF == gcn.MACH[gfx]
    assert gcn.target_id(e_flags) == {"gfx906": "gfx906:xnack-", "gfx900": "gfx900:xnack-"}[gfx]
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


def named(lines: list[list[str]], binary: Path) -> list[list[str]]:
    """The shim's lines with host addresses as the symbols there, and without the image's
    size (offlink's image is a few hundred bytes longer: the CUs' sections are not merged;
    for nvptx-none, its PTX file count, which GCC counts differently)."""
    names = host_names(binary)
    out = []
    for ln in lines:
        if ln[0] in ("register", "unregister"):
            ln = ln[:4] + ln[5:]
        elif ln[0] in ("func", "var"):
            at = 1 if ln[1].isdigit() else 2  # GCN: `func ADDR`; nvptx: `func NAME ADDR ...`
            ln = [*ln[:at], names[int(ln[at])], *ln[at + 1:]]
        out.append(ln)
    return out


def test_offlinks_link_registers_what_gccs_own_link_registers(offlink, sample, shim):
    """`offlink link gcc -fopenmp -foffload=amdgcn-amdhsa ...` of the sample: through the shim,
    GCC's own registration (0x10002, type 8, the kernels in the same order with their
    register counts, the variable count, the host slots by name); the code object's e_flags;
    the host-fallback output; the binary <= 1.15x GCC's own; inspect shows the image."""
    theirs_bin = gcc_build(sample, "gfx906")
    run(["make", "-s", "-C", sample, f"OFFLINK={offlink}", "BUILD=build-gfx906", "run"])
    ours_bin = sample / "build-gfx906" / "gcc_amdgcn"
    ours, ours_image = registered(ours_bin, shim)
    theirs, theirs_image = registered(theirs_bin, shim)
    assert ours[0][:4] == ["register", hex(gcn.VERSION), str(gcn.GOMP_DEVICE_GCN), "gcn"]
    assert int(ours[0][4]) == len(ours_image)
    assert named(ours, ours_bin) == named(theirs, theirs_bin)
    assert gcn.e_flags(ours_image) == gcn.e_flags(theirs_image)
    assert ours_bin.stat().st_size <= 1.15 * theirs_bin.stat().st_size
    shown = run([offlink, "inspect", ours_bin]).stdout
    assert "amdgcn-amdhsa" in shown and "nvptx-none" not in shown


def test_without_foffload_both_targets_are_built_as_gccs_own_link_builds_them(offlink, sample,
                                                                              shim, tmp_path):
    """No -foffload=: an image for every installed accel compiler, registered in GCC's order
    (nvptx-none, then amdgcn-amdhsa), as GCC's own link of the same objects."""
    if shutil.which(f"{os.uname().machine}-linux-gnu-accel-nvptx-none-gcc-12") is None:
        pytest.skip("needs gcc-12-offload-nvptx too")
    build = gcc_build(sample, "gfx906").parent
    objects = [build / "main.o", build / "sum.o"]
    words = ["-fopenmp", "-foffload-options=amdgcn-amdhsa=-march=gfx906",
             "-foffload-options=nvptx-none=-misa=sm_80"]  # GCC 12's sm_35: CUDA 12 refuses
    (tmp_path / "expected.txt").write_text((sample / "expected.txt").read_text())
    (tmp_path / "b").mkdir()
    run(["gcc", *words, *objects, "-o", tmp_path / "b" / "gcc"])
    run([offlink, "link", "gcc", *words, *objects, "-o", tmp_path / "b" / "ours"])
    ours, _ = registered(tmp_path / "b" / "ours", shim)
    theirs, _ = registered(tmp_path / "b" / "gcc", shim)
    heads = [ln[:4] for ln in ours if ln[0] in ("register", "unregister")]
    assert heads == [["register", "0x10001", "5", "ptx"], ["register", "0x10002", "8", "gcn"],
                     ["unregister", "0x10002", "8", "gcn"], ["unregister", "0x10001", "5", "ptx"]]
    assert named(ours, tmp_path / "b" / "ours") == named(theirs, tmp_path / "b" / "gcc")
    shown = run([offlink, "inspect", tmp_path / "b" / "ours"]).stdout
    assert "amdgcn-amdhsa" in shown and "nvptx-none" in shown


# -- offlink's steps (toolchains/gcc/gcn.py), one CU at a time, against GCC's own link -------

def per_cu_image(objects: list[Path], work: Path) -> tuple[Path, list[gcn.DeviceTables]]:
    """The image built as gcn.py's steps build it: each CU compiled to assembly alone,
    rewritten and assembled alone, then linked after the `.offload_var_table` start."""
    from offlink.toolchains.gcc import dialect as gcc
    from offlink.toolchains.gcc.nvptx import accel_libdir

    work.mkdir(exist_ok=True)
    tables, assembled, options = [], [], []
    for obj in objects:
        elf = ElfFile.open(obj)
        passed, offload = gcc.compile_options(elf)
        options = passed + gcc.offload_options(offload, gcn.NAME)
        asm = work / f"{obj.stem}.s"
        run(gcn.compile_argv(ACCEL, options, str(obj), str(asm)))
        text = asm.read_text()
        tables.append(gcn.read_asm(text))
        rewritten = work / f"{obj.stem}.2.s"
        rewritten.write_text(gcn.without_func_tables(text))
        if not assembled:
            start = work / "offload-var-table.s"
            start.write_text(gcn.var_table_start(gcn.target_directive(text)))
            assembled.append(start)
        assembled.append(rewritten)
    shown = run(gcn.assemble_probe(ACCEL, options)).stderr
    objs = []
    for s in assembled:
        o = s.with_suffix(".o")
        run(gcn.assemble_argv(shown, str(s), str(o)))
        objs.append(str(o))
    image = work / "image.hsaco"
    run(gcn.link_argv(accel_libdir(ACCEL), gcn.arch(options), objs, str(image)))
    return image, tables


@pytest.mark.parametrize("gfx", ["gfx906", "gfx900"])
def test_the_per_cu_image_is_the_one_gccs_own_link_builds(sample, shim, gfx):
    binary = gcc_build(sample, gfx)
    objects = [binary.parent / "main.o", binary.parent / "sum.o"]
    image, tables = per_cu_image(objects, binary.parent / "offlink")
    _lines, theirs = registered(binary, shim)
    ours = image.read_bytes()
    assert gcn.e_flags(ours) == gcn.e_flags(theirs)
    assert ours[:16] == theirs[:16]

    def exported(data: bytes) -> dict[str, int]:
        return {s.name: s.st_size for s in ElfFile(data, "image").symbols()
                if s.is_global and s.defined}

    # The same kernels, variables and the variables' table, by name and size.
    assert exported(ours) == exported(theirs)
    for data in (ours, theirs):  # the plugin's read: (address, size) per variable
        assert var_table(data) == [(symbol(data, "weights"), 32)]
    assert [t.functions for t in tables] == [["main._omp_fn.0"], ["weighted_sum._omp_fn.0"]]
    assert [t.variables for t in tables] == [[("weights", 32)], []]


def symbol(image: bytes, name: str) -> int:
    return next(s.st_value for s in ElfFile(image, "image").symbols() if s.name == name)


def var_table(image: bytes) -> list[tuple[int, int]]:
    """The rows at `.offload_var_table` in `.gnu.offload_vars` (to the section's end), as the
    loaded image holds them: each address is a R_AMDGPU_RELATIVE64 (13) relocation's addend."""
    elf = ElfFile(image, "image")
    sec = elf.section(".gnu.offload_vars")
    start = symbol(image, ".offload_var_table")
    data = bytes(elf.content(sec))[start - sec.sh_addr:]
    rela = bytes(elf.content(elf.section(".rela.dyn")))
    relative = {off: addend for off, info, addend in
                (struct.unpack_from("<QQq", rela, i) for i in range(0, len(rela), 24))
                if info & 0xFFFFFFFF == 13}
    return [(relative.get(start + i, struct.unpack_from("<Q", data, i)[0]),
             struct.unpack_from("<Q", data, i + 8)[0]) for i in range(0, len(data), 16)]


def test_the_registration_gcn_py_writes_is_gccs_own(sample, shim, tmp_path):
    """gcn.c_source's registration of the per-CU image, linked into the host program as
    GCC's link would (-fopenmp: its driver adds crtoffloadbegin.o and crtoffloadend.o),
    against GCC's own link: the same version, device type, kernels with their register
    counts, in the same order, over the same host table; the same host-fallback output."""
    binary = gcc_build(sample, "gfx906")
    objects = [binary.parent / "main.o", binary.parent / "sum.o"]
    image, tables = per_cu_image(objects, tmp_path / "device")
    funcs = [f for t in tables for f in t.functions]  # the host table's order (inputs')
    rows = gcn.kernels(funcs, tables)
    source = tmp_path / "reg.c"
    source.write_text(gcn.c_source("offlink_gcn_image", image.stat().st_size, rows,
                                   sum(len(t.variables) for t in tables)))
    blob = tmp_path / "image.s"
    blob.write_text(f'\t.section .rodata\n\t.globl offlink_gcn_image\n'
                    f'\t.hidden offlink_gcn_image\n\t.p2align 3\nofflink_gcn_image:\n'
                    f'\t.incbin "{image}"\n\t.section .note.GNU-stack,"",@progbits\n')
    prog = tmp_path / "prog"
    run(["gcc", "-O2", "-fPIC", "-c", source, "-o", tmp_path / "reg.o"])
    run(["gcc", "-c", blob, "-o", tmp_path / "image.o"])
    run(["gcc", "-fopenmp", "-foffload=disable", *objects, tmp_path / "reg.o",
         tmp_path / "image.o", "-o", prog])
    (tmp_path / "expected.txt").write_text((sample / "expected.txt").read_text())
    ours, image_seen = registered_at(prog, shim, sample)
    theirs, _ = registered(binary, shim)
    assert image_seen == image.read_bytes()

    def named(lines: list[list[str]], binary: Path) -> list[list[str]]:
        names = host_names(binary)
        out = []
        for ln in lines:
            if ln[0] in ("register", "unregister"):
                ln = ln[:4] + ln[5:]  # the image's size differs (see the report in docs)
            elif ln[0] in ("func", "var"):
                ln = [ln[0], names[int(ln[1])], *ln[2:]]
            out.append(ln)
        return out

    assert named(ours, prog) == named(theirs, binary)


def registered_at(binary: Path, shim: Path, sample: Path) -> tuple[list[list[str]], bytes]:
    log = binary.parent / "gomp.log"
    log.unlink(missing_ok=True)
    out = run([binary], env={**os.environ, "LD_PRELOAD": str(shim), "GOMP_SHIM_LOG": str(log)})
    assert out.stdout == (sample / "expected.txt").read_text()
    return [ln.split() for ln in log.read_text().splitlines()], Path(f"{log}.gcn").read_bytes()


STATIC_CU = r"""
static int stat[4] = {1, 2, 3, 4};
#pragma omp declare target to(stat)
static int f(int x) {
  int r = 0;
#pragma omp target map(tofrom: r)
  r = x + stat[1] + ADD;
  return r;
}
int NAME(int x) { return f(x); }
"""


def test_statics_of_two_cus_are_two_kernels_and_two_variables(offlink, shim, tmp_path):
    """Two CUs, each with a static `stat` and a region outlined from a static `f`
    (`f._omp_fn.0` in both): offlink keys and renames them per CU (GCC's link makes them
    `f._omp_fn.0.lto_priv.N`); the registration has the same shape as GCC's, every kernel's
    descriptor is in the image under its registered name, and the program prints the same."""
    words = ["-fopenmp", "-foffload=amdgcn-amdhsa",
             "-foffload-options=amdgcn-amdhsa=-march=gfx906"]
    for name, add in (("a", 1), ("b", 2)):
        (tmp_path / f"{name}.c").write_text(STATIC_CU.replace("NAME", f"g_{name}")
                                            .replace("ADD", str(add)))
    (tmp_path / "m.c").write_text('#include <stdio.h>\nint g_a(int), g_b(int);\n'
                                  'int main(void) { printf("%d %d\\n", g_a(10), g_b(20)); }\n')
    for n in "abm":
        run(["gcc", "-O2", *words, "-c", f"{n}.c"], cwd=tmp_path)
    (tmp_path / "b").mkdir()
    (tmp_path / "expected.txt").write_text("13 24\n")
    objects = ["a.o", "b.o", "m.o"]
    run(["gcc", *words, *objects, "-o", "b/gcc"], cwd=tmp_path)
    run([offlink, "link", "gcc", *words, *objects, "-o", "b/ours"], cwd=tmp_path)
    ours, image = registered(tmp_path / "b" / "ours", shim)
    theirs, _ = registered(tmp_path / "b" / "gcc", shim)

    def shape(lines: list[list[str]]) -> list[list[str]]:
        return [ln[:1] + ln[2:] if ln[0] == "kernel" else ln[:1] + ln[-1:] if ln[0] == "var"
                else ln[:1] if ln[0] == "func" else ln[:4] + ln[5:] for ln in lines]

    assert shape(ours) == shape(theirs)
    kernels = [ln[1] for ln in ours[:len(ours) // 2] if ln[0] == "kernel"][2:]
    assert len(set(kernels)) == 2 and all(k.startswith("f._omp_fn.0.") for k in kernels)
    defined = {s.name for s in ElfFile(image, "image").symbols() if s.defined}
    assert {f"{k}.kd" for k in kernels} <= defined


def test_a_declare_target_link_row_is_read_with_its_link_bit():
    """`declare target link` rows: the device's `NAME.linkptr` and the size with bit 63 set,
    which GCC's assembly writes as a negative number (GCC's own link registers the same)."""
    asm = ("\t.section\t.gnu.offload_vars,\"aw\"\n.offload_var_table.2:\n"
           "\t.8byte\tbig.linkptr\n\t.8byte\t-9223372036854775776\n")
    assert gcn.read_asm(asm).variables == [("big.linkptr", (1 << 63) | 32)]
    from offlink.toolchains.gcc.dialect import HostEntry

    host = HostEntry("variable", "big", 32, True, False, True)
    (entry,) = gcn.pair([host], gcn.read_asm(asm), "l_c$0", "l.c", set())
    assert (entry.device_name, entry.key) == ("big.linkptr", "big.linkptr")


def test_a_device_link_missing_a_symbol_says_which_where_and_the_fix(offlink, tmp_path):
    """lld's undefined symbol, said as nvptx-none-ld's is: one line with the symbol, the CU
    that needs it, the GCC device library that defines it and the option that adds it; the
    link then works with that option, and nothing was written before."""
    (tmp_path / "m.c").write_text(
        "#include <math.h>\n#include <stdio.h>\n"
        "int main(void) {\n  double r = 0, x = 0.5;\n"
        "#pragma omp target map(from: r)\n  { r = cos(x); }\n"
        '  printf("%.3f\\n", r);\n  return 0;\n}\n')
    flags = ["-O2", "-fopenmp", "-foffload=amdgcn-amdhsa",
             "-foffload-options=amdgcn-amdhsa=-march=gfx906"]
    run(["gcc", *flags, "-c", "m.c"], cwd=tmp_path)
    proc = run([offlink, "link", "gcc", *flags, "m.o", "-o", "m"], cwd=tmp_path, check=False)
    assert proc.returncode != 0 and not (tmp_path / "m").exists()
    assert proc.stderr == ("offlink: error: device link for target amdgcn-amdhsa: undefined "
                           "symbol cos (needed by m.c (m.o); in libm): link with "
                           "-foffload-options=amdgcn-amdhsa=-lm\n")
    run([offlink, "link", "gcc", *flags, "-foffload-options=amdgcn-amdhsa=-lm", "m.o", "-o",
         "m", "-lm"], cwd=tmp_path)
    assert run([tmp_path / "m"]).stdout == "0.878\n"
