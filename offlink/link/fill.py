"""Stage 7, fill: final host addresses from the linked binary, written into `.openmp_target`.

Only the section's bytes are written (at its file offset); no other byte of the binary changes.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from ..elf import (
    SHN_UNDEF,
    SHT_SYMTAB,
    STB_GLOBAL,
    STB_GNU_UNIQUE,
    STB_WEAK,
    STT_FUNC,
    STT_GNU_IFUNC,
    STT_OBJECT,
    ElfFile,
    Symbol,
)
from ..errors import LinkError
from ..formats.table import SECTION, SYMBOL, ImageSpec, Layout, RowSpec, build_table
from ..plugins import Image

_GLOBAL_BINDS = (STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE)  # Symbol.is_global, without a call


class Filled(NamedTuple):
    table: bytes
    rows: list[RowSpec]
    dropped: list[str]  # offered names the host binary does not define (discarded, inlined)
    section_addr: int
    section_offset: int
    placed: frozenset[str] = frozenset()  # rows whose target found the host side itself
    # host_symbols of the binary, and the symbol and string tables read for it (verify uses
    # them where the file still holds those bytes instead of parsing them again)
    host: HostSymbols | None = None


class HostSymbols(NamedTuple):
    tables: tuple[bytes, bytes]  # symbol_tables(): .symtab's bytes and its string table's
    by_name: dict[str, Symbol]  # host_symbols()


def symbol_tables(elf: ElfFile) -> tuple[bytes, bytes]:
    """The bytes of the symbol table and of its string table: all `host_symbols` depends on
    (b"" for a binary without symbols)."""
    table = next((s for s in elf.sections if s.sh_type == SHT_SYMTAB), None)
    if table is None or not 0 < table.sh_link < len(elf.sections):
        return b"", b""
    return bytes(elf.content(table)), bytes(elf.content(elf.sections[table.sh_link]))


def host_symbols(elf: ElfFile) -> dict[str, Symbol]:
    """Defined function and variable symbols by name: global ones first, else a unique local
    one (host -flto turns a program's globals local); ambiguous locals are left out. One pass
    over the symbol table."""
    chosen: dict[str, Symbol] = {}
    locals_seen: dict[str, int] = {}
    first_local: dict[str, Symbol] = {}
    wanted = (STT_FUNC, STT_OBJECT, STT_GNU_IFUNC)
    for s in elf.symbols():
        if s.st_shndx == SHN_UNDEF or s.st_type not in wanted:
            continue
        if s.st_bind in _GLOBAL_BINDS:
            chosen[s.name] = s
        else:
            locals_seen[s.name] = locals_seen.get(s.name, 0) + 1
            if s.st_type != STT_GNU_IFUNC:
                first_local.setdefault(s.name, s)
    for name, s in first_local.items():
        if name not in chosen and locals_seen[name] == 1:
            chosen[name] = s
    return chosen


def fill(path: str, images: list[Image], layout: Layout) -> Filled:
    elf = ElfFile.open(path)
    section = elf.section(SECTION)
    if section is None:
        raise LinkError(f"{path}: the linker dropped the {SECTION} section")
    if section.sh_size != layout.total_size:
        raise LinkError(f"{path}: {SECTION} is {section.sh_size} bytes, {layout.total_size} were "
                        f"reserved")
    syms = host_symbols(elf)
    kept = HostSymbols(symbol_tables(elf), syms)
    anchor = next((s for s in elf.symbols() if s.name == SYMBOL and s.defined), None)
    if anchor is None or anchor.st_value != section.sh_addr:
        raise LinkError(f"{path}: {SYMBOL} does not point at {SECTION}")
    rows: list[RowSpec] = []
    dropped: list[str] = []
    first: dict[str, tuple] = {}  # name -> the first image's offer and the CU offering it
    for img in images:
        for name, offer in img.offers.items():
            if name not in first:
                first[name] = (offer, img.owners[name])
    placed: dict[str, tuple[int, int, str]] = {}  # e.g. GCC's host tables (gcc_nvptx)
    for img in images:
        placed.update(img.target.host_addresses(elf, img))
    base = section.sh_addr
    for name in sorted(first):
        if name in placed:
            address, size, kind = placed[name]
            rows.append(RowSpec(name, address - base, size, kind))
            continue
        host = syms.get(name)
        if host is None:
            dropped.append(name)
            continue
        offer, owner = first[name]
        host_kind = "variable" if host.st_type == STT_OBJECT else "function"
        if host_kind != offer.kind:
            raise LinkError(f"'{name}' is a {host_kind} on the host and a {offer.kind} in the "
                            f"target code of {owner}")
        size = 1
        if host_kind == "variable":
            for img in images:
                o = img.offers.get(name)
                if o and o.size != host.st_size:
                    raise LinkError(f"variable '{name}' is {host.st_size} bytes on the host and "
                                    f"{o.size} bytes for target {img.target.name} ({owner})")
            size = host.st_size
        rows.append(RowSpec(name, host.st_value - base, size, host_kind))
    specs = [ImageSpec(img.target.name, img.target.image_kind, img.data) for img in images]
    table = build_table(specs, rows, layout)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, table, section.sh_offset)
    finally:
        os.close(fd)
    return Filled(table, rows, dropped, section.sh_addr, section.sh_offset,
                  frozenset(placed), kept)
