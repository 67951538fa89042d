"""clang-22's OpenMP objects for NVIDIA (sm_80) and AMD (gfx90a) GPUs, linked with LLVM 22's
device runtime (libompdevice.a) by offlink and by clang-22's own link, the reference.

No Debian package has LLVM 21+'s GPU device runtime: `.ci/run` builds LLVM 22.1.8's from its
sources (tests/device_runtime/build.sh) into .ci/llvm-22-devrt, laid out as an LLVM install
(lib/<triple>/libompdevice.a). Both links find it as clang's device link finds it
(`-Xoffload-linker -L`, `LIBRARY_PATH` for nvptx64). No GPU here: the images are compared and
both programs run their host fallback. The programs: tests/llvm_offload/gpu (three CUs:
statics of one name in each, kernels calling another CU's functions, a `declare target
indirect` function called through a host pointer, sum and max reductions), one CU, and
samples/clang_openmp's C++ program.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, copy_sample, needs_tool, run
from test_clang_amdgpu import ONE_CU

from offlink.elf import STT_FUNC, ElfFile
from offlink.formats.cubin import cubin_symbols
from offlink.toolchains.llvm.dialect import linked_entries_of_kind

LLVM = Path("/usr/lib/llvm-22")
DEVRT = Path(os.environ.get("OFFLINK_LLVM22_DEVRT", ROOT / ".ci" / "llvm-22-devrt"))
DEVRT_SRC = ROOT / ".ci" / "llvm-22-devrt-src"
OMP_INCLUDE = Path(os.environ.get("OFFLINK_OMP22_INCLUDE",
                                  ROOT / ".ci" / "libomp-22-dev" / "include"))
PROGRAM = ROOT / "tests" / "llvm_offload" / "gpu"
CUDA = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
ROCM_LIBS = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"  # rocm-device-libs
LIBS = ["-L/usr/lib/llvm-22/lib", "-L/usr/lib/llvm-19/lib"]
TRIPLES = {"sm_80": "nvptx64-nvidia-cuda", "gfx90a": "amdgcn-amd-amdhsa"}

needs_gpu22 = needs_tool(
    shutil.which("clang-22") is None or not (LLVM / "bin" / "clang-linker-wrapper").exists()
    or not (LLVM / "bin" / "ld.lld").exists() or not (CUDA / "bin" / "nvlink").exists()
    or not os.path.isdir(ROCM_LIBS) or not (OMP_INCLUDE / "omp.h").exists()
    or not (DEVRT / "lib" / TRIPLES["sm_80"] / "libompdevice.a").exists(),
    "clang-22, clang-tools-22, lld-22, CUDA, rocm-device-libs, LLVM 22's omp.h or the LLVM 22 "
    "device runtime (.ci/llvm-22-devrt: tests/device_runtime/build.sh) missing (.ci/run makes "
    "them)")


def offload(arch: str) -> list[str]:
    """The words of a compile and a link for `arch`."""
    if arch == "sm_80":
        return ["-fopenmp", "--offload-arch=sm_80", f"--cuda-path={CUDA}"]
    return ["-fopenmp", "--offload-arch=gfx90a"]


def compile_words(arch: str) -> list[str]:
    """A compile's own words: clang-22's non-LTO sm_80 compile links libomptarget-nvptx.bc
    into the CU; gfx90a needs ROCm's device libraries, which have no code object 6 here."""
    if arch == "sm_80":
        return [f"--libomptarget-nvptx-bc-path={DEVRT / 'lib' / TRIPLES[arch]}"]
    return [f"--rocm-device-lib-path={ROCM_LIBS}", "-Xarch_device", "-mcode-object-version=5"]


def runtime_words(arch: str) -> list[str]:
    """Where the device link finds libompdevice.a, as clang's link is told."""
    return ["-Xoffload-linker", f"-L{DEVRT / 'lib' / TRIPLES[arch]}"]


def host_env() -> dict[str, str]:
    env = {**os.environ, "LD_LIBRARY_PATH": str(LLVM / "lib")}
    env.pop("OMP_TARGET_OFFLOAD", None)
    return env


def compile_cu(src: Path, obj: Path, words: list[str], arch: str, level: str = "-O2") -> None:
    """`src` compiled by clang-22 with a link's `words` for `arch`, at `level`."""
    run(["clang-22", level, *words, *compile_words(arch), f"-I{OMP_INCLUDE}", f"-I{PROGRAM}",
         "-c", src, "-o", obj])


