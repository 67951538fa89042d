"""libomptarget's registration written by offlink on x86-64 hosts (toolchains/llvm/
omptarget_x86_64.py) against omptarget.c_source's text compiled by clang, as offlink compiled it
before (`-c -O2 -fPIC -fno-lto`): the same sections (type, flags, size, alignment), symbols,
relocations and bytes of code, data and unwind rows, for every entry generation (clang 19's
rows compiled by clang-19, clang 20's and 21-22's by clang-22) and 1 to 3 images. That the
programs it registers run is proven by every clang test that links through offlink.
"""

from __future__ import annotations

import os
import shutil

import pytest
from conftest import need_tool, run

from offlink.formats.table import image_symbol
from offlink.toolchains.llvm import omptarget
from offlink.toolchains.llvm.omptarget_x86_64 import registration_object

needs_x86_64 = pytest.mark.skipif(os.uname().machine != "x86_64",
                                  reason="the object is written for x86-64 hosts only")
# Sections of a compile that are not the registration: the compiler's name, LLVM's
# address-significance table (for lld's ICF), and the tables the comparison reads as such.
LEFT_OUT = {".comment", ".llvm_addrsig", ".symtab", ".strtab", ".shstrtab", ""}


def normalised(path: str):
    """An object as what it means, whatever order a compiler lays out its functions and
    data in: sections by name (type, flags, alignment, size), the functions and data by name
    (kind, binding, visibility, section, size, bytes), the relocations by the function or
    data they patch (and where in it) and what they point to (a symbol's name, or the function
    or data a section-relative one reaches, and where in it)."""
    import lief

    elf = lief.ELF.parse(path)
    sections = list(elf.sections)
    names = [s.name for s in sections]
    defined = [s for s in elf.symbols if s.type in (lief.ELF.Symbol.TYPE.FUNC,
                                                    lief.ELF.Symbol.TYPE.OBJECT)]

    def within(section: str, offset: int) -> tuple[str, int]:
        for s in defined:
            if names[s.shndx] == section and (s.value <= offset < s.value + s.size
                                              or s.value == offset):
                return s.name, offset - s.value
        return section, offset

    def target(r) -> tuple[str, int]:
        if r.symbol.name:
            return r.symbol.name, r.addend
        pc_relative = "PC32" in str(r.type)  # addend = target - 4 (the field ends the insn)
        return within(names[r.symbol.shndx], r.addend + (4 if pc_relative else 0))

    kept = {s.name: (int(s.type), int(s.flags), s.size, s.alignment, s.entry_size)
            for s in sections if s.name not in LEFT_OUT}
    things = sorted((s.name, str(s.type), str(s.binding), str(s.visibility), names[s.shndx],
                     s.size, bytes(sections[s.shndx].content)[s.value:s.value + s.size])
                    for s in defined)
    outside = sorted((s.name, str(s.binding), str(s.visibility)) for s in elf.symbols
                     if s.shndx == 0 and s.name)
    relocations = sorted((r.section.name, within(r.section.name, r.address), str(r.type),
                          target(r)) for r in elf.relocations)
    unwind = [bytes(s.content) for s in sections if s.name in (".eh_frame", ".init_array.100")]
    return kept, things, outside, relocations, unwind


@needs_x86_64
@pytest.mark.parametrize("generation, clang", [(1, "clang-19"), (2, "clang-22"),
                                               (3, "clang-22")])
@pytest.mark.parametrize("images", [1, 2, 3])
def test_written_object_is_the_compiled_one(generation, clang, images, tmp_path):
    need_tool(shutil.which(clang), f"{clang} missing (.ci/run installs it)")
    indexes = list(range(images))
    (tmp_path / "r.c").write_text(omptarget.c_source(indexes, generation))
    run([clang, "-c", "-O2", "-fPIC", "-fno-lto", "-w", "r.c", "-o", "compiled.o"],
        cwd=tmp_path)
    _, _, section = omptarget.GENERATIONS[generation]
    (tmp_path / "written.o").write_bytes(registration_object(
        [(image_symbol(k), image_symbol(k, "_end")) for k in indexes], section,
        writable=generation != 3))
    mine, theirs = normalised(str(tmp_path / "written.o")), normalised(str(tmp_path / "compiled.o"))
    for part, what in enumerate(("sections", "code and data", "outside symbols",
                                 "relocations", "unwind rows and constructor")):
        assert mine[part] == theirs[part], what
    assert section in mine[0] and len(mine[3]) == 5 + 4 * images + 3 + 1 + 2
    # binutils reads it as it reads the compiled one
    said = run(["readelf", "-W", "--relocs", "--syms", tmp_path / "written.o"]).stdout
    assert "__tgt_register_lib" in said and "Warning" not in said


@needs_x86_64
def test_a_link_writes_the_registration_and_compiles_nothing(monkeypatch, tmp_path):
    """On an x86-64 host `build` writes the object (the same bytes every time) and `start`
    starts no compile."""
    class Target:
        entry_generation = 3

    class Image:
        target = Target()

    started = []
    monkeypatch.setattr(omptarget, "_begin", lambda *a: started.append(a))
    monkeypatch.setattr(omptarget, "compile_c", lambda *a: pytest.fail("compiled"))
    omptarget.start(None, [Target()], [0], str(tmp_path))
    omptarget._started()
    assert not started
    path = omptarget.build(None, [Image()], [0], str(tmp_path))
    assert path == str(tmp_path / omptarget.object_name(omptarget.SOURCE))
    first = open(path, "rb").read()
    assert omptarget.build(None, [Image()], [0], str(tmp_path)) == path
    assert open(path, "rb").read() == first
    assert not (tmp_path / omptarget.SOURCE).exists()
