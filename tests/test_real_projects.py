"""Real open-source projects built unmodified with their own build systems through offlink,
their own tests run and their programs' behaviour compared with a plain build of the same
sources (tests/real_projects/README.md says where each comes from).

zlib 1.3.1: CMake (`offlink cc` as the compiler launcher, `offlink link` as the linker
launcher) builds the shared library libz.so (with a version script) and the static libz.a
from 15 CUs, and example, minigzip, example64 and minigzip64 from 4 more; the programs link
libz.so by its path.

Lua 5.4.6: its makefile with CC="offlink cc gcc" builds liblua.a from 31 CUs and lua from
one more; its internals have `internal` visibility. Its test suite (testes/all.lua) runs.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import zlib
from pathlib import Path

import pytest
from conftest import run

PROJECTS = Path(__file__).resolve().parent / "real_projects"
ZLIB_CUS = 15


def need(tool: str) -> None:
    if shutil.which(tool) is None:
        if os.environ.get("CI"):  # .ci/run installs them: missing there is a failure
            pytest.fail(f"{tool} is not installed")
        pytest.skip(f"{tool} is not installed")


def cmake_build(source: Path, build: Path, *options: str, targets: tuple[str, ...] = ()) -> str:
    """Configure and build with Ninja; the verbose build log (the commands it ran)."""
    env = {**os.environ, "OFFLINK_PROGRESS": "0"}
    run(["cmake", "-S", source, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
         *options], env=env)
    chosen = ["--target", *targets] if targets else []
    return run(["cmake", "--build", build, "-j2", "--verbose", *chosen], env=env).stdout


def ctest(build: Path, env: dict | None = None) -> str:
    out = run(["ctest", "--output-on-failure"], cwd=build, env=env).stdout
    assert "100% tests passed" in out
    return out


def launchers(offlink: str) -> list[str]:
    return [f"-DCMAKE_C_COMPILER_LAUNCHER={offlink};cc",
            f"-DCMAKE_C_LINKER_LAUNCHER={offlink};link"]


def table_names(offlink: str, binary: Path) -> set[str]:
    import json

    info = json.loads(run([offlink, "inspect", "--json", binary]).stdout)
    return {s["name"] for s in info["table"]["symbols"]}


@pytest.fixture(scope="module")
def zlib_builds(offlink, tmp_path_factory) -> tuple[Path, Path, str]:
    """zlib built plainly and through offlink from the same (copied) sources."""
    need("cmake")
    need("ninja")
    root = tmp_path_factory.mktemp("zlib")
    source = root / "src"
    shutil.copytree(PROJECTS / "zlib", source)
    cmake_build(source, root / "plain")
    log = cmake_build(source, root / "offlink", *launchers(offlink))
    return root / "plain", root / "offlink", log


DRIVER = """\
#include <stdio.h>
#include <stdlib.h>
#include <offlink.h>
#include <zlib.h>
unsigned char text[64] = "offlink";
unsigned long zcheck(int extra) { return crc32(0, text, sizeof text + extra); }
int main(int argc, char **argv) {
  unsigned long (*check)(int) = (unsigned long (*)(int))offlink_translate(OFFLINK_TABLE,
                                                                          (void *)zcheck);
  printf("%d %s %lx\\n", check != zcheck, zlibVersion(), check(0));
  fflush(stdout);
  return (int)check(atoi(argv[1])) & 0;
}
"""


def test_zlib_builds_through_offlink_and_passes_its_tests(offlink, zlib_builds, tmp_path):
    plain, fat, log = zlib_builds
    # Every compile and every link went through offlink (ar makes libz.a of fat objects).
    assert log.count(f"{offlink} cc ") == 2 * ZLIB_CUS + 4
    assert log.count(f"{offlink} link ") == 5  # libz.so and the four programs
    assert "libz.so.1.3.1" in next(ln for ln in log.splitlines()
                                   if f"{offlink} link" in ln and "-o example " in ln)
    ctest(plain)
    ctest(fat)
    for program in ("example", "example64"):
        # example writes foo.gz in its working folder
        assert run([fat / program], cwd=tmp_path).stdout == \
            run([plain / program], cwd=tmp_path).stdout


def test_zlib_minigzip_output_is_the_plain_builds(zlib_builds, tmp_path):
    plain, fat, _ = zlib_builds
    data = (PROJECTS / "zlib" / "zlib.h").read_bytes()
    for build in (plain, fat):
        (tmp_path / build.name).mkdir()
        (tmp_path / build.name / "zlib.h").write_bytes(data)
        run([build / "minigzip", "-9", "zlib.h"], cwd=tmp_path / build.name)
    packed = (tmp_path / "offlink" / "zlib.h.gz").read_bytes()
    assert packed == (tmp_path / "plain" / "zlib.h.gz").read_bytes()
    assert zlib.decompress(packed, 31) == data
    # Each build's minigzip unpacks what the other one packed.
    run([plain / "minigzip", "-d", "zlib.h.gz"], cwd=tmp_path / "offlink")
    run([fat / "minigzip64", "-d", "zlib.h.gz"], cwd=tmp_path / "plain")
    for side in ("plain", "offlink"):
        assert (tmp_path / side / "zlib.h").read_bytes() == data


def test_zlib_tables_and_the_library_image(offlink, zlib_builds, tmp_path):
    """libz.so's table offers zlib's API; its host image is a working zlib of its own."""
    _, fat, _ = zlib_builds
    names = table_names(offlink, fat / "libz.so.1.3.1")
    assert {"deflate", "inflate", "crc32", "compress2", "uncompress", "gzopen",
            "zlibVersion", "z_errmsg"} <= names
    assert "example" not in names and table_names(offlink, fat / "example") == {"main"}
    image = tmp_path / "libz-image.so"
    run([offlink, "extract", fat / "libz.so.1.3.1", "--target", "host", "--output", image])
    lib = ctypes.CDLL(str(image))
    lib.zlibVersion.restype = ctypes.c_char_p
    assert lib.zlibVersion() == b"1.3.1"
    data = (PROJECTS / "zlib" / "deflate.c").read_bytes()
    lib.crc32.restype = ctypes.c_ulong
    lib.crc32.argtypes = [ctypes.c_ulong, ctypes.c_char_p, ctypes.c_uint]
    assert lib.crc32(0, data, len(data)) == zlib.crc32(data)
    size = ctypes.c_ulong(lib.compressBound(ctypes.c_ulong(len(data))))
    out = ctypes.create_string_buffer(size.value)
    assert lib.compress2(out, ctypes.byref(size), data, ctypes.c_ulong(len(data)), 9) == 0
    assert zlib.decompress(out.raw[:size.value]) == data


def test_zlib_with_address_sanitizer(offlink, zlib_builds, tmp_path):
    """zlib built with ASan and UBSan through offlink passes its tests; a program of ours
    linked to that libz.so runs its image's code, and an overflow there is ASan's report."""
    plain, _, _ = zlib_builds
    source = plain.parent / "src"
    flags = "-fsanitize=address,undefined -fno-sanitize-recover=all"
    build = tmp_path / "asan"
    cmake_build(source, build, f"-DCMAKE_C_FLAGS={flags}", *launchers(offlink),
                targets=("zlib", "example", "example64"))
    assert "libasan.so" in run(["readelf", "-d", build / "libz.so.1.3.1"]).stdout
    ctest(build)
    assert run([build / "example"], cwd=tmp_path).stdout == \
        run([plain / "example"], cwd=tmp_path).stdout
    (tmp_path / "driver.c").write_text(DRIVER)
    cflags = run([offlink, "config", "--cflags"]).stdout.split()
    libs = run([offlink, "config", "--libs"]).stdout.split()
    run([offlink, "cc", "gcc", "-g", *flags.split(), *cflags, f"-I{source}", f"-I{build}", "-c",
         "driver.c"], cwd=tmp_path)
    run([offlink, "link", "gcc", *flags.split(), "driver.o", build / "libz.so.1.3.1",
         f"-Wl,-rpath,{build}", *libs, "-o", "driver"], cwd=tmp_path)
    text = b"offlink".ljust(64, b"\0")
    assert run([tmp_path / "driver", "0"]).stdout == f"1 1.3.1 {zlib.crc32(text):x}\n"
    proc = run([tmp_path / "driver", "8"], check=False)
    assert proc.returncode != 0
    assert "AddressSanitizer: global-buffer-overflow" in proc.stderr
    # zcheck's frame is the image's (mapped by dlopen), far from the executable's main
    pc = {ln.split()[3]: int(ln.split()[1], 16) for ln in proc.stderr.splitlines()
          if ln.strip().startswith("#") and " in " in ln}
    assert abs(pc["zcheck"] - pc["main"]) > 1 << 32


LUA_SCRIPT = """\
local t = {}
for i = 1, 200 do t[i] = (i * 7919) % 211 end
table.sort(t)
local s = 0
for _, v in ipairs(t) do s = s + v end
print(s, t[1], t[200], string.format("%.6f", math.sin(1) + math.sqrt(2)))
print(("offlink"):rep(3, "-"):upper(), #tostring({}) > 0, utf8.char(72, 228, 8364))
co = coroutine.wrap(function(a) local b = coroutine.yield(a + 1) return b * 2 end)
print(co(1), co(20), select("#", pcall(error, {})))
"""


def lua_make(source: Path, *cc: str) -> None:
    """Lua's own makefile, Linux settings without readline (not installed here)."""
    run(["make", "-s", "-j2", "-C", source, *cc, "MYCFLAGS=-std=c99 -DLUA_USE_LINUX",
         "MYLIBS=-ldl"], env={**os.environ, "OFFLINK_PROGRESS": "0"})


@pytest.fixture(scope="module")
def lua_builds(offlink, tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("lua")
    for name, cc in (("plain", ()), ("offlink", (f"CC={offlink} cc gcc",))):
        shutil.copytree(PROJECTS / "lua", root / name)
        lua_make(root / name, *cc)
    return root / "plain", root / "offlink"


def test_lua_builds_through_offlink_and_passes_its_test_suite(offlink, lua_builds, tmp_path):
    plain, fat = lua_builds
    for build in (plain, fat):
        # _U: the suite's user mode (no internal-test library, which this build leaves out)
        out = run([build / "lua", "-e_U=true", "all.lua"], cwd=build / "testes").stdout
        assert "final OK !!!" in out
    (tmp_path / "script.lua").write_text(LUA_SCRIPT)
    expected = run([plain / "lua", tmp_path / "script.lua"]).stdout
    assert run([fat / "lua", tmp_path / "script.lua"]).stdout == expected
    assert expected.splitlines()[1:] == ["OFFLINK-OFFLINK-OFFLINK\ttrue\tH\u00e4\u20ac",
                                         "2\t40\t2"]


def test_lua_internal_functions_stay_out_of_the_table(offlink, lua_builds, tmp_path):
    """LUAI_FUNC functions (visibility internal) are not offered; the API is, and the image is
    a working Lua interpreter of its own."""
    _, fat = lua_builds
    names = table_names(offlink, fat / "lua")
    assert {"lua_newstate", "lua_pcallk", "luaL_newstate", "luaL_openlibs",
            "luaL_loadstring", "lua_tolstring", "luaopen_string"} <= names
    assert not {n for n in names if n.startswith(("luaG_", "luaH_", "luaV_", "luaD_"))}
    proc = run([offlink, "inspect", fat / "lua", "--symbol", "luaG_typeerror"], check=False)
    assert proc.returncode == 1  # not offered
    assert "no CU offers it" in proc.stdout and "offlink cc" not in proc.stdout
    image = tmp_path / "lua-image.so"
    run([offlink, "extract", fat / "lua", "--target", "host", "--output", image])
    lua = ctypes.CDLL(str(image))
    lua.luaL_newstate.restype = ctypes.c_void_p
    lua.lua_tolstring.restype = ctypes.c_char_p
    lua.lua_tolstring.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    state = ctypes.c_void_p(lua.luaL_newstate())
    lua.luaL_openlibs(state)
    code = b"return string.format('%d %s', 6 * 7, ('x'):rep(3))"
    assert lua.luaL_loadstring(state, code) == 0
    assert lua.lua_pcallk(state, 0, 1, 0, ctypes.c_void_p(0), ctypes.c_void_p(0)) == 0
    assert lua.lua_tolstring(state, -1, None) == b"42 xxx"
    lua.lua_close(state)


def test_lua_linked_with_only_its_c_api_offered(offlink, lua_builds, tmp_path):
    """`--offload-symbol 'lua_*' --offload-symbol 'luaL_*'` on lua's link: only those rows, and
    the image (linked keeping what they reach) still runs Lua code through them."""
    _, fat = lua_builds
    run([offlink, "link", "--offload-symbol", "lua_*", "--offload-symbol", "luaL_*", "gcc",
         "-Wl,-E", "-o", tmp_path / "lua", "lua.o", "liblua.a", "-lm", "-ldl"], cwd=fat)
    names = table_names(offlink, tmp_path / "lua")
    assert names and all(n.startswith(("lua_", "luaL_")) for n in names)
    assert table_names(offlink, fat / "lua") - names >= {"main", "luaopen_string"}
    (tmp_path / "script.lua").write_text(LUA_SCRIPT)
    assert run([tmp_path / "lua", tmp_path / "script.lua"]).stdout == \
        run([fat / "lua", tmp_path / "script.lua"]).stdout
    image = tmp_path / "lua-image.so"
    run([offlink, "extract", tmp_path / "lua", "--target", "host", "--output", image])
    exported = run(["nm", "-D", "--defined-only", image]).stdout.split()
    assert "luaL_newstate" in exported and "luaopen_string" not in exported
    lua = ctypes.CDLL(str(image))
    lua.luaL_newstate.restype = ctypes.c_void_p
    lua.lua_tolstring.restype = ctypes.c_char_p
    lua.lua_tolstring.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    state = ctypes.c_void_p(lua.luaL_newstate())
    lua.luaL_openlibs(state)  # reaches every standard library: they stay in the image
    assert lua.luaL_loadstring(state, b"return ('x'):rep(3) .. #string.format('%d', 42)") == 0
    assert lua.lua_pcallk(state, 0, 1, 0, ctypes.c_void_p(0), ctypes.c_void_p(0)) == 0
    assert lua.lua_tolstring(state, -1, None) == b"xxx2"
    lua.lua_close(state)
