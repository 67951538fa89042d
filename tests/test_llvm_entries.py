"""Every generation of LLVM's offload entries (formats/offload_entries.py) and one clear error
for anything offlink does not read: objects from clang-22 (llvm_offload_entries), clang-19
(32-byte rows) and clang 20's layout (56-byte rows in omp_offloading_entries, made from a
clang-22 object by renaming the section, as clang 20 names it), and clang-22 objects with one
field changed into what no release writes. Each refusal: a non-zero exit, one
`offlink: error:` line naming the object and what it is, and no output written."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
from pathlib import Path

import pytest
from conftest import needs_tool, run

from offlink.elf import ElfFile
from offlink.formats import offload_entries as fmt
from offlink.formats.offload_binary import HEADER, SECTION

CLANG22 = "clang-22"
CLANG19 = "clang-19"
TRIPLE = "x86_64-pc-linux-gnu"
OFFLOAD = ["-fopenmp", f"-fopenmp-targets={TRIPLE}"]
LIBS22 = ["-L/usr/lib/llvm-22/lib", "-L/usr/lib/llvm-19/lib"]
needs_clang22 = needs_tool(
    shutil.which(CLANG22) is None or shutil.which("clang-linker-wrapper-22") is None
    or not Path("/usr/lib/llvm-22/lib/libomptarget.so").exists(),
    "clang-22, clang-tools-22 or liboffload-22-dev missing (.ci/run installs them)")
needs_clang19 = needs_tool(shutil.which(CLANG19) is None
                           or shutil.which("clang-offload-packager-19") is None,
                           "clang-19 or clang-tools-19 missing (.ci/run installs them)")

K_C = r"""
#include <stdio.h>
int g = 5;
#pragma omp declare target(g)
int main(void) {
  int s = 0;
#pragma omp target map(tofrom: s)
  s = g + 1;
  printf("%d\n", s);
  return 0;
}
"""


def _object(tmp_path: Path, clang: str = CLANG22, name: str = "k") -> Path:
    (tmp_path / f"{name}.c").write_text(K_C)
    obj = tmp_path / f"{name}.o"
    run([clang, "-O2", *OFFLOAD, "-c", tmp_path / f"{name}.c", "-o", obj])
    return obj


def _patch(obj: Path, section: str, offset: int, data: bytes, out: Path) -> Path:
    """A copy of `obj` with `data` written at `offset` of `section`'s content."""
    elf = ElfFile.open(str(obj))
    s = elf.section(section)
    assert s is not None, section
    raw = bytearray(obj.read_bytes())
    raw[s.sh_offset + offset:s.sh_offset + offset + len(data)] = data
    out.write_bytes(bytes(raw))
    return out


def _rename(obj: Path, old: str, new: str, out: Path) -> Path:
    run(["objcopy", f"--rename-section={old}={new}", obj, out])
    return out


def test_rows_of_each_generation_and_kind():
    v1 = fmt.ENTRY_V1.pack(0, 0, 4, 0, 0) * 2  # an object's rows: pointers zero (RELA)
    assert [r.generation for r in fmt.rows("omp_offloading_entries", v1, "x")] == [1, 1]
    v2 = fmt.ENTRY_V2.pack(0, 1, 1, 0, 0, 0, 4, 0, 0) + fmt.ENTRY_V2.pack(0, 1, 2, 0, 0, 0,
                                                                           0, 0, 0)
    assert fmt.generation_of("cuda_offloading_entries", v2[:56] * 2) == 2
    rows = fmt.rows("llvm_offload_entries", v2, "x")
    assert [(r.kind, r.generation, r.name_at) for r in rows] == [("openmp", 3, 24),
                                                                 ("cuda", 3, 80)]
    assert [r.kind for r in fmt.rows("llvm_offload_entries", v2, "x", "cuda")] == ["cuda"]
    # `#pragma omp requires` (clang 21+): a ".requires" row for libomptarget, no entry
    requires = fmt.ENTRY_V2.pack(0, 1, 1, fmt.REGISTER_REQUIRES, 0, 0, 0, 8, 0)
    assert len(fmt.rows("llvm_offload_entries", v2 + requires, "x")) == 2
    requires19 = fmt.ENTRY_V1.pack(0, 0, 0, fmt.REGISTER_REQUIRES, 8)  # clang 19's
    assert len(fmt.rows("omp_offloading_entries", v1 + requires19, "x")) == 2
    # 224 bytes are 7 rows of 32 as well as 4 of 56: the fields tell them apart
    assert fmt.generation_of("omp_offloading_entries", fmt.ENTRY_V1.pack(0, 0, 0, 0, 0) * 7) == 1


