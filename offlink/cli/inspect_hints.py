"""Why a name has no row, in the terms of the toolchain that made the binary's offload code."""

from __future__ import annotations

import re

from ..elf import ElfFile
from ..errors import FormatError

GCC_TARGETS = ("nvptx-none", "amdgcn-amdhsa")
CLANG_PREFIX = "openmp-"  # clang's OpenMP targets (offlink/targets/openmp*.py)


def in_image(target, name: str) -> bool:
    """Whether a target's image defines `name`: GCC's PTX by its definition comment (the
    accel compiler writes one per function: `// BEGIN [GLOBAL ]FUNCTION DEF: NAME`, and
    `.global`/`.const` lines for variables), an ELF image by its symbol table."""
    image = target.image
    if target.name == "nvptx-none":
        word = re.escape(name.encode())
        return re.search(rb"^// BEGIN (GLOBAL )?(FUNCTION DEF|VAR DEF): " + word + rb"$",
                         image, re.M) is not None
    try:
        return any(s.name == name and s.defined for s in ElfFile(image, target.name).symbols())
    except FormatError:
        return False


def not_offered(table, name: str, path: str) -> str | None:
    """The finding for a name defined in the host code with no row, where the binary's targets
    are GCC's or clang's; None for offlink's own (inspect's own message)."""
    names = [t.name for t in table.targets]
    gcc = [t for t in table.targets if t.name in GCC_TARGETS]
    clang = [t for t in table.targets if t.name.startswith(CLANG_PREFIX)]
    if gcc:
        held = [t.name for t in gcc if in_image(t, name)]
        where = (f"is in the {', '.join(held)} image (a `declare target` function or "
                 f"variable GCC compiled for the device)" if held else
                 "is not in the device image (not `declare target`)")
        return (f"'{name}' {where}, but GCC's offload tables list only target regions' "
                f"kernels and `declare target` variables, so the table has no row for it and "
                f"translate returns the host pointer. In a target region call it by name (it "
                f"resolves on the device); GCC 12 has no `declare target indirect` for a "
                f"host function pointer")
    if clang:
        held = [t.name for t in clang if in_image(t, name)]
        where = (f"is in the {', '.join(held)} image but" if held
                 else "is in no device image and")
        return (f"'{name}' {where} has no row: clang lists a function only when it is "
                f"`declare target indirect`. For a host function pointer called in a target "
                f"region, declare it between `#pragma omp begin declare target indirect` and "
                f"`#pragma omp end declare target` (clang >= 19); a variable needs `#pragma omp "
                f"declare target` (targets: {', '.join(names)})")
    return None
