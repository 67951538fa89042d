"""GCC 12's offload words on a link line, read as GCC's driver reads them (toolchains/gcc/
dialect.py, "the link line's offload words").

Each case is a literal link line and what GCC 12.2's own link did with it under `gcc -v`
(Debian 12, gcc-12-offload-nvptx and gcc-12-offload-amdgcn installed): the targets whose
mkoffload ran, and the -foffload-options values COLLECT_GCC_OPTIONS showed, in order.
"""

from __future__ import annotations

import os
import shutil

import pytest
from conftest import needs_tool, run

from offlink.errors import UsageError
from offlink.toolchains.gcc import dialect as gcc
from offlink.toolchains.gcc import link_words as gcc_link

BOTH = ("nvptx-none", "amdgcn-amdhsa")

# (link line words, targets (None: every installed one), -foffload-options values)
CASES = [
    ([], None, ()),
    (["-foffload=nvptx-none"], ("nvptx-none",), ()),
    (["-foffload=amdgcn-amdhsa"], ("amdgcn-amdhsa",), ()),
    # words accumulate: both mkoffloads ran
    (["-foffload=nvptx-none", "-foffload=amdgcn-amdhsa"], BOTH, ()),
    (["-foffload=nvptx-none,amdgcn-amdhsa"], BOTH, ()),
    # `default` forgets the list: both ran
    (["-foffload=nvptx-none", "-foffload=default"], None, ()),
    # `disable` last: no mkoffload ran, a host-only program
    (["-foffload=nvptx-none", "-foffload=disable"], (), ()),
    (["-foffload=disable"], (), ()),
    # a target after `disable`: GCC 12.2's own link fails ("could not find accel//mkoffload":
    # its list then starts with an empty name); offlink builds the target named
    (["-foffload=disable", "-foffload=nvptx-none"], ("nvptx-none",), ()),
    # -foffload=-OPTS: every target (both ran), kept as -foffload-options=-lm -latomic
    (["-foffload=-lm -latomic"], None, ("-lm -latomic",)),
    (["-foffload=-lm"], None, ("-lm",)),
    # -foffload=T=OPTS names the target too (only nvptx's mkoffload ran)
    (["-foffload=nvptx-none=-lm -latomic"], ("nvptx-none",), ("nvptx-none=-lm -latomic",)),
    # ... and the options go to the targets it names: -O1 reached both lto1s
    (["-foffload=nvptx-none,amdgcn-amdhsa=-O1"], BOTH, ("nvptx-none,amdgcn-amdhsa=-O1",)),
    (["-foffload=nvptx-none=-O1", "-foffload=amdgcn-amdhsa"], BOTH, ("nvptx-none=-O1",)),
    # -foffload-options never changes the targets; any order and mix
    (["-foffload-options=nvptx-none=-misa=sm_80", "-foffload-options=-lm",
      "-foffload=nvptx-none"], ("nvptx-none",), ("nvptx-none=-misa=sm_80", "-lm")),
    (["-foffload-options=-lm", "-foffload=-latomic", "-foffload-options=nvptx-none=-O3"], None,
     ("-lm", "-latomic", "nvptx-none=-O3")),
]


@pytest.mark.parametrize(("words", "targets", "options"), CASES)
def test_link_words_as_gcc_12_reads_them(words, targets, options):
    read = gcc_link.read_words(["-O2", "-fopenmp", *words, "x.o"])
    assert (read.targets, read.options) == (targets, options)


def test_options_reach_the_targets_they_name():
    read = gcc_link.read_words(["-foffload=nvptx-none=-lm -latomic", "-foffload=-O1",
                                "-foffload-options=amdgcn-amdhsa=-march=gfx906"])
    assert gcc.offload_options(list(read.options), "nvptx-none") == ["-lm", "-latomic", "-O1"]
    assert gcc.offload_options(list(read.options), "amdgcn-amdhsa") == ["-O1", "-march=gfx906"]


