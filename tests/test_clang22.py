"""clang-22's OpenMP offload objects (56-byte rows in llvm_offload_entries) linked by offlink
and by clang-22 itself, run on libomptarget 22's x86_64 plugin.

samples/clang_openmp (C of three CUs with a shared library of its own, C++ of two CUs,
declare target variables and indirect calls) is built with clang-22 and linked both ways; both
print expected.txt and launch the same kernels (LIBOMPTARGET_INFO). The links name
`-L/usr/lib/llvm-22/lib -L/usr/lib/llvm-19/lib` (22's libomptarget first; libomp is 19's, the
one libomp5 Debian has), omp.h is libomp-22-dev's unpacked one (.ci/libomp-22-dev), and the
programs run with LD_LIBRARY_PATH=/usr/lib/llvm-22/lib.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest
from conftest import IMPORTS_SAID, copy_sample, make_sample, needs_tool, run

from offlink.elf import ElfFile

CLANG = "clang-22"
TRIPLE = "x86_64-pc-linux-gnu"
OFFLOAD = ["-fopenmp", f"-fopenmp-targets={TRIPLE}"]
LLVM_LIB = "/usr/lib/llvm-22/lib"
LIBS = ["-L/usr/lib/llvm-22/lib", "-L/usr/lib/llvm-19/lib"]
ROOT = Path(__file__).resolve().parent.parent
OMP_INCLUDE = Path(os.environ.get("OFFLINK_OMP22_INCLUDE",
                                  ROOT / ".ci" / "libomp-22-dev" / "include"))
needs_clang22 = needs_tool(
    shutil.which(CLANG) is None or shutil.which("clang-linker-wrapper-22") is None
    or not Path(LLVM_LIB, "libomptarget.so").exists() or not (OMP_INCLUDE / "omp.h").exists(),
    "clang-22, clang-tools-22, liboffload-22-dev or LLVM 22's omp.h missing (.ci/run installs "
    "them; tests/llvm_offload/omp22.sh unpacks omp.h)")


def launches(path: Path) -> list[str]:
    return re.findall(r"Launching kernel (\S+)", path.read_text())


@pytest.fixture(scope="module")
def sample(offlink, tmp_path_factory) -> Path:
    if shutil.which(CLANG) is None or not (OMP_INCLUDE / "omp.h").exists():
        pytest.skip("clang-22 or LLVM 22's omp.h missing")
    s = copy_sample("clang_openmp", tmp_path_factory.mktemp("clang22"))
    make_sample(offlink, s, "run", "clang-run", CLANG=CLANG, CLANGXX="clang++-22",
                LLVM_LIB=LLVM_LIB, LDFLAGS=" ".join(LIBS), CFLAGS=f"-O2 -I{OMP_INCLUDE}")
    return s


@needs_clang22
def test_offlink_and_clang22_links_print_the_same(sample):
    expected = (sample / "expected.txt").read_text()
    assert (sample / "build" / "output.txt").read_text() == expected
    assert (sample / "build" / "output.clang.txt").read_text() == expected


@needs_clang22
def test_kernels_run_on_libomptarget_22s_plugin(sample):
    mine = launches(sample / "build" / "launches.txt")
    assert len(mine) == 14 and mine == launches(sample / "build" / "launches.clang.txt")
    for prog in ("clang_openmp", "clang_openmp_cxx"):
        needed = run(["readelf", "-d", sample / "build" / prog]).stdout
        assert "libomptarget.so.22.1" in needed, prog


@needs_clang22
def test_table_rows_are_the_registered_56_byte_entries(offlink, sample):
    """The table's rows are the rows of llvm_offload_entries libomptarget 22 is given: same
    names, addresses and kinds (kernels, variables, an indirect function)."""
    from offlink.toolchains.llvm.dialect import linked_entries_of_kind

    for prog in ("clang_openmp", "clang_openmp_cxx", "offlink/libcounter.so"):
        binary = sample / "build" / prog
        elf = ElfFile.open(str(binary))
        assert elf.section("llvm_offload_entries") is not None
        assert elf.section("omp_offloading_entries") is None
        info = json.loads(run([offlink, "inspect", "--json", binary]).stdout)["table"]
        rows = {s["name"]: s for s in info["symbols"]}
        entries = {e.name: (addr, e) for addr, e in linked_entries_of_kind(elf)}
        assert rows and set(rows) == set(entries), prog
        for name, (addr, e) in entries.items():  # inspect shows host addresses
            assert rows[name]["address"] == addr and rows[name]["kind"] == e.kind
    rows = json.loads(run([offlink, "inspect", "--json", sample / "build" / "clang_openmp"])
                      .stdout)["table"]["symbols"]
    assert {"function", "variable", "indirect-function"} <= {r["kind"] for r in rows}


def _wrapper_object(tmp_path: Path) -> ElfFile:
    """llvm-offload-wrapper-22's registration of one image, compiled: what clang-22's link
    adds to the program."""
    (tmp_path / "img").write_bytes(b"image\n")
    run(["llvm-offload-wrapper-22", "--kind=openmp", f"--triple={TRIPLE}", tmp_path / "img",
         "-o", tmp_path / "w.bc"])
    run([CLANG, "-c", "-O2", "-fPIC", tmp_path / "w.bc", "-o", tmp_path / "w.o"])
    return ElfFile.open(str(tmp_path / "w.o"))


def _entries_section(elf: ElfFile, name: str) -> tuple:
    s = elf.section(name)
    return None if s is None else (s.sh_size, s.sh_addralign, s.sh_flags)


@needs_clang22
def test_registration_is_llvm_offload_wrapper_22s(sample, tmp_path):
    """offlink's registration (toolchains/llvm/omptarget.py, generation 3) next to the one
    llvm-offload-wrapper-22 prints: the same entries section (empty, 8-aligned, writable),
    the same outside names (__start_/__stop_llvm_offload_entries, __tgt_register_lib,
    __tgt_unregister_lib, atexit), a constructor each; and in the linked programs the same
    llvm_offload_entries as clang-22's own link, row for row."""
    from offlink.toolchains.llvm.omptarget import c_source

    theirs = _wrapper_object(tmp_path)
    (tmp_path / "r.c").write_text(c_source([0], 3))
    run([CLANG, "-c", "-O2", "-fPIC", "-w", tmp_path / "r.c", "-o", tmp_path / "r.o"])
    mine = ElfFile.open(str(tmp_path / "r.o"))
    assert _entries_section(mine, "llvm_offload_entries") == \
        _entries_section(theirs, "llvm_offload_entries")
    outside = {"__start_llvm_offload_entries", "__stop_llvm_offload_entries",
               "__tgt_register_lib", "__tgt_unregister_lib", "atexit"}

    def undefined(elf):
        return {s.name for s in elf.symbols() if not s.defined and s.name}

    assert undefined(theirs) == outside
    assert undefined(mine) == outside | {"__offlink_image_0", "__offlink_image_0_end"}
    for elf in (mine, theirs):  # a prioritized constructor each (.init_array.00100, .00101)
        assert [s.name for s in elf.sections if s.name.startswith(".init_array.")], elf.name
    for prog in ("clang_openmp", "clang_openmp_cxx"):
        a = ElfFile.open(str(sample / "build" / prog))
        b = ElfFile.open(str(sample / "build" / f"{prog}.clang"))
        sa, sb = a.section("llvm_offload_entries"), b.section("llvm_offload_entries")
        assert sa.sh_size == sb.sh_size and sa.sh_size % 56 == 0, prog
        assert bytes(a.content(sa))[8:10] == b"\x01\x00"  # Version 1, as clang-22 wrote it


