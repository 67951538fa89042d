"""The `offlink` command.

`cc` and `link` read their own options (long forms only, before the compiler word) and pass
every later word through untouched: click would mangle clustered short options such as
`-shared` or `-Wl,...` (with a `-h` help alias `-shared` prints help; with a `-o` option
`-Wl,--gc-sections` becomes `-o ns`; `--` is swallowed). They also stay free of typer/rich
imports, so a plain link through offlink costs little more than the link itself. The other
commands use typer.
"""

from __future__ import annotations

import os
import sys

from ..errors import OfflinkError, UsageError
from .report import guard, version_text

CC_HELP = """\
Usage: offlink cc [OPTIONS] COMPILER ARGS...

  Compile one CU into a fat object: the host object exactly as COMPILER makes it, plus one
  gnu.target_lto_<target> section per target with this CU's target code. Every word from
  COMPILER on is passed through untouched; a command that is not a compile to objects
  (-E, -S, a link) is run as it is, a link through `offlink link`. A compile that carries
  the toolchain's own offload code (-foffload=, -fopenacc, -fopenmp-targets=,
  --offload-arch=) is the compiler's alone, untouched, unless --offload-target is given.

Options:
  --offload-target T   target to build for (repeatable; default: host, or $OFFLINK_TARGETS)
  --offload-symbol S   offer only these symbols (repeatable; default: every external
                       function and variable the CU defines for host and target)
  --verbose            print each command
  --traceback          show a traceback on errors (also OFFLINK_TRACEBACK=1)
  -V, --version        show the version and the table core in use
  -h, --help           show this message
"""

LINK_HELP = """\
Usage: offlink link [OPTIONS] LINKER ARGS...

  Link host program and target code: compile each CU's target code (in parallel), link one
  image per target, and embed them with the name-keyed table in section .openmp_target.
  Every word from LINKER on is passed through untouched. Without target code in the inputs
  it is the plain link, byte for byte.

Options:
  --offload-target T   link only these targets (repeatable; default: all in the inputs)
  --jobs N             parallel target compiles (default: $OFFLINK_JOBS or the CPU count;
                       inside make -jN, make's jobserver decides)
  --no-cache           compile every CU and link every image anew (also OFFLINK_NO_CACHE=1;
                       the cache is in $OFFLINK_CACHE_DIR/objects, at most $OFFLINK_CACHE_SIZE)
  --target-launcher C  command prefix for target compiles, e.g. ccache, sccache, distcc
                       (also OFFLINK_TARGET_LAUNCHER)
  --offload-symbol S   offer only the functions and variables named S, a name or a glob
                       pattern (e.g. 'lua_*'; repeatable; default: every one the CUs offer);
                       host and CUDA images keep only what they reach. A name no CU
                       offers is an error, a pattern matching nothing is not
  --offload-symbol-list FILE
                       --offload-symbol for each line of FILE (# starts a comment)
  --offload-option O   options for GCC's accel compiler, as -foffload-options=O (GCC's
                       syntax, e.g. nvptx-none=-misa=sm_90; repeatable)
  --gomp-register      accepted, changes nothing: GCC's offload images are registered with
                       libgomp by default, as GCC's own link does (OFFLINK_GOMP_REGISTER=0
                       leaves it out; -foffload=disable turns GCC's offloading off)
  --save-temps         keep intermediate files and print where
  --dry-run            print the commands instead of running them
  --timings            print how long each stage took and what came from the cache
                       (also OFFLINK_TIMINGS=1)
  --time-trace FILE    write a Chrome trace (chrome://tracing, Perfetto) of the stages
                       and of each CU's target compile to FILE
  --verify-deep        also check the output with lief, a second ELF reader (slower;
                       also OFFLINK_VERIFY=deep)
  --verbose            print each command
  --traceback          show a traceback on errors (also OFFLINK_TRACEBACK=1)
  -V, --version        show the version and the table core in use
  -h, --help           show this message
"""


