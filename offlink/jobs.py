"""Running target compiles in parallel: a thread per job in the slots jobserver.py gives,
the tools they start stopped on Ctrl-C, SIGTERM or SIGHUP, every token given back.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from . import run as runner
from .errors import ToolError
from .jobserver import Slots

T = TypeVar("T")


class Progress(Protocol):
    """What run_jobs tells of each job (progress.CompileProgress)."""

    def started(self) -> None: ...
    def finished(self, ok: bool) -> None: ...


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP turned into an exception, so cleanup (tokens, temporaries) runs."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


def stop_on_signals() -> None:
    """Make SIGTERM and SIGHUP unwind like Ctrl-C does (main thread only: elsewhere
    signal.signal refuses, and nothing is changed)."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, _raise_interrupted)
        except ValueError:  # not the main thread
            return


class Children:
    """The tool processes the jobs run, so that an interrupt can stop them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pids: set[int] = set()
        self._stopping = False

    def run(self, argv: Sequence[str], what: str, env: Mapping[str, str] | None = None
            ) -> str:
        """Run a tool (stdin /dev/null, stdout and stderr into one pipe) with its output kept
        and returned (warnings); a failure is a ToolError carrying that output. The tool is
        started by run.spawn_tool, in `env` (offlink's environment by default)."""
        if runner.VERBOSE:
            print(f"offlink: {runner.show(argv)}", file=sys.stderr, flush=True)
        # close-on-exec: a tool that another thread starts meanwhile must not hold the write
        # end (this read would wait for that tool to end)
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                   (os.POSIX_SPAWN_DUP2, write_fd, 1), (os.POSIX_SPAWN_DUP2, write_fd, 2)]
        try:
            with self._lock:
                if self._stopping:
                    raise KeyboardInterrupt
                pid = runner.spawn_tool(argv, actions, what, env)
                self._pids.add(pid)
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        try:
            chunks = []
            while chunk := os.read(read_fd, 65536):
                chunks.append(chunk)
            # Ended, not yet reaped: its pid stays its own until stop() can no longer see it.
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        except BaseException:  # Ctrl-C or SIGTERM in the thread running it: the tool stops
            self._forget(pid, signal.SIGTERM)
            raise
        finally:
            os.close(read_fd)
        code = self._forget(pid)
        out = b"".join(chunks).decode(errors="replace")
        if self._stopping:
            raise KeyboardInterrupt
        if code != 0:
            status = code if code > 0 else 128 - code
            raise ToolError(f"{what} failed (exit status {code}): {runner.brief(argv)}",
                            exit_code=status, output=out)
        return out

    def _forget(self, pid: int, signum: int = 0) -> int:
        """Reap the tool (after sending it `signum`, if not 0); its exit code."""
        with self._lock:
            self._pids.discard(pid)
            if signum:
                try:
                    os.kill(pid, signum)
                except OSError:
                    pass
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            for pid in self._pids:
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass


Outcome = tuple[int, object, "BaseException | None"]  # a job's number, result, exception


class _Ended:
    """The jobs that ended, handed by their threads to run_jobs's thread, which waits on a
    pipe they write to for one to end (and on make's pipe, when it waits for a token too)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._outcomes: list[Outcome] = []
        self._read, self._write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def run(self, job: Callable[[int], object], i: int) -> None:
        """job(i), in its own thread; its result or exception is kept for run_jobs."""
        outcome: Outcome
        try:
            outcome = (i, job(i), None)
        except BaseException as e:  # raised by run_jobs's thread
            outcome = (i, None, e)
        with self._lock:
            self._outcomes.append(outcome)
        try:
            os.write(self._write, b".")
        except OSError:  # full: wake-ups are pending anyway
            pass

    def wait(self, token_fd: int = -1) -> list[Outcome]:
        """(job, result, exception) of the jobs that ended since the last call, once one has
        ended or token_fd (when not -1) can be read."""
        poller = select.poll()
        poller.register(self._read, select.POLLIN)
        if token_fd >= 0:
            poller.register(token_fd, select.POLLIN)
        poller.poll()
        try:
            while os.read(self._read, 256):
                pass
        except BlockingIOError:
            pass
        with self._lock:
            outcomes = self._outcomes.copy()
            self._outcomes.clear()
        return outcomes

    def close(self) -> None:
        os.close(self._read)
        os.close(self._write)


def run_jobs(count: int, job: Callable[[int], T], slots: Slots, *,
             children: Children | None = None, progress: Progress | None = None) -> list[T]:
    """job(0) ... job(count-1) on threads, as many at once as `slots` allows; results in order.

    After a failure no further job starts, and the failure of the lowest-numbered job is
    raised (jobs start in order, so that is the first failure in order over all jobs). On any
    way out, Ctrl-C and SIGTERM included, the tools still running are stopped and every
    jobserver token is given back.
    """
    if count == 1 and slots.take():  # the implicit slot: one job needs no thread
        return [_one(job, slots, children, progress)]
    if slots.note and count > 1:  # only when jobs would wait; once per link
        if not runner.VERBOSE:  # --verbose says it with slots.why
            print(slots.note, file=sys.stderr)
        slots.note = ""
    results: list = [None] * count
    errors: dict[int, BaseException] = {}
    ended = _Ended()
    threads: list[threading.Thread] = []
    running = 0
    try:
        while True:
            while len(threads) < count and not errors and slots.take():
                i = len(threads)
                threads.append(threading.Thread(target=ended.run, args=(job, i),
                                                name=f"offlink-job_{i}"))
                threads[-1].start()
                running += 1
                if progress:
                    progress.started()
            if not running:
                break
            want_token = len(threads) < count and not errors and slots.waits_for_token()
            token_fd = slots.jobserver.read_fd if want_token and slots.jobserver else -1
            for i, result, exc in ended.wait(token_fd):
                running -= 1
                slots.give()
                if exc is not None:
                    errors[i] = exc
                else:
                    results[i] = result
                if progress:
                    progress.finished(exc is None)
    except BaseException:
        if children is not None:
            children.stop()
        raise
    finally:
        try:
            for thread in threads:  # the jobs started end (their tools stopped, on an error)
                thread.join()
        finally:
            slots.release_all()
            ended.close()
    if errors:
        raise errors[min(errors)]
    return results


def _one(job: Callable[[int], T], slots: Slots, children: Children | None,
         progress: Progress | None) -> T:
    """run_jobs of one job, whose slot is taken, in this thread: no thread, pipe or poll
    (every `offlink cc` that compiles target code runs one job)."""
    if progress:
        progress.started()
    try:
        result = job(0)
    except Exception:
        if progress:
            progress.finished(False)
        raise
    except BaseException:  # Ctrl-C, SIGTERM: as run_jobs, the tools still running stop
        if children is not None:
            children.stop()
        raise
    finally:
        slots.release_all()
    if progress:
        progress.finished(True)
    return result
