"""offlink's own fat objects (`offlink cc`): reading the dialect.

Each `gnu.target_lto_<target>` section holds one or more payload records (formats/payload.py),
one CU each, for the target the section is named after. The host code of such an object calls
no OpenMP offload runtime: offlink's table and runtime serve it, so it links beside GCC's or
LLVM's offload objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import FormatError
from ...formats import PAYLOAD_SECTION_PREFIX as SECTION_PREFIX
from ...formats.payload import parse_records
from ...model import CU

if TYPE_CHECKING:
    from ...elf import ElfFile, Section
    from ...model import CU

RUNTIME = ""  # none besides offlink's own


def cus_of(elf: ElfFile, section: Section, origin: str) -> list[CU]:
    """The CUs of one payload section, one per record ("a.o#N" when it holds several)."""
    where = f"{origin}: section {section.name}"
    # Lazy: the code is inflated only for a CU compiled (not found in the cache).
    records = parse_records(bytes(elf.content(section)), where, lazy=True)
    out = []
    for i, p in enumerate(records):
        if SECTION_PREFIX + p.target != section.name:
            raise FormatError(f"{where}: payload is for target {p.target}")
        label = origin if len(records) == 1 else f"{origin}#{i}"
        out.append(CU(label, p))
    return out
