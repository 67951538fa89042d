"""Input dialects offlink reads besides its own payload: each knows how to find the CUs in an
object (LLVM's `.llvm.offloading` here; GCC's reader still lives in link/gcc_offload.py).

The link's extract stage asks `is_fat` and `cus_of`; it names no dialect itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..elf import ElfFile
    from ..link.extract import CU

# Section name -> the dialect module that reads it.
SECTIONS = {".llvm.offloading": "llvm"}


def is_fat(elf: ElfFile) -> bool:
    """Whether an object carries target code in one of these dialects."""
    return any(s.name in SECTIONS for s in elf.sections)


def cus_of(elf: ElfFile, origin: str) -> list[CU]:
    """The CUs of every dialect's sections in one object, in section order."""
    import importlib

    out: list[CU] = []
    for section in elf.sections:
        module = SECTIONS.get(section.name)
        if module is not None:
            reader = importlib.import_module(f"{__name__}.{module}")
            out.extend(reader.cus_of(elf, section, origin))
    return out


def relocatable_argv(argv: list[str]) -> list[str]:
    """A `-r` link line as offlink runs it: without the words that would make a driver link
    the device code at `-r` time (clang 19 does), so the CUs stay separate for the final
    link."""
    from .llvm import without_offload_driver

    return without_offload_driver(argv)
