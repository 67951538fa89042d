"""Build the C runtime library (libofflink.a) on demand, cached, and say how to use it.

The library is compiled from the sources shipped in this package, once per set of sources and
compiler, into a cache directory: `OFFLINK_CACHE_DIR`, else `$XDG_CACHE_HOME/offlink`, else
`~/.cache/offlink`. Its size and SHA-256 are kept beside it and checked on every use; a
library that does not match is rebuilt. `offlink config --cflags/--libs` prints `cflags()`
and `libs()`.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from ..errors import ToolError

RUNTIME_DIR = Path(__file__).resolve().parent
LIBRARY = "libofflink.a"
SEAL = ".sha256"  # beside the library: "<size> <sha256>\n" of what was built
# -fvisibility=hidden keeps the table core (ofl_*) and the runtime's helpers out of the
# module's dynamic symbols; offlink.h marks the public offlink_* API default.
CFLAGS = ["-O2", "-fPIC", "-fvisibility=hidden", "-std=c11", "-pthread", "-Wall", "-Wextra"]


def sources() -> list[Path]:
    """The C sources of the library: the runtime and the table core it shares with Python."""
    return sorted(RUNTIME_DIR.glob("runtime*.c")) + [RUNTIME_DIR / "table.c"]


def cache_dir() -> Path:
    """offlink's cache folder, shared with the link cache (`runtime/` beside `objects/`),
    created 0700 if missing and refused when others could plant a library there."""
    from ..link.cache import default_dir, trusted_root

    root = default_dir()
    try:
        return Path(trusted_root(root))
    except OSError as e:
        raise ToolError(f"cannot create the cache folder {root}: {e.strerror}") from None


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


def _seal(library: Path) -> str:
    """What is kept beside the library: its size and SHA-256."""
    data = library.read_bytes()
    return f"{len(data)} {hashlib.sha256(data).hexdigest()}\n"


def _intact(library: Path) -> bool:
    """The cached library is the one built: its size and SHA-256 match the seal beside it."""
    try:
        return _seal(library) == library.with_name(library.name + SEAL).read_text("ascii")
    except (OSError, ValueError):
        return False


def runtime_library() -> Path:
    """Path to libofflink.a, built first if this set of sources and compiler has none yet,
    or if the cached one does not match the size and hash kept beside it (then rebuilt).

    Safe when several processes build at once: each builds in its own temporary directory
    and renames the result into place, then its seal; the last rename wins with identical
    content, and a library seen without its seal is only built once more.
    """
    missing = [p for p in sources() if not p.is_file()]
    if missing:
        raise ToolError(f"the offlink runtime sources are incomplete: {missing[0]} is missing")
    cc = _compiler()
    ar = os.environ.get("AR") or "ar"
    target = cache_dir() / "runtime" / _key(cc, ar) / LIBRARY
    if _intact(target):
        return target
    from .. import run as runner
    from ..link.cache import make_dirs, write_atomic

    if runner.VERBOSE and target.exists():
        print(f"offlink: {target} does not match its seal; rebuilding it", file=sys.stderr)
    try:
        make_dirs(str(target.parent))
    except OSError as e:
        raise ToolError(f"cannot create {target.parent}: {e.strerror}") from None
    with tempfile.TemporaryDirectory(prefix=".build-", dir=target.parent) as tmp:
        objects = []
        for src in sources():
            obj = Path(tmp) / (src.stem + ".o")
            _run([*cc, *CFLAGS, f"-I{RUNTIME_DIR}", "-c", str(src), "-o", str(obj)])
            objects.append(str(obj))
        archive = Path(tmp) / LIBRARY
        _run([ar, "rcsD", str(archive), *objects])  # D: no timestamps, reproducible
        seal = _seal(archive)
        os.replace(archive, target)
    try:
        write_atomic(str(target) + SEAL, seal.encode("ascii"))
    except OSError as e:
        raise ToolError(f"cannot write {target}{SEAL}: {e.strerror}") from None
    return target


def cflags() -> list[str]:
    """Compiler flags for a program that includes offlink.h."""
    return [f"-I{RUNTIME_DIR}"]


def libs() -> list[str]:
    """Linker arguments for a program that uses the runtime (builds the library if needed)."""
    return [str(runtime_library()), "-ldl", "-lpthread"]
