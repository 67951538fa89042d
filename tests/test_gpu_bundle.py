"""The GPU check, on a machine without a GPU: tests/gpu/bundle.sh builds its bundle (CUDA,
GCC and clang programs, their twins, the libraries they need) within its size, and
tests/gpu/run.sh over it reports "no GPU" cleanly, and runs every step when forced. The
bundle's timing program runs its 8 threads through the CUDA runtime's device path against
the fake libcuda (tests/cuda/fake_libcuda.c): a stream each, waited for alone.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import ROOT, need_tool, run

GPU = ROOT / "tests" / "gpu"
LIMIT = 60 * 1024 * 1024
CUDA_HOME = os.environ.get("CUDA_HOME") or "/usr/local/cuda"  # .ci/run's, else the usual
TOOLS = {f"nvcc (CUDA 13 at CUDA_HOME, {CUDA_HOME})": f"{CUDA_HOME}/bin/nvcc",
         "gcc-12-offload-nvptx": "x86_64-linux-gnu-accel-nvptx-none-gcc-12",
         "clang-19": "clang-19", "clang-tools-19": "clang-offload-packager-19", "xz": "xz"}
NO_GPU = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": ""}  # no nvidia-smi, no libcuda


@pytest.fixture(scope="module")
def bundle(offlink, tmp_path_factory) -> Path:
    """The bundle, built once (about a minute and a half: libLLVM's xz is most of it)."""
    for what, tool in TOOLS.items():
        need_tool(shutil.which(tool), f"{what} is needed to build the GPU bundle")
    need_tool(Path("/usr/lib/llvm-19/lib/libomptarget-nvptx-sm_90.bc").exists(),
              "libomp-19-dev is needed to build the GPU bundle")
    out = tmp_path_factory.mktemp("gpu") / "bundle"
    done = run([GPU / "bundle.sh", out],
               env={**os.environ, "OFFLINK": offlink, "CUDA_HOME": CUDA_HOME})
    assert done.stdout.strip().splitlines()[-1].startswith(f"bundle: {out} (")
    return out


def test_bundle_is_complete_and_within_its_size(bundle):
    manifest = (bundle / "MANIFEST.txt").read_text()
    listed = dict((path, int(size)) for size, path in
                  re.findall(r"^(\d+) (\S+)$", manifest, re.M))
    on_disk = {str(p.relative_to(bundle)): p.stat().st_size for p in bundle.rglob("*")
               if p.is_file() and p.name != "MANIFEST.txt"}
    assert listed == on_disk
    total = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    assert total < LIMIT, f"{total} bytes"
    for name in ("cuda/saxpy", "cuda/saxpy-ptx", "cuda/saxpy-cxx", "cuda/saxpy-twin",
                 "cuda/timing", "cuda/timing.image", "gcc/lib/libgomp.so.1",
                 "gcc/lib/libgomp-plugin-nvptx.so.1", "clang19/lib/libomptarget.so.19.1",
                 "clang19/lib/libomp.so.5", "clang19/lib/libLLVM.so.19.1.xz", "run.sh"):
        assert name in listed, name
    for by in ("offlink", "clang"):
        for name in ("clang_openmp", "clang_openmp_cxx", "libcounter.so"):
            assert f"clang19/{by}/{name}" in listed
    # Every expected output has its programs, and what they print here is the host fallback.
    assert sorted(p.stem for p in (bundle / "expected").iterdir()) == [
        "clang_openmp", "clang_openmp_cxx", "gcc_openmp", "gomp_vars", "saxpy", "saxpy-cxx",
        "saxpy-ptx", "saxpy-twin"]
    for p in ("saxpy", "saxpy-ptx", "saxpy-cxx"):
        assert (bundle / "here" / f"{p}.txt").read_text() == \
            (ROOT / "samples" / "cuda_saxpy" / "expected-host.txt").read_text()
    for p in ("gcc_openmp", "gomp_vars"):
        mine, gccs = ((bundle / "here" / f"{p}.{by}.txt").read_text() for by in ("offlink", "gcc"))
        assert mine == gccs and mine.endswith("ran on: the host (host fallback)\n")
        assert mine.splitlines()[1:-1] == \
            (bundle / "expected" / f"{p}.txt").read_text().splitlines()[1:-1]


def test_gcc_programs_register_with_libgomp(bundle):
    """Both links of each GCC program call GOMP_offload_register_ver (so libgomp can run
    their regions on the GPU); the manifest says which way offlink was asked to."""
    for by in ("offlink", "gcc"):
        for p in ("gcc_openmp", "gomp_vars"):
            symbols = run(["nm", "-D", bundle / "gcc" / by / p]).stdout
            assert re.search(r" U GOMP_offload_register_ver\b", symbols), (by, p)
    assert re.search(r"registers with libgomp by: (default|--gomp-register)$",
                     (bundle / "MANIFEST.txt").read_text(), re.M)


def test_run_without_a_gpu_is_a_clean_skip(bundle, tmp_path):
    done = run([bundle / "run.sh", bundle], env={**os.environ, **NO_GPU, "OUT": str(tmp_path)},
               check=False)
    assert done.returncode == 77, done.stdout + done.stderr
    assert done.stderr == ""
    assert done.stdout == f"SKIP: no GPU: nvidia-smi not found (report: {tmp_path}/gpu-report.md)\n"
    report = (tmp_path / "gpu-report.md").read_text()
    assert report.startswith("# offlink GPU check\n") and "GLIBC_2." in report
    assert report.endswith("SKIP: no GPU: nvidia-smi not found\n")
    assert not (bundle / "gpu-report.md").exists()  # $OUT decides where it goes


def test_run_refuses_an_incomplete_bundle(bundle, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(bundle, broken, ignore=shutil.ignore_patterns("libLLVM*"))
    done = run([broken / "run.sh"], env={**os.environ, **NO_GPU}, check=False)
    assert done.returncode == 2
    assert done.stderr == f"run.sh: the bundle in {broken} is incomplete (see " \
                          f"{broken}/gpu-report.md)\n"
    assert "clang19/lib/libLLVM.so.19.1.xz" in (broken / "gpu-report.md").read_text()


def test_forced_run_goes_through_every_step(bundle, tmp_path):
    """GPU_CHECK_FORCE=1 runs every step with no GPU: the script itself works to its summary,
    and every program's check fails (none ran on a device) without stopping the rest."""
    env = {**os.environ, **NO_GPU, "OUT": str(tmp_path), "GPU_CHECK_FORCE": "1",
           "GPU_CHECK_LAUNCHES": "2", "GPU_CHECK_ROUNDS": "10", "GPU_CHECK_TIMEOUT": "20"}
    done = run([bundle / "run.sh", bundle], env=env, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    report = (tmp_path / "gpu-report.md").read_text()
    for heading in ("## The GPU", "## Programs", "### saxpy-ptx", "### gomp_vars.offlink",
                    "### clang_openmp_cxx.offlink", "## Timings (", "## Summary\n"):
        assert f"\n{heading}" in report, heading
    rows = re.findall(r"^\| (\S+) \| [^|]+ \| [^|]+ \| \d+ launches", report, re.M)
    assert len(rows) == 13 and "saxpy-sync" in rows
    assert report.count("| 8 | 10 | streams | FAILED FAILED FAILED |") == 1
    assert "FAIL: " in done.stdout and done.stdout.endswith(
        f"report: {tmp_path}/gpu-report.md\n")


@pytest.fixture(scope="module")
def fake(tmp_path_factory) -> SimpleNamespace:
    d = tmp_path_factory.mktemp("fake")
    run(["gcc", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-Wl,-soname,libcuda.so.1",
         ROOT / "tests" / "cuda" / "fake_libcuda.c", "-o", d / "libcuda.so.1"])
    return SimpleNamespace(lib=d / "libcuda.so.1", log=d / "log")


def _timing(bundle, fake, *args: str, **env: str):
    fake.log.unlink(missing_ok=True)
    full = {**os.environ, "OFFLINK_LIBCUDA": str(fake.lib), "FAKE_CUDA_SM": "90",
            "FAKE_CUDA_LOG": str(fake.log), "OFFLINK_MANDATORY": "1", **env}
    done = run([bundle / "cuda" / "timing", *args], env=full)
    return done.stdout, fake.log.read_text().splitlines()


def test_eight_threads_launch_on_their_own_streams(bundle, fake):
    """Each thread launches on its own stream (the driver's per-thread one) and waits for it
    alone, never for the context. Every launch ran once (the counts)."""
    out, log = _timing(bundle, fake, "threads", "8", "3", "1")
    assert re.fullmatch(r"threads 8 x 3 launches of 1 rounds on nvptx64-nvidia-cuda: "
                        r"[0-9.]+ ms, counts ok\n", out)
    launches = [ln.rsplit(" ", 1)[1] for ln in log if ln.startswith("cuLaunchKernel busy ")]
    assert len(launches) == 8 * 4 and len(set(launches)) == 8  # an untimed one, then 3
    assert all(launches.count(s) == 4 and s.startswith("pts") for s in launches)
    assert "cuCtxSynchronize" not in log
    waits = [ln.split()[1] for ln in log if ln.startswith("cuStreamSynchronize ")]
    assert set(launches) < set(waits)  # and the main thread's, for update_to and _from


def test_sync_launch_threads_use_the_null_stream(bundle, fake):
    out, log = _timing(bundle, fake, "threads", "8", "2", "1", OFFLINK_CUDA_SYNC_LAUNCH="1")
    assert out.endswith("counts ok\n")
    assert "pts" not in "".join(log)
    assert log.count("cuCtxSynchronize") == 8 * 3
    assert all(ln.endswith(" stream NULL") for ln in log if ln.startswith("cuLaunchKernel"))


def test_timing_first_and_direct_report_their_figures(bundle, fake):
    out, _ = _timing(bundle, fake, "first")
    assert re.fullmatch(r"offlink target: nvptx64-nvidia-cuda\n"
                        r"offlink first translate: [0-9.]+ ms\n"
                        r"offlink first launch: [0-9.]+ ms\n"
                        r"offlink next launch \(median of 101\): [0-9.]+ us\n", out)
    # The driver-API twin loads the same image (the fake finds the sm_90 cubin in it).
    image = bundle / "cuda" / "timing.image"
    out, log = _timing(bundle, fake, "direct", image, LD_LIBRARY_PATH=str(fake.lib.parent))
    assert re.fullmatch(r"direct load \(dlopen to cuModuleGetFunction\): [0-9.]+ ms\n"
                        r"direct first launch: [0-9.]+ ms\n"
                        r"direct next launch \(median of 101\): [0-9.]+ us\n", out)
    assert "cuModuleLoadData fatbin sm_90" in log and log.count("cuCtxSynchronize") == 102
    done = run([bundle / "cuda" / "timing", "direct", image], env={**os.environ, **NO_GPU},
               check=False)
    assert done.returncode == 1 and done.stderr.startswith("no CUDA driver: libcuda.so.1: ")
