"""nvptx-none-ld's failures said in one line: the symbol, the CUs that need it, and the way out.

nvptx-none-ld prints `unresolved symbol NAME` for each symbol no object or library defines
(nvptx-ld.cc). A CU needs NAME where its PTX declares it (`// BEGIN GLOBAL ... DECL: NAME`,
the lines nvptx-none-ld reads); GCC's device libraries that define it (`... DEF: NAME` in the
archive) name the fix: `-foffload-options=nvptx-none=-lm` as GCC's own link takes it. The whole
command and the linker's own lines come only under --verbose.
"""

from __future__ import annotations

import os
import re

from ..errors import ToolError

# Device libraries a program may need that GCC's offload link does not add by itself
# (mkoffload links -lgomp -lgcc -lc -lgcc), in the order a fix names them.
OPTIONAL_LIBRARIES = ("m", "atomic", "gfortran")
_UNRESOLVED = re.compile(r"^unresolved symbol (\S+)", re.M)
SHOWN = 3  # symbols named in the line; the rest counted


def explain(error: ToolError, argv: list[str],
            objects: list[tuple[str, bytes]]) -> ToolError | None:
    """The one-line error for a failed device link `argv` whose objects are `objects` (label,
    PTX), or None where nvptx-none-ld said no unresolved symbol (the error stays as it is)."""
    from .. import run as runner

    missing = list(dict.fromkeys(_UNRESOLVED.findall(error.output)))
    if not missing:
        return None
    parts = []
    fixes: list[str] = []
    for name in missing[:SHOWN]:
        decl = re.compile(rb"\n// BEGIN GLOBAL (?:FUNCTION|VAR) DECL: " + re.escape(
            name.encode()) + rb"\n")
        users = [label for label, ptx in objects if decl.search(ptx)]
        libs = [lib for lib in OPTIONAL_LIBRARIES if _defines(argv, lib, name)]
        fixes += [lib for lib in libs if lib not in fixes]
        where = f"needed by {', '.join(users)}" if users else "needed by a device library"
        parts.append(f"{name} ({where}{f'; in lib{libs[0]}' if libs else ''})")
    more = f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
    fix = (": link with " + " ".join(f"-foffload-options=nvptx-none=-l{lib}" for lib in fixes)
           if fixes else ": no GCC device library defines it (is it a host-only function "
           "called in a target region?)")
    command = f" [{runner.show(argv)}]" if runner.VERBOSE else ""
    plural = "s" if len(missing) > 1 else ""
    return ToolError(f"device link for target nvptx-none: unresolved symbol{plural} "
                     f"{', '.join(parts)}{more}{fix}{command}", error.exit_code,
                     error.output if runner.VERBOSE else "")


def _defines(argv: list[str], lib: str, name: str) -> bool:
    """Whether lib<lib>.a, in the first -L folder of the device link that has it, defines
    `name`."""
    for d in (w[2:] for w in argv if w.startswith("-L")):
        path = os.path.join(d, f"lib{lib}.a")
        if os.path.isfile(path):
            with open(path, "rb") as f:
                data = f.read()
            return re.search(rb"// BEGIN GLOBAL (?:FUNCTION|VAR) DEF: " + re.escape(
                name.encode()) + rb"\n", data) is not None
    return False
