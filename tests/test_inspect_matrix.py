"""`offlink inspect`, `--json`, `--symbol`, `--address`, `--explain` and `extract` on what each
toolchain links itself and on offlink's link of the same objects (tests/inspect_matrix: one
program with a kernel, a declare target function and variable, and a function of the host
alone): both give the same facts (images and their kernels, entries, registration), the
document validates against the published schema, and each name is answered in the toolchain's
terms. Each binary is built once per module."""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import pytest
from conftest import ROOT, chroot, in_chroot, need_tool, run
from test_clang import CUDA_HOME
from test_clang22_gpu import (
    DEVRT,
    LIBS,
    LLVM,
    ROCM_LIBS,
    TRIPLES,
    compile_words,
    offload,
    runtime_words,
)

SOURCES = ROOT / "tests" / "inspect_matrix"
SCHEMA = json.loads((ROOT / "offlink" / "cli" / "inspect.schema.json").read_text())
NVPTX = ["-foffload=nvptx-none", "-foffload-options=nvptx-none=-misa=sm_80"]
TWO = ["-foffload-options=nvptx-none=-misa=sm_80"]  # no -foffload=: every installed target
CLANG19_SM80 = ["--offload-arch=sm_80", "--libomptarget-nvptx-bc-path=/usr/lib/llvm-19/lib",
                f"--cuda-path={CUDA_HOME}"]
CLANG19_GFX = ["--offload-arch=gfx90a",
               "--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"]
X86 = ["-fopenmp-targets=x86_64-pc-linux-gnu"]


@dataclass(frozen=True)
class Row:
    """One binary of the matrix: how it is compiled and linked, and the names it asks about."""

    compiler: str
    source: str
    flags: tuple[str, ...]
    need: tuple[bool, str]  # (found, reason) for need_tool
    function: str = "scale"  # a declare target function, as a user would type it
    variable: str = "bias"
    host_only: str = "host_only"
    link: tuple[str, ...] = ()  # extra link words (-shared)
    compile_flags: tuple[str, ...] = ()
    offlink_links: bool = True
    targets: tuple[str, ...] = field(default=())  # the image triples expected
    kernels: bool = True  # offlink's own runtime has offered functions, not kernels
    chroot: str = ""  # built there by its toolchain, and linked there by offlink too
    indirect: str = ""  # a `declare target indirect` function (GCC 14+)
    unnamed: bool = False  # the device link keeps no symbol for the function (AMD, clang-22)


def _have(*tools: str) -> bool:
    return all(shutil.which(t) for t in tools)


GCC_NEED = (_have("x86_64-linux-gnu-accel-nvptx-none-gcc-12", "nvptx-none-ld"),
            "gcc-12-offload-nvptx and nvptx-tools are not installed")
AMDGCN = _have("x86_64-linux-gnu-accel-amdgcn-amdhsa-gcc-12")
CLANG19 = (_have("clang-19", "clang++-19") and os.path.exists("/usr/lib/llvm-19/lib/"
                                                             "libomptarget.so"),
           "clang-19 or libomptarget (libomp-19-dev) is not installed")
CLANG22 = (_have("clang-22") and os.path.exists("/usr/lib/llvm-22/lib/libomptarget.so.22.1"),
           "clang-22 or liboffload-22 is not installed")
CLANG22_GPU = {  # (found, reason) per architecture: test_clang22_gpu's tools
    "sm_80": (CLANG22[0] and (LLVM / "bin" / "clang-linker-wrapper").exists() and bool(CUDA_HOME)
              and (DEVRT / "lib" / TRIPLES["sm_80"] / "libompdevice.a").exists(),
              "clang-22, clang-tools-22, CUDA (ptxas, nvlink) or LLVM 22's device runtime "
              "(.ci/llvm-22-devrt: tests/device_runtime/build.sh) missing"),
    "gfx90a": (CLANG22[0] and (LLVM / "bin" / "clang-linker-wrapper").exists()
               and (LLVM / "bin" / "ld.lld").exists() and os.path.isdir(ROCM_LIBS)
               and (DEVRT / "lib" / TRIPLES["gfx90a"] / "libompdevice.a").exists(),
               "clang-22, clang-tools-22, lld-22, rocm-device-libs or LLVM 22's device runtime "
               "(.ci/llvm-22-devrt: tests/device_runtime/build.sh) missing")}