@needs_clang22
def test_an_archive_and_a_relocatable_object(offlink, sample, tmp_path):
    """clang-22 objects from a static archive and from a `-r` object (offlink keeps the CUs'
    images apart) run as the sample does."""
    build = sample / "build"
    run(["ar", "rcs", tmp_path / "libk.a", build / "vec.o", build / "math.o"])
    env = {**os.environ, "LD_LIBRARY_PATH": f"{build / 'offlink'}:{LLVM_LIB}"}
    expected = (sample / "expected.txt").read_text().split("total area")[0]
    run([offlink, "link", CLANG, *OFFLOAD, *LIBS, build / "main.o", tmp_path / "libk.a",
         f"-L{build / 'offlink'}", "-lcounter", "-o", tmp_path / "from_archive"])
    assert run([tmp_path / "from_archive"], env=env).stdout == expected
    run([offlink, "link", CLANG, *OFFLOAD, "-r", build / "vec.o", build / "math.o", "-o",
         tmp_path / "vm.o"])
    run([offlink, "link", CLANG, *OFFLOAD, *LIBS, build / "main.o", tmp_path / "vm.o",
         f"-L{build / 'offlink'}", "-lcounter", "-o", tmp_path / "from_r"])
    assert run([tmp_path / "from_r"], env=env).stdout == expected


