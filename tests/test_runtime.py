"""The C runtime (offlink.h, libofflink.a) in real programs with real tables.

Each program is built the way the link builds it (DESIGN.md, "The data flow"): the source
compiled as target code into a shared-object image; the host link with a reserved
`.openmp_target` section of the exact table size (tests/runtime/reserve.S); then the table,
written with the reference writer from the linked file's own symbols, put at the section's
file offset. The programs are in tests/runtime/ and print `key: value` lines.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import struct
import subprocess
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import need_tool

from offlink.elf import ElfFile
from offlink.formats.table import (
    HEADER_STRUCT,
    SECTION,
    SYMBOL,
    ImageSpec,
    RowSpec,
    build_table,
    layout_size,
)
from offlink.runtime import build

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "tests" / "runtime"
HOST = "x86_64-pc-linux-gnu"
CC = os.environ.get("CC", "gcc")
TARGET_DEFINES = [f'-D__OFFLINK_TARGET__="{HOST}"', "-D__OFFLINK_TARGET_HOST__=1"]
API = {
    "offlink_translate", "offlink_update_to", "offlink_update_from", "offlink_update_to_range",
    "offlink_update_from_range", "offlink_lookup", "offlink_target_name", "offlink_last_error",
    "offlink_launch", "__offlink_register_module", "__offlink_unregister_module",
}

APP_ROWS = {
    "side": "function",
    "op_add": "indirect-function",
    "op_sub": "indirect-function",
    "op_mul": "indirect-function",
    "bump": "function",
    "vec_scale": "function",
    "counter": "variable",
    "vec": "variable",
}


def cc(*args: object, compiler: str = CC) -> None:
    argv = [compiler, *map(str, args)]
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(argv)}\n{done.stderr}"


@dataclass
class Module:
    path: Path
    table_offset: int  # file offset of .openmp_target
    table: bytes


def image_of(src: Path, out: Path, compiler: str = CC) -> bytes:
    """The target image: the source compiled as target code, a self-bound shared object."""
    cc("-O1", "-fPIC", "-shared", "-Wl,-Bsymbolic", *TARGET_DEFINES, *build.cflags(), src,
       "-o", out, compiler=compiler)
    return out.read_bytes()


def fill(path: Path, rows: dict[str, str], images: list[ImageSpec],
         change: dict[str, dict[str, int]] | None = None) -> Module:
    """Write the table into the reserved section, as the link's fill stage does; `change`
    overrides fields of some rows (a forged table)."""
    elf = ElfFile.open(path)
    sec = elf.section(SECTION)
    assert sec is not None
    syms = {s.name: s for s in elf.symbols() if s.defined and s.is_global}
    # After the link the hidden symbol is local, at the start of the section.
    assert [s.st_value for s in elf.symbols() if s.name == SYMBOL] == [sec.sh_addr]
    specs = [
        RowSpec(name, syms[name].st_value - sec.sh_addr,
                1 if kind.endswith("function") else syms[name].st_size, kind)._replace(
                    **(change or {}).get(name, {}))
        for name, kind in rows.items()
    ]
    table = build_table(images, specs)
    assert len(table) == sec.sh_size, "the reserved size must be the table's exact size"
    with open(path, "r+b") as f:
        f.seek(sec.sh_offset)
        f.write(table)
    return Module(path, sec.sh_offset, table)


def link(tmp: Path, src: Path, rows: dict[str, str] | None, *, mode: str = "pie",
         extra: tuple[str, ...] = (), images: list[tuple[str, str, bytes]] | None = None,
         compiler: str = CC, name: str | None = None) -> Module:
    """Build `src` into a module with a table of `rows` (None: a module without a table).

    mode is pie, nopie or shared. images replaces the default: one shared-object image of
    `src` for the host target.
    """
    name = name or f"{src.stem}-{mode}"
    out = tmp / (name + (".so" if mode == "shared" else ""))
    flags = {"pie": ["-fPIE", "-pie"], "nopie": ["-fno-pie", "-no-pie"],
             "shared": ["-fPIC", "-shared"]}[mode]
    objs: list[object] = []
    specs: list[ImageSpec] = []
    if rows is not None:
        if images is None:
            images = [(HOST, "shared-object", image_of(src, tmp / f"{name}.image.so", compiler))]
        specs = [ImageSpec(t, k, data) for t, k, data in images]
        size = layout_size(list(rows), [s.target for s in specs], [len(s.image) for s in specs])
        reserve = tmp / f"{name}.reserve.o"
        cc("-c", f"-DTABLE_SIZE={size}", SRC / "reserve.S", "-o", reserve)
        objs.append(reserve)
    cc("-O1", "-Wall", "-Wextra", "-Werror", *flags, *build.cflags(), src, *objs,
       *build.libs(), *extra, "-o", out, compiler=compiler)
    if rows is None:
        return Module(out, 0, b"")
    return fill(out, rows, specs)


def execute(path: Path, args: tuple[str, ...], env: dict[str, str] | None,
            status: int) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("OFFLINK_")}
    full.update(env or {})
    done = subprocess.run([str(path), *args], capture_output=True, text=True, env=full,
                          errors="replace", timeout=60)
    assert done.returncode == status, f"status {done.returncode}\n{done.stdout}{done.stderr}"
    return done


def run(path: Path, *args: str, env: dict[str, str] | None = None,
        status: int = 0) -> dict[str, str]:
    """Run a test program; its `key: value` lines as a dict (a repeated key: the last)."""
    done = execute(path, args, env, status)
    out = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    out["stderr"] = done.stderr
    return out


def run_lines(path: Path, *args: str, env: dict[str, str] | None = None) -> list[str]:
    return execute(path, args, env, 0).stdout.splitlines()


@pytest.fixture(scope="module", params=["pie", "nopie"])
def app(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Module:
    return link(tmp_path_factory.mktemp("app"), SRC / "app.c", APP_ROWS, mode=request.param)


HOST_RESULTS = {"op0": "10", "op1": "4", "op2": "21"}
TARGET_RESULTS = {"op0": "1010", "op1": "1004", "op2": "1021"}


# ---- a working table -------------------------------------------------------------------


def test_translate_calls_the_images_code(app: Module) -> None:
    out = run(app.path, "basic")
    assert out["table"] == "set"
    assert out["host"] == "host"
    assert out["side"] == HOST  # the image's side(): compiled with __OFFLINK_TARGET__
    assert out["target"] == HOST
    assert out["error"] == "(null)"
    # A table of host function pointers, each translated and called: the image's code ran.
    assert {k: out[k] for k in TARGET_RESULTS} == TARGET_RESULTS
    assert out["lookup"] == "same"
    assert out["lookup-missing"] == "null"
    assert out["stderr"] == ""


def test_variables_are_copied_both_ways(app: Module) -> None:
    lines = run_lines(app.path, "vars")
    assert lines == [
        "update_to: 0",
        "bump: 6",  # the image's counter, copied from the host's 5
        "host-counter: 5",  # untouched until copied back
        "update_from: 0",
        "counter: 6",
        "interior: ok",  # a pointer into vec translates into the image's vec
        "update_to: 0",  # from &vec[3]: the whole variable
        "range: 0",  # only vec[2] and vec[3] come back
        "vec: 0 1 20 30 4 5 6 7",
        "range_to: 0",
        "update_from: 0",
        "vec: 0 10 20 30 40 50 60 -1",
    ]


def test_misses_leave_pointers_alone(app: Module) -> None:
    lines = run_lines(app.path, "miss")
    assert lines[:4] == ["local: same", "static: same", "fn+1: same", "update-local: -1"]
    assert "is not inside an offered variable" in lines[4]
    assert lines[5] == "update-fn: -1"
    assert "'op_add' is a function" in lines[6]
    assert lines[7] == "past-end: -1"
    assert "run past the end of 'vec' (64 bytes)" in lines[8]
    assert lines[9:] == ["null-table: same", "null-update: 0", "null-target: null"]


def test_first_use_race(app: Module) -> None:
    """8 threads released together at the first use of the table, again and again."""
    for _ in range(25):
        out = run(app.path, "race")
        assert [out[f"thread{i}"] for i in range(8)] == [HOST] * 8


def test_mandatory_with_a_usable_target(app: Module) -> None:
    out = run(app.path, "basic", env={"OFFLINK_MANDATORY": "1"})
    assert out["side"] == HOST


@pytest.mark.parametrize("choice", [HOST, "host"])
def test_target_chosen_by_name(app: Module, choice: str) -> None:
    assert run(app.path, "basic", env={"OFFLINK_TARGET": choice})["target"] == HOST


@pytest.mark.parametrize("choice,message", [
    ("nvptx64-nvidia-cuda", "OFFLINK_TARGET=nvptx64-nvidia-cuda: no such target"),
    ("none", "OFFLINK_TARGET=none: running on the host"),
])
def test_target_refused_by_name(app: Module, choice: str, message: str) -> None:
    out = run(app.path, "basic", env={"OFFLINK_TARGET": choice})
    assert (out["side"], out["target"]) == ("host", "(null)")
    assert message in out["error"]
    assert {k: out[k] for k in HOST_RESULTS} == HOST_RESULTS
    out = run(app.path, "basic", env={"OFFLINK_TARGET": choice, "OFFLINK_MANDATORY": "1"},
              status=1)
    assert out["stderr"].startswith("offlink: error: ") and message in out["stderr"]


def test_images_load_from_a_temporary_file_without_memfd(app: Module, tmp_path: Path) -> None:
    shim = tmp_path / "nomemfd.so"
    cc("-O1", "-fPIC", "-shared", SRC / "nomemfd.c", "-o", shim)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    out = run(app.path, "basic", env={"LD_PRELOAD": str(shim), "TMPDIR": str(tmpdir)})
    assert (out["side"], out["error"]) == (HOST, "(null)")
    assert list(tmpdir.iterdir()) == []  # removed once loaded


def test_temporary_file_failure_is_reported(app: Module, tmp_path: Path) -> None:
    shim = tmp_path / "nomemfd.so"
    cc("-O1", "-fPIC", "-shared", SRC / "nomemfd.c", "-o", shim)
    out = run(app.path, "basic", env={"LD_PRELOAD": str(shim), "TMPDIR": str(tmp_path / "no")})
    assert out["side"] == "host"
    assert "cannot load the image: memfd_create: Function not implemented" in out["error"]
    assert f"from {tmp_path / 'no'}: No such file or directory" in out["error"]


# ---- modules without a usable table ----------------------------------------------------


@pytest.mark.parametrize("mode", ["pie", "nopie"])
def test_module_without_a_table_runs_on_the_host(tmp_path: Path, mode: str) -> None:
    exe = link(tmp_path, SRC / "app.c", None, mode=mode).path
    out = run(exe, "basic", env={"OFFLINK_MANDATORY": "1"})  # nothing to offload: no error
    assert (out["table"], out["side"], out["target"], out["error"]) == \
        ("null", "host", "(null)", "(null)")
    assert {k: out[k] for k in HOST_RESULTS} == HOST_RESULTS
    assert run_lines(exe, "vars")[:5] == [
        "update_to: 0", "bump: 6", "host-counter: 6", "update_from: 0", "counter: 6"]


def test_gold_load_base_is_not_a_table(tmp_path: Path) -> None:
    """gold resolves an undefined weak hidden symbol to the load base: no table, no error."""
    need_tool(shutil.which("ld.gold"), "ld.gold is not installed (binutils)")
    exe = link(tmp_path, SRC / "app.c", None, extra=("-fuse-ld=gold",)).path
    out = run(exe, "basic", env={"OFFLINK_MANDATORY": "1"})
    assert (out["side"], out["error"]) == ("host", "(null)")
    exe = link(tmp_path, SRC / "app.c", APP_ROWS, extra=("-fuse-ld=gold",), name="gold").path
    assert run(exe, "basic")["side"] == HOST


def corrupt(module: Module, offset: int, data: bytes) -> None:
    with open(module.path, "r+b") as f:
        f.seek(module.table_offset + offset)
        f.write(data)


def _flip(table: bytes, offset: int) -> bytes:
    return bytes([table[offset] ^ 0x40])


def _header(table: bytes) -> tuple:
    return HEADER_STRUCT.unpack_from(table, 0)


# name: (table -> (offset in the table, bytes written there), the spec's code in the message)
CORRUPTIONS = {
    "magic": (lambda t: (0, _flip(t, 0)), "bad-magic"),
    "version": (lambda t: (8, b"\x02"), "bad-version"),
    "total-size": (lambda t: (16, struct.pack("<Q", 1 << 40)), "truncated"),
    "string": (lambda t: (_header(t)[13], _flip(t, _header(t)[13])), "bad-checksum"),
    "image": (lambda t: (len(t) - 100, _flip(t, len(t) - 100)), "bad-image-checksum"),
}


@pytest.mark.parametrize("what", sorted(CORRUPTIONS))
def test_corrupt_table_runs_on_the_host(tmp_path: Path, what: str) -> None:
    module = link(tmp_path, SRC / "app.c", APP_ROWS)
    where, code = CORRUPTIONS[what]
    corrupt(module, *where(module.table))
    out = run(module.path, "basic")
    assert (out["side"], out["target"]) == ("host", "(null)")
    assert f"({code})" in out["error"] and str(module.path) in out["error"]
    assert {k: out[k] for k in HOST_RESULTS} == HOST_RESULTS
    assert "vec: 0 10 20 30 40 50 60 70" in run_lines(module.path, "vars")  # host code only
    # OFFLINK_MANDATORY=1: a hard error, one line, before any offloaded call runs.
    out = run(module.path, "basic", env={"OFFLINK_MANDATORY": "1"}, status=1)
    assert out["stderr"].startswith("offlink: error: ") and f"({code})" in out["stderr"]
    assert out["stderr"].count("\n") == 1
    assert "side" not in out


def test_name_missing_from_the_image(tmp_path: Path) -> None:
    module = link(tmp_path, SRC / "app.c", {**APP_ROWS, "host_only": "function"})
    out = run(module.path, "basic")
    assert out["side"] == "host"
    assert "'host_only' is not defined in the image" in out["error"]


def test_variable_size_mismatch(tmp_path: Path) -> None:
    """A row size the image's variable does not have would overflow one side on update:
    refused (a size larger than the host object already by the host-side check)."""
    module = link(tmp_path, SRC / "app.c", APP_ROWS)
    image = ImageSpec(HOST, "shared-object", (tmp_path / "app-pie.image.so").read_bytes())
    fill(module.path, APP_ROWS, [image], change={"vec": {"size": 32}})
    out = run(module.path, "basic")
    assert "variable 'vec' is 32 bytes on the host but 64 in the image" in out["error"]
    fill(module.path, APP_ROWS, [image], change={"vec": {"size": 72}})
    out = run(module.path, "basic")
    assert "variable 'vec' is 72 bytes but the host object there is 64" in out["error"]


@pytest.mark.parametrize("change", [{"host_offset": 1 << 40}, {"size": 1 << 40}])
def test_rows_outside_the_module_are_refused(tmp_path: Path, change: dict[str, int]) -> None:
    """A forged table (its checksum right) must not aim copies outside the module."""
    module = link(tmp_path, SRC / "app.c", APP_ROWS)
    image = ImageSpec(HOST, "shared-object", (tmp_path / "app-pie.image.so").read_bytes())
    fill(module.path, APP_ROWS, [image], change={"vec": change})
    out = run(module.path, "basic")
    assert out["side"] == "host"
    assert "offload table: 'vec' lies outside the module" in out["error"]


def test_random_damage_never_crashes(tmp_path: Path) -> None:
    """Bytes of the table changed at random, the checksum made right again so that the
    damage reaches past validation's first line: the program always runs to the end."""
    module = link(tmp_path, SRC / "app.c", APP_ROWS)
    meta_size = _header(module.table)[5]
    rng = random.Random(20240601)
    outcomes = set()
    for _ in range(150):
        table = bytearray(module.table)
        for _ in range(rng.choice([1, 2, 4])):
            table[rng.randrange(meta_size)] = rng.randrange(256)
        if rng.random() < 0.8:
            struct.pack_into("<I", table, 32, 0)
            struct.pack_into("<I", table, 32, zlib.crc32(bytes(table[:meta_size])))
        corrupt(module, 0, bytes(table))
        out = run(module.path, "basic")
        assert out["side"] in ("host", HOST)
        assert (out["side"] == HOST) == (out["error"] == "(null)")
        outcomes.add(out["side"])
    assert outcomes == {"host", HOST}


