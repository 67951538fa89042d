"""The command line's conventions: -h and -V everywhere, one help style, one-line usage errors,
options after the linker word, response files, target compiler warnings, dry runs and traces."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import run

COMMANDS = ["cc", "link", "inspect", "extract", "config"]


def offlink_run(offlink: str, *args: str, cwd=None) -> subprocess.CompletedProcess:
    return run([offlink, *args], cwd=cwd, check=False)


@pytest.mark.parametrize("flag", ["-h", "--help"])
@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_in_one_plain_style_everywhere(offlink, command, flag):
    proc = offlink_run(offlink, *([command] if command else []), flag)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith(f"Usage: offlink {command + ' ' if command else ''}"), out
    assert "\nOptions:\n" in out
    assert "-h, --help" in out  # every help names its short form
    for box in "╭│╰─":
        assert box not in out
    assert "<bool>" not in out


@pytest.mark.parametrize("command", [None, *COMMANDS])
@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_everywhere(offlink, command, flag):
    proc = offlink_run(offlink, *([command] if command else []), flag)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("offlink ") and "table core" in proc.stdout


def test_short_options_only_before_the_compiler_word(offlink, tmp_path):
    """-h after the compiler word is the compiler's: gcc's -h (a linker option) is passed on."""
    proc = offlink_run(offlink, "cc", "gcc", "--version", cwd=tmp_path)
    assert proc.returncode == 0 and "gcc" in proc.stdout
    proc = offlink_run(offlink, "cc", "gcc", "-V", cwd=tmp_path)
    assert proc.returncode != 0 and "Usage: offlink" not in proc.stdout  # gcc's own refusal


@pytest.mark.parametrize("args", [["inspect", "--bogus", "x"], ["inspect"], ["extract", "x"],
                                  ["nosuch"], ["config", "--bogus"], ["inspect", "--address"],
                                  ["link", "--bogus", "gcc"], ["cc", "--jobs", "2", "gcc"]])
def test_usage_errors_are_one_line(offlink, args):
    proc = offlink_run(offlink, *args)
    assert proc.returncode == 2 if args[0] not in ("cc", "link") else proc.returncode != 0
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("offlink: error: "), proc.stderr
    assert proc.stdout == ""


FAT = "int twice(int x) { return 2 * x; }\nint main(void) { return twice(0); }\n"


def test_offlink_option_after_the_linker_word_is_warned_before_the_compiles(offlink, tmp_path):
    (tmp_path / "a.c").write_text(FAT)
    run([offlink, "cc", "gcc", "-c", "a.c", "-o", "a.o"], cwd=tmp_path)
    proc = run([offlink, "link", "--verbose", "gcc", "a.o", "-o", "app", "--timings",
                "--no-cache"], cwd=tmp_path, check=False)
    assert proc.returncode != 0  # gcc refuses them, after the target compiles
    lines = proc.stderr.splitlines()
    warning = [i for i, line in enumerate(lines) if line.startswith("offlink: warning:")]
    assert len(warning) == 1, proc.stderr
    assert "--timings, --no-cache" in lines[warning[0]] and "'gcc'" in lines[warning[0]]
    compiles = [i for i, line in enumerate(lines) if "0000-a.c" in line]
    assert compiles and warning[0] < compiles[0], proc.stderr  # up front
    assert not (tmp_path / "app").exists()


def test_driver_options_offlink_shares_are_not_warned(offlink, tmp_path):
    (tmp_path / "a.c").write_text(FAT)
    proc = run([offlink, "cc", "gcc", "-c", "a.c", "-o", "a.o", "--verbose"], cwd=tmp_path)
    assert "offlink: warning" not in proc.stderr
    proc = run([offlink, "cc", "gcc", "-c", "a.c", "-o", "b.o", "--dry-run"], cwd=tmp_path,
               check=False)
    assert "offlink: warning: --dry-run after the compiler word 'gcc'" in proc.stderr


def _data(obj: Path) -> str:
    return run(["objdump", "-s", "-j", ".data", obj]).stdout.split("Contents", 1)[1]


def test_response_files_mean_what_they_mean_to_gcc(offlink, tmp_path):
    """gcc reads `'1\\2'` in a response file as `12` (libiberty: a backslash quotes inside
    quotes too); a shell-style reading gave the host compile `-DV=1\\2`, a syntax error."""
    (tmp_path / "v.c").write_text("int v = V;\nint get(void) { return v; }\n")
    (tmp_path / "opts.rsp").write_text("-DV='1\\2' -O1\n")
    run(["gcc", "-c", "@opts.rsp", "v.c", "-o", "plain.o"], cwd=tmp_path)
    proc = run([offlink, "cc", "--verbose", "gcc", "-c", "@opts.rsp",
                "v.c", "-o", "fat.o"], cwd=tmp_path)
    assert _data(tmp_path / "fat.o") == _data(tmp_path / "plain.o")  # v = 12
    host = [line for line in proc.stderr.splitlines() if " -o " in line and "@opts.rsp" in line]
    assert host, proc.stderr  # the host compile got the response file as written


def test_link_passes_a_response_file_on_as_written_and_expands_one_holding_the_output(
        offlink, tmp_path):
    (tmp_path / "a.c").write_text(FAT)
    run([offlink, "cc", "gcc", "-c", "a.c", "-o", "a.o"], cwd=tmp_path)
    (tmp_path / "rpath.rsp").write_text("-Wl,-rpath,'/opt/x\\y'\n")
    (tmp_path / "out.rsp").write_text("a.o -o app\n")
    run(["gcc", "a.o", "@rpath.rsp", "-o", "plain"], cwd=tmp_path)
    proc = run([offlink, "link", "--verbose", "--no-cache", "gcc", "@out.rsp", "@rpath.rsp"],
               cwd=tmp_path)
    host = [line for line in proc.stderr.splitlines() if "offlink-table.o" in line]
    assert len(host) == 1 and "@rpath.rsp" in host[0] and "@out.rsp" not in host[0], host

    def runpath(name):
        dyn = run(["readelf", "-d", tmp_path / name]).stdout
        return [line.split("[")[1] for line in dyn.splitlines() if "RUNPATH" in line]

    assert runpath("app") == runpath("plain") == ["/opt/xy]"]
    assert run([tmp_path / "app"], check=False).returncode == 0


WARNS = """#ifdef __OFFLINK_TARGET__
#warning only the target side says this
static int unused_on_target(void) { return 1; }
#endif
#warning both sides say this
int twice(int x) { return 2 * x; }
int main(void) { return twice(0); }
"""


@pytest.mark.parametrize("when", ["cc", "link"])
def test_target_compiler_warnings_are_shown_once_per_cu(offlink, tmp_path, when):
    """The target compile runs in offlink cc (filling the link cache) or, with
    OFFLINK_CC_TARGET_COMPILE=0, in the link: either way its warnings are shown once."""
    import os

    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache"),
           "OFFLINK_CC_TARGET_COMPILE": "1" if when == "cc" else "0"}
    (tmp_path / "w.c").write_text(WARNS)
    cc = run([offlink, "cc", "gcc", "-Wall", "-c", "w.c", "-o", "w.o"], cwd=tmp_path, env=env)
    assert cc.stderr.count("both sides say this") == 2, cc.stderr  # the host's: line, source
    assert cc.stderr.count("warning: #warning only the target side says this") == 1, cc.stderr
    link = run([offlink, "link", "gcc", "w.o", "-o", "app"], cwd=tmp_path, env=env)
    said, quiet = (cc.stderr, link.stderr) if when == "cc" else (link.stderr, cc.stderr)
    assert said.count("unused_on_target") == 2, said  # its line, its source
    assert said.count("defined but not used") == 1, said
    assert "w.c:" in said  # named after the user's source, not a temporary file
    assert "unused_on_target" not in quiet
    again = run([offlink, "link", "gcc", "w.o", "-o", "app2"], cwd=tmp_path, env=env)
    assert "unused_on_target" not in again.stderr  # from the cache: said once already
    assert run([tmp_path / "app"], check=False).returncode == 0


def test_compile_and_link_shows_a_warning_both_sides_give_once(offlink, tmp_path):
    """`offlink cc gcc a.c b.c -o app` compiles the hosts, then links in the same process, where
    the target compiles run: a compiler warning the host compile gave (not a preprocessor one)
    is not shown again by the target compile, one only the target compile gives is shown."""
    both = "int less(unsigned u, int i) { return u < i; }\n"
    (tmp_path / "a.c").write_text(WARNS)
    (tmp_path / "b.c").write_text(both)
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
    proc = run([offlink, "cc", "gcc", "-Wall", "-Wextra", "a.c", "b.c", "-o", "app"],
               cwd=tmp_path, env=env)
    said = proc.stderr
    assert said.count("b.c:1:40: warning: comparison of integer expressions") == 1, said
    assert proc.stderr.count("defined but not used") == 1, proc.stderr  # the target's own
    assert run([tmp_path / "app"], check=False).returncode == 0


def test_time_trace_has_the_stages_and_each_cu(offlink, tmp_path):
    import json

    for name in ("a", "b"):
        (tmp_path / f"{name}.c").write_text(f"int f_{name}(int x) {{ return x + 1; }}\n")
    (tmp_path / "m.c").write_text("int f_a(int);\nint main(void) { return f_a(-1); }\n")
    for name in ("a", "b", "m"):
        run([offlink, "cc", "gcc", "-c", f"{name}.c", "-o", f"{name}.o"], cwd=tmp_path)
    run([offlink, "link", "--no-cache", "--time-trace", "trace.json", "gcc", "a.o", "b.o",
         "m.o", "-o", "app"], cwd=tmp_path)
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    stages = [e["name"] for e in spans if e["cat"] == "stage"]
    assert stages[:2] == ["plan", "extract"] and "host" in stages and stages[-1] == "verify"
    compiles = sorted(e["name"] for e in spans if e["cat"] == "compile")
    assert compiles == ["compile a.c", "compile b.c", "compile m.c"]
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
    assert [p.name for p in tmp_path.iterdir() if ".offlink-" in p.name] == []


def _on_a_terminal(argv, cwd, env) -> tuple[int, str]:
    """Run with stderr on a pseudo-terminal (the progress display shows only there)."""
    import pty
    import threading

    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the other side closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read)
    reader.start()
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    reader.join(30)
    os.close(master)
    return proc.returncode, b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("makeflags", ["", " -j4"])
def test_progress_names_the_output_and_never_redraws_under_parallel_make(offlink, tmp_path,
                                                                       makeflags):
    (tmp_path / "a.c").write_text(FAT)
    run([offlink, "cc", "gcc", "-c", "a.c", "-o", "a.o"], cwd=tmp_path)
    env = {**os.environ, "TERM": "xterm", "MAKEFLAGS": makeflags, "OFFLINK_PROGRESS": "1"}
    code, shown = _on_a_terminal([offlink, "link", "--no-cache", "gcc", "a.o", "-o", "myapp"],
                                 tmp_path, env)
    assert code == 0, shown
    assert "myapp: compiling" in shown, shown
    if makeflags:  # sibling jobs share the terminal: plain lines only, no cursor movement
        assert "\x1b[" not in shown and "\r" not in shown.replace("\r\n", "\n"), repr(shown)
        line = "offlink: myapp: compiling 1 of 1 CUs for x86_64-pc-linux-gnu"
        assert shown.count(line) == 1, shown


def test_dry_run_prints_the_commands_of_a_real_run_with_their_file_names(offlink, tmp_path):
    (tmp_path / "a.c").write_text(FAT)
    run([offlink, "cc", "gcc", "-c", "a.c", "-o", "a.o"], cwd=tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    dry = run([offlink, "link", "--dry-run", "gcc", "a.o", "-o", "app"], cwd=tmp_path,
              env=env).stdout.splitlines()
    assert str(tmp) not in "\n".join(dry)  # no folder that only existed during the dry run
    assert dry[-1].startswith("gcc a.o ") and dry[-1].endswith(" -o app")
    real = run([offlink, "link", "--save-temps", "--verbose", "--no-cache", "gcc", "a.o", "-o",
                "app"], cwd=tmp_path, env=env).stderr
    kept = real.split("temporary files kept in ")[1].split()[0]
    ran = [line[len("offlink: "):].replace(kept, '"$OFFLINK_WORK"')
           for line in real.splitlines() if line.startswith("offlink: ") and kept in line]
    assert dry[0] in ran and dry[1] in ran, (dry, ran)  # the target compile and image link
    # and the shell can run them as printed, given the folder
    work = tmp_path / "work" / "x86_64-pc-linux-gnu"
    work.mkdir(parents=True)
    (work / "0000-a.c.i").write_text(FAT)
    proc = subprocess.run(["sh", "-c", dry[0]], cwd=tmp_path, capture_output=True, text=True,
                          env={**env, "OFFLINK_WORK": str(tmp_path / "work")})
    assert proc.returncode == 0 and (work / "0000-a.c.o").is_file(), proc.stderr


@pytest.mark.parametrize("command", ["cc", "link"])
def test_command_process_runs_without_the_cycle_collector(command, monkeypatch):
    """`offlink link` and `offlink cc` as a process turn the cyclic collector off (a relink
    of 1000 CUs ran it ~80 times); a call of main() from Python leaves it as it was."""
    import gc
    import sys

    from offlink.cli import main

    assert gc.isenabled()
    try:
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert gc.isenabled()
        monkeypatch.setattr(sys, "argv", ["offlink", command, "--help"])
        with pytest.raises(SystemExit):
            main()
        assert not gc.isenabled()
    finally:
        gc.enable()


SIG_TOOL = '#!/bin/sh\ngrep SigIgn /proc/$$/status >> {log}\nexec {tool} "$@"\n'


def _ignored(log: Path) -> list[int]:
    return [int(line.split()[1], 16) for line in log.read_text().splitlines()]


def test_tools_run_as_they_are_get_sigpipe_and_sigxfsz_at_their_defaults(offlink, tmp_path):
    """Python ignores SIGPIPE and SIGXFSZ and an ignored signal stays ignored across exec:
    what `offlink cc` runs as it is (exec: `-E`, a link without sources' target code) and the
    plain link of `offlink link` (no target code) get them back, as without offlink
    (`offlink cc gcc -E big.c | head` must end gcc, not make it write into a closed pipe)."""
    import shutil
    import signal

    log = tmp_path / "sigign"
    for name, tool in (("cc-sig", "gcc"), ("ld-sig", "gcc")):
        script = tmp_path / name
        script.write_text(SIG_TOOL.format(log=log, tool=shutil.which(tool)))
        script.chmod(0o755)
    (tmp_path / "a.c").write_text("int main(void) { return 0; }\n")
    run([offlink, "cc", tmp_path / "cc-sig", "-E", "a.c", "-o", "a.i"], cwd=tmp_path)
    run(["gcc", "-c", "a.c", "-o", "a.o"], cwd=tmp_path)  # no target code: a plain link
    run([offlink, "link", tmp_path / "ld-sig", "a.o", "-o", "app"], cwd=tmp_path)
    assert (tmp_path / "a.i").exists() and run([tmp_path / "app"]).returncode == 0
    masks = _ignored(log)
    assert len(masks) == 2
    for mask in masks:
        assert not mask & (1 << (signal.SIGPIPE - 1)), hex(mask)
        assert not mask & (1 << (signal.SIGXFSZ - 1)), hex(mask)


def test_cc_that_cannot_exec_its_compiler_says_so(offlink, tmp_path):
    proc = offlink_run(offlink, "cc", str(tmp_path / "no-such-cc"), "-E", "a.c", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr == f"offlink: error: compiler '{tmp_path / 'no-such-cc'}': No such " \
                          f"file or directory\n"


def test_which_finds_tools_as_shutil_does(tmp_path, monkeypatch):
    """run.which (every cc that compiles target code asks, and it no longer imports shutil)
    answers as shutil.which: PATH in order, executable files only, never a folder."""
    import shutil

    from offlink.run import which

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "tool").mkdir()  # a folder of that name: not the tool
    (tmp_path / "a" / "plain").write_text("not executable")
    for name in ("tool", "plain"):
        (tmp_path / "b" / name).write_text("#!/bin/sh\n")
        (tmp_path / "b" / name).chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / "a"), "", str(tmp_path / "a"),
                                                str(tmp_path / "b"), "/usr/bin"]))
    monkeypatch.chdir(tmp_path)
    for name in ("tool", "plain", "gcc", "no-such-tool", "b/tool", str(tmp_path / "b/tool")):
        assert which(name) == shutil.which(name), name
    assert which("tool") == str(tmp_path / "b" / "tool")


@pytest.mark.parametrize("command", ["cc", "link"])
def test_cc_and_link_parse_and_list_exactly_their_declared_options(command, capsys):
    """cc's and link's options are declared once (cli/options.py): the parser takes each one
    in every spelling, and the help lists exactly them."""
    from offlink.cli.options import COMMANDS, HELP, VERSION, help_text, parse
    from offlink.errors import UsageError

    declared = COMMANDS[command].options
    for option in declared:
        for name in option.names:
            if option in (HELP, VERSION):
                with pytest.raises(SystemExit) as done:
                    parse([name, "gcc"], command)
                assert done.value.code == 0
                out = capsys.readouterr().out
                assert out == help_text(command) if option is HELP else "table core" in out
            elif option.metavar:
                for words in ([name, "v1", name + "=v2"], [name + "=v1", name, "v2"]):
                    opts, rest = parse([*words, "gcc", name, "x"], command)
                    assert opts == {option.name: ["v1", "v2"]} and rest == ["gcc", name, "x"]
                with pytest.raises(UsageError):
                    parse([name], command)
            else:
                assert parse([name, "gcc", "-shared"], command) == (
                    {option.name: True}, ["gcc", "-shared"])
                with pytest.raises(UsageError):
                    parse([name + "=1", "gcc"], command)
    with pytest.raises(UsageError):
        parse(["--no-such-option", "gcc"], command)
    assert parse(["--", "--verbose", "gcc"], command) == ({}, ["--verbose", "gcc"])
    lines = help_text(command).split("\nOptions:\n")[1].splitlines()
    listed = [line.split()[0].rstrip(",") for line in lines if line.startswith("  -")]
    listed += [line.split()[1] for line in lines if line.startswith("  -V, ")
               or line.startswith("  -h, ")]
    assert sorted(listed) == sorted(name for option in declared for name in option.names)
