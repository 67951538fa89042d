"""`offlink link`: its options, read by options.py's table, into LinkOptions; then the link."""

from __future__ import annotations

from ..errors import ToolError, UsageError
from ..link.pipeline import LinkOptions, link
from ..link.plan import check_driver
from ..run import which
from ..toolchains import LINK_OPTIONS
from .options import parse, set_common, warn_misplaced


def cmd_link(argv: list[str]) -> int:
    opts, rest = parse(argv, "link")
    warn_misplaced(rest, "link")
    set_common(opts)
    jobs_opt = opts.get("--jobs") or ["0"]
    try:
        jobs = int(jobs_opt[-1])  # type: ignore[index]
    except ValueError:
        raise UsageError(f"--jobs takes a number, not '{jobs_opt[-1]}'") from None
    options = LinkOptions(targets=list(opts.get("--offload-target") or []), jobs=jobs,
                          save_temps=bool(opts.get("--save-temps")),
                          dry_run=bool(opts.get("--dry-run")),
                          timings=bool(opts.get("--timings")),
                          cache=not opts.get("--no-cache"),
                          deep_verify=bool(opts.get("--verify-deep")),
                          relocatable_as_toolchain=bool(opts.get("--relocatable-as-toolchain")),
                          toolchain_options={o: True for o in LINK_OPTIONS if opts.get(o)},
                          offload_options=list(opts.get("--offload-option") or []),
                          offload_symbols=list(opts.get("--offload-symbol") or []),
                          offload_symbol_lists=list(opts.get("--offload-symbol-list") or []),
                          launcher=_words((opts.get("--target-launcher") or [""])[-1]),
                          time_trace=(opts.get("--time-trace") or [""])[-1])  # type: ignore[index]
    if rest and not options.dry_run and which(rest[0]) is None:
        check_driver(rest[0], "link")  # a forgotten compiler word is named as such first
        raise not_installed(rest[0])
    return link(rest, options)


def not_installed(compiler: str) -> ToolError:
    """The one answer, before any work, for a link whose compiler is not installed (not
    `gcc-99 -dumpversion: ... not found`, exit 1, from the first step that ran it): the
    shell's status for a command not found."""
    where = "" if "/" in compiler else " on PATH"
    return ToolError(f"compiler '{compiler}' is not installed (not found{where})", 127)


def _words(command: str) -> list[str]:
    """--target-launcher's command as a shell splits it (shlex, with the re it imports, only
    where one is given: not every link's import)."""
    if not command.strip():
        return []
    import shlex

    return shlex.split(command)
