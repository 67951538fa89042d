"""Which LLVM release a link's tools come from, and what that release writes and names.

A clang object names its clang in `.comment` ("clang version 22.1.8"); a flang object names
none, and the driver the user named (`flang-new-19`, `clang-22`) is the release of the link:
its own clang (`/usr/lib/llvm-19/bin/clang` beside `flang-new-19`), never `PATH`'s unversioned
`clang` (often another release). What changes by release:

- the offload entries (formats/offload_entries.py): 32 bytes up to 19, 56 bytes in the
  per-kind sections in 20, one `llvm_offload_entries` section from 21 on;
- the packager: clang-offload-packager up to 21, llvm-offload-binary from 22 on;
- the device runtime of a GPU image: `-lomptarget.devicertl` up to 20, per-target
  `libompdevice.a` given as `--device-linker=<triple>=-lompdevice` from 21 on
  (toolchains/llvm/device_runtime.py).
"""

from __future__ import annotations

import os

from ... import run as runner
from ...errors import LinkError

_DRIVERS = ("clang", "clang++", "flang", "flang-new")


def _number(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def release(command: str) -> int | None:
    """The LLVM major release of a clang or flang command (`clang-22`, `flang-new-19`, a path
    into /usr/lib/llvm-N/), or None where neither its name nor its install says."""
    name, _, number = os.path.basename(command).rpartition("-")
    if name in _DRIVERS and _number(number) is not None:
        return _number(number)
    path = runner.which(command)
    if path is None:
        return None
    folders = os.path.realpath(path).split("/")[1:-1]  # "/llvm-N/": a folder of the path
    return next((_number(f[5:]) for f in folders
                 if f.startswith("llvm-") and _number(f[5:]) is not None), None)


def own_clang(driver: str) -> str:
    """The clang of the same LLVM install as `driver` (a clang is its own), "" when there is
    none: flang-new-19 -> /usr/lib/llvm-19/bin/clang."""
    name = os.path.basename(driver)
    if name.startswith("clang"):
        return driver.replace("clang++", "clang")
    path = runner.which(driver)
    if path is None:
        return ""
    beside = os.path.join(os.path.dirname(os.path.realpath(path)), "clang")
    return beside if os.access(beside, os.X_OK) else ""


def compiler_of(producers: list[str], driver: str) -> str:
    """The clang a link's LLVM CUs are compiled and linked with: the one their objects name
    (`clang-22`) where it is installed, else the driver's own (a flang object names none),
    else plain `clang`."""
    named = sorted({p for p in producers if p != "clang"}, key=lambda p: release(p) or 0)
    own = own_clang(driver) if driver else ""
    if named and (runner.which(named[-1]) or not own):
        return named[-1]  # the newest (for_inputs refuses generations that differ)
    # An object of a clang not installed here (zig's clang 20): the driver's own links it.
    return own or "clang"


def entry_generation(major: int | None) -> int:
    """The offload entry layout a release writes: 1 (32 bytes, <= 19), 2 (56 bytes in the
    per-kind sections, 20), 3 (56 bytes in llvm_offload_entries, 21+)."""
    if major is None or major <= 19:
        return 1
    return 2 if major == 20 else 3


def packager(major: int | None) -> str:
    """The tool that packs and unpacks OffloadBinary images in this release."""
    name = "llvm-offload-binary" if major is not None and major >= 22 else \
        "clang-offload-packager"
    return f"{name}-{major}" if major is not None else name


def of_link(name: str, cus, driver: str) -> tuple[str, int | None, int]:
    """(the clang, its release, the entry generation) of target `name`'s link of `cus`: the
    objects' clang (compiler_of), the rows their releases wrote (a clang-20 object linked by
    clang-22 keeps clang 20's). Objects whose releases write different rows are refused."""
    producers = [cu.payload.compiler for cu in cus]
    compiler = compiler_of(producers, driver)
    generations = {entry_generation(release(p)) for p in producers if p != "clang"}
    if len(generations) > 1:
        raise LinkError(f"target {name}: the objects were made by "
                        f"{', '.join(sorted(set(producers)))}, whose offload entries differ "
                        f"(32 bytes up to clang 19, 56 bytes from clang 20, "
                        f"llvm_offload_entries from 21): link them with one release")
    major = release(compiler)
    return compiler, major, min(generations) if generations else entry_generation(major)
