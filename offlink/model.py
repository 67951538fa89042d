"""The data the link's stages and its plug-ins (dialects, targets, registrations) hand each
other: the link plan, a CU's target code, what a compiled CU offers. What carries a target
(a compiled CU, an image) is plugins.py's, beside the Target it names.

It sits below link/, cc/, cli/ and toolchains/ and imports none of them (only for
annotations), so they all can import it and none needs another's module for its types.

Named tuples and plain classes: every link makes these, a relink of 1000 CUs a few thousand
of them (benchmarks/health/RESULTS.md).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, NamedTuple

from .formats import Frozen

if TYPE_CHECKING:
    from .formats.payload import Payload


# -- stage 1, plan ---------------------------------------------------------------------------

class Input(NamedTuple):
    """A file or -l library on the link line, in order, with the archive modes in force."""

    kind: str  # "file" or "library" (-lNAME; path is NAME, or ":file" for -l:file)
    path: str
    whole_archive: bool = False
    static: bool = False  # -Bstatic / -static in force (for -l search)
    group: int = 0  # --start-group number, 0 outside any group


class LinkPlan(NamedTuple):
    driver: str
    argv: list[str]  # the command as given
    output: str
    mode: str  # "executable", "shared" or "relocatable"
    static: bool
    pie: bool | None  # -pie / -no-pie given, None: the driver's default
    strip: bool  # -s or -Wl,--strip-all: done by offlink after the fill
    lto: bool
    inputs: list[Input]
    lib_dirs: list[str]
    base_args: list[str]  # args without -o and strip options
    # base_args as the host link gets them: an @file offlink keeps whole is passed as written
    host_args: list[str]


def find_library(name: str, plan: LinkPlan, static: bool) -> str | None:
    """Where -lNAME resolves among the user's -L folders (system folders hold no fat code)."""
    candidates = [name[1:]] if name.startswith(":") else \
        ([f"lib{name}.a"] if static else [f"lib{name}.so", f"lib{name}.a"])
    for d in plan.lib_dirs:
        for c in candidates:
            path = os.path.join(d, c)
            if os.path.isfile(path):
                return path
    return None


# -- stage 2, extract ------------------------------------------------------------------------

class CU(Frozen):
    """One compilation unit's target code for one target, and where it came from (a plain
    class, not a named tuple: dialects add fields in subclasses, GccCU)."""

    __slots__ = ("origin", "payload")
    origin: str  # "a.o", "libx.a(m.o)", with "#N" when a file holds several records
    payload: Payload

    def __init__(self, origin: str, payload: Payload):
        _set(self, "origin", origin)
        _set(self, "payload", payload)

    def _names(self) -> list[str]:
        """The fields, a subclass's after its bases' (as a dataclass orders them)."""
        return [n for c in reversed(type(self).__mro__) for n in getattr(c, "__slots__", ())]

    def _values(self) -> tuple:
        return tuple(getattr(self, n) for n in self._names())

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}(" + \
            ", ".join(f"{n}={getattr(self, n)!r}" for n in self._names()) + ")"

    @property
    def label(self) -> str:
        return f"{self.payload.source} ({self.origin})"


_set = object.__setattr__


# -- stage 3, compile ------------------------------------------------------------------------

class Offer(NamedTuple):
    """A symbol a CU's target code offers, as the target object defines it (a named tuple:
    a relink makes one per offered name, three times faster than a frozen dataclass)."""

    name: str
    kind: str  # "function" or "variable"
    size: int
    strong: bool  # STB_GLOBAL (a weak or COMDAT definition may appear in many CUs)
