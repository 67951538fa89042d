"""The build_systems sample built by make (-j, with make's jobserver, flags from pkg-config),
CMake (find_package(offlink) and offlink_enable) and Meson (dependency('offlink'), offlink in
the native file's compiler list), and run; the prebuilt runtime library they all link; the
note when make's jobserver does not reach offlink."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, copy_sample, need_tool, run

SAMPLE = "build_systems"
PREBUILT = ROOT / "offlink" / "runtime" / "lib" / "libofflink.a"


def need(tool: str) -> str:
    return need_tool(shutil.which(tool), f"{tool} is not installed")


def env_with_offlink(offlink: str, cache: Path) -> dict:
    """PATH with the offlink command first (Meson's native file names it as `offlink`), an
    empty cache of its own and a C compiler that cannot be run as $CC: the runtime library
    comes prebuilt, so no build system compiles a second copy of it."""
    env = {**os.environ, "OFFLINK_PROGRESS": "0", "OFFLINK_CACHE_DIR": str(cache)}
    env["PATH"] = f"{Path(offlink).parent}{os.pathsep}{env['PATH']}"
    env.pop("OFFLINK_BUILD_RUNTIME", None)
    return env


def check_output(sample: Path, program: Path) -> None:
    assert run([program]).stdout == (sample / "expected.txt").read_text()


def no_runtime_built(cache: Path) -> None:
    """Nothing compiled the runtime library on demand: the prebuilt one was used."""
    assert not (cache / "runtime").exists()


def config(offlink: str, env: dict, *args: str) -> str:
    return run([offlink, "config", *args], env=env).stdout.strip()


def test_prebuilt_runtime_needs_no_compiler(offlink, tmp_path):
    """`config --libs` names the library the package build made, with no C compiler at all."""
    env = {**env_with_offlink(offlink, tmp_path / "cache"), "CC": "false", "AR": "false"}
    assert config(offlink, env, "--libs").split() == [str(PREBUILT), "-ldl", "-lpthread"]
    assert Path(config(offlink, env, "--pkgconfig-dir"), "offlink.pc").is_file()
    assert Path(config(offlink, env, "--cmake-dir"), "offlinkConfig.cmake").is_file()
    no_runtime_built(tmp_path / "cache")


def test_stale_or_damaged_prebuilt_runtime_is_not_used(tmp_path, monkeypatch):
    """An editable install whose C sources changed since, or a library that does not match
    its seal, falls back to the build on demand."""
    from offlink.runtime import build, recipe

    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OFFLINK_BUILD_RUNTIME", raising=False)
    assert build.prebuilt_library() == PREBUILT
    copy = tmp_path / "lib"
    shutil.copytree(PREBUILT.parent, copy)
    monkeypatch.setattr(build, "PREBUILT_DIR", copy)
    assert build.prebuilt_library() == copy / "libofflink.a"
    data = bytearray((copy / "libofflink.a").read_bytes())
    data[100] ^= 1
    (copy / "libofflink.a").write_bytes(bytes(data))
    assert build.prebuilt_library() is None
    monkeypatch.setattr(build, "PREBUILT_DIR", PREBUILT.parent)
    real = recipe.sources_hash
    monkeypatch.setattr(recipe, "sources_hash", lambda d: "0" + real(d)[1:])  # edited sources
    assert build.prebuilt_library() is None
    assert build.runtime_library().is_relative_to(tmp_path / "cache")


def test_built_on_demand_when_asked_or_missing(offlink, tmp_path):
    """OFFLINK_BUILD_RUNTIME=1 (as when the prebuilt library is missing or stale) builds it into
    the cache with $CC, and the pkg-config and CMake files written beside it name that copy."""
    need("pkg-config")
    cache = tmp_path / "cache"
    env = {**env_with_offlink(offlink, cache), "OFFLINK_BUILD_RUNTIME": "1"}
    (lib,) = [w for w in config(offlink, env, "--libs").split() if w.endswith(".a")]
    assert Path(lib).is_relative_to(cache)
    pc = config(offlink, env, "--pkgconfig-dir")
    assert Path(pc).parent == Path(lib).parent
    flags = run(["pkg-config", "--cflags", "--libs", "offlink"],
                env={**env, "PKG_CONFIG_PATH": pc}).stdout.split()
    assert flags == [f"-I{ROOT / 'offlink' / 'runtime'}", lib, "-ldl", "-lpthread"]
    cmake = Path(config(offlink, env, "--cmake-dir"))
    assert str(lib) in (cmake / "offlinkConfig.cmake").read_text()


def test_make_pkg_config(offlink, tmp_path):
    need("pkg-config")
    sample = copy_sample(SAMPLE, tmp_path)
    env = env_with_offlink(offlink, tmp_path / "cache")
    env["PKG_CONFIG_PATH"] = config(offlink, env, "--pkgconfig-dir")
    proc = run(["make", "-j2", "-C", sample, f"OFFLINK={offlink}", "run"], env=env)
    assert "INTERNAL" not in proc.stderr  # make counts its tokens back at exit
    assert "offlink: note:" not in proc.stderr  # the '+' recipe gets make's jobserver
    assert f"{PREBUILT}" in proc.stdout.replace("/pkgconfig/..", "")
    no_runtime_built(tmp_path / "cache")


def test_make_without_pkg_config_path_says_what_to_do(offlink, tmp_path):
    need("pkg-config")
    sample = copy_sample(SAMPLE, tmp_path)
    env = env_with_offlink(offlink, tmp_path / "cache")
    env["PKG_CONFIG_PATH"] = str(tmp_path / "nothing")
    proc = run(["make", "-C", sample, f"OFFLINK={offlink}", "run"], env=env, check=False)
    assert proc.returncode != 0
    assert "export PKG_CONFIG_PATH=\"$(offlink config --pkgconfig-dir)\"" in proc.stderr


@pytest.mark.parametrize("how", ["offlink_DIR", "CMAKE_PREFIX_PATH"])
def test_cmake_find_package(offlink, tmp_path, how):
    need("cmake")
    need("ninja")
    sample = copy_sample(SAMPLE, tmp_path)
    build = tmp_path / "build"
    env = env_with_offlink(offlink, tmp_path / "cache")
    run(["cmake", "-G", "Ninja", "-S", sample, "-B", build,
         f"-D{how}={config(offlink, env, '--cmake-dir')}"], env=env)
    proc = run(["cmake", "--build", build, "--verbose"], env=env)
    out = proc.stdout
    assert f"{offlink} cc" in out and f"{offlink} link" in out
    assert str(PREBUILT) in out
    assert notes(proc) == []  # Ninja: offlink runs its compiles in parallel, nothing to say
    check_output(sample, build / "bs")
    no_runtime_built(tmp_path / "cache")


def test_cmake_package_version_and_launcher_variables(offlink, tmp_path):
    """find_package(offlink <version>) checks the version; the launcher variables and
    offlink_enable's OFFLOAD_TARGETS reach the build."""
    need("cmake")
    from offlink import __version__

    project = tmp_path / "p"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.21)\nproject(p C)\n"
        "find_package(offlink ${WANT} REQUIRED)\n"
        "message(STATUS \"version: ${offlink_VERSION} ${OFFLINK_VERSION}\")\n"
        "message(STATUS \"cc: ${OFFLINK_COMPILER_LAUNCHER}\")\n"
        "message(STATUS \"link: ${OFFLINK_LINKER_LAUNCHER}\")\n"
        "add_executable(x x.c)\nofflink_enable(x OFFLOAD_TARGETS host)\n")
    (project / "x.c").write_text("int main(void) { return 0; }\n")
    env = env_with_offlink(offlink, tmp_path / "cache")
    where = f"-Dofflink_DIR={config(offlink, env, '--cmake-dir')}"
    major, minor = __version__.split(".")[:2]
    for newer in ("99", f"{major}.{int(minor) + 1}"):
        proc = run(["cmake", "-S", project, "-B", tmp_path / f"b{newer}", where,
                    f"-DWANT={newer}"], env=env, check=False)
        assert proc.returncode != 0
        assert f"compatible with requested version \"{newer}\"" in proc.stderr
    out = run(["cmake", "-S", project, "-B", tmp_path / "b", where, f"-DWANT={major}.{minor}"],
              env=env).stdout
    assert f"-- version: {__version__} {__version__}\n" in out
    assert f"-- cc: {offlink};cc\n" in out and f"-- link: {offlink};link\n" in out
    rules = "".join(p.read_text() for p in (tmp_path / "b").rglob("build.make"))
    assert f"{offlink} cc --offload-target host" in rules


