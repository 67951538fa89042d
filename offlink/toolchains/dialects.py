"""Input dialects: how the CUs of an object are found, in each toolchain's offload objects:
offlink's own payload (`offlink cc`), GCC's (`gcc -foffload=nvptx-none`), LLVM's
(`clang -fopenmp-targets=`). One module each; this one is their interface.

The link's extract stage asks `is_fat`, `cus_of`, `check_runtimes` and `select`; it names no dialect
itself. A dialect module has `RUNTIME`, the OpenMP offload runtime its objects' host code calls
("" for none), and either `cus_of(elf, section, origin)` (CUs section by section) or, with
`WHOLE_OBJECT`, `object_cus(elf, origin, link_args, lto)` (one read of the whole object); and
may have `select(cus, link_args)` and `relocatable_argv(argv)` (plugins.Dialect).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..errors import LinkError
from . import DIALECTS, toolchain_of

if TYPE_CHECKING:
    from types import ModuleType

    from ..elf import ElfFile
    from ..model import CU

SECTIONS = DIALECTS  # section name prefix -> the toolchain whose dialect.py reads it
_PREFIXES = tuple(SECTIONS)


def dialects_in(elf: ElfFile) -> list[str]:
    """The dialects whose sections an object has, in the order of their first section."""
    out: list[str] = []
    seen: tuple[str, ...] = ()  # the prefixes found: their other sections need no lookup
    for s in elf.sections:
        name = s.name
        if name.startswith(_PREFIXES) and not (seen and name.startswith(seen)):
            prefix = next(p for p in SECTIONS if name.startswith(p))
            seen += (prefix,)
            out.append(SECTIONS[prefix])
    return out


@functools.cache
def _module(dialect: str) -> ModuleType:
    return importlib.import_module(f".{dialect}.dialect", __package__)


def is_fat(elf: ElfFile) -> bool:
    """Whether an object carries target code in any dialect (one pass over section names)."""
    return any(s.name.startswith(_PREFIXES) for s in elf.sections)


def cus_of(elf: ElfFile, origin: str, link_args: Sequence[str] = (),
           lto: bool = False) -> list[CU]:
    """The CUs of one object, in the order of their sections. `link_args` and `lto` are the
    link line's, which a whole-object dialect may need (GCC's: -foffload-options)."""
    out: list[CU] = []
    done: tuple[str, ...] = ()  # prefixes of the whole-object dialects read (GCC's: ~20 sections)
    for section in elf.sections:
        name = section.name
        if not name.startswith(_PREFIXES) or (done and name.startswith(done)):
            continue  # most sections: one test, no call
        prefix = next(p for p in SECTIONS if name.startswith(p))
        reader = _module(SECTIONS[prefix])
        if getattr(reader, "WHOLE_OBJECT", False):
            done += (prefix,)
            out.extend(reader.object_cus(elf, origin, list(link_args), lto))
        else:
            out.extend(reader.cus_of(elf, section, origin))
    return out


def check_runtimes(objects: Iterable[tuple[str, ElfFile]]) -> None:
    """Refuse, naming one object of each, a link whose objects' host code calls two OpenMP
    offload runtimes: one program cannot hold libgomp and libomptarget (libomp) at once.
    offlink's own fat objects call neither, so they link beside either."""
    check_dialects((origin, d) for origin, elf in objects for d in dialects_in(elf))


def check_dialects(found: Iterable[tuple[str, str]]) -> None:
    """check_runtimes of the objects' (origin, dialect) pairs, in link order (a relink's
    record keeps them: link/relink.py)."""
    first: dict[str, tuple[str, str]] = {}  # runtime -> (object, dialect)
    for origin, dialect in found:
        runtime = _module(dialect).RUNTIME
        if runtime:
            first.setdefault(runtime, (origin, dialect))
    if len(first) > 1:
        (ra, (a, da)), (rb, (b, db)) = list(first.items())[:2]  # in link order
        raise LinkError(f"{a} is {_module(da).MADE_BY}, whose host code calls {ra}, and {b} "
                        f"is {_module(db).MADE_BY}, whose host code calls {rb}: one program "
                        f"cannot use both OpenMP offload runtimes; compile them with one "
                        f"toolchain (offlink cc's fat objects link beside either)")


def relocatable_argv(argv: list[str]) -> list[str]:
    """A `-r` link line as offlink runs it: without the words that would make a driver link
    the device code at `-r` time (each dialect with a `relocatable_argv` takes its own out:
    clang 19 links it), so the CUs stay separate for the final link."""
    for dialect in SECTIONS.values():
        reader = _module(dialect)
        if hasattr(reader, "relocatable_argv"):
            argv = reader.relocatable_argv(argv)
    return argv


def linked_at_relocatable(cus: list[CU], argv: list[str]) -> tuple[str, list[CU]] | None:
    """The dialect that links its CUs' device code at `-r` time with this (offload driver
    words dropped) line, as its toolchain's own `-r` does, and those CUs; None where none does
    (every CU is then kept apart for the final link)."""
    for dialect in dict.fromkeys(SECTIONS.values()):
        reader = _module(dialect)
        if hasattr(reader, "linked_at_relocatable"):
            linked = reader.linked_at_relocatable(cus, argv)
            if linked:
                return dialect, linked
    return None


def relocatable_link(dialect: str, argv_for, images, output: str, workdir: str) -> None:
    """`dialect`'s `-r` link into `output` with its images (linked_at_relocatable);
    `argv_for(added)` is the link's command line with the files `added`."""
    _module(dialect).relocatable_link(argv_for, images, output, workdir)


def select(cus: list[CU], link_args: list[str]) -> list[CU]:
    """The CUs the link builds images from: each dialect of the CUs' targets that has a
    `select` (GCC's, from its link words: gcc/dialect.py) keeps or drops its own, or refuses
    a target it cannot build."""
    for dialect in dict.fromkeys(toolchain_of(t) for t in {cu.payload.target for cu in cus}):
        reader = _module(dialect) if dialect else None
        if hasattr(reader, "select"):
            cus = reader.select(cus, link_args)
    return cus
