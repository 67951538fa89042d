"""GCC 13, 14, 15 and 16's offload objects linked by offlink as each release's own link links
them (issue 32), inside the chroots tests/chroots/make.sh builds: trixie (Debian 13: gcc-13,
gcc-14) and sid (gcc-15, gcc-16). Every program is built both ways in the chroot, with the same
link words, and run there with the LD_PRELOAD stand-in of GOMP_offload_register_ver
(tests/gcc_offload/gomp_shim.c, compiled by that GCC): the same output (host fallback: no GPU
here) and the same registration (version word, `requires` mask, host slots and their names,
indirect functions, mkoffload's own PTX files byte for byte; for amdgcn-amdhsa the kernels with
their register counts and the code object's e_flags).
"""

from __future__ import annotations

import os

import pytest
from conftest import ROOT, chroot, in_chroot
from test_gcc_offload import host_symbols

from offlink.elf import ElfFile
from offlink.errors import LinkError
from offlink.jobs import Children
from offlink.toolchains.gcc import gomp, nvptx

SAMPLE = ROOT / "tests" / "gcc_offload" / "later"
SHIM = ROOT / "tests" / "gcc_offload" / "gomp_shim.c"
RELEASES = [pytest.param("trixie", "13", id="gcc-13"), pytest.param("trixie", "14", id="gcc-14"),
            pytest.param("sid", "15", id="gcc-15"), pytest.param("sid", "16", id="gcc-16")]
VERSION = {"13": "0x20001", "14": "0x30001", "15": "0x30001", "16": "0x30001"}
# The same words on both sides; -misa=sm_80 as this machine's ptxas (CUDA 13) needs.
FLAGS = "-O2 -fopenmp -foffload=nvptx-none -foffload-options=nvptx-none=-misa=sm_80"


def both_ways(suite: str, release: str, folder, sources: list[str], driver: str = "gcc",
              flags: str = FLAGS) -> None:
    """Compile `sources` (in `folder`) with GCC `release`, link them with its own link (`ref`)
    and with offlink's (`prog`), and run each with the stand-in: `NAME.out`, `NAME.log` and
    `NAME.log.ptx` in `folder`. One chroot entry for all of it."""
    objects = " ".join(s.rsplit("/", 1)[-1].rsplit(".", 1)[0] + ".o" for s in sources)
    cc = f"{driver}-{release}"
    script = f"""set -e
gcc-{release} -O2 -shared -fPIC {SHIM} -o shim.so
{cc} {flags} -c {' '.join(sources)}
{cc} {flags} {objects} -o ref
offlink link {cc} {flags} {objects} -o prog
for b in ref prog; do LD_PRELOAD=$PWD/shim.so GOMP_SHIM_LOG=$PWD/$b.log ./$b > $b.out; done
"""
    proc = in_chroot(suite, ["bash", "-c", script], cwd=folder)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def registration(folder, name: str) -> dict:
    """What the stand-in saw of `name`'s registration: the call's words, each host slot's
    symbol with its name (and size), the indirect functions' host symbols, the PTX files; the
    unregistration checked to be the same call."""
    lines = [ln.split() for ln in (folder / f"{name}.log").read_text().splitlines()]
    heads = [i for i, ln in enumerate(lines) if ln[0] in ("register", "unregister")]
    assert [lines[i][0] for i in heads] == ["register", "unregister"], lines
    block = lines[heads[0] + 1:heads[1]]
    assert block == lines[heads[1] + 1:] and lines[heads[0]][1:] == lines[heads[1]][1:]
    at = host_symbols(folder / name)
    data = (folder / f"{name}.log.ptx").read_bytes()
    return {"head": lines[heads[0]][1:],
            "funcs": [(at[int(a)], n, dims) for _, n, a, *dims in
                      (ln for ln in block if ln[0] == "func")],
            "vars": [(at[int(a)], n, int(size)) for _, n, a, size in
                     (ln for ln in block if ln[0] == "var")],
            "ind": [at[int(a)] for _, a in (ln for ln in block if ln[0] == "ind")],
            "ptx": data.split(b"\0")[:-1]}