def test_unloadable_kinds_are_skipped(tmp_path: Path) -> None:
    image = image_of(SRC / "app.c", tmp_path / "image.so")
    # PTX alone: no loader takes it (cubin and fatbin images go to the CUDA loader).
    fake = ("nvptx64-nvidia-cuda", "ptx", b".version 9.0\n")
    module = link(tmp_path, SRC / "app.c", APP_ROWS,
                  images=[fake, (HOST, "shared-object", image)], name="two")
    assert run(module.path, "basic")["side"] == HOST  # the first target that loads
    module = link(tmp_path, SRC / "app.c", APP_ROWS, images=[fake], name="ptx-only")
    out = run(module.path, "basic")
    assert out["side"] == "host"
    assert "target 'nvptx64-nvidia-cuda': this runtime cannot load ptx images" in out["error"]


# ---- several modules, C++ --------------------------------------------------------------


@pytest.mark.parametrize("mode", ["pie", "nopie"])
def test_shared_library_with_its_own_table(tmp_path: Path, mode: str) -> None:
    link(tmp_path, SRC / "lib.c", {"lib_side": "function", "lib_get": "function",
                                   "lib_value": "variable"}, mode="shared", name="libdso")
    exe = link(tmp_path, SRC / "withlib.c", {"app_side": "function", "app_value": "variable"},
               mode=mode, extra=(str(tmp_path / "libdso.so"), f"-Wl,-rpath,{tmp_path}"))
    assert run(exe.path) == {
        "tables": "distinct",
        "app": f"app {HOST}",
        "app-value": "2000",
        "lib": f"lib {HOST}",
        # Through the executable's PLT entry of lib_side (non-PIE) or its real address (PIE).
        "lib-call": f"lib {HOST}",
        # lib_value lives in the executable (a copy relocation) and the library's code uses
        # that copy: it is what goes to the library's image and back.
        "lib-get": "1041",
        "lib-value": "41",
        "app-lib-side": "unchanged",  # the executable's table does not know the library's
        "lib-target": HOST,
        "error": "(null)",
        "stderr": "",
    }


