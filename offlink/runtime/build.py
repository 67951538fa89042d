"""The C runtime library (libofflink.a): the prebuilt one, else built on demand, cached; and
how to use it (flags, pkg-config and CMake files).

The package build (setup.py) compiles the library into offlink/runtime/lib/ with a seal
(size, SHA-256 and the hash of the sources it came from) and relocatable offlink.pc and
offlinkConfig.cmake beside it; that one is used whatever $CC says, so no C compiler is needed.
When it is missing, does not match its seal or was built from other sources (an editable
install after an edit), or OFFLINK_BUILD_RUNTIME=1 asks for it, the library is compiled from
the shipped sources with $CC, once per set of sources and compiler, into a cache directory:
`OFFLINK_CACHE_DIR`, else `$XDG_CACHE_HOME/offlink`, else `~/.cache/offlink`; its size and
SHA-256 are kept beside it and checked on every use, and a library that does not match is
rebuilt. `offlink config --cflags/--libs/--pkgconfig-dir/--cmake-dir` prints `cflags()`,
`libs()`, `pkgconfig_dir()` and `cmake_dir()`.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
import tempfile
from pathlib import Path

from .. import __version__, settings
from .. import run as runner
from ..cache.keys import file_stamp
from ..cache.store import default_dir, make_dirs, trusted_root, write_atomic
from ..errors import ToolError
from . import recipe
from .recipe import CFLAGS, LIBRARY, SEAL

RUNTIME_DIR = Path(__file__).resolve().parent
PREBUILT_DIR = RUNTIME_DIR / recipe.PREBUILT


def sources() -> list[Path]:
    """The C sources of the library: the runtime and the table core it shares with Python."""
    return recipe.sources(RUNTIME_DIR)


def prebuilt_library() -> Path | None:
    """The library the package build made, when it is intact and built from these sources;
    None when OFFLINK_BUILD_RUNTIME=1 asks for a build from the sources instead."""
    if settings.flag("OFFLINK_BUILD_RUNTIME"):
        return None
    library = PREBUILT_DIR / LIBRARY
    try:
        kept = library.with_name(LIBRARY + SEAL).read_text("ascii")
        expected = recipe.seal(library) + f"sources {recipe.sources_hash(RUNTIME_DIR)}\n"
    except (OSError, ValueError):
        return None
    return library if kept == expected else None


def cache_dir() -> Path:
    """offlink's cache folder, shared with the link cache (`runtime/` beside `objects/`),
    created 0700 if missing and refused when others could plant a library there."""
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
    h = hashlib.sha256()
    h.update(recipe.sources_hash(RUNTIME_DIR).encode())
    h.update(" ".join([*cc, *CFLAGS, ar]).encode())
    for tool in (cc[0], ar):
        found = runner.which(tool)
        if found:
            real = os.path.realpath(found)
            st = os.stat(real)
            h.update(f"\0{real}\0{file_stamp(st)}".encode())
    return h.hexdigest()[:20]


def _run(argv: list[str]) -> None:
    runner.run(argv, "building the offlink runtime")


_seal = recipe.seal


def _intact(library: Path) -> bool:
    """The cached library is the one built: its size and SHA-256 match the seal beside it."""
    try:
        return _seal(library) == library.with_name(library.name + SEAL).read_text("ascii")
    except (OSError, ValueError):
        return False


def runtime_library() -> Path:
    """Path to libofflink.a: the prebuilt one (see prebuilt_library), else the cached build
    for this set of sources and compiler, built first if there is none yet or if the cached
    one does not match the size and hash kept beside it (then rebuilt).

    Safe when several processes build at once: each builds in its own temporary directory
    and renames the result into place, then its seal; the last rename wins with identical
    content, and a library seen without its seal is only built once more.
    """
    prebuilt = prebuilt_library()
    if prebuilt is not None:
        return prebuilt
    missing = [p for p in sources() if not p.is_file()]
    if missing:
        raise ToolError(f"the offlink runtime sources are incomplete: {missing[0]} is missing")
    cc = _compiler()
    ar = os.environ.get("AR") or "ar"
    target = cache_dir() / "runtime" / _key(cc, ar) / LIBRARY
    if _intact(target):
        return target
    if runner.VERBOSE and target.exists():
        print(f"offlink: {target} does not match its seal; rebuilding it", file=sys.stderr)
    try:
        make_dirs(str(target.parent))
    except OSError as e:
        raise ToolError(f"cannot create {target.parent}: {e.strerror}") from None
    with tempfile.TemporaryDirectory(prefix=".build-", dir=target.parent) as tmp:
        archive = recipe.compile_archive(cc, ar, RUNTIME_DIR, Path(tmp), _run)
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
    return [str(runtime_library()), *recipe.LINK_LIBS]


def _config_dir(sub: str) -> Path:
    """The folder `sub` (pkgconfig, cmake/offlink) beside the library in use: shipped with
    the prebuilt one; written beside a library built on demand, with absolute paths."""
    library = runtime_library()
    if library.parent == PREBUILT_DIR:
        return PREBUILT_DIR / sub
    include = str(RUNTIME_DIR)
    files = recipe.config_files(__version__, include, str(library), include, str(library),
                                RUNTIME_DIR / "config")
    for rel, text in files.items():
        path = library.parent / rel
        try:
            if not path.is_file() or path.read_text("utf-8") != text:
                write_atomic(str(path), text.encode("utf-8"))
        except OSError as e:
            raise ToolError(f"cannot write {path}: {e.strerror}") from None
    return library.parent / sub


def pkgconfig_dir() -> Path:
    """The folder holding offlink.pc, for PKG_CONFIG_PATH."""
    return _config_dir(recipe.PKGCONFIG)


def cmake_dir() -> Path:
    """The folder holding offlinkConfig.cmake, for offlink_DIR or CMAKE_PREFIX_PATH."""
    return _config_dir(recipe.CMAKE)