def notes(proc) -> list[str]:
    return [line for line in (proc.stdout + proc.stderr).splitlines()
            if line.startswith("offlink: note:")]


def test_cmake_makefiles_says_once_that_compiles_run_one_at_a_time(offlink, tmp_path):
    """CMake's Makefiles generator under make 4.3 gives `offlink link` no jobserver: one note
    line says so without --verbose (Ninja and a '+' recipe under make say nothing). By default
    `offlink cc` compiled the target code in make's parallel phase: the link has none to run
    and says nothing."""
    need("cmake")
    sample = copy_sample(SAMPLE, tmp_path)
    env = env_with_offlink(offlink, tmp_path / "cache")
    env.pop("MAKEFLAGS", None)
    for name, extra in (("build", {"OFFLINK_CC_TARGET_COMPILE": "0"}), ("default", {})):
        build = tmp_path / name
        run(["cmake", "-G", "Unix Makefiles", "-S", sample, "-B", build,
             f"-Dofflink_DIR={config(offlink, env, '--cmake-dir')}"], env=env)
        proc = run(["cmake", "--build", build, "-j2"], env={**env, **extra})
        if extra:
            (note,) = notes(proc)
            assert "make's jobserver is not reachable" in note and "one at a time" in note
            assert "Ninja" in note
        else:
            assert notes(proc) == []
        check_output(sample, build / "bs")


