"""clang's OpenMP offload objects (clang-19 -fopenmp -fopenmp-targets=x86_64-pc-linux-gnu -c)
linked by offlink and run on libomptarget's x86_64 plugin.

samples/clang_openmp is compiled once and linked twice, by offlink (`offlink link clang-19`)
and by clang itself (clang-linker-wrapper); both must print expected.txt and launch the same
kernels on the plugin (LIBOMPTARGET_INFO). offlink's table must hold the very rows
libomptarget is given.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import copy_sample, make_sample, needs_tool, run

from offlink.elf import ElfFile
from offlink.errors import FormatError
from offlink.formats.offload_binary import (
    SECTION,
    OffloadImage,
    build_binary,
    parse_binaries,
)

CLANG = "clang-19"
TRIPLE = "x86_64-pc-linux-gnu"
OFFLOAD = ["-fopenmp", f"-fopenmp-targets={TRIPLE}"]
needs_clang = pytest.mark.skipif(
    shutil.which(CLANG) is None or not Path("/usr/lib/llvm-19/lib/libomptarget.so").exists(),
    reason="clang-19 or libomptarget missing (apt-get install clang-19 libomp-19-dev; "
           ".ci/run installs them)")
LLVM_LIB = "/usr/lib/llvm-19/lib"


def launches(path: Path) -> list[str]:
    """Kernel names libomptarget's plugin reported launching, in order."""
    return re.findall(r"Launching kernel (\S+)", path.read_text())


@pytest.fixture(scope="module")
def sample(offlink, tmp_path_factory) -> Path:
    if shutil.which(CLANG) is None:
        pytest.skip("clang-19 missing")
    s = copy_sample("clang_openmp", tmp_path_factory.mktemp("clang"))
    make_sample(offlink, s, "run", "clang-run")
    return s


@needs_clang
def test_offlink_and_clang_links_print_the_same(sample):
    expected = (sample / "expected.txt").read_text()
    assert (sample / "build" / "output.txt").read_text() == expected
    assert (sample / "build" / "output.clang.txt").read_text() == expected


@needs_clang
def test_kernels_run_on_the_plugin(sample):
    mine = launches(sample / "build" / "launches.txt")
    theirs = launches(sample / "build" / "launches.clang.txt")
    assert len(mine) == 14 and mine == theirs
    assert all(k.startswith("__omp_offloading_") for k in mine)
    # the shared library's own kernel, and the C++ program's (mangled enclosing names)
    assert sum("counter_bump" in k for k in mine) == 2
    assert any("_ZN4geom10total_area" in k for k in mine)


@needs_clang
def test_the_library_and_the_cxx_program_have_tables(offlink, sample):
    lib = json.loads(run([offlink, "inspect", "--json",
                          sample / "build" / "offlink" / "libcounter.so"]).stdout)["table"]
    assert {s["name"] for s in lib["symbols"] if s["kind"] == "variable"} == {"counter_base"}
    cxx = json.loads(run([offlink, "inspect", "--json",
                          sample / "build" / "clang_openmp_cxx"]).stdout)["table"]
    names = {s["name"]: s for s in cxx["symbols"]}
    assert names["_ZN4geom6Circle4unitE"]["kind"] == "variable"
    assert names["_ZN4geom6Circle4unitE"]["size"] == 8


@needs_clang
def test_table_rows_are_the_registered_entries(offlink, sample):
    """The table's rows are libomptarget's rows: same names, same host addresses."""
    from offlink.toolchains.llvm.dialect import linked_entries

    binary = sample / "build" / "clang_openmp"
    info = json.loads(run([offlink, "inspect", "--json", binary]).stdout)["table"]
    assert [t["name"] for t in info["targets"]] == [f"openmp-{TRIPLE}"]
    rows = {s["name"]: s for s in info["symbols"]}
    entries = {e.name: (addr, e) for addr, e in linked_entries(ElfFile.open(binary))}
    assert set(rows) == set(entries)
    section = ElfFile.open(binary).section(".openmp_target")
    for name, (addr, e) in entries.items():
        assert rows[name]["address"] == addr - section.sh_addr or \
            rows[name]["address"] == addr, name
        assert rows[name]["kind"] == e.kind
    kinds = {rows[n]["kind"] for n in rows}
    assert {"function", "variable", "indirect-function"} <= kinds
    assert rows["scale"]["size"] == 8 and rows["calls"]["size"] == 4
    indirect = [n for n in rows if re.search(r"_add_one_l\d+$", n)]
    assert len(indirect) == 1 and rows[indirect[0]]["kind"] == "indirect-function"
    assert rows[indirect[0]]["size"] == 1


@needs_clang
def test_registration_is_clangs(sample):
    """Registered from a constructor with __tgt_register_lib, as clang's link."""
    binary = sample / "build" / "clang_openmp"
    syms = run(["nm", "-D", binary]).stdout
    assert "__tgt_register_lib" in syms and "__tgt_unregister_lib" in syms
    sections = run(["readelf", "-S", "-W", binary]).stdout
    assert "omp_offloading_entries" in sections and ".openmp_target" in sections


CONSTRUCTORS_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <omp.h>
#include <stdio.h>
/* libomptarget's, called through: says when the module registers its image */
void __tgt_register_lib(void *desc) {
  puts("registered");
  ((void (*)(void *))dlsym(RTLD_NEXT, "__tgt_register_lib"))(desc);
}
static int on_host(void) {
  int d = -1;
#pragma omp target map(from: d)
  d = omp_is_initial_device();
  return d;
}
__attribute__((constructor(100))) static void c100(void) { puts("constructor 100"); }
__attribute__((constructor(101))) static void c101(void) { printf("101: %d\n", on_host()); }
__attribute__((constructor(65535))) static void c65535(void) { printf("65535: %d\n", on_host()); }
__attribute__((constructor)) static void plain(void) { printf("plain: %d\n", on_host()); }
int main(void) { printf("main: %d\n", on_host()); return 0; }
"""


@needs_clang
def test_registration_runs_where_clangs_among_the_programs_constructors(offlink, tmp_path):
    """clang 19 registers from a priority-101 constructor in the object it links first: after
    the module's constructors of priority 1-100 (the system's), before the program's own
    (101-65535, then the unprioritized ones), whose target regions then run on the device
    (0: not the initial device). offlink's registration runs at the same place."""
    (tmp_path / "c.c").write_text(CONSTRUCTORS_C)
    run([CLANG, "-O2", *OFFLOAD, "-w", "-c", tmp_path / "c.c", "-o", tmp_path / "c.o"])
    run([offlink, "link", "--no-cache", CLANG, *OFFLOAD, tmp_path / "c.o", "-o", tmp_path / "app"])
    run([CLANG, *OFFLOAD, tmp_path / "c.o", "-o", tmp_path / "app.clang"])
    env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB}
    expected = "constructor 100\nregistered\n101: 0\n65535: 0\nplain: 0\nmain: 0\n"
    assert run([tmp_path / "app.clang"], env=env).stdout == expected
    assert run([tmp_path / "app"], env=env).stdout == expected


@needs_clang
def test_relink_is_deterministic_and_cached(offlink, sample, tmp_path):
    objs = [sample / "build" / f"{n}.o" for n in ("main", "vec", "math")]
    outs = []
    for i in range(2):
        out = tmp_path / f"app{i}"
        proc = run([offlink, "link", "--timings", CLANG, *OFFLOAD, *objs,
                    f"-L{sample / 'build' / 'offlink'}", "-lcounter", "-o", out])
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert "image from cache" in proc.stderr  # the CUs' objects are used as they are


def resized_c(functions: int) -> str:
    """A program whose target image grows with `functions` declare target functions."""
    fs = "".join(f"int f{i}(int x) {{ return x * {i} + {i * i}; }}\n" for i in range(functions))
    return ("#include <stdio.h>\n#pragma omp declare target\n" + fs +
            "int twice(int x) { return 2 * x + f0(1) + 1; }\n#pragma omp end declare target\n"
            "int main(void) {\n  int r = 0;\n#pragma omp target map(from: r)\n"
            "  r = twice(20);\n  printf(\"%d\\n\", r);\n  return 0;\n}\n")


@needs_clang
def test_relink_with_a_resized_image_takes_the_registration_from_the_cache(offlink, tmp_path):
    """The libomptarget registration names its image by the placeholder's symbols, not by
    offset and size: a relink whose image changed size compiles no new registration (on an
    x86-64 host none is ever compiled: offlink writes it), and the program it makes runs on
    libomptarget with the new image."""
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache"),
           "LD_LIBRARY_PATH": LLVM_LIB}
    said, sizes = [], []
    for functions in (1, 800):
        (tmp_path / "k.c").write_text(resized_c(functions))
        run([CLANG, "-O2", *OFFLOAD, "-c", tmp_path / "k.c", "-o", tmp_path / "k.o"])
        said.append(run([offlink, "link", "--verbose", CLANG, *OFFLOAD, tmp_path / "k.o",
                         "-o", tmp_path / "app"], env=env).stderr)
        info = run([offlink, "inspect", "--json", tmp_path / "app"]).stdout
        sizes.append([t["image_size"] for t in json.loads(info)["table"]["targets"]])
        proc = run([tmp_path / "app"], env={**env, "LIBOMPTARGET_INFO": "16"})
        assert proc.stdout == "41\n" and len(launches_of(proc.stderr)) == 1
    assert sizes[0] != sizes[1]  # the second image is another size
    assert len(_verbose_commands(said[0], "offlink-omptarget-register.c")) == 1
    assert not _verbose_commands(said[1], "offlink-omptarget-register.c")


@needs_clang
def test_offload_binary_reader_agrees_with_llvm_objdump(sample):
    obj = ElfFile.open(sample / "build" / "vec.o")
    images = parse_binaries(bytes(obj.content(obj.section(SECTION))), "vec.o")
    dump = run(["llvm-objdump-19", "--offloading", sample / "build" / "vec.o"]).stdout
    found = re.findall(r"kind\s+(\S+)\narch\s+(\S*)\ntriple\s+(\S+)\nproducer\s+(\S+)", dump)
    assert found == [(i.image_kind, i.arch, i.triple, i.offload_kind) for i in images]
    assert images[0].image[:4] == b"\x7fELF"