def _clang22_gpu(arch: str, lto: bool) -> Row:
    """clang-22's objects for `arch`, linked with LLVM 22's device runtime as
    tests/test_clang22_gpu.py links them (by default, or with -foffload-lto)."""
    return Row("clang-22", "prog.c", (*offload(arch), *(["-foffload-lto"] if lto else [])),
               CLANG22_GPU[arch], compile_flags=tuple(compile_words(arch)),
               link=(*runtime_words(arch), *LIBS), targets=(TRIPLES[arch],),
               unnamed=arch == "gfx90a")


def _later(v: str, where: str) -> dict[str, Row]:
    """GCC `v`'s rows (13-16, built in chroot `where`): C, C++, Fortran and a DSO for nvptx;
    from 14, two targets (nvptx and amdgcn) and `declare target indirect`."""
    need = (True, "")  # the chroot's toolchain: chroot() skips where it is not built
    rows = {
        "c": Row(f"gcc-{v}", "prog.c", ("-fopenmp", *NVPTX), need, chroot=where,
                 targets=("nvptx-none",)),
        "c++": Row(f"g++-{v}", "prog.c", ("-fopenmp", *NVPTX), need, function="scale(int)",
                   compile_flags=("-x", "c++"), host_only="host_only(int)", chroot=where,
                   targets=("nvptx-none",)),
        "fortran": Row(f"gfortran-{v}", "prog.f90", ("-fopenmp", *NVPTX), need,
                       function="__m_MOD_scale", variable="__m_MOD_bias",
                       host_only="__m_MOD_host_only", chroot=where, targets=("nvptx-none",)),
        "dso": Row(f"gcc-{v}", "prog.c", ("-fopenmp", *NVPTX), need, link=("-shared",),
                   compile_flags=("-fPIC",), chroot=where, targets=("nvptx-none",))}
    if v != "13":  # the chroot has GCC 13's nvptx offload compiler alone; indirect is 14+
        rows["two-targets"] = Row(f"gcc-{v}", "prog.c", ("-fopenmp", *TWO), need, chroot=where,
                                  targets=("nvptx-none", "amdgcn-amdhsa"))
        rows["indirect"] = Row(f"gcc-{v}", "indirect.c", ("-fopenmp", *TWO), need,
                               chroot=where, indirect="twice",
                               targets=("nvptx-none", "amdgcn-amdhsa"))
    return rows


ROWS = {
    "gcc12-c": Row("gcc", "prog.c", ("-fopenmp", *NVPTX), GCC_NEED, targets=("nvptx-none",)),
    "gcc12-c++": Row("g++", "prog.c", ("-fopenmp", *NVPTX), GCC_NEED, function="scale(int)",
                     compile_flags=("-x", "c++"), host_only="host_only(int)",
                     targets=("nvptx-none",)),
    "gcc12-fortran": Row("gfortran-12", "prog.f90", ("-fopenmp", *NVPTX),
                         (GCC_NEED[0] and _have("gfortran-12"), "gfortran-12 with "
                          "gcc-12-offload-nvptx is not installed"), function="__m_MOD_scale",
                         variable="__m_MOD_bias", host_only="__m_MOD_host_only",
                         targets=("nvptx-none",)),
    "gcc12-two-targets": Row("gcc", "prog.c", ("-fopenmp", *TWO),
                             (GCC_NEED[0] and AMDGCN, "gcc-12-offload-nvptx and "
                              "gcc-12-offload-amdgcn are not installed"),
                             targets=("nvptx-none", "amdgcn-amdhsa")),
    "gcc12-dso": Row("gcc", "prog.c", ("-fopenmp", *NVPTX), GCC_NEED, link=("-shared",),
                     compile_flags=("-fPIC",), targets=("nvptx-none",)),
    "clang19-x86_64": Row("clang-19", "prog.c", ("-fopenmp", *X86), CLANG19,
                          targets=("x86_64-pc-linux-gnu",)),
    "clang19-sm_80": Row("clang-19", "prog.c", ("-fopenmp", *CLANG19_SM80),
                         (CLANG19[0] and bool(CUDA_HOME), "clang-19 and CUDA (ptxas, nvlink) "
                          "are needed for sm_80"), targets=("nvptx64-nvidia-cuda",)),
    "clang19-gfx90a": Row("clang-19", "prog.c", ("-fopenmp", *CLANG19_GFX),
                          (CLANG19[0] and _have("ld.lld-19") and os.path.isdir(
                              "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"),
                           "clang-19, lld-19 and rocm-device-libs are needed for gfx90a"),
                          targets=("amdgcn-amd-amdhsa",)),
    "nvcc-sm_80": Row(f"{CUDA_HOME}/bin/nvcc", "prog.cu", ("-arch=sm_80",),
                      (bool(CUDA_HOME), "CUDA (nvcc) is not installed"), function="scale(int)",
                      host_only="host_only(int)", offlink_links=False,
                      targets=("nvptx64-nvidia-cuda",) * 2),  # nvcc 13: two fatbins
    "offlink-own": Row("gcc", "own.c", (), (True, "gcc is not installed"), offlink_links=False,
                       targets=("x86_64-pc-linux-gnu",), kernels=False),
    **{f"gcc{v}-{kind}": row for v, where in (("13", "trixie"), ("14", "trixie"), ("15", "sid"),
                                                ("16", "sid"))
       for kind, row in _later(v, where).items()},
    "clang22-x86_64": Row("clang-22", "prog.c", ("-fopenmp", *X86), CLANG22,
                          link=("-L/usr/lib/llvm-22/lib", "-L/usr/lib/llvm-19/lib"),
                          targets=("x86_64-pc-linux-gnu",)),
    **{f"clang22-{arch}{'-lto' if lto else ''}": _clang22_gpu(arch, lto)
       for arch in ("sm_80", "gfx90a") for lto in (False, True)},
    "clang23-x86_64": Row("clang-23", "prog.c", ("-fopenmp", *X86), (True, ""), chroot="sid",
                          link=("-L/usr/lib/llvm-23/lib",), targets=("x86_64-pc-linux-gnu",)),
}