def _own_options(argv: list[str], flags: set[str], valued: set[str], help_text: str):
    """Options before the first word that is not one of ours; returns (options, rest)."""
    opts: dict[str, list[str] | bool] = {}
    i = 0
    while i < len(argv):
        word = argv[i]
        name, eq, value = word.partition("=")
        if word in ("-h", "--help"):
            print(help_text, end="")
            raise SystemExit(0)
        if word in ("-V", "--version"):
            print(version_text())
            raise SystemExit(0)
        if name in valued:
            if not eq:
                if i + 1 >= len(argv):
                    raise UsageError(f"option {name} needs a value")
                i += 1
                value = argv[i]
            opts.setdefault(name, []).append(value)  # type: ignore[union-attr]
        elif word in flags:
            opts[word] = True
        elif word == "--":
            i += 1
            break
        elif word.startswith("--") and os.path.sep not in word:
            raise UsageError(f"unknown option {word} (see -h); options come before the "
                             f"compiler or linker word")
        else:
            break
        i += 1
    return opts, argv[i:]


# offlink's long options that gcc and clang also accept (`--verbose` is `-v`): after the
# compiler word they are the compiler's, and meant so.
DRIVER_LONG_OPTIONS = {"--verbose", "--help", "--version", "--save-temps"}


def _warn_misplaced(rest: list[str], flags: set[str], valued: set[str]) -> None:
    """One warning, before any work, for words after the compiler that look like offlink's
    own options (`offlink link gcc a.o -o app --timings`): they go to the compiler or
    linker, which would refuse them only after every target compile ran."""
    own = (flags | valued) - DRIVER_LONG_OPTIONS
    misplaced = [w for w in rest[1:] if w.partition("=")[0] in own]
    if misplaced:
        listed = ", ".join(dict.fromkeys(misplaced))
        print(f"offlink: warning: {listed} after the compiler word '{rest[0]}' goes to "
              f"{os.path.basename(rest[0])}, not to offlink; offlink's options come before "
              f"the compiler word", file=sys.stderr, flush=True)


def _set_common(opts) -> None:
    from .. import run

    if opts.get("--verbose"):
        run.set_verbose(True)
    if opts.get("--traceback"):
        os.environ["OFFLINK_TRACEBACK"] = "1"


def cmd_cc(argv: list[str]) -> int:
    flags, valued = {"--verbose", "--traceback"}, {"--offload-target", "--offload-symbol"}
    opts, rest = _own_options(argv, flags, valued, CC_HELP)
    _warn_misplaced(rest, flags | LINK_FLAGS, valued | LINK_VALUED)
    _set_common(opts)
    given = list(opts.get("--offload-target") or [])  # type: ignore[arg-type]
    offered = tuple(opts.get("--offload-symbol") or ())  # type: ignore[arg-type]
    if not given and rest[1:]:
        from ..cc.toolchain_offload import offload_word

        if offload_word(rest[1:]) is not None:  # GCC's or clang's own offload code
            return _toolchain_offload(rest)
    if "-c" in rest:  # (a response file's -c: no recipe)
        from ..cc.fatcache import close, warm
        from ..digest import without_openssl

        without_openssl()  # a compile hashes little: loading OpenSSL would cost more (~3 ms)

        started = warm(rest, given, offered)  # served from the object cache, unplanned
        if started is not None and started.hit:
            return 0
    else:
        started = None
    from ..cc.plan import plan_compile, run_compile
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
    from ..driver_args import expand_response_files, is_clang, words

    ws = words(expand_response_files(rest[1:]), clang=is_clang(rest[0]))
    if {"-c", "-E", "-S", "-M", "-MM", "-fsyntax-only", "--version", "-v", "-dumpversion",
            "-dumpmachine", "--help"} & {w.option for w in ws} or not ws:
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
    from ..driver_args import expand_response_files, is_clang, words

    ws = [] if "-c" in argv else words(expand_response_files(argv[1:]), clang=is_clang(argv[0]))
    opts = {w.option for w in ws}
    if "-c" in argv or opts & {"-c", "-E", "-S", "-M", "-MM", "-fsyntax-only", "--version", "-v",
                               "-dumpversion", "-dumpmachine", "--help"} or not ws:
        from ..run import exec_tool

        try:
            exec_tool(argv)
        except OSError as e:
            raise OfflinkError(f"compiler '{argv[0]}': {e.strerror}") from None
    from ..cc.plan import plan_compile_and_link
    from ..link.pipeline import LinkOptions, link
    from ..link.staging import WorkFolder

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
    from ..cc.plan import plan_compile, plan_compile_and_link, run_compile
    from ..link.pipeline import LinkOptions, link
    from ..link.staging import WorkFolder

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


