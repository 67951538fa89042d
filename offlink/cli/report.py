"""The one place errors reach the user: one `offlink: error: ...` line and an exit status,
shared by the hand-read commands (cc, link) and the typer app."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

from .. import __version__, settings
from ..errors import OfflinkError, ToolError


def _report(e: BaseException) -> int:
    if settings.flag("OFFLINK_TRACEBACK"):
        import traceback

        traceback.print_exception(type(e), e, e.__traceback__)
    if isinstance(e, ToolError) and e.output:
        sys.stderr.write(e.output if e.output.endswith("\n") else e.output + "\n")
    print(f"offlink: error: {e}", file=sys.stderr)
    return getattr(e, "exit_code", 1) or 1


def guard(fn: Callable[[], int]) -> int:
    """Run a command: its status, or one `offlink: error: ...` line and a non-zero status
    for whatever it raises (a traceback too with OFFLINK_TRACEBACK=1)."""
    try:
        code = fn()
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:
        return _stdout_closed()
    except OfflinkError as e:
        return _report(e)
    except OSError as e:  # the system refused a file operation: not a bug in offlink
        return _report(OfflinkError(_os_error_text(e)))
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM/SIGHUP during a link (jobs.py)
        print("offlink: interrupted", file=sys.stderr)
        return 128 + getattr(e, "signum", 2)
    except Exception as e:  # noqa: BLE001 - a bug in offlink: still one line, traceback on request
        if settings.flag("OFFLINK_TRACEBACK"):
            raise
        print(f"offlink: error: internal error: {type(e).__name__}: {e} (run with --traceback "
              f"and report it)", file=sys.stderr)
        return 70


def _os_error_text(e: OSError) -> str:
    """'OUTPUT: Is a directory' for a failed rename onto a folder, 'FILE: reason' else."""
    name = e.filename2 if e.filename2 is not None else e.filename
    reason = e.strerror or str(e)
    if name is None:
        return reason
    return f"{os.fsdecode(name) if isinstance(name, bytes) else name}: {reason}"


def _stdout_closed() -> int:
    """The reader of stdout went away (`offlink inspect X | head -1`): end quietly, with the
    status of a Unix tool ended by SIGPIPE. Later writes (and the flush at exit) go nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE


def version_text() -> str:
    from ..table import backend

    return f"offlink {__version__} (table core: {backend()})"