def same_registration(folder, release: str) -> dict:
    """offlink's registration of `prog` against GCC's of `ref`: the same call words but the
    number of PTX files (GCC's program is one file, offlink's one per CU), the same host slots
    in the same order with the same names (statics: GCC's lto_priv numbers, offlink's CU
    tags), the same indirect functions and mkoffload's own PTX files byte for byte."""
    mine, ref = registration(folder, "prog"), registration(folder, "ref")
    assert (folder / "prog.out").read_text() == (folder / "ref.out").read_text()
    assert mine["head"][:2] == ref["head"][:2] == [VERSION[release], "5"]
    assert mine["head"][2] == ref["head"][2] == "ptx" and mine["head"][4:] == ref["head"][4:]
    assert mine["funcs"] == ref["funcs"] and mine["ind"] == ref["ind"]
    assert [(s, size) for s, _, size in mine["vars"]] == [(s, size) for s, _, size in ref["vars"]]
    assert [n for s, n, _ in mine["vars"] if not s[0]] == [n for s, n, _ in ref["vars"]
                                                            if not s[0]]
    # mkoffload's own files (reverse offload's, indirect functions'): `.file N "<dummy>"`
    assert [p for p in mine["ptx"] if b'"<dummy>"' in p] == \
        [p for p in ref["ptx"] if b'"<dummy>"' in p]
    return mine


@pytest.mark.parametrize("suite,release", RELEASES)
def test_c_openmp_with_indirect_calls_registers_as_gccs_own_link(suite, release, tmp_path):
    """(GCC 13 has no `declare target indirect`: its program calls them as plain functions.)"""
    chroot(suite)
    flags = FLAGS + (" -DNO_INDIRECT" if release == "13" else "")
    both_ways(suite, release, tmp_path, [str(SAMPLE / "main.c"), str(SAMPLE / "calls.c")],
              flags=flags)
    assert (tmp_path / "prog.out").read_text() == (SAMPLE / "expected.txt").read_text()
    mine = same_registration(tmp_path, release)
    head = mine["head"]
    assert head[4:10] == ["funcs", "2/2", "vars", "4/4", "mask", "0x200"]
    if release == "13":
        assert head[10:] == [] and mine["ind"] == []
        return
    assert head[10:] == ["ind", "2/2"]
    assert sorted(name for _, name in mine["ind"]) == ["thrice", "twice"]
    assert mine["ptx"][-1].endswith(b"$offload_ind_func_table[] = {twice,thrice};\n") or \
        mine["ptx"][-1].endswith(b"$offload_ind_func_table[] = {thrice,twice};\n")


LANGUAGES = {  # source, driver, words, output
    "c++": ("cxx.cc", "g++", FLAGS, "5\n"),
    "fortran": ("fortran.f90", "gfortran", FLAGS,
                "  1.0  2.0  3.0  4.0  5.0  6.0  7.0  8.0\n"),
    "openacc": ("openacc.c", "gcc", FLAGS.replace("-fopenmp", "-fopenacc"), "2 126\n"),
}


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("suite,release", RELEASES)
def test_cxx_fortran_and_openacc_register_as_gccs_own_link(suite, release, language,
                                                           tmp_path):
    """C++ (libm, and 15+ libstdc++, on the device, as g++ adds them), Fortran (libgfortran
    and libm, as gfortran adds them) and OpenACC (launch dimensions, a `declare create`
    variable, no -mgomp): the same output and registration as GCC's link."""
    chroot(suite)
    source, driver, flags, output = LANGUAGES[language]
    both_ways(suite, release, tmp_path, [str(SAMPLE / source)], driver, flags)
    assert (tmp_path / "prog.out").read_text() == output
    mine = same_registration(tmp_path, release)
    assert mine["head"][8:] == ["mask", "0" if language == "openacc" else "0x200"] + \
        ([] if release == "13" else ["ind", "0/0"])
    if language == "openacc":
        assert [dims for *_, dims in mine["funcs"]] == [["2", "1", "32"]]


