"""How libofflink.a and its pkg-config and CMake files are made: one recipe for the package
build (setup.py) and the build on demand (build.py).

Standalone on purpose (no imports from the offlink package): setup.py loads this file by
path before offlink is installed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Callable

LIBRARY = "libofflink.a"
SEAL = ".sha256"  # beside the library: "<size> <sha256>\n" of what was built
PREBUILT = "lib"  # the package build's folder under offlink/runtime/
PKGCONFIG = "pkgconfig"  # under the library's folder: offlink.pc
CMAKE = os.path.join("cmake", "offlink")  # under the library's folder: offlinkConfig.cmake
# -fvisibility=hidden keeps the table core (ofl_*) and the runtime's helpers out of the
# module's dynamic symbols; offlink.h marks the public offlink_* API default.
CFLAGS = ["-O2", "-fPIC", "-fvisibility=hidden", "-std=c11", "-pthread", "-Wall", "-Wextra"]
LINK_LIBS = ["-ldl", "-lpthread"]


def sources(runtime_dir: Path) -> list[Path]:
    """The C sources of the library: the runtime and the table core it shares with Python."""
    return sorted(runtime_dir.glob("runtime*.c")) + [runtime_dir / "table.c"]


def sources_hash(runtime_dir: Path) -> str:
    """SHA-256 of the sources and headers, names included: what a prebuilt library was built
    from, so an editable install whose sources changed since does not use a stale one."""
    h = hashlib.sha256()
    for path in [*sources(runtime_dir), *sorted(runtime_dir.glob("*.h"))]:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def seal(library: Path) -> str:
    """What is kept beside the library: its size and SHA-256."""
    data = library.read_bytes()
    return f"{len(data)} {hashlib.sha256(data).hexdigest()}\n"


def compile_archive(cc: list[str], ar: str, runtime_dir: Path, workdir: Path,
                    run: Callable[[list[str]], None]) -> Path:
    """Compile the sources in `workdir` and archive them there; the archive's path."""
    objects = []
    for src in sources(runtime_dir):
        obj = workdir / (src.stem + ".o")
        run([*cc, *CFLAGS, f"-I{runtime_dir}", "-c", str(src), "-o", str(obj)])
        objects.append(str(obj))
    archive = workdir / LIBRARY
    run([ar, "rcsD", str(archive), *objects])  # D: no timestamps, reproducible
    return archive


def config_files(version: str, include_dir: str, library: str, cmake_include_dir: str,
                 cmake_library: str, templates: Path) -> dict[str, str]:
    """offlink.pc and the CMake package files, as {path under the library's folder: text}.

    The pkg-config paths may use ${pcfiledir} and the CMake ones ${CMAKE_CURRENT_LIST_DIR},
    so the files shipped in the wheel work wherever it is installed.
    """
    values = {"@VERSION@": version, "@INCLUDEDIR@": include_dir, "@LIBRARY@": library,
              "@CMAKE_INCLUDEDIR@": cmake_include_dir, "@CMAKE_LIBRARY@": cmake_library,
              "@LINK_LIBS@": " ".join(LINK_LIBS)}
    out = {}
    for name, dest in (("offlink.pc.in", os.path.join(PKGCONFIG, "offlink.pc")),
                       ("offlinkConfig.cmake.in", os.path.join(CMAKE, "offlinkConfig.cmake")),
                       ("offlinkConfigVersion.cmake.in",
                        os.path.join(CMAKE, "offlinkConfigVersion.cmake"))):
        text = (templates / name).read_text("utf-8")
        for key, value in values.items():
            text = text.replace(key, value)
        out[dest] = text
    return out


def relocatable_config_files(version: str, templates: Path) -> dict[str, str]:
    """The config files for the prebuilt library in offlink/runtime/lib/: every path relative
    to the file itself (offlink.h is two folders up from lib/pkgconfig, three from
    lib/cmake/offlink)."""
    return config_files(version, "${pcfiledir}/../..", f"${{pcfiledir}}/../{LIBRARY}",
                        "${CMAKE_CURRENT_LIST_DIR}/../../..",
                        f"${{CMAKE_CURRENT_LIST_DIR}}/../../{LIBRARY}", templates)


def build_prebuilt(runtime_dir: Path, dest: Path, version: str, cc: list[str], ar: str,
                   workdir: Path) -> None:
    """The package build's step: libofflink.a, its seal (with the sources' hash) and the
    relocatable pkg-config and CMake files, into `dest` (offlink/runtime/lib)."""

    def run(argv: list[str]) -> None:
        subprocess.run(argv, check=True)

    archive = compile_archive(cc, ar, runtime_dir, workdir, run)
    dest.mkdir(parents=True, exist_ok=True)
    files = relocatable_config_files(version, runtime_dir / "config")
    for rel, text in files.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text, "utf-8")
    stamp = seal(archive) + f"sources {sources_hash(runtime_dir)}\n"
    os.replace(archive, dest / LIBRARY)
    (dest / (LIBRARY + SEAL)).write_text(stamp, "ascii")
