"""`offlink cc`: its options, the warm path (cc/warm.py) first, then the plan and the compile.

The warm path is the one start-up-bound path of offlink: this module imports what it needs and
no more (tests/test_cc_cache.py's import budget); each other way of a cc command imports its
own modules where it starts (a GCC or clang offload compile is exec'd untouched, importing
nothing of the plan or the link; benchmarks/cc_build/RESULTS.md, issue 31, says what the
plan's and the tools' runner's imports would cost the warm hit).
"""

from __future__ import annotations

import os

from .. import settings
from ..cc.toolchain_offload import offload_word
from ..cc.warm import close, warm
from ..driver_args import expand_response_files, is_clang, words
from ..errors import OfflinkError
from ..link.staging import WorkFolder
from .options import parse, set_common, warn_misplaced

# A command with one of these options makes no link: the compiler's to run as it is.
NOT_A_LINK = {"-c", "-E", "-S", "-M", "-MM", "-fsyntax-only", "--version", "-v", "-dumpversion",
              "-dumpmachine", "--help"}


def cmd_cc(argv: list[str]) -> int:
    opts, rest = parse(argv, "cc")
    warn_misplaced(rest, "cc", "link")  # a cc command may be a link
    given = list(opts.get("--offload-target") or [])  # type: ignore[arg-type]
    offered = tuple(opts.get("--offload-symbol") or ())  # type: ignore[arg-type]
    if not given and rest[1:] and offload_word(rest[1:]) is not None:
        set_common(opts)  # GCC's or clang's own offload code
        return _toolchain_offload(rest)
    started = None
    if "-c" in rest:  # (a response file's -c: no recipe)
        if opts.get("--traceback"):
            os.environ["OFFLINK_TRACEBACK"] = "1"
        verbose = bool(opts.get("--verbose")) or settings.flag("OFFLINK_VERBOSE")
        started = warm(rest, given, offered, verbose)  # served from the object cache, unplanned
        if started is not None and started.hit:
            return 0
    set_common(opts)
    from ..cc.compile import run_compile
    from ..cc.plan import plan_compile
    from ..toolchains import default_targets

    targets = given or default_targets()
    try:
        plan = plan_compile(rest, targets, offered, asked=bool(given))
    except BaseException:
        if started is not None:
            close(started)
        raise
    if plan is not None:
        return run_compile(plan, started=started, recipe=(rest, given, offered))
    if started is not None:
        close(started)
    ws = words(expand_response_files(rest[1:]), clang=is_clang(rest[0]))
    if NOT_A_LINK & {w.option for w in ws} or not ws:
        from ..run import exec_tool

        try:
            exec_tool(rest)
        except OSError as e:
            raise OfflinkError(f"compiler '{rest[0]}': {e.strerror}") from None
    return _compile_and_link(rest, targets, tuple(opts.get("--offload-symbol") or ()),
                             list(opts.get("--offload-target") or []))


def _toolchain_offload(argv: list[str]) -> int:
    """A command that carries GCC's or clang's own offload code (toolchain_offload.py) and no
    --offload-target: a compile is the compiler's alone (exec'd: nothing said, nothing added,
    no import), a link of objects is `offlink link`'s, and a compile-and-link compiles each
    source as the compiler does before `offlink link` links the objects."""
    ws = [] if "-c" in argv else words(expand_response_files(argv[1:]), clang=is_clang(argv[0]))
    opts = {w.option for w in ws}
    if "-c" in argv or opts & NOT_A_LINK or not ws:
        from ..run import exec_tool

        try:
            exec_tool(argv)
        except OSError as e:
            raise OfflinkError(f"compiler '{argv[0]}': {e.strerror}") from None
    from ..cc.plan import plan_compile_and_link
    from ..link.pipeline import LinkOptions, link

    if plan_compile_and_link(argv, "") is None:  # objects and libraries only: a link
        return link(argv, LinkOptions())
    from ..run import run_here

    work = WorkFolder(keep=False, kind="cc")
    try:
        onestep = plan_compile_and_link(argv, work.path)
        assert onestep is not None
        for compile_argv in onestep.compiles:
            run_here(compile_argv, "compile")
        return link(onestep.link, LinkOptions(origin_names=onestep.sources))
    finally:
        work.close()


def _compile_and_link(argv: list[str], targets: list[str], offered: tuple[str, ...],
                      link_targets: list[str]) -> int:
    """`offlink cc gcc a.c b.c -o app`: each source compiled to a fat object (so the link
    has their target code, never a silent host-only binary), then `offlink link`."""
    from ..cc.compile import run_compile
    from ..cc.plan import plan_compile, plan_compile_and_link
    from ..link.pipeline import LinkOptions, link

    if plan_compile_and_link(argv, "") is None:  # objects and libraries only: a link
        return link(argv, LinkOptions(targets=link_targets))
    work = WorkFolder(keep=False, kind="cc")  # the objects: gone after the link, swept if killed
    host_said: dict[str, str] = {}  # by source: the link leaves these lines out of its warnings
    try:
        onestep = plan_compile_and_link(argv, work.path)
        assert onestep is not None
        for compile_argv in onestep.compiles:
            plan = plan_compile(compile_argv, targets, offered)
            assert plan is not None
            run_compile(plan, target_compile=False, host_said_by_source=host_said)
        # the link compiles the targets, in parallel
        # The objects are temporary: the table's origins name their sources (deterministic).
        return link(onestep.link, LinkOptions(targets=link_targets, host_said=host_said,
                                              origin_names=onestep.sources))
    finally:
        work.close()
