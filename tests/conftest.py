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


@pytest.fixture(scope="session")
def offlink(tmp_path_factory) -> str:
    return offlink_command(tmp_path_factory.mktemp("bin"))


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Keep the runtime library and any compile cache inside the test session."""
    os.environ.setdefault("OFFLINK_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


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