@pytest.mark.parametrize("row, message", [
    (fmt.ENTRY_V2.pack(0, 2, 1, 0, 0, 0, 0, 0, 0), "entry 0 has version 2; offlink reads "
                                                   "version 1"),
    (fmt.ENTRY_V2.pack(0, 1, 4, 0, 0, 0, 0, 0, 0), "offload kind hip (4)"),
    (fmt.ENTRY_V2.pack(0, 1, 9, 0, 0, 0, 0, 0, 0), "offload kind 9, unknown"),
    (fmt.ENTRY_V2.pack(0, 1, 1, 0, 0, 0, 0, 0, 0)[:50], "not a multiple of 56"),
], ids=["version", "hip", "unknown-kind", "truncated"])
def test_rows_offlink_does_not_read_are_format_errors(row, message):
    from offlink.errors import FormatError

    with pytest.raises(FormatError, match=re.escape(message)):
        fmt.rows("llvm_offload_entries", row, "k.o: llvm_offload_entries")
    with pytest.raises(FormatError, match="'hip_offloading_entries', which offlink does not"):
        fmt.rows("hip_offloading_entries", b"", "k.o: hip_offloading_entries")


@needs_clang22
def test_clang22_object_offers_its_entries(offlink, tmp_path):
    """The rows of llvm_offload_entries, by name, in inspect (before: "the entries of GCC's
    host tables"), and `offlink extract` writes its image."""
    obj = _object(tmp_path)
    info = json.loads(run([offlink, "inspect", "--json", obj]).stdout)
    (cu,) = info["cus"]
    assert cu["compiler"] == "clang-22" and cu["target"] == f"openmp-{TRIPLE}"
    assert set(cu["offered"]) == {"g", *[n for n in cu["offered"]
                                        if n.startswith("__omp_offloading_")]}
    assert len(cu["offered"]) == 2
    text = run([offlink, "inspect", obj]).stdout
    assert "GCC" not in text and "offers:  g, __omp_offloading_" in text


@needs_clang22
def test_clang20s_layout_is_read(offlink, tmp_path):
    """clang 20's rows: the same 56 bytes in omp_offloading_entries (objcopy renames the
    section of a clang-22 object, and its relocations with it)."""
    obj = _rename(_object(tmp_path), "llvm_offload_entries", "omp_offloading_entries",
                  tmp_path / "k20.o")
    elf = ElfFile.open(str(obj))
    content = bytes(elf.content(elf.section("omp_offloading_entries")))
    assert fmt.generation_of("omp_offloading_entries", content) == 2
    info = json.loads(run([offlink, "inspect", "--json", obj]).stdout)
    assert len(info["cus"][0]["offered"]) == 2 and "g" in info["cus"][0]["offered"]


@needs_clang19
def test_clang19_rows_are_still_32_bytes(tmp_path):
    from offlink.toolchains.llvm.dialect import entries_of_kind

    elf = ElfFile.open(str(_object(tmp_path, CLANG19)))
    content = bytes(elf.content(elf.section("omp_offloading_entries")))
    assert fmt.generation_of("omp_offloading_entries", content) == 1
    assert {e.name for e in entries_of_kind(elf)} >= {"g"}


def _refused(offlink, obj: Path, tmp_path: Path, *words: str) -> str:
    """The one error line of a link of `obj` (and of inspect where it reads entries)."""
    out = tmp_path / "app"
    proc = run([offlink, "link", CLANG22, *OFFLOAD, *LIBS22, obj, "-o", out], check=False)
    lines = proc.stderr.splitlines()
    assert proc.returncode != 0, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("offlink: error: "), proc.stderr
    assert not out.exists()
    assert not list(tmp_path.glob("app*")), list(tmp_path.glob("app*"))
    for w in words:
        assert w in lines[0], lines[0]
    print(lines[0])
    return lines[0]


@needs_clang22
def test_an_unknown_entries_section_is_refused(offlink, tmp_path):
    obj = _rename(_object(tmp_path), "llvm_offload_entries", "hip_offloading_entries",
                  tmp_path / "hip.o")
    _refused(offlink, obj, tmp_path, "hip.o", "hip_offloading_entries",
             "llvm_offload_entries")
    proc = run([offlink, "inspect", obj], check=False)
    assert proc.returncode != 0 and "hip_offloading_entries" in proc.stderr


@needs_clang22
def test_an_unknown_entry_version_is_refused(offlink, tmp_path):
    obj = _patch(_object(tmp_path), "llvm_offload_entries", 8, struct.pack("<H", 2),
                 tmp_path / "v2.o")
    _refused(offlink, obj, tmp_path, "v2.o", "version 2", "reads version 1")