@needs_clang
def test_offload_binary_reads_the_packagers_output(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"\x7fELF-not-really")
    (tmp_path / "b.bin").write_bytes(b"BC\xc0\xde" + bytes(11))
    subprocess.run(["clang-offload-packager-19", "-o", tmp_path / "p.out",
                    f"--image=file={tmp_path / 'a.bin'},triple={TRIPLE},arch=generic,"
                    f"kind=openmp",
                    f"--image=file={tmp_path / 'b.bin'},triple=nvptx64-nvidia-cuda,"
                    f"arch=sm_80,kind=openmp"], check=True)
    images = parse_binaries((tmp_path / "p.out").read_bytes(), "p.out")
    assert [(i.triple, i.arch, i.offload_kind) for i in images] == [
        (TRIPLE, "generic", "openmp"), ("nvptx64-nvidia-cuda", "sm_80", "openmp")]
    assert images[0].image == (tmp_path / "a.bin").read_bytes()
    assert images[1].image == (tmp_path / "b.bin").read_bytes()


def test_offload_binary_round_trip():
    imgs = [OffloadImage("elf", "openmp", 0, {"triple": TRIPLE, "arch": ""}, b"\x7fELF" * 5),
            OffloadImage("bc", "openmp", 0, {"triple": "nvptx64-nvidia-cuda",
                                             "arch": "sm_80"}, b"BC\xc0\xde")]
    blob = build_binary(imgs)
    assert parse_binaries(blob, "x") == imgs
    assert parse_binaries(blob + blob, "x") == imgs + imgs  # ld -r concatenates


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b"\x11" + b[1:], "bad magic"),
    (lambda b: b[:4] + b"\x04" + b[5:], "version 4"),
    (lambda b: b[:8] + (10**6).to_bytes(8, "little") + b[16:], "out of bounds"),
    (lambda b: b[:20], "truncated"),
])
def test_corrupt_offload_binary_is_one_clear_error(mutate, message):
    blob = build_binary([OffloadImage("elf", "openmp", 0, {"triple": TRIPLE}, b"x" * 16)])
    with pytest.raises(FormatError, match=message):
        parse_binaries(mutate(blob), "x.o")


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b[:40] + b"\x28\xb5\x2f\xfd" + b[44:], "compressed with zstd"),
    (lambda b: b[:32] + (int.from_bytes(b[32:40], "little") + 8).to_bytes(8, "little") + b[40:],
     "inflates to"),
    (lambda b: b[:44] + bytes(8) + b[52:], "does not inflate"),
])
def test_corrupt_compressed_offload_binary_is_one_clear_error(mutate, message):
    """A compressed version 3 binary (LLVM's development line) whose body is zstd (Python
    has no zstd), or does not inflate to the header's InflatedSize."""
    images = [OffloadImage("elf", "openmp", 0, {"triple": TRIPLE}, b"x" * 64)]
    blob = build_binary(images, 3, compress=True)
    assert parse_binaries(blob, "x.o") == images
    with pytest.raises(FormatError, match=message):
        parse_binaries(mutate(blob), "x.o")


@needs_clang
def test_plain_clang_link_through_offlink_without_offload_is_untouched(offlink, tmp_path):
    (tmp_path / "h.c").write_text("int main(void) { return 0; }\n")
    run([CLANG, "-O2", "-c", tmp_path / "h.c", "-o", tmp_path / "h.o"])
    run([offlink, "link", CLANG, tmp_path / "h.o", "-o", tmp_path / "h"])
    run([CLANG, tmp_path / "h.o", "-o", tmp_path / "h.ref"])
    assert (tmp_path / "h").read_bytes() == (tmp_path / "h.ref").read_bytes()


@needs_clang
def test_a_dso_and_an_executable_each_register(offlink, tmp_path):
    """A shared library linked by offlink registers its own image; so does the program."""
    (tmp_path / "lib.c").write_text(
        "#pragma omp declare target\nint lib_base = 100;\n#pragma omp end declare target\n"
        "int lib_work(int v) { int r = 0;\n#pragma omp target map(from: r)\n"
        "r = lib_base + v;\nreturn r; }\n")
    (tmp_path / "main.c").write_text(
        "#include <stdio.h>\nint lib_work(int);\n"
        "#pragma omp declare target\nint app_base = 7;\n#pragma omp end declare target\n"
        "int main(void) { int r = 0;\n#pragma omp target map(from: r)\nr = app_base * 6;\n"
        "printf(\"%d %d\\n\", lib_work(1), r); return 0; }\n")
    run([CLANG, "-O2", "-fPIC", *OFFLOAD, "-c", tmp_path / "lib.c", "-o", tmp_path / "lib.o"])
    run([CLANG, "-O2", *OFFLOAD, "-c", tmp_path / "main.c", "-o", tmp_path / "main.o"])
    run([offlink, "link", CLANG, *OFFLOAD, "-shared", tmp_path / "lib.o", "-o",
         tmp_path / "libk.so"])
    run([offlink, "link", CLANG, *OFFLOAD, tmp_path / "main.o", f"-L{tmp_path}", "-lk",
         "-o", tmp_path / "app"])
    env = {**os.environ, "LD_LIBRARY_PATH": f"{tmp_path}:{LLVM_LIB}", "LIBOMPTARGET_INFO": "16"}
    proc = run([tmp_path / "app"], env=env)
    assert proc.stdout == "101 42\n"
    kernels = re.findall(r"Launching kernel (\S+)", proc.stderr)
    assert len(kernels) == 2 and any("lib_work" in k for k in kernels)
    for binary in ("libk.so", "app"):
        info = json.loads(run([offlink, "inspect", "--json", tmp_path / binary]).stdout)
        assert info["table"]["targets"][0]["name"] == f"openmp-{TRIPLE}"


@needs_clang
def test_archive_members_and_relocatable_links(offlink, sample, tmp_path):
    """Objects in a static archive (members chosen as ld chooses them) and a `-r` object: the
    `-r` link keeps the CUs' images apart (clang 19's own -r would link and register the
    device code there, and again at the final link)."""
    build = sample / "build"
    run(["ar", "rcs", tmp_path / "libk.a", build / "vec.o", build / "math.o"])
    env = {**os.environ, "LD_LIBRARY_PATH": f"{build / 'offlink'}:{LLVM_LIB}"}
    expected = (sample / "expected.txt").read_text().split("total area")[0]
    run([offlink, "link", CLANG, *OFFLOAD, build / "main.o", tmp_path / "libk.a",
         f"-L{build / 'offlink'}", "-lcounter", "-o", tmp_path / "from_archive"])
    assert run([tmp_path / "from_archive"], env=env).stdout == expected
    run([offlink, "link", CLANG, *OFFLOAD, "-r", build / "vec.o", build / "math.o", "-o",
         tmp_path / "vm.o"])
    dump = run(["llvm-objdump-19", "--offloading", tmp_path / "vm.o"]).stdout
    assert dump.count("triple") == 2
    assert "__tgt_register_lib" not in run(["nm", tmp_path / "vm.o"]).stdout
    run([offlink, "link", CLANG, *OFFLOAD, build / "main.o", tmp_path / "vm.o",
         f"-L{build / 'offlink'}", "-lcounter", "-o", tmp_path / "from_r"])
    assert run([tmp_path / "from_r"], env=env).stdout == expected
    info = json.loads(run([offlink, "inspect", "--json", tmp_path / "vm.o"]).stdout)
    assert [c["target"] for c in info["cus"]] == [f"openmp-{TRIPLE}"] * 2


def test_clangs_rpath_takes_a_folder():
    """clang's `-rpath DIR` (used by LLVM's offload tests): DIR is no input file."""
    from offlink.link.plan import plan_link

    plan = plan_link([CLANG, "-rpath", "/opt/lib", "a.o", "-o", "app"])
    assert [i.path for i in plan.inputs] == ["a.o"]
    assert plan.output == "app"


def _cuda_home() -> str:
    from offlink.errors import ToolError
    from offlink.toolchains.cuda_toolkit import cuda_home

    try:
        return cuda_home()
    except ToolError:
        return ""


CUDA_HOME = _cuda_home()


def test_clangs_mllvm_takes_an_llvm_option():
    """`-mllvm -openmp-opt-disable-spmdization` (LLVM's bug51781 test): the option is no
    `-o penmp-opt-...`; it was read as the output, so the link wrote no `app`."""
    from offlink.link.plan import plan_link

    plan = plan_link([CLANG, "-o", "app", "-mllvm", "-openmp-opt-disable-spmdization", "a.o"])
    assert [i.path for i in plan.inputs] == ["a.o"]
    assert plan.output == "app"


SQRT_C = r"""
#include <math.h>
#include <stdio.h>
int main(void) {
  double x = 0;
#pragma omp target map(tofrom: x)
  x = sqrt(16.0);
  printf("%g\n", x);
  return 0;
}
"""


@needs_clang
def test_clangs_separate_options_on_a_real_link(offlink, tmp_path):
    """clang 19's link ignores `-Xarch_device WORD` and `-Xarch_host WORD` (an unused-argument
    warning) and gives `-Xcuda-ptxas WORD` to ptxas only: offlink's link of the same line runs
    the same kernels on the plugin. `-Xarch_device -ldevonly` was read as a library for the
    image link (cannot find -ldevonly), `-Xcuda-ptxas -v` as the driver's -v."""
    (tmp_path / "k.c").write_text(SQRT_C)
    run([CLANG, "-O2", *OFFLOAD, "-c", tmp_path / "k.c", "-o", tmp_path / "k.o"])
    line = [*OFFLOAD, tmp_path / "k.o", "-Xarch_device", "-ldevonly", "-Xarch_host",
            "-lhostonly", "-Xcuda-ptxas", "-v", "-lm"]
    run([offlink, "link", "--no-cache", CLANG, *line, "-o", tmp_path / "app"])
    run([CLANG, *line, "-o", tmp_path / "app.clang"])
    env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB, "LIBOMPTARGET_INFO": "16"}
    ours, theirs = run([tmp_path / "app"], env=env), run([tmp_path / "app.clang"], env=env)
    assert ours.stdout == theirs.stdout == "4\n"
    kernels = re.findall(r"Launching kernel (\S+)", ours.stderr)
    assert kernels and kernels == re.findall(r"Launching kernel (\S+)", theirs.stderr)