def build(offlink: str, row: Row, folder: Path) -> tuple[Path, Path | None]:
    """(the toolchain's own link, offlink's link of the same object or None)."""
    obj = folder / "prog.o"
    if row.chroot:
        chroot(row.chroot)
        for argv in ([row.compiler, "-O2", *row.compile_flags, *row.flags, "-c",
                      SOURCES / row.source, "-o", obj],
                     [row.compiler, *row.flags, obj, *row.link, "-o", folder / "own"]):
            done = in_chroot(row.chroot, [str(a) for a in argv], cwd=folder)
            assert done.returncode == 0, done.stderr
        done = in_chroot(row.chroot, ["offlink", "link", row.compiler, *row.flags, str(obj),
                                      *row.link, "-o", str(folder / "offlink")], cwd=folder)
        assert done.returncode == 0, done.stderr
        return folder / "own", folder / "offlink"
    need_tool(*row.need)
    if row.source == "own.c":  # offlink's own runtime: offlink cc, and its link alone
        cflags = run([offlink, "config", "--cflags"]).stdout.split()
        libs = run([offlink, "config", "--libs"]).stdout.split()
        run([offlink, "cc", row.compiler, "-O2", *cflags, "-c", SOURCES / row.source, "-o",
             obj], cwd=folder)
        run([offlink, "link", row.compiler, obj, *libs, "-o", folder / "own"], cwd=folder)
        return folder / "own", None
    run([row.compiler, "-O2", *row.compile_flags, *row.flags, "-c", SOURCES / row.source,
         "-o", obj], cwd=folder)
    own = folder / "own"
    run([row.compiler, *row.flags, obj, *row.link, "-o", own], cwd=folder)
    if not row.offlink_links:
        return own, None
    mine = folder / "offlink"
    run([offlink, "link", row.compiler, *row.flags, obj, *row.link, "-o", mine], cwd=folder)
    return own, mine


@pytest.fixture(scope="module")
def built(offlink, tmp_path_factory):
    """Each row's two binaries, built on first use."""
    done: dict[str, tuple[Path, Path | None]] = {}

    def get(name: str) -> tuple[Path, Path | None]:
        if name not in done:
            done[name] = build(offlink, ROWS[name], tmp_path_factory.mktemp(name))
        return done[name]
    return get


def document(offlink: str, path: Path) -> dict:
    info = json.loads(run([offlink, "inspect", "--json", path]).stdout)
    jsonschema.validate(info, SCHEMA)
    assert info["kind"] == "module"
    return info


