"""Stage 8, verify: re-read the output and check the table against the binary and the images."""

from __future__ import annotations

from array import array

from ..elf import ElfFile
from ..errors import LinkError, OfflinkError
from ..formats.table import SECTION
from ..plugins import Image
from ..table import Table
from .fill import Filled, host_symbols, symbol_tables


def verify(path: str, filled: Filled, images: list[Image], check_symbols: bool = True) -> None:
    elf = ElfFile.open(path)
    section = elf.section(SECTION)
    if section is None or bytes(elf.content(section)) != filled.table:
        raise LinkError(f"verification of {path}: {SECTION} does not hold the table written")
    try:
        table = Table(filled.table, section.sh_addr, path)
        for img in images:
            table.target(img.target.name)  # checks the image's CRC
    except OfflinkError as e:
        raise LinkError(f"verification of {path}: {e}") from None
    if len(table) != len(filled.rows):
        raise LinkError(f"verification of {path}: {len(table)} rows read, "
                        f"{len(filled.rows)} written")
    if not check_symbols:
        return
    syms = _host_symbols(elf, filled)
    rows = table.rows()
    # Every row's address looked up at once (the core's batch search), as find() would.
    found = table.find_rows(array("Q", [address % 2**64 for _, address, _, _ in rows]))
    for (name, address, _size, _kind), row in zip(rows, found):
        host = syms.get(name)
        if name in filled.placed:  # its target read the host side (and checked its name)
            pass
        elif host is None or host.st_value != address:
            raise LinkError(f"verification of {path}: '{name}' is at "
                            f"{address:#x} in the table but not in the binary")
        if row < 0 or rows[row][1] != address:
            raise LinkError(f"verification of {path}: address lookup of '{name}' fails")


def _host_symbols(elf: ElfFile, filled: Filled) -> dict:
    """`host_symbols` of the file as it is now: fill's, when the file holds the very symbol
    and string tables fill read them from (compared byte for byte, which costs far less than
    parsing thousands of symbols again), else read anew."""
    kept = filled.host
    if kept is not None and symbol_tables(elf) == kept.tables:
        return kept.by_name
    return host_symbols(elf)