@needs_clang
def test_clangs_mllvm_reaches_the_device_compiles(offlink, tmp_path):
    """clang 19 gives the link line's `-mllvm OPTION` to clang-linker-wrapper, whose device
    LTO takes it: offlink's device compiles of -foffload-lto CUs take it too (an option LLVM
    does not know fails both links, naming it; a real one links and runs as clang's)."""
    (tmp_path / "k.c").write_text(SQRT_C)
    run([CLANG, "-O2", *OFFLOAD, "-foffload-lto", "-c", tmp_path / "k.c", "-o", tmp_path / "k.o"])
    bad = [*OFFLOAD, tmp_path / "k.o", "-mllvm", "-no-such-llvm-option", "-lm"]
    theirs = run([CLANG, *bad, "-o", tmp_path / "bad.clang"], check=False)
    ours = run([offlink, "link", "--no-cache", CLANG, *bad, "-o", tmp_path / "bad"], check=False)
    assert theirs.returncode != 0 and ours.returncode != 0
    assert "-no-such-llvm-option" in theirs.stderr and "-no-such-llvm-option" in ours.stderr
    assert not (tmp_path / "bad").exists()
    good = [*OFFLOAD, tmp_path / "k.o", "-mllvm", "-inline-threshold=0", "-lm"]
    run([offlink, "link", "--no-cache", CLANG, *good, "-o", tmp_path / "app"])
    env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB}
    assert run([tmp_path / "app"], env=env).stdout == "4\n"


TWICE_C = r"""
int twice(int v) {
  int r = 0;
#pragma omp target map(tofrom: r)
  r = v * 2;
  return r;
}
"""


@needs_clang
def test_clangs_mllvm_is_not_the_host_links(offlink, tmp_path):
    """clang 19 gives the link line's `-mllvm OPTION` to clang-linker-wrapper, so its own
    link with -Werror says nothing of it; a host-only clang link never takes it (not under
    -flto either: clang 19 gives no -mllvm to the linker plugin), calls it unused, and with
    -Werror fails. offlink's host link goes without the pairs (`-mllvm X`, `-mllvm=X`) and
    links what clang links, which runs the same kernels."""
    (tmp_path / "a.c").write_text(SQRT_C.replace("return 0;", "return twice(1) - 2;")
                                  .replace("#include <math.h>", "#include <math.h>\n"
                                           "int twice(int);"))
    (tmp_path / "b.c").write_text(TWICE_C)
    for n in ("a", "b"):
        run([CLANG, "-O2", *OFFLOAD, "-c", tmp_path / f"{n}.c", "-o", tmp_path / f"{n}.o"])
    objs = [tmp_path / "a.o", tmp_path / "b.o"]
    line = [*OFFLOAD, *objs, "-mllvm", "-openmp-opt-disable", "-mllvm=-inline-threshold=3",
            "-Werror", "-lm"]
    run([CLANG, *line, "-o", tmp_path / "app.clang"])
    run([offlink, "link", "--no-cache", CLANG, *line, "-o", tmp_path / "app"])
    env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB, "LIBOMPTARGET_INFO": "16"}
    ours, theirs = run([tmp_path / "app"], env=env), run([tmp_path / "app.clang"], env=env)
    assert ours.stdout == theirs.stdout == "4\n"
    kernels = launches_of(ours.stderr)
    assert len(kernels) == 2 and kernels == launches_of(theirs.stderr)
    # Under host -flto too: clang's host-only link refuses the pair there as well.
    said = run([CLANG, "-###", "-flto", "-mllvm", "-openmp-opt-disable", "-Werror", *objs],
               check=False)
    assert said.returncode != 0 and "unused during compilation: '-mllvm" in said.stderr
    shown = run([offlink, "link", "--dry-run", CLANG, "-flto", *line, "-o", tmp_path / "lto"])
    host = shlex.split(shown.stdout.strip().splitlines()[-1])
    assert "-flto" in host and "-Werror" in host and "-lm" in host, host
    assert not {"-mllvm", "-openmp-opt-disable", "-mllvm=-inline-threshold=3"} & set(host)


def test_host_link_drops_mllvm_with_its_value():
    """The pair goes whole (`-mllvm -o` is no output), `-mllvm=X` too; a word that is another
    option's value is not asked on its own (`-Xarch_device -mllvm` keeps both, as clang's link
    would ignore them both)."""
    from offlink.link.host import drop_words
    from offlink.toolchains.llvm.openmp import OpenMPTarget, llvm_options

    t = OpenMPTarget(f"openmp-{TRIPLE}")
    line = [CLANG, *OFFLOAD, "a.o", "-mllvm", "-o", "-mllvm=-x=1", "-Xarch_device", "-mllvm",
            "-Werror", "-o", "app"]
    assert drop_words(line, [t]) == [CLANG, "-fopenmp", "a.o", "-Xarch_device", "-mllvm",
                                      "-Werror", "-o", "app"]
    assert llvm_options(line[1:]) == ["-o", "-x=1"]


def test_host_link_drops_words_in_response_files(tmp_path):
    """An @file holding words the host link goes without is expanded, less those words (it
    was passed as written: clang's own offload link, or an unused -mllvm, in the host link);
    one that keeps all of its words is passed as written."""
    from offlink.link.host import drop_words
    from offlink.toolchains.llvm.openmp import OpenMPTarget

    (tmp_path / "drops").write_text(f"-fopenmp-targets={TRIPLE} -mllvm\n-x=1 -Werror\n")
    (tmp_path / "keeps").write_text("-lm -Xarch_device -mllvm\n")
    drops, keeps = f"@{tmp_path / 'drops'}", f"@{tmp_path / 'keeps'}"
    t = OpenMPTarget(f"openmp-{TRIPLE}")
    assert drop_words([CLANG, "-fopenmp", drops, keeps, "a.o", "-o", "app"], [t]) == \
        [CLANG, "-fopenmp", "-Werror", keeps, "a.o", "-o", "app"]


@needs_clang
def test_offlink_cc_reads_a_clang_line_as_clang_does(offlink, tmp_path):
    """`offlink cc clang-19` with clang's options that take a word (-resource-dir, -include-pch,
    -MJ): the fat object is made (the preprocessing got `-resource-dir -x c` and failed), the
    compilation database entry is the host compile's (none by a target compile, no file named
    after the next option), and the program links and runs."""
    (tmp_path / "h.h").write_text("static inline int hdr(int x) { return x + 1; }\n")
    run([CLANG, "-O2", "-x", "c-header", "h.h", "-o", "h.pch"], cwd=tmp_path)
    (tmp_path / "r.c").write_text("int add2(int x) { return hdr(x) + 1; }\n")
    (tmp_path / "m.c").write_text('#include <stdio.h>\nint add2(int);\n'
                                  'int main(void) { printf("%d\\n", add2(1)); return 0; }\n')
    resource = run([CLANG, "-print-resource-dir"]).stdout.strip()
    made = run([offlink, "cc", "--offload-target", "host", CLANG, "-c", "-resource-dir",
                resource, "-include-pch", "h.pch", "-MJ", "r.json", "-O2", "-Werror", "r.c",
                "-o", "r.o"], cwd=tmp_path)
    assert made.stderr == ""
    assert json.loads((tmp_path / "r.json").read_text().rstrip().rstrip(","))["file"] == "r.c"
    assert not (tmp_path / "-O2").exists()
    run([offlink, "cc", "--offload-target", "host", CLANG, "-c", "m.c", "-o", "m.o"],
        cwd=tmp_path)
    run([offlink, "link", CLANG, "r.o", "m.o", "-o", "app"], cwd=tmp_path)
    assert run([tmp_path / "app"]).stdout == "3\n"


def test_clangs_device_only_words_are_not_the_image_links():
    """The CPU image's link copies the host link's libraries (host_library_words): not those
    behind -Xarch_device, -Xarch_host (clang's link ignores them) or -Xcuda-ptxas."""
    from offlink.toolchains.llvm.openmp import host_library_words, link_opt_level

    words = ["a.o", "-Xarch_device", "-ldev", "-Xarch_host", "-lhost", "-Xcuda-ptxas", "-lp",
             "-lm", "-Xarch_x86_64", "-O0"]
    assert host_library_words(words) == ["-lm"]
    assert link_opt_level(words) == 2


def test_nvptx_link_refuses_what_its_device_link_cannot_take():
    """-mllvm and -Xcuda-ptxas go to clang's NVIDIA device link, which offlink's per-CU NVIDIA
    builds do not take: one clear error naming the option, not other device code."""
    from offlink.errors import UsageError
    from offlink.toolchains.llvm.openmp import refuse_nvptx_words

    refuse_nvptx_words(["a.o", "-Xarch_device", "-mllvm", "-lm"])  # -mllvm is -Xarch_'s value
    with pytest.raises(UsageError, match=r"^-Xcuda-ptxas -v: clang 19 gives it to the NVIDIA"):
        refuse_nvptx_words(["a.o", "-Xcuda-ptxas", "-v"])
    with pytest.raises(UsageError, match=r"^-mllvm -inline-threshold=0: "):
        refuse_nvptx_words(["a.o", "-mllvm", "-inline-threshold=0"])


NVPTX = ["-fopenmp", "--offload-arch=sm_80", f"--libomptarget-nvptx-bc-path={LLVM_LIB}",
         f"--cuda-path={CUDA_HOME}"]
NVPTX_TARGET = "openmp-nvptx64-nvidia-cuda"
needs_cuda = needs_tool(not CUDA_HOME, "CUDA's ptxas and nvlink are needed to compile and link "
                                       "for sm_80 (.ci/run installs CUDA's wheels)")
needs_llvm = needs_tool(shutil.which("llvm-lto2-19") is None,
                        "llvm-lto2-19 (apt-get install llvm-19) compiles the device runtime")


