"""clang's `-foffload-lto` objects for x86_64 (device code as bitcode) linked by offlink: each
CU compiled on its own by `llvm-lto2 run` with the resolutions clang-linker-wrapper's LTO
gives it (toolchains/llvm/openmp.py), the symbols read from the bitcode itself (formats/bitcode.py).

The programs must run as clang's own link makes them; a declare target function no other CU
names is internalized (inlined into its kernel and dropped, as clang's LTO does), one another
CU calls is kept, and a CU is compiled again when another CU starts naming one of its symbols.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import copy_sample, make_sample, needs_tool, run

from offlink.formats.bitcode import Symbol, symbols
from offlink.toolchains.llvm.openmp import lto_resolutions

CLANG = "clang-19"
TRIPLE = "x86_64-pc-linux-gnu"
OFFLOAD = ["-fopenmp", f"-fopenmp-targets={TRIPLE}", "-foffload-lto"]
LLVM_LIB = "/usr/lib/llvm-19/lib"
LTO2 = "/usr/lib/llvm-19/bin/llvm-lto2"
TARGET = f"openmp-{TRIPLE}"

needs_clang = needs_tool(
    shutil.which(CLANG) is None or not Path(LLVM_LIB, "libomptarget.so").exists()
    or not os.access(LTO2, os.X_OK),
    "clang-19, libomptarget or llvm-lto2 missing (apt-get install clang-19 libomp-19-dev "
    "llvm-19)")


def _bitcode(obj: Path, tmp: Path) -> bytes:
    """The device bitcode an -foffload-lto object carries."""
    out = tmp / (obj.stem + ".bc")
    run(["clang-offload-packager-19", obj, f"--image=file={out},triple={TRIPLE},kind=openmp"])
    return out.read_bytes()


def _dump_symtab(path: Path) -> list[tuple[str, str, str]]:
    """(flags, name, section) of `llvm-lto2 dump-symtab`."""
    out: list[list[str]] = []
    for line in run([LTO2, "dump-symtab", path]).stdout.splitlines():
        if len(line) > 9 and line[8] == " " and line[0] in "DHP" and line[1] in "U-":
            out.append([line[:8], line[9:], ""])
        elif line.startswith("         section "):
            out[-1][2] = line[len("         section "):]
    return [(f, n, s) for f, n, s in out]


CXX = r"""
#include <cstdio>
template <class T> T sq(T x) { return x * x; }
inline int inl(int a) { return a + 1; }
__attribute__((weak)) int w = 3;
int comm;
static int st(int x) { return x * 2; }
__attribute__((section("mysect"))) int insect = 5;
#pragma omp declare target
int dev(int x) { return sq(x) + inl(x) + st(x) + insect; }
__attribute__((weak)) int wdev(int x) { return x; }
int extern_dev(int);
#pragma omp end declare target
#pragma omp begin declare target indirect
int ind(int x) { return x + 7; }
#pragma omp end declare target
int main() { int r = 0;
#pragma omp target map(tofrom: r)
  r = dev(3) + wdev(1) + extern_dev(2);
  printf("%d %d\n", r, sq(2.0) > 1); return w + comm; }
