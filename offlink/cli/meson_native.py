"""`offlink config --meson-native COMPILER`: a Meson native file with offlink in front of it."""

from __future__ import annotations

import os
import re
import sys


def offlink_words() -> list[str]:
    """The command that runs this offlink: its script, or this Python with -m offlink."""
    script = os.path.abspath(sys.argv[0])
    if os.path.basename(script) == "offlink" and os.access(script, os.X_OK):
        return [script]
    return [sys.executable, "-m", "offlink"]


def cxx_of(compiler: str) -> str:
    """The C++ driver beside a C driver, as the toolchains name them (gcc-12 -> g++-12,
    x86_64-linux-gnu-gcc -> x86_64-linux-gnu-g++, clang-19 -> clang++-19, cc -> c++); ""
    for a name that follows neither."""
    folder, name = os.path.split(compiler)
    m = re.fullmatch(r"(.*-)?(gcc|clang|cc)(-[0-9.]+)?", name)
    if m is None:
        return ""
    cxx = {"gcc": "g++", "clang": "clang++", "cc": "c++"}[m.group(2)]
    return os.path.join(folder, f"{m.group(1) or ''}{cxx}{m.group(3) or ''}")


def native_file(compiler: str, offlink: list[str] | None = None) -> str:
    """The native file's text: `offlink cc COMPILER` as Meson's C compiler (and the C++ one
    beside it), so every link runs through `offlink link` and offlink's own targets' compiles
    get their payload, while compiles that carry GCC's or clang's offload code stay the
    compiler's, untouched."""
    words = [*(offlink or offlink_words()), "cc"]

    def listed(driver: str) -> str:
        return "[" + ", ".join(repr(w) for w in [*words, driver]) + "]"

    lines = [f"# Meson native file: offlink in front of {compiler} (offlink config "
             f"--meson-native {compiler}).",
             "# meson setup BUILD --native-file THIS_FILE", "[binaries]",
             f"c = {listed(compiler)}"]
    cxx = cxx_of(compiler)
    if cxx:
        lines.append(f"cpp = {listed(cxx)}")
    return "\n".join(lines) + "\n"