def test_a_target_gcc_is_not_configured_for_is_one_line():
    # GCC: "GCC is not configured to support 'bogus' as '-foffload=' argument"
    with pytest.raises(UsageError, match="-foffload=bogus: GCC 12 is not configured for "
                                         "offload target 'bogus'"):
        gcc_link.read_words(["-foffload=bogus"])
    with pytest.raises(UsageError, match="'sm_80'"):
        gcc_link.read_words(["-foffload-options=sm_80=-O2"])


def test_without_a_target_word_every_installed_accel_compiler(tmp_path, monkeypatch):
    machine = os.uname().machine
    for t in ("nvptx-none", "amdgcn-amdhsa"):
        tool = tmp_path / t / f"{machine}-linux-gnu-accel-{t}-gcc-12"
        tool.parent.mkdir()
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o755)
    words = gcc_link.read_words([])
    monkeypatch.setenv("PATH", str(tmp_path / "nvptx-none"))
    assert gcc_link.wanted(words, "12") == ("nvptx-none",)
    monkeypatch.setenv("PATH", f"{tmp_path / 'amdgcn-amdhsa'}:{tmp_path / 'nvptx-none'}")
    assert gcc_link.wanted(words, "12") == BOTH
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gcc_link.wanted(words, "12") == ()
    assert gcc_link.wanted(gcc_link.read_words(["-foffload=nvptx-none"]), "12") == \
        ("nvptx-none",)


def test_a_target_offlink_cannot_build_is_one_line_never_another_in_its_place(monkeypatch):
    # offlink builds both of GCC 12's targets (nvptx.py, gcn.py); the refusal stays for a
    # target it would not build (here: a BUILT without amdgcn-amdhsa, as before gcn.py).
    gcc_link.check_buildable(BOTH, gcc_link.read_words([]), "12")
    gcc_link.check_buildable(("amdgcn-amdhsa",), gcc_link.read_words(["-foffload=amdgcn-amdhsa"]),
                             "12")
    monkeypatch.setattr(gcc_link, "BUILT", ("nvptx-none",))
    asked = gcc_link.read_words(["-foffload=amdgcn-amdhsa"])
    with pytest.raises(UsageError) as e:
        gcc_link.check_buildable(("amdgcn-amdhsa",), asked, "12")
    assert str(e.value) == (
        "GCC's own link would build an offload image for amdgcn-amdhsa (-foffload=amdgcn-amdhsa "
        "asks for it); offlink builds nvptx-none only: link with -foffload=nvptx-none or with "
        "GCC's own link")
    with pytest.raises(UsageError, match="gcc-12-offload-amdgcn is installed and no "
                                         "-foffload= names the targets"):
        gcc_link.check_buildable(BOTH, gcc_link.read_words([]), "12")
    gcc_link.check_buildable(("nvptx-none",), gcc_link.read_words([]), "12")