REVERSE = """#include <stdio.h>
#pragma omp requires reverse_offload
extern int side (int);
int main (void)
{
  int r = 0;
  #pragma omp target map(tofrom: r)
  {
    r = 40;
    #pragma omp target device (ancestor: 1) map(tofrom: r)
    r += 2;
  }
  printf ("%d %d\\n", r, side (1));
  return 0;
}
"""
SIDE = """#pragma omp requires reverse_offload
int side (int x)
{
  int r = x;
  #pragma omp target map(tofrom: r)
  r += 1;
  return r;
}
"""


@pytest.mark.parametrize("suite,release", RELEASES)
def test_reverse_offload_registers_its_mask_and_function_table(suite, release, tmp_path):
    """`requires reverse_offload` in every CU: the mask 0x280 and mkoffload's
    `$offload_func_table` file naming the host-only region, as GCC's link has them."""
    chroot(suite)
    (tmp_path / "r.c").write_text(REVERSE)
    (tmp_path / "s.c").write_text(SIDE)
    both_ways(suite, release, tmp_path, ["r.c", "s.c"])
    assert (tmp_path / "prog.out").read_text() == "42 2\n"
    mine = same_registration(tmp_path, release)
    assert mine["head"][8:10] == ["mask", "0x280"]
    assert b"$offload_func_table[] = {main$_omp_fn$1$nohost$0,0,0};" in mine["ptx"][-1]


USM = """#pragma omp requires unified_shared_memory
int f (int x) { int r = x;
#pragma omp target map(tofrom: r)
  r += 1;
  return r; }
"""
REV = USM.replace("unified_shared_memory", "reverse_offload").replace(" f ", " g ")
PLAIN = """extern int f (int), g (int);
int main (void) { int r = 0;
#pragma omp target map(tofrom: r)
  r = 1;
  return r + f (0) + g (0) - 3; }
"""


@pytest.mark.parametrize("suite,release", RELEASES[::3])
def test_cus_whose_requires_differ_are_refused_naming_both(suite, release, tmp_path):
    """GCC's lto1 refuses CUs whose `requires` differ without naming them; offlink names both
    CUs and both sets of clauses, in one line, and writes nothing."""
    chroot(suite)
    for name, text in (("usm.c", USM), ("rev.c", REV), ("plain.c", PLAIN)):
        (tmp_path / name).write_text(text)
    script = f"""gcc-{release} {FLAGS} -c usm.c rev.c plain.c || exit 9
gcc-{release} {FLAGS} usm.o rev.o plain.o -o ref > gcc.txt 2>&1 && exit 8
offlink link gcc-{release} {FLAGS} usm.o rev.o plain.o -o prog"""
    proc = in_chroot(suite, ["bash", "-c", script], cwd=tmp_path)
    assert "non-identical clauses" in (tmp_path / "gcc.txt").read_text()
    assert proc.returncode == 1 and proc.stderr.splitlines() == [
        "offlink: error: usm.c (usm.o) has `omp requires` unified_shared_memory and rev.c "
        "(rev.o) reverse_offload: the CUs of one program must agree (GCC's link refuses them "
        "too: \"OpenMP 'requires' directive with non-identical clauses in multiple "
        "compilation units\"; libgomp would abort at run time)"]
    assert not (tmp_path / "prog").exists()


