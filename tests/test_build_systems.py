"""The build_systems sample built by make (-j, with make's jobserver), CMake (compiler and
linker launchers) and Meson (offlink in the native file's compiler list), and run."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from conftest import copy_sample, need_tool, run

SAMPLE = "build_systems"


def need(tool: str) -> str:
    return need_tool(shutil.which(tool), f"{tool} is not installed")


def env_with_offlink(offlink: str) -> dict:
    """PATH with the offlink command first (Meson's native file names it as `offlink`)."""
    env = {**os.environ, "OFFLINK_PROGRESS": "0"}
    env["PATH"] = f"{Path(offlink).parent}{os.pathsep}{env['PATH']}"
    return env


def check_output(sample: Path, program: Path) -> None:
    assert run([program]).stdout == (sample / "expected.txt").read_text()


def test_make_parallel(offlink, tmp_path):
    sample = copy_sample(SAMPLE, tmp_path)
    proc = run(["make", "-j2", "-C", sample, f"OFFLINK={offlink}", "run"])
    assert "INTERNAL" not in proc.stderr  # make counts its tokens back at exit


def test_cmake_launchers(offlink, tmp_path):
    need("cmake")
    sample = copy_sample(SAMPLE, tmp_path)
    build = tmp_path / "build"
    env = env_with_offlink(offlink)
    run(["cmake", "-S", sample, "-B", build, f"-DOFFLINK={offlink}"], env=env)
    out = run(["cmake", "--build", build, "-j2", "--verbose"], env=env).stdout
    assert f"{offlink} cc" in out and f"{offlink} link" in out
    check_output(sample, build / "bs")


def test_meson_native_file(offlink, tmp_path):
    need("meson")
    need("ninja")
    sample = copy_sample(SAMPLE, tmp_path)
    build = tmp_path / "build"
    env = env_with_offlink(offlink)
    run(["meson", "setup", build, sample, "--native-file", sample / "native.ini",
         f"-Dofflink={offlink}"], env=env)
    run(["meson", "compile", "-C", build], env=env)
    commands = (build / "compile_commands.json").read_text()
    assert '"command": "offlink cc gcc ' in commands
    check_output(sample, build / "bs")