def build(offlink, folder: Path, arch: str, lto: bool, sources: list[Path]) -> Path:
    """`sources` compiled for `arch` and linked both ways in `folder`: prog (offlink's), its
    image prog.img, prog.clang and clang's image (--save-temps keeps it)."""
    folder.mkdir()
    words = offload(arch) + (["-foffload-lto"] if lto else [])
    objs = []
    for src in sources:
        objs.append(folder / (src.stem + ".o"))
        compile_cu(src, objs[-1], words, arch)
    link = [*words, *objs, *runtime_words(arch), *LIBS]
    run(["clang-22", *link, "-o", folder / "prog.clang", "-Wl,--save-temps"], cwd=folder)
    run([offlink, "link", "clang-22", *link, "-o", folder / "prog"])
    run([offlink, "extract", folder / "prog", "--target", f"openmp-{TRIPLES[arch]}",
         "--output", folder / "prog.img"])
    return folder


def clang_image(folder: Path, arch: str) -> Path:
    (image,) = folder.glob(f"prog.clang.*.{arch}.img")
    return image


def kernels_and_globals(image: Path, arch: str) -> dict[str, tuple]:
    """An image's kernels and globals: (kind, size) by name (NVIDIA: the cubin's symbols; AMD:
    the code object's exported symbols, with the kernels' descriptors, a kernel's size 0)."""
    data = image.read_bytes()
    if arch == "sm_80":
        return {n: (s.kind, s.size) for n, s in cubin_symbols(data, str(image)).items()}
    # (a kernel's code is the per-CU compile's: its size is not clang's whole-program one's)
    return {s.name: (s.st_type, 0 if s.st_type == STT_FUNC else s.st_size)
            for s in ElfFile(data, str(image)).symbols(True) if s.defined and s.name}


def entries(program: Path) -> list[tuple[str, str, int, int]]:
    """The offload entries the host program registers with libomptarget (name, kind, size,
    flags), from its linked llvm_offload_entries."""
    rows = linked_entries_of_kind(ElfFile.open(str(program)), "openmp")
    return sorted((e.name, e.kind, e.size, e.flags) for _, e in rows)


@pytest.fixture(scope="module", params=[("sm_80", False), ("sm_80", True), ("gfx90a", False),
                                        ("gfx90a", True)],
                ids=["sm_80", "sm_80-lto", "gfx90a", "gfx90a-lto"])
def built(request, offlink, tmp_path_factory):
    """One CU and the three-CU program, each built both ways for one (arch, -foffload-lto)."""
    arch, lto = request.param
    if shutil.which("clang-22") is None or not (DEVRT / "lib").is_dir():
        pytest.skip("clang-22 or the LLVM 22 device runtime missing")
    top = tmp_path_factory.mktemp(f"gpu22-{arch}-{lto}")
    (top / "k.c").write_text(ONE_CU)
    one = build(offlink, top / "one", arch, lto, [top / "k.c"])
    many = build(offlink, top / "many", arch, lto,
                 [PROGRAM / "main.c", PROGRAM / "field.c", PROGRAM / "stats.c"])
    return arch, lto, one, many


def _sections(image: Path) -> dict[str, bytes]:
    elf = ElfFile(image.read_bytes(), str(image))
    return {s.name: bytes(elf.content(s)) for s in elf.sections if s.name}


# ld.lld's symbol tables list an LTO link's symbols in the bitcode's order, an object link's
# in the object's: the only bytes offlink's one-CU AMD image differs in from clang's.
SYMBOL_ORDER = {".dynsym", ".symtab", ".hash", ".gnu.hash", ".dynstr", ".strtab"}


@needs_gpu22
def test_one_cu_image_is_clangs(built):
    """One CU: NVIDIA's image is clang-22's byte for byte (default and -foffload-lto); AMD's
    has the same size, the same sections with the same bytes, and the same symbols, which
    ld.lld lists in another order (clang's device LTO runs in ld.lld, which orders an LTO's
    symbols by the bitcode's symbol table; offlink's per-CU compile gives it an object)."""
    arch, _, one, _ = built
    mine, theirs = (one / "prog.img").read_bytes(), clang_image(one, arch).read_bytes()
    if arch == "sm_80":
        assert mine == theirs
        return
    assert len(mine) == len(theirs)
    a, b = _sections(one / "prog.img"), _sections(clang_image(one, arch))
    assert sorted(a) == sorted(b)
    assert {n for n in a if a[n] != b[n]} <= SYMBOL_ORDER
    syms = [sorted((s.name, s.st_value, s.st_size, s.st_bind, s.st_type) for s in
                   ElfFile(p.read_bytes()).symbols(True)) for p in (one / "prog.img",
                                                                     clang_image(one, arch))]
    assert syms[0] == syms[1]