@needs_clang22
def test_clang22s_own_relocatable_link_seals_the_device_code(sample, tmp_path):
    """Why offlink's `-r` keeps the CUs' images apart rather than linking the device code as
    clang 21+'s `-r` does: main.c's target regions call `square` and read `scale`, which
    vec.c and math.c define on the device. clang-22's `-r` of vec.o and math.o links their
    device code into the object and removes `.llvm.offloading`, so its final link with main.o
    links main.c's device code alone and fails; offlink's `-r` of the same objects links and
    runs (test_an_archive_and_a_relocatable_object)."""
    build = sample / "build"
    device = ["-Xoffload-linker", "-L/usr/lib/llvm-19/lib", "-Xoffload-linker", "-lomp"]
    run([CLANG, *OFFLOAD, "-r", build / "vec.o", build / "math.o", "-o", tmp_path / "vm.o",
         *LIBS, *device])
    sections = {s.name for s in ElfFile.open(str(tmp_path / "vm.o")).sections}
    assert ".llvm.offloading.relocatable" in sections and ".llvm.offloading" not in sections
    done = run([CLANG, *OFFLOAD, *LIBS, build / "main.o", tmp_path / "vm.o",
                f"-L{build / 'offlink'}", "-lcounter", "-o", tmp_path / "from_r", *device],
               check=False)
    assert done.returncode != 0 and "undefined reference to `square'" in done.stderr


@needs_clang22
def test_extract_writes_the_image_libomptarget_22_loads(offlink, sample, tmp_path):
    binary = sample / "build" / "clang_openmp"
    run([offlink, "extract", binary, "--target", f"openmp-{TRIPLE}", "--output",
         tmp_path / "img.so"])
    image = ElfFile.open(str(tmp_path / "img.so"))
    names = {s.name for s in image.symbols(dynamic=True) if s.defined}
    table = json.loads(run([offlink, "inspect", "--json", binary]).stdout)["table"]
    assert {s["name"] for s in table["symbols"]} <= names


def test_each_release_gets_its_own_words():
    from offlink.toolchains.llvm.llvm_release import (
        compiler_of,
        entry_generation,
        packager,
        release,
    )

    assert [entry_generation(n) for n in (17, 19, 20, 21, 22, None)] == [1, 1, 2, 3, 3, 1]
    assert release("clang-22") == 22 and release("flang-new-19") == 19
    assert release("clang++-20") == 20
    assert packager(19) == "clang-offload-packager-19"
    assert packager(22) == "llvm-offload-binary-22"
    assert compiler_of(["clang-22", "clang-22"], "gcc") == "clang-22"


@needs_tool(shutil.which("flang-new-19") is None, "flang-new-19 missing (.ci/run installs "
            "flang-19)")
def test_a_flang_link_uses_the_drivers_own_clang(offlink, tmp_path):
    """A flang object names no clang (no .comment): its image is linked by the clang of the
    driver's own install (flang-new-19 -> /usr/lib/llvm-19/bin/clang), never PATH's `clang`
    (clang 14 here)."""
    (tmp_path / "f.f90").write_text("program p\n!$omp target\n!$omp end target\nend\n")
    words = ["-fopenmp", f"-fopenmp-targets={TRIPLE}"]
    run(["flang-new-19", *words, "-c", tmp_path / "f.f90", "-o", tmp_path / "f.o"])
    dry = run([offlink, "link", "--dry-run", "flang-new-19", *words, tmp_path / "f.o", "-o",
               tmp_path / "f"]).stdout.splitlines()
    image = [ln for ln in dry if f"--target={TRIPLE}" in ln]
    assert len(image) == 1 and image[0].startswith("/usr/lib/llvm-19/bin/clang "), dry


