"""Stage 5, reserve: a placeholder object holding `.openmp_target` at its final size.

The object defines `__OPENMP_TARGET__` (weak, hidden) at offset 0 of the section, so code that
refers to it is resolved by the linker, and `__offlink_image_K` / `__offlink_image_K_end`
(global, hidden: local in the output) at the start and end of image K, so a runtime
registration names its images by index (toolchains/registrations.py): its code is then the same
on every relink that changes an image's size, and its compiled object is a cache hit. The
images are already in place (their offsets are fixed by the layout), so the build-id the linker
computes covers them; the fill writes the metadata once the host addresses are final.
SHF_GNU_RETAIN
keeps the section through --gc-sections.

The same object carries `.offlink.origins` (formats/origins.md): which CU offered each row, known
before the host link, so it needs no fill. Not allocated (flags 0): ld keeps it as an orphan
(--gc-sections too: only allocated sections are collected), it costs no memory at run time,
and strip keeps it (strip -R .offlink.origins removes it; inspect then shows the rows ungrouped).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from ..elf import (
    ELF_MAGIC,
    SHF_ALLOC,
    SHF_GNU_RETAIN,
    SHT_PROGBITS,
    SHT_STRTAB,
    SHT_SYMTAB,
    STB_GLOBAL,
    STB_WEAK,
    STT_OBJECT,
    STV_HIDDEN,
)
from ..formats import origins as origins_format
from ..formats.table import SECTION, SECTION_ALIGN, SYMBOL, Layout, image_symbol

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..model import CU
    from ..plugins import CompiledCU, Image
    from .narrow import Narrowing


def placeholder_object(layout: Layout, images: list[bytes], e_machine: int,
                       origins: bytes = b"") -> bytes:
    """A relocatable ELF64 LE object; deterministic for the same inputs. `origins`, when
    given, is the content of `.offlink.origins`."""
    shstrtab = b"\0" + SECTION.encode() + b"\0.note.GNU-stack\0.symtab\0.strtab\0.shstrtab\0"
    if origins:
        shstrtab += origins_format.SECTION.encode() + b"\0"
    def name(n: str) -> int:
        return shstrtab.index(b"\0" + n.encode() + b"\0") + 1
    strtab = b"\0" + SYMBOL.encode() + b"\0"
    sym = struct.Struct("<IBBHQQ")
    # Null symbol, then __OPENMP_TARGET__: weak, object, hidden, section 1, value 0.
    symtab = bytes(sym.size) + sym.pack(1, (STB_WEAK << 4) | STT_OBJECT, STV_HIDDEN, 1, 0,
                                        layout.total_size)
    for k, (at, img) in enumerate(zip(layout.image_offsets, images)):
        for suffix, value, size in (("", at, len(img)), ("_end", at + len(img), 0)):
            symtab += sym.pack(len(strtab), (STB_GLOBAL << 4) | STT_OBJECT, STV_HIDDEN, 1,
                               value, size)
            strtab += image_symbol(k, suffix).encode() + b"\0"
    parts = []  # (data, align)
    off = 64
    def place(data: bytes, align: int) -> int:
        nonlocal off
        off = (off + align - 1) // align * align
        at = off
        parts.append((at, data))
        off += len(data)
        return at
    # The section's content is zeros but for the images, written straight into the file's
    # bytes below (a 1 MB image is copied once, not four times).
    o_content = place(b"", SECTION_ALIGN)
    off += layout.total_size
    o_symtab = place(symtab, 8)
    o_strtab = place(strtab, 1)
    o_shstr = place(shstrtab, 1)
    o_origins = place(origins, 1) if origins else 0
    shoff = (off + 7) // 8 * 8
    shdr = struct.Struct("<IIQQQQIIQQ")
    headers = [
        bytes(shdr.size),
        shdr.pack(name(SECTION), SHT_PROGBITS, SHF_ALLOC | SHF_GNU_RETAIN, 0, o_content,
                  layout.total_size, 0, 0, SECTION_ALIGN, 0),
        shdr.pack(name(".note.GNU-stack"), SHT_PROGBITS, 0, 0, o_content, 0, 0, 0, 1, 0),
        shdr.pack(name(".symtab"), SHT_SYMTAB, 0, 0, o_symtab, len(symtab), 4, 1, 8, sym.size),
        shdr.pack(name(".strtab"), SHT_STRTAB, 0, 0, o_strtab, len(strtab), 0, 0, 1, 0),
        shdr.pack(name(".shstrtab"), SHT_STRTAB, 0, 0, o_shstr, len(shstrtab), 0, 0, 1, 0),
    ]
    if origins:  # last: the indices above (the symbol's section, e_shstrndx) stay as they are
        headers.append(shdr.pack(name(origins_format.SECTION), SHT_PROGBITS, 0, 0, o_origins,
                                 len(origins), 0, 0, 1, 0))
    # ELFOSABI_GNU: SHF_GNU_RETAIN is a GNU extension.
    ident = ELF_MAGIC + bytes([2, 1, 1, 3]) + bytes(8)
    ehdr = struct.pack("<16sHHIQQQIHHHHHH", ident, 1, e_machine, 1, 0, 0, shoff, 0, 64, 0, 0,
                       shdr.size, len(headers), 5)
    out = bytearray(shoff + shdr.size * len(headers))
    out[:64] = ehdr
    for at, data in parts:
        out[at : at + len(data)] = data
    for at, img in zip(layout.image_offsets, images):
        if at + len(img) > layout.total_size:
            raise ValueError("an image does not fit the layout reserved for it")
        out[o_content + at : o_content + at + len(img)] = img
    out[shoff:] = b"".join(headers)
    return bytes(out)


def origins_content(images: list[Image], compiled: list[CompiledCU], narrowing: Narrowing,
                    names: Mapping[str, str] | None = None, output_dir: str = "",
                    maps: Sequence[tuple[str, str]] = ()) -> bytes:
    """`.offlink.origins` for these images: each row's CU as the link line names it (its
    origin: `a.o`, `libx.a(m.o)`; a temporary object in `names` by its source; an absolute
    path as origins.portable makes it, relative to the absolute `output_dir` or mapped by
    `maps`), and the offered names the narrowing left out."""
    def named(cu: CU) -> str:
        return origins_format.portable(given(cu), output_dir, maps) if output_dir \
            else given(cu)

    def given(cu: CU) -> str:
        if not names:
            return cu.origin
        path, sep, record = cu.origin.rpartition("#")  # `a.o#2`: a file's second record
        return (names[cu.origin] if cu.origin in names
                else names[path] + sep + record if sep and path in names else cu.origin)

    labels = [c.cu.label for c in compiled]  # each made once (a relink has thousands)
    origin = dict(zip(labels, [named(c.cu) for c in compiled]))
    rows: dict[str, str] = {}
    for img in images:  # a name in several images: the first image's CU, as fill names it
        if not rows:
            rows = {name: origin.get(label, label) for name, label in img.owners.items()}
            continue
        for name, label in img.owners.items():
            rows.setdefault(name, origin.get(label, label))
    left_out: dict[str, str] = {}
    if narrowing.active:
        offered: dict[str, str] = {}
        for c, label in zip(compiled, labels):
            for o in c.offers:
                offered.setdefault(o.name, origin[label])
        kept = narrowing.select(offered) or frozenset()
        left_out = {n: cu for n, cu in offered.items() if n not in kept and n not in rows}
    return origins_format.encode(rows, left_out, [origin[label] for label in labels])
