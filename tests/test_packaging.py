"""Packaging: a quiet wheel build with the licence, bounded dependencies and the C extension; an
install without the extension says so on first use."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Lines that are about this machine, not about offlink's metadata: pip's configured extra index
# folders that do not exist, and byte-compiling switched off by PYTHONDONTWRITEBYTECODE.
_NOT_OURS = re.compile(r"Location 'file:.*is ignored|byte-compiling is disabled")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("wheel")
    src = tmp_path_factory.mktemp("src") / "offlink"
    # Build from a copy of the tracked files, so a stray build/ or .venv here changes nothing.
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w",
                           str(out), str(src)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (whl,) = out.glob("offlink-*.whl")
    return whl, proc.stdout + proc.stderr


def test_wheel_build_prints_no_warnings(wheel):
    _, log = wheel
    warnings = [line.strip() for line in log.splitlines()
                if re.search(r"warn", line, re.I) and not _NOT_OURS.search(line)]
    assert warnings == []


def test_wheel_carries_licence_extension_and_bounded_dependencies(wheel):
    whl, _ = wheel
    assert whl.name.endswith("-cp39-abi3-linux_x86_64.whl")
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        licence = z.read(next(n for n in names if n.endswith("/licenses/LICENSE"))).decode()
    assert "offlink/_ctable.abi3.so" in names
    assert licence == (ROOT / "LICENSE").read_text()
    expression = re.search(r"^License-Expression: (.+)$", meta, re.M)
    assert expression and licence.startswith(f"{expression.group(1)} License")
    assert re.search(r"^Classifier: ", meta, re.M)
    requires = [r for r in re.findall(r"^Requires-Dist: (.+)$", meta, re.M) if "extra ==" not in r]
    assert {re.split(r"[<>=;\s]", r)[0] for r in requires} == {"lief", "construct", "typer", "rich"}
    assert all("<" in r for r in requires), requires


def test_wheel_carries_every_module_and_data_file(wheel):
    """Every tracked file of the package that runs or is read (the toolchains' folders, the
    CLI's schema, the CUDA shadow header, the runtime's C) is in the wheel."""
    whl, _ = wheel
    files = subprocess.run(["git", "ls-files", "offlink"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    wanted = {f for f in files if f.endswith((".py", ".c", ".h", ".json", ".in"))}
    with zipfile.ZipFile(whl) as z:
        names = set(z.namelist())
    assert "offlink/cli/inspect.schema.json" in wanted
    assert "offlink/toolchains/offlink/cuda_include/cuda_runtime.h" in wanted
    assert sorted(wanted - names) == []


def test_wheel_carries_the_prebuilt_runtime(wheel, tmp_path):
    """libofflink.a, its seal, offlink.pc and the CMake package are in the wheel; installed,
    `config --libs` and pkg-config name that library with no C compiler at hand."""
    whl, _ = wheel
    with zipfile.ZipFile(whl) as z:
        names = set(z.namelist())
    lib = "offlink/runtime/lib/"
    assert {lib + "libofflink.a", lib + "libofflink.a.sha256", lib + "pkgconfig/offlink.pc",
            lib + "cmake/offlink/offlinkConfig.cmake",
            lib + "cmake/offlink/offlinkConfigVersion.cmake"} <= names
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
                    "--target", str(site), str(whl)], check=True, timeout=300)
    env = {**__import__("os").environ, "PYTHONPATH": str(site), "CC": "false", "AR": "false",
           "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("OFFLINK_BUILD_RUNTIME", None)

    def config(*args: str) -> str:
        return subprocess.run([sys.executable, "-m", "offlink", "config", *args], env=env,
                              capture_output=True, text=True, check=True, cwd=tmp_path,
                              timeout=60).stdout.strip()

    installed = site / "offlink" / "runtime" / "lib" / "libofflink.a"
    assert config("--libs").split() == [str(installed), "-ldl", "-lpthread"]
    if shutil.which("pkg-config"):
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "offlink"],
                               env={**env, "PKG_CONFIG_PATH": config("--pkgconfig-dir")},
                               capture_output=True, text=True, check=True).stdout.split()
        assert [Path(f.removeprefix("-I")).resolve() for f in flags[:2]] == \
            [installed.parent.parent, installed]
    assert not (tmp_path / "cache" / "runtime").exists()


def _without_extension(code: str, **env: str) -> subprocess.CompletedProcess:
    # sys.modules[name] = None makes `import offlink._ctable` fail as a missing build would.
    prog = f"import sys; sys.modules['offlink._ctable'] = None\n{code}"
    environ = {k: v for k, v in __import__("os").environ.items() if k != "OFFLINK_PURE_PYTHON"}
    return subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                          cwd=ROOT, env={**environ, **env}, timeout=60)


def test_missing_extension_says_so_on_first_use():
    proc = _without_extension("from offlink.cli import main; main(['--version'])")
    assert proc.returncode == 0, proc.stderr
    assert "table core: python" in proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("offlink: warning: the C table core"), lines


def test_asking_for_the_python_core_is_quiet():
    proc = _without_extension("from offlink.cli import main; main(['--version'])",
                              OFFLINK_PURE_PYTHON="1")
    assert proc.returncode == 0 and proc.stderr == ""
