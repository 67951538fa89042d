"""Parallel target compiles: make's jobserver (make 4.3 pipes, make 4.4 fifo), tokens given
back on success, errors and signals; the progress display and timings."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run

from offlink.jobserver import JobserverAuth, parse_makeflags, slots_for

CUS = 6
LAUNCHER = """\
#!/bin/sh
# A target launcher that records its calls and how many compiles run at once.
log='{log}'
mkdir -p "$log/running"
echo "$*" >> "$log/calls"
touch "$log/running/$$"
ls "$log/running" | wc -l >> "$log/counts"
{action}
rm -f "$log/running/$$"
exit $rc
"""
COMPILE = 'sleep 0.25; "$@"; rc=$?'


@pytest.fixture(scope="module")
def project(offlink, tmp_path_factory) -> Path:
    """CUS small fat objects and a main, compiled by one `offlink cc`."""
    d = tmp_path_factory.mktemp("jobs")
    names = []
    for i in range(CUS):
        (d / f"u{i}.c").write_text(f"int unit{i}(int x) {{ return x + {i}; }}\n")
        names.append(f"u{i}.c")
    (d / "main.c").write_text("int unit0(int);\nint main(void) { return unit0(0); }\n")
    run([offlink, "cc", "gcc", "-O1", "-c", "main.c", *names], cwd=d)
    return d


def objects(project: Path) -> list[str]:
    return [str(project / "main.o"), *(str(project / f"u{i}.o") for i in range(CUS))]


def launcher(tmp_path: Path, action: str = COMPILE) -> tuple[Path, Path]:
    log = tmp_path / "log"
    log.mkdir()
    script = tmp_path / "launcher.sh"
    script.write_text(LAUNCHER.format(log=log, action=action))
    script.chmod(0o755)
    return script, log


def most_at_once(log: Path) -> int:
    return max(int(n) for n in (log / "counts").read_text().split())


def link_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")}
    env.update(OFFLINK_NO_CACHE="1", OFFLINK_PROGRESS="0", **extra)
    return env


class Fifo:
    """A make 4.4 style jobserver: a named fifo holding tokens, kept open like make does (a
    fifo with no open end drops what it holds)."""

    def __init__(self, path: Path, tokens: int):
        os.mkfifo(path)
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        os.write(self.fd, b"+" * tokens)

    def count(self) -> int:
        n = 0
        try:
            while os.read(self.fd, 1):
                n += 1
        except BlockingIOError:
            pass
        os.write(self.fd, b"+" * n)
        return n

    def close(self) -> None:
        os.close(self.fd)


# -- MAKEFLAGS and slots -------------------------------------------------------------------

def test_parse_makeflags():
    assert parse_makeflags("s -j3 --jobserver-auth=3,4") == JobserverAuth("", 3, 4, 3)
    assert parse_makeflags(" -j4 --jobserver-auth=fifo:/tmp/GMfifo12") == \
        JobserverAuth("/tmp/GMfifo12", make_jobs=4)
    assert parse_makeflags("-j --jobserver-fds=5,6") == JobserverAuth("", 5, 6)
    assert parse_makeflags("--jobserver-auth=3,4 --jobserver-auth=7,8").read_fd == 7
    assert parse_makeflags("k -j2") is None
    assert parse_makeflags("s -- X=--jobserver-auth=3,4") is None
    assert parse_makeflags("--jobserver-auth=x,y") == JobserverAuth()


def test_slots_take_tokens_and_give_them_back():
    r, w = os.pipe()
    try:
        os.write(w, b"ab")
        slots = slots_for(0, f"-j3 --jobserver-auth={r},{w}")
        assert slots.jobserver is not None and slots.limit == 3
        assert [slots.take() for _ in range(4)] == [True, True, True, False]  # implicit + 2
        slots.give()
        token = os.read(r, 1)  # one token back at once
        assert token in (b"a", b"b")
        os.write(w, token)
        slots.close()
        assert sorted(os.read(r, 10)) == sorted(b"ab")
    finally:
        os.close(r)
        os.close(w)


def test_unreachable_jobserver_means_one_job(tmp_path):
    regular = os.open(tmp_path / "file", os.O_RDWR | os.O_CREAT)
    try:
        for flags in (f"-j8 --jobserver-auth={regular},{regular}", "-j8 --jobserver-auth=998,999",
                      f"-j8 --jobserver-auth=fifo:{tmp_path}/missing"):
            slots = slots_for(4, flags)
            assert slots.limit == 1 and slots.jobserver is None, flags
    finally:
        os.close(regular)
    assert slots_for(3, "").limit == 3  # no jobserver: --jobs


# -- real make 4.3 (pipe fds) --------------------------------------------------------------

MAKEFILE = """\
plus:
\t+$(OFFLINK) link --jobs 8 --target-launcher $(LAUNCHER) gcc $(OBJS) -o prog1
noplus:
\t$(OFFLINK) link --jobs 8 --target-launcher $(LAUNCHER) gcc $(OBJS) -o prog2
"""


@pytest.mark.parametrize("goal,most", [("plus", 2), ("noplus", 1)])
def test_make_jobserver_limits_target_compiles(offlink, project, tmp_path, goal, most):
    script, log = launcher(tmp_path)
    (tmp_path / "Makefile").write_text(MAKEFILE)
    proc = run(["make", "-j2", goal, f"OFFLINK={offlink}", f"LAUNCHER={script}",
                f"OBJS={' '.join(objects(project))}"], cwd=tmp_path, env=link_env())
    assert "INTERNAL" not in proc.stderr  # make checks at exit that all tokens came back
    assert len((log / "calls").read_text().splitlines()) == CUS + 1
    assert most_at_once(log) == most  # --jobs 8 is only a cap under make's jobserver


# -- make 4.4 style fifo: limits, errors, signals ------------------------------------------

def test_fifo_jobserver_limits_and_returns_tokens(offlink, project, tmp_path):
    script, log = launcher(tmp_path)
    fifo = Fifo(tmp_path / "fifo", tokens=1)  # make -j2: one token, one implicit slot
    try:
        env = link_env(MAKEFLAGS=f" -j2 --jobserver-auth=fifo:{fifo.path}")
        run([offlink, "link", "--jobs", "8", "--target-launcher", script, "gcc",
             *objects(project), "-o", tmp_path / "prog"], env=env)
        assert most_at_once(log) == 2
        assert fifo.count() == 1
    finally:
        fifo.close()


def test_failed_compile_gives_tokens_back(offlink, project, tmp_path):
    action = 'case "$*" in *u3.c*) rc=1; echo "u3: launcher says no";; *) "$@"; rc=$?;; esac'
    script, log = launcher(tmp_path, action)
    fifo = Fifo(tmp_path / "fifo", tokens=2)
    try:
        env = link_env(MAKEFLAGS=f"-j3 --jobserver-auth=fifo:{fifo.path}",
                       OFFLINK_TARGET_LAUNCHER_MANDATORY="1")  # else: compiled locally
        proc = run([offlink, "link", "--target-launcher", script, "gcc", *objects(project),
                    "-o", tmp_path / "prog"], env=env, check=False)
        assert proc.returncode == 1
        assert proc.stderr.strip().splitlines()[-1].startswith(
            "offlink: error: target compile of u3.c (")
        assert "launcher says no" in proc.stderr
        assert fifo.count() == 2
        assert not (tmp_path / "prog").exists()
    finally:
        fifo.close()


def wait_for(predicate, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError("timed out")
        time.sleep(0.05)


# Generous but bounded: a loaded machine (parallel test runs, other builds) can be slow to start
# three compiles, but a link that never answers a signal must fail the test, not hang it.
SIGNAL_DEADLINE = 300.0


def as_a_fresh_session() -> None:
    """preexec_fn: the link runs in its own process group (so the test can kill it and every
    compile it started) with the default SIGINT, SIGTERM and SIGHUP dispositions, whatever the
    test runner inherited (a background job or nohup starts with SIGINT or SIGHUP ignored, and
    ignored signals stay ignored across exec)."""
    os.setsid()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def start_time(pid: int) -> str | None:
    """A process's start time (field 22 of /proc/PID/stat), None when it is gone or a zombie:
    with it a pid reused by another process on a busy machine is not mistaken for ours."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def read_available(fd: int, deadline: float) -> bytes:
    """What a pipe holds once it holds something, reading without blocking until the deadline
    (a blocking read would hang the test forever if the link lost the tokens)."""
    os.set_blocking(fd, False)
    got = b""
    while True:
        try:
            chunk = os.read(fd, 64)
        except BlockingIOError:
            chunk = b""
        got += chunk
        if (got and not chunk) or time.monotonic() > deadline:
            return got
        if not chunk:
            time.sleep(0.05)


