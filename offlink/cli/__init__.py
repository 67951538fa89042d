"""The `offlink` command: `cc` (cc_cmd.py) and `link` (link_cmd.py) read their options by
options.py's table, the other commands are the typer app's (app.py); each imports its own
modules where it starts (typer for the app's commands only, the link's stages for a link).
"""

from __future__ import annotations

import gc
import sys
import warnings

from .report import guard, version_text


def _one_line_warnings() -> None:
    """Library warnings reach a command-line user as one `offlink: warning:` line each."""
    warnings.formatwarning = lambda message, *_args, **_kw: f"offlink: warning: {message}\n"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    _one_line_warnings()
    if args and args[0] in ("cc", "link"):
        own = argv is None  # the command's own process (not a call from Python)
        if own:  # the cycles a link or compile leaves go with the process
            gc.disable()
        if args[0] == "cc":
            from .cc_cmd import cmd_cc as fn  # the warm path's imports, and no others
        else:
            from .link_cmd import cmd_link as fn
        code = guard(lambda: fn(args[1:]))
        if own:  # what is left is freed by the interpreter's end, not scanned for cycles
            gc.freeze()
        raise SystemExit(code)
    if args in (["--version"], ["-V"]):
        print(version_text())
        raise SystemExit(0)
    raise SystemExit(_typer_main(args))


def _asks_version(words: list[str], valued: set[str]) -> bool:
    """`offlink inspect -V`: -V and --version answer in every command, as -h does (not as
    the value of a `valued` option: a file may be called -V)."""
    for i, word in enumerate(words):
        if word == "--":
            return False
        if word in ("-V", "--version") and (i == 0 or words[i - 1] not in valued):
            return True
    return False


def _typer_main(args: list[str]) -> int:
    """inspect, extract, config: typer parses, but a usage error is one line like any other
    error (click would draw a box, or print usage lines around it)."""
    import typer

    from .app import app

    try:  # typer 0.29 carries its own click
        from typer._click import exceptions as click
    except ImportError:  # pragma: no cover - typer with click as a dependency
        from click import exceptions as click  # type: ignore[no-redef]

    command = typer.main.get_command(app)
    valued = {name for sub in getattr(command, "commands", {}).values() for p in sub.params
              if p.param_type_name == "option" and not p.is_flag and not p.count
              for name in (*p.opts, *p.secondary_opts)}
    if len(args) > 1 and _asks_version(args[1:], valued):
        print(version_text())
        return 0
    try:
        code = command(args=args, prog_name="offlink", standalone_mode=False)
    except click.NoArgsIsHelpError as e:  # `offlink` alone: the help, status 2
        print(e.ctx.get_help() if e.ctx else "", file=sys.stderr)
        return 2
    except click.UsageError as e:
        name = e.ctx.command_path if e.ctx is not None else "offlink"
        print(f"offlink: error: {e.format_message()} (see {name} -h)", file=sys.stderr)
        return 2
    except click.ClickException as e:
        print(f"offlink: error: {e.format_message()}", file=sys.stderr)
        return e.exit_code or 1
    except typer.Abort:
        print("offlink: interrupted", file=sys.stderr)
        return 130
    return code if isinstance(code, int) else 0
