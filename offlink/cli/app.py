"""The typer commands of `offlink` other than cc and link (inspect, extract, config, --version).

Imported only for these commands (typer and rich are large).
No `from __future__ import annotations` here: typer reads the annotations at run time.
"""

import json as jsonlib
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import UsageError
from .options import CC, LINK
from .report import guard, version_text

# Plain help (click's layout, as `offlink cc --help` and `offlink link --help` print it) and
# plain errors: usage errors become one `offlink: error:` line in cli.main.
app = typer.Typer(name="offlink", add_completion=False, no_args_is_help=True,
                  rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Link offload code: per-CU target builds, per-target images and a "
                       "name-keyed table in the host binary.")

def version_cb(value: bool) -> None:
    if value:
        print(version_text())
        raise typer.Exit()

@app.callback()
def _main(version: Annotated[Optional[bool], typer.Option(
        "--version", "-V", callback=version_cb, is_eager=True, help="Show the version and the "
        "table core in use.")] = None) -> None:
    """offlink: link offload code."""

# cc and link read their own options (options.py); here they are listed, with their summary.
@app.command(help=f"{CC.summary} (offlink cc --help).",
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def cc() -> None:
    pass

@app.command(help=f"{LINK.summary} (offlink link --help).",
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def link() -> None:
    pass

def schema_cb(value: bool) -> None:
    """`offlink inspect --schema`: the published schema (inspect.schema.json), no BINARY."""
    if value:
        print((Path(__file__).parent / "inspect.schema.json").read_text(), end="")
        raise typer.Exit()

@app.command(epilog="Rows: size is a variable's bytes; a function's row stores 1 (an entry "
                     "point, not an extent), shown as '-'. Addresses are st_value, as nm "
                     "prints them. GCC's rows are spelled as in the PTX (run_a$_omp_fn$0); "
                     "--symbol and --name also take the host's spelling (run_a._omp_fn.0), "
                     "shown beside the row as 'host: ...'.")
def inspect(binary: Annotated[str, typer.Argument(metavar="BINARY",
                                                  help="linked binary, object or archive")],
            json: Annotated[bool, typer.Option("--json", help="JSON output (its schema: "
                                               "--schema)")] = False,
            name: Annotated[Optional[str], typer.Option(
                "--name", metavar="GLOB",
                help="only rows (or offered names) matching this shell pattern, e.g. "
                     "'saxpy*'; tried on the row name, the host's spelling and the "
                     "demangled name")] = None,
            kind: Annotated[Optional[list[str]], typer.Option(
                "--kind", metavar="KIND",
                help="only rows of this kind: function, variable, indirect-function, "
                     "link-variable (a unique prefix will do; repeatable or comma-separated)")
            ] = None,
            cu: Annotated[Optional[str], typer.Option(
                "--cu", metavar="GLOB",
                help="only rows offered by a CU matching this shell pattern, e.g. "
                     "'*libops.a(*': an object path or archive(member) as the link line "
                     "named it")] = None,
            symbol: Annotated[Optional[str], typer.Option(
                "--symbol", metavar="NAME",
                help="explain what the table says about this name (the row's name, the "
                     "host's spelling or a demangled C++ name)")] = None,
            address: Annotated[Optional[str], typer.Option(
                "--address", metavar="ADDRESS",
                help="explain which row holds this address: st_value as nm prints it, a "
                     "run-time address with --load-base, BASE+OFFSET, or +OFFSET as a "
                     "backtrace prints it (prog(+0x1234)); hex, 0x optional. Exit status 1 "
                     "when it (or --symbol's name) has no row")] = None,
            load_base: Annotated[Optional[str], typer.Option(
                "--load-base", metavar="BASE",
                help="where the binary is loaded, for a run-time --address: the start of its "
                     "first mapping in /proc/PID/maps (555555554000, or the range "
                     "555555554000-555555575000; hex, 0x optional; gdb: info proc mappings)")
            ] = None,
            explain_host: Annotated[bool, typer.Option(
                "--explain", help="say why target regions would run on the host, each reason "
                "with its fix: no registration, no image, the runtime, plugin or driver "
                "missing, OMP_TARGET_OFFLOAD (what the file and this machine tell)")] = False,
            schema: Annotated[Optional[bool], typer.Option(
                "--schema", callback=schema_cb, is_eager=True,
                help="print the JSON schema of --json's output and exit")] = None,
            ) -> None:
    """Show a binary's offload table, or the target code of a fat object or archive."""
    from .inspect_cmd import explain, inspect_file, parse_address, parse_kinds, render_text

    def go() -> int:
        if load_base is not None and address is None:
            raise UsageError("--load-base goes with --address")
        if symbol is not None or address is not None:
            addr, base = (parse_address(address, load_base) if address is not None
                          else (None, None))
            text, offered = explain(binary, symbol, addr, base)
            print(text)
            return 0 if offered else 1  # as grep: not in the table is not an error line
        if explain_host:
            from .explain import findings

            found = findings(binary, inspect_file(binary))
            for finding, evidence, fix in found:
                print(f"{finding}\n  evidence: {evidence}\n  fix: {fix}")
            if not found:
                print("nothing in the file or on this machine says that target regions would "
                      "run on the host")
            return 0
        info = inspect_file(binary, name, parse_kinds(kind) if kind else None, cu)
        if json:
            print(jsonlib.dumps(info, indent=2))
        else:
            print(render_text(info))
        return 0

    raise typer.Exit(guard(go))

@app.command()
def extract(binaries: Annotated[list[str], typer.Argument(
                metavar="FILE", help="linked binary, fat object (offlink cc's, or a "
                "toolchain's own offload object) or archive of them")],
            target: Annotated[Optional[list[str]], typer.Option(
                "--target", metavar="T", help="target name, 'host' or 'cuda' (repeatable)")
            ] = None,
            triple: Annotated[Optional[list[str]], typer.Option(
                "--triple", metavar="TRIPLE", help="only images for this triple (repeatable)")
            ] = None,
            arch: Annotated[Optional[list[str]], typer.Option(
                "--arch", metavar="ARCH", help="only images for this architecture, e.g. "
                "sm_80 (repeatable)")] = None,
            every: Annotated[bool, typer.Option("--all", help="every image")] = False,
            output: Annotated[Optional[str], typer.Option(
                "--output", "-o", metavar="FILE|DIR/|-",
                help="the file for one image, a folder (ending in /) for several, - for "
                "stdout [default: the current folder]")] = None) -> None:
    """Write target images out: one file each, named FILE-MEMBER-TARGET-ARCH.EXT in a folder."""
    from .extract_cmd import Selection, extract

    def go() -> int:
        sel = Selection(tuple(target or ()), tuple(triple or ()), tuple(arch or ()), every)
        written = extract(binaries, sel, output)
        if output is None or output.endswith(("/", os.sep)):
            print("\n".join(written))
        return 0

    raise typer.Exit(guard(go))

def own_command() -> str:
    """This offlink's command as an absolute path: the script that started it, else the one
    its Python's installation put beside that Python (`python -m offlink`)."""
    started = sys.argv[0]
    if os.path.basename(started) == "offlink":
        found = started if os.sep in started else shutil.which(started)
        if found and os.access(found, os.X_OK):
            return os.path.abspath(found)
    beside = os.path.join(os.path.dirname(sys.executable), "offlink")
    if os.access(beside, os.X_OK):
        return beside
    raise UsageError("no offlink command to name: this offlink runs as `python -m offlink` "
                     "without an installed `offlink` script (pip install . makes one)")

@app.command()
def config(cflags: Annotated[bool, typer.Option("--cflags", help="compiler flags")] = False,
           libs: Annotated[bool, typer.Option("--libs", help="linker flags")] = False,
           pkgconfig_dir: Annotated[bool, typer.Option(
               "--pkgconfig-dir", help="the folder of offlink.pc, for PKG_CONFIG_PATH")] = False,
           cmake_dir: Annotated[bool, typer.Option(
               "--cmake-dir", help="the folder of offlinkConfig.cmake, for offlink_DIR or "
               "CMAKE_PREFIX_PATH")] = False,
           meson_native: Annotated[Optional[str], typer.Option(
               "--meson-native", metavar="COMPILER", help="print a Meson native file with "
               "`offlink cc COMPILER` as the C compiler (and the C++ one beside it)")] = None,
           command: Annotated[bool, typer.Option(
               "--command", help="the absolute path of this offlink command, for a build "
               "that runs it without the virtual environment on PATH "
               "(CMAKE_C_LINKER_LAUNCHER=\"$(offlink config --command);link\")")] = False
           ) -> None:
    """Flags to build a program against the offlink runtime (offlink.h, libofflink)."""

    def go() -> int:
        from ..runtime import build

        if command:
            if cflags or libs or pkgconfig_dir or cmake_dir or meson_native is not None:
                raise UsageError("--command goes alone")
            print(own_command())
            return 0

        if meson_native is not None:
            if cflags or libs or pkgconfig_dir or cmake_dir:
                raise UsageError("--meson-native goes alone")
            from .meson_native import native_file

            sys.stdout.write(native_file(meson_native))
            return 0
        if pkgconfig_dir or cmake_dir:
            if cflags or libs or (pkgconfig_dir and cmake_dir):
                raise UsageError("--pkgconfig-dir and --cmake-dir each go alone")
            print(build.pkgconfig_dir() if pkgconfig_dir else build.cmake_dir())
            return 0
        words: list[str] = []
        if cflags or not libs:
            words += build.cflags()
        if libs:
            words += build.libs()
        print(" ".join(shlex.quote(w) for w in words))
        return 0

    raise typer.Exit(guard(go))



