"""Stage 5, reserve: a placeholder object holding `.openmp_target` at its final size.

The object defines `__OPENMP_TARGET__` (weak, hidden) at offset 0 of the section, so code that
refers to it is resolved by the linker. The images are already in place (their offsets are
fixed by the layout), so the build-id the linker computes covers them; the fill writes the
metadata once the host addresses are final. SHF_GNU_RETAIN keeps the section through
--gc-sections.
"""

from __future__ import annotations

import struct

from ..elf import (
    SHF_ALLOC,
    SHF_GNU_RETAIN,
    SHT_PROGBITS,
    SHT_STRTAB,
    SHT_SYMTAB,
    STB_WEAK,
    STT_OBJECT,
    STV_HIDDEN,
)
from ..formats.table import SECTION, SECTION_ALIGN, SYMBOL, Layout


def placeholder_object(layout: Layout, images: list[bytes], e_machine: int) -> bytes:
    """A relocatable ELF64 LE object; deterministic for the same inputs."""
    content = bytearray(layout.total_size)
    for off, img in zip(layout.image_offsets, images):
        content[off : off + len(img)] = img
    shstrtab = b"\0" + SECTION.encode() + b"\0.note.GNU-stack\0.symtab\0.strtab\0.shstrtab\0"
    def name(n: str) -> int:
        return shstrtab.index(b"\0" + n.encode() + b"\0") + 1
    strtab = b"\0" + SYMBOL.encode() + b"\0"
    sym = struct.Struct("<IBBHQQ")
    # Null symbol, then __OPENMP_TARGET__: weak, object, hidden, section 1, value 0.
    symtab = bytes(sym.size) + sym.pack(1, (STB_WEAK << 4) | STT_OBJECT, STV_HIDDEN, 1, 0,
                                        layout.total_size)
    parts = []  # (data, align)
    off = 64
    def place(data: bytes, align: int) -> int:
        nonlocal off
        off = (off + align - 1) // align * align
        at = off
        parts.append((at, data))
        off += len(data)
        return at
    o_content = place(bytes(content), SECTION_ALIGN)
    o_symtab = place(symtab, 8)
    o_strtab = place(strtab, 1)
    o_shstr = place(shstrtab, 1)
    shoff = (off + 7) // 8 * 8
    shdr = struct.Struct("<IIQQQQIIQQ")
    headers = [
        bytes(shdr.size),
        shdr.pack(name(SECTION), SHT_PROGBITS, SHF_ALLOC | SHF_GNU_RETAIN, 0, o_content,
                  len(content), 0, 0, SECTION_ALIGN, 0),
        shdr.pack(name(".note.GNU-stack"), SHT_PROGBITS, 0, 0, o_content, 0, 0, 0, 1, 0),
        shdr.pack(name(".symtab"), SHT_SYMTAB, 0, 0, o_symtab, len(symtab), 4, 1, 8, sym.size),
        shdr.pack(name(".strtab"), SHT_STRTAB, 0, 0, o_strtab, len(strtab), 0, 0, 1, 0),
        shdr.pack(name(".shstrtab"), SHT_STRTAB, 0, 0, o_shstr, len(shstrtab), 0, 0, 1, 0),
    ]
    # ELFOSABI_GNU: SHF_GNU_RETAIN is a GNU extension.
    ident = b"\x7fELF" + bytes([2, 1, 1, 3]) + bytes(8)
    ehdr = struct.pack("<16sHHIQQQIHHHHHH", ident, 1, e_machine, 1, 0, 0, shoff, 0, 64, 0, 0,
                       shdr.size, len(headers), 5)
    out = bytearray(shoff + shdr.size * len(headers))
    out[:64] = ehdr
    for at, data in parts:
        out[at : at + len(data)] = data
    out[shoff:] = b"".join(headers)
    return bytes(out)