def _verbose_commands(stderr: str, tool: str) -> list[str]:
    """The commands --verbose shows as run (not those taken from the cache). Split on the
    messages, not the lines: parallel compiles' messages may share a line (print writes the
    text and the newline apart)."""
    return [m for m in re.split(r"(?=offlink: )", stderr)
            if m.startswith("offlink: ") and tool in m and not m.startswith("offlink: from cache:")]


@pytest.fixture(scope="module")
def nvptx(offlink, tmp_path_factory) -> Path:
    """samples/clang_openmp's C program compiled for sm_80 (no GPU here: compile and link
    only), linked by offlink and by clang itself (its --save-temps keeps the image it made)."""
    if shutil.which(CLANG) is None or not CUDA_HOME:
        pytest.skip("clang-19 or CUDA missing")
    s = copy_sample("clang_openmp", tmp_path_factory.mktemp("nvptx"))
    b = s / "b"
    (b / "clang").mkdir(parents=True)
    (b / "offlink").mkdir()
    for n in ("main", "vec", "math", "counter"):
        run([CLANG, "-O2", "-fPIC", *NVPTX, "-c", s / f"{n}.c", "-o", b / f"{n}.o"])
    objs = [b / f"{n}.o" for n in ("main", "vec", "math")]
    run([offlink, "link", CLANG, *NVPTX, "-shared", b / "counter.o", "-o",
         b / "offlink" / "libcounter.so"])
    run([offlink, "link", CLANG, *NVPTX, *objs, f"-L{b / 'offlink'}", "-lcounter", "-o",
         b / "prog"])
    run([CLANG, *NVPTX, "-shared", b / "counter.o", "-o", b / "clang" / "libcounter.so",
         "-Wl,--save-temps"], cwd=b / "clang")
    run([CLANG, *NVPTX, *objs, f"-L{b / 'clang'}", "-lcounter", "-o", b / "clang" / "prog",
         "-Wl,--save-temps"], cwd=b / "clang")
    cxx = [b / "main_cxx.o", b / "shapes.o"]
    for n in ("main_cxx", "shapes"):
        run(["clang++-19", "-O2", *NVPTX, "-c", s / f"{n}.cpp", "-o", b / f"{n}.o"])
    run([offlink, "link", "clang++-19", *NVPTX, *cxx, "-o", b / "prog_cxx"])
    run(["clang++-19", *NVPTX, *cxx, "-o", b / "clang" / "prog_cxx", "-Wl,--save-temps"],
        cwd=b / "clang")
    return b


@needs_clang
@needs_cuda
@needs_llvm
@pytest.mark.parametrize("binary, saved", [("prog", "prog.nvptx64.sm_80.img"),
                                           ("offlink/libcounter.so",
                                            "libcounter.so.nvptx64.sm_80.img"),
                                           ("prog_cxx", "prog_cxx.nvptx64.sm_80.img")])
def test_nvptx_image_is_the_one_clangs_link_makes(offlink, nvptx, tmp_path, binary, saved):
    """Each CU's cubin as clang compiled it, the device runtime's part compiled apart (with
    clang-linker-wrapper's resolutions) and nvlink: byte for byte clang's own image."""
    run([offlink, "extract", nvptx / binary, "--target", NVPTX_TARGET, "--output",
         tmp_path / "image.cubin"])
    assert (tmp_path / "image.cubin").read_bytes() == (nvptx / "clang" / saved).read_bytes()
    info = json.loads(run([offlink, "inspect", "--json", nvptx / binary]).stdout)["table"]
    size = (tmp_path / "image.cubin").stat().st_size
    assert [{k: t[k] for k in ("name", "kind", "archs", "image_size")}
            for t in info["targets"]] == [{"name": NVPTX_TARGET, "kind": "cubin",
                                           "archs": ["sm_80"], "image_size": size}]
    assert "cubin" in run([offlink, "inspect", nvptx / binary]).stdout.split("sm_80")[0]


@needs_clang
@needs_cuda
@needs_llvm
def test_nvptx_rows_are_the_entries_clang_registers(offlink, nvptx):
    """The registration's entries are clang's (names, sizes, flags: llvm-objdump shows the
    image clang embeds; offlink's is in .openmp_target), and the table holds them all, each
    defined by the image (kernels as CUDA entry points, variables with their size)."""
    from offlink.formats.cubin import cubin_symbols
    from offlink.toolchains.llvm.dialect import linked_entries

    def entries(path):
        return sorted((e.name, e.size, e.flags) for _, e in linked_entries(ElfFile.open(path)))

    mine, theirs = entries(nvptx / "prog"), entries(nvptx / "clang" / "prog")
    assert mine == theirs and len(mine) == 11
    dump = run(["llvm-objdump-19", "--offloading", nvptx / "clang" / "prog"]).stdout
    assert "arch            sm_80" in dump and "triple          nvptx64-nvidia-cuda" in dump
    table = json.loads(run([offlink, "inspect", "--json", nvptx / "prog"]).stdout)["table"]
    rows = {s["name"]: s for s in table["symbols"]}
    assert set(rows) == {name for name, _, _ in mine}
    assert {r["kind"] for r in rows.values()} == {"function", "variable", "indirect-function"}
    assert rows["scale"]["size"] == 8 and rows["calls"]["size"] == 4
    image = ElfFile.open(nvptx / "prog")
    section = image.section(".openmp_target")
    from offlink.table import Table

    data = Table(bytes(image.content(section)), section.sh_addr, "prog").targets[0].image
    defined = cubin_symbols(data, "image")
    for name, row in rows.items():
        want = "function" if row["kind"] == "function" else "variable"
        assert defined[name].kind == want, name
    assert defined["scale"].size == 8
    syms = run(["nm", "-D", nvptx / "prog"]).stdout
    assert "__tgt_register_lib" in syms


@needs_clang
@needs_cuda
@needs_llvm
def test_nvptx_relink_compiles_only_what_changed(offlink, nvptx, tmp_path):
    """Cold: the device runtime's part is compiled once; nothing changed: no compile and no
    device link; one CU changed: only the device link (clang compiled that CU's cubin), the
    device runtime from the cache; a -foffload-lto CU changed: only that CU is compiled."""
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
    src = nvptx.parent
    objs = [nvptx / "main.o", nvptx / "vec.o", tmp_path / "math.o"]
    shutil.copy(nvptx / "math.o", tmp_path / "math.o")
    link = [offlink, "link", "--verbose", "--timings", CLANG, *NVPTX, *objs,
            f"-L{nvptx / 'offlink'}", "-lcounter", "-o", tmp_path / "app"]
    cold = run(link, env=env).stderr
    assert len(_verbose_commands(cold, "llvm-lto2 run")) == 1
    again = run(link, env=env).stderr
    assert not _verbose_commands(again, "llvm-lto2 run")
    assert (f"{NVPTX_TARGET}: 3 CUs, 0 compiled, 0 from cache, 3 used as they are; image "
            f"from cache") in again
    (tmp_path / "math.c").write_text((src / "math.c").read_text() + "\n/* changed */\n"
                                     "#pragma omp declare target\nint extra = 1;\n"
                                     "#pragma omp end declare target\n")
    shutil.copy(src / "common.h", tmp_path)
    run([CLANG, "-O2", *NVPTX, "-c", tmp_path / "math.c", "-o", tmp_path / "math.o"])
    changed = run(link, env=env).stderr
    assert not _verbose_commands(changed, "llvm-lto2 run") and "image linked" in changed
    rows = json.loads(run([offlink, "inspect", "--json", tmp_path / "app"]).stdout)["table"]
    assert "extra" in {s["name"] for s in rows["symbols"]}
    # -foffload-lto: the CUs' bitcode, each compiled on its own
    for n in ("main", "vec", "math"):
        run([CLANG, "-O2", *NVPTX, "-foffload-lto", "-c", tmp_path / f"{n}.c" if n == "math"
             else src / f"{n}.c", "-o", tmp_path / f"{n}.lto.o"])
    lto = [offlink, "link", "--verbose", CLANG, *NVPTX, "-foffload-lto",
           *(tmp_path / f"{n}.lto.o" for n in ("main", "vec", "math")),
           f"-L{nvptx / 'offlink'}", "-lcounter", "-o", tmp_path / "app.lto"]
    first = run(lto, env=env).stderr
    assert len(_verbose_commands(first, "--filetype=asm")) == 4  # 3 CUs, the runtime's part
    with open(tmp_path / "math.c", "a") as f:
        f.write("#pragma omp declare target\nint extra2 = 2;\n#pragma omp end declare target\n")
    run([CLANG, "-O2", *NVPTX, "-foffload-lto", "-c", tmp_path / "math.c", "-o",
         tmp_path / "math.lto.o"])
    second = run(lto, env=env).stderr
    compiled = [c for c in _verbose_commands(second, "--filetype=asm")
                if "from cache:" not in c]
    assert len(compiled) == 1 and "math" in compiled[0]