def test_cxx_program(tmp_path: Path) -> None:
    need_tool(shutil.which("g++"), "g++ is not installed")
    exe = link(tmp_path, SRC / "cxx.cc", {"twice": "function"}, compiler="g++")
    assert run(exe.path) == {"twice": "1042", "target": HOST, "stderr": ""}


# ---- the library -----------------------------------------------------------------------


def test_library_exports_only_the_api() -> None:
    done = subprocess.run(["readelf", "-sW", str(build.runtime_library())],
                          capture_output=True, text=True, check=True)
    exported = set()
    for line in done.stdout.splitlines():
        f = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(f) == 8 and f[4] in ("GLOBAL", "WEAK") and f[5] == "DEFAULT" and f[6] != "UND":
            exported.add(f[7])
    assert exported == API


CXX = {"gcc": "g++", "clang": "clang++"}


@pytest.mark.parametrize("compiler", sorted(CXX))
def test_runtime_compiles_without_warnings(compiler: str, tmp_path: Path) -> None:
    need_tool(shutil.which(compiler) and shutil.which(CXX[compiler]), f"{compiler} missing")
    sources = build.sources()  # every C file of the folder but the Python extension's
    assert {p.name for p in sources} == {p.name for p in build.RUNTIME_DIR.glob("*.c")} - {
        "pytable.c"}
    for src in sources:
        cc("-std=c11", "-O2", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-fPIC",
           f"-I{build.RUNTIME_DIR}", "-c", src, "-o", tmp_path / f"{src.stem}.o",
           compiler=compiler)
    for src in ("app.c", "lib.c", "withlib.c", "cxx.cc"):
        for defines in ([], TARGET_DEFINES):
            cc("-Wall", "-Wextra", "-Werror", *defines, *build.cflags(), "-c", SRC / src,
               "-o", tmp_path / "x.o", compiler=CXX[compiler] if src.endswith(".cc") else compiler)