@pytest.mark.parametrize("kind,sig", [("fifo", signal.SIGTERM), ("pipe", signal.SIGINT)])
def test_signals_give_tokens_back_and_stop_compiles(offlink, project, tmp_path, kind, sig):
    script, log = launcher(tmp_path, "exec sleep 600")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    fifo = r = w = proc = None
    if kind == "fifo":
        fifo = Fifo(tmp_path / "fifo", tokens=2)
        flags, pass_fds = f"-j3 --jobserver-auth=fifo:{fifo.path}", ()
    else:
        r, w = os.pipe()
        os.write(w, b"++")
        flags, pass_fds = f"-j3 --jobserver-auth={r},{w}", (r, w)
    try:
        proc = subprocess.Popen(
            [offlink, "link", "--target-launcher", script, "gcc", *objects(project),
             "-o", tmp_path / "prog"], env=link_env(MAKEFLAGS=flags, TMPDIR=str(tmp)),
            pass_fds=pass_fds, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, preexec_fn=as_a_fresh_session)
        running = log / "running"
        wait_for(lambda: proc.poll() is not None or
                 (running.is_dir() and len(list(running.iterdir())) == 3), SIGNAL_DEADLINE)
        assert proc.poll() is None, proc.communicate()
        compiles = {int(p.name): start_time(int(p.name)) for p in running.iterdir()}
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=SIGNAL_DEADLINE)
        assert proc.returncode == 128 + sig, err
        assert err.strip().splitlines()[-1] == "offlink: interrupted"
        if fifo:
            assert fifo.count() == 2
        else:
            assert read_available(r, time.monotonic() + 5) == b"++"
        for pid, started in compiles.items():  # the compiles were stopped (and reaped)
            assert started is not None and start_time(pid) != started, pid
        assert list(tmp.iterdir()) == [] and not (tmp_path / "prog").exists()
    finally:
        if proc is not None:
            try:  # the link and every compile it started, whatever happened above
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if proc.returncode is None:
                proc.communicate()
        if fifo:
            fifo.close()
        for fd in (r, w):
            if fd is not None:
                os.close(fd)