# offlink keys a CU's private name by its CU (`MAIN__$_omp_fn$0$prog_f90$067e33bb`), where
# GCC's own link leaves it as the accel compiler wrote it.
CU_KEY = re.compile(r"\$\w+?_\w+\$[0-9a-f]{8}$")


def facts(info: dict) -> dict:
    """What both links must agree on: per toolchain, the runtime, each registration's target
    and version, the images' targets, architectures and kernels, the entries' names, kinds and
    sizes (the table's own rows aside; names as the toolchain spells them)."""
    out = {}
    for o in info["offload"]:
        out[o["toolchain"]] = {
            "runtime": o["runtime"], "registration": o["registration"],
            "registered": sorted((r["target"], r["version"]) for r in o["registered"]),
            "images": sorted((i["triple"], tuple(i["archs"]),
                              tuple(sorted(CU_KEY.sub("", s["name"]) for s in i["symbols"]
                                           if s["kind"] == "kernel")))
                             for i in o["images"]),
            "entries": sorted((CU_KEY.sub("", e["name"]), e["kind"], e["size"])
                              for e in o["entries"])}
    return out


def names(row: Row, info: dict) -> dict[str, str]:
    """The names asked about: the kernel as its entry names it, and the row's others."""
    (view,) = info["offload"]
    kernel = next(e["name"] for e in view["entries"] if e["kind"] == "function")
    return {"kernel": kernel, "function": row.function, "variable": row.variable,
            **({"indirect": row.indirect} if row.indirect else {})}


@pytest.mark.parametrize("name", ROWS)
def test_both_links_give_the_same_facts_in_one_schema(offlink, built, name):
    own, mine = built(name)
    info = document(offlink, own)
    got = facts(info)
    (view,) = got.values()  # one toolchain's code
    assert sorted(t for t, _, _ in view["images"]) == sorted(ROWS[name].targets)
    assert any(kernels for _, _, kernels in view["images"]) == ROWS[name].kernels
    for image in info["offload"][0]["images"]:  # an image whose symbols are not read says why
        assert image["symbols"] or any(image["triple"] in n for n in info["offload"][0]["notes"])
    assert view["registration"] is not None and view["entries"]
    if mine is not None:
        assert facts(document(offlink, mine)) == got


def symbol(offlink: str, path: Path, name: str):
    return run([offlink, "inspect", path, "--symbol", name], check=False)


@pytest.mark.parametrize("name", ROWS)
def test_symbol_answers_each_name_on_both_links(offlink, built, name):
    row = ROWS[name]
    own, mine = built(name)
    asked = names(row, document(offlink, own))
    for path in (own, mine) if mine else (own,):
        for what, word in asked.items():
            proc = symbol(offlink, path, word)
            if what == "function" and row.unnamed:  # internalised, its code unnamed: said so
                assert (proc.returncode, proc.stderr) == (1, ""), (path, proc.stdout)
                assert "image keeps no symbol for it" in proc.stdout, (path, proc.stdout)
                continue
            assert (proc.returncode, proc.stderr) == (0, ""), (path, what, proc.stdout)
            assert proc.stdout.strip() and "in no device image" not in proc.stdout, \
                (path, what, proc.stdout)  # (every line agrees it is on the device)
            if what == "indirect":  # in GCC's terms on offlink's link too, below its row
                assert "a `declare target indirect` function in GCC's host table .gnu." \
                    "offload_ind_funcs (GCC 14+): reachable through a host pointer" \
                    in proc.stdout and "not reachable" not in proc.stdout, (path, proc.stdout)
        proc = symbol(offlink, path, row.host_only)  # the host's alone: not on the device
        assert (proc.returncode, proc.stderr) == (1, ""), (path, proc.stdout)
        assert "no device image defines it" in proc.stdout or "no row" in proc.stdout \
            or "no CU offers it" in proc.stdout or "no device image names it" in proc.stdout, \
            proc.stdout


@pytest.mark.parametrize("name", ROWS)
def test_address_of_the_kernel_entry_names_it(offlink, built, name):
    own, mine = built(name)
    for path in (own, mine) if mine else (own,):
        info = document(offlink, path)
        entry = next(e for o in info["offload"] for e in o["entries"]
                     if e["kind"] == "function")
        proc = run([offlink, "inspect", path, "--address", hex(entry["address"])],
                   check=False)
        assert proc.returncode == 0, proc.stdout  # offlink's table may key it by either spelling
        assert any(f"is in '{n}'" in proc.stdout for n in (entry["name"], entry["host_name"])
                   if n), proc.stdout
        variable = next(e for o in info["offload"] for e in o["entries"]
                        if e["kind"] == "variable")
        inside = hex(variable["address"] + variable["size"] - 1)
        proc = run([offlink, "inspect", path, "--address", inside], check=False)
        assert proc.returncode == 0 and f"is in '{variable['name']}'" in proc.stdout