@needs_clang22
def test_inspect_reads_clang22s_own_link(offlink, sample):
    """`offlink inspect` of clang-22's own link (llvm_offload_entries, 56-byte rows): the same
    entries, by name, host address and kind, as offlink's link of the same objects registers,
    and the image as `llvm-objdump-22 --offloading` lists it (before: called an object offering
    GCC's host tables)."""
    for prog in ("clang_openmp", "clang_openmp_cxx"):
        own = sample / "build" / f"{prog}.clang"
        info = json.loads(run([offlink, "inspect", "--json", own]).stdout)
        (llvm,) = info["offload"]
        assert llvm["toolchain"] == "llvm" and llvm["registration"] == "__tgt_register_lib"
        elf = ElfFile.open(str(own))
        from offlink.toolchains.llvm.dialect import linked_entries_of_kind

        want = {e.name: (addr, e.kind) for addr, e in linked_entries_of_kind(elf)}
        got = {e["name"]: (e["address"], e["kind"]) for e in llvm["entries"]}
        assert got and got == want, prog
        mine = json.loads(run([offlink, "inspect", "--json", sample / "build" / prog])
                          .stdout)["table"]["symbols"]
        assert {r["name"] for r in mine} == set(got), prog
        if shutil.which("llvm-objdump-22"):
            listed = run(["llvm-objdump-22", "--offloading", own]).stdout
            assert listed.count("OFFLOADING IMAGE") == len(llvm["images"])
            assert all(i["triple"] in listed for i in llvm["images"])


# -- relinks (link/relink.py's record of LLVM CUs, compile.as_is's kept offers) --------------

RELINK_MAIN = """#include <stdio.h>
#pragma omp declare target
int scale(int x);
int offset(int x);
#pragma omp end declare target
int main(void) {
  int r = 0;
#pragma omp target map(from: r)
  r = scale(20) + offset(1);
  printf("%d\\n", r);
  return 0;
}
"""


def declared(body: str) -> str:
    return f"#pragma omp declare target\n{body}\n#pragma omp end declare target\n"


@pytest.fixture
def relinked(tmp_path, monkeypatch):
    """Three clang-22 CUs (main.o, a.o, b.o) in tmp_path, and an in-process `offlink link`
    of them with the cache in tmp_path/cache, stamps trusted at once (freshness.SETTLED 0):
    link(output) -> what --timings said. `reads`: the input files extract opened,
    `offered`: the CUs whose device object's symbols were read (OpenMPTarget.offers)."""
    from offlink.link import extract
    from offlink.link.pipeline import LinkOptions, link
    from offlink.toolchains.llvm.openmp import OpenMPTarget

    sources = {"main.c": RELINK_MAIN, "a.c": declared("int scale(int x) { return 3 * x; }"),
               "b.c": declared("int offset(int x) { return x + 100; }")}
    for name, text in sources.items():
        (tmp_path / name).write_text(text)
        run([CLANG, "-O2", *OFFLOAD, "-c", name, "-o", name[:-2] + ".o"], cwd=tmp_path)
    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OFFLINK_PROGRESS", "0")
    monkeypatch.delenv("MAKEFLAGS", raising=False)
    monkeypatch.setattr("offlink.cache.freshness.SETTLED", 0.0)
    (tmp_path / "cache").mkdir()
    reads: list[str] = []
    offered: list[str] = []
    real_read, real_offers = extract._read, OpenMPTarget.offers
    monkeypatch.setattr(extract, "_read", lambda p: reads.append(Path(p).name) or real_read(p))
    monkeypatch.setattr(OpenMPTarget, "offers", lambda self, cu, obj: offered.append(
        Path(cu.origin).name) or real_offers(self, cu, obj))
    objs = [str(tmp_path / n) for n in ("main.o", "a.o", "b.o")]

    def linked(output: str, capfd, inputs: list[str] | None = None) -> str:
        reads.clear()
        offered.clear()
        capfd.readouterr()
        assert link([CLANG, *OFFLOAD, *LIBS, *(inputs or objs), "-o", str(tmp_path / output)],
                    LinkOptions(timings=True)) == 0
        return capfd.readouterr().err

    return linked, reads, offered, objs


def run_both(tmp_path: Path, output: str, objs: list[str]) -> tuple[str, str]:
    """The program offlink linked and clang-22's own link of the same objects, run on
    libomptarget 22's x86_64 plugin: their outputs, each with its kernel launches."""
    run([CLANG, *OFFLOAD, *LIBS, *objs, "-o", tmp_path / f"{output}.clang"])
    env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB, "LIBOMPTARGET_INFO": "16"}
    said = []
    for prog in (output, f"{output}.clang"):
        proc = run([tmp_path / prog], env=env)
        said.append(proc.stdout + "".join(f"launched {k}\n" for k in launches_of(proc.stderr)))
    return said[0], said[1]