# -- what a person sees --------------------------------------------------------------------

def test_nothing_extra_when_not_a_terminal(offlink, project, tmp_path):
    proc = run([offlink, "link", "gcc", *objects(project), "-o", tmp_path / "prog"],
               env={**link_env(), "OFFLINK_PROGRESS": ""})
    assert proc.stdout == "" and proc.stderr == ""


def test_progress_display_on_a_terminal(offlink, project, tmp_path):
    script, _log = launcher(tmp_path)
    primary, secondary = pty.openpty()
    env = {**link_env(), "OFFLINK_PROGRESS": "", "TERM": "xterm", "COLUMNS": "120"}
    proc = subprocess.Popen([offlink, "link", "--target-launcher", script, "gcc",
                             *objects(project), "-o", tmp_path / "prog"], env=env,
                            stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary)
    os.close(secondary)
    screen = b""
    while True:
        ready, _, _ = select.select([primary], [], [], 30)
        try:
            chunk = os.read(primary, 4096) if ready else b""
        except OSError:  # EIO: the terminal's other side is closed
            chunk = b""
        if not chunk:
            break
        screen += chunk
    os.close(primary)
    assert proc.wait(timeout=30) == 0
    text = screen.decode(errors="replace")
    assert "compiling for x86_64-pc-linux-gnu" in text
    assert "running, 0 failed, 0 cached" in text and f"/{CUS + 1}" in text


def test_timings_verbose_and_env(offlink, project, tmp_path):
    script, _log = launcher(tmp_path)
    env = link_env(OFFLINK_TIMINGS="1", OFFLINK_TARGET_LAUNCHER=str(script))
    proc = run([offlink, "link", "--verbose", "--jobs", "2", "gcc", *objects(project),
                "-o", tmp_path / "prog"], env=env)
    err = proc.stderr
    assert "offlink: parallel target compiles: 2 from --jobs" in err
    assert f"offlink: {script} gcc -O1 -ffunction-sections -fdata-sections -fPIC -c " in err
    assert f"x86_64-pc-linux-gnu: {CUS + 1} CUs, {CUS + 1} compiled, 0 from cache" in err
    timing = next(ln for ln in err.splitlines() if ln.startswith("offlink: timing (ms):"))
    for stage in ("extract", "compile[x86_64-pc-linux-gnu]", "device[", "host", "fill", "total"):
        assert stage in timing