@needs_gpu22
def test_programs_print_the_same_both_ways(built):
    """Host fallback (no GPU here): the same output from offlink's link and clang-22's."""
    _, _, one, many = built
    for folder, want in ((one, "sum 6048\n"), (many, (PROGRAM / "expected.txt").read_text())):
        mine = run([folder / "prog"], env=host_env()).stdout
        assert mine == want
        assert run([folder / "prog.clang"], env=host_env()).stdout == want


@needs_gpu22
def test_several_cus_have_clangs_kernels_globals_and_entries(offlink, built):
    """Three CUs: the same kernels and globals (with their sizes) as clang-22's image, and the
    same offload entries registered; NVIDIA's default objects give clang's image byte for
    byte (each CU's cubin is clang's, the device link is clang's own). Each -foffload-lto CU
    is compiled on its own: no cross-CU inlining, so the code differs from clang's
    whole-program LTO."""
    arch, lto, _, many = built
    mine, theirs = many / "prog.img", clang_image(many, arch)
    a, b = kernels_and_globals(mine, arch), kernels_and_globals(theirs, arch)
    if arch == "sm_80" and lto:
        # The CUs share the image's one runtime (they define functions other CUs call, and
        # call the runtime: docs/llvm.md), which reads the CUs' __omp_rtl_* settings: those
        # stay visible, where clang's whole-program LTO folds them.
        extra = set(a) - set(b)
        assert extra and all(n.startswith("__omp_rtl_") for n in extra), extra
        a = {n: v for n, v in a.items() if n not in extra}
    assert a == b
    names = set(kernels_and_globals(mine, arch))
    assert {"scale", "__omp_rtl_device_environment"} <= names or arch == "sm_80"
    assert sum(n.startswith("__omp_offloading_") and n.endswith(("_l13", "_l17", "_l23"))
               for n in names) == 3
    assert entries(many / "prog") == entries(many / "prog.clang")
    assert len(entries(many / "prog")) >= 5  # 3 kernels, scale, square's pointer cell
    if arch == "sm_80" and not lto:
        assert mine.read_bytes() == theirs.read_bytes()


@needs_gpu22
def test_sm80_relinks_through_the_cache_give_clangs_image(offlink, tmp_path):
    """clang-22's sm_80 default objects relinked with a cache, each image compared with
    clang-22's own link's of the same objects, byte for byte, and each program run:
    - cold: clang-nvlink-wrapper runs, and its device-runtime part is kept beside the host link
      (toolchains/llvm/nvlink_wrapper.py);
    - nothing changed: the image from the cache;
    - one CU's code changed (stats.c at -O1), its symbols not: nvlink alone, with the kept part;
    - one CU's symbols changed (stats.c at -O0: its functions no longer inlined): the wrapper
      again."""
    words = offload("sm_80")
    objs = [tmp_path / f"{name}.o" for name in ("main", "field", "stats")]
    for obj in objs:
        compile_cu(PROGRAM / f"{obj.stem}.c", obj, words, "sm_80")
    link = [*words, *objs, *runtime_words("sm_80"), *LIBS]
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
    said = {}
    for change, level in (("cold", ""), ("nothing", ""), ("code", "-O1"), ("symbols", "-O0")):
        if level:
            compile_cu(PROGRAM / "stats.c", objs[2], words, "sm_80", level)
        said[change] = run([offlink, "link", "--verbose", "clang-22", *link, "-o",
                            tmp_path / "prog"], env=env).stderr
        run([offlink, "extract", tmp_path / "prog", "--target", "openmp-nvptx64-nvidia-cuda",
             "--output", tmp_path / "prog.img"])
        for old in tmp_path.glob("prog.clang.*"):
            old.unlink()
        run(["clang-22", *link, "-o", tmp_path / "prog.clang", "-Wl,--save-temps"],
            cwd=tmp_path)
        assert (tmp_path / "prog.img").read_bytes() == \
            clang_image(tmp_path, "sm_80").read_bytes(), change
        assert run([tmp_path / "prog"], env=host_env()).stdout == \
            (PROGRAM / "expected.txt").read_text()

    def ran(text: str, tool: str) -> bool:  # a command line offlink ran, by --verbose
        return any(line.startswith("offlink: ") and os.path.basename(
            line.split()[1]) == tool for line in text.splitlines())

    assert ran(said["cold"], "clang-nvlink-wrapper") and "image linked" in said["cold"]
    assert "--dry-run --save-temps" in said["cold"]  # the part kept for the next link
    assert "image from cache" in said["nothing"]
    assert ran(said["code"], "nvlink") and not ran(said["code"], "clang-nvlink-wrapper")
    assert ran(said["symbols"], "clang-nvlink-wrapper")