@pytest.mark.parametrize("kind, said", [(4, "hip (4)"), (7, "7, unknown")])
@needs_clang22
def test_an_entry_kind_offlink_does_not_link_is_refused(offlink, tmp_path, kind, said):
    obj = _patch(_object(tmp_path), "llvm_offload_entries", 10, struct.pack("<H", kind),
                 tmp_path / "kind.o")
    _refused(offlink, obj, tmp_path, "kind.o", f"offload kind {said}", "OpenMP (1)")


@needs_clang22
def test_an_offload_binary_of_an_unknown_version_is_refused(offlink, tmp_path):
    """An OffloadBinary after version 3 (LLVM's development line): offlink reads 1-3
    (tests/test_clang23.py links clang-23's version 2)."""
    obj = _patch(_object(tmp_path), SECTION, 4, struct.pack("<I", 4), tmp_path / "ob4.o")
    _refused(offlink, obj, tmp_path, "ob4.o", "OffloadBinary version 4", "reads 1")


@needs_clang22
def test_an_unknown_image_kind_is_refused(offlink, tmp_path):
    obj = _patch(_object(tmp_path), SECTION, HEADER.size, struct.pack("<H", 9),
                 tmp_path / "ik.o")
    _refused(offlink, obj, tmp_path, "ik.o", "'kind-9'", "reads ELF objects and LLVM bitcode")


@needs_clang22
def test_a_registered_entry_the_table_would_miss_is_refused(offlink, tmp_path):
    """The host side registers `h` (its name changed in the object), the device code offers
    `g`: libomptarget would be given a row the table has not."""
    obj = _object(tmp_path)
    elf = ElfFile.open(str(obj))
    names = bytes(elf.content(elf.section(".llvm.rodata.offloading")))
    assert names.startswith(b"g\0")
    obj = _patch(obj, ".llvm.rodata.offloading", 0, b"h", tmp_path / "miss.o")
    _refused(offlink, obj, tmp_path, "does not offer (h)", "libomptarget")


def _has_ziglang() -> bool:
    import importlib.util

    return importlib.util.find_spec("ziglang") is not None


@needs_tool(not _has_ziglang() or shutil.which("clang-offload-packager-19") is None
            or shutil.which(CLANG22) is None,
            "PyPI's ziglang==0.15.1 (clang 20.1.2), clang-tools-19 or clang-22 missing "
            "(.ci/run installs them)")
def test_a_clang20_object_is_read_and_runs_on_libomptarget_22(offlink, tmp_path):
    """The middle generation from a real clang 20 (zig 0.15.1's): 56-byte rows in
    omp_offloading_entries. offlink reads them, and links the object with clang-22 (clang 20
    is not installed: the driver's own clang links the image) into a program whose region
    runs on libomptarget 22's plugin, its registration giving clang 20's rows. (clang-22's
    own link of it registers llvm_offload_entries only, and the program dies.)"""
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()  # zig's clang runs `clang-offload-packager`: the OffloadBinary is v1
    (bin_dir / "clang-offload-packager").symlink_to(shutil.which("clang-offload-packager-19"))
    (tmp_path / "k.c").write_text(K_C)
    obj = tmp_path / "k20.o"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    run([sys.executable, "-m", "ziglang", "cc", "-target", "x86_64-linux-gnu", "-O2", *OFFLOAD,
         "-c", tmp_path / "k.c", "-o", obj], env=env)
    elf = ElfFile.open(str(obj))
    assert b"clang version 20." in bytes(elf.content(elf.section(".comment")))
    content = bytes(elf.content(elf.section("omp_offloading_entries")))
    assert fmt.generation_of("omp_offloading_entries", content) == 2
    (cu,) = json.loads(run([offlink, "inspect", "--json", obj]).stdout)["cus"]
    assert cu["compiler"] == "clang-20" and len(cu["offered"]) == 2 and "g" in cu["offered"]
    run([offlink, "link", CLANG22, *OFFLOAD, *LIBS22, obj, "-o", tmp_path / "app"])
    out = run([tmp_path / "app"], env={**os.environ, "LD_LIBRARY_PATH": "/usr/lib/llvm-22/lib",
                                       "LIBOMPTARGET_INFO": "16"})
    assert out.stdout == "6\n" and out.stderr.count("Launching kernel") == 1
    table = json.loads(run([offlink, "inspect", "--json", tmp_path / "app"]).stdout)["table"]
    assert len(table["symbols"]) == 2