def test_meson_dependency(offlink, tmp_path):
    need("meson")
    need("ninja")
    need("pkg-config")
    sample = copy_sample(SAMPLE, tmp_path)
    build = tmp_path / "build"
    env = env_with_offlink(offlink, tmp_path / "cache")
    env["PKG_CONFIG_PATH"] = config(offlink, env, "--pkgconfig-dir")
    out = run(["meson", "setup", build, sample, "--native-file", sample / "native.ini"],
              env=env).stdout
    assert "Run-time dependency offlink found: YES" in out
    run(["meson", "compile", "-C", build], env=env)
    commands = (build / "compile_commands.json").read_text()
    assert '"command": "offlink cc gcc ' in commands
    check_output(sample, build / "bs")
    no_runtime_built(tmp_path / "cache")


def test_unreachable_jobserver_note_is_said_once_and_only_when_jobs_wait(capsys, monkeypatch):
    from offlink import run as runner
    from offlink.jobs import run_jobs
    from offlink.jobserver import slots_for

    monkeypatch.setattr(runner, "VERBOSE", False)
    unreachable = "-j8 --jobserver-auth=998,999"
    slots = slots_for(0, unreachable)
    assert run_jobs(1, lambda i: i, slots) == [0]  # one compile: nothing waits
    assert capsys.readouterr().err == ""
    assert run_jobs(3, lambda i: i, slots) == [0, 1, 2]
    assert run_jobs(3, lambda i: i, slots) == [0, 1, 2]  # a second target of the same link
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("offlink: note: make's jobserver")
    monkeypatch.setattr(runner, "VERBOSE", True)  # --verbose says it its own way
    run_jobs(3, lambda i: i, slots_for(0, unreachable))
    assert capsys.readouterr().err == ""