@needs_clang
@needs_cuda
@needs_llvm
def test_nvptx_the_link_lines_level_is_clangs(offlink, nvptx, tmp_path):
    """clang's link compiles the device runtime's part at the link line's level (its LTO and
    ptxas): at -O3 offlink's image is clang's byte for byte. A -foffload-lto CU is compiled
    at that level too. At -O0 LLVM 19 cannot compile the device runtime (clang's own link
    stops with 'Cannot select'): offlink compiles that part at -O1 and links."""
    objs = [nvptx / "main.o", nvptx / "vec.o", nvptx / "math.o"]
    libs = [f"-L{nvptx / 'offlink'}", "-lcounter"]
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
    said = run([offlink, "link", "--verbose", CLANG, *NVPTX, "-O3", *objs, *libs, "-o",
                tmp_path / "prog"], env=env).stderr
    assert len(_verbose_commands(said, "llvm-lto2 run -O3 --cg-opt-level=3 ")) == 1
    assert len(_verbose_commands(said, "ptxas -m64 -O3 ")) == 1
    run([CLANG, *NVPTX, "-O3", *objs, f"-L{nvptx / 'clang'}", "-lcounter", "-o",
         tmp_path / "prog.clang", "-Wl,--save-temps"], cwd=tmp_path)
    run([offlink, "extract", tmp_path / "prog", "--target", NVPTX_TARGET, "--output",
         tmp_path / "image.cubin"])
    assert (tmp_path / "image.cubin").read_bytes() == \
        (tmp_path / "prog.clang.nvptx64.sm_80.img").read_bytes()
    lto = []
    for n in ("main", "vec"):
        lto.append(tmp_path / f"{n}.lto.o")
        run([CLANG, "-O2", *NVPTX, "-foffload-lto", "-c", nvptx.parent / f"{n}.c", "-o", lto[-1]])
    # -O3: each CU by llvm-lto2 with the device runtime, then ptxas; -O0: by clang -c with
    # the runtime as builtin bitcode (LLVM 19 cannot compile the whole runtime unoptimized)
    for level, runtime, cu_word, ptxas in (
            ("-O3", "-O3", "llvm-lto2 run -O3 --cg-opt-level=3 --mcpu=sm_80 ", 3),
            ("-O0", "-O1", "-march=sm_80 -O0 -c ", 1)):
        said = run([offlink, "link", "--verbose", CLANG, *NVPTX, "-foffload-lto", level, *lto,
                    nvptx / "math.o", *libs, "-o", tmp_path / f"app{level}"], env=env).stderr
        cus = [c for c in _verbose_commands(said, cu_word) if ".c.bc" in c]
        assert len(cus) == 2, said
        assert len(_verbose_commands(said, f"ptxas -m64 {runtime} ")) == ptxas, said
        rows = json.loads(run([offlink, "inspect", "--json", tmp_path / f"app{level}"]).stdout)
        assert {s["name"] for s in rows["table"]["symbols"]} == \
            {s["name"] for s in json.loads(run([offlink, "inspect", "--json",
                                                 nvptx / "prog"]).stdout)["table"]["symbols"]}


@needs_clang
@needs_cuda
@needs_llvm
def test_nvptx_dry_run_shows_the_device_runtimes_compile(offlink, nvptx, tmp_path):
    """--dry-run shows the device runtime's commands before the image link: those a cold
    link runs (--verbose), in order, with the work folder's names (the cubin's name without
    the key of the names the CUs use, as the nvlink command shows it)."""
    link = [CLANG, *NVPTX, "-O3", nvptx / "main.o", nvptx / "vec.o", nvptx / "math.o",
            f"-L{nvptx / 'offlink'}", "-lcounter", "-o", tmp_path / "prog"]
    tools = ("llvm-lto2 dump-symtab ", "llvm-lto2 run ", "ptxas ")
    shown = [line.replace('"$OFFLINK_WORK"', "W")
             for line in run([offlink, "link", "--dry-run", *link]).stdout.splitlines()]
    dry = [line for line in shown if any(t in line for t in tools)]
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
    said = run([offlink, "link", "--verbose", *link], env=env).stderr
    real = [re.sub(r"-[0-9a-f]{16}\.cubin", ".cubin",
                   re.sub(r"[^\s@]*/offlink-link-[0-9a-f]+", "W",
                          c.removeprefix("offlink: ").strip()))
            for c in re.split(r"(?=offlink: )", said) if any(t in c for t in tools)]
    assert len(dry) == 3 and dry == real, (dry, real)
    assert shown.index(dry[-1]) < next(i for i, line in enumerate(shown) if "nvlink" in line)


@needs_clang
@needs_cuda
@needs_llvm
def test_nvptx_relocatable_object_links_to_the_same_image(offlink, nvptx, tmp_path):
    """`-r` keeps each CU's cubin; the object's host rows are all its CUs': each image offers
    the rows it defines, and the final link's image is the same as from the CUs' objects."""
    run([offlink, "link", CLANG, *NVPTX, "-r", nvptx / "vec.o", nvptx / "math.o", "-o",
         tmp_path / "vm.o"])
    run([offlink, "link", CLANG, *NVPTX, nvptx / "main.o", tmp_path / "vm.o",
         f"-L{nvptx / 'offlink'}", "-lcounter", "-o", tmp_path / "prog"])
    for binary in (tmp_path / "prog", nvptx / "prog"):
        run([offlink, "extract", binary, "--target", NVPTX_TARGET, "--output",
             binary.with_suffix(".cubin")])
    assert (tmp_path / "prog.cubin").read_bytes() == (nvptx / "prog.cubin").read_bytes()


def test_nvptx_a_row_no_cubin_defines_is_one_clear_error():
    from types import SimpleNamespace

    from offlink.errors import LinkError
    from offlink.link.compile import Offer
    from offlink.toolchains.llvm.openmp_nvptx import check_entries

    cu = SimpleNamespace(cu=SimpleNamespace(label="k.c (k.o)",
                                            payload=SimpleNamespace(offered=("a", "b"))),
                         offers=(Offer("a", "function", 1, False),))
    with pytest.raises(LinkError, match=r"^k.c \(k.o\): offload entry 'b' is not defined by "
                                        r"any CU's sm_80 cubin \(target T\)$"):
        check_entries("T", "sm_80", [cu])


def test_nvptx_device_runtime_resolutions_are_the_wrappers():
    """clang-linker-wrapper's rule, the runtime being the only bitcode: every definition
    prevails; visible when a cubin names it or when neither hidden nor omittable; final in
    the image when not default-visible."""
    from offlink.toolchains.llvm.openmp_nvptx import parse_symtab, resolutions

    symtab = parse_symtab("version: 3\nH------X __kmpc_used\nH------X _ZN4ompx5unused\n"
                          "P--W---- __omp_rtl_device_environment\nDU-W---X malloc\n"
                          "D----O-X omittable\nD------- plain\n")
    assert resolutions(symtab, {"__kmpc_used", "malloc"}) == [
        ("__kmpc_used", "plx"), ("_ZN4ompx5unused", "pl"),
        ("__omp_rtl_device_environment", "plx"), ("malloc", "x"), ("omittable", "p"),
        ("plain", "px")]
    # a -foffload-lto CU's definition comes first in clang's LTO and prevails
    symtab = parse_symtab("version: 3\nH--W---- __omp_rtl_debug_kind\n")
    assert resolutions(symtab, {"__omp_rtl_debug_kind"}) == [("__omp_rtl_debug_kind", "plx")]
    assert resolutions(symtab, {"__omp_rtl_debug_kind"}, frozenset({"__omp_rtl_debug_kind"})) \
        == [("__omp_rtl_debug_kind", "")]


@needs_clang
@needs_cuda
def test_nvptx_objects_for_two_archs_are_refused_clearly(offlink, tmp_path):
    """inspect shows an sm_80 object's triple, arch and entries; CUs of two architectures in
    one link are refused in one line, leaving no output."""
    (tmp_path / "k.c").write_text(
        "#pragma omp declare target\nint gv = 3;\n#pragma omp end declare target\n"
        "int main(void) { int r = 0;\n#pragma omp target map(from: r)\nr = gv;\n"
        "return r != 3; }\n")
    (tmp_path / "j.c").write_text("int j(void) { int r = 0;\n#pragma omp target map(from: r)\n"
                                  "r = 1;\nreturn r; }\n")
    run([CLANG, "-O2", *NVPTX, "-c", tmp_path / "k.c", "-o", tmp_path / "k.o"])
    run([CLANG, "-O2", *[w.replace("sm_80", "sm_90") for w in NVPTX], "-c", tmp_path / "j.c",
         "-o", tmp_path / "j.o"])
    info = json.loads(run([offlink, "inspect", "--json", tmp_path / "k.o"]).stdout)
    (cu,) = info["cus"]
    assert cu["target"] == NVPTX_TARGET
    assert cu["options"] == ["--target=nvptx64-nvidia-cuda", "-march=sm_80"]
    assert "gv" in cu["offered"] and any(n.endswith("_main_l5") for n in cu["offered"])
    proc = run([offlink, "link", CLANG, *NVPTX, tmp_path / "k.o", tmp_path / "j.o", "-o",
                tmp_path / "app"], check=False)
    assert proc.returncode == 1 and not (tmp_path / "app").exists()
    assert proc.stderr.strip().splitlines() == [
        f"offlink: error: target {NVPTX_TARGET}: the CUs were compiled for sm_80, sm_90; "
        f"offlink links one --offload-arch per link so far"]


@needs_clang
def test_a_corrupt_offload_binary_is_one_line_and_nothing_is_written(offlink, sample, tmp_path):
    obj = bytearray((sample / "build" / "math.o").read_bytes())
    section = ElfFile(bytes(obj), "math.o").section(SECTION)
    obj[section.sh_offset] ^= 0xFF  # the magic
    (tmp_path / "bad.o").write_bytes(bytes(obj))
    (tmp_path / "app").write_text("previous output\n")
    proc = run([offlink, "link", CLANG, *OFFLOAD, tmp_path / "bad.o", "-o", tmp_path / "app"],
               check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"offlink: error: {tmp_path / 'bad.o'}: section {SECTION}: not an OffloadBinary at "
        f"0x0 (bad magic)"]
    assert (tmp_path / "app").read_text() == "previous output\n"


@needs_clang
def test_extract_writes_the_registered_image(offlink, sample, tmp_path):
    """`offlink extract` gives the very image libomptarget loads: a shared object defining
    every row (kernels, variables, indirect functions) and the kernels the plugin ran."""
    binary = sample / "build" / "clang_openmp"
    run([offlink, "extract", binary, "--target", f"openmp-{TRIPLE}", "--output",
         tmp_path / "image.so"])
    image = ElfFile.open(tmp_path / "image.so")
    assert image.e_type == 3  # ET_DYN
    exported = {s.name for s in image.symbols(dynamic=True) if s.defined}
    table = json.loads(run([offlink, "inspect", "--json", binary]).stdout)["table"]
    rows = {s["name"] for s in table["symbols"]}
    assert len(rows) > 5 and rows <= exported
    launched = set(launches(sample / "build" / "launches.txt"))
    assert {k for k in launched if "saxpy" in k or "dot" in k} <= exported