def test_library_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("OFFLINK_BUILD_RUNTIME", "1")  # the build on demand, not the prebuilt
    lib = build.runtime_library()
    assert lib.is_relative_to(tmp_path) and lib.name == "libofflink.a"
    stamp = lib.stat().st_mtime_ns
    assert build.runtime_library() == lib and lib.stat().st_mtime_ns == stamp
    assert build.libs() == [str(lib), "-ldl", "-lpthread"]
    assert build.cflags() == [f"-I{build.RUNTIME_DIR}"]
    assert (build.RUNTIME_DIR / "offlink.h").is_file()
    # No leftovers: the library and its seal (size and SHA-256) only.
    assert sorted(p.name for p in lib.parent.iterdir()) == ["libofflink.a", "libofflink.a.sha256"]


def test_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "b"))
    assert build.cache_dir() == tmp_path / "a"
    monkeypatch.delenv("OFFLINK_CACHE_DIR")
    assert build.cache_dir() == tmp_path / "b" / "offlink"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "c"))
    assert build.cache_dir() == tmp_path / "c" / ".cache" / "offlink"


def test_concurrent_builds(tmp_path: Path) -> None:
    """Processes racing to build the same library all get a complete one."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path), "PYTHONPATH": path,
           "OFFLINK_BUILD_RUNTIME": "1"}
    code = "from offlink.runtime import build; print(build.runtime_library())"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              text=True) for _ in range(4)]
    paths = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(paths) == 1
    lib = Path(paths.pop())
    assert subprocess.run(["ar", "t", str(lib)], capture_output=True, text=True,
                          check=True).stdout.split() == [p.stem + ".o" for p in build.sources()]
    assert sorted(p.name for p in lib.parent.iterdir()) == ["libofflink.a", "libofflink.a.sha256"]
    assert build._intact(lib)  # whichever build renamed last, library and seal agree


def test_build_failure_is_a_tool_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from offlink.errors import ToolError

    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("OFFLINK_BUILD_RUNTIME", "1")
    monkeypatch.setenv("CC", "false")
    with pytest.raises(ToolError,
                       match=r"building the offlink runtime failed \(exit status 1\): false "):
        build.runtime_library()
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []  # nothing half-built left


# ---- forged rows, the environment, the life cycle (issue 9), a big table (issue 11) ------


def symbol_offset(module: Module, name: str) -> int:
    """host_offset of any symbol (local ones too) of the linked module."""
    elf = ElfFile.open(module.path)
    sec = elf.section(SECTION)
    assert sec is not None
    return next(s.st_value for s in elf.symbols() if s.name == name) - sec.sh_addr


def test_forged_row_larger_than_its_host_object(tmp_path: Path) -> None:
    """A forged row (checksums right) names the image's 64-byte `vec` but points at the
    host's 4-byte `counter`: update_from would write 60 bytes past it (ASan: a global buffer
    overflow). The row is checked against the host object's st_size and refused."""
    module = link(tmp_path, SRC / "app.c", APP_ROWS, extra=("-fsanitize=address",))
    image = ImageSpec(HOST, "shared-object", (tmp_path / "app-pie.image.so").read_bytes())
    fill(module.path, APP_ROWS, [image],
         change={"vec": {"host_offset": symbol_offset(module, "counter")}})
    env = {"ASAN_OPTIONS": "detect_leaks=0"}
    out = run(module.path, "basic", env=env)
    assert out["side"] == "host"
    assert "variable 'vec' is 64 bytes but the host object there is 4" in out["error"]
    assert run_lines(module.path, "vars", env=env)[:5] == [
        "update_to: 0", "bump: 6", "host-counter: 6", "update_from: 0", "counter: 6"]