@needs_gpu22
def test_library_path_finds_the_runtime_as_for_clang(offlink, tmp_path):
    """clang's NVIDIA device link also searches LIBRARY_PATH (Cuda.cpp): so does offlink's."""
    (tmp_path / "k.c").write_text(ONE_CU)
    words = offload("sm_80")
    run(["clang-22", "-O2", *words, *compile_words("sm_80"), f"-I{OMP_INCLUDE}", "-c",
         tmp_path / "k.c", "-o", tmp_path / "k.o"])
    env = {**os.environ, "LIBRARY_PATH": str(DEVRT / "lib" / TRIPLES["sm_80"])}
    run([offlink, "link", "clang-22", *words, tmp_path / "k.o", *LIBS, "-o", tmp_path / "k"],
        env=env)
    assert run([tmp_path / "k"], env=host_env()).stdout == "sum 6048\n"
    bare = run([offlink, "link", "clang-22", *words, tmp_path / "k.o", *LIBS, "-o",
                tmp_path / "k2"], check=False)
    (line,) = bare.stderr.splitlines()
    assert bare.returncode == 1 and not (tmp_path / "k2").exists()
    assert line.startswith("offlink: error: target openmp-nvptx64-nvidia-cuda: clang-22's "
                           "OpenMP device runtime libompdevice.a is not in "), line
    assert "/usr/lib/llvm-22/lib (where clang's own device link looks)" in line


@needs_tool(not (DEVRT_SRC / "openmp" / "device").is_dir() or shutil.which("clang++-22") is None
            or not (LLVM / "bin" / "ld.lld").exists(),
            "LLVM 22's device runtime sources (.ci/llvm-22-devrt-src: tests/llvm_offload/"
            "fetch.sh DIR 22 device-runtime), clang-22 or lld-22 missing (.ci/run)")
def test_device_runtime_builds_as_an_llvm_install_byte_for_byte(tmp_path):
    """tests/device_runtime/build.sh: lib/<triple>/libompdevice.a with libomptarget-<name>.bc
    as its one member, for nvptx64 and amdgcn; a second build gives the same bytes."""
    out = tmp_path / "devrt"
    subprocess.run([ROOT / "tests" / "device_runtime" / "build.sh", DEVRT_SRC, out], check=True)
    for triple, name in (("nvptx64-nvidia-cuda", "nvptx"), ("amdgcn-amd-amdhsa", "amdgpu")):
        lib = out / "lib" / triple
        bc = (lib / f"libomptarget-{name}.bc").read_bytes()
        assert bc[:4] == b"BC\xc0\xde" and bc in (lib / "libompdevice.a").read_bytes()
        if (DEVRT / "lib" / triple).is_dir():
            assert (DEVRT / "lib" / triple / "libompdevice.a").read_bytes() == \
                (lib / "libompdevice.a").read_bytes()
    listing = run([LLVM / "bin" / "llvm-ar", "t", out / "lib" / "amdgcn-amd-amdhsa" /
                   "libompdevice.a"]).stdout
    assert listing.split() == ["libomptarget-amdgpu.bc"]
    assert re.search(rb"__kmpc_target_init", (out / "lib" / "nvptx64-nvidia-cuda" /
                                              "libomptarget-nvptx.bc").read_bytes())


