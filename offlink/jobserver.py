"""How many target compiles run at once, and running them: GNU make's jobserver or a fixed limit.

Inside `make -jN` make shares N-1 tokens through a jobserver named in MAKEFLAGS: the inherited
pipe fds of make 4.3 (`--jobserver-auth=R,W`, handed only to `+` recipes) or the named fifo of
make 4.4 (`--jobserver-auth=fifo:PATH`). Every process owns one implicit slot; each further
job takes one token byte and writes the same byte back when it ends. Tokens are always given
back: when a job ends, on errors, on Ctrl-C and on SIGTERM (make hangs or runs fewer jobs
when one is lost). Without a jobserver the limit is --jobs, OFFLINK_JOBS or the CPU count.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import stat
import sys
import threading
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol, TypeVar

from . import run as runner
from . import settings
from .errors import ToolError

T = TypeVar("T")


class Progress(Protocol):
    """What run_jobs tells of each job (progress.CompileProgress)."""

    def started(self) -> None: ...
    def finished(self, ok: bool) -> None: ...


class JobserverAuth(NamedTuple):
    """Where make's tokens are: a fifo path (make 4.4) or a pipe's two fds (make 4.3)."""

    fifo: str = ""
    read_fd: int = -1
    write_fd: int = -1
    make_jobs: int = 0  # the -jN make was run with, 0 when MAKEFLAGS does not say


def parse_makeflags(makeflags: str) -> JobserverAuth | None:
    """The jobserver MAKEFLAGS names (the last --jobserver-auth= wins), or None.

    Variable assignments come after a lone `--` and are not looked at.
    """
    auth: JobserverAuth | None = None
    jobs = 0
    for word in makeflags.split():
        if word == "--":
            break
        if word.startswith("-j") and word[2:].isdigit():
            jobs = int(word[2:])
            continue
        for prefix in ("--jobserver-auth=", "--jobserver-fds="):  # the second: make <= 4.1
            if not word.startswith(prefix):
                continue
            value = word[len(prefix):]
            if value.startswith("fifo:"):
                auth = JobserverAuth(fifo=value[5:])
            else:
                r, _, w = value.partition(",")
                try:
                    auth = JobserverAuth(read_fd=int(r), write_fd=int(w))
                except ValueError:
                    auth = JobserverAuth()  # named but unreadable: treated as unreachable
    if auth is not None and jobs:
        auth = JobserverAuth(auth.fifo, auth.read_fd, auth.write_fd, jobs)
    return auth


def _pipe_end(fd: int, writing: bool) -> os.stat_result | None:
    """The fd's stat when it is an open pipe end usable that way, else None.

    make 4.3 names its fds in MAKEFLAGS even for recipes that do not get them, and the
    numbers may then belong to anything else; checking type and access mode avoids reading
    from or writing to an unrelated file.
    """
    try:
        st = os.fstat(fd)
        mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
    except OSError:
        return None
    if not stat.S_ISFIFO(st.st_mode):
        return None
    if mode != os.O_RDWR and mode != (os.O_WRONLY if writing else os.O_RDONLY):
        return None
    return st


class Jobserver:
    """A connection to make's jobserver, read without blocking.

    Reads go through a file description of offlink's own (the fifo opened anew, or make's
    pipe reopened through /proc/self/fd), so it can be non-blocking without changing the
    description make and its other children share.
    """

    def __init__(self, read_fd: int, write_fd: int, owned: Sequence[int], name: str):
        self.read_fd = read_fd
        self.write_fd = write_fd
        self._owned = list(owned)
        self.name = name

    @classmethod
    def connect(cls, auth: JobserverAuth) -> Jobserver | None:
        """None when the jobserver cannot be reached (the caller then runs one job)."""
        flags = os.O_NONBLOCK | os.O_CLOEXEC
        if auth.fifo:
            try:
                fd = os.open(auth.fifo, os.O_RDWR | flags)
            except OSError:
                return None
            if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.close(fd)
                return None
            return cls(fd, fd, [fd], f"fifo:{auth.fifo}")
        r = _pipe_end(auth.read_fd, writing=False) if auth.read_fd >= 0 else None
        w = _pipe_end(auth.write_fd, writing=True) if auth.write_fd >= 0 else None
        if r is None or w is None or (r.st_dev, r.st_ino) != (w.st_dev, w.st_ino):
            return None
        try:
            fd = os.open(f"/proc/self/fd/{auth.read_fd}", os.O_RDONLY | flags)
        except OSError:
            return None
        return cls(fd, auth.write_fd, [fd], f"fds {auth.read_fd},{auth.write_fd}")

    def try_take(self) -> bytes | None:
        """One token if one is free right now."""
        try:
            token = os.read(self.read_fd, 1)
        except (BlockingIOError, InterruptedError):
            return None
        return token or None  # b"": every writer is gone; no tokens will come

    def give(self, token: bytes) -> None:
        while True:
            try:
                os.write(self.write_fd, token)
                return
            except BlockingIOError:  # a full pipe: cannot happen with make's token counts
                select.select([], [self.write_fd], [], 1.0)

    def close(self) -> None:
        for fd in self._owned:
            os.close(fd)
        self._owned = []


class Slots:
    """The jobs running now: the implicit slot first, then one jobserver token per extra job.

    Invariant: tokens held == max(0, running - 1). Without a jobserver, `limit` local slots.
    """

    def __init__(self, limit: int, jobserver: Jobserver | None = None, why: str = "",
                 note: str = ""):
        self.limit = max(1, limit)
        self.jobserver = jobserver
        self.why = why  # how the limit was chosen, for --verbose
        self.note = note  # said once, without --verbose, when it makes jobs wait
        self.running = 0
        self._tokens: list[bytes] = []

    def take(self) -> bool:
        """Claim a slot for one more job if one is free now."""
        if self.running >= self.limit:
            return False
        if self.running and self.jobserver is not None:
            token = self.jobserver.try_take()
            if token is None:
                return False
            self._tokens.append(token)
        self.running += 1
        return True

    def give(self) -> None:
        """One job ended: its token goes back at once."""
        self.running -= 1
        while len(self._tokens) > max(0, self.running - 1):
            self._give_token()

    def waits_for_token(self) -> bool:
        return self.jobserver is not None and 0 < self.running < self.limit

    def release_all(self) -> None:
        """Give every token back (the jobs are over, or being abandoned)."""
        while self._tokens:
            self._give_token()
        self.running = 0

    def close(self) -> None:
        self.release_all()
        if self.jobserver is not None:
            self.jobserver.close()
            self.jobserver = None

    def _give_token(self) -> None:
        token = self._tokens.pop()
        assert self.jobserver is not None
        self.jobserver.give(token)


def cpu_count() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def local_jobs(jobs: int = 0) -> tuple[int, str]:
    """--jobs, else OFFLINK_JOBS, else the CPU count; with where the number came from."""
    if jobs > 0:
        return jobs, "--jobs"
    env = settings.text("OFFLINK_JOBS")
    if env.isdigit() and int(env) > 0:
        return int(env), "OFFLINK_JOBS"
    return cpu_count(), "CPU count"


def slots_for(jobs: int = 0, makeflags: str | None = None) -> Slots:
    """The slots for this process: make's jobserver where MAKEFLAGS names one, else local.

    Under a jobserver, --jobs or OFFLINK_JOBS (when given) still cap the number of jobs.
    """
    flags = os.environ.get("MAKEFLAGS", "") if makeflags is None else makeflags
    auth = parse_makeflags(flags) if "jobserver" in flags else None
    if auth is None:
        n, source = local_jobs(jobs)
        return Slots(n, None, f"{n} from {source}")
    explicit = jobs > 0 or settings.text("OFFLINK_JOBS").isdigit()
    cap = local_jobs(jobs)[0] if explicit else (auth.make_jobs or cpu_count() * 2)
    server = Jobserver.connect(auth)
    if server is None:
        # Like a sub-make, run on the implicit slot only (make 4.3 hands its pipe only to
        # recipes marked `+` or that use $(MAKE)).
        return Slots(1, None, "1: make's jobserver is not reachable from this recipe "
                              "(mark the recipe with '+' for make 4.3)", UNREACHABLE_NOTE)
    return Slots(cap, server, f"make's jobserver ({server.name}), at most {cap}")


UNREACHABLE_NOTE = (
    "offlink: note: make's jobserver is not reachable from this recipe, so target compiles run "
    "one at a time (make 4.3 hands it only to recipes marked '+', which CMake's Makefiles "
    "generator does not write); use Ninja (cmake -G Ninja), make 4.4, a '+' in front of the "
    "link recipe, or OFFLINK_JOBS=N")


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

    def run(self, argv: Sequence[str], what: str) -> str:
        """Run a tool (stdin /dev/null, stdout and stderr into one pipe) with its output kept
        and returned (warnings); a failure is a ToolError carrying that output. The tool is
        started by run.spawn_tool."""
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
                pid = runner.spawn_tool(argv, actions, what)
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
            raise ToolError(f"{what} failed (exit status {code}): {runner.show(argv)}",
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


class _Pool:
    """Up to `workers` threads running submitted jobs in order; each job's result or exception
    is kept, and `wake` is called when one ends. (Not concurrent.futures: it imports logging,
    whose atexit hook keeps a link from ending at once, cli._end_link.)"""

    def __init__(self, workers: int, job: Callable[[int], T], wake: Callable[[], None]):
        self.workers, self.job, self.wake = workers, job, wake
        self.threads: list[threading.Thread] = []
        self.todo: list[int] = []
        self.done: dict[int, tuple[object, BaseException | None]] = {}
        self.closed = False
        self.cond = threading.Condition()

    def submit(self, index: int) -> None:
        with self.cond:
            self.todo.append(index)
            self.cond.notify()
        if len(self.threads) < self.workers:
            thread = threading.Thread(target=self._work, name=f"offlink-job_{len(self.threads)}")
            self.threads.append(thread)
            thread.start()

    def _work(self) -> None:
        while True:
            with self.cond:
                while not self.todo and not self.closed:
                    self.cond.wait()
                if not self.todo:
                    return
                index = self.todo.pop(0)
            result: object = None
            error: BaseException | None = None
            try:
                result = self.job(index)
            except BaseException as e:  # handed to the main thread, as a Future would
                error = e
            with self.cond:
                self.done[index] = (result, error)
            self.wake()

    def finished(self) -> list[tuple[int, object, BaseException | None]]:
        """The jobs that ended since the last call: (index, result, exception)."""
        with self.cond:
            out = [(i, r, e) for i, (r, e) in self.done.items()]
            self.done.clear()
        return out

    def shutdown(self) -> None:
        """Wait for the jobs submitted (as ThreadPoolExecutor.shutdown(wait=True))."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        for thread in self.threads:
            thread.join()


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
    running = 0
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def wake() -> None:
        try:
            os.write(wake_w, b".")
        except OSError:  # full (wake-ups pending anyway) or closed
            pass

    pool = _Pool(max(1, min(slots.limit, count)), job, wake)
    nxt = 0
    try:
        poller = select.poll()
        poller.register(wake_r, select.POLLIN)
        polled_token = False
        while True:
            while nxt < count and not errors and slots.take():
                pool.submit(nxt)
                running += 1
                nxt += 1
                if progress:
                    progress.started()
            if not running:
                break
            want_token = nxt < count and not errors and slots.waits_for_token()
            if want_token != polled_token:
                assert slots.jobserver is not None or not want_token
                if want_token:
                    poller.register(slots.jobserver.read_fd, select.POLLIN)  # type: ignore
                else:
                    poller.unregister(slots.jobserver.read_fd)  # type: ignore[union-attr]
                polled_token = want_token
            poller.poll()
            try:
                while os.read(wake_r, 256):
                    pass
            except BlockingIOError:
                pass
            for i, result, exc in pool.finished():
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
            pool.shutdown()
        finally:
            slots.release_all()
            os.close(wake_r)
            os.close(wake_w)
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