@needs_clang
def test_indirect_hit_and_miss_in_the_table(sample):
    """A `declare target indirect` function's host address is a row (a hit: translated by
    name); a host-only function's is none (a miss: the pointer stays as it is, seed 000)."""
    from offlink.table import Table

    binary = sample / "build" / "clang_openmp"
    table = Table.open(binary)
    host = {s.name: s.st_value for s in ElfFile.open(binary).symbols() if s.defined}
    hit = table.find(host["add_one"])
    assert hit is not None and hit.kind == "indirect-function"
    assert re.search(r"_add_one_l\d+$", hit.name)
    assert table.find(host["host_only"]) is None
    assert (sample / "expected.txt").read_text().count("(41): ") == 2  # both calls ran


@needs_clang
@pytest.mark.parametrize("variant", ["-Wl,--gc-sections", "-s", "-no-pie"])
def test_link_variants_run_on_the_plugin(offlink, sample, tmp_path, variant):
    build = sample / "build"
    objs = [build / f"{n}.o" for n in ("main", "vec", "math")]
    run([offlink, "link", CLANG, *OFFLOAD, variant, *objs, f"-L{build / 'offlink'}",
         "-lcounter", "-o", tmp_path / "app"])
    env = {**os.environ, "LD_LIBRARY_PATH": f"{build / 'offlink'}:{LLVM_LIB}",
           "LIBOMPTARGET_INFO": "16"}
    proc = run([tmp_path / "app"], env=env)
    assert proc.stdout == (sample / "expected.txt").read_text().split("total area")[0]
    assert len(launches_of(proc.stderr)) == 11


@needs_clang
def test_narrowed_link_narrows_the_table_not_the_registration(offlink, sample, tmp_path):
    """`--offload-symbol`: the table keeps the listed rows; libomptarget still gets every
    entry (the image is linked whole), so every kernel runs as before."""
    build = sample / "build"
    objs = [build / f"{n}.o" for n in ("main", "vec", "math")]
    run([offlink, "link", "--offload-symbol", "scale", "--offload-symbol", "calls", CLANG,
         *OFFLOAD, *objs, f"-L{build / 'offlink'}", "-lcounter", "-o", tmp_path / "app"])
    info = json.loads(run([offlink, "inspect", "--json", tmp_path / "app"]).stdout)["table"]
    assert {s["name"] for s in info["symbols"]} == {"scale", "calls"}
    env = {**os.environ, "LD_LIBRARY_PATH": f"{build / 'offlink'}:{LLVM_LIB}",
           "LIBOMPTARGET_INFO": "16"}
    proc = run([tmp_path / "app"], env=env)
    assert proc.stdout == (sample / "expected.txt").read_text().split("total area")[0]
    assert len(launches_of(proc.stderr)) == 11


def launches_of(text: str) -> list[str]:
    return re.findall(r"Launching kernel (\S+)", text)


@needs_clang
def test_dry_run_shows_the_host_link_offlink_runs(offlink, sample):
    build = sample / "build"
    proc = run([offlink, "link", "--dry-run", CLANG, *OFFLOAD, build / "vec.o",
                build / "math.o", build / "main.o", "-o", build / "never"])
    host = proc.stdout.strip().splitlines()[-1]
    assert "-fopenmp-targets=" not in host and "-lomptarget" in host
    assert "offlink-omptarget-register.o" in host and not (build / "never").exists()


CUDA_WORDS = ["--offload-arch=sm_80", f"--cuda-path={CUDA_HOME}",
              "--offload-new-driver", "-fgpu-rdc", "-Wno-unknown-cuda-version"]
CUDA_MIN_H = """\
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __constant__ __attribute__((constant))
struct dim3 { unsigned x, y, z; };
typedef struct CUstream_st *cudaStream_t;
extern "C" int cudaLaunchKernel(const void *, dim3, dim3, void **, unsigned long, cudaStream_t);
"""


FAKE_CUDART = r"""
/* A stand-in for libcudart's registration entry points (no GPU here): prints what a module
   registers, in order. */
#include <stdio.h>
#include <string.h>
struct wrapper { int magic, version; const unsigned char *data; void *unused; };
static void *handle_value;
void **__cudaRegisterFatBinary(const struct wrapper *w) {
  unsigned short header; unsigned long long size; unsigned magic;
  memcpy(&magic, w->data, 4); memcpy(&header, w->data + 6, 2); memcpy(&size, w->data + 8, 8);
  printf("fatbin wrapper %#x v%d: fatbin magic %#x, %llu bytes\n", w->magic, w->version, magic,
         header + size);
  return &handle_value;
}
void __cudaRegisterFatBinaryEnd(void **h) { printf("end %d\n", h == &handle_value); }
void __cudaUnregisterFatBinary(void **h) { printf("unregister %d\n", h == &handle_value); }
int __cudaRegisterFunction(void **h, const void *f, char *n, const char *d, int t, void *a,
                           void *b, void *c, void *e, int *s) {
  printf("function %s %s %d %d\n", n, d, t, h == &handle_value);
  return 0;
}
void __cudaRegisterVar(void **h, void *v, char *n, const char *d, int ext, unsigned long size,
                       int cst, int g) {
  printf("variable %s %s extern=%d size=%lu constant=%d global=%d\n", n, d, ext, size, cst, g);
}
int __cudaPopCallConfiguration(void *g, void *b, void *s, void *t) { return 0; }
int cudaLaunchKernel(const void *f, ...) { return 0; }
"""

# clang 19's CUDA link passes `fatbinary --image=profile=sm_NN,file=F`, which CUDA 13's
# fatbinary refuses ("Unknown option '-image'"); this shim gives it CUDA 13's words, so that
# clang's own link can be run for comparison.
FATBINARY_SHIM = """#!/bin/sh
for a in "$@"; do
  case "$a" in
    --image=profile=sm_*) rest=${a#--image=profile=sm_}
      set -- "$@" "--image3=kind=elf,sm=${rest%%,*},file=${rest#*,file=}";;
    *) set -- "$@" "$a";;
  esac
  shift
done
exec REAL "$@"
"""


@pytest.fixture(scope="module")
def clang_cuda(offlink, tmp_path_factory) -> Path:
    """Two CUDA CUs (a kernel each, a __device__ and a __constant__ variable, a call across
    CUs) compiled by clang with --offload-new-driver -fgpu-rdc, linked by offlink and by clang
    (CUDA 13's headers are too new for clang 19: the CUs declare what they need themselves)."""
    if shutil.which(CLANG) is None or not CUDA_HOME:
        pytest.skip("clang-19 or CUDA missing")
    d = tmp_path_factory.mktemp("clang_cuda")
    (d / "cuda_min.h").write_text(CUDA_MIN_H)
    (d / "a.cu").write_text('#include "cuda_min.h"\n__device__ int dv = 5;\n'
                            "extern __device__ int helper(int);\n"
                            "__global__ void kern(int *out) { *out = helper(dv); }\n"
                            "int main() { return 0; }\n")
    (d / "b.cu").write_text('#include "cuda_min.h"\n__constant__ double table[4] = {1, 2};\n'
                            "__device__ int helper(int x) { return x * 2; }\n"
                            "__global__ void kern2(double *out) { *out = table[1]; }\n")
    for n in ("a", "b"):
        run([CLANG, "-O2", "-x", "cuda", *CUDA_WORDS, "-nocudainc", "-nocudalib", "-c",
             d / f"{n}.cu", "-o", d / f"{n}.o"])
    (d / "fake").mkdir()
    (d / "fake" / "cudart.c").write_text(FAKE_CUDART)
    run(["gcc", "-shared", "-fPIC", d / "fake" / "cudart.c", "-o", d / "fake" / "libcudart.so"])
    shim = d / "shim"
    shim.mkdir()
    (shim / "fatbinary").write_text(FATBINARY_SHIM.replace("REAL", f"{CUDA_HOME}/bin/fatbinary"))
    (shim / "fatbinary").chmod(0o755)
    link = [*CUDA_WORDS, d / "a.o", d / "b.o", f"-L{d / 'fake'}", "-lcudart"]
    run([offlink, "link", CLANG, *link, "-o", d / "app"])
    env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"}
    run([CLANG, *link, "-o", d / "app.clang", "-Wl,--save-temps"], cwd=d, env=env)
    return d


@needs_clang
@needs_cuda
def test_clang_cuda_link_registers_as_clangs(offlink, clang_cuda, tmp_path):
    """The same fatbin (byte for byte), registered with the CUDA runtime by the same calls in
    the same order (a stand-in libcudart prints them)."""
    d = clang_cuda
    run([offlink, "extract", d / "app", "--target", "cuda-nvptx64-nvidia-cuda", "--output",
         tmp_path / "image.fatbin"])
    assert (tmp_path / "image.fatbin").read_bytes() == (d / "app.clang.fatbin").read_bytes()
    env = {**os.environ, "LD_LIBRARY_PATH": str(d / "fake")}
    mine = run([d / "app"], env=env).stdout
    assert mine == run([d / "app.clang"], env=env).stdout
    assert mine.splitlines() == [
        "fatbin wrapper 0x466243b1 v1: fatbin magic 0xba55ed50, "
        f"{(tmp_path / 'image.fatbin').stat().st_size} bytes",
        "function _Z4kernPi _Z4kernPi -1 1", "variable dv dv extern=0 size=4 constant=0 global=0",
        "function _Z5kern2Pd _Z5kern2Pd -1 1",
        "variable table table extern=0 size=32 constant=1 global=0", "end 1", "unregister 1"]