HAVE = shutil.which(gcc.accel_compiler("12")) is not None and shutil.which("nvptx-none-ld")
needs_gcc_offload = needs_tool(not HAVE, "gcc-12-offload-nvptx / nvptx-tools missing")
PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  double x = argc > 1 ? atof(argv[1]) : 0.5, y = 0;
#pragma omp target map(tofrom: y)
  y = cos(x);
  printf("%.6f\n", y);
  return 0;
}
"""


@needs_gcc_offload
def test_link_words_on_real_links(offlink, tmp_path):
    """-foffload=-lm reaches the device link (without it: `unresolved symbol cos`, as GCC's
    own link); -foffload=disable links the host program alone, as GCC's does."""
    (tmp_path / "m.c").write_text(PROGRAM)
    run(["gcc", "-O2", "-fopenmp", "-foffload=nvptx-none", "-c", "m.c"], cwd=tmp_path)
    base = [offlink, "link", "gcc", "-fopenmp", "-foffload=nvptx-none",
            "-foffload-options=-misa=sm_80", "m.o", "-lm"]  # sm_30: CUDA 12+'s ptxas refuses
    for words in (["-foffload=-lm"], ["-foffload=nvptx-none=-lm -latomic"],
                  ["-foffload-options=nvptx-none=-lm"]):
        run([*base, *words, "-o", "prog"], cwd=tmp_path)
        assert run([tmp_path / "prog"]).stdout == "0.877583\n"
        assert "nvptx-none" in run([offlink, "inspect", tmp_path / "prog"]).stdout
    # Without it: one line with the symbol, the CU that needs it and the fix.
    missing = run([*base, "-o", "prog"], cwd=tmp_path, check=False)
    assert missing.returncode != 0
    assert missing.stderr.splitlines() == [
        "offlink: error: device link for target nvptx-none: unresolved symbol cos (needed by "
        "m.c (m.o); in libm): link with -foffload-options=nvptx-none=-lm"]
    # The whole command and nvptx-none-ld's own lines under --verbose only.
    verbose = run([offlink, "link", "--verbose", *base[2:], "-o", "prog"], cwd=tmp_path,
                  check=False).stderr
    assert "unresolved symbol cos\n" in verbose and "[nvptx-none-ld -o " in verbose
    # -foffload=amdgcn-amdhsa: an amdgcn-amdhsa image and no nvptx-none one in its place
    # (-lm for the GCN device link too, as GCC's own link needs it).
    if shutil.which(gcc.accel_compiler("12", "amdgcn-amdhsa")):
        run([offlink, "link", "gcc", "-fopenmp", "-foffload=amdgcn-amdhsa", "-foffload=-lm",
             "m.o", "-lm", "-o", "amd"], cwd=tmp_path)
        assert run([tmp_path / "amd"]).stdout == "0.877583\n"
        shown = run([offlink, "inspect", tmp_path / "amd"]).stdout
        assert "amdgcn-amdhsa" in shown and "nvptx-none" not in shown
    run([*base, "-foffload=disable", "-o", "host"], cwd=tmp_path)
    run(["gcc", "-fopenmp", "-foffload=disable", "m.o", "-lm", "-o", "host.gcc"], cwd=tmp_path)
    assert (tmp_path / "host").read_bytes() == (tmp_path / "host.gcc").read_bytes()


def test_a_device_link_error_names_symbols_cus_and_libraries(tmp_path):
    from offlink.errors import ToolError
    from offlink.toolchains.gcc.nvptx import explain

    (tmp_path / "libatomic.a").write_bytes(b"!<arch>\n// BEGIN GLOBAL FUNCTION DEF: "
                                           b"__atomic_load_16\n")
    (tmp_path / "libm.a").write_bytes(b"!<arch>\n// BEGIN GLOBAL FUNCTION DEF: sin\n")
    objects = [("a.c (a.o)", b"\n// BEGIN GLOBAL FUNCTION DECL: __atomic_load_16\n"),
               ("b.c (b.o)", b"\n// BEGIN GLOBAL FUNCTION DECL: host_only\n"
                             b"// BEGIN GLOBAL FUNCTION DECL: __atomic_load_16\n")]
    said = ToolError("device link failed", 1, "unresolved symbol __atomic_load_16\n"
                                               "unresolved symbol host_only\n")
    e = explain(said, ["nvptx-none-ld", "-o", "x", f"-L{tmp_path}", "a.o", "b.o"], objects)
    assert str(e) == (
        "device link for target nvptx-none: unresolved symbols __atomic_load_16 (needed by "
        "a.c (a.o), b.c (b.o); in libatomic), host_only (needed by b.c (b.o)): link with "
        "-foffload-options=nvptx-none=-latomic") and e.output == ""
    alone = explain(ToolError("x", 1, "unresolved symbol host_only\n"), ["nvptx-none-ld"],
                    objects)
    assert str(alone).endswith("host_only (needed by b.c (b.o)): no GCC device library "
                               "defines it (is it a host-only function called in a target "
                               "region?)")
    assert explain(ToolError("x", 1, "some other failure\n"), ["nvptx-none-ld"], objects) is None