def test_objects_of_gcc_15_and_16_in_one_link_are_refused_naming_both(tmp_path):
    chroot("sid")
    (tmp_path / "a.c").write_text(PLAIN)
    script = f"""gcc-15 {FLAGS} -c a.c && gcc-16 {FLAGS} -c a.c -o a16.o
offlink link gcc-16 {FLAGS} a.o a16.o -o prog"""
    proc = in_chroot("sid", ["bash", "-c", script], cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.splitlines() == [
        "offlink: error: a.c (a.o) is a GCC 15 offload object and a.c (a16.o) a GCC 16 one: "
        "one link takes one GCC release's objects (lto1 reads its own bytecode only, libgomp "
        "one registration layout); compile them all with one GCC"]
    assert not (tmp_path / "prog").exists()


GCN = "-O2 -fopenmp -foffload=amdgcn-amdhsa -foffload-options=amdgcn-amdhsa=-march=gfx90a"


def gcn_registration(folder, name: str) -> dict:
    """What the stand-in saw of `name`'s amdgcn-amdhsa registration (GCN's lines: the kernels
    with their register counts, the host slots by symbol) and the image's ELF e_flags."""
    lines = [ln.split() for ln in (folder / f"{name}.log").read_text().splitlines()]
    heads = [i for i, ln in enumerate(lines) if ln[0] in ("register", "unregister")]
    assert [lines[i][0] for i in heads] == ["register", "unregister"], lines
    block = lines[heads[0] + 1:heads[1]]
    at = host_symbols(folder / name)
    return {"head": lines[heads[0]][1:],
            "kernels": [ln[1:] for ln in block if ln[0] == "kernel"],
            "funcs": [at[int(ln[1])] for ln in block if ln[0] == "func"],
            "vars": [(at[int(ln[1])], int(ln[2])) for ln in block if ln[0] == "var"],
            "ind": [at[int(ln[1])] for ln in block if ln[0] == "ind"],
            "e_flags": ElfFile.open(folder / f"{name}.log.gcn").e_flags}


@pytest.mark.parametrize("suite,release,march", [
    *((*p.values, m) for p in RELEASES[1:] for m in ("gfx90a", "default")),
    # GCC 16's generic targets (its multilibs; code object v6, `generic v1` in e_flags)
    ("sid", "16", "gfx9-generic"), ("sid", "16", "gfx10-3-generic")])
def test_gcn_registers_as_gccs_own_link(suite, release, march, tmp_path):
    """amdgcn-amdhsa (gfx90a, and the release's default: gfx900 for 14 and 15, gfx90a for
    16): registration 0x30003, the `requires` mask, the kernels with their register counts in
    the host table's order, the indirect functions and variables by host slot, the code
    object's e_flags (xnack and sramecc as mkoffload sets them): as GCC's own link; the image
    is offlink's own link of the CUs (its size differs by a few hundred bytes: GCC links one
    assembly file)."""
    chroot(suite)
    flags = GCN.split(" -foffload-options")[0] if march == "default" else \
        GCN.replace("gfx90a", march)
    both_ways(suite, release, tmp_path, [str(SAMPLE / "main.c"), str(SAMPLE / "calls.c")],
              flags=flags)
    assert (tmp_path / "prog.out").read_text() == (SAMPLE / "expected.txt").read_text()
    mine, ref = gcn_registration(tmp_path, "prog"), gcn_registration(tmp_path, "ref")
    assert mine["head"][:3] == ref["head"][:3] == ["0x30003", "8", "gcn"]
    assert mine["head"][4:] == ref["head"][4:] == ["kernels", "4/2", "vars", "4/4", "mask",
                                                   "0x200", "ind", "2/2"]
    for part in ("kernels", "funcs", "vars", "ind", "e_flags"):
        assert mine[part] == ref[part], part


@pytest.mark.parametrize("program", ["c++", "fortran", "openacc", "reverse"])
@pytest.mark.parametrize("suite,release", RELEASES[1:])
def test_gcn_cxx_fortran_openacc_and_reverse_offload_register_as_gccs_own_link(
        suite, release, program, tmp_path):
    chroot(suite)
    if program == "reverse":
        (tmp_path / "r.c").write_text(REVERSE)
        (tmp_path / "s.c").write_text(SIDE)
        sources, driver, flags, output = ["r.c", "s.c"], "gcc", GCN, "42 2\n"
    else:
        source, driver, flags, output = LANGUAGES[program]
        sources = [str(SAMPLE / source)]
        flags = GCN.replace("-fopenmp", "-fopenacc") if program == "openacc" else GCN
    both_ways(suite, release, tmp_path, sources, driver, flags)
    assert (tmp_path / "prog.out").read_text() == output
    mine, ref = gcn_registration(tmp_path, "prog"), gcn_registration(tmp_path, "ref")
    assert mine["head"][:3] == ref["head"][:3] and mine["head"][4:] == ref["head"][4:]
    mask = {"openacc": "0", "reverse": "0x280"}.get(program, "0x200")
    assert mine["head"][8:10] == ["mask", mask]
    for part in ("kernels", "funcs", "vars", "ind", "e_flags"):
        assert mine[part] == ref[part], part


def test_gcn_of_a_release_offlink_has_not_checked_is_refused_in_one_line(tmp_path):
    """GCC 13's amdgcn-amdhsa registration is not checked here (Debian 13 cannot install
    gcc-13-offload-amdgcn beside gcc-14's): its objects linked for it are refused."""
    chroot("trixie")
    (tmp_path / "a.c").write_text(PLAIN.replace("+ f (0) + g (0) - 3", ""))
    script = ("gcc-13 -O2 -fopenmp -foffload=nvptx-none -c a.c && offlink link gcc-13 -O2 "
              "-fopenmp -foffload=amdgcn-amdhsa a.o -o prog")
    proc = in_chroot("trixie", ["bash", "-c", script], cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.splitlines() == [
        "offlink: error: a.c (a.o): offlink builds the amdgcn-amdhsa images of GCC 12, 14, 15, "
        "16; GCC 13's registration is not checked here: link with -foffload=nvptx-none, or "
        "with GCC 13's own link"]


# -- the registration's pieces, without a toolchain ---------------------------------------------

def test_requires_masks_combine_as_lto1_combines_them():
    assert gomp.combined_mask(["a", "b", "c"], [None, 0x200, 0x200]) == 0x200
    assert gomp.combined_mask(["a", "b"], [0, 0x280]) == 0x280
    assert gomp.combined_mask([], []) == 0
    with pytest.raises(LinkError, match=r"^a has `omp requires` unified_shared_memory and c "
                                        r"none: "):
        gomp.combined_mask(["a", "b", "c"], [0x220, 0, 0x200])


class _Seen(Children):
    def run(self, argv, what, env=None):
        self.argv = list(argv)
        return super().run(argv, what, env)


def test_a_compile_under_env_runs_its_tool_alone_with_the_requires_file_set():
    # GCC 13+'s compile command starts `env GCC_OFFLOAD_OMP_REQUIRES_FILE=PATH` (as shown and
    # keyed); it runs as the tool itself, with the variable in its environment alone.
    children = _Seen()
    tool = ["sh", "-c", 'printf "%s" "$GCC_OFFLOAD_OMP_REQUIRES_FILE"']
    said = nvptx.run_compile(children, ["env", f"{nvptx.REQUIRES_FILE}=/t/cu.o.omp", *tool],
                             "compile")
    assert said == "/t/cu.o.omp" and children.argv == tool
    assert nvptx.REQUIRES_FILE not in os.environ
    assert nvptx.run_compile(children, tool, "compile") == "" and children.argv == tool


IMAGE = (b"// BEGIN PREAMBLE\n.version 7.0\n.target sm_80\n.address_size 64\n"
         b"// BEGIN GLOBAL FUNCTION DECL: f\n.visible .func (.param .u32 %value_out) f "
         b"(.param .u32 %in_ar0);\n"
         b"// BEGIN GLOBAL FUNCTION DECL: k$nohost$0\n.visible .func k$nohost$0 "
         b"(.param .u64 %in_ar0);\n"
         b'//:FUNC_MAP "k"\n//:IND_FUNC_MAP "f"\n\0'
         b"// BEGIN PREAMBLE\n.version 6.0\n.target sm_30\n\0")


def test_mkoffloads_own_ptx_files_byte_for_byte():
    """As GCC 14-16's mkoffload prints them (C strings without newlines): the indirect
    functions' file takes the image's last .version/.target, the reverse-offload one those
    of the last file with MAP lines."""
    assert gomp.ind_func_table(IMAGE, ["f"]) == (
        b'.version 6.0.target sm_30.file 2 "<dummy>".func __dummy$func2 ( );'
        b".func __dummy$func2 ( ){}.extern .func (.param .u32 %value_out) f "
        b"(.param .u32 %in_ar0);.visible .global .align 8 .u64 $offload_ind_func_table[] = "
        b"{f};\n")
    assert gomp.func_table(IMAGE, ["k", "k$nohost$0"]) == (
        b'.version 7.0.target sm_80.file 1 "<dummy>".func __dummy$func ( );'
        b".func __dummy$func ( ){}.extern .func k$nohost$0 (.param .u64 %in_ar0);"
        b".visible .global .align 8 .u64 $offload_func_table[] = {0,k$nohost$0};\n")
    with pytest.raises(LinkError, match="no declaration of function 'g'"):
        gomp.ind_func_table(IMAGE, ["g"])


def test_c_source_in_each_releases_layout():
    twelve = gomp.c_source(0, IMAGE, ["k"], [], "12")
    assert "omp_requires_mask" not in twelve and "ind_fn_num" not in twelve
    assert "(0x10001, __OFFLOAD_TABLE__" in twelve and "__offload_ind_func_table" not in twelve
    for release in ("14", "15", "16"):
        text = gomp.c_source(0, IMAGE, ["k$nohost$0"], [], release, 0x280, ("f",))
        assert "  uintptr_t omp_requires_mask;\n" in text and "unsigned ind_fn_num;\n}" in text
        assert "  640, ptx_objs, 4,\n" in text and "__offlink_gomp_fn_names, 1, 1\n};" in text
        assert "(0x30001, __OFFLOAD_TABLE__" in text and "ptx_objs[4];" in text
        assert "&__offload_ind_func_table, &__offload_ind_funcs_end\n};" in text
        # the image's two files, then mkoffload's reverse-offload and indirect files
        assert text.index("ptx_objs[2].code = __offlink_gomp_func_table;") < \
            text.index("ptx_objs[3].code = __offlink_gomp_ind_func_table;")
    with pytest.raises(LinkError, match="GCC 12 has no `declare target indirect`"):
        gomp.c_source(0, IMAGE, [], [], "12", 0, ("f",))


MATH = """#include <math.h>
#include <stdio.h>
int main (void) { double r = 0, x = 0.5;
#pragma omp target map(tofrom: r) firstprivate(x)
  r = cos (x) + erf (x);
  printf ("%.3f\\n", r); return 0; }
"""


def test_a_missing_device_symbol_names_the_fix_the_release_takes(tmp_path):
    """GCC 14+ links the link line's -lm on the device too: without it GCC's own link fails,
    and offlink's says so in one line with that fix; with it both links run alike."""
    chroot("trixie")
    (tmp_path / "m.c").write_text(MATH)
    script = f"""gcc-14 {FLAGS} -c m.c || exit 9
gcc-14 {FLAGS} m.o -o ref 2> gcc.txt && exit 8
offlink link gcc-14 {FLAGS} m.o -o prog"""
    proc = in_chroot("trixie", ["bash", "-c", script], cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.splitlines() == [
        "offlink: error: device link for target nvptx-none: unresolved symbol erf (needed by "
        "m.c (m.o); in libm): link with -lm"]
    script = f"gcc-14 {FLAGS} m.o -o ref -lm && offlink link gcc-14 {FLAGS} m.o -o prog -lm " \
             f"&& ./ref && ./prog"
    proc = in_chroot("trixie", ["bash", "-c", script], cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "1.398\n1.398\n", proc.stderr


@pytest.mark.parametrize("target", ["nvptx-none", "amdgcn-amdhsa"])
def test_a_library_on_the_compile_line_is_linked_on_the_device_as_mkoffload_links_it(
        target, tmp_path):
    """GCC 14+ records a compile line's -lm in the object as -l_GCC_m, which mkoffload links as
    -lm (libgomp's tests put -lm in their compile options: interop-2.c): offlink's device link
    does the same, and both programs run alike."""
    chroot("sid")
    (tmp_path / "m.c").write_text(MATH)
    flags = FLAGS if target == "nvptx-none" else GCN
    script = f"gcc-16 -lm {flags} -c m.c && gcc-16 {flags} m.o -o ref -lm && " \
             f"offlink link gcc-16 {flags} m.o -o prog -lm && ./ref && ./prog"
    proc = in_chroot("sid", ["bash", "-c", script], cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "1.398\n1.398\n", proc.stderr


LIBRARY = """#pragma omp requires unified_shared_memory
int libf (int x) { int r = x;
#pragma omp target map(tofrom: r)
  r += 1;
  return r; }
"""
APP = """#include <stdio.h>
extern int libf (int);
int main (void) { int r = 0;
#pragma omp target map(tofrom: r)
  r = 41;
  printf ("%d\\n", libf (r)); return 0; }
"""


def test_a_library_whose_requires_differ_is_warned_about_naming_both(tmp_path):
    """A program without `requires` linked against a library with `requires
    unified_shared_memory`: GCC's own program gets libgomp's error at run time and hangs at
    exit; offlink's link warns, naming both, whether GCC or offlink linked the library, and
    stripped (the mask is read as `offlink inspect` reads a registration: from the code that
    loads the registration call's arguments, not by the data's symbol)."""
    chroot("trixie")
    (tmp_path / "lib.c").write_text(LIBRARY)
    (tmp_path / "app.c").write_text(APP)
    script = f"""set -e
gcc-14 {FLAGS} -fPIC -c lib.c app.c
gcc-14 {FLAGS} -shared lib.o -o libbygcc.so
offlink link gcc-14 {FLAGS} -shared lib.o -o libbyofflink.so
offlink link gcc-14 {FLAGS} app.o -L. -lbygcc -Wl,-rpath,$PWD -o prog1
offlink link gcc-14 {FLAGS} app.o libbyofflink.so -Wl,-rpath,$PWD -o prog2
strip -o libstripped.so libbygcc.so
offlink link gcc-14 {FLAGS} app.o libstripped.so -Wl,-rpath,$PWD -o prog4
offlink link gcc-14 {FLAGS} app.o lib.o -o prog3 || echo "rc=$?"
timeout -s KILL 3 ./prog2 || true"""
    proc = in_chroot("trixie", ["bash", "-c", script], cwd=tmp_path)
    said = ("has `omp requires` none and {} unified_shared_memory: libgomp refuses the two at "
            "run time (its \"OpenMP 'requires' directive\" error), and GCC's own program then "
            "hangs at exit")
    # (the same two CUs in one link: refused, as GCC's own link refuses them)
    assert proc.stderr.splitlines()[:4] == [
        f"offlink: warning: prog1 {said.format('./libbygcc.so')}",
        f"offlink: warning: prog2 {said.format('libbyofflink.so')}",
        f"offlink: warning: prog4 {said.format('libstripped.so')}",
        "offlink: error: app.c (app.o) has `omp requires` none and lib.c (lib.o) "
        "unified_shared_memory: the CUs of one program must agree (GCC's link refuses them "
        "too: \"OpenMP 'requires' directive with non-identical clauses in multiple "
        "compilation units\"; libgomp would abort at run time)"]
    # what the warning foretells: libgomp's own message (then the hang, cut short here)
    assert proc.stdout.splitlines()[0] == "rc=1" and "libgomp: OpenMP 'requires' directive " \
        "with 'unified_shared_memory' specified only in some compilation units" in proc.stderr


def test_the_host_compilers_release_is_asked_once_then_kept(tmp_path, monkeypatch):
    """The registration checks the host compiler's release (`-dumpversion`) on every link;
    the answer is kept in the cache under the compiler's identity, so a relink runs no
    compiler for it, and a compiler with other content is asked again."""
    from offlink.cache.store import Cache

    log = tmp_path / "calls"
    gcc = tmp_path / "gcc-14"
    gcc.write_text(f"#!/bin/sh\necho \"$*\" >> {log}\necho 14.2.0\n")
    gcc.chmod(0o755)
    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("offlink.cache.freshness.SETTLED", -1.0)
    (tmp_path / "cache").mkdir()
    for _ in range(3):  # three links
        assert gomp.compiler_major(str(gcc), Cache.open(True)) == "14"
    assert log.read_text().splitlines().count("-dumpversion") == 1
    assert gomp.compiler_major(str(gcc)) == "14"  # no cache: asked
    gcc.write_text(f"#!/bin/sh\necho \"$*\" >> {log}\necho 15.1.0\n")
    assert gomp.compiler_major(str(gcc), Cache.open(True)) == "15"
    assert log.read_text().splitlines().count("-dumpversion") == 3
