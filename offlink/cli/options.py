"""The options of `offlink cc` and `offlink link`, declared once: their parser and their help.

Both commands read their own options (long forms only, before the compiler or linker word)
and pass every later word through untouched: click would mangle the compiler's words (with a
`-h` help alias `-shared` prints help; with a `-o` option `-Wl,--gc-sections` becomes
`-o ns`; `--` is swallowed). So the table below, not typer, declares them; `parse` reads a
command line by it and `help_text` prints it (tests/test_cli.py ties the two together).
"""

from __future__ import annotations

import os
import sys
from collections import namedtuple

from ..errors import UsageError
from .report import version_text


class Option(namedtuple("Option", "names metavar repeatable help")):
    """One option: its spellings (`names`), its value's name in the help (`metavar`, "" for a
    flag), whether it may be given again (`repeatable`: its values are kept in order), and
    its help (lines as printed)."""

    __slots__ = ()

    @property
    def name(self) -> str:
        """The long spelling: the key of its values in `parse`'s answer."""
        return self.names[-1]


# A command: its usage after `offlink CMD [OPTIONS] `, its one-line summary (`offlink --help`),
# its help's paragraph (lines as printed) and its options.
Command = namedtuple("Command", "usage summary description options")


VERBOSE = Option(("--verbose",), "", False, "print each command")
TRACEBACK = Option(("--traceback",), "", False,
                   "show a traceback on errors (also OFFLINK_TRACEBACK=1)")
VERSION = Option(("-V", "--version"), "", False, "show the version and the table core in use")
HELP = Option(("-h", "--help"), "", False, "show this message")

CC = Command(
    "COMPILER ARGS...", "Compile one CU into a fat object",
    """\
Compile one CU into a fat object: the host object exactly as COMPILER makes it, plus one
gnu.target_lto_<target> section per target with this CU's target code. Every word from
COMPILER on is passed through untouched; a command that is not a compile to objects
(-E, -S, a link) is run as it is, a link through `offlink link`. A compile that carries
the toolchain's own offload code (-foffload=, -fopenacc, -fopenmp-targets=,
--offload-arch=) is the compiler's alone, untouched, unless --offload-target is given.""",
    (Option(("--offload-target",), "T", True,
            "target to build for (repeatable; default: host, or $OFFLINK_TARGETS)"),
     Option(("--offload-symbol",), "S", True, """\
offer only these symbols (repeatable; default: every external
function and variable the CU defines for host and target)"""),
     VERBOSE, TRACEBACK, VERSION, HELP))

LINK = Command(
    "LINKER ARGS...", "Link with target code",
    """\
Link host program and target code: compile each CU's target code (in parallel), link one
image per target, and embed them with the name-keyed table in section .openmp_target.
Every word from LINKER on is passed through untouched. Without target code in the inputs
it is the plain link, byte for byte.""",
    (Option(("--offload-target",), "T", True,
            "link only these targets (repeatable; default: all in the inputs)"),
     Option(("--jobs",), "N", False, """\
parallel target compiles (default: $OFFLINK_JOBS or the CPU count;
inside make -jN, make's jobserver decides)"""),
     Option(("--no-cache",), "", False, """\
compile every CU and link every image anew (also OFFLINK_NO_CACHE=1;
the cache is in $OFFLINK_CACHE_DIR/objects, at most $OFFLINK_CACHE_SIZE)"""),
     Option(("--target-launcher",), "C", False, """\
command prefix for target compiles, e.g. ccache, sccache, distcc
(also OFFLINK_TARGET_LAUNCHER)"""),
     Option(("--offload-symbol",), "S", True, """\
offer only the functions and variables named S, a name or a glob
pattern (e.g. 'lua_*'; repeatable; default: every one the CUs offer);
host and CUDA images keep only what they reach. A name no CU
offers is an error, a pattern matching nothing is not"""),
     Option(("--offload-symbol-list",), "FILE", True,
            "--offload-symbol for each line of FILE (# starts a comment)"),
     Option(("--offload-option",), "O", True, """\
options for GCC's accel compiler, as -foffload-options=O (GCC's
syntax, e.g. nvptx-none=-misa=sm_90; repeatable)"""),
     Option(("--gomp-register",), "", False, """\
register GCC's offload images with libgomp, as GCC's own link does: the
default, so this matters where OFFLINK_GOMP_REGISTER=0 leaves the
registration out (the option wins over it; -foffload=disable turns GCC's
offloading off)"""),
     Option(("--save-temps",), "", False, "keep intermediate files and print where"),
     Option(("--dry-run",), "", False, "print the commands instead of running them"),
     Option(("--timings",), "", False, """\
print how long each stage took and what came from the cache
(also OFFLINK_TIMINGS=1)"""),
     Option(("--time-trace",), "FILE", False, """\
write a Chrome trace (chrome://tracing, Perfetto) of the stages
and of each CU's target compile to FILE"""),
     Option(("--verify-deep",), "", False, """\
also check the output with lief, a second ELF reader (slower;
also OFFLINK_VERIFY=deep)"""),
     Option(("--relocatable-as-toolchain",), "", False, """\
with -r, link clang 21+ CUs' device code into the object now,
as clang's own -r does (its entries then private to the object:
no later CU can call its declare target functions); by default
every CU is kept for the final link"""),
     VERBOSE, TRACEBACK, VERSION, HELP))