@needs_clang
@needs_cuda
def test_clang_cuda_table_and_inspect(offlink, clang_cuda):
    """inspect shows the objects' CUs and the program's fatbin (sm_80) with a row per entry."""
    d = clang_cuda
    (cu,) = json.loads(run([offlink, "inspect", "--json", d / "a.o"]).stdout)["cus"]
    assert cu["target"] == "cuda-nvptx64-nvidia-cuda"
    assert cu["options"] == ["--target=nvptx64-nvidia-cuda", "-march=sm_80"]
    assert set(cu["offered"]) == {"_Z4kernPi", "dv"}
    table = json.loads(run([offlink, "inspect", "--json", d / "app"]).stdout)["table"]
    assert [(t["name"], t["kind"], t["archs"]) for t in table["targets"]] == [
        ("cuda-nvptx64-nvidia-cuda", "fatbin", ["sm_80"])]
    rows = {r["name"]: (r["kind"], r["size"]) for r in table["symbols"]}
    assert rows == {"_Z4kernPi": ("function", 1), "_Z5kern2Pd": ("function", 1),
                    "dv": ("variable", 4), "table": ("variable", 32)}


@needs_clang
def test_a_weak_declare_target_variable_yields_to_a_strong_one(offlink, tmp_path):
    """`x` weak in one CU and strong in another (LLVM's weak.c test): the strong one wins on
    both sides, as ld has it; offlink refused `x` as "offered by two CUs"."""
    (tmp_path / "a.c").write_text("__attribute__((weak)) int x = 999;\n"
                                  "#pragma omp declare target to(x)\n")
    (tmp_path / "b.c").write_text("int x = 42;\n#pragma omp declare target to(x)\n")
    (tmp_path / "main.c").write_text(
        "#include <stdio.h>\nextern int x;\n#pragma omp declare target to(x)\n"
        "int main(void) { int r = 0;\n#pragma omp target map(from: r)\nr = x;\n"
        "printf(\"%d %d\\n\", x, r); return 0; }\n")
    for name in ("a", "b", "main"):
        run([CLANG, *OFFLOAD, "-c", tmp_path / f"{name}.c", "-o", tmp_path / f"{name}.o"])
    run([offlink, "link", CLANG, *OFFLOAD, *(tmp_path / f"{n}.o" for n in ("a", "b", "main")),
         "-o", tmp_path / "app"])
    env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB}
    assert run([tmp_path / "app"], env=env).stdout == "42 42\n"


@needs_clang
def test_nogpulib_under_werror_links(offlink, tmp_path):
    """`-nogpulib -Werror` (LLVM's lit flags, is_initial_device's RUN line): clang reads
    -nogpulib only when it offloads; the host link, without -fopenmp-targets, must not get
    it (unused: an error under -Werror), whether final or `-r`."""
    (tmp_path / "k.c").write_text(
        "int main(void) { int r = 1;\n#pragma omp target map(from: r)\nr = 0;\nreturn r; }\n")
    run([CLANG, *OFFLOAD, "-c", tmp_path / "k.c", "-o", tmp_path / "k.o"])
    for extra, out in (([], "app"), (["-r"], "r.o")):
        run([offlink, "link", CLANG, *OFFLOAD, "-nogpulib", "-Werror", *extra,
             tmp_path / "k.o", "-o", tmp_path / out])
    env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB}
    run([tmp_path / "app"], env=env)


# -- -Xoffload-linker: words for the device link ------------------------------------------------

XOFFLOAD_LINES = [
    ["-Xoffload-linker", "-zfoo", "-Xoffload-linker-x86_64-pc-linux-gnu", "--defsym=bar=0",
     "-Xoffload-linker-nvptx64", "-zbaz", "-Xoffload-linker", "x86_64-pc-linux-gnu=-zqux",
     "-Xoffload-linker-x86_64", "-znot", "-Xoffload-linker", "nvptx64-nvidia-cuda=-znv"],
    ["-Xoffload-linker", "-L/some/dir", "-O1", "-Xoffload-linker", "-lm", "-lz"],
]


def test_xoffload_linker_words_are_the_ones_clang_gives_each_image():
    """The driver's --device-linker= words, split per image as clang-linker-wrapper does: a
    word whose head is no triple is every image's, a `<triple>=WORD` only that triple's (the
    exact string: `-Xoffload-linker-x86_64` names no image), nvptx64 alone is its triple."""
    from offlink.toolchains.llvm.openmp import device_linker_words

    line = ["a.o", *XOFFLOAD_LINES[0], "-o", "app"]
    assert device_linker_words(line, TRIPLE) == ["-zfoo", "--defsym=bar=0", "-zqux"]
    assert device_linker_words(line, "nvptx64-nvidia-cuda") == ["-zfoo", "-zbaz", "-znv"]
    assert device_linker_words(["a.o", "-lm"], TRIPLE) == []


def test_xoffload_linker_words_are_no_host_link_words():
    """`-Xoffload-linker -lm`: -lm is the device link's, no library of the host link; the
    host link leaves the pair out (clang, not offloading there, would call it unused)."""
    from offlink.link.plan import plan_link

    plan = plan_link(["clang-19", "a.o", *XOFFLOAD_LINES[1], "-o", "app"])
    assert [i.path for i in plan.inputs] == ["a.o", "z"]
    assert plan.lib_dirs == [] and plan.host_args == ["a.o", "-O1", "-lz"]


@needs_clang
def test_xoffload_linker_words_agree_with_clang_19s_wrapper(tmp_path):
    """What clang 19's own link appends to the x86_64 image link (its wrapper's --dry-run)."""
    from offlink.toolchains.llvm.openmp import device_linker_words

    (tmp_path / "k.c").write_text("int main(void) { int r = 1;\n#pragma omp target map(from: r)"
                                  "\nr = 0;\nreturn r; }\n")
    run([CLANG, *OFFLOAD, "-c", tmp_path / "k.c", "-o", tmp_path / "k.o"])
    for words in XOFFLOAD_LINES:
        said = run([CLANG, *OFFLOAD, tmp_path / "k.o", *words, "-Wl,--dry-run", "-o",
                    tmp_path / "k"], cwd=tmp_path).stderr
        image_link = next(line for line in said.splitlines() if "--target=" + TRIPLE in line)
        # the words come last, after the libraries clang names as `-l NAME`
        appended = image_link.split(" -l gcc_s ")[-1].split()
        appended = appended[1:] if appended[:1] == ["-v"] else appended
        assert appended == device_linker_words(words, TRIPLE), words


DEVICE_LIBRARY = {
    "k.c": "#include <stdio.h>\n#pragma omp declare target\nint scale(int);\n"
           "#pragma omp end declare target\n"
           "int main(void) { int r = 0;\n#pragma omp target map(from: r)\nr = scale(7);\n"
           'printf("host %d device %d\\n", scale(7), r); return 0; }\n',
    "host.c": "int scale(int x) { return 2 * x; }\n",
    "dev3.c": "int scale(int x) { return 3 * x; }\n",
    "dev4.c": "int scale(int x) { return 4 * x; }\n",
}


@needs_clang
def test_xoffload_linker_device_library_links_and_runs_as_clangs(offlink, tmp_path):
    """A device library given by -Xoffload-linker-<triple> -L/-l (a static archive of x86_64
    code, which only the image gets: the host has its own `scale` in an object): the image
    links (without the words it cannot: `scale` is undefined there, --no-undefined), the
    program runs the library's `scale` on the plugin as clang's own link does, under -Werror
    (the host link gets no unused -Xoffload-linker word), and the image cache tells the
    words apart: a relink naming another library runs that one."""
    for name, text in DEVICE_LIBRARY.items():
        (tmp_path / name).write_text(text)
    run([CLANG, *OFFLOAD, "-c", tmp_path / "k.c", "-o", tmp_path / "k.o"])
    for lib in ("host", "dev3", "dev4"):
        run([CLANG, "-fPIC", "-c", tmp_path / f"{lib}.c", "-o", tmp_path / f"{lib}.o"])
    for lib in ("dev3", "dev4"):
        run(["ar", "rcs", tmp_path / f"lib{lib}.a", tmp_path / f"{lib}.o"])
    env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB, "OFFLINK_CACHE_DIR": str(tmp_path / "c")}
    base = [*OFFLOAD, "-Werror", tmp_path / "k.o", tmp_path / "host.o"]

    def device(lib):
        return ["-Xoffload-linker", f"-L{tmp_path}", f"-Xoffload-linker-{TRIPLE}", f"-l{lib}"]

    failed = run([offlink, "link", CLANG, *base, "-o", tmp_path / "none"], env=env, check=False)
    assert failed.returncode != 0 and "scale" in failed.stderr
    for lib, times in (("dev3", 21), ("dev4", 28), ("dev3", 21)):
        run([offlink, "link", CLANG, *base, *device(lib), "-o", tmp_path / "app"], env=env)
        run([CLANG, *base, *device(lib), "-o", tmp_path / "app.clang"], env=env)
        mine = run([tmp_path / "app"], env=env).stdout
        assert mine == run([tmp_path / "app.clang"], env=env).stdout
        assert mine == f"host 14 device {times}\n", lib


@needs_clang
@needs_cuda
def test_xoffload_linker_words_reach_nvlink(offlink, clang_cuda):
    """For NVIDIA images the words go to nvlink as clang-nvlink-wrapper passes them (-L, -l,
    linker words); a driver word nvlink has no use for is refused in one line."""
    d = clang_cuda
    words = ["-Xoffload-linker-nvptx64", "-L/dev/lib", "-Xoffload-linker", "-lcudadev",
             "-Xoffload-linker", "-Wl,--foo,--bar", f"-Xoffload-linker-{TRIPLE}", "-lnot"]
    shown = run([offlink, "link", "--dry-run", CLANG, *CUDA_WORDS, d / "a.o", d / "b.o",
                 *words, "-o", d / "never"]).stdout
    nvlink = next(line for line in shown.splitlines() if "nvlink" in line)
    assert nvlink.endswith(" -L /dev/lib -l cudadev --foo --bar"), nvlink
    failed = run([offlink, "link", "--dry-run", CLANG, *CUDA_WORDS, d / "a.o",
                  "-Xoffload-linker", "-O3", "-o", d / "never"], check=False)
    assert failed.returncode != 0
    assert failed.stderr.startswith("offlink: error: -Xoffload-linker word '-O3' for target ")


@needs_clang
@needs_cuda
@pytest.mark.parametrize("words", [["-mllvm", "-inline-threshold=0"],
                                   ["-mllvm=-inline-threshold=0"], ["-Xcuda-ptxas", "-v"]])