def test_run_jobs_in_order_first_failure_and_no_thread_left():
    """run_jobs gives results in job order, at most `limit` at once, raises the failure of the
    lowest-numbered job, and leaves no thread running."""
    import sys

    code = """
import sys, threading, time
from offlink.jobs import run_jobs
from offlink.jobserver import Slots
at_once, most, lock = [0], [0], threading.Lock()
def job(i):
    with lock:
        at_once[0] += 1
        most[0] = max(most[0], at_once[0])
    time.sleep(0.01 * (5 - i % 5))
    with lock:
        at_once[0] -= 1
    if i in (7, 4):
        raise ValueError(i)
    return i * i
assert run_jobs(6, lambda i: job(i) if i < 4 else i * i, Slots(3)) == [0, 1, 4, 9, 16, 25]
assert most[0] <= 3, most
try:
    run_jobs(10, job, Slots(2))
except ValueError as e:
    assert e.args == (4,), e.args
else:
    raise AssertionError("no failure raised")
assert threading.active_count() == 1
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


SIGNALS = 'grep SigIgn /proc/$$/status; echo said >&2; read x || echo "stdin at end"; exit {rc}'


def test_children_run_a_tool_with_its_output_its_failure_and_default_signals():
    """The target compile's runner (run.spawn_tool): stdin at its end, stdout and stderr in
    one text, SIGPIPE and SIGXFSZ at their defaults (Python ignores both, an ignored signal
    stays ignored across exec), a failure with its status and output, a missing tool named."""
    from offlink.errors import ToolError
    from offlink.jobs import Children

    children = Children()
    out = children.run(["sh", "-c", SIGNALS.format(rc=0)], "a tool")
    mask = int(out.split()[1], 16)
    assert not mask & (1 << (signal.SIGPIPE - 1)) and not mask & (1 << (signal.SIGXFSZ - 1))
    assert out.splitlines()[1:] == ["said", "stdin at end"]
    with pytest.raises(ToolError) as failed:
        children.run(["sh", "-c", SIGNALS.format(rc=3)], "a tool")
    assert failed.value.exit_code == 3 and "said" in failed.value.output
    assert str(failed.value).startswith("a tool failed (exit status 3): sh -c ")
    with pytest.raises(ToolError, match="a tool: 'no-such-tool-here' not found"):
        children.run(["no-such-tool-here"], "a tool")


def test_children_stop_ends_the_running_tools():
    """Ctrl-C or SIGTERM during a link's compiles (run_jobs): the tools still running get
    SIGTERM and their jobs end with KeyboardInterrupt; nothing is left running."""
    import threading

    from offlink.jobs import Children

    children = Children()
    ended: list[BaseException] = []

    def job() -> None:
        try:
            children.run(["sleep", "30"], "a sleep")
        except BaseException as e:  # noqa: BLE001 - what the job ended with
            ended.append(e)

    threads = [threading.Thread(target=job) for _ in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while len(children._pids) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    pids = set(children._pids)
    start = time.monotonic()
    children.stop()
    for t in threads:
        t.join(10)
    assert time.monotonic() - start < 5
    assert len(ended) == 2 and all(isinstance(e, KeyboardInterrupt) for e in ended)
    assert children._pids == set()
    for pid in pids:  # reaped
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_one_job_runs_in_the_calling_thread():
    """`offlink cc` compiles one CU's target code: run_jobs runs it without a thread (and its
    pipe and poll); a failure is raised, the slot given back."""
    import threading

    from offlink.jobs import run_jobs
    from offlink.jobserver import Slots

    slots = Slots(4)
    assert run_jobs(1, lambda i: threading.current_thread().name, slots) == ["MainThread"]
    assert slots.running == 0

    def fail(i: int) -> None:
        raise ValueError(i)

    with pytest.raises(ValueError):
        run_jobs(1, fail, slots)
    assert slots.running == 0
    assert threading.active_count() == 1


def test_sigterm_unwinds_even_where_a_thread_imported_threading_first():
    """stop_on_signals in the main thread while a thread started with _thread (as
    cache.store.in_thread once started them) is running, having imported threading first:
    threading then takes that thread for the main one, and a check through it left SIGTERM at
    its default, so a SIGTERM during the host link killed offlink and left the linker running.
    The handler is installed; from a thread it is not."""
    script = """
import _thread, signal, sys
imported, stay = _thread.allocate_lock(), _thread.allocate_lock()
imported.acquire(); stay.acquire()
def worker():
    import threading  # first here, as subprocess's import does in a cache thread
    imported.release()
    stay.acquire()
_thread.start_new_thread(worker, ())
imported.acquire()
from offlink.jobs import stop_on_signals, _raise_interrupted
said = []
done = _thread.allocate_lock(); done.acquire()
def from_thread():
    stop_on_signals()  # a thread changes nothing
    said.append(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
    done.release()
_thread.start_new_thread(from_thread, ())
done.acquire()
stop_on_signals()
said.append(signal.getsignal(signal.SIGTERM) is _raise_interrupted)
print(said)
stay.release()  # the worker ends (threading, taking it for the main one, waits for it)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.strip() == "[True, True]"
