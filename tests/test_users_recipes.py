"""The build-system recipes for a user's own OpenMP offload program (samples/users_openmp: 4 CUs,
a static and a shared library), built for real with GCC's (-foffload=nvptx-none) and clang-19's
(-fopenmp-targets=x86_64-pc-linux-gnu) offload flags: CMake's find_package(offlink) +
offlink_enable() with Ninja and Makefiles, CMAKE_C_LINKER_LAUNCHER alone for a project nobody
edits, Meson with `offlink config --meson-native`, make with CCLD and with CC='offlink cc gcc'.
Each program runs and prints what the toolchain's own link prints; the compiles stay the
toolchain's (no payload of offlink's), every link is offlink's. (samples/build_systems, with
`offlink cc` objects, is tests/test_build_systems.py.)"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import copy_sample, need_tool, run

SAMPLE = "users_openmp"
GCC = ("gcc", "-fopenmp -foffload=nvptx-none -foffload-options=nvptx-none=-misa=sm_80",
       "nvptx-none")
CLANG = ("clang-19", "-fopenmp -fopenmp-targets=x86_64-pc-linux-gnu",
         "openmp-x86_64-pc-linux-gnu")
LLVM_LIB = "/usr/lib/llvm-19/lib"  # Debian's libomptarget.so.19.1 is not on the loader's path


def need(tool: str) -> None:
    need_tool(shutil.which(tool), f"{tool} is not installed")


def need_toolchain(compiler: str) -> None:
    need(compiler)
    if compiler == "gcc":
        need_tool(shutil.which("x86_64-linux-gnu-accel-nvptx-none-gcc-12"),
                  "gcc-12-offload-nvptx is not installed")
        need("nvptx-none-ld")
    else:
        need_tool(shutil.which("clang-offload-packager-19") or
                  Path("/usr/lib/llvm-19/bin/clang-offload-packager").exists(),
                  "clang-tools-19 is not installed")


@pytest.fixture
def env(offlink, tmp_path) -> dict:
    env = {**os.environ, "OFFLINK_PROGRESS": "0", "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
    env["PATH"] = f"{Path(offlink).parent}{os.pathsep}{env['PATH']}"
    env["LD_LIBRARY_PATH"] = LLVM_LIB
    env.pop("MAKEFLAGS", None)
    return env


def check_program(offlink: str, sample: Path, program: Path, compiler: str, target: str,
                  env: dict) -> None:
    """The program prints what it should (clang's target regions on libomptarget's x86_64
    plugin: OMP_TARGET_OFFLOAD=MANDATORY fails where there is none), and its offload code
    is offlink's link of the toolchain's: the image of `target`, in the executable and in
    the shared library."""
    run_env = {**env}
    if compiler != "gcc":  # no GPU here: GCC's nvptx regions run on the host
        run_env["OMP_TARGET_OFFLOAD"] = "MANDATORY"
    assert run([program], env=run_env).stdout == (sample / "expected.txt").read_text()
    for binary in (program, program.parent / "libstats.so"):
        shown = run([offlink, "inspect", binary], env=env).stdout
        assert f"    {target} " in shown, shown
        assert "x86_64-pc-linux-gnu " not in shown.replace("openmp-x86_64", "")  # no host target


def compiles_and_links(log: str) -> tuple[list[str], list[str]]:
    lines = [line for line in log.splitlines() if " -c " in line or " -o " in line]
    compiles = [line for line in lines if " -c " in line and "CMakeFiles/CMakeScratch" not in line]
    links = [line for line in lines if " -c " not in line and ("-o app" in line or
                                                                "-o libstats.so" in line)]
    return compiles, links


@pytest.mark.parametrize("generator, toolchain", [("Ninja", GCC), ("Unix Makefiles", CLANG),
                                                  ("Ninja", CLANG), ("Unix Makefiles", GCC)],
                         ids=["ninja-gcc", "makefiles-clang", "ninja-clang", "makefiles-gcc"])
def test_cmake_offlink_enable_wraps_only_the_links(offlink, tmp_path, env, generator, toolchain):
    need("cmake")
    if generator == "Ninja":
        need("ninja")
    compiler, flags, target = toolchain
    need_toolchain(compiler)
    sample = copy_sample(SAMPLE, tmp_path)
    build = tmp_path / "build"
    cmake_dir = run([offlink, "config", "--cmake-dir"], env=env).stdout.strip()
    run(["cmake", "-G", generator, "-S", sample, "-B", build, f"-DCMAKE_C_COMPILER={compiler}",
         f"-DCMAKE_C_FLAGS={flags}", f"-Dofflink_DIR={cmake_dir}"], env=env)
    log = run(["cmake", "--build", build, "--verbose", "-j2"], env=env).stdout
    compiles, links = compiles_and_links(log)
    assert len(compiles) == 4 and not any(f"{offlink} cc" in c for c in compiles), compiles
    assert len(links) == 2 and all(f"{offlink} link " in line for line in links), links
    check_program(offlink, sample, build / "app", compiler, target, env)


@pytest.mark.parametrize("toolchain", [GCC, CLANG], ids=["gcc", "clang"])
def test_cmake_linker_launcher_alone_for_a_project_nobody_edits(offlink, tmp_path, env,
                                                                 toolchain):
    """-DWITH_OFFLINK=OFF: the CMakeLists.txt names no offlink at all."""
    need("cmake")
    need("ninja")
    compiler, flags, target = toolchain
    need_toolchain(compiler)
    sample = copy_sample(SAMPLE, tmp_path)
    build = tmp_path / "build"
    run(["cmake", "-G", "Ninja", "-S", sample, "-B", build, f"-DCMAKE_C_COMPILER={compiler}",
         f"-DCMAKE_C_FLAGS={flags}", "-DWITH_OFFLINK=OFF",
         f"-DCMAKE_C_LINKER_LAUNCHER={offlink};link"], env=env)
    log = run(["cmake", "--build", build, "--verbose"], env=env).stdout
    compiles, links = compiles_and_links(log)
    assert not any(f"{offlink} cc" in c for c in compiles)
    assert len(links) == 2 and all(f"{offlink} link " in line for line in links), links
    check_program(offlink, sample, build / "app", compiler, target, env)


def test_cmake_offlink_enable_link_only_and_flags_added_after_it(offlink, tmp_path, env):
    """Flags offlink_enable cannot see (added after it): its compiler launcher is there, and
    `offlink cc` passes the offload compiles through untouched; LINK_ONLY leaves it out."""
    need("cmake")
    need("ninja")
    need_toolchain("clang-19")
    sample = copy_sample(SAMPLE, tmp_path)
    lists = sample / "CMakeLists.txt"
    text = lists.read_text()
    assert "offlink_enable(app stats vecops)\n" in text
    cmake_dir = run([offlink, "config", "--cmake-dir"], env=env).stdout.strip()
    for name, enable in (("late", "offlink_enable(app stats vecops)\n"),
                         ("link_only", "offlink_enable(app stats vecops LINK_ONLY)\n")):
        lists.write_text(text.replace("offlink_enable(app stats vecops)\n", enable + (
            "foreach(t app stats vecops)\n  target_compile_options(${t} PRIVATE "
            "-fopenmp-targets=x86_64-pc-linux-gnu)\nendforeach()\n"
            "target_link_options(app PRIVATE -fopenmp)\n"
            "target_link_options(stats PRIVATE -fopenmp)\n")))
        build = tmp_path / name
        run(["cmake", "-G", "Ninja", "-S", sample, "-B", build, "-DCMAKE_C_COMPILER=clang-19",
             f"-Dofflink_DIR={cmake_dir}"], env=env)
        log = run(["cmake", "--build", build, "--verbose"], env=env).stdout
        compiles, links = compiles_and_links(log)
        assert all((f"{offlink} cc" in c) == (name == "late") for c in compiles), compiles
        assert len(links) == 2 and all(f"{offlink} link" in line for line in links)
        check_program(offlink, sample, build / "app", "clang-19", CLANG[2], env)


@pytest.mark.parametrize("toolchain", [GCC, CLANG], ids=["gcc", "clang"])
def test_meson_native_file_from_offlink_config(offlink, tmp_path, env, toolchain):
    need("meson")
    need("ninja")
    compiler, flags, target = toolchain
    need_toolchain(compiler)
    sample = copy_sample(SAMPLE, tmp_path)
    native = tmp_path / "offlink.ini"
    native.write_text(run([offlink, "config", "--meson-native", compiler], env=env).stdout)
    build = tmp_path / "build"
    # GCC's link builds an image for every installed offload compiler unless -foffload= names
    # the targets: offlink builds nvptx-none only, so a GCC link names it
    link_args = "-fopenmp -foffload=nvptx-none" if compiler == GCC[0] else "-fopenmp"
    run(["meson", "setup", build, sample, "--native-file", native, f"-Dc_args={flags}",
         f"-Dc_link_args={link_args}"], env=env)
    log = run(["meson", "compile", "-C", build, "-v"], env=env).stdout
    assert f"{offlink} cc {compiler} " in log
    check_program(offlink, sample, build / "app", compiler, target, env)


def test_meson_native_file_text():
    from offlink.cli.meson_native import native_file

    text = native_file("gcc-12", ["/opt/bin/offlink"])
    assert "[binaries]\nc = ['/opt/bin/offlink', 'cc', 'gcc-12']\n" \
           "cpp = ['/opt/bin/offlink', 'cc', 'g++-12']\n" in text
    assert "cpp" not in native_file("icx", ["offlink"])


@pytest.mark.parametrize("toolchain, variables", [
    (GCC, {}), (CLANG, {}), (GCC, {"CC": "offlink cc gcc", "CCLD": "$(CC)"})],
    ids=["gcc-ccld", "clang-ccld", "gcc-cc"])
def test_make_ccld(offlink, tmp_path, env, toolchain, variables):
    compiler, flags, target = toolchain
    need_toolchain(compiler)
    sample = copy_sample(SAMPLE, tmp_path)
    build = tmp_path / "build"
    args = {"CC": compiler, "OFFLOAD": flags, "BUILD": str(build), **variables}
    run(["make", "-j2", "-C", sample, *(f"{k}={v}" for k, v in args.items()), "run"], env=env)
    check_program(offlink, sample, build / "app", compiler, target, env)


@pytest.mark.parametrize("toolchain", [GCC, CLANG], ids=["gcc", "clang"])
def test_the_toolchains_own_link_prints_the_same(offlink, tmp_path, env, toolchain):
    """The comparison the recipes are held to: the same Makefile, CCLD the compiler itself."""
    compiler, flags, target = toolchain
    need_toolchain(compiler)
    sample = copy_sample(SAMPLE, tmp_path)
    build = tmp_path / "plain"
    # GCC's own link without -misa=sm_80 fails in CUDA 13's ptxas (FACTS.md): given here
    run(["make", "-C", sample, f"CC={compiler}", f"OFFLOAD={flags}", f"BUILD={build}",
         "CCLD=$(CC)", "run"], env=env)
    assert "openmp_target" not in run(["readelf", "-SW", build / "app"]).stdout


def test_gcc_fopenmp_alone_through_offlink_cc(offlink, tmp_path, env):
    """`gcc -fopenmp` without -foffload= (what CMake's FindOpenMP gives) on a GCC configured
    with offload targets writes GCC's offload code too: `offlink cc` adds offlink's host
    payload (nothing asked it not to), and the link gives both targets; the host image's link
    runs no mkoffload (before: `lto-wrapper failed` in the x86_64-pc-linux-gnu device link)."""
    need_toolchain("gcc")
    sample = copy_sample(SAMPLE, tmp_path)
    build = tmp_path / "build"
    # The link names its GCC target: without -foffload= GCC's link builds every installed
    # offload compiler's image, and so does offlink's (amdgcn-amdhsa too: test_gcc_amdgcn).
    run(["make", "-C", sample, "CC=offlink cc gcc",
         "CCLD=$(CC) -foffload=nvptx-none -foffload-options=-misa=sm_80",
         "OFFLOAD=-fopenmp", f"BUILD={build}", "run"], env=env)
    shown = run([offlink, "inspect", build / "app"], env=env).stdout
    assert "    x86_64-pc-linux-gnu " in shown and "    nvptx-none " in shown, shown
