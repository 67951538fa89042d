"""Stage 8, verify (link/verify.py): what it reads again of the output, and what it catches."""

from __future__ import annotations

import shutil
import struct

import pytest
from conftest import run

from offlink.elf import ElfFile
from offlink.errors import LinkError

LIB = "int lib_value = 5;\nint lib_twice(int x) { return 2 * x; }\n"
MAIN = "int lib_twice(int);\nint main(void) { return lib_twice(0); }\n"


def linked(offlink, tmp_path, monkeypatch):
    """A link run in this process: its output, and the arguments verify was given."""
    from offlink.link import pipeline, stages, verify
    from offlink.link.pipeline import LinkOptions

    for name, text in (("lib", LIB), ("main", MAIN)):
        (tmp_path / f"{name}.c").write_text(text)
        run([offlink, "cc", "gcc", "-O2", "-c", f"{name}.c"], cwd=tmp_path)
    libs = run([offlink, "config", "--libs"]).stdout.split()
    given = []
    real = verify.verify

    def keep(path, filled, images, check_symbols=True):
        given.append((filled, images))
        return real(path, filled, images, check_symbols)

    monkeypatch.setattr(stages, "verify", keep)  # the stage's, as stages.py calls it
    monkeypatch.chdir(tmp_path)
    assert pipeline.link(["gcc", "main.o", "lib.o", *libs, "-o", "prog"],
                         LinkOptions(cache=False)) == 0
    return tmp_path / "prog", *given[0]


def test_verify_takes_fills_symbols_while_the_file_holds_them(offlink, tmp_path, monkeypatch):
    """verify does not parse the symbol table fill parsed (a relink of 1000 CUs parsed ~4000
    symbols twice) while the file holds the same bytes; a symbol moved since (here by hand)
    is read anew and caught."""
    from offlink.link import verify

    prog, filled, images = linked(offlink, tmp_path, monkeypatch)
    parsed = []
    real = ElfFile._read_symbols

    def count(self, dynamic):
        parsed.append(dynamic)
        return real(self, dynamic)

    monkeypatch.setattr(ElfFile, "_read_symbols", count)
    verify.verify(str(prog), filled, images)
    assert parsed == []
    moved = tmp_path / "moved"
    shutil.copy(prog, moved)
    elf = ElfFile.open(moved)
    symtab = next(s for s in elf.sections if s.sh_type == 2)
    index = next(i for i, s in enumerate(elf.symbols()) if s.name == "lib_twice")
    value_at = symtab.sh_offset + index * 24 + 8  # Elf64_Sym: name, info, other, shndx, value
    del elf
    parsed.clear()
    with open(moved, "r+b") as f:
        f.seek(value_at)
        value = struct.unpack("<Q", f.read(8))[0]
        f.seek(value_at)
        f.write(struct.pack("<Q", value + 16))
    with pytest.raises(LinkError, match="'lib_twice' is at .* in the table but not in the binary"):
        verify.verify(str(moved), filled, images)
    assert parsed == [False]


def test_table_rows_are_its_symbols_in_both_cores(offlink, tmp_path, monkeypatch):
    """Table.rows() (verify's way through thousands of rows) holds what Table.symbols does,
    with the C core and the pure-Python one; find_rows finds each row's address."""
    from array import array

    from offlink import table as table_module
    from offlink._pytable import Core as PyCore

    prog, _filled, _images = linked(offlink, tmp_path, monkeypatch)
    for core in (table_module._core(), PyCore):
        monkeypatch.setattr(table_module, "_Core", core)
        table = table_module.Table.open(prog)
        rows = table.rows()
        assert rows == [(s.name, s.address, s.size, s.kind) for s in table.symbols]
        assert len(rows) >= 2 and {"lib_twice", "lib_value"} <= {r[0] for r in rows}
        found = table.find_rows(array("Q", [r[1] for r in rows]))
        assert [rows[i][1] for i in found] == [r[1] for r in rows]