@pytest.mark.parametrize("target", ["relro_ptrs", "ro_limits"])
def test_forged_row_in_read_only_memory(tmp_path: Path, target: str) -> None:
    """The row of `vec` aimed at a read-only object of its size, in RELRO (a PIE's
    .data.rel.ro) or in .rodata: update_from must not write there (before: a fault). Such a
    row may be const data, so translate and update_to still work; the copy back is refused."""
    module = link(tmp_path, SRC / "app.c", APP_ROWS)
    image = ImageSpec(HOST, "shared-object", (tmp_path / "app-pie.image.so").read_bytes())
    fill(module.path, APP_ROWS, [image],
         change={"vec": {"host_offset": symbol_offset(module, target)}})
    out = run(module.path, "update-from", target)
    assert out["update-from"] == "-1"
    assert f"'vec' lies in read-only memory of {module.path}" in out["error"]
    assert run(module.path, "basic")["side"] == HOST


def test_forged_function_row_outside_the_code(tmp_path: Path) -> None:
    """A function row must lie in an executable segment (before: any segment)."""
    module = link(tmp_path, SRC / "app.c", APP_ROWS)
    image = ImageSpec(HOST, "shared-object", (tmp_path / "app-pie.image.so").read_bytes())
    fill(module.path, APP_ROWS, [image],
         change={"side": {"host_offset": symbol_offset(module, "counter")}})
    out = run(module.path, "basic")
    assert out["side"] == "host"
    assert "'side' is a function outside the module's code" in out["error"]


