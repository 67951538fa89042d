"""Running the tools offlink drives (compilers, linkers, objcopy): one place for subprocesses."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping, Sequence

from . import settings
from .errors import ToolError

# Tools are started with os.posix_spawnp where offlink waits for them itself (`spawn`): they
# inherit offlink's file descriptors as a plain build's tools do (make's jobserver among them).
# subprocess and shlex are imported where they are used, and typing not at all: `offlink cc`'s
# warm hit imports this module (benchmarks/health/RESULTS.md; its import budget is
# tests/test_cc_cache.py's).

VERBOSE = settings.flag("OFFLINK_VERBOSE")


def set_verbose(flag: bool) -> None:
    global VERBOSE
    VERBOSE = flag


def show(argv: Sequence[str]) -> str:
    import shlex

    return shlex.join(argv)


BRIEF = 2000  # characters of a failed command an error line shows at most


def brief(argv: Sequence[str]) -> str:
    """A failed command as an error line shows it: whole (show), or, where that is longer
    than BRIEF characters (llvm-lto2 with one `-r=` resolution per symbol: tens of KB), its
    first words and its last three, saying how many are left out and where to see them."""
    whole = show(argv)
    if len(whole) <= BRIEF or len(argv) < 8:
        return whole
    head: list[str] = []
    size = 0
    for word in argv[:-3]:
        size += len(word) + 1
        if size > BRIEF // 2:
            break
        head.append(word)
    left = len(argv) - 3 - len(head)
    return (f"{show(head)} ... [{left} more words: offlink --verbose prints the whole "
            f"command] {show(argv[-3:])}")


def which(tool: str) -> str | None:
    """The tool's path as exec would find it: shutil.which's answer, without shutil (with the
    bz2 and lzma it imports), which `offlink cc`'s warm hit and every link would import for it
    (benchmarks/health/RESULTS-cache-and-run.md)."""
    if os.sep in tool:
        return tool if os.access(tool, os.X_OK) else None
    path = os.environ.get("PATH")
    if path is None:
        try:
            path = os.confstr("CS_PATH") or os.defpath
        except (AttributeError, ValueError):
            path = os.defpath
    seen = set()
    for folder in path.split(os.pathsep):
        if folder in seen:
            continue
        seen.add(folder)
        name = os.path.join(folder, tool)
        if os.access(name, os.X_OK) and not os.path.isdir(name):
            return name
    return None


# Python ignores SIGPIPE (and SIGXFSZ), and an ignored signal stays ignored across exec: a
# tool offlink starts gets them back at their defaults, as subprocess (restore_signals) and a
# plain build give them.
_RESTORED = (signal.SIGPIPE, signal.SIGXFSZ)


def spawn(argv: Sequence[str], file_actions: list, env: Mapping[str, str] | None = None
          ) -> int:
    """Start a tool with os.posix_spawnp, SIGPIPE and SIGXFSZ at their defaults, in `env`
    (offlink's environment by default); its pid. A missing tool raises FileNotFoundError."""
    return os.posix_spawnp(argv[0], list(argv), os.environ if env is None else env,
                           file_actions=file_actions, setsigdef=_RESTORED)


def spawn_tool(argv: Sequence[str], file_actions: list, what: str,
               env: Mapping[str, str] | None = None) -> int:
    """spawn(), a tool that cannot be started one ToolError naming `what` (as run() says)."""
    try:
        return spawn(argv, file_actions, env)
    except FileNotFoundError:
        raise ToolError(f"{what}: '{argv[0]}' not found") from None
    except PermissionError:
        raise ToolError(f"{what}: '{argv[0]}' is not executable") from None


def exec_tool(argv: Sequence[str]) -> None:
    """Replace offlink by the tool (os.execvp), SIGPIPE and SIGXFSZ at their defaults; returns
    only by raising OSError (the handlers as they were)."""
    sys.stdout.flush()
    sys.stderr.flush()
    before = {signum: signal.signal(signum, signal.SIG_DFL) for signum in _RESTORED}
    try:
        os.execvp(argv[0], list(argv))
    finally:  # reached only when the exec failed
        for signum, handler in before.items():
            signal.signal(signum, handler)


def probe(argv: Sequence[str], *, cwd: str | None = None, env: dict | None = None,
          timeout: float | None = None):
    """Ask a tool something (`--version`, `-###`): a subprocess.CompletedProcess with its exit
    status, output and diagnostics apart, stdin empty, nothing shown with --verbose. Raises
    OSError where it cannot start, subprocess.TimeoutExpired past `timeout`."""
    import subprocess

    return subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True, cwd=cwd,
                          env=env, timeout=timeout)


