"""`llvm-lto2 run` of one bitcode CU, done by libLTO in a worker process that loads LLVM once.

Each `llvm-lto2` process spends ~20 ms starting LLVM (libLLVM's relocations and static
initialisers) against ~40 ms of compiling a small CU; clang's own link starts LLVM once. The
worker (this file run as a script, no offlink import) loads the libLTO.so of the same LLVM
install as llvm-lto2 and compiles each request in a thread of its own (ctypes lets go of the
GIL), each CU in its own LLVM context and code generator: the same one-module regular LTO as
the `llvm-lto2 run` command it stands for (tests/test_clang_lto.py compares them):

- the module is linked into an empty "ld-temp.o", as llvm-lto2's LTO links it;
- what the command's resolutions export (`x`) is preserved, every other definition is
  internalized (llvm-lto2 internalizes prevailing definitions not visible to regular objects);
- -O2 (libLTO's default level, with loop and SLP vectorization as llvm-lto2 sets them), PIC,
  --mcpu as the CPU, and no data sections (libLTO turns them on unless told, llvm-lto2 not).

A C CU's object is llvm-lto2's byte for byte. libLTO's internalize (the legacy Internalize
pass) also takes an internalized C++ inline function out of its comdat when it is the only
member, and its module linker orders functions otherwise: the same symbols with the same
binding and visibility, another layout; so the worker's objects are keyed as its own
(`identity`), not as llvm-lto2's.

libLTO gives its level to the first code generator of a process only (`maybeParseOptions`),
so each one is given -O2 itself (`LTOCodeGenerator::setOptLevel`, exported by libLLVM), and an
empty one takes that first-time setting (which also turns the verifier off) before any CU.

Only commands of the shape OpenMPTarget.compile_argv writes are taken; anything else, a module
libLTO refuses, a worker that cannot start or dies, is run as the llvm-lto2 command itself,
which compiles it or reports its error: the worker is a faster way to the same object, never
the only way. OFFLINK_LIBLTO=0 turns it off, OFFLINK_LIBLTO=PATH names the libLTO to load.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

ENV = "OFFLINK_LIBLTO"
_SET_OPT_LEVEL = "_ZN4llvm16LTOCodeGenerator11setOptLevelEj"  # LTOCodeGenerator::setOptLevel
_PIC_MODEL_DYNAMIC = 1  # lto_codegen_model: LTO_CODEGEN_PIC_MODEL_DYNAMIC


# -- the command ---------------------------------------------------------------------------
def parse_lto2(argv) -> dict | None:
    """The request for `llvm-lto2 run -O2 --relocation-model=pic [--mcpu=C] SRC -o OUT
    -r=SRC,NAME,FLAGS...` (its output is OUT.0, as llvm-lto2 names it); None for any other
    command, which the worker does not take."""
    words = list(argv)
    if len(words) < 7 or os.path.basename(words[0]) != "llvm-lto2" or \
            words[1:4] != ["run", "-O2", "--relocation-model=pic"]:
        return None
    rest = words[4:]
    cpu = ""
    if rest[0].startswith("--mcpu="):
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
    return {"source": source, "output": output + ".0", "cpu": cpu, "preserve": preserve}


def library(lto2: str) -> str:
    """The libLTO to load for this llvm-lto2: OFFLINK_LIBLTO's path, else the one in the same
    LLVM install (whose libLLVM llvm-lto2 runs on); "" when turned off or missing."""
    env = os.environ.get(ENV, "")
    if env in ("0", "no", "off"):
        return ""
    if env and env not in ("1", "yes", "on"):
        return env
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(lto2))), "lib",
                        "libLTO.so")
    return path if os.path.isfile(path) else ""


# What decides the worker's objects besides the command: bumped when _compile's settings change.
SETTINGS = "1: preserve x, setOptLevel(2), pic, cpu, -data-sections=0"


def identity(lib: str) -> str:
    """The worker's part of a CU's cache key: its settings and the libLTO it loads (by path and
    stat stamp: the LLVM release itself is in llvm-lto2's identity, which keys the command)."""
    try:
        st = os.stat(lib)
        stamp = f"{os.path.realpath(lib)}\0{st.st_size}\0{st.st_mtime_ns}"
    except OSError as e:
        stamp = f"{lib}\0{e.strerror}"
    return f"\0libLTO worker\0{SETTINGS}\0{stamp}"


# -- the client (in offlink) ---------------------------------------------------------------
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
        import subprocess

        env = dict(os.environ, TMPDIR=self.tmpdir)  # libLTO's temporary object: in the work folder
        # what it says goes to a file (a pipe nobody reads before the end could fill and stop it)
        self.stderr = os.path.join(self.tmpdir, "liblto-worker.stderr")
        try:
            with open(self.stderr, "wb") as err:
                self.proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", os.path.abspath(__file__), self.lib],
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
                reply = json.loads(line)
                rid = reply["id"]
            except (ValueError, KeyError, TypeError):
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
            self._waiting[rid] = slot
            try:
                assert self.proc is not None and self.proc.stdin is not None
                self.proc.stdin.write(json.dumps(dict(request, id=rid)).encode() + b"\n")
                self.proc.stdin.flush()
            except OSError as e:
                self._waiting.pop(rid, None)
                self.dead = self.dead or f"cannot be written to: {e}"
                return False, self.dead
        event.wait()
        reply = slot[1]
        if reply is None:
            return False, f"the libLTO worker died ({self.dead})"
        if not reply.get("ok"):
            return False, reply.get("error", "")
        with self._lock:
            self.used += 1
        return True, reply.get("said", "")

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


# -- the worker (a process of its own: `python -I -S liblto.py LIBLTO`) --------------------
def _bind(path: str):
    """libLTO's functions used here, typed; raises OSError/AttributeError when it lacks any."""
    import ctypes as c

    lib = c.CDLL(path)
    vp, sz, cp, b = c.c_void_p, c.c_size_t, c.c_char_p, c.c_bool
    for name, res, args in (
            ("lto_codegen_create_in_local_context", vp, []),
            ("lto_codegen_dispose", None, [vp]),
            ("lto_module_create_in_codegen_context", vp, [c.c_char_p, sz, cp, vp]),
            ("lto_module_dispose", None, [vp]),
            ("lto_codegen_add_module", b, [vp, vp]),
            ("lto_codegen_add_must_preserve_symbol", None, [vp, cp]),
            ("lto_codegen_set_pic_model", b, [vp, c.c_int]),
            ("lto_codegen_set_cpu", None, [vp, cp]),
            ("lto_codegen_set_diagnostic_handler", None, [vp, vp, vp]),
            ("lto_codegen_optimize", b, [vp]),
            ("lto_codegen_compile", vp, [vp, c.POINTER(sz)]),
            ("lto_set_debug_options", None, [c.POINTER(cp), c.c_int]),
            ("lto_get_version", cp, []),
            (_SET_OPT_LEVEL, None, [vp, c.c_uint])):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


def _compile(lib, request: dict) -> dict:
    """One request: its output written, or why not."""
    import ctypes as c

    with open(request["source"], "rb") as f:
        data = f.read()
    said: list[tuple[int, str]] = []

    def diagnostic(severity, message, _ctx):
        said.append((severity, (message or b"").decode(errors="replace")))

    # lto_diagnostic_handler_t (ctypes makes the type once)
    handler = c.CFUNCTYPE(None, c.c_int, c.c_char_p, c.c_void_p)(diagnostic)
    cg = lib.lto_codegen_create_in_local_context()
    try:
        lib.lto_codegen_set_diagnostic_handler(cg, c.cast(handler, c.c_void_p), None)
        getattr(lib, _SET_OPT_LEVEL)(cg, 2)
        module = lib.lto_module_create_in_codegen_context(data, len(data),
                                                          request["source"].encode(), cg)
        if not module:
            return {"error": "libLTO refused the module"}
        failed = lib.lto_codegen_add_module(cg, module)
        lib.lto_module_dispose(module)
        if failed:
            return {"error": "libLTO could not link the module"}
        for name in request["preserve"]:
            lib.lto_codegen_add_must_preserve_symbol(cg, name.encode())
        lib.lto_codegen_set_pic_model(cg, _PIC_MODEL_DYNAMIC)
        if request["cpu"]:
            lib.lto_codegen_set_cpu(cg, request["cpu"].encode())
        size = c.c_size_t()
        obj = lib.lto_codegen_compile(cg, c.byref(size))
        errors = [m for s, m in said if s == 0]  # LTO_DS_ERROR
        if not obj or errors:
            return {"error": errors[0] if errors else "libLTO failed"}
        with open(request["output"], "wb") as obj_file:
            obj_file.write(c.string_at(obj, size.value))
        return {"ok": True, "said": "".join(f"llvm-lto2: warning: {m}\n"
                                             for s, m in said if s == 1)}  # LTO_DS_WARNING
    finally:
        lib.lto_codegen_dispose(cg)


def _serve(path: str) -> int:
    import ctypes as c

    lib = _bind(path)
    options = (c.c_char_p * 1)(b"-data-sections=0")
    lib.lto_set_debug_options(options, 1)
    first = lib.lto_codegen_create_in_local_context()  # takes libLTO's one-time setting
    lib.lto_codegen_optimize(first)
    lib.lto_codegen_dispose(first)
    out = sys.stdout.buffer
    lock = threading.Lock()

    def one(request: dict) -> None:
        try:
            reply = _compile(lib, request)
        except Exception as e:  # an unreadable source, an unwritable output
            reply = {"error": f"{type(e).__name__}: {e}"}
        reply["id"] = request["id"]
        with lock:
            try:
                out.write(json.dumps(reply).encode() + b"\n")
                out.flush()
            except OSError:
                pass  # offlink has gone

    threads = []
    for line in sys.stdin.buffer:
        thread = threading.Thread(target=one, args=(json.loads(line),))
        thread.start()
        threads.append(thread)
        threads = [t for t in threads if t.is_alive()]
    for thread in threads:
        thread.join()
    return 0


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1]))