def _heavy_program(folder: Path) -> list[Path]:
    """Two CUs: a kernel (kern.c) calling heavy() in another CU (heavy.c), which keeps 72
    doubles live at once: more VGPRs than the kernel's own CU needs."""
    n = 72
    loads = "\n".join(f"  double v{i} = p[{i}];" for i in range(n))
    total = " + ".join(f"v{i} * v{n - 1 - i}" for i in range(n))
    (folder / "heavy.c").write_text(
        "#pragma omp begin declare target\n"
        f"double heavy(const double *p) {{\n{loads}\n"
        '  __asm__ volatile("" ::: "memory");\n'
        f"  return {total};\n}}\n#pragma omp end declare target\n")
    (folder / "kern.c").write_text(f"""#include <stdio.h>
#pragma omp begin declare target
double heavy(const double *p);
#pragma omp end declare target
int main(void) {{
  double in[4 * {n}], out[4];
  for (int i = 0; i < 4 * {n}; i++) in[i] = (i % 13) * 0.5;
#pragma omp target teams distribute parallel for map(to : in) map(from : out)
  for (int i = 0; i < 4; i++) out[i] = heavy(&in[i * {n}]);
  printf("%.1f %.1f %.1f %.1f\\n", out[0], out[1], out[2], out[3]);
  return 0;
}}
""")
    return [folder / "kern.c", folder / "heavy.c"]


@needs_gpu22
def test_amd_kernel_calling_a_bigger_function_of_another_cu_is_refused(offlink, tmp_path):
    """clang-22's whole-program link gives the kernel the VGPRs heavy() needs (its metadata
    says more than 128); compiled on its own the kernel's CU gives it its own module's needs
    (fewer than heavy's 128): silently wrong code on a GPU. offlink refuses the link in one
    line naming the kernel and the callee, and writes nothing."""
    words = offload("gfx90a")
    objs = []
    for src in _heavy_program(tmp_path):
        objs.append(tmp_path / (src.stem + ".o"))
        run(["clang-22", "-O2", *words, *compile_words("gfx90a"), "-c", src, "-o", objs[-1]])
    link = [*words, *objs, *runtime_words("gfx90a"), *LIBS]
    run(["clang-22", *link, "-o", tmp_path / "prog.clang", "-Wl,--save-temps"], cwd=tmp_path)
    notes = run([LLVM / "bin" / "llvm-readelf", "--notes",
                 clang_image(tmp_path, "gfx90a")]).stdout
    assert int(re.search(r"\.vgpr_count:\s+(\d+)", notes).group(1)) > 128
    r = run([offlink, "link", "clang-22", *link, "-o", tmp_path / "prog"], check=False)
    (line,) = r.stderr.splitlines()
    assert r.returncode == 1 and not (tmp_path / "prog").exists()
    m = re.fullmatch(r"offlink: error: target openmp-amdgcn-amd-amdhsa: kernel "
                     r"(__omp_offloading_\w+_main_l8) \(kern\.c \(\S+/kern\.o\)\) calls heavy "
                     r"\(heavy\.c \(\S+/heavy\.o\)\), which needs 128 VGPRs; compiled on its "
                     r"own "
                     r"the kernel was given (\d+), .*", line)
    assert m and int(m.group(2)) < 128, line


@needs_gpu22
@pytest.mark.parametrize("arch", ["sm_80", "gfx90a"])
def test_clang_openmp_cxx_sample_both_ways(offlink, tmp_path, arch):
    """samples/clang_openmp's C++ program (two CUs: a class with a static declare target
    member, templates, a function called on the device from the other CU) built by
    clang++-22 for the GPU: the same kernels and globals as clang's image, and the same
    output (host fallback)."""
    s = copy_sample("clang_openmp", tmp_path)
    objs = []
    for n in ("main_cxx", "shapes"):
        objs.append(s / f"{n}.o")
        run(["clang++-22", "-O2", *offload(arch), *compile_words(arch), f"-I{OMP_INCLUDE}",
             "-c", s / f"{n}.cpp", "-o", objs[-1]])
    link = [*offload(arch), *objs, *runtime_words(arch), *LIBS]
    run(["clang++-22", *link, "-o", s / "prog.clang", "-Wl,--save-temps"], cwd=s)
    run([offlink, "link", "clang++-22", *link, "-o", s / "prog"])
    run([offlink, "extract", s / "prog", "--target", f"openmp-{TRIPLES[arch]}", "--output",
         s / "prog.img"])
    assert kernels_and_globals(s / "prog.img", arch) == \
        kernels_and_globals(clang_image(s, arch), arch)
    out = run([s / "prog"], env=host_env()).stdout
    assert out == run([s / "prog.clang"], env=host_env()).stdout
    assert "twice(21) on the device: 42" in out
