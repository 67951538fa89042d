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

from typing import TYPE_CHECKING

from ..elf import (
    SHF_ALLOC,
    SHF_GNU_RETAIN,
    SHT_PROGBITS,
    SHT_STRTAB,
    SHT_SYMTAB,
    STB_GLOBAL,
    STB_WEAK,
    STT_OBJECT,
    STV_HIDDEN,
    SYMBOL_ENTRY,
    OutSection,
    relocatable,
)
from ..formats import origins as origins_format
from ..formats.table import SECTION, SECTION_ALIGN, SYMBOL, Layout, image_symbol

ELFOSABI_GNU = 3  # SHF_GNU_RETAIN is a GNU extension

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..model import CU
    from ..plugins import CompiledCU, Image
    from .narrow import Narrowing


def placeholder_object(layout: Layout, images: list[bytes], e_machine: int,
                       origins: bytes = b"") -> bytes:
    """A relocatable ELF64 LE object; deterministic for the same inputs. `origins`, when
    given, is the content of `.offlink.origins`."""
    strtab = b"\0" + SYMBOL.encode() + b"\0"
    # Null symbol, then __OPENMP_TARGET__: weak, object, hidden, section 1, value 0.
    symtab = bytes(SYMBOL_ENTRY.size) + SYMBOL_ENTRY.pack(
        1, (STB_WEAK << 4) | STT_OBJECT, STV_HIDDEN, 1, 0, layout.total_size)
    for k, (at, img) in enumerate(zip(layout.image_offsets, images)):
        for suffix, value, size in (("", at, len(img)), ("_end", at + len(img), 0)):
            symtab += SYMBOL_ENTRY.pack(len(strtab), (STB_GLOBAL << 4) | STT_OBJECT,
                                        STV_HIDDEN, 1, value, size)
            strtab += image_symbol(k, suffix).encode() + b"\0"
    # The section's content is zeros but for the images, written straight into the object's
    # bytes below (a 1 MB image is copied once). `.offlink.origins` last: the indices above
    # (the symbol's section, `.shstrtab`'s) stay as they are.
    out, offsets = relocatable(e_machine, [
        OutSection(SECTION, layout.total_size, SHT_PROGBITS, SHF_ALLOC | SHF_GNU_RETAIN,
                   align=SECTION_ALIGN),
        OutSection(".note.GNU-stack", b"", SHT_PROGBITS),
        OutSection(".symtab", symtab, SHT_SYMTAB, link=4, info=1, align=8,
                   entsize=SYMBOL_ENTRY.size),
        OutSection(".strtab", strtab, SHT_STRTAB),
        OutSection(".shstrtab", b"", SHT_STRTAB),
        *([OutSection(origins_format.SECTION, origins, SHT_PROGBITS)] if origins else []),
    ], osabi=ELFOSABI_GNU)
    for at, img in zip(layout.image_offsets, images):
        if at + len(img) > layout.total_size:
            raise ValueError("an image does not fit the layout reserved for it")
        out[offsets[0] + at : offsets[0] + at + len(img)] = img
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
