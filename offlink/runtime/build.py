"""Build the C runtime library (libofflink.a) on demand, cached, and say how to use it.

The library is compiled from the sources shipped in this package, once per set of sources and
compiler, into a cache directory: `OFFLINK_CACHE_DIR`, else `$XDG_CACHE_HOME/offlink`, else
`~/.cache/offlink`. `offlink config --cflags/--libs` prints `cflags()` and `libs()`.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import tempfile
from pathlib import Path

from ..errors import ToolError

RUNTIME_DIR = Path(__file__).resolve().parent
LIBRARY = "libofflink.a"
# -fvisibility=hidden keeps the table core (ofl_*) and the runtime's helpers out of the
# module's dynamic symbols; offlink.h marks the public offlink_* API default.
CFLAGS = ["-O2", "-fPIC", "-fvisibility=hidden", "-std=c11", "-pthread", "-Wall", "-Wextra"]


def sources() -> list[Path]:
    """The C sources of the library: the runtime and the table core it shares with Python."""
    return sorted(RUNTIME_DIR.glob("runtime*.c")) + [RUNTIME_DIR / "table.c"]


def cache_dir() -> Path:
    """offlink's cache folder, shared with the link cache (`runtime/` beside `objects/`)."""
    from ..link.cache import default_dir

    return Path(default_dir())


def _compiler() -> list[str]:
    return shlex.split(os.environ.get("CC") or "cc")


def _key(cc: list[str], ar: str) -> str:
    """Hash of everything the library depends on: sources, headers, flags and the tools.

    The tools are identified by their resolved path and stat stamp (device, inode, size,
    mtime and ctime): no subprocess and no read, so a cache hit stays cheap (`offlink config
    --libs` runs in every build).
    """
    from ..link.cache import file_stamp

    h = hashlib.sha256()
    for path in [*sources(), *sorted(RUNTIME_DIR.glob("*.h"))]:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(" ".join([*cc, *CFLAGS, ar]).encode())
    for tool in (cc[0], ar):
        found = shutil.which(tool)
        if found:
            real = os.path.realpath(found)
            st = os.stat(real)
            h.update(f"\0{real}\0{file_stamp(st)}".encode())
    return h.hexdigest()[:20]


def _run(argv: list[str]) -> None:
    from .. import run as runner

    runner.run(argv, "building the offlink runtime")


def runtime_library() -> Path:
    """Path to libofflink.a, built first if this set of sources and compiler has none yet.

    Safe when several processes build at once: each builds in its own temporary directory
    and renames the result into place; the last rename wins with identical content.
    """
    missing = [p for p in sources() if not p.is_file()]
    if missing:
        raise ToolError(f"the offlink runtime sources are incomplete: {missing[0]} is missing")
    cc = _compiler()
    ar = os.environ.get("AR") or "ar"
    target = cache_dir() / "runtime" / _key(cc, ar) / LIBRARY
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=target.parent) as tmp:
        objects = []
        for src in sources():
            obj = Path(tmp) / (src.stem + ".o")
            _run([*cc, *CFLAGS, f"-I{RUNTIME_DIR}", "-c", str(src), "-o", str(obj)])
            objects.append(str(obj))
        archive = Path(tmp) / LIBRARY
        _run([ar, "rcsD", str(archive), *objects])  # D: no timestamps, reproducible
        os.replace(archive, target)
    return target


def cflags() -> list[str]:
    """Compiler flags for a program that includes offlink.h."""
    return [f"-I{RUNTIME_DIR}"]


def libs() -> list[str]:
    """Linker arguments for a program that uses the runtime (builds the library if needed)."""
    return [str(runtime_library()), "-ldl", "-lpthread"]