LINK_FLAGS = {"--verbose", "--traceback", "--save-temps", "--dry-run", "--timings",
              "--no-cache", "--verify-deep", "--gomp-register"}
LINK_VALUED = {"--offload-target", "--jobs", "--target-launcher", "--offload-option",
               "--time-trace", "--offload-symbol", "--offload-symbol-list"}


def cmd_link(argv: list[str]) -> int:
    opts, rest = _own_options(argv, LINK_FLAGS, LINK_VALUED, LINK_HELP)
    _warn_misplaced(rest, LINK_FLAGS, LINK_VALUED)
    _set_common(opts)
    jobs_opt = opts.get("--jobs") or ["0"]
    try:
        jobs = int(jobs_opt[-1])  # type: ignore[index]
    except ValueError:
        raise UsageError(f"--jobs takes a number, not '{jobs_opt[-1]}'") from None
    from ..link.pipeline import LinkOptions, link
    from ..toolchains import LINK_OPTIONS

    options = LinkOptions(targets=list(opts.get("--offload-target") or []), jobs=jobs,
                          save_temps=bool(opts.get("--save-temps")),
                          dry_run=bool(opts.get("--dry-run")),
                          timings=bool(opts.get("--timings")),
                          cache=not opts.get("--no-cache"),
                          deep_verify=bool(opts.get("--verify-deep")),
                          toolchain_options={o: True for o in LINK_OPTIONS if opts.get(o)},
                          offload_options=list(opts.get("--offload-option") or []),
                          offload_symbols=list(opts.get("--offload-symbol") or []),
                          offload_symbol_lists=list(opts.get("--offload-symbol-list") or []),
                          time_trace=(opts.get("--time-trace") or [""])[-1])  # type: ignore[index]
    if opts.get("--target-launcher"):
        import shlex

        options.launcher = shlex.split(opts["--target-launcher"][-1])  # type: ignore[index]
    return link(rest, options)


def _one_line_warnings() -> None:
    """Library warnings reach a command-line user as one `offlink: warning:` line each."""
    import warnings

    warnings.formatwarning = lambda message, *_args, **_kw: f"offlink: warning: {message}\n"


def _without_cycle_collector() -> None:
    """Turn Python's cyclic garbage collector off for the rest of the process. A relink of
    1000 CUs ran it ~80 times over the thousands of objects it keeps (5-10 ms CPU, issue 11);
    the cycles a link or compile leaves are a few dozen objects (30 after a 40-CU link that
    compiled every CU, 30 after that relink), which go with the process."""
    import gc

    gc.disable()


def _end_link(code: int) -> None:
    """End a link's own process now, with its status, where nothing is left to do: its
    output is in place, its work folder gone, its cache written and every thread it started
    joined (the link's `finally`). The interpreter's teardown of the modules a link imports
    (~5 ms) is skipped; a thread still running (the libLTO worker's reader) lets it run, and
    so does a function registered with atexit (coverage, a profiler, a test's hook: theirs run
    at the usual end)."""
    import atexit

    if len(sys._current_frames()) != 1 or getattr(atexit, "_ncallbacks", lambda: 1)() != 0:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe: nothing more can be said there
    os._exit(code & 0xFF)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    _one_line_warnings()
    if args and args[0] in ("cc", "link"):
        if argv is None:  # the command's own process (not a call from Python)
            _without_cycle_collector()
        fn = cmd_cc if args[0] == "cc" else cmd_link
        code = guard(lambda: fn(args[1:]))
        if argv is None and args[0] == "link":
            _end_link(code)
        raise SystemExit(code)
    if args in (["--version"], ["-V"]) or (len(args) > 1 and _asks_version(args[1:])):
        print(version_text())
        raise SystemExit(0)
    raise SystemExit(_typer_main(args))


# Options of inspect and extract whose value is the next word (a file may be called -V).
_VALUED = {"--symbol", "--address", "--load-base", "--name", "--kind", "--target",
           "--output", "-o", "--triple", "--arch"}


def _asks_version(words: list[str]) -> bool:
    """`offlink inspect -V`: -V and --version answer in every command, as -h does."""
    for i, word in enumerate(words):
        if word == "--":
            return False
        if word in ("-V", "--version") and (i == 0 or words[i - 1] not in _VALUED):
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

    try:
        code = app(args=args, prog_name="offlink", standalone_mode=False)
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
