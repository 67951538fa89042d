"""Every OFFLINK_* environment variable offlink's Python reads, declared once: name, kind,
default, help; and the one rule for switches.

A switch is on when set to anything but "" and "0" ("" gives its default): OFFLINK_VERBOSE=1,
OFFLINK_PROGRESS=0. Values are read when asked for, not cached, so a test or a caller that sets
one in-process is heard. The C runtime reads its own (OFFLINK_TARGET, OFFLINK_MANDATORY) at
program start; they are the README's, not this module's.
"""

from __future__ import annotations

import os

# name -> (kind, default, help). Kinds: "switch" (flag()), "text", "path", "list", "size",
# "count" (text(): each reader parses its own, and says what is wrong with a bad value).
SETTINGS: dict[str, tuple[str, str, str]] = {
    "OFFLINK_VERBOSE": ("switch", "", "print every command offlink runs"),
    "OFFLINK_TRACEBACK": ("switch", "", "show a traceback with an error (also --traceback)"),
    "OFFLINK_TIMINGS": ("switch", "", "print the link's stage timings"),
    "OFFLINK_PROGRESS": ("switch", "1", "the live display of target compiles on a terminal"),
    "OFFLINK_JOBS": ("count", "", "parallel target compiles (default: the CPU count)"),
    "OFFLINK_TARGETS": ("list", "", "offlink cc's targets without --offload-target (default host)"),
    "OFFLINK_TARGET_LAUNCHER": ("text", "", "a command prefix for the per-CU target compiles "
                                "(distcc, sccache, ...)"),
    "OFFLINK_TARGET_LAUNCHER_MANDATORY": ("switch", "", "a launcher failure fails the link "
                                          "instead of compiling locally"),
    "OFFLINK_CC_TARGET_COMPILE": ("switch", "1", "offlink cc compiles the target code too "
                                  "(0: the link does)"),
    "OFFLINK_VERIFY": ("text", "", "deep: re-read the output with lief (as --verify-deep)"),
    "OFFLINK_TARGET": ("text", "", "the C runtime's target (none: the host); read here only by "
                       "inspect --explain, to say so"),
    "OFFLINK_GOMP_REGISTER": ("switch", "1", "register GCC's images with libgomp, "
                              "as GCC's own link does (0: leave it out)"),
    "OFFLINK_CACHE_DIR": ("path", "", "where the runtime library and the link cache are kept "
                          "(default $XDG_CACHE_HOME/offlink)"),
    "OFFLINK_CACHE_SIZE": ("size", "", "the link cache's size limit (default 1G; 0: no cache)"),
    "OFFLINK_NO_CACHE": ("switch", "", "turn the caches off (as --no-cache)"),
    "OFFLINK_CACHE_SHARED": ("switch", "", "trust a cache folder others can write to"),
    "OFFLINK_BUILD_RUNTIME": ("switch", "", "build the runtime library from its sources "
                              "instead of using the prebuilt one"),
    "OFFLINK_PURE_PYTHON": ("switch", "", "offlink.Table uses its pure-Python core"),
    "OFFLINK_NVCC": ("path", "", "the nvcc of the CUDA target (default: found on CUDA_HOME, "
                     "CUDA_PATH, PATH)"),
    "OFFLINK_NVCC_FLAGS": ("text", "", "words added to every nvcc command (shell-split)"),
    "OFFLINK_LIBLTO": ("path", "", "the libLTO the LLVM targets load; 0, no or off: none "
                       "(run llvm-lto2 itself)"),
}


def text(name: str) -> str:
    """The variable's value, or its declared default when unset or empty."""
    return os.environ.get(name, "") or SETTINGS[name][1]


def flag(name: str) -> bool:
    """A switch: on when set to anything but "" and "0"; its default when unset or empty."""
    assert SETTINGS[name][0] == "switch", name
    return text(name) not in ("", "0")
