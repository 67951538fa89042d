"""Stage 8, on request (`--verify-deep`, OFFLINK_VERIFY=deep): the output re-read by lief.

verify.py checks the table with offlink's own ELF reader, which also wrote it; here an
independent reader checks the same facts, so a shared misreading cannot hide. lief costs
~0.3 s to import and is the only module that touches it; its objects do not leave here.
lief is not used to write: a same-size fill through `Binary.write()` rewrites bytes outside
the section (even parse-then-write re-emits .gnu.hash, .dynamic and .symtab's sh_info, and
makes the file 0644), and offlink promises that the fill changes nothing else.
"""

from __future__ import annotations

from ..errors import LinkError
from ..formats.table import SECTION, SYMBOL
from .fill import Filled


def deep_verify(path: str, filled: Filled, check_symbols: bool = True) -> None:
    import lief

    def fail(what: str) -> LinkError:
        return LinkError(f"deep verification of {path} (lief): {what}")

    binary = lief.ELF.parse(path)
    if binary is None:
        raise fail("not readable as ELF")
    section = binary.get_section(SECTION)
    if section is None:
        raise fail(f"no {SECTION} section")
    if (section.virtual_address, section.offset, section.size) != \
            (filled.section_addr, filled.section_offset, len(filled.table)):
        raise fail(f"{SECTION} at {section.virtual_address:#x} (offset {section.offset:#x}, "
                   f"{section.size} bytes), expected {filled.section_addr:#x} (offset "
                   f"{filled.section_offset:#x}, {len(filled.table)} bytes)")
    if bytes(section.content) != filled.table:
        raise fail(f"{SECTION} does not hold the table written")
    segment = binary.segment_from_virtual_address(section.virtual_address)
    if segment is None or segment.type != lief.ELF.Segment.TYPE.LOAD:
        raise fail(f"{SECTION} is not in a loaded segment")
    if segment.has(lief.ELF.Segment.FLAGS.W):
        raise fail(f"{SECTION} is in a writable segment")
    if not check_symbols:  # stripped: no symbol table to hold the table against
        return
    symbols: dict[str, list[int]] = {}
    for s in binary.symtab_symbols:
        if s.shndx != 0:
            symbols.setdefault(str(s.name), []).append(s.value)
    if symbols.get(SYMBOL) != [filled.section_addr]:
        raise fail(f"{SYMBOL} is at {symbols.get(SYMBOL)}, not at the table "
                   f"{filled.section_addr:#x}")
    for row in filled.rows:
        if row.name in filled.placed:
            continue  # keyed by the target (GCC's host tables), not by a symbol of that name
        address = filled.section_addr + row.host_offset
        if address not in symbols.get(row.name, []):
            raise fail(f"'{row.name}' is at {address:#x} in the table, but the binary's "
                       f"symbol table has {symbols.get(row.name, 'no such symbol')}")
