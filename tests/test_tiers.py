"""The tiers (tests/README.md): tests/conftest.py's NEEDS names tests that exist and markers that
are registered, `--no-toolchains` shadows what it should, and a unit test that asks for a tool
fails, so `make test-fast` cannot hold a test that needs one."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

from conftest import NEED_MARKERS, NEEDS, ROOT, reason_markers, shadow_toolchains

TESTS = ROOT / "tests"


def test_needs_names_tests_that_exist_and_registered_markers():
    markers = re.search(r"^markers = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(),
                        re.M | re.S).group(1)
    assert set(re.findall(r'^ +"(\w+): ', markers, re.M)) == {"unit", *NEED_MARKERS}
    for module, (markers, tests) in NEEDS.items():
        tree = ast.parse((TESTS / module).read_text())
        functions = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert {name.split("[")[0] for name in tests} - functions == set(), module
        for needs in [markers, *tests.values()]:
            assert set(needs) <= set(NEED_MARKERS), (module, needs)


def test_a_reason_names_its_tier():
    assert reason_markers("clang-19 or libomptarget missing (apt-get install clang-19)") == {
        "clang19"}
    assert reason_markers("clang-22, clang-tools-22 or liboffload-22-dev missing") == {"clang22"}
    assert reason_markers("no CUDA toolkit (nvcc) found") == {"cuda"}
    assert reason_markers("needs gcc-12-offload-amdgcn") == {"gcc_offload"}
    assert reason_markers("flang-new-19 missing (.ci/run installs flang-19)") == {"flang"}
    assert reason_markers("cmake is not installed") == {"other_tools"}
    assert reason_markers("ld.gold is not installed (binutils)") == {"host"}
    assert reason_markers("the object is written for x86-64 hosts only") == set()


def test_no_toolchains_shadows_compilers_linkers_and_build_tools(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    tools = ["gcc", "gcc-12", "cc", "g++", "ld", "ld.gold", "as", "objcopy", "make", "clang",
             "clang-19", "clang++-22", "clang-offload-packager-19", "llvm-lto2-19", "ld.lld-19",
             "x86_64-linux-gnu-accel-nvptx-none-gcc-12", "nvptx-none-ld", "nvcc", "ptxas",
             "flang-new-19", "gfortran-12", "cmake", "meson", "ninja", "pkg-config", "distccd",
             "redis-server"]
    others = ["python3", "sh", "git", "jq", "asdf", "make-dfsg", "ccache-like"]
    for name in tools + others:
        (bin_ / name).write_text("#!/bin/sh\nexit 0\n")
        (bin_ / name).chmod(0o755)
    shadows = tmp_path / "shadows"
    shadows.mkdir()
    path = shadow_toolchains(shadows, str(bin_))
    assert path == f"{shadows}{os.pathsep}{bin_}"
    assert sorted(p.name for p in shadows.iterdir() if p.name != ".stand-in") == sorted(tools)
    proc = subprocess.run(["gcc", "-c", "x.c"], env={**os.environ, "PATH": path},
                          capture_output=True, text=True)
    assert proc.returncode == 127
    assert "gcc run under --no-toolchains" in proc.stderr and "NEEDS" in proc.stderr


CONFTEST = TESTS / "conftest.py"
LOADER = f"""\
import importlib.util, sys
spec = importlib.util.spec_from_file_location("offlink_conftest", {str(CONFTEST)!r})
module = importlib.util.module_from_spec(spec)
sys.modules["offlink_conftest"] = module
spec.loader.exec_module(module)
from offlink_conftest import (pytest_addoption, pytest_collection_modifyitems,  # noqa: F401
                              pytest_configure, pytest_runtest_protocol, pytest_runtest_setup)
"""
SAMPLE = """\
from offlink_conftest import need_tool, needs_tool

def test_unit_asking_for_a_tool():
    need_tool("/usr/bin/frob", "frob is not installed")

@needs_tool(False, "cmake is not installed")
def test_marked():
    need_tool("/usr/bin/cmake", "cmake is not installed")
    need_tool("/usr/bin/clang-19", "clang-19 is not installed")
"""


def test_a_unit_test_asking_for_a_tool_fails_even_where_it_is_installed(tmp_path):
    """And a marked test that asks for a tool its markers do not name is warned about."""
    (tmp_path / "conftest.py").write_text(LOADER)
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = {k: v for k, v in os.environ.items() if k != "CI"}

    def pytest(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-W", "ignore::pytest.PytestUnknownMarkWarning", *args,
                               str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                              text=True)
        return proc.stdout

    unit = pytest("-m", "unit")
    assert "1 failed, 1 deselected" in unit.splitlines()[-1], unit
    assert "test_unit_asking_for_a_tool needs a tool (frob is not installed) but is marked as " \
           "a unit test" in unit
    marked = pytest("-m", "other_tools")
    assert "1 passed, 1 deselected, 1 warning" in marked.splitlines()[-1], marked
    assert "test_marked needs a tool (clang-19 is not installed) but is not marked clang19" \
           in marked