COMMANDS = {"cc": CC, "link": LINK}

# offlink's long options that gcc and clang also accept (`--verbose` is `-v`): after the
# compiler word they are the compiler's, and meant so.
DRIVER_LONG_OPTIONS = {"--verbose", "--help", "--version", "--save-temps"}
HELP_COLUMN = 23  # where an option's help starts


def help_text(command: str) -> str:
    """`offlink COMMAND --help`."""
    spec = COMMANDS[command]
    out = [f"Usage: offlink {command} [OPTIONS] {spec.usage}", ""]
    out += [f"  {line}" for line in spec.description.splitlines()]
    out += ["", "Options:"]
    for option in spec.options:
        label = "  " + ", ".join(option.names) + (f" {option.metavar}" if option.metavar else "")
        first, *more = option.help.splitlines()
        if len(label) <= HELP_COLUMN - 2:
            out.append(label.ljust(HELP_COLUMN) + first)
        else:
            out += [label, " " * HELP_COLUMN + first]
        out += [" " * HELP_COLUMN + line for line in more]
    return "\n".join(out) + "\n"


def parse(argv: list[str], command: str) -> tuple[dict[str, list[str] | bool], list[str]]:
    """A command's options before the first word that is not one of them, and the rest: a
    flag's value True, a valued option's the list of its values in order (`--x V`, `--x=V`).
    -h and -V answer and exit here; `--` ends the options; any other `--word` without a
    slash is an error (a path may start with --)."""
    options = {name: option for option in COMMANDS[command].options for name in option.names}
    opts: dict[str, list[str] | bool] = {}
    i = 0
    while i < len(argv):
        word = argv[i]
        name, eq, value = word.partition("=")
        option = options.get(name if eq else word)
        if option is HELP and not eq:
            print(help_text(command), end="")
            raise SystemExit(0)
        if option is VERSION and not eq:
            print(version_text())
            raise SystemExit(0)
        if option is not None and option.metavar:
            if not eq:
                if i + 1 >= len(argv):
                    raise UsageError(f"option {name} needs a value")
                i += 1
                value = argv[i]
            opts.setdefault(option.name, []).append(value)  # type: ignore[union-attr]
        elif option is not None and not eq:
            opts[option.name] = True
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


def warn_misplaced(rest: list[str], *commands: str) -> None:
    """One warning, before any work, for words after the compiler that look like offlink's
    own options of these commands (`offlink link gcc a.o -o app --timings`): they go to the
    compiler or linker, which would refuse them only after every target compile ran."""
    own = {option.name for command in commands for option in COMMANDS[command].options
           if option.name.startswith("--")} - DRIVER_LONG_OPTIONS
    misplaced = [w for w in rest[1:] if w.partition("=")[0] in own]
    if misplaced:
        listed = ", ".join(dict.fromkeys(misplaced))
        print(f"offlink: warning: {listed} after the compiler word '{rest[0]}' goes to "
              f"{os.path.basename(rest[0])}, not to offlink; offlink's options come before "
              f"the compiler word", file=sys.stderr, flush=True)


def set_common(opts: dict[str, list[str] | bool]) -> None:
    """--verbose and --traceback, for a cc or link past the warm path."""
    from .. import run  # the tools' runner: not the warm path's

    if opts.get("--verbose"):
        run.set_verbose(True)
    if opts.get("--traceback"):
        os.environ["OFFLINK_TRACEBACK"] = "1"