def launches_of(text: str) -> list[str]:
    return re.findall(r"Launching kernel (\S+)", text)


@needs_clang22
def test_a_clang22_relink_with_nothing_changed_reads_no_object(relinked, tmp_path, capfd):
    """clang-22's CUs are in the relink's record of its inputs and their device objects'
    offers in the cache: a relink with nothing changed opens no input object, reads no device
    object's symbols and writes none, and links the same bytes (before: every object read and
    every device object's symbols, on every link)."""
    linked, reads, offered, objs = relinked
    said = linked("first", capfd)  # records the inputs and the offers
    assert "3 CUs, 0 compiled, 0 from cache, 3 used as they are; image linked" in said
    assert sorted(reads) == ["a.o", "b.o", "main.o"] and sorted(offered) == sorted(reads)
    said = linked("second", capfd)
    assert reads == [] and offered == []
    assert "3 CUs, 0 compiled, 0 from cache, 3 used as they are; image from cache" in said
    assert (tmp_path / "second").read_bytes() == (tmp_path / "first").read_bytes()
    out, own = run_both(tmp_path, "second", objs)
    assert out == own and out.startswith("161\nlaunched __omp_offloading_")


@needs_clang22
def test_a_clang22_relink_reads_again_only_the_changed_object(relinked, tmp_path, capfd):
    """One object rewritten with the same code is read again alone (the record is per file)
    and its offers come from the cache; rewritten with other code, it alone is read and its
    offers taken, the image is linked again and the program prints what clang-22's own link
    of the same objects prints, on libomptarget 22's plugin; a link with no cache (no
    record) makes the same bytes."""
    linked, reads, offered, objs = relinked
    linked("prog", capfd)
    first = (tmp_path / "prog").read_bytes()
    time.sleep(0.02)  # past the file system's timestamp tick
    (tmp_path / "a.o").write_bytes((tmp_path / "a.o").read_bytes())  # another stamp
    said = linked("prog", capfd)
    assert reads == ["a.o"] and offered == []
    assert "image from cache" in said and (tmp_path / "prog").read_bytes() == first
    (tmp_path / "a.c").write_text(declared("int scale(int x) { return 5 * x; }"))
    run([CLANG, "-O2", *OFFLOAD, "-c", "a.c", "-o", "a.o"], cwd=tmp_path)
    said = linked("prog", capfd)
    # extract reads a.o alone; the image link then takes the others' device code from
    # their objects (its only reader of them)
    assert reads == ["a.o", "main.o", "b.o"] and offered == ["a.o"]
    assert "3 CUs, 0 compiled, 0 from cache, 3 used as they are; image linked" in said
    out, own = run_both(tmp_path, "prog", objs)
    assert out == own and out.startswith("201\nlaunched __omp_offloading_")
    changed = (tmp_path / "prog").read_bytes()
    run([sys.executable, "-m", "offlink", "link", "--no-cache", CLANG, *OFFLOAD, *LIBS, *objs,
         "-o", tmp_path / "plain"])
    assert (tmp_path / "plain").read_bytes() == changed


@needs_clang22
def test_a_clang22_relink_with_members_to_choose_reads_every_file_again(relinked, tmp_path,
                                                                         capfd):
    """Which archive members a link uses depends on every file's symbols: with members to
    choose the record is all or nothing, and one file rewritten reads the whole link again."""
    linked, reads, offered, objs = relinked
    run(["ar", "rcs", tmp_path / "libab.a", tmp_path / "a.o", tmp_path / "b.o"])
    inputs = [objs[0], str(tmp_path / "libab.a")]
    linked("prog", capfd, inputs)
    first = (tmp_path / "prog").read_bytes()
    linked("prog", capfd, inputs)
    assert reads == [] and offered == []
    time.sleep(0.02)  # past the file system's timestamp tick
    (tmp_path / "libab.a").write_bytes((tmp_path / "libab.a").read_bytes())
    said = linked("prog", capfd, inputs)
    assert reads == ["main.o", "libab.a"] and offered == []
    assert "3 CUs" in said and (tmp_path / "prog").read_bytes() == first
    out, own = run_both(tmp_path, "prog", inputs)
    assert out == own and out.startswith("161\nlaunched __omp_offloading_")


