"""How many target compiles run at once: GNU make's jobserver or a fixed limit.

Inside `make -jN` make shares N-1 tokens through a jobserver named in MAKEFLAGS: the inherited
pipe fds of make 4.3 (`--jobserver-auth=R,W`, handed only to `+` recipes) or the named fifo of
make 4.4 (`--jobserver-auth=fifo:PATH`). Every process owns one implicit slot; each further
job takes one token byte and writes the same byte back when it ends. Tokens are always given
back: when a job ends, on errors, on Ctrl-C and on SIGTERM (make hangs or runs fewer jobs
when one is lost). Without a jobserver the limit is --jobs, OFFLINK_JOBS or the CPU count.
Running the jobs in those slots is jobs.py's.
"""

from __future__ import annotations

import fcntl
import os
import select
import stat
from collections.abc import Sequence
from typing import NamedTuple

from . import settings


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