def test_mandatory_and_a_pointer_no_row_offers(app: Module) -> None:
    """OFFLINK_MANDATORY=1: a pointer with no counterpart would run host code, an error."""
    out = run(app.path, "miss", env={"OFFLINK_MANDATORY": "1"}, status=1)
    assert out["stderr"].startswith("offlink: error: ")
    assert "is not an offered function or variable (OFFLINK_MANDATORY)" in out["stderr"]
    assert out["stderr"].count("\n") == 1
    assert run(app.path, "miss")["stderr"] == ""  # without it: the pointer back, no error


def test_mandatory_error_names_the_module_offset_for_inspect(app: Module) -> None:
    """A pointer into the module (a static function no row offers): the error names it as a
    backtrace does, module(+st_value), and `offlink inspect --address +OFFSET` finds it."""
    import re
    import subprocess
    import sys

    err = run(app.path, "miss-static", env={"OFFLINK_MANDATORY": "1"}, status=1)["stderr"]
    found = re.search(r"\((\S+)\(\+(0x[0-9a-f]+)\)", err)
    assert found and found.group(1) == str(app.path), err
    assert f"`offlink inspect {app.path} --address +{found.group(2)}` says what is there" in err
    said = subprocess.run([sys.executable, "-m", "offlink", "inspect", str(app.path),
                           "--address", f"+{found.group(2)}"], capture_output=True, text=True)
    assert said.returncode == 1 and "nearest host symbol: helper+0x0" in said.stdout, said


def test_environment_is_read_once(app: Module) -> None:
    """OFFLINK_TARGET set by the program after it started changes nothing."""
    out = run(app.path, "late-env")
    assert (out["side"], out["error"]) == (HOST, "(null)")