@needs_clang22
def test_a_clang22_relink_with_nothing_changed_imports_no_dataclasses(relinked, tmp_path):
    """A relink of clang's objects with nothing changed imports no dataclasses (with inspect:
    ~10-15 ms of each relink; the offload formats' rows are offlink.records named tuples),
    lief or construct."""
    objs = relinked[3]
    env = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
    env.update(OFFLINK_CACHE_DIR=str(tmp_path / "cache"), OFFLINK_PROGRESS="0",
               PYTHONPATH=str(ROOT))
    said = tmp_path / "said"
    time.sleep(2.1)  # the inputs settled (link/relink.py): the first link writes the record
    for _ in range(3):  # the record and the image written, then used
        run([sys.executable, "-c", IMPORTS_SAID, "dataclasses,lief,construct", said, "link",
             CLANG, *OFFLOAD, *LIBS, *objs, "-o", tmp_path / "prog"], env=env)
    assert said.read_text().strip() == "[]"


@needs_clang22
def test_clang22_relocatable_output_links_as_with_clang(offlink, tmp_path):
    """clang 21+'s own `-r` link links and registers the device code into the object, keeps
    the linked image in `.llvm.offloading.relocatable` (no `.llvm.offloading` left) and
    renames its entries section (`llvm_offload_entries_<hash>`, as clang-linker-wrapper's
    relocateOffloadSection does). offlink's final link takes no CU from it (before: it read
    the relocatable image as a CU and failed): the object registers itself, and both
    programs print and launch the same. (With a second offload object beside it, clang-22's
    own program stops at start-up: "a provided binary image is malformed"; offlink's runs.)"""
    (tmp_path / "a.c").write_text("""#include <stdio.h>
int main(void) { int x = 0;
#pragma omp target map(tofrom: x)
  x = 42;
  printf("%d\\n", x); return 0; }
""")
    run([CLANG, "-O2", *OFFLOAD, f"-I{OMP_INCLUDE}", "-c", tmp_path / "a.c", "-o",
         tmp_path / "a.o"])
    run([CLANG, *OFFLOAD, "-r", tmp_path / "a.o", "-o", tmp_path / "part.o", *LIBS,
         "-Xoffload-linker", "-L/usr/lib/llvm-19/lib", "-Xoffload-linker", "-lomp"])
    sections = {s.name for s in ElfFile.open(str(tmp_path / "part.o")).sections}
    assert ".llvm.offloading.relocatable" in sections and ".llvm.offloading" not in sections
    assert any(re.fullmatch(r"llvm_offload_entries_[0-9a-f]+", s) for s in sections)
    run([offlink, "link", CLANG, *OFFLOAD, tmp_path / "part.o", *LIBS, "-o", tmp_path / "prog"])
    run([CLANG, *OFFLOAD, tmp_path / "part.o", *LIBS, "-o", tmp_path / "prog.clang"])
    env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB, "LIBOMPTARGET_INFO": "16"}
    said = {}
    for prog in ("prog", "prog.clang"):
        done = run([tmp_path / prog], env=env)
        assert done.stdout == "42\n"
        said[prog] = re.findall(r"Launching kernel (\S+)", done.stderr)
    assert said["prog"] == said["prog.clang"] and len(said["prog"]) == 1


def _undefined(path: Path) -> set[str]:
    """An object's undefined symbols, with relocateOffloadSection's hash as `<hash>`."""
    return {re.sub(r"_[0-9a-f]+$", "_<hash>", s.name) if "llvm_offload_entries_" in s.name
            else s.name for s in ElfFile.open(str(path)).symbols() if s.name and not s.defined}


