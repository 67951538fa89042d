"""The libLTO worker (liblto.py): `python -I -S liblto_worker.py LIBLTO` compiles the
requests it reads, each in a thread of its own and its own LLVM context and code generator.

No offlink import, nothing but os, sys, threading and ctypes (the worker starts on every link
that compiles bitcode: benchmarks/health/RESULTS.md); ctypes is imported by the functions the
worker runs, as liblto.py imports this module for its requests' format. One request a line,
its fields separated by NUL: id, source, output, optimisation level (0-3), cpu, then the names
to preserve; one reply a line: id, `ok` or `error`, then what LLVM said (warnings) or why not,
hex-encoded.
"""

from __future__ import annotations

import sys
import threading

_SET_OPT_LEVEL = "_ZN4llvm16LTOCodeGenerator11setOptLevelEj"  # LTOCodeGenerator::setOptLevel
_PIC_MODEL_DYNAMIC = 1  # lto_codegen_model: LTO_CODEGEN_PIC_MODEL_DYNAMIC
_ERROR, _WARNING = 0, 1  # lto_codegen_diagnostic_severity_t


def encode_request(rid: int, request: dict) -> bytes | None:
    """The request's line; None when a field holds a NUL or a newline (not sent)."""
    fields = [str(rid), request["source"], request["output"], request["level"], request["cpu"],
              *request["preserve"]]
    if any("\0" in f or "\n" in f for f in fields):
        return None
    return "\0".join(fields).encode() + b"\n"


def decode_request(line: bytes) -> dict:
    rid, source, output, level, cpu, *preserve = line.rstrip(b"\n").decode().split("\0")
    return {"id": int(rid), "source": source, "output": output, "level": level, "cpu": cpu,
            "preserve": preserve}


def encode_reply(rid: int, ok: bool, text: str) -> bytes:
    return f"{rid}\0{'ok' if ok else 'error'}\0{text.encode().hex()}\n".encode()


def decode_reply(line: bytes) -> tuple[int, bool, str]:
    rid, status, text = line.rstrip(b"\n").decode().split("\0")
    return int(rid), status == "ok", bytes.fromhex(text).decode(errors="replace")


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


def _compile(lib, request: dict) -> tuple[bool, str]:
    """One request: (True, what LLVM said) with its output written, or (False, why not)."""
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
        getattr(lib, _SET_OPT_LEVEL)(cg, int(request["level"]))  # LTO and codegen levels
        module = lib.lto_module_create_in_codegen_context(data, len(data),
                                                          request["source"].encode(), cg)
        if not module:
            return False, "libLTO refused the module"
        failed = lib.lto_codegen_add_module(cg, module)
        lib.lto_module_dispose(module)
        if failed:
            return False, "libLTO could not link the module"
        for name in request["preserve"]:
            lib.lto_codegen_add_must_preserve_symbol(cg, name.encode())
        lib.lto_codegen_set_pic_model(cg, _PIC_MODEL_DYNAMIC)
        if request["cpu"]:
            lib.lto_codegen_set_cpu(cg, request["cpu"].encode())
        size = c.c_size_t()
        obj = lib.lto_codegen_compile(cg, c.byref(size))
        errors = [m for s, m in said if s == _ERROR]
        if not obj or errors:
            return False, errors[0] if errors else "libLTO failed"
        with open(request["output"], "wb") as obj_file:
            obj_file.write(c.string_at(obj, size.value))
        return True, "".join(f"llvm-lto2: warning: {m}\n" for s, m in said if s == _WARNING)
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
            ok, text = _compile(lib, request)
        except Exception as e:  # an unreadable source, an unwritable output
            ok, text = False, f"{type(e).__name__}: {e}"
        with lock:
            try:
                out.write(encode_reply(request["id"], ok, text))
                out.flush()
            except OSError:
                pass  # offlink has gone

    threads = []
    for line in sys.stdin.buffer:
        thread = threading.Thread(target=one, args=(decode_request(line),))
        thread.start()
        threads.append(thread)
        threads = [t for t in threads if t.is_alive()]
    for thread in threads:
        thread.join()
    return 0


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1]))
