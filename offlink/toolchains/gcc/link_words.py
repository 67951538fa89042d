"""GCC's offload words on a link line, read as GCC's driver reads them (GCC 12 to 16 alike):
which offload targets the link builds images for, and the -foffload-options values each target's
compile gets.

GCC 12 (gcc.cc, driver_handle_option and handle_foffload_option; checked against `gcc -v`):
- `-foffload=T1,T2` adds targets to the list, words accumulate (`-foffload=nvptx-none
  -foffload=amdgcn-amdhsa` builds both); `default` forgets the list (every installed target);
  `disable` empties it (no offloading) and ends the word.
- `-foffload=-OPTS` (no target) and `-foffload=TARGETS=OPTS` are also kept as
  `-foffload-options=...` (COLLECT_GCC_OPTIONS shows them so); the second names its targets too.
- `-foffload-options=OPTS` applies to every target, `-foffload-options=T1,T2=OPTS` to those,
  in the order given (dialect.py, offload_options).
- Without a target word, every configured target whose accel compiler is installed
  (--enable-offload-defaulted: Debian's GCC 12 is configured for nvptx-none and amdgcn-amdhsa).
- A target GCC is not configured for is an error ("GCC is not configured to support 'x' as
  '-foffload=' argument").

Pure functions from words to data: the link runs nothing here.
"""

from __future__ import annotations

import functools
import os
from typing import NamedTuple

from ... import run as runner
from ...errors import UsageError

# What Debian's GCC 12 is configured for (OFFLOAD_TARGET_NAMES under `gcc -v`), in that order.
CONFIGURED = ("nvptx-none", "amdgcn-amdhsa")
GCN = "amdgcn-amdhsa"  # its CUs' target (toolchains/gcc/gcn.py)
BUILT = ("nvptx-none", GCN)  # the GCC targets offlink builds images for (nvptx.py, gcn.py)
PACKAGES = {"nvptx-none": "gcc-{major}-offload-nvptx",
            "amdgcn-amdhsa": "gcc-{major}-offload-amdgcn"}


class OffloadWords(NamedTuple):
    """What a link line's offload words ask for."""

    targets: tuple[str, ...] | None  # None: GCC's default (every installed target); (): disable
    options: tuple[str, ...]  # -foffload-options values, in order (TARGETS=OPTS or OPTS)
    said: str  # the last word that set the targets, for messages ("" where none did)


def read_words(args: list[str]) -> OffloadWords:
    """The link line's offload words (`args`: its words after the driver, @files expanded)."""
    targets: list[str] | None = None
    options: list[str] = []
    said = ""
    for a in args:
        if a.startswith("-foffload-options="):
            value = a[len("-foffload-options="):]
            _check_targets(value.partition("=")[0] if _names_targets(value) else "", a)
            options.append(value)
        elif a.startswith("-foffload="):
            value = a[len("-foffload="):]
            if not value.startswith("-"):
                names = value.partition("=")[0]
                said = a
                for name in names.split(","):
                    if name == "disable":
                        targets = []
                        break
                    if name == "default":
                        targets = None
                        break
                    _check_targets(name, a)
                    if targets is None:
                        targets = []
                    if name not in targets:
                        targets.append(name)
            if value.startswith("-") or "=" in value:
                options.append(value)
    return OffloadWords(None if targets is None else tuple(targets), tuple(options), said)


def _names_targets(value: str) -> bool:
    head, sep, _ = value.partition("=")
    return bool(sep) and not head.startswith("-")


def _check_targets(names: str, word: str) -> None:
    for name in filter(None, names.split(",")):
        if name not in CONFIGURED and name not in ("disable", "default"):
            raise UsageError(f"{word}: GCC 12 is not configured for offload target '{name}' "
                             f"(it knows {', '.join(CONFIGURED)})")


def wanted(words: OffloadWords, major: str | None) -> tuple[str, ...]:
    """The targets GCC's link would build images for: those the words name, or every
    configured target whose accel compiler is installed."""
    if words.targets is not None:
        return words.targets
    return installed(major, os.environ.get("PATH", ""))


@functools.lru_cache(maxsize=8)
def installed(major: str | None, path: str) -> tuple[str, ...]:
    """The configured targets whose accel compiler (`<machine>-linux-gnu-accel-T-gcc-MAJOR`)
    is on PATH, as GCC's driver finds mkoffload for them."""
    machine = os.uname().machine
    suffix = f"-{major}" if major else ""
    return tuple(t for t in CONFIGURED
                 if runner.which(f"{machine}-linux-gnu-accel-{t}-gcc{suffix}") is not None)


def check_buildable(targets: tuple[str, ...], words: OffloadWords, major: str | None) -> None:
    """One line for a target GCC's link would build and offlink cannot: never an image for
    another target in its place."""
    for t in targets:
        if t not in BUILT:
            why = (f"{words.said} asks for it" if words.targets is not None else
                   f"{PACKAGES.get(t, t).format(major=major or '12')} is installed and no "
                   f"-foffload= names the targets")
            raise UsageError(f"GCC's own link would build an offload image for {t} ({why}); "
                             f"offlink builds {', '.join(BUILT)} only: link with "
                             f"-foffload={','.join(BUILT)} or with GCC's own link")