@pytest.mark.parametrize("name", ROWS)
def test_explain_names_its_evidence_and_agrees_with_inspect(offlink, built, name):
    own, mine = built(name)
    for path in (own, mine) if mine else (own,):
        info = document(offlink, path)
        said = run([offlink, "inspect", "--explain", path]).stdout
        findings = [line for line in said.splitlines() if not line.startswith("  ")]
        if not said.startswith("nothing in the file"):
            assert said.count("\n  evidence: ") == len(findings) == said.count("\n  fix: ")
        if any(o["images"] for o in info["offload"]):
            assert "no device image" not in said
        if all(o["registration"] for o in info["offload"]):
            assert "no registration call" not in said


@pytest.mark.parametrize("name", ROWS)
def test_extract_writes_every_image_inspect_lists(offlink, built, name, tmp_path):
    own, mine = built(name)
    for path in (own, mine) if mine else (own,):
        info = document(offlink, path)
        out = tmp_path / path.name
        written = run([offlink, "extract", "--all", "-o", f"{out}/", path]).stdout.split()
        sizes = sorted(i["image_size"] for o in info["offload"] for i in o["images"])
        assert sorted(Path(w).stat().st_size for w in written) == sizes, written


def test_gcc14_indirect_function_is_an_entry(offlink, tmp_path):
    """GCC 14's `declare target indirect`: its host table .gnu.offload_ind_funcs, an entry a
    host pointer is translated by (`--symbol` says so), registered with version 0x30001."""
    chroot("trixie")
    done = in_chroot("trixie", ["gcc-14", "-O2", "-fopenmp", *NVPTX, str(SOURCES / "indirect.c"),
                                "-o", str(tmp_path / "ind")], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (gcc,) = document(offlink, tmp_path / "ind")["offload"]
    assert [r["version"] for r in gcc["registered"]] == [0x30001]
    (twice,) = [e for e in gcc["entries"] if e["kind"] == "indirect-function"]
    assert twice["name"] == "twice"
    proc = symbol(offlink, tmp_path / "ind", "twice")
    assert proc.returncode == 0 and "`declare target indirect`" in proc.stdout, proc.stdout


@pytest.mark.parametrize("name", ["gcc12-c", "gcc12-c++", "gcc12-two-targets"])
def test_a_stripped_gcc_binary_reads_the_same(offlink, built, name, tmp_path):
    """mkoffload's arrays are found through the registration call's arguments, not their
    symbols: `strip` takes the symbols and leaves the same images, entries and registration
    (only the host spellings, which come from the symbol table, go)."""
    own, _ = built(name)
    stripped = tmp_path / "stripped"
    run(["strip", "-o", stripped, own])
    assert not [s for s in run(["nm", stripped], check=False).stdout.splitlines()]
    assert facts(document(offlink, stripped)) == facts(document(offlink, own))


def test_gcc_cxx_names_demangle_and_answer_on_both_links(offlink, built):
    """g++'s kernels (`_Z3runv$_omp_fn$0` in the PTX, `_Z3runv._omp_fn.0` on the host) are
    demangled in offlink's table and in GCC's own link alike, and --symbol takes the
    demangled name inspect prints, clone suffix and all."""
    own, mine = built("gcc12-c++")
    (view,) = document(offlink, own)["offload"]
    kernel = next(e for e in view["entries"] if e["kind"] == "function")
    assert kernel["demangled"] == "run() [clone ._omp_fn.0]"
    rows = document(offlink, mine)["table"]["symbols"]
    assert {r["name"]: r["demangled"] for r in rows}[kernel["name"]] == kernel["demangled"]
    for path in (own, mine):
        for word in (kernel["demangled"], kernel["host_name"], kernel["name"]):
            proc = symbol(offlink, path, word)
            assert proc.returncode == 0, (path, word, proc.stdout)
        proc = symbol(offlink, path, "run()")  # the host function the kernel was outlined from
        assert proc.returncode == 1, proc.stdout