def test_setuid_program_ignores_the_environment(app: Module, tmp_path: Path) -> None:
    """secure_getenv: a setuid program takes neither OFFLINK_TARGET nor TMPDIR from its
    caller (they choose what is loaded and from where)."""
    if os.geteuid() != 0:
        pytest.skip("making a setuid program for another user needs root")
    exe = tmp_path / "setuid-app"
    shutil.copy(app.path, exe)
    os.chown(exe, 65534, 65534)  # nobody
    os.chmod(exe, 0o4755)
    out = run(exe, "basic", env={"OFFLINK_TARGET": "none", "OFFLINK_MANDATORY": "1"})
    assert (out["side"], out["error"]) == (HOST, "(null)")
    out = run(app.path, "basic", env={"OFFLINK_TARGET": "none"})  # the same, not setuid
    assert out["side"] == "host"


def test_table_pointer_at_the_end_of_a_mapping(app: Module) -> None:
    """Nothing of a table is read before its bounds are known (before: a fault)."""
    out = run(app.path, "edge")
    assert out["edge"] == "same"
    assert "is not inside a loaded module" in out["error"]


@pytest.mark.parametrize("runtime_in_exe", [False, True])
def test_dlclose_unregisters_and_frees_the_image(tmp_path: Path, runtime_in_exe: bool) -> None:
    """dlopen / dlclose / dlopen of two libraries, each with its own table: each answers from
    its own image, and its image is unloaded with it (the registry in each library's own copy
    of the runtime, or in the executable's, which the libraries bind to)."""
    libs = []
    for tag in ("a", "b"):
        src = tmp_path / f"cycle{tag}.c"  # the tag in the source: the image gets it too
        src.write_text(f'#define TAG "{tag}"\n' + (SRC / "cycle.c").read_text())
        m = link(tmp_path, src, {"which": "function"}, mode="shared", name=f"libcycle{tag}")
        libs.append(str(m.path))
    extra: tuple[str, ...] = ("-ldl",)
    if runtime_in_exe:  # the executable exports its copy of the runtime; libraries bind to it
        extra = ("-rdynamic", "-Wl,--whole-archive", *build.libs()[:1],
                 "-Wl,--no-whole-archive", "-ldl")
    exe = link(tmp_path, SRC / "cycle_main.c", None, extra=extra, name="cycle").path
    lines = run_lines(exe, libs[0], libs[1], libs[0], libs[1])
    assert lines == [
        f"1: a {HOST}, images mapped", "1: closed, images none",
        f"2: b {HOST}, images mapped", "2: closed, images none",
        f"3: a {HOST}, images mapped", "3: closed, images none",
        f"4: b {HOST}, images mapped", "4: closed, images none",
    ]


