"""Shared test helpers: the offlink command, building and running samples."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


def offlink_command(tmp_dir: Path) -> str:
    """The installed `offlink` script beside this Python, else a wrapper running `-m offlink`."""
    script = Path(sys.executable).parent / "offlink"
    if script.exists():
        return str(script)
    wrapper = tmp_dir / "offlink"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}${{PYTHONPATH:+:$PYTHONPATH}}" '
                       f'exec "{sys.executable}" -m offlink "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def in_ci() -> bool:
    """Whether this is the CI run (.ci/run on a fresh machine, with every optional toolchain
    installed), where a missing tool is a broken set-up, not a reason to skip."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def need_tool(found, reason: str):
    """`found` (a path, a command, True) when it is there; else skip the test with the reason,
    or fail it under CI=true: .ci/run installs every tool a test asks for here, so a skip
    there would count a test that never ran as a pass."""
    if found:
        return found
    if in_ci():
        pytest.fail(f"{reason} (CI=true: .ci/run is meant to install it)", pytrace=False)
    pytest.skip(reason)


def needs_tool(missing: bool, reason: str) -> pytest.MarkDecorator:
    """A test marker with need_tool's rule: skip when the tool is missing, fail under CI=true.
    Checked before the test's fixtures are set up (pytest_runtest_setup below)."""
    return pytest.mark.needs_tool(missing=missing, reason=reason)


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "needs_tool(missing, reason): skip when a tool is "
                            "missing, fail under CI=true (tests/conftest.py: need_tool)")


def pytest_runtest_setup(item) -> None:
    for mark in item.iter_markers("needs_tool"):
        if mark.kwargs["missing"]:
            need_tool(None, mark.kwargs["reason"])


@pytest.fixture(scope="session")
def offlink(tmp_path_factory) -> str:
    return offlink_command(tmp_path_factory.mktemp("bin"))


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Keep the runtime library and any compile cache inside the test session."""
    os.environ.setdefault("OFFLINK_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


# `python -c IMPORTS_SAID MODULES SAID_FILE WORDS...`: `offlink WORDS...` in a fresh interpreter,
# writing to SAID_FILE at exit which of MODULES (comma-separated) it imported.
IMPORTS_SAID = """import atexit, sys
def said(names=sys.argv[1].split(","), path=sys.argv[2]):
    with open(path, "w") as f:
        print(sorted(set(names) & set(sys.modules)), file=f)
atexit.register(said)
sys.argv = ["offlink", *sys.argv[3:]]
from offlink.cli import main
main()
"""


def run(argv, cwd=None, env=None, check=True) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                          text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def copy_sample(name: str, dest: Path) -> Path:
    target = dest / name
    shutil.copytree(SAMPLES / name, target, ignore=shutil.ignore_patterns("build*"))
    return target


def make_sample(offlink: str, sample: Path, *targets: str, **variables: str):
    """Build (and run) a sample; every link in it is also checked by lief (OFFLINK_VERIFY)."""
    args = ["make", "-s", "-C", sample, f"OFFLINK={offlink}", *targets]
    args += [f"{k}={v}" for k, v in variables.items()]
    return run(args, env={**os.environ, "OFFLINK_VERIFY": "deep"})
