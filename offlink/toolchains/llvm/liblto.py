"""`llvm-lto2 run` of one bitcode CU, done by libLTO in a worker process that loads LLVM once.

Each `llvm-lto2` process starts LLVM anew (libLLVM's relocations and static initialisers),
half as long again as compiling a small CU (benchmarks/health/RESULTS.md); clang's own link
starts LLVM once. The
worker (liblto_worker.py, run as a script) loads the libLTO.so of the same LLVM install as
llvm-lto2 and compiles each request in a thread of its own (ctypes lets go of the
GIL), each CU in its own LLVM context and code generator: the same one-module regular LTO as
the `llvm-lto2 run` command it stands for (tests/test_clang_lto.py compares them):

- the module is linked into an empty "ld-temp.o", as llvm-lto2's LTO links it;
- what the command's resolutions export (`x`) is preserved, every other definition is
  internalized (llvm-lto2 internalizes prevailing definitions not visible to regular objects);
- the command's -ON (1-3) for the optimisation and the code generator (with loop and SLP
  vectorization from -O2 on, as llvm-lto2 sets them; the command gives --cg-opt-level=N where
  N is not llvm-lto2's default 2), PIC, --mcpu as the CPU, and no data sections (libLTO turns
  them on unless told, llvm-lto2 not).

A C CU's object is llvm-lto2's byte for byte. libLTO's internalize (the legacy Internalize
pass) also takes an internalized C++ inline function out of its comdat when it is the only
member, and its module linker orders functions otherwise: the same symbols with the same
binding and visibility, another layout; so the worker's objects are keyed as its own
(`identity`), not as llvm-lto2's.

libLTO gives its level to the first code generator of a process only (`maybeParseOptions`),
so each one is given the command's level itself (`LTOCodeGenerator::setOptLevel`, exported by
libLLVM), and an empty one takes that first-time setting (which also turns the verifier off)
before any CU.

Only commands of the shape OpenMPTarget.compile_argv writes are taken; anything else, a module
libLTO refuses, a worker that cannot start or dies, is run as the llvm-lto2 command itself,
which compiles it or reports its error: the worker is a faster way to the same object, never
the only way. OFFLINK_LIBLTO=0 turns it off, OFFLINK_LIBLTO=PATH names the libLTO to load.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

from ... import settings
from . import liblto_worker
from .liblto_worker import decode_reply, encode_request

if TYPE_CHECKING:
    import subprocess

LIBLTO_ENV = "OFFLINK_LIBLTO"


# -- the command ---------------------------------------------------------------------------
def parse_lto2(argv) -> dict | None:
    """The request for `llvm-lto2 run -ON [--cg-opt-level=N] --relocation-model=pic
    [--mcpu=C] SRC -o OUT -r=SRC,NAME,FLAGS...` (N 1..3, the code generator's level the same
    N, llvm-lto2's default 2 where it is not given; its output is OUT.0, as llvm-lto2 names
    it); None for any other command, which the worker does not take. Not -O0: llvm-lto2 drops
    what the module summary's liveness finds dead (an internalized helper no kernel calls any
    more) when it links the module, libLTO leaves that to the pipeline, whose GlobalDCE runs
    from -O1 on only: at -O0 the objects would differ."""
    words = list(argv)
    if len(words) < 7 or os.path.basename(words[0]) != "llvm-lto2" or words[1] != "run" or \
            words[2] not in ("-O1", "-O2", "-O3"):
        return None
    level = words[2][2:]
    rest = words[3:]
    if rest[0] == f"--cg-opt-level={level}":
        rest.pop(0)
    elif level != "2":  # the worker sets both levels to N (LTOCodeGenerator::setOptLevel)
        return None
    if rest[0] != "--relocation-model=pic":
        return None
    rest.pop(0)
    cpu = ""
    if rest and rest[0].startswith("--mcpu="):
        cpu = rest.pop(0)[len("--mcpu="):]
    if len(rest) < 3 or rest[1] != "-o" or rest[0].startswith("-"):
        return None
    source, output = rest[0], rest[2]
    preserve = []
    for word in rest[3:]:
        if not word.startswith(f"-r={source},"):
            return None
        name, sep, flags = word[len(source) + 4:].rpartition(",")
        if not sep or not name or set(flags) - set("plx"):
            return None
        if "x" in flags:
            preserve.append(name)
    return {"source": source, "output": output + ".0", "level": level, "cpu": cpu,
            "preserve": preserve}


def library(lto2: str) -> str:
    """The libLTO to load for this llvm-lto2: OFFLINK_LIBLTO's path, else the one in the same
    LLVM install (whose libLLVM llvm-lto2 runs on); "" when turned off or missing."""
    env = settings.text(LIBLTO_ENV)
    if env in ("0", "no", "off"):
        return ""
    if env and env not in ("1", "yes", "on"):
        return env
    lib = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(lto2))), "lib")
    return install_library(lib)


def install_library(lib: str) -> str:
    """The libLTO of the LLVM install whose lib folder is `lib`: the unversioned libLTO.so
    (only llvm-N-dev has it), else the versioned libLTO.so.<major>.<minor> the llvm-N package
    itself installs (a user's machine has that one alone); "" when there is none."""
    path = os.path.join(lib, "libLTO.so")
    if os.path.isfile(path):
        return path
    try:
        names = os.listdir(lib)
    except OSError:
        return ""
    # One LLVM install has one release: the highest version there is its own.
    versioned = sorted((n for n in names if re.fullmatch(r"libLTO\.so\.\d+(\.\d+)*", n)),
                       key=lambda n: [int(x) for x in n[len("libLTO.so."):].split(".")])
    return os.path.join(lib, versioned[-1]) if versioned else ""


# What decides the worker's objects besides the command: bumped when _compile's settings change.
SETTINGS = "2: preserve x, setOptLevel(-O), pic, cpu, -data-sections=0"


def identity(lib: str) -> str:
    """The worker's part of a CU's cache key: its settings and the libLTO it loads (by path and
    stat stamp: the LLVM release itself is in llvm-lto2's identity, which keys the command)."""
    try:
        st = os.stat(lib)
        stamp = f"{os.path.realpath(lib)}\0{st.st_size}\0{st.st_mtime_ns}"
    except OSError as e:
        stamp = f"{lib}\0{e.strerror}"
    return f"\0libLTO worker\0{SETTINGS}\0{stamp}"


# -- the client (in offlink) ------------------------------------------------------------------
class Worker:
    """The worker process, started on the first request; compile() may be called from many
    threads at once (each of the link's compile slots has one request at most in flight)."""

    def __init__(self, lib: str, tmpdir: str):
        self.lib, self.tmpdir = lib, tmpdir
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr = ""  # the file the worker's stderr goes to
        self.dead = ""  # why the worker is not usable: then every request is declined
        self._lock = threading.Lock()
        self._waiting: dict[int, list] = {}  # request id -> [event, reply]
        self._next = 0
        self.used = 0  # requests it compiled

    def _start(self) -> None:
        worker_script = os.path.abspath(liblto_worker.__file__)
        env = dict(os.environ, TMPDIR=self.tmpdir)  # libLTO's temporary object: in the work folder
        # what it says goes to a file (a pipe nobody reads before the end could fill and stop it)
        self.stderr = os.path.join(self.tmpdir, "liblto-worker.stderr")
        try:
            with open(self.stderr, "wb") as err:
                self.proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", worker_script, self.lib],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env)
        except OSError as e:
            self.dead = f"cannot start: {e}"
            return
        threading.Thread(target=self._read, name="offlink-liblto", daemon=True).start()

    def _read(self) -> None:
        """Hands each reply to its request; at the worker's end, every request still waiting
        is declined (and compiled by llvm-lto2)."""
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        for line in proc.stdout:
            try:
                reply = decode_reply(line)
                rid = reply[0]
            except ValueError:
                continue
            with self._lock:
                slot = self._waiting.pop(rid, None)
            if slot is not None:
                slot[1] = reply
                slot[0].set()
        status = proc.wait()
        try:
            with open(self.stderr, "rb") as f:
                err = f.read()[-4096:].decode(errors="replace")
        except OSError:
            err = ""
        with self._lock:
            if not self.dead:
                self.dead = (f"exit status {status}" if status >= 0 else f"signal {-status}") + \
                    (f": {err.strip().splitlines()[-1]}" if err.strip() else "")
            waiting, self._waiting = self._waiting, {}
        for slot in waiting.values():
            slot[0].set()

    def compile(self, request: dict) -> tuple[bool, str]:
        """(True, what LLVM said) when the worker wrote request's output; (False, why not)
        when it declined or died: the caller then runs the command itself."""
        event = threading.Event()
        slot: list = [event, None]
        with self._lock:
            if self.proc is None and not self.dead:
                self._start()
            if self.dead:
                return False, self.dead
            rid = self._next
            self._next += 1
            line = encode_request(rid, request)
            if line is None:
                return False, "a name the worker's requests cannot carry"
            self._waiting[rid] = slot
            try:
                assert self.proc is not None and self.proc.stdin is not None
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
            except OSError as e:
                self._waiting.pop(rid, None)
                self.dead = self.dead or f"cannot be written to: {e}"
                return False, self.dead
        event.wait()
        reply = slot[1]
        if reply is None:
            return False, f"the libLTO worker died ({self.dead})"
        _, ok, text = reply
        if ok:
            with self._lock:
                self.used += 1
        return ok, text

    def close(self) -> None:
        """Ends the worker (it exits at the end of its input) and waits for it."""
        with self._lock:
            proc, self.proc = self.proc, None
            self.dead = self.dead or "closed"
        if proc is not None:
            try:
                if proc.stdin:
                    proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=10)
            except Exception:  # a worker stuck in LLVM: not this link's problem any more
                proc.kill()
                proc.wait()
