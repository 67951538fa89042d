"""clang-23's OpenMP offload objects (OffloadBinary version 2) linked by offlink and by clang-23
itself inside the Debian sid chroot (tests/chroots: clang-23 23.1.4, liboffload-23,
libomp-23-dev), run on libomptarget 23's x86_64 plugin.

The program is tests/llvm_offload/gpu's (three CUs: statics of one name in each, kernels
calling another CU's functions, a `declare target indirect` function called through a host
pointer, sum and max reductions), compiled for x86_64-pc-linux-gnu by default and with
-foffload-lto: both links print its expected output and launch the same kernels.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT, chroot, in_chroot

from offlink.elf import ElfFile
from offlink.formats.declarations import OffloadBinaryHeader
from offlink.formats.offload_binary import SECTION

PROGRAM = ROOT / "tests" / "llvm_offload" / "gpu"
OFFLOAD = ["-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu"]
LIB = "/usr/lib/llvm-23/lib"


def sid(command: list, cwd: Path) -> str:
    """`command` run in the sid chroot; its output, or the test fails showing what it said."""
    done = in_chroot("sid", [str(w) for w in command], cwd=cwd)
    assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


@pytest.fixture(scope="module", params=[False, True], ids=["default", "lto"])
def built(request, offlink, tmp_path_factory) -> Path:
    chroot("sid")  # (skips, or fails under CI=true, where the chroot is not built)
    folder = tmp_path_factory.mktemp("clang23")
    lto = ["-foffload-lto"] if request.param else []
    objs = []
    for src in ("main.c", "field.c", "stats.c"):
        objs.append(folder / src.replace(".c", ".o"))
        sid(["clang-23", "-O2", *OFFLOAD, *lto, f"-I{PROGRAM}", "-c", PROGRAM / src, "-o",
             objs[-1]], folder)
    link = [*OFFLOAD, *lto, *objs, f"-L{LIB}"]
    sid(["clang-23", *link, "-o", folder / "prog.clang"], folder)
    sid(["offlink", "link", "clang-23", *link, "-o", folder / "prog"], folder)
    return folder


def test_clang23_objects_carry_offload_binary_version_2(built):
    elf = ElfFile.open(str(built / "main.o"))
    assert OffloadBinaryHeader.parse(bytes(elf.content(elf.section(SECTION)))).version == 2


def test_offlink_and_clang23_links_print_and_launch_the_same(built):
    launched = {}
    for prog in ("prog", "prog.clang"):
        said = sid(["env", f"LD_LIBRARY_PATH={LIB}", "LIBOMPTARGET_INFO=16", built / prog],
                   built)
        printed = [line for line in said.splitlines() if "PluginInterface" not in line]
        assert "\n".join(printed) + "\n" == (PROGRAM / "expected.txt").read_text()
        launched[prog] = sorted(re.findall(r"Launching kernel (\S+)", said))
    assert launched["prog"] == launched["prog.clang"] and len(launched["prog"]) == 4


def test_llvm23_bitcode_symbols_are_llvm_lto2s(offlink, tmp_path):
    """LLVM 23's bitcode symbol table (irsymtab version 4: Uncommon's CommonSize a u64) read
    as `llvm-lto2-23 dump-symtab` lists it, in its order: C++ host bitcode (weak, templates,
    TLS, a section) and C with common symbols; the reader's list printed inside the chroot."""
    from test_clang_lto import CXX

    chroot("sid")
    (tmp_path / "x.cpp").write_text(CXX.replace("int comm;", "int comm;\n__thread int tl;"))
    (tmp_path / "c.c").write_text("int c;\nlong big[3];\nint f(void) { return c + big[1]; }\n")
    script = ("import sys\nfrom offlink.formats.bitcode import symbols\n"
              "for s in symbols(open(sys.argv[1], 'rb').read(), 'x.bc'):\n"
              "    print(s.dump_flags, s.name, s.section, sep='\\t')\n")
    found = {}
    for src, driver in (("x.cpp", "clang++-23"), ("c.c", "clang-23")):
        bc = tmp_path / (src.split(".")[0] + ".bc")
        sid([driver, "-O2", "-flto", "-fcommon", "-c", tmp_path / src, "-o", bc], tmp_path)
        theirs = []
        for line in sid(["/usr/lib/llvm-23/bin/llvm-lto2", "dump-symtab", bc],
                        tmp_path).splitlines():
            if line.startswith("version: "):
                assert line == "version: 4"
            if len(line) > 9 and line[8] == " " and line[0] in "DHP" and line[1] in "U-":
                theirs.append([line[:8], line[9:], ""])
            elif line.startswith("         section "):
                theirs[-1][2] = line[len("         section "):]
        mine = [line.split("\t") for line in
                sid(["python3", "-c", script, bc], tmp_path).splitlines()]
        assert mine == theirs and mine, src
        found[src] = mine
    assert ["D-------", "insect", "mysect"] in found["x.cpp"]
    assert ["D-C-----", "c", ""] in found["c.c"] and ["D-C-----", "big", ""] in found["c.c"]