def test_no_deadlock_with_a_constructor_using_the_module(tmp_path: Path) -> None:
    """A constructor run by another thread's dlopen (the loader's lock held) uses the module
    whose first use, in the main thread, is loading its image (waiting for that lock)."""
    ctor = tmp_path / "libctor.so"
    cc("-O1", "-fPIC", "-shared", SRC / "ctor.c", "-o", ctor)
    exe = link(tmp_path, SRC / "deadlock.c", {"side": "function"}, extra=("-rdynamic",)).path
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFLINK_")}
    done = subprocess.run([str(exe), str(ctor)], capture_output=True, text=True, env=env,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == [f"ctor: {HOST}", f"main: {HOST}"]


def many_rows_source(n: int) -> str:
    """n offered rows (every fourth a variable), each with its own answer on each side."""
    out = ["#include <offlink.h>", "#include <stdio.h>",
           "#define B (OFFLINK_IS_TARGET ? 1000000 : 0)"]
    for i in range(n):
        out.append(f"long v{i}[2] = {{B, {i}}};" if i % 4 == 0 else
                   f"long f{i}(void) {{ return B + {i}; }}")
    out += ["#if !OFFLINK_IS_TARGET", '#define API __attribute__((visibility("default")))',
            "API int check_rows(void) {", "  int bad = 0;"]
    for i in range(n):
        if i % 4 == 0:
            out.append(f"  {{ long *t = OFFLINK_TRANSLATE(OFFLINK_TABLE, v{i});"
                       f" bad += t == v{i} || t[0] != 1000000 || t[1] != {i}; }}")
        else:
            out.append(f"  bad += OFFLINK_TRANSLATE(OFFLINK_TABLE, f{i})() != 1000000 + {i};")
    out += ['  printf("target: %s\\nbad: %d\\n", offlink_target_name(OFFLINK_TABLE), bad);',
            "  return bad != 0;", "}", "#ifndef LIBRARY",
            "int main(void) { return check_rows(); }", "#endif", "#endif"]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("mode", ["pie", "shared"])
def test_first_use_of_a_big_table_resolves_every_row(tmp_path: Path, mode: str) -> None:
    """4000 rows, resolved in one pass at the first use (issue 11): each row translates to
    its own counterpart in the image (functions called, variables read there)."""
    n = 4000
    src = tmp_path / "many.c"
    src.write_text(many_rows_source(n))
    rows = {f"v{i}" if i % 4 == 0 else f"f{i}": "variable" if i % 4 == 0 else "function"
            for i in range(n)}
    extra = ("-DLIBRARY",) if mode == "shared" else ()
    module = link(tmp_path, src, rows, mode=mode, extra=extra)
    exe = module.path
    if mode == "shared":
        main = tmp_path / "main.c"
        main.write_text("int check_rows(void);\nint main(void) { return check_rows(); }\n")
        exe = tmp_path / "main"
        cc(main, module.path, f"-Wl,-rpath,{tmp_path}", "-o", exe)
    assert run(exe) == {"target": HOST, "bad": "0", "stderr": ""}


# ---- the registry: tables registered lazily, modules unregistered ------------------------

# tests/runtime/rekey.c's two tables and what each says: A has an image no loader takes, B
# no target; the program copies A, B, A, B, A over one address, four threads using each.
REKEY_TABLES = {
    "TABLE_A": ([ImageSpec("nvptx64-nvidia-cuda", "ptx", b"// ptx\n")],
                "target 'nvptx64-nvidia-cuda': this runtime cannot load ptx images"),
    "TABLE_B": ([], "the offload table has no targets"),
}


def rekey_program(tmp: Path, compiler: str, *link_args: object) -> Path:
    exe = tmp / "rekey"
    defines = [f"-D{name}={{{','.join(map(str, build_table(images, [])))}}}"
               for name, (images, _) in REKEY_TABLES.items()]
    cc("-g", "-O1", "-std=c11", "-pthread", "-Wall", "-Wextra", "-Werror", *build.cflags(),
       *defines, SRC / "rekey.c", *link_args, "-o", exe, compiler=compiler)
    return exe


def check_rekey(exe: Path) -> None:
    errors = [message for _, message in REKEY_TABLES.values()]
    assert run_lines(exe) == [f"{r} {t}: {exe}: {errors[r % 2]}"
                              for r in range(5) for t in range(4)]


def test_a_table_replaced_at_its_address_is_told_apart(tmp_path: Path) -> None:
    """A table no constructor registered is known by its address and its key (total_size
    and meta_crc32 from its header): another table later at that address is set up afresh,
    whichever of the threads using it at once comes first."""
    check_rekey(rekey_program(tmp_path, CC, *build.libs()))


def test_the_runtime_reads_the_header_through_its_field_offsets() -> None:
    """table.h's OFL_HDR_* say where each header field lies (tests/test_ctable.py checks
    them against the format's declaration); no field is read at a number of its own (the
    lazy key was read at table + 16 and table + 32)."""
    for src in build.sources():
        found = re.findall(r"\b(?:table|base)\s*\+\s*[0-9]+", src.read_text())
        assert not found, f"{src.name}: {found}"


def test_the_registry_has_no_data_race(tmp_path: Path) -> None:
    """ThreadSanitizer over the runtime's own sources, built into rekey.c: threads first
    using a replaced table at once (before: the key was read with no lock while another
    thread rewrote it under the registry's lock)."""
    clang = shutil.which("clang-19")
    probe = tmp_path / "probe.c"
    probe.write_text("int main(void) { return 0; }\n")
    found = clang and subprocess.run([clang, "-fsanitize=thread", probe, "-o", tmp_path / "probe"],
                                     capture_output=True).returncode == 0
    need_tool(found, "clang-19 with ThreadSanitizer is not installed (apt-get install clang-19 "
              "libclang-rt-19-dev)")
    exe = rekey_program(tmp_path, str(clang), "-fsanitize=thread", *build.sources(), "-ldl")
    check_rekey(exe)  # a report makes the program exit 66


def test_last_error_outlives_the_unloaded_module(tmp_path: Path) -> None:
    """The message of a module that runs on the host, read after its library is dlclose()d
    (before: a pointer into the module record its unregistration freed; AddressSanitizer
    reads each byte in tests/runtime/stale_error.c)."""
    src = tmp_path / "cycle.c"
    src.write_text('#define TAG "a"\n' + (SRC / "cycle.c").read_text())
    lib = link(tmp_path, src, {"which": "function"}, mode="shared", name="libcycle").path
    exe = link(tmp_path, SRC / "stale_error.c", None, name="stale_error",
               extra=("-fsanitize=address", "-rdynamic", "-ldl")).path
    out = run(exe, str(lib), env={"OFFLINK_TARGET": "none"})
    assert out["answer"] == "a host"
    assert out["error"] == f"{lib}: OFFLINK_TARGET=none: running on the host"
