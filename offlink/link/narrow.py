"""Narrowing: the offered names a link keeps (`--offload-symbol`, `--offload-symbol-list`).

By default every name the CUs offer gets a row. A link may list names and glob patterns
(`*`, `?`, `[...]`, as in an ld version script); then only the names they match get rows, and
the targets that can (host, CUDA: Target.narrowed_image) link an image that keeps only what
those names reach.

As with ld's version scripts under --no-undefined-version (lld's default): a pattern that
matches nothing is fine (a list can serve several programs), an exact name that no CU offers
is an error (a typo would otherwise leave a function silently out of the table).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ..errors import LinkError, UsageError

GLOB_CHARACTERS = frozenset("*?[")


def is_pattern(word: str) -> bool:
    return not GLOB_CHARACTERS.isdisjoint(word)


def read_list(path: str) -> list[str]:
    """The names and patterns of a list file: one a line, `#` starts a comment, blank lines
    and surrounding white space ignored."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(f"--offload-symbol-list: {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--offload-symbol-list: {path}: not a text file") from None
    out = []
    for line in text.splitlines():
        word = line.partition("#")[0].strip()
        if word:
            out.append(word)
    return out


class Narrowing(NamedTuple):
    """The names and patterns a link offers; empty: every offered name (the default)."""

    words: tuple[str, ...] = ()

    @classmethod
    def from_options(cls, symbols: Sequence[str], lists: Sequence[str]) -> Narrowing:
        words = [*symbols, *(w for path in lists for w in read_list(path))]
        for w in words:
            if any(c.isspace() for c in w) or '"' in w:
                raise UsageError(f"--offload-symbol: '{w}' is not a symbol name or pattern")
        return cls(tuple(dict.fromkeys(words)))

    @property
    def active(self) -> bool:
        return bool(self.words)

    @property
    def exact(self) -> frozenset[str]:
        return frozenset(w for w in self.words if not is_pattern(w))

    def select(self, names: Iterable[str]) -> frozenset[str] | None:
        """The names kept of `names`; None when nothing is narrowed (all of them)."""
        if not self.words:
            return None

        exact = self.exact
        patterns = [fnmatch.translate(w) for w in self.words if is_pattern(w)]
        match = re.compile("|".join(patterns)).match if patterns else lambda _name: None
        return frozenset(n for n in names if n in exact or match(n))

    def check(self, offered: Iterable[str]) -> None:
        """Every exact name is offered by some target's CUs; else one line naming it."""
        names = set(offered)
        missing = sorted(self.exact.difference(names))
        if not missing:
            return
        import difflib  # the error's hint only: not every link's import

        more = f" (nor {len(missing) - 1} more of the names listed)" if len(missing) > 1 else ""
        close = difflib.get_close_matches(missing[0], sorted(names), 1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise LinkError(f"--offload-symbol: no CU offers '{missing[0]}'{more}: offered are "
                        f"the external functions and variables their target code defines{hint}")


EVERY = Narrowing()  # the default: every offered name gets a row
