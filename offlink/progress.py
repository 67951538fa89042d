"""A live display of the target compiles (done, running, failed), on a terminal only.

rich is imported only when the display is shown: a link whose stderr is not a terminal (a
build log, a CI run) or that has nothing to compile prints nothing extra. --verbose prints
the commands instead; OFFLINK_PROGRESS=0 turns the display off.
"""

from __future__ import annotations

import os
import sys


def wanted() -> bool:
    from . import run as runner

    if os.environ.get("OFFLINK_PROGRESS", "") == "0" or runner.VERBOSE:
        return False
    if os.environ.get("TERM", "") == "dumb":
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class CompileProgress:
    """One target's compiles: `started()` and `finished(ok)` as jobs begin and end."""

    def __init__(self, target: str, total: int, cached: int):
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
            TextColumn("offlink: compiling for {task.description}"),
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
        self._task = self._progress.add_task(target, total=total, completed=cached,
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
