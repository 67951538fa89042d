"""tests/conftest.py's need_tool: a test whose tool is missing skips on a developer's machine
and fails under CI=true, where .ci/run installs every tool a test asks for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

CONFTEST = ROOT / "tests" / "conftest.py"
LOADER = f"""\
import importlib.util, sys
spec = importlib.util.spec_from_file_location("offlink_conftest", {str(CONFTEST)!r})
module = importlib.util.module_from_spec(spec)
sys.modules["offlink_conftest"] = module
spec.loader.exec_module(module)
from offlink_conftest import pytest_configure, pytest_runtest_setup  # noqa: F401
"""
TESTS = """\
import pytest
from offlink_conftest import need_tool, needs_tool

@pytest.fixture
def expensive():
    raise AssertionError("set up although the tool is missing")

def test_call():
    need_tool(None, "frobnicator is not installed")

@needs_tool(True, "frobnicator is not installed")
def test_mark(expensive):
    pass

def test_present():
    assert need_tool("/usr/bin/frob", "frobnicator is not installed") == "/usr/bin/frob"

@needs_tool(False, "frobnicator is not installed")
def test_present_mark():
    pass
"""


# the marker fails the test in its set-up (an error), before its fixtures run
FAILS = "1 failed, 2 passed, 1 error"


@pytest.mark.parametrize("ci,outcome", [(None, "2 passed, 2 skipped"), ("", "2 passed, 2 skipped"),
                                        ("false", "2 passed, 2 skipped"),
                                        ("true", FAILS), ("1", FAILS)])
def test_missing_tool_skips_here_and_fails_in_ci(tmp_path: Path, ci, outcome):
    (tmp_path / "conftest.py").write_text(LOADER)
    (tmp_path / "test_tools.py").write_text(TESTS)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfEs", "-p",
                           "no:cacheprovider", str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    last = proc.stdout.strip().splitlines()[-1]
    assert outcome in last, proc.stdout
    assert (proc.returncode == 0) == (outcome != FAILS)
    assert "frobnicator is not installed" in proc.stdout
    assert "set up although the tool is missing" not in proc.stdout
    if ci == "true":
        assert "CI=true: .ci/run is meant to install it" in proc.stdout