def version(tool: str) -> bytes:
    """A tool's `--version`: its exit status, output and diagnostics, or why it gave none."""
    import subprocess

    try:
        said = probe([tool, "--version"], timeout=60)
        return f"{said.returncode}\0".encode() + said.stdout + said.stderr
    except (OSError, subprocess.SubprocessError) as e:
        return f"no --version: {type(e).__name__}".encode()


def run(argv: Sequence[str], what: str, *, capture: bool = True, cwd: str | None = None,
        stdin: bytes | None = None, env: dict | None = None):
    """Run a tool (a subprocess.CompletedProcess); a missing tool or a failure becomes one
    ToolError naming `what`.

    With capture, the tool's output is kept and attached to the error (the CLI prints it
    before the one-line error), so a failing compile shows the compiler's own diagnostics.
    """
    import subprocess

    if VERBOSE:
        print(f"offlink: {show(argv)}", file=sys.stderr, flush=True)
    try:
        if capture and cwd is None and stdin is None and env is None:
            code, said = Captured(argv).wait()  # offlink's descriptors inherited
            proc = subprocess.CompletedProcess(list(argv), code, said)
        else:
            proc = subprocess.run(list(argv), input=stdin, cwd=cwd, env=env,
                                  stdout=subprocess.PIPE if capture else None,
                                  stderr=subprocess.STDOUT if capture else None)
    except FileNotFoundError:
        raise ToolError(f"{what}: '{argv[0]}' not found") from None
    except PermissionError:
        raise ToolError(f"{what}: '{argv[0]}' is not executable") from None
    if proc.returncode != 0:
        out = proc.stdout.decode(errors="replace") if capture and proc.stdout else ""
        status = proc.returncode if proc.returncode > 0 else 128 - proc.returncode
        raise ToolError(f"{what} failed (exit status {proc.returncode}): {brief(argv)}",
                        exit_code=status, output=out)
    return proc


class Captured:
    """A tool started with its output and diagnostics into one pipe, which `wait` reads to its
    end, offlink's file descriptors inherited as `spawn` leaves them. Raises OSError
    (FileNotFoundError, ...) where it cannot start."""

    def __init__(self, argv: Sequence[str]):
        import subprocess

        self.process = subprocess.Popen(list(argv), stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, close_fds=False)

    def wait(self) -> tuple[int, bytes]:
        """Its exit status (negative: the signal that ended it) and all it printed. An
        exception while waiting (Ctrl-C, SIGTERM) kills it and waits for it, as
        subprocess.run does."""
        try:
            assert self.process.stdout is not None
            out = self.process.stdout.read()
            status = self.process.wait()
        finally:
            self.end()
        return status, out

    def end(self) -> None:
        """Ended (killed where not waited for yet) and its pipe closed."""
        if self.process.returncode is None:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def run_here(argv: Sequence[str], what: str) -> None:
    """run(argv, what, capture=False) as `spawn` starts tools: the tool on offlink's own
    stdin, stdout and stderr. As subprocess.run, an exception while waiting (Ctrl-C,
    SIGTERM: jobs.stop_on_signals) kills the tool and waits for it before going on; a
    failure is the same ToolError."""
    if VERBOSE:
        print(f"offlink: {show(argv)}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = spawn_tool(argv, [], what)
    try:
        _, status = os.waitpid(pid, 0)
    except BaseException:
        os.kill(pid, signal.SIGKILL)  # as subprocess.run's process.kill()
        os.waitpid(pid, 0)
        raise
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise ToolError(f"{what} failed (exit status {code}): {brief(argv)}",
                        exit_code=code if code > 0 else 128 - code)


def pass_through(argv: Sequence[str], what: str) -> int:
    """Run a tool on offlink's own stdin, stdout and stderr, as exec would, and return its
    exit status (128+N where signal N ended it).

    A signal that would end offlink while it waits (Ctrl-C, SIGTERM, SIGHUP, SIGQUIT) is
    passed on to the tool instead, so the tool decides, as it would without offlink between;
    the handlers in force before are restored afterwards.
    """
    if VERBOSE:
        print(f"offlink: {show(argv)}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    child: list[int] = []
    pending: list[int] = []

    def forward(signum, frame) -> None:
        if child:
            os.kill(child[0], signum)
        else:
            pending.append(signum)

    signals = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT]
    before = {s: signal.getsignal(s) for s in signals}
    try:
        for s in signals:
            if before[s] is not signal.SIG_IGN:  # an ignored signal stays ignored, as for exec
                signal.signal(s, forward)
        try:
            child.append(spawn(argv, []))
        except OSError as e:
            raise ToolError(f"{what} '{argv[0]}': {e.strerror}", 127) from None
        for signum in pending:
            os.kill(child[0], signum)
        _, status = os.waitpid(child[0], 0)
    finally:
        for s, handler in before.items():
            if handler is not None:
                signal.signal(s, handler)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else \
        128 + os.WTERMSIG(status)
