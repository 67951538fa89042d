"""A live display of the target compiles (done, running, failed), on a terminal only.

rich is imported only when the display is shown: a link whose stderr is not a terminal (a
build log, a CI run) or that has nothing to compile prints nothing extra. --verbose prints
the commands instead; OFFLINK_PROGRESS=0 turns the display off. Every line names the output.
Under a parallel make, sibling jobs write to the same terminal and a redrawn line would
overwrite theirs: one plain line per target is printed instead, never redrawn.
"""

from __future__ import annotations

import os
import re
import sys

from . import run as runner
from . import settings


def wanted() -> bool:
    if not settings.flag("OFFLINK_PROGRESS") or runner.VERBOSE:
        return False
    if os.environ.get("TERM", "") == "dumb":
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def siblings() -> bool:
    """Other jobs may write to this terminal now: a make running jobs in parallel."""
    flags = os.environ.get("MAKEFLAGS", "")
    return "--jobserver" in flags or re.search(r"(^|\s)-j(?!1\b)", flags) is not None


def _name(output: str) -> str:
    """The output as the command named it, or its file name where that path is long (the
    line must leave room for the counts)."""
    return output if len(output) <= 32 else os.path.basename(output)


def announce(output: str, target: str, total: int, cached: int) -> None:
    """The one line shown instead of the live display when siblings() (never redrawn)."""
    output = _name(output)
    more = f" ({cached} cached)" if cached else ""
    print(f"offlink: {output}: compiling {total - cached} of {total} CUs for {target}{more}",
          file=sys.stderr, flush=True)


class CompileProgress:
    """One target's compiles: `started()` and `finished(ok)` as jobs begin and end."""

    def __init__(self, target: str, total: int, cached: int, output: str = ""):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("offlink: {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[running]} running, {task.fields[failed]} failed, "
                       "{task.fields[cached]} cached"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._running = 0
        self._failed = 0
        what = f"{_name(output)}: compiling for {target}" if output else f"compiling for {target}"
        self._task = self._progress.add_task(what, total=total, completed=cached,
                                             running=0, failed=0, cached=cached)

    def __enter__(self) -> CompileProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def started(self) -> None:
        self._running += 1
        self._progress.update(self._task, running=self._running)

    def finished(self, ok: bool) -> None:
        self._running -= 1
        self._failed += not ok
        self._progress.update(self._task, advance=1, running=self._running, failed=self._failed)
