"""Bad input: one line `offlink: error: ...`, a non-zero exit, the previous output untouched,
no temporary files left behind."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run

GOOD = "int twice(int x) { return 2 * x; }\nint main(void) { return twice(0); }\n"


class Workspace:
    def __init__(self, offlink: str, root: Path):
        self.offlink = offlink
        self.root = root
        self.tmp = root / "tmpdir"
        self.tmp.mkdir()
        self.env = {**os.environ, "TMPDIR": str(self.tmp)}

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text)
        return path

    def cc(self, *args: str, check: bool = True):
        return run([self.offlink, "cc", *args], cwd=self.root, env=self.env, check=check)

    def link(self, *args: str):
        return run([self.offlink, "link", *args], cwd=self.root, env=self.env, check=False)

    def fails(self, proc, *fragments: str) -> str:
        assert proc.returncode != 0, proc.stdout + proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("offlink: error: "), proc.stderr
        for fragment in fragments:
            assert fragment in last, last
        assert "Traceback" not in proc.stderr
        return last

    def clean(self, output: Path) -> None:
        """The previous output is as it was and nothing temporary is left."""
        assert output.read_text() == "previous output"
        assert list(self.tmp.iterdir()) == []
        litter = [p.name for p in output.parent.iterdir() if p.name.startswith(".")]
        assert litter == [], litter


@pytest.fixture
def ws(offlink, tmp_path) -> Workspace:
    w = Workspace(offlink, tmp_path)
    (tmp_path / "prog").write_text("previous output")
    return w


def test_not_an_elf_file(ws):
    ws.write("bogus.o", "this is text\n")
    ws.fails(ws.link("gcc", "bogus.o", "-o", "prog"), "bogus.o: not an ELF object file")
    ws.clean(ws.root / "prog")
    proc = run([ws.offlink, "inspect", ws.root / "bogus.o"], check=False)
    ws.fails(proc, "bogus.o: not an ELF file")


def test_truncated_object(ws):
    ws.write("a.c", GOOD)
    ws.cc("gcc", "-c", "a.c", "-o", "a.o")
    data = (ws.root / "a.o").read_bytes()
    (ws.root / "a.o").write_bytes(data[: len(data) // 2])
    ws.fails(ws.link("gcc", "a.o", "-o", "prog"), "a.o", "truncated")
    ws.clean(ws.root / "prog")


def test_corrupt_payload(ws):
    ws.write("a.c", GOOD)
    ws.cc("gcc", "-c", "a.c", "-o", "a.o")
    sections = run(["readelf", "-S", "-W", ws.root / "a.o"]).stdout
    line = next(ln for ln in sections.splitlines() if "gnu.target_lto_" in ln)
    offset = int(line.split("PROGBITS")[1].split()[1], 16)
    data = bytearray((ws.root / "a.o").read_bytes())
    data[offset + 40] ^= 0xFF
    (ws.root / "a.o").write_bytes(data)
    ws.fails(ws.link("gcc", "a.o", "-o", "prog"), "a.o", "corrupt payload")
    ws.clean(ws.root / "prog")


def test_unknown_target(ws):
    ws.write("a.c", GOOD)
    proc = ws.cc("--offload-target", "vax-dec-vms", "gcc", "-c", "a.c", "-o", "a.o", check=False)
    ws.fails(proc, "unknown offload target 'vax-dec-vms'")
    assert not (ws.root / "a.o").exists()
    ws.cc("gcc", "-c", "a.c", "-o", "a.o")
    ws.fails(ws.link("--offload-target", "vax-dec-vms", "gcc", "a.o", "-o", "prog"),
             "unknown offload target 'vax-dec-vms'")
    ws.clean(ws.root / "prog")


def test_missing_target_compiler(ws):
    ws.write("a.c", GOOD)
    gcc = ws.root / "my-gcc"
    gcc.write_text(f'#!/bin/sh\nexec {shutil.which("gcc")} "$@"\n')
    gcc.chmod(0o755)
    ws.cc(str(gcc), "-c", "a.c", "-o", "a.o")
    gcc.unlink()
    ws.fails(ws.link("gcc", "a.o", "-o", "prog"), "target compiler", "my-gcc", "not found",
             "a.c")
    ws.clean(ws.root / "prog")


def test_target_compile_error_shows_the_compiler_message_and_the_cu(ws):
    ws.write("a.c", GOOD + "#ifdef __OFFLINK_TARGET__\nint broken = not_declared;\n#endif\n")
    ws.cc("gcc", "-c", "a.c", "-o", "a.o")
    proc = ws.link("gcc", "a.o", "-o", "prog")
    ws.fails(proc, "target compile of a.c (a.o)", "x86_64-pc-linux-gnu")
    assert "not_declared" in proc.stderr and "a.c:4" in proc.stderr
    ws.clean(ws.root / "prog")


def test_same_name_offered_by_two_cus(ws):
    helper = "#ifdef __OFFLINK_TARGET__\nint helper(void) { return 1; }\n#endif\n"
    ws.write("a.c", GOOD + helper)
    ws.write("b.c", "int other(void) { return 2; }\n" + helper)
    ws.cc("gcc", "-c", "a.c", "-o", "a.o")
    ws.cc("gcc", "-c", "b.c", "-o", "b.o")
    ws.fails(ws.link("gcc", "a.o", "b.o", "-o", "prog"),
             "'helper' is offered by two CUs: a.c (a.o) and b.c (b.o)")
    ws.clean(ws.root / "prog")


def test_name_offered_on_one_side_only(ws):
    ws.write("a.c", GOOD + "#ifndef __OFFLINK_TARGET__\nint host_only(void) { return 3; }\n"
             "#endif\nstatic int hidden_counter;\nint *counter_ptr = &hidden_counter;\n")
    ws.cc("--offload-symbol", "twice", "--offload-symbol", "host_only", "gcc", "-c", "a.c",
          "-o", "a.o")
    ws.fails(ws.link("gcc", "a.o", "-o", "prog"),
             "a.c (a.o): offered symbol 'host_only' is not defined in its target code")
    ws.clean(ws.root / "prog")
    ws.cc("--offload-symbol", "hidden_counter", "gcc", "-c", "a.c", "-o", "a.o")
    ws.fails(ws.link("gcc", "a.o", "-o", "prog"), "'hidden_counter' is static")
    ws.clean(ws.root / "prog")


def test_static_link_is_refused_clearly(ws):
    ws.write("a.c", GOOD)
    ws.cc("gcc", "-c", "a.c", "-o", "a.o")
    ws.fails(ws.link("gcc", "-static", "a.o", "-o", "prog"),
             "-static: target x86_64-pc-linux-gnu: its image is a shared object loaded with "
             "dlopen")
    ws.clean(ws.root / "prog")


def test_failing_host_link_keeps_its_status(ws):
    ws.write("a.c", "int twice(int);\nint main(void) {\n#ifdef __OFFLINK_TARGET__\n"
             "  return 0;  /* the image links; only the host link fails */\n#else\n"
             "  return twice(1);\n#endif\n}\n")
    ws.cc("gcc", "-c", "a.c", "-o", "a.o")
    ws.write("b.c", "int unrelated(void) { return 0; }\n")
    ws.cc("gcc", "-c", "b.c", "-o", "b.o")
    linker = ws.write("gcc-status-7", f'#!/bin/sh\n{shutil.which("gcc")} "$@" || exit 7\n')
    linker.chmod(0o755)  # a linker whose own failure status is not offlink's usual 1
    proc = ws.link(str(linker), "a.o", "b.o", "-o", "prog")
    last = ws.fails(proc)
    assert proc.returncode == 7, proc.stderr  # the status the linker failed with
    assert "undefined reference to `twice'" in proc.stderr
    assert "a.c" in last or "host link" in last or "device link" in last
    ws.clean(ws.root / "prog")


def test_unknown_offlink_option(ws):
    ws.fails(ws.link("--frobnicate", "gcc", "a.o"), "unknown option --frobnicate")


def test_output_folder_missing(ws):
    ws.write("a.c", GOOD)
    ws.fails(ws.cc("gcc", "-c", "a.c", "-o", "nodir/a.o", check=False), "nodir/a.o")
    ws.cc("gcc", "-c", "a.c", "-o", "a.o")
    ws.fails(ws.link("gcc", "a.o", "-o", "nodir/prog"), "cannot write nodir/prog")
    ws.clean(ws.root / "prog")


def test_input_named_as_the_output_is_refused_before_any_work(ws):
    ws.write("main.c", "int io(void);\nint main(void) { return io(); }\n")
    ws.write("io.c", "int io(void) { return 0; }\n")
    ws.cc("gcc", "-c", "main.c", "-o", "main.o")
    ws.cc("gcc", "-c", "io.c", "-o", "io.o")
    io = (ws.root / "io.o").read_bytes()
    (ws.root / "alias.o").symlink_to("io.o")
    for args in (["-o", "io.o"], ["-oio.o"], ["-Wl,-o,io.o"], ["-Xlinker", "--output=io.o"],
                 ["-o", str(ws.root / "alias.o")]):
        ws.fails(ws.link("gcc", "main.o", "io.o", *args),
                        "input file 'io.o' is the same as output file")
        assert (ws.root / "io.o").read_bytes() == io, args
    ws.fails(ws.link("gcc", "main.o", "alias.o", "-o", "io.o"),
             "input file 'alias.o' is the same as output file 'io.o'")
    # Objects without target code take the plain link's way: refused there too.
    run(["gcc", "-c", "io.c", "-o", "plain.o"], cwd=ws.root)
    plain = (ws.root / "plain.o").read_bytes()
    ws.fails(ws.link("gcc", "main.o", "plain.o", "-Wl,--output=plain.o"), "same as output")
    assert (ws.root / "plain.o").read_bytes() == plain
    # offlink cc writes a staged file, so the compiler's own check never sees the source.
    (ws.root / "copy.c").write_text("int copy;\n")
    ws.fails(ws.cc("gcc", "-c", "copy.c", "-o", "copy.c", check=False), "same as output")
    assert (ws.root / "copy.c").read_text() == "int copy;\n"
    assert list(ws.tmp.iterdir()) == []


def test_output_that_is_a_directory_is_one_clear_line(ws):
    ws.write("a.c", GOOD)
    (ws.root / "out").mkdir()
    ws.fails(ws.cc("gcc", "-c", "a.c", "-o", "out", check=False),
             "cannot write out: it is a directory")
    ws.cc("gcc", "-c", "a.c", "-o", "a.o")
    run(["gcc", "-c", "a.c", "-o", "plain.o"], cwd=ws.root)
    for obj in ("a.o", "plain.o"):
        ws.fails(ws.link("gcc", obj, "-o", "out"), "cannot write out: it is a directory")
    assert list((ws.root / "out").iterdir()) == []
    ws.clean(ws.root / "prog")


def test_inspect_into_a_closed_pipe_ends_quietly(ws):
    ws.write("a.c", GOOD)
    ws.cc("gcc", "-c", "a.c", "-o", "a.o")
    assert ws.link("gcc", "a.o", "-o", "app").returncode == 0
    import subprocess

    for args in (["app"], ["--json", "app"], ["a.o"]):
        read, write = os.pipe()
        os.close(read)  # `| head -1` that has already gone
        try:
            proc = subprocess.run([ws.offlink, "inspect", *args], cwd=ws.root, stdout=write,
                                  stderr=subprocess.PIPE, text=True)
        finally:
            os.close(write)
        assert proc.stderr == "", proc.stderr
        assert proc.returncode == 141, proc.returncode  # as a tool ended by SIGPIPE
    proc = subprocess.run(f"{ws.offlink} inspect app | head -1", cwd=ws.root, shell=True,
                          capture_output=True, text=True)
    assert proc.stdout.startswith("app: ") and proc.stderr == "", proc.stderr


def test_failing_plain_link_ends_with_one_offlink_line(ws):
    ws.write("u.c", "int missing(void);\nint main(void) { return missing(); }\n")
    run(["gcc", "-c", "u.c", "-o", "u.o"], cwd=ws.root)
    plain = run(["gcc", "u.o", "-o", "prog"], cwd=ws.root, check=False)
    proc = ws.link("gcc", "u.o", "-o", "prog")
    last = ws.fails(proc, "link failed (exit status 1): gcc u.o -o prog")
    assert proc.returncode == plain.returncode == 1
    # The linker's own message comes first, as the plain link prints it.
    assert proc.stderr == plain.stderr + last + "\n"
    assert list(ws.tmp.iterdir()) == []


def test_forgotten_compiler_word_is_named(ws):
    ws.write("a.c", GOOD)
    ws.cc("gcc", "-c", "a.c", "-o", "a.o")
    ws.fails(ws.link("a.o", "-o", "prog"),
             "the first word after `offlink link`", "must be the compiler driver (gcc, g++, "
             "clang", "not 'a.o'")
    ws.fails(ws.cc("a.c", "-c", "-o", "b.o", check=False),
             "the first word after `offlink cc`", "not 'a.c'")
    assert not (ws.root / "b.o").exists()
    ws.clean(ws.root / "prog")


def test_link_killed_during_the_host_link_leaves_nothing_after_the_next_link(ws):
    """SIGKILL cannot be cleaned up after: the killed link leaves no file beside the output,
    and the next link sweeps away the work folder it left in TMPDIR."""
    import signal
    import subprocess

    ws.write("a.c", GOOD)
    ws.cc("gcc", "-c", "a.c", "-o", "a.o")
    killer = ws.root / "killing-gcc"
    # The host link (the one with offlink's placeholder): link, then SIGKILL offlink.
    killer.write_text(f'#!/bin/sh\n{shutil.which("gcc")} "$@" || exit 1\n'
                      'case "$*" in *offlink-table.o*) kill -KILL $PPID;; esac\n')
    killer.chmod(0o755)
    proc = subprocess.run([ws.offlink, "link", str(killer), "a.o", "-o", "prog"], cwd=ws.root,
                          env=ws.env, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert (ws.root / "prog").read_text() == "previous output"
    litter = [p.name for p in ws.root.iterdir() if p.name.startswith(".")]
    assert litter == [], litter
    assert [p.name for p in ws.tmp.iterdir()][0].startswith("offlink-link-")
    # A link of another output in the same TMPDIR sweeps the dead link's work folder.
    assert ws.link("gcc", "a.o", "-o", "other").returncode == 0
    ws.clean(ws.root / "prog")
    assert run([ws.root / "other"]).returncode == 0


def test_link_terminated_during_the_host_link_stops_the_linker_and_cleans_up(ws):
    """SIGTERM while the host link runs (run.run_here waits for it): the linker is killed and
    reaped, offlink says `interrupted` with status 128+15, the previous output stays, and no
    work folder or file beside the output is left."""
    import signal
    import subprocess
    import time

    ws.write("a.c", GOOD)
    ws.cc("gcc", "-c", "a.c", "-o", "a.o")
    pid_file = ws.root / "linker.pid"
    slow = ws.root / "slow-gcc"
    # The host link (the one with offlink's placeholder) says its pid, then waits.
    slow.write_text(f'#!/bin/sh\ncase "$*" in *offlink-table.o*) echo $$ > {pid_file}; '
                    f'exec sleep 60;; esac\nexec {shutil.which("gcc")} "$@"\n')
    slow.chmod(0o755)
    proc = subprocess.Popen([ws.offlink, "link", str(slow), "a.o", "-o", "prog"], cwd=ws.root,
                            env=ws.env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
        time.sleep(0.05)
    linker = int(pid_file.read_text())
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "offlink: interrupted" in err
    with pytest.raises(ProcessLookupError):
        os.kill(linker, 0)  # killed, and reaped by offlink
    assert (ws.root / "prog").read_text() == "previous output"
    litter = [p.name for p in ws.root.iterdir() if p.name.startswith(".")]
    assert litter == [], litter
    assert list(ws.tmp.iterdir()) == []


def test_cc_killed_during_the_host_compile_leaves_nothing_after_the_next_one(ws):
    import signal
    import subprocess

    ws.write("a.c", GOOD)
    (ws.root / "a.o").write_text("previous output")
    killer = ws.root / "killing-gcc"
    # The host compile (not the -E capture of the target code): compile, then SIGKILL offlink.
    killer.write_text(f'#!/bin/sh\n{shutil.which("gcc")} "$@" || exit 1\n'
                      'case " $* " in *" -E "*) ;; *) kill -KILL $PPID;; esac\n')
    killer.chmod(0o755)
    proc = subprocess.run([ws.offlink, "cc", str(killer), "-c", "a.c", "-o", "a.o"],
                          cwd=ws.root, env=ws.env, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert (ws.root / "a.o").read_text() == "previous output"
    litter = [p.name for p in ws.root.iterdir() if p.name.startswith(".")]
    assert litter == [], litter
    ws.cc("gcc", "-c", "a.c", "-o", "b.o")
    assert list(ws.tmp.iterdir()) == []
    assert "gnu.target_lto_" in run(["readelf", "-S", "-W", ws.root / "b.o"]).stdout


def test_failing_host_compile_says_the_compiler_message_once_and_keeps_its_status(ws):
    ws.write("a.c", "int f(void) { return undeclared; }\n")
    (ws.root / "a.o").write_text("previous output")
    proc = ws.cc("gcc", "-c", "a.c", "-o", "a.o", check=False)
    assert proc.returncode == 1
    assert proc.stderr.count("undeclared (first use in this function)") == 1, proc.stderr
    assert proc.stderr.splitlines()[-1] == \
        "offlink: error: host compile failed (exit status 1): gcc -c a.c -o a.o"
    assert (ws.root / "a.o").read_text() == "previous output"
    assert list(ws.tmp.iterdir()) == []


def test_extract_to_a_directory_is_one_line(ws):
    ws.write("a.c", GOOD)
    ws.cc("gcc", "-c", "a.c", "-o", "a.o")
    assert ws.link("gcc", "a.o", "-o", "app").returncode == 0
    (ws.root / "out").mkdir()
    proc = run([ws.offlink, "extract", "app", "--target", "host", "--output", "out"],
               cwd=ws.root, env=ws.env, check=False)
    last = ws.fails(proc, "out: Is a directory")
    assert "internal error" not in last
    assert list((ws.root / "out").iterdir()) == []
    litter = [p.name for p in ws.root.iterdir() if p.name.startswith(".")]
    assert litter == [], litter


def test_a_tool_run_for_its_output_says_what_it_printed_and_how_it_ended(tmp_path):
    """run.run with the output captured (through run.Captured, as the image link of a cold
    clang link): its output and diagnostics together, its exit status
    in one ToolError naming what it was, a missing tool named, a tool killed by a signal
    said as such, and a tool still running when offlink is interrupted killed and waited
    for."""
    import signal
    import time

    from offlink import run as runner
    from offlink.errors import ToolError

    done = runner.run(["sh", "-c", "echo out; echo err >&2"], "saying")
    assert done.returncode == 0 and done.stdout == b"out\nerr\n"
    with pytest.raises(ToolError) as failed:
        runner.run(["sh", "-c", "echo why >&2; exit 3"], "failing")
    assert failed.value.exit_code == 3 and "failing failed (exit status 3)" in str(failed.value)
    assert failed.value.output == "why\n"
    with pytest.raises(ToolError, match="'no-such-tool-here' not found"):
        runner.run(["no-such-tool-here"], "missing")
    with pytest.raises(ToolError) as killed:
        runner.run(["sh", "-c", "kill -9 $$"], "killed")
    assert killed.value.exit_code == 128 + 9 and "exit status -9" in str(killed.value)

    pid_file = tmp_path / "pid"

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(KeyboardInterrupt):
            runner.run(["sh", "-c", f"echo $$ > {pid_file}; exec sleep 30"], "sleeping")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    pid = int(pid_file.read_text())
    time.sleep(0.1)
    with pytest.raises(ProcessLookupError):  # killed, and waited for (no zombie left)
        os.kill(pid, 0)


def test_a_link_ends_with_its_status_and_its_atexit_functions_run(ws):
    """A link's own process ends with its status and its output written, and a function
    registered with atexit (coverage, a profiler, a test's hook) runs at its end."""
    import sys

    ws.write("a.c", GOOD)
    ws.cc("gcc", "-c", "a.c", "-o", "a.o")
    hook = ws.root / "hook"
    script = f"""import atexit, sys
if sys.argv[1] == "hook":
    atexit.register(lambda: open({str(hook)!r}, "w").write("ran"))
sys.argv = ["offlink", *sys.argv[2:]]
from offlink.cli import main
main()
"""
    for how, status in (("plain", 0), ("hook", 0), ("hook", 1)):
        for path in (hook, ws.root / "prog"):
            path.unlink(missing_ok=True)
        inputs = ["a.o"] if status == 0 else ["a.o", "-lno-such-library"]
        proc = subprocess.run([sys.executable, "-c", script, how, "link", "gcc", *inputs, "-o",
                               "prog"], cwd=ws.root, env=ws.env, capture_output=True, text=True)
        assert proc.returncode == status, proc.stderr
        assert (ws.root / "prog").exists() == (status == 0)
        assert hook.exists() == (how == "hook")


def test_a_failed_command_of_tens_of_kilobytes_is_shown_briefly(tmp_path):
    """An error names the failed command; llvm-lto2's (one `-r=` resolution per symbol of the
    CU and the device runtime: ~20 KB for one AMD CU) is shown by its first words and its
    last three, with how many are left out; a command of ordinary length whole."""
    from offlink import run as runner
    from offlink.errors import ToolError

    argv = ["/usr/lib/llvm-22/bin/llvm-lto2", "run", "-O2", "in.bc", "libomptarget.bc",
            *(f"-r=libomptarget.bc,symbol_number_{i},pl" for i in range(600)), "-o", "out.o"]
    false = shutil.which("false")
    with pytest.raises(ToolError) as e:
        runner.run([false, *argv[1:]], "target compile of h.c (h.o)")
    said = str(e.value)
    assert said.startswith(f"target compile of h.c (h.o) failed (exit status 1): {false} run "
                           "-O2 in.bc libomptarget.bc -r=libomptarget.bc,symbol_number_0,pl")
    assert said.endswith("more words: offlink --verbose prints the whole command] "
                         "-r=libomptarget.bc,symbol_number_599,pl -o out.o")
    assert len(said) < 1300 and f"... [{600 - said.count('-r=')} more words" in said
    short = [false, "-c", "a.c", "-o", "a.o"]
    with pytest.raises(ToolError, match=r"failed \(exit status 1\): \S+false -c a.c -o a.o$"):
        runner.run(short, "compile")
