"""`offlink inspect` in the terms of the toolchain that made a binary's offload code: --symbol
for GCC's and clang's objects linked by offlink (samples/users_openmp), addresses read as hex
as nm and /proc/PID/maps print them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import SAMPLES, need_tool, run

from offlink.errors import UsageError
from offlink.inspect import parse_address

SAMPLE = SAMPLES / "users_openmp"
SOURCES = ("main", "util", "vecops", "stats")
GCC = ["gcc", "-O2", "-fopenmp", "-foffload=nvptx-none",
       "-foffload-options=nvptx-none=-misa=sm_80"]
CLANG = ["clang-19", "-O2", "-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu"]


@pytest.mark.parametrize("address, base, want", [
    ("555555555149", "555555554000", (0x555555555149, 0x555555554000)),
    ("0x555555555149", "555555554000-555555575000 r--p 00000000 fe:01 1 /x",
     (0x555555555149, 0x555555554000)),
    ("1149", None, (0x1149, None)),  # nm's st_value, bare
    ("0000000000001149", None, (0x1149, None)),  # nm pads to 16 digits
    ("+0x1149", None, (0x1149, None)),
    ("555555554000+1149", None, (0x555555555149, 0x555555554000)),
    ("7f1234abc000", "7f1234a00000", (0x7F1234ABC000, 0x7F1234A00000)),
])
def test_addresses_are_hex_as_maps_and_nm_print_them(address, base, want):
    assert parse_address(address, base) == want


@pytest.mark.parametrize("address, base, why", [
    ("1", "93824992231424", "--load-base 93824992231424 is ambiguous: read as hex (as "
                            "/proc/PID/maps and nm print it) it is past user space; if it is "
                            "decimal, give it as 0x555555554000"),
    ("1", "4096", "--load-base 4096 is ambiguous"),
    ("1", "555555554001", "--load-base 555555554001 is not a page boundary"),
    ("12g", None, "--address takes a number: hex"),
    ("93824992235849", None, "--address 93824992235849 is ambiguous"),
])
def test_ambiguous_or_wrong_numbers_are_refused(address, base, why):
    with pytest.raises(UsageError) as e:
        parse_address(address, base)
    assert str(e.value).startswith(why), str(e.value)


def link_sample(offlink: str, compiler: list[str], tmp_path: Path) -> Path:
    for name in SOURCES:
        run([*compiler, "-c", SAMPLE / f"{name}.c", "-o", tmp_path / f"{name}.o"])
    run([offlink, "link", *compiler, *(tmp_path / f"{n}.o" for n in SOURCES), "-o",
         tmp_path / "app"])
    return tmp_path / "app"


def need_gcc_offload() -> None:
    need_tool(shutil.which("x86_64-linux-gnu-accel-nvptx-none-gcc-12"),
              "gcc-12-offload-nvptx is not installed")


def need_clang() -> None:
    need_tool(shutil.which("clang-19"), "clang-19 is not installed")


@pytest.fixture(scope="module")
def gcc_app(offlink, tmp_path_factory) -> Path:
    need_gcc_offload()
    return link_sample(offlink, GCC, tmp_path_factory.mktemp("gcc"))


@pytest.fixture(scope="module")
def clang_app(offlink, tmp_path_factory) -> Path:
    need_clang()
    return link_sample(offlink, CLANG, tmp_path_factory.mktemp("clang"))


def symbol(offlink: str, app: Path, name: str):
    return run([offlink, "inspect", app, "--symbol", name], check=False)


def test_gcc_declare_target_function_is_found_in_the_nvptx_image(offlink, gcc_app):
    proc = symbol(offlink, gcc_app, "scale")
    assert proc.returncode == 1 and proc.stderr == ""
    assert proc.stdout.startswith("'scale' is in the nvptx-none image (a `declare target` "
                                  "function or variable GCC compiled for the device), but GCC's "
                                  "offload tables list only target regions' kernels")
    proc = symbol(offlink, gcc_app, "main")  # host code only
    assert proc.returncode == 1 and "'main' is not in the device image" in proc.stdout
    proc = symbol(offlink, gcc_app, "bias")  # a declare target variable: a row
    assert proc.returncode == 0 and proc.stdout.startswith("bias: variable at 0x")


def test_clang_function_pointer_suggests_declare_target_indirect(offlink, clang_app):
    proc = symbol(offlink, clang_app, "scale")
    assert proc.returncode == 1 and proc.stderr == ""
    assert proc.stdout.startswith("'scale' is in the openmp-x86_64-pc-linux-gnu image but has "
                                  "no row: clang lists a function only when it is `declare "
                                  "target indirect`"), proc.stdout
    assert "#pragma omp begin declare target indirect" in proc.stdout
    assert symbol(offlink, clang_app, "bias").returncode == 0