@needs_clang22
def test_relocatable_as_toolchain_is_clang22s_own_r(offlink, tmp_path):
    """`offlink link --relocatable-as-toolchain clang-22 ... -r` does what clang-22's own `-r`
    does: the device code
    linked (offlink's per-CU compiles), the image in `.llvm.offloading.relocatable` and
    registered by the object itself (a priority-101 constructor), no `.llvm.offloading` left,
    the entries in `llvm_offload_entries_<hash>` with their `__start_`/`__stop_` renamed; the
    same undefined symbols as clang's output; the same bytes on a second run. Each `-r`
    output runs as clang's: offlink's final link of it beside another offload object (clang's
    own stops at start-up on either: "a provided binary image is malformed"), and clang-22's
    final link of a `-r` output holding the whole program; inspect reads both alike."""
    (tmp_path / "a.c").write_text("""#include <stdio.h>
int twice(int);
int main(void) { int x = 0;
#pragma omp target map(tofrom: x)
  x = 42;
  printf("%d %d\\n", x, twice(x)); return 0; }
""")
    (tmp_path / "b.c").write_text("""int twice(int v) { int y = 0;
#pragma omp target map(tofrom: y)
  y = 2 * v;
  return y; }
""")
    for name in ("a", "b"):
        run([CLANG, "-O2", *OFFLOAD, f"-I{OMP_INCLUDE}", "-c", tmp_path / f"{name}.c", "-o",
             tmp_path / f"{name}.o"])
    device = ["-Xoffload-linker", "-L/usr/lib/llvm-19/lib", "-Xoffload-linker", "-lomp"]
    objs = {"b": [tmp_path / "b.o"], "ab": [tmp_path / "a.o", tmp_path / "b.o"]}
    for part, inputs in objs.items():
        run([CLANG, *OFFLOAD, "-r", *inputs, "-o", tmp_path / f"{part}.clang.o", *LIBS, *device])
        run([offlink, "link", "--relocatable-as-toolchain", CLANG, *OFFLOAD, "-r", *inputs,
             "-o", tmp_path / f"{part}.mine.o", *LIBS])
        for made in (tmp_path / f"{part}.mine.o", tmp_path / f"{part}.clang.o"):
            sections = [s.name for s in ElfFile.open(str(made)).sections]
            assert ".llvm.offloading.relocatable" in sections, made
            assert ".llvm.offloading" not in sections and "llvm_offload_entries" not in sections
            assert len([s for s in sections
                        if re.fullmatch(r"llvm_offload_entries_[0-9a-f]+", s)]) == 1, made
            assert ".init_array.101" in sections, made
        assert _undefined(tmp_path / f"{part}.mine.o") == \
            _undefined(tmp_path / f"{part}.clang.o")
        said = [json.loads(run([offlink, "inspect", "--json", tmp_path / f"{part}.{m}.o"]).stdout)
                for m in ("mine", "clang")]
        assert said[0]["cus"] == said[1]["cus"] == [] and said[0]["kind"] == said[1]["kind"]
    run([offlink, "link", "--relocatable-as-toolchain", CLANG, *OFFLOAD, "-r", tmp_path / "b.o",
         "-o", tmp_path / "b2.o", *LIBS])  # again: the same bytes
    assert (tmp_path / "b2.o").read_bytes() == (tmp_path / "b.mine.o").read_bytes()
    env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB, "LIBOMPTARGET_INFO": "16"}
    launched = {}
    programs = {  # (a) offlink's final link beside a.o; (b) clang-22's of the whole program
        "mine": [offlink, "link", CLANG, *OFFLOAD, tmp_path / "a.o", tmp_path / "b.mine.o"],
        "theirs": [offlink, "link", CLANG, *OFFLOAD, tmp_path / "a.o", tmp_path / "b.clang.o"],
        "mine.clang": [CLANG, *OFFLOAD, tmp_path / "ab.mine.o"],
        "theirs.clang": [CLANG, *OFFLOAD, tmp_path / "ab.clang.o"],
    }
    for prog, argv in programs.items():
        run([*argv, *LIBS, "-o", tmp_path / prog])
        done = run([tmp_path / prog], env=env)
        assert done.stdout == "42 84\n", prog
        launched[prog] = sorted(re.findall(r"Launching kernel (\S+)", done.stderr))
    assert launched["mine"] == launched["theirs"] and len(launched["mine"]) == 2
    assert launched["mine.clang"] == launched["theirs.clang"] == launched["mine"]


@needs_clang22
def test_relocatable_as_toolchain_refuses_what_it_cannot_link_as_clang(offlink, sample,
                                                                       tmp_path):
    """A -r whose own link offlink does not make as the toolchain's (here: clang-22's objects
    through clang-19's driver, whose -r keeps no such image) asked to be linked so: one line,
    nothing written; without the option its CUs are kept for the final link."""
    vec = sample / "build" / "vec.o"
    argv = ["clang-19", *OFFLOAD, "-r", vec, "-o", tmp_path / "r.o"]
    done = run([offlink, "link", "--relocatable-as-toolchain", *argv], check=False)
    assert done.returncode != 0 and not (tmp_path / "r.o").exists()
    assert done.stderr.startswith("offlink: error: --relocatable-as-toolchain: ")
    assert len(done.stderr.splitlines()) == 1
    run([offlink, "link", "--dry-run", *argv])
