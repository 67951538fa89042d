"""Real open-source projects built unmodified with their own build systems through offlink
(`offlink cc` as the compiler launcher, `offlink link` as the linker launcher), their own
tests run and their programs' behaviour compared with a plain build of the same sources.

zlib 1.3.1 (tests/real_projects/zlib, its licence in LICENSE): CMake builds the shared
library libz.so (with a version script) and the static libz.a from 15 CUs, and example,
minigzip, example64 and minigzip64 from 4 more; the programs link libz.so by its path.
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