"""


@needs_clang
def test_bitcode_symbols_are_llvm_lto2s(tmp_path):
    """The reader lists what `llvm-lto2 dump-symtab` lists, in its order (llvm-lto2 wants one
    resolution per symbol): device and host bitcode, C and C++ (weak, common, sections,
    templates, indirect functions)."""
    src = tmp_path / "x.cpp"
    src.write_text(CXX)
    run(["clang++-19", "-O2", *OFFLOAD, "-fcommon", "-c", src, "-o", tmp_path / "x.o"])
    run(["clang++-19", "-O2", "-flto", "-fcommon", "-c", src, "-o", tmp_path / "host.bc"])
    (tmp_path / "dev.bc").write_bytes(_bitcode(tmp_path / "x.o", tmp_path))
    for name in ("dev.bc", "host.bc"):
        path = tmp_path / name
        mine = [(s.dump_flags, s.name, s.section) for s in symbols(path.read_bytes(), name)]
        assert mine == _dump_symtab(path), name
        assert len(mine) > 5
    host = {s.name: s for s in symbols((tmp_path / "host.bc").read_bytes(), "host.bc")}
    assert host["insect"].section == "mysect" and host["w"].dump_flags[3] == "W"


def test_bitcode_without_a_symbol_table_is_left_to_llvm():
    # a bare bitcode header and an IDENTIFICATION block only: no SYMTAB/STRTAB blocks
    assert symbols(b"BC\xc0\xde", "empty.bc") is None


def _sym(name: str, vis: str = "H", undefined: bool = False, section: str = "",
         weak: bool = False, omit: bool = False) -> Symbol:
    flags = "DHP".index(vis) | (1 << 10)
    flags |= (1 << 3 if undefined else 0) | (1 << 4 if weak else 0) | (1 << 9 if omit else 0)
    return Symbol(name, flags, section)


def test_resolutions_internalize_only_what_nothing_else_needs():
    a = [_sym("kernel", "P", weak=True), _sym("helper"), _sym("shared"), _sym("dup", weak=True),
         _sym("var", "P"), _sym("entry", "D", weak=True, section="omp_offloading_entries"),
         _sym("plain", "D"), _sym("inline_odr", "D", weak=True, omit=True),
         _sym("pinned"), _sym("sin", "D", undefined=True)]
    b = [_sym("shared", undefined=True), _sym("dup", weak=True), _sym("own")]
    ra, rb = lto_resolutions([a, b], {"pinned"})
    assert dict(ra) == {
        "kernel": "plx",  # protected: visible
        "helper": "pl",  # hidden, used by no one else: internalized
        "shared": "plx",  # b calls it
        "dup": "plx",  # b defines it too: the image link picks one
        "var": "plx",
        "entry": "px",  # its section gets __start/__stop symbols
        "plain": "px",  # default visibility
        "inline_odr": "p",  # linkonce_odr: may be omitted
        "pinned": "plx",  # an entry's name or a name an ELF CU uses
        "sin": "",
    }
    assert dict(rb) == {"shared": "", "dup": "plx", "own": "pl"}


A_C = """#include <stdio.h>
#pragma omp declare target
int helper_only_here(int x) { return x * 3; }
int shared_fn(int x) { return x + 100; }
#pragma omp end declare target
int run_a(int x) {
  int r = 0;
#pragma omp target map(tofrom: r) firstprivate(x)
  r = helper_only_here(x) + shared_fn(x);
  return r;
}
"""

B_C = """#include <stdio.h>
#pragma omp declare target
int shared_fn(int);
int b_own(int x) { return BODY; }
#pragma omp end declare target
int run_a(int);
int main(void) {
  int r = 0;
#pragma omp target map(tofrom: r)
  r = b_own(5);
  printf("%d %d\\n", run_a(2), r);
  return 0;
}
"""


def _image_symbols(offlink: str, binary: Path, tmp: Path) -> set[str]:
    run([offlink, "extract", binary, "--target", TARGET, "--output", tmp / "image.so"])
    return set(run(["nm", tmp / "image.so"]).stdout.split())


@needs_clang
@pytest.mark.parametrize("liblto", ["1", "0"], ids=["liblto-worker", "llvm-lto2"])
def test_hidden_functions_no_other_cu_names_are_internalized(offlink, tmp_path, liblto):
    """Two CUs: `helper_only_here` is inlined into a.c's kernel and dropped (clang's LTO does
    the same), `shared_fn` stays for b.c. The first link has b.c not call `shared_fn`, so a.c
    is compiled with it internalized; once b.c calls it, a.c must be compiled again (its
    resolutions are part of its cache key), or the image would miss `shared_fn`. The same
    with the commands run by the libLTO worker (toolchains/llvm/liblto.py) and by llvm-lto2."""
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache"),
           "LD_LIBRARY_PATH": LLVM_LIB, "OFFLINK_LIBLTO": liblto}
    shown = f"offlink: libLTO: {LTO2} run" if liblto == "1" else f"offlink: {LTO2} run"
    (tmp_path / "a.c").write_text(A_C)
    objs = [tmp_path / "a.o", tmp_path / "b.o"]
    link = [offlink, "link", "--verbose", CLANG, *OFFLOAD, *objs, "-o", tmp_path / "app"]
    outputs = []
    for body in ("x + 1", "shared_fn(x)"):
        (tmp_path / "b.c").write_text(B_C.replace("BODY", body))
        for n in ("a", "b"):
            run([CLANG, "-O2", *OFFLOAD, "-c", tmp_path / f"{n}.c", "-o", tmp_path / f"{n}.o"])
        said = run(link, env=env).stderr
        compiled = [m for m in re.split(r"(?=offlink: )", said) if m.startswith(shown)]
        run([CLANG, *OFFLOAD, *objs, "-o", tmp_path / "app.clang"])
        out = run([tmp_path / "app"], env=env).stdout
        assert out == run([tmp_path / "app.clang"], env=env).stdout
        outputs.append(out)
        a_compile = next(c for c in compiled if "-a.c.bc" in c)
        assert ",helper_only_here,pl " in a_compile + " "
        assert (",shared_fn,plx" in a_compile) == (body == "shared_fn(x)")
        image = _image_symbols(offlink, tmp_path / "app", tmp_path)
        assert "helper_only_here" not in image  # inlined into the kernel, then dropped
        assert ("shared_fn" in image) == (body == "shared_fn(x)")
    assert outputs == ["108 6\n", "108 105\n"]


NVPTX = ["-fopenmp", "--offload-arch=sm_80", f"--libomptarget-nvptx-bc-path={LLVM_LIB}",
         "--cuda-path=/usr/local/cuda", "-foffload-lto"]
NVPTX_TARGET = "openmp-nvptx64-nvidia-cuda"
needs_cuda = needs_tool(not os.access("/usr/local/cuda/bin/ptxas", os.X_OK),
                        "CUDA's ptxas and nvlink (/usr/local/cuda) are needed for sm_80")


@needs_clang
@needs_cuda
def test_nvptx_hidden_functions_no_other_cu_names_are_internalized(offlink, tmp_path):
    """sm_80: each -foffload-lto CU is compiled by llvm-lto2 with the device runtime's
    bitcode (OpenMPOpt sees it, as in clang's LTO) and the resolutions clang's LTO gives it:
    `helper_only_here` internalized, `shared_fn` kept only while b.c calls it (then a.c is
    compiled again: its key changes), the runtime internalized but for its llvm.used globals;
    then ptxas -c. The image has clang's LTO link's kernels and rows."""
    from offlink.formats.cubin import cubin_names

    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
    (tmp_path / "a.c").write_text(A_C)
    objs = [tmp_path / "a.o", tmp_path / "b.o"]
    link = [offlink, "link", "--verbose", CLANG, *NVPTX, *objs, "-o", tmp_path / "app"]
    runtime = f"{LLVM_LIB}/libomptarget-nvptx-sm_80.bc"
    for body in ("x + 1", "shared_fn(x)"):
        (tmp_path / "b.c").write_text(B_C.replace("BODY", body))
        for n in ("a", "b"):
            run([CLANG, "-O2", *NVPTX, "-c", tmp_path / f"{n}.c", "-o", tmp_path / f"{n}.o"])
        said = run(link, env=env).stderr
        compiled = [m for m in re.split(r"(?=offlink: )", said)
                    if m.startswith(f"offlink: {LTO2} run") and ".c.bc " in m]
        assert len(compiled) == 2  # a.c again too: its resolutions changed
        a_compile = next(c for c in compiled if "-a.c.bc" in c) + " "
        assert "--filetype=asm " in a_compile and f".bc {runtime} -o " in a_compile
        assert ",helper_only_here,pl " in a_compile
        assert (",shared_fn,plx " in a_compile) == (body == "shared_fn(x)")
        assert f"{runtime},__kmpc_target_init,pl " in a_compile  # this CU's copy
        assert f"{runtime},__omp_rtl_device_environment,plx " in a_compile  # llvm.used
        assert f"{runtime},__omp_rtl_debug_kind, " in a_compile  # the CU's own setting
        assert len(re.findall(r"offlink: \S*ptxas -m64 -O2 --gpu-name sm_80 --output-file "
                              r"\S*\.o \S*\.o\.0 -c", said)) == 2
        run([offlink, "extract", tmp_path / "app", "--target", NVPTX_TARGET, "--output",
             tmp_path / "image.cubin"])
        run([CLANG, *NVPTX, *objs, "-o", tmp_path / "app.clang", "-Wl,--save-temps"],
            cwd=tmp_path)
        mine = cubin_names((tmp_path / "image.cubin").read_bytes(), "offlink")
        theirs = cubin_names((tmp_path / "app.clang.nvptx64.sm_80.img").read_bytes(), "clang")
        offloading = {n for n in theirs if n.startswith("__omp_offloading_")}
        assert len(offloading) == 6 and offloading <= mine  # 2 kernels and their environments
        table = json.loads(run([offlink, "inspect", "--json", tmp_path / "app"]).stdout)
        assert {r["name"] for r in table["table"]["symbols"]} == \
            {n for n in offloading if not n.endswith("_environment")}


def test_a_function_other_cus_call_that_calls_the_runtime_makes_the_runtime_shared():
    """Only a function kept for other CUs (not a kernel) in a CU that calls the device
    runtime makes every CU call the image's one runtime (calls_runtime_across_cus)."""
    from offlink.formats.bitcode import FB_EXECUTABLE, FB_UNDEFINED
    from offlink.toolchains.llvm.openmp_nvptx import calls_runtime_across_cus

    fn, und = FB_EXECUTABLE | 1, FB_EXECUTABLE | FB_UNDEFINED
    runtime = [Symbol("omp_get_thread_num", FB_EXECUTABLE | 1)]
    tid = [Symbol("tid", fn), Symbol("omp_get_thread_num", und)]
    kernel = [Symbol("__omp_offloading_1_k_l1", fn), Symbol("omp_get_thread_num", und)]
    own = [Symbol("helper", fn), Symbol("omp_get_thread_num", und)]
    no_rt = [Symbol("tid", fn), Symbol("sin", und)]
    assert calls_runtime_across_cus([(tid, [("tid", "plx"), ("omp_get_thread_num", "")])],
                                    runtime)
    assert not calls_runtime_across_cus([(tid, [("tid", "pl"), ("omp_get_thread_num", "")])],
                                        runtime)  # internalized: no other CU calls it
    assert not calls_runtime_across_cus(
        [(kernel, [("__omp_offloading_1_k_l1", "px"), ("omp_get_thread_num", "")])], runtime)
    init = [Symbol("shared_fn", fn), Symbol("__kmpc_target_init", und)]  # its kernel's call
    assert not calls_runtime_across_cus(
        [(init, [("shared_fn", "plx"), ("__kmpc_target_init", "")])],
        [Symbol("__kmpc_target_init", FB_EXECUTABLE | 1)])
    assert not calls_runtime_across_cus([(own, [("helper", "pl"), ("omp_get_thread_num", "")]),
                                         (no_rt, [("tid", "plx"), ("sin", "")])], runtime)


TID_C = """#include <omp.h>
#pragma omp declare target
int tid(void) { return omp_get_thread_num() + omp_get_level(); }
#pragma omp end declare target
"""

TID_MAIN_C = """#include <omp.h>
#include <stdio.h>
#pragma omp declare target
int tid(void);
#pragma omp end declare target
int main(void) {
  int r[64];
#pragma omp target teams num_teams(1) map(from: r)
  {
#pragma omp parallel num_threads(32)
    r[omp_get_thread_num()] = tid();
  }
  printf("%d\\n", r[3]);
  return 0;
}
"""


@needs_clang
@needs_cuda
def test_nvptx_a_runtime_call_from_another_cus_kernel_uses_the_images_one_runtime(offlink,
                                                                                   tmp_path):
    """`tid` (tid.c) calls the device runtime and main.c's kernel calls it: with its CU's own
    copy of the runtime LLVM 19 compiles it to `exit` (that copy's state is set up by no
    kernel), so every CU is compiled without the runtime and calls the image's one copy (the
    runtime's part, compiled once), as in clang's LTO link: no CU command has the runtime's
    bitcode, and the image defines `omp_get_thread_num` for `tid` to call."""
    from offlink.formats.cubin import cubin_names

    (tmp_path / "tid.c").write_text(TID_C)
    (tmp_path / "main.c").write_text(TID_MAIN_C)
    objs = [tmp_path / "main.o", tmp_path / "tid.o"]
    for o in objs:
        run([CLANG, "-O2", *NVPTX, "-c", o.with_suffix(".c"), "-o", o])
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
    said = run([offlink, "link", "--verbose", CLANG, *NVPTX, *objs, "-o", tmp_path / "app"],
               env=env).stderr
    compiled = [m for m in re.split(r"(?=offlink: )", said)
                if m.startswith(f"offlink: {LTO2} run") and ".c.bc " in m]
    assert len(compiled) == 2 and not any("libomptarget-nvptx" in c for c in compiled)
    assert ",tid,plx" in next(c for c in compiled if "-tid.c.bc" in c)
    run([offlink, "extract", tmp_path / "app", "--target", NVPTX_TARGET, "--output",
         tmp_path / "image.cubin"])
    names = cubin_names((tmp_path / "image.cubin").read_bytes(), "image")
    assert {"tid", "omp_get_thread_num", "omp_get_level"} <= names


@needs_clang
def test_the_sample_links_and_runs_with_offload_lto(offlink, tmp_path):
    """samples/clang_openmp (a C program with a shared library of its own target code, a C++
    program; kernels, declare target variables, indirect functions) compiled with
    -foffload-lto: offlink's links print what clang's own links print."""
    s = copy_sample("clang_openmp", tmp_path)
    make_sample(offlink, s, "run", "clang-run", CFLAGS="-O2 -foffload-lto",
                LDFLAGS="-foffload-lto")
    expected = (s / "expected.txt").read_text()
    assert (s / "build" / "output.txt").read_text() == expected
    assert (s / "build" / "output.clang.txt").read_text() == expected


def test_a_cu_whose_symbols_cannot_be_read_compiles_whole():
    """No symbol table the reader knows (None): no resolutions, every CU compiled whole."""
    from offlink.formats.payload import Payload
    from offlink.model import CU
    from offlink.toolchains.llvm.openmp import cu_resolutions

    cu = CU("x.o", Payload(TARGET, "llvm-bc", "x.c", CLANG, (), b"BC\xc0\xde"))
    assert cu_resolutions([cu]) == {}


@needs_clang
def test_a_relink_with_nothing_changed_writes_no_device_object(offlink, tmp_path):
    """The image comes from the cache by the CUs' keys alone: no cached device object is read
    or written to the work folder (300 of them took ~0.3 s CPU a relink)."""
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
    (tmp_path / "a.c").write_text(A_C)
    (tmp_path / "b.c").write_text(B_C.replace("BODY", "shared_fn(x)"))
    for n in ("a", "b"):
        run([CLANG, "-O2", *OFFLOAD, "-c", tmp_path / f"{n}.c", "-o", tmp_path / f"{n}.o"])
    link = [offlink, "link", "--timings", CLANG, *OFFLOAD, tmp_path / "a.o", tmp_path / "b.o",
            "-o", tmp_path / "app"]
    run(link, env=env)
    said = run([*link[:2], "--save-temps", *link[2:]], env=env).stderr
    kept = Path(re.search(r"temporary files kept in (\S+)", said).group(1))
    try:
        assert f"{TARGET}: 2 CUs, 0 compiled, 2 from cache; image from cache" in said
        assert [p.name for p in (kept / TARGET).iterdir() if p.suffix == ".o"] == []
    finally:
        shutil.rmtree(kept)


@needs_clang
def test_corrupt_bitcode_symbol_tables_are_format_errors_or_none(tmp_path):
    """Every bit flip in a real CU's bitcode symbol table blocks either reads, or is None, or
    one FormatError; a link then compiles the CUs whole (cu_resolutions), never crashes."""
    from offlink.errors import FormatError

    src = tmp_path / "a.c"
    src.write_text(A_C)
    run([CLANG, "-O2", *OFFLOAD, "-c", src, "-o", tmp_path / "a.o"])
    data = _bitcode(tmp_path / "a.o", tmp_path)
    # the symbol and string tables, and their blocks' abbreviations, are at the end
    for pos in range(max(0, len(data) - 1500), len(data)):
        for flip in (1 << (pos % 8), 0xFF):
            bad = bytearray(data)
            bad[pos] ^= flip
            try:
                symbols(bytes(bad), "a.bc")
            except FormatError:
                pass


X_CPP = r"""
#include <cstdio>
template <class T> T sq(T x) { return x * x; }
inline int inl(int a) { return a + 1; }
#pragma omp declare target
__attribute__((weak)) int w = 3;
int comm;
static int st(int x) { return x * 2; }
__attribute__((section("mysect"))) int insect = 5;
int dev(int x) { return sq(x) + inl(x) + st(x) + insect + w + comm; }
__attribute__((weak)) int wdev(int x) { return x; }
int extern_dev(int);
#pragma omp end declare target
#pragma omp begin declare target indirect
int ind(int x) { return x + 7; }
#pragma omp end declare target
int main() { int r = 0; int (*f)(int) = ind;
#pragma omp target map(tofrom: r)
  r = dev(3) + wdev(1) + extern_dev(2) + f(1);
  printf("%d %d\n", r, sq(2.0) > 1); return 0; }
"""

EXTERN_DEV_CPP = """
template <class T> T sq(T x) { return x * x; }
inline int inl(int a) { return a + 1; }
#pragma omp declare target
int extern_dev(int x) { return inl(x) * 5 + sq(x); }
#pragma omp end declare target
"""


def _device_objects(offlink: str, link: list, env: dict) -> dict[str, bytes]:
    """The target objects a link compiled (--save-temps), by name."""
    said = run([offlink, "link", "--save-temps", "--verbose", *link], env=env).stderr
    kept = Path(re.search(r"temporary files kept in (\S+)", said).group(1))
    try:
        return {"said": said.encode(), **{p.name: p.read_bytes() for p in (kept / TARGET).iterdir()
                                         if p.suffix == ".o"}}
    finally:
        shutil.rmtree(kept)


def _linkage(obj: bytes) -> set[tuple]:
    """What an object's symbols mean to a link: name, binding, type, visibility, defined
    (functions and variables; not section symbols or local labels such as exception tables)."""
    from offlink.elf import ElfFile

    return {(s.name, s.st_bind, s.st_type, s.st_visibility, s.defined)
            for s in ElfFile(obj).symbols() if s.name and (s.is_global or s.st_type in (1, 2))}


def _four_cus(tmp_path) -> list:
    """The C++ and C CUs the libLTO worker tests link (templates, inline, weak, common,
    indirect functions; an internalized helper and an exported one), compiled with
    -foffload-lto at -O2; their objects."""
    (tmp_path / "x.cpp").write_text(X_CPP)
    (tmp_path / "extern_dev.cpp").write_text(EXTERN_DEV_CPP)
    (tmp_path / "a.c").write_text(A_C)
    (tmp_path / "b.c").write_text(B_C.replace("BODY", "shared_fn(x)").replace("main", "main_b"))
    objs = []
    for src in ("x.cpp", "extern_dev.cpp", "a.c", "b.c"):
        objs.append(tmp_path / (src.split(".")[0] + ".o"))
        run([CLANG, "-O2", *OFFLOAD, "-c", tmp_path / src, "-o", objs[-1]])
    return objs


@needs_clang
def test_the_liblto_worker_compiles_as_llvm_lto2(offlink, tmp_path):
    """Each CU's `llvm-lto2 run` command is done by the libLTO worker (one LLVM for the link).
    C CUs: every device object is llvm-lto2's, byte for byte (the internalized helper and the
    exported one). C++ (templates, inline, weak, common, sections, static, indirect functions,
    declare target variables): the same symbols with the same binding, type and visibility
    (libLTO's internalize takes a lone internalized inline function out of its comdat, and
    lays the functions out in another order). The program prints what clang's link prints."""
    objs = _four_cus(tmp_path)
    link = ["clang++-19", *OFFLOAD, *objs, "-o", tmp_path / "app"]
    env = {**os.environ, "OFFLINK_NO_CACHE": "1", "LD_LIBRARY_PATH": LLVM_LIB}
    worker = _device_objects(offlink, link, {**env, "OFFLINK_LIBLTO": "1"})
    out = run([tmp_path / "app"], env=env).stdout
    lto2 = _device_objects(offlink, link, {**env, "OFFLINK_LIBLTO": "0"})
    said = worker.pop("said").decode()
    assert said.count(f"offlink: libLTO: {LTO2} run") == 4
    assert f"offlink: {LTO2} run" not in said
    assert lto2.pop("said").decode().count(f"offlink: {LTO2} run") == 4
    assert sorted(worker) == sorted(lto2) and len(worker) == 4
    for name in worker:
        if name.endswith(".c.o"):
            assert worker[name] == lto2[name], name
        assert _linkage(worker[name]) == _linkage(lto2[name]), name
    a_syms = _linkage(worker["0002-a.c.o"])
    assert "helper_only_here" not in {s[0] for s in a_syms}  # internalized, inlined, dropped
    assert ("shared_fn", 1, 2, 2, True) in a_syms  # b.c calls it: global, hidden
    again = _device_objects(offlink, link, {**env, "OFFLINK_LIBLTO": "1"})
    again.pop("said")
    assert again == worker  # deterministic: the same objects, byte for byte
    run(["clang++-19", *OFFLOAD, *objs, "-o", tmp_path / "app.clang"])
    assert out == run([tmp_path / "app.clang"], env=env).stdout


@needs_clang
def test_a_libLTO_that_cannot_be_used_leaves_the_commands_to_llvm_lto2(offlink, tmp_path):
    """A worker that cannot load its libLTO (here a file that is no library) ends with one
    warning line; every CU is compiled by llvm-lto2 and the program runs as clang's."""
    (tmp_path / "a.c").write_text(A_C)
    (tmp_path / "b.c").write_text(B_C.replace("BODY", "shared_fn(x)"))
    for n in ("a", "b"):
        run([CLANG, "-O2", *OFFLOAD, "-c", tmp_path / f"{n}.c", "-o", tmp_path / f"{n}.o"])
    (tmp_path / "libLTO.so").write_text("not a library\n")
    env = {**os.environ, "OFFLINK_NO_CACHE": "1", "LD_LIBRARY_PATH": LLVM_LIB,
           "OFFLINK_LIBLTO": str(tmp_path / "libLTO.so")}
    said = run([offlink, "link", "--verbose", CLANG, *OFFLOAD, tmp_path / "a.o",
                tmp_path / "b.o", "-o", tmp_path / "app"], env=env).stderr
    assert said.count(f"offlink: {LTO2} run") == 2
    warnings = [ln for ln in said.splitlines() if "warning" in ln]
    assert len(warnings) == 1 and "libLTO worker" in warnings[0], said
    assert "OSError" in warnings[0] and "compiled by llvm-lto2" in warnings[0]
    assert run([tmp_path / "app"], env=env).stdout == "108 105\n"


def test_the_worker_takes_only_llvm_lto2s_commands_of_its_shape():
    from offlink.toolchains.llvm.liblto import parse_lto2

    base = [LTO2, "run", "-O2", "--relocation-model=pic"]
    res = ["-r=w/a.bc,k,plx", "-r=w/a.bc,f,pl", "-r=w/a.bc,g,px", "-r=w/a.bc,sin,"]
    assert parse_lto2([*base, "w/a.bc", "-o", "w/a.o", *res]) == {
        "source": "w/a.bc", "output": "w/a.o.0", "level": "2", "cpu": "", "preserve": ["k", "g"]}
    for n in "123":  # the link line's level: the pipeline's and the code generator's
        assert parse_lto2([LTO2, "run", f"-O{n}", f"--cg-opt-level={n}", *base[3:], "a.bc",
                           "-o", "o"])["level"] == n
    assert parse_lto2([*base, "--mcpu=znver3", "w/a.bc", "-o", "w/a.o"])["cpu"] == "znver3"
    assert parse_lto2([*base, "w/a,b.bc", "-o", "o", "-r=w/a,b.bc,x,y,px"])["preserve"] == \
        ["x,y"]
    for other in ([LTO2, "run", "-O3", "--relocation-model=pic", "a.bc", "-o", "o"],
                  [LTO2, "run", "-O3", "--cg-opt-level=2", *base[3:], "a.bc", "-o", "o"],
                  [LTO2, "run", "-O0", "--cg-opt-level=0", *base[3:], "a.bc", "-o", "o"],
                  [*base, "a.bc", "-o", "o", "--save-temps"],
                  [*base, "a.bc", "-o", "o", "-r=b.bc,k,px"],
                  [*base, "a.bc", "-o", "o", "-r=a.bc,k,pxz"],
                  [*base, "--mcpu=x", "--mattr=+avx", "a.bc", "-o", "o"],
                  ["clang", "-c", "a.bc", "-o", "o", "x"],
                  [*base, "a.bc", "o"]):
        assert parse_lto2(other) is None, other


def test_the_worker_protocol_carries_any_name_but_nul_and_newline():
    from offlink.toolchains.llvm.liblto_worker import (
        decode_reply,
        decode_request,
        encode_reply,
        encode_request,
    )

    request = {"source": "w/a b.bc", "output": "w/a.o.0", "level": "3", "cpu": "",
               "preserve": ["k", "x,y", "_ZN1a1bE", "é"]}
    assert decode_request(encode_request(7, request)) == {**request, "id": 7}
    assert encode_request(1, {**request, "preserve": ["a\nb"]}) is None
    assert decode_reply(encode_reply(3, False, "bad\nthing\0")) == (3, False, "bad\nthing\0")


LEVELS = {(): 2, ("-O0",): 0, ("-O1",): 1, ("-O2",): 2, ("-O3",): 3, ("-Os",): 2, ("-Oz",): 2,
          ("-Og",): 1, ("-O",): 1, ("-O4",): 3, ("-Ofast",): 3, ("-O3", "-O0"): 0,
          ("-O1", "-Xlinker", "-O3"): 1, ("-O1", "-Xoffload-linker", "-O3"): 1,
          ("-O3", "-mllvm", "-O0"): 3, ("-Xopenmp-target=x86_64-pc-linux-gnu", "-O0"): 2,
          ("--optimize=3",): 3}


def test_the_link_lines_optimisation_level_is_the_one_clang_gives_its_wrapper():
    """clang 19's driver gives clang-linker-wrapper `--opt-level=ON` from the link line's
    last -O word (none: the wrapper's default O2); a separate option's value is no -O word."""
    from offlink.toolchains.llvm.openmp import link_opt_level

    for words, level in LEVELS.items():
        assert link_opt_level(["a.o", *words, "-o", "app"]) == level, words


@needs_clang
def test_link_opt_level_agrees_with_clang_19s_driver(tmp_path):
    from offlink.toolchains.llvm.openmp import link_opt_level

    (tmp_path / "a.o").write_bytes(b"")  # -### reads no input, but wants it there
    for words in LEVELS:
        said = run([CLANG, "-###", *OFFLOAD, *words, tmp_path / "a.o", "-o", tmp_path / "a"],
                   cwd=tmp_path).stderr
        given = re.search(r'"--opt-level=O(\d)"', said)
        assert (int(given.group(1)) if given else 2) == LEVELS[words] == \
            link_opt_level([*words, "a.o"]), words


@needs_clang
@pytest.mark.parametrize("level", ["-O0", "-O1", "-O3"])
def test_the_link_lines_level_is_the_device_ltos(offlink, tmp_path, level):
    """clang's link LTO-compiles the device code at the link line's level (pipeline and code
    generator); so does each CU's compile: the command shows it, the libLTO worker's C
    objects are llvm-lto2's byte for byte and its C++ objects have the same symbols (at -O0
    llvm-lto2 runs every CU: the worker would keep a dead internalized helper), and the
    program prints what clang's link of the same objects at that level prints."""
    objs = _four_cus(tmp_path)
    link = ["clang++-19", *OFFLOAD, level, *objs, "-o", tmp_path / "app"]
    env = {**os.environ, "OFFLINK_NO_CACHE": "1", "LD_LIBRARY_PATH": LLVM_LIB}
    n = level[2:]
    words = f"run -O{n} --cg-opt-level={n} --relocation-model=pic "
    worker = _device_objects(offlink, link, {**env, "OFFLINK_LIBLTO": "1"})
    said = worker.pop("said").decode()
    by_worker = 0 if level == "-O0" else 4
    assert said.count(f"offlink: libLTO: {LTO2} {words}") == by_worker
    assert said.count(f"offlink: {LTO2} {words}") == 4 - by_worker
    assert f"clang++-19 --target={TRIPLE} {level} -Wl,--no-undefined" in said  # the image link
    out = run([tmp_path / "app"], env=env).stdout
    lto2 = _device_objects(offlink, link, {**env, "OFFLINK_LIBLTO": "0"})
    assert lto2.pop("said").decode().count(f"offlink: {LTO2} {words}") == 4
    assert sorted(worker) == sorted(lto2) and len(worker) == 4
    for name in worker:
        if name.endswith(".c.o") or level == "-O0":
            assert worker[name] == lto2[name], name
        assert _linkage(worker[name]) == _linkage(lto2[name]), name
    run(["clang++-19", *OFFLOAD, level, *objs, "-o", tmp_path / "app.clang"])
    assert out == run([tmp_path / "app.clang"], env=env).stdout == "55 1\n"


@needs_clang
def test_a_cu_compiled_at_one_level_is_not_taken_from_the_cache_for_another(offlink,
                                                                           tmp_path):
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
    (tmp_path / "a.c").write_text(A_C)
    (tmp_path / "b.c").write_text(B_C.replace("BODY", "shared_fn(x)"))
    for n in ("a", "b"):
        run([CLANG, "-O2", *OFFLOAD, "-c", tmp_path / f"{n}.c", "-o", tmp_path / f"{n}.o"])

    def link(*level):
        return run([offlink, "link", "--timings", CLANG, *OFFLOAD, *level, tmp_path / "a.o",
                    tmp_path / "b.o", "-o", tmp_path / "app"], env=env).stderr

    assert f"{TARGET}: 2 CUs, 2 compiled, 0 from cache" in link()
    assert f"{TARGET}: 2 CUs, 2 compiled, 0 from cache" in link("-O3")
    assert f"{TARGET}: 2 CUs, 0 compiled, 2 from cache" in link("-O3")
    assert f"{TARGET}: 2 CUs, 0 compiled, 2 from cache" in link("-O2")  # the default's
    assert f"{TARGET}: 2 CUs, 2 compiled, 0 from cache" in link("-O0")


@needs_clang
def test_dry_run_shows_every_command_a_real_link_runs(offlink, tmp_path):
    """--dry-run prints each CU's llvm-lto2 command and the rename of its `X.0` output that
    the real link does after it; run by a shell on the real link's bitcode, they write the
    real link's objects."""
    (tmp_path / "a.c").write_text(A_C)
    (tmp_path / "b.c").write_text(B_C.replace("BODY", "shared_fn(x)"))
    for n in ("a", "b"):
        run([CLANG, "-O2", *OFFLOAD, "-c", tmp_path / f"{n}.c", "-o", tmp_path / f"{n}.o"])
    link = [CLANG, *OFFLOAD, "-O1", tmp_path / "a.o", tmp_path / "b.o", "-o", tmp_path / "app"]
    dry = run([offlink, "link", "--dry-run", *link]).stdout.splitlines()
    assert len(dry) == 6, dry  # per CU llvm-lto2 and the rename, the image link, the host link
    real = _device_objects(offlink, link, {**os.environ, "OFFLINK_NO_CACHE": "1",
                                           "OFFLINK_LIBLTO": "0"})
    real.pop("said")
    work = tmp_path / "work" / TARGET
    work.mkdir(parents=True)
    for i, name in enumerate(("0000-a.c", "0001-b.c")):
        assert dry[2 * i].startswith(f"{LTO2} run -O1 --cg-opt-level=1 ") and \
            f" -o \"$OFFLINK_WORK\"/{TARGET}/{name}.o " in dry[2 * i]
        assert dry[2 * i + 1] == f'mv "$OFFLINK_WORK"/{TARGET}/{name}.o.0 ' \
            f'"$OFFLINK_WORK"/{TARGET}/{name}.o'
        _bitcode(tmp_path / f"{name[5]}.o", tmp_path)
        shutil.copy(tmp_path / f"{name[5]}.bc", work / f"{name}.bc")
    for line in dry[:4]:
        subprocess.run(["sh", "-ec", line], check=True,
                       env={**os.environ, "OFFLINK_WORK": str(tmp_path / "work")})
    assert {p.name: p.read_bytes() for p in work.iterdir() if p.suffix == ".o"} == real