def test_clang_cuda_link_refuses_what_its_device_link_cannot_take(offlink, clang_cuda, words):
    """clang 19 gives -mllvm and -Xcuda-ptxas to a CUDA link's device side as to OpenMP's
    sm_NN one (`-mllvm X` and `--ptxas-arg=X` to clang-linker-wrapper): the same one-line
    error as the OpenMP NVIDIA link, not the words given to the host link."""
    d = clang_cuda
    said = run([CLANG, "-###", *CUDA_WORDS, d / "a.o", *words, "-o", d / "never"]).stderr
    wrapper = next(line for line in said.splitlines() if "clang-linker-wrapper" in line)
    assert ('"--ptxas-arg=-v"' if words[0] == "-Xcuda-ptxas" else
            '"-mllvm" "-inline-threshold=0"') in wrapper
    failed = run([offlink, "link", "--dry-run", CLANG, *CUDA_WORDS, d / "a.o", d / "b.o",
                  *words, "-o", d / "never"], check=False)
    assert failed.returncode != 0 and not failed.stdout
    assert failed.stderr == (f"offlink: error: {' '.join(words)}: clang 19 gives it to the "
                             f"NVIDIA device link (clang-linker-wrapper), which offlink's "
                             f"per-CU NVIDIA builds do not take yet; leave it off the link "
                             f"line\n")


@needs_clang
@needs_cuda
@pytest.mark.parametrize("level", ["-O0", "-O1", "-O3"])
def test_clang_cuda_offload_lto_cu_follows_the_link_lines_level(offlink, clang_cuda, tmp_path,
                                                                level):
    """A -foffload-lto CUDA CU is compiled at the level clang's driver gives its wrapper for
    the device LTO (`--opt-level=ON`, as for OpenMP), not at -O2 whatever the line says; at
    -O0 too the program links and registers its kernel."""
    d = clang_cuda
    run([CLANG, "-O2", "-x", "cuda", *CUDA_WORDS, "-foffload-lto", "-nocudainc", "-nocudalib",
         "-I", d, "-c", d / "b.cu", "-o", tmp_path / "b.o"])
    link = [level, *CUDA_WORDS, "-foffload-lto", tmp_path / "b.o", d / "a.o",
            f"-L{d / 'fake'}", "-lcudart"]
    said = run([CLANG, "-###", *link, "-o", tmp_path / "app"]).stderr
    given = re.search(r'"--opt-level=O(\d)"', said)
    want = f"-O{given.group(1) if given else 2}"
    shown = run([offlink, "link", "--dry-run", CLANG, *link, "-o", tmp_path / "app"]).stdout
    compile_line = next(line for line in shown.splitlines()
                        if line.startswith(f"{CLANG} --target=nvptx64-nvidia-cuda "))
    assert re.search(r" -O(\d) -c ", compile_line).group(0) == f" {want} -c ", compile_line
    if level == "-O0":
        run([offlink, "link", CLANG, *link, "-o", tmp_path / "app"])
        env = {**os.environ, "LD_LIBRARY_PATH": str(d / "fake")}
        assert "function _Z5kern2Pd" in run([tmp_path / "app"], env=env).stdout


# -- the host link's libraries in a CPU image's link ----------------------------------------------

def test_a_cpu_image_gets_the_host_links_libraries_as_the_wrapper_copies_them(tmp_path):
    """clang-linker-wrapper 19 (`!Triple.isGPU()`) gives the x86_64 image's link the host
    link's -L, every -l (static archives too), the files that are archives or shared objects,
    -rpath and --whole-archive, in order; -Bstatic, --as-needed, groups and objects not."""
    from offlink.toolchains.llvm.openmp import host_library_words, image_archives

    (tmp_path / "d").mkdir()
    elf = b"\x7fELF\x02\x01" + bytes(10)  # then e_type: 1 an object, 3 a shared object
    files = {"libs.a": b"!<arch>\n", "d/libt.a": b"!<arch>\n", "libu.so": b"x",
             "libu.a": b"!<arch>\n", "x.o": elf + b"\1\0", "y.so": elf + b"\3\0",
             "t.ld": b"INPUT(x)"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    t = str(tmp_path)
    line = ["main.o", f"{t}/x.o", f"-L{t}", "-ls", f"{t}/libs.a", "-Wl,--whole-archive",
            "-lu", "-Wl,--no-whole-archive", f"-Wl,-L,{t}/d,-l,t,-Bstatic", "-lm",
            "-Xlinker", "-rpath", "-Xlinker", "/r1", "-Wl,--rpath=/r2,-R,/r3", f"{t}/y.so",
            f"-Wl,-soname,{t}/y.so", f"{t}/t.ld", "-Wl,--as-needed,--start-group", "-lz",
            "-Xopenmp-target", "-lnot", "-Xoffload-linker", "-lnot2", "-o", "app"]
    words = host_library_words(line)
    assert words == [f"-L{t}", "-ls", f"{t}/libs.a", "-Wl,--whole-archive", "-lu",
                     "-Wl,--no-whole-archive", f"-L{t}/d", "-lt", "-lm", "-Wl,-rpath,/r1",
                     "-Wl,-rpath,/r2", f"{t}/y.so", "-lz"]
    # keyed by content: what the image link reads and links in (libu resolves to its .so)
    assert image_archives(words) == [f"{t}/libs.a", f"{t}/libs.a", f"{t}/d/libt.a"]


def test_xopenmp_target_takes_the_next_word():
    """clang's `-Xopenmp-target[=<triple>] WORD`: WORD is the device compile's (clang 19's
    link gives it to nothing, -### shows), no -l or output of the host link."""
    from offlink.link.plan import plan_link

    plan = plan_link([CLANG, "a.o", "-Xopenmp-target", "-lm", "-Xopenmp-target=nvptx64",
                      "-march=sm_80", f"-Xopenmp-target={TRIPLE}", "-o", "-o", "app"])
    assert [i.path for i in plan.inputs] == ["a.o"]
    assert plan.output == "app" and plan.host_args == ["a.o"]


HOST_LIB_C = "int scale(int x) { return x * FACTOR; }\n"
USES_HOST_LIB_C = """\
#include <stdio.h>
int scale(int x);
#pragma omp declare target to(scale)
int main(void) { int r = 0;
#pragma omp target map(from: r)
  r = scale(14);
  printf("%d\\n", r); return 0; }
"""


@needs_clang
def test_device_code_uses_a_host_static_archive_as_clangs_link(offlink, tmp_path):
    """The x86_64 image links the host line's static archive as clang's does (its `scale`
    runs in the target region): offlink's program prints what clang's prints, its kernel
    launched on the plugin; the archive changed, the relink links the image again (the
    archive's content is in the image's key). -Xopenmp-target words are clang's: dropped."""
    (tmp_path / "lib.c").write_text(HOST_LIB_C)
    (tmp_path / "main.c").write_text(USES_HOST_LIB_C)
    run([CLANG, "-O2", *OFFLOAD, "-c", tmp_path / "main.c", "-o", tmp_path / "main.o"])
    env = {**os.environ, "LD_LIBRARY_PATH": LLVM_LIB, "LIBOMPTARGET_INFO": "16",
           "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
    line = [*OFFLOAD, tmp_path / "main.o", f"-L{tmp_path}", "-Wl,-Bstatic", "-lhost",
            "-Wl,-Bdynamic", f"-Xopenmp-target={TRIPLE}", "-lnosuch", "-Xopenmp-target", "-lnot"]
    for factor, want in (("3", "42\n"), ("4", "56\n")):
        run([CLANG, "-O2", f"-DFACTOR={factor}", "-c", tmp_path / "lib.c", "-o",
             tmp_path / "lib.o"])
        (tmp_path / "libhost.a").unlink(missing_ok=True)
        run(["ar", "rcs", tmp_path / "libhost.a", tmp_path / "lib.o"])
        run([CLANG, *line, "-o", tmp_path / "ref"])
        run([offlink, "link", CLANG, *line, "-o", tmp_path / "app"], env=env)
        ref, got = run([tmp_path / "ref"], env=env), run([tmp_path / "app"], env=env)
        assert got.stdout == ref.stdout == want
        assert len(launches_of(got.stderr)) == len(launches_of(ref.stderr)) == 1


@needs_clang
def test_bitcode_objects_link_plainly_and_host_lto_offload_objects_are_refused(offlink, tmp_path):
    """clang's -flto objects are LLVM bitcode: without target code they are the host link's
    (a plain LTO program links and runs as with clang's own link); with it (the offload
    driver's host compile with -flto) offlink says in one line that it reads ELF only, for
    an object and an archive member alike, and writes nothing."""
    (tmp_path / "a.c").write_text("int f(void) { return 3; }\n")
    (tmp_path / "m.c").write_text('#include <stdio.h>\nint f(void);\n'
                                  'int main(void) { printf("%d\\n", f()); return 0; }\n')
    (tmp_path / "k.c").write_text(resized_c(1))
    for name in ("a", "m"):
        run([CLANG, "-O2", "-flto", "-c", tmp_path / f"{name}.c", "-o", tmp_path / f"{name}.o"])
    run([CLANG, "-O2", "-flto", *OFFLOAD, "-c", tmp_path / "k.c", "-o", tmp_path / "k.o"])
    run([offlink, "link", CLANG, "-flto", tmp_path / "a.o", tmp_path / "m.o", "-o",
         tmp_path / "app"])
    assert run([tmp_path / "app"]).stdout == "3\n"
    run(["ar", "rc", tmp_path / "libk.a", tmp_path / "k.o"])
    for inputs, name in (([tmp_path / "k.o"], "k.o"), ([f"-L{tmp_path}", "-lk"], "libk.a(k.o)")):
        proc = run([offlink, "link", CLANG, "-flto", *OFFLOAD, tmp_path / "m.o", *inputs, "-o",
                    tmp_path / "never"], check=False)
        assert proc.returncode == 1 and not (tmp_path / "never").exists()
        assert proc.stderr.startswith("offlink: error: ") and proc.stderr.count("\n") == 1
        assert f"{name}: LLVM bitcode with target code" in proc.stderr
