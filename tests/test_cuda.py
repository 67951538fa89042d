"""The CUDA target (nvptx64-nvidia-cuda), without a GPU.

The sample samples/cuda_saxpy is built with the real CUDA toolkit (nvcc, nvlink, fatbinary)
once per module, as a cubin image and as a fatbin (sm_80, sm_90 and compute_80 PTX). The
images are checked with readelf (and cuobjdump when installed): every offered kernel and
variable is in every architecture's code. The runtime's driver paths run against a fake
libcuda.so.1 built from tests/cuda/fake_libcuda.c, which loads real cubins and fatbins, looks
names up, copies "device" memory and runs the kernels as tests/cuda/emulate.c emulates them.
Without a driver, the program runs its kernels' host builds.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import ROOT, copy_sample, need_tool, needs_tool, run

from offlink.errors import FormatError, LinkError, ToolError, UsageError
from offlink.formats import cubin, fatbin
from offlink.toolchains import cuda_toolkit, default_targets, resolve
from offlink.toolchains.offlink import cuda

CUDA = "nvptx64-nvidia-cuda"
FAKE_SRC = ROOT / "tests" / "cuda"
SAMPLE = ROOT / "samples" / "cuda_saxpy"
OFFERED = {"saxpy": "kernel", "sum": "kernel", "x": "variable", "y": "variable",
           "total": "variable"}


def _toolkit():
    try:
        return cuda_toolkit.toolkit()
    except ToolError:
        return None


NO_TOOLKIT = "no CUDA toolkit (nvcc) found: install CUDA or set CUDA_HOME / OFFLINK_NVCC"
needs_nvcc = needs_tool(_toolkit() is None, NO_TOOLKIT)


def _real_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


# -- names, architectures, the fatbin reader (no toolkit needed) ----------------------------

def test_target_names_and_architectures():
    t = resolve("nvptx64-nvidia-cuda:sm_90,sm_80")
    assert (t.name, t.archs, t.image_kind) == (CUDA, ("sm_80", "sm_90"), "fatbin")
    assert t.capture_arch == "sm_80"
    t = resolve("cuda")
    assert (t.name, t.archs, t.image_kind) == (CUDA, cuda.DEFAULT_ARCHS, "cubin")
    assert resolve("cuda:sm_90,compute_90").image_kind == "fatbin"  # cubin + PTX
    assert resolve("cuda:compute_90").capture_arch == "sm_90"
    with pytest.raises(UsageError, match="'sm_9x' is not a CUDA architecture"):
        resolve("cuda:sm_9x")
    with pytest.raises(UsageError, match="takes no ':' options"):
        resolve("host:sm_80")
    with pytest.raises(UsageError, match="known: cuda, host, .*nvptx64-nvidia-cuda"):
        resolve("gpu")


def test_offlink_targets_keeps_architecture_lists(monkeypatch):
    monkeypatch.setenv("OFFLINK_TARGETS", "host,nvptx64-nvidia-cuda:sm_80,sm_90,cuda")
    assert default_targets() == ["host", "nvptx64-nvidia-cuda:sm_80,sm_90", "cuda"]


def test_only_preprocessing_options_reach_nvcc():
    args = ["-O2", "-Wall", "-std=c11", "-DN=4", "-D", "M", "-I", "inc", "-Iinc2", "-UX",
            "-isystem", "sys", "-include", "pre.h", "-fPIC", "-g"]
    assert cuda.preprocess_options(args) == ["-DN=4", "-DM", "-Iinc", "-Iinc2", "-UX",
                                             "-isystem", "sys", "-include", "pre.h"]


def _fatbin(*entries: tuple[int, int, bytes, int]) -> bytes:
    body = b""
    for kind, sm, payload, flags in entries:
        header = struct.pack("<HHIQ", kind, 0x101, 64, len(payload)) + bytes(12)
        header += struct.pack("<I", sm) + bytes(8) + struct.pack("<Q", flags) + bytes(16)
        body += header + payload
    return struct.pack("<IHHQ", fatbin.FATBIN_MAGIC, 1, 16, len(body)) + body


def test_fatbin_reader_checks_every_offset():
    ptx = b".version 9.0\n.visible .entry k(\n.visible .global .align 4 .b8 buf[12];\n\0\0"
    good = _fatbin((1, 90, ptx, 0))
    [entry] = fatbin.fatbin_entries(good, "t")
    assert (entry.kind, entry.sm) == (1, 90) and entry.data.endswith(b"[12];\n")
    assert cuda.ptx_symbols(entry.data) == {
        "k": cubin.DeviceSymbol("k", "function", 1, True),
        "buf": cubin.DeviceSymbol("buf", "variable", 12, True)}
    for bad, why in [(good[:20], "truncated"), (b"\0" * 64, "not a fatbin"),
                     (good[:-1], "truncated"),
                     (good[:31] + b"\x7f" + good[32:], "corrupt fatbin entry"),
                     (_fatbin((1, 90, ptx, 0x8000)), "compressed")]:
        with pytest.raises(FormatError, match=why):
            fatbin.fatbin_entries(bad, "t")


@needs_nvcc
def test_hidden_and_internal_device_symbols_are_not_offered(tmp_path):
    """nvcc writes every __device__ variable with default visibility whatever the source says,
    but a cubin whose symbols are hidden or internal (another producer, a later nvcc) must not
    have them offered: the driver cannot find them by name."""
    (tmp_path / "v.cu").write_text("__device__ int hv[4], iv[4], dv[4];\n"
                                   'extern "C" __global__ void k(int *p) { p[0] = dv[0]; }\n')
    path = tmp_path / "v.cubin"
    run([_toolkit().nvcc, "-cubin", "-rdc=true", "-arch=sm_80", "v.cu", "-o", path.name],
        cwd=tmp_path)
    data = bytearray(path.read_bytes())
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    for i in range(shnum):
        sh_type, = struct.unpack_from("<I", data, shoff + i * shentsize + 4)
        if sh_type != 2:  # SHT_SYMTAB
            continue
        offset, size, link = struct.unpack_from("<QQI", data, shoff + i * shentsize + 24)
        str_off, = struct.unpack_from("<Q", data, shoff + link * shentsize + 24)
        for at in range(offset, offset + size, 24):
            st_name, = struct.unpack_from("<I", data, at)
            name = bytes(data[str_off + st_name:]).split(b"\0", 1)[0]
            visibility = {b"hv": 2, b"iv": 3}.get(name)  # STV_HIDDEN, STV_INTERNAL
            if visibility is not None:
                data[at + 5] = (data[at + 5] & ~3) | visibility
    assert sorted(cubin.cubin_symbols(bytes(path.read_bytes()), "v")) == ["dv", "hv", "iv", "k"]
    assert sorted(cubin.cubin_symbols(bytes(data), "v")) == ["dv", "k"]


def test_missing_toolkit_is_one_clear_error(offlink, tmp_path, monkeypatch):
    (tmp_path / "k.c").write_text("int k;\n")
    env = {**os.environ, "OFFLINK_NVCC": str(tmp_path / "no" / "nvcc")}
    done = run([offlink, "cc", "--offload-target", "cuda", "gcc", "-c", "k.c", "-o", "k.o"],
               cwd=tmp_path, env=env, check=False)
    assert done.returncode != 0 and not (tmp_path / "k.o").exists()
    assert done.stderr.strip().splitlines() == [
        f"offlink: error: OFFLINK_NVCC: '{tmp_path}/no/nvcc' not found (the CUDA compiler to "
        f"use)"]
    # Nothing anywhere: the message says where offlink looked and what to set.
    monkeypatch.delenv("OFFLINK_NVCC", raising=False)
    monkeypatch.setattr("offlink.run.which", lambda tool: None)
    with pytest.raises(ToolError, match="CUDA toolkit was not found.*set CUDA_HOME or "
                                        "OFFLINK_NVCC"):
        cuda_toolkit.toolkit()


def test_a_cu_preprocessed_for_a_newer_gpu_is_refused():
    cu = SimpleNamespace(label="k.c (k.o)", payload=SimpleNamespace(options=("arch=sm_90",)))
    with pytest.raises(LinkError, match=r"k.c \(k.o\): its CUDA code was preprocessed for "
                                        r"sm_90 .* cannot be built for sm_80"):
        resolve("cuda:sm_80").for_inputs([cu])
    assert resolve(CUDA).for_inputs([cu]).archs == ("sm_90",)  # the CU's own by default


# -- the sample, built with the CUDA toolkit ------------------------------------------------

def _libs(offlink: str) -> list[str]:
    return run([offlink, "config", "--libs"]).stdout.split()


@pytest.fixture(scope="module")
def built(offlink, tmp_path_factory):
    """The sample built by its Makefile (cubin, sm_80), plus the same objects linked with
    the kernels' emulation for the fake driver, as a cubin and as a fatbin image."""
    need_tool(_toolkit(), NO_TOOLKIT)
    tmp = tmp_path_factory.mktemp("cuda")
    sample = copy_sample("cuda_saxpy", tmp)
    run(["make", "-s", "-C", sample, f"OFFLINK={offlink}", "CC=gcc", "build/saxpy"])
    build = sample / "build"
    fake_dir = tmp / "driver"
    fake_dir.mkdir()
    run(["gcc", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-Wl,-soname,libcuda.so.1",
         FAKE_SRC / "fake_libcuda.c", "-o", fake_dir / "libcuda.so.1"])
    cflags = run([offlink, "config", "--cflags"]).stdout.split()
    run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", *cflags, f"-I{sample}", "-c",
         FAKE_SRC / "emulate.c", "-o", build / "emulate.o"])
    objects = [build / "kernels.o", build / "main.o", build / "emulate.o"]
    run([offlink, "link", "gcc", "-rdynamic", *objects, *_libs(offlink), "-o",
         build / "fake-cubin"])
    run([offlink, "link", "--offload-target", f"{CUDA}:sm_80,sm_90,compute_80", "gcc",
         "-rdynamic", *objects, *_libs(offlink), "-o", build / "fake-fatbin"])
    return SimpleNamespace(sample=sample, build=build, fake=fake_dir / "libcuda.so.1",
                           offlink=offlink, tmp=tmp)


@needs_nvcc
def test_extract_by_architecture(built, tmp_path):
    """`--arch` picks what holds code for it: a fatbin image by its entries (sm_NN code,
    compute_NN PTX), an offlink cc object by the architectures it was captured for."""
    fatbin = built.build / "fake-fatbin"

    def image(*args: str) -> bytes:
        return subprocess.run([built.offlink, "extract", fatbin, *args, "-o", "-"],
                              capture_output=True, check=True).stdout

    assert image("--arch", "compute_80") == image("--arch", "sm_90") == image("--target", CUDA)
    proc = run([built.offlink, "extract", fatbin, "--arch", "sm_75"], check=False)
    assert proc.returncode == 1 and proc.stderr.splitlines() == [
        f"offlink: error: {fatbin}: no arch 'sm_75' (archs: {CUDA}: compute_80, sm_80, sm_90)"]
    out = run([built.offlink, "extract", built.build / "kernels.o", "--arch", "sm_80", "-o",
               f"{tmp_path}/"]).stdout
    assert out.splitlines() == [f"{tmp_path}/kernels.o-{CUDA}-sm_80.cu.ii"]
    assert "saxpy" in (tmp_path / f"kernels.o-{CUDA}-sm_80.cu.ii").read_text()


def _inspect(b, binary: str) -> dict:
    return json.loads(run([b.offlink, "inspect", "--json", b.build / binary]).stdout)["table"]


def _run_fake(b, binary: str, **env: str) -> subprocess.CompletedProcess:
    log = b.tmp / "driver.log"
    log.unlink(missing_ok=True)
    full = {**os.environ, "OFFLINK_LIBCUDA": str(b.fake), "FAKE_CUDA_LOG": str(log), **env}
    done = run([b.build / binary], env=full, check=False)
    done.log = log.read_text() if log.exists() else ""  # type: ignore[attr-defined]
    return done


def _readelf_names(path: Path) -> dict[str, str]:
    """Kernels and variables a cubin defines, as binutils' readelf sees them."""
    names = {}
    for line in run(["readelf", "-sW", path]).stdout.splitlines():
        words = line.split()
        if len(words) < 8 or not words[0].endswith(":") or words[4] not in ("GLOBAL", "WEAK"):
            continue
        if words[-2] == "UND":
            continue
        if words[3] == "FUNC" and "[<other>:" in words and words[words.index("[<other>:") + 1] \
                == "10]":
            names[words[-1]] = "kernel"  # STO_CUDA_ENTRY
        elif words[3] == "OBJECT":
            names[words[-1]] = "variable"
    return names


@needs_nvcc
def test_sample_table_and_cubin(built, tmp_path):
    table = _inspect(built, "saxpy")
    assert [(t["name"], t["kind"], t["archs"]) for t in table["targets"]] == \
        [(CUDA, "cubin", ["sm_80"])]
    rows = {s["name"]: (s["kind"], s["size"]) for s in table["symbols"]}
    assert rows == {"saxpy": ("function", 1), "sum": ("function", 1), "x": ("variable", 4000),
                    "y": ("variable", 4000), "total": ("variable", 4)}
    image = tmp_path / "image.cubin"
    run([built.offlink, "extract", built.build / "saxpy", "--target", CUDA, "--output", image])
    assert _readelf_names(image) == OFFERED
    if shutil.which("cuobjdump"):
        listed = run(["cuobjdump", "-symbols", image]).stdout
        assert all(name in listed for name in OFFERED)


@needs_nvcc
def test_fatbin_has_every_name_for_every_architecture(built, tmp_path):
    table = _inspect(built, "fake-fatbin")
    assert [(t["name"], t["kind"], t["archs"]) for t in table["targets"]] == \
        [(CUDA, "fatbin", ["sm_80", "sm_90", "compute_80"])]
    image = tmp_path / "image.fatbin"
    run([built.offlink, "extract", built.build / "fake-fatbin", "--target", CUDA, "--output",
         image])
    entries = fatbin.fatbin_entries(image.read_bytes(), str(image))
    assert sorted((e.kind, e.sm) for e in entries) == [(1, 80), (2, 80), (2, 90)]
    for e in entries:
        if e.kind == fatbin.FATBIN_ELF:
            cubin = tmp_path / f"sm_{e.sm}.cubin"
            cubin.write_bytes(e.data)
            assert _readelf_names(cubin) == OFFERED, f"sm_{e.sm}"
        else:  # one CU's relocatable PTX
            ptx = e.data.decode()
            assert ".target sm_80" in ptx
            for name, what in OFFERED.items():
                assert (f".entry {name}(" if what == "kernel" else f" {name}") in ptx
    if shutil.which("cuobjdump"):
        listed = run(["cuobjdump", "-lelf", "-lptx", image]).stdout
        assert "sm_80" in listed and "sm_90" in listed


@needs_nvcc
@pytest.mark.parametrize("archs", ["sm_80", "sm_80,sm_90,compute_80"])
def test_narrowed_link_drops_kernels_the_offered_names_do_not_list(built, tmp_path, archs):
    """`--offload-symbol`: nvlink keeps the listed kernels (-kernels-used), in every cubin of a
    fatbin; the table has their rows only."""
    run([built.offlink, "link", "--offload-target", f"{CUDA}:{archs}", "--offload-symbol",
         "saxpy", "--offload-symbol", "[xy]", "gcc", "-rdynamic", built.build / "kernels.o",
         built.build / "main.o", built.build / "emulate.o", *_libs(built.offlink), "-o",
         tmp_path / "narrow"])
    table = json.loads(run([built.offlink, "inspect", "--json", tmp_path / "narrow"]).stdout)
    assert {s["name"] for s in table["table"]["symbols"]} == {"saxpy", "x", "y"}
    image = tmp_path / "image"
    run([built.offlink, "extract", tmp_path / "narrow", "--target", CUDA, "--output", image])
    cubins = [image]
    if "," in archs:
        cubins = []
        for e in fatbin.fatbin_entries(image.read_bytes(), str(image)):
            if e.kind == fatbin.FATBIN_ELF:
                cubins.append(tmp_path / f"sm_{e.sm}.cubin")
                cubins[-1].write_bytes(e.data)
        assert len(cubins) == 2
    for path in cubins:
        names = _readelf_names(path)
        assert names["saxpy"] == "kernel" and names["x"] == names["y"] == "variable"
        assert "sum" not in names


@needs_nvcc
def test_cuda_link_is_deterministic(built):
    """A fresh nvcc compile (no cache) gives the same binary as the first build."""
    # The Makefile's link, word for word (the host link's own output depends on its words).
    run([built.offlink, "link", "gcc", "build/kernels.o", "build/main.o",
         *_libs(built.offlink), "-o", "build/again"], cwd=built.sample,
        env={**os.environ, "OFFLINK_NO_CACHE": "1"})
    assert (built.build / "again").read_bytes() == (built.build / "saxpy").read_bytes()


@needs_nvcc
def test_link_refuses_an_architecture_older_than_the_capture(built):
    done = run([built.offlink, "link", "--offload-target", "cuda:sm_75", "gcc",
                built.build / "kernels.o", built.build / "main.o", "-o", built.tmp / "old"],
               check=False)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith(
        "offlink: error: kernels.c (")
    assert "preprocessed for sm_80" in done.stderr and "cannot be built for sm_75" in done.stderr


# -- running it ------------------------------------------------------------------------------

@needs_nvcc
@pytest.mark.skipif(_real_driver(), reason="a CUDA driver is installed: the host fallback "
                                           "is not what runs")
def test_without_a_driver_the_kernels_run_on_the_host(built):
    done = run([built.build / "saxpy"])
    assert done.stdout == (SAMPLE / "expected-host.txt").read_text()
    done = run([built.build / "saxpy"], env={**os.environ, "OFFLINK_MANDATORY": "1"},
               check=False)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"offlink: error: {built.build / 'saxpy'}: target '{CUDA}': no CUDA driver "
        f"(libcuda.so.1: cannot open shared object file: No such file or directory)"]


@needs_nvcc
def test_fake_driver_runs_the_device_path(built):
    done = _run_fake(built, "fake-cubin")
    # What a GPU prints: the data went to the device, the kernels ran there, it came back.
    assert done.returncode == 0 and done.stdout == (SAMPLE / "expected.txt").read_text()
    assert done.stderr.splitlines() == [
        "fake: saxpy n=1000 a=2.0 grid=8 block=128 on device memory",
        "fake: sum n=1000 grid=8 block=128 on device memory"]
    log = done.log.splitlines()
    assert log[:3] == ["cuInit 0", "cuDevicePrimaryCtxRetain 0", "cuLibraryLoadData cubin sm_80"]
    assert {"cuLibraryGetKernel saxpy", "cuLibraryGetKernel sum", "cuLibraryGetGlobal x",
            "cuLibraryGetGlobal y", "cuLibraryGetGlobal total"} <= set(log)
    # Copies and launches go on the thread's own stream (the driver's per-thread one) and
    # wait for it alone (not the context: other threads' kernels run on).
    assert "cuCtxSynchronize" not in log
    assert log.count("cuMemcpyHtoDAsync 4000 pts1") == 2
    assert log.count("cuMemcpyDtoHAsync 4000 pts1") == 1
    assert "cuLaunchKernel saxpy grid 8x1x1 block 128x1x1 shared 0 stream pts1" in log
    assert log.count("cuStreamSynchronize pts1") == 3 + 2 + 2  # update_to, launches, from


@needs_nvcc
def test_sync_launch_is_the_null_stream_and_the_context(built):
    """OFFLINK_CUDA_SYNC_LAUNCH=1 is the old way (kept to measure against): the legacy
    stream, cuCtxSynchronize after each launch, synchronous copies. OFFLINK_CUDA_INFO=1 says
    which kernels ran on the GPU."""
    done = _run_fake(built, "fake-cubin", OFFLINK_CUDA_SYNC_LAUNCH="1", OFFLINK_CUDA_INFO="1")
    assert done.stdout == (SAMPLE / "expected.txt").read_text()
    log = done.log.splitlines()
    assert "pts" not in done.log and log.count("cuCtxSynchronize") == 2
    assert log.count("cuMemcpyHtoD 4000") == 2 and log.count("cuMemcpyDtoH 4000") == 1
    assert "cuLaunchKernel sum grid 8x1x1 block 128x1x1 shared 0 stream NULL" in log
    assert [ln for ln in done.stderr.splitlines() if ln.startswith("offlink:")] == [
        f"offlink: cuda: kernel '{k}' ran on GPU 0 (sm_80), grid 8 x block 128, NULL stream"
        for k in ("saxpy", "sum")]


@needs_nvcc
def test_libcuda_is_found_by_its_soname(built):
    env = {k: v for k, v in os.environ.items() if k != "OFFLINK_LIBCUDA"}
    env["LD_LIBRARY_PATH"] = str(built.fake.parent)
    done = run([built.build / "fake-cubin"], env=env)
    assert done.stdout.startswith(f"ran on: {CUDA}\n")


@needs_nvcc
def test_module_api_when_the_driver_has_no_library_api(built):
    done = _run_fake(built, "fake-cubin", FAKE_CUDA_NO_LIBRARY="1")
    assert done.stdout == (SAMPLE / "expected.txt").read_text()
    assert "cuModuleLoadData cubin sm_80" in done.log and "cuLibrary" not in done.log
    assert "cuModuleGetFunction saxpy" in done.log and "cuModuleGetGlobal total" in done.log


@needs_nvcc
def test_no_device(built):
    done = _run_fake(built, "fake-cubin", FAKE_CUDA_DEVICES="0")
    assert done.stdout == (SAMPLE / "expected-host.txt").read_text()
    done = _run_fake(built, "fake-cubin", FAKE_CUDA_DEVICES="0", OFFLINK_MANDATORY="1")
    assert done.returncode == 1 and done.stderr.splitlines() == [
        f"offlink: error: {built.build / 'fake-cubin'}: target '{CUDA}': no CUDA device "
        f"(cuInit: CUDA_ERROR_NO_DEVICE)"]


@needs_nvcc
def test_a_name_missing_from_the_device_image(built):
    done = _run_fake(built, "fake-cubin", FAKE_CUDA_HIDE="sum")
    assert "cuLibraryGetKernel sum: not found" in done.log
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == \
        f"launch: kernel 'sum' is not in the image of target {CUDA}"
    done = _run_fake(built, "fake-cubin", FAKE_CUDA_HIDE="x")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"update_to: 'x' is not in the image of target {CUDA}"]


@needs_nvcc
@pytest.mark.parametrize("sm,loaded", [("86", "cuLibraryLoadData fatbin sm_80"),
                                       ("90", "cuLibraryLoadData fatbin sm_90"),
                                       ("100", "cuLibraryLoadData jit")])
def test_fatbin_code_for_each_gpu(built, sm, loaded):
    """A cubin of the GPU's major version where there is one, else the PTX, JIT-linked."""
    done = _run_fake(built, "fake-fatbin", FAKE_CUDA_SM=sm)
    assert done.stdout == (SAMPLE / "expected.txt").read_text()
    assert loaded in done.log.splitlines()
    if loaded.endswith("jit"):
        assert "cuLinkComplete" in done.log and "cuLinkAddData cu0.ptx" in done.log


@needs_nvcc
def test_no_code_for_the_gpu(built):
    done = _run_fake(built, "fake-fatbin", FAKE_CUDA_SM="75", OFFLINK_MANDATORY="1")
    assert done.returncode == 1 and done.stderr.splitlines() == [
        f"offlink: error: {built.build / 'fake-fatbin'}: target '{CUDA}': GPU 0 (sm_75): no "
        f"cubin or PTX for sm_75"]
    done = _run_fake(built, "fake-cubin", FAKE_CUDA_SM="90", OFFLINK_MANDATORY="1")
    assert done.returncode == 1 and "cuLibraryLoadData: CUDA_ERROR_NO_BINARY_FOR_GPU (the " \
                                      "image has no code for sm_90)" in done.stderr


@needs_nvcc
def test_cxx_host_launch(built):
    """In C++ OFFLINK_LAUNCH converts the arguments to the kernel's parameter types (the
    literal 1000 and 2 below reach the device as int and float)."""
    main = built.tmp / "main.cc"
    source = (built.sample / "main.c").read_text()
    main.write_text(source.replace("saxpy, blocks, threads, N, 2.0f,",
                                   "saxpy, blocks, threads, 1000, 2,"))
    cflags = run([built.offlink, "config", "--cflags"]).stdout.split()
    obj = built.tmp / "main-cxx.o"
    run(["g++", "-O2", "-Wall", "-Wextra", "-Werror", *cflags, f"-I{built.sample}", "-c", main,
         "-o", obj])
    run([built.offlink, "link", "g++", "-rdynamic", built.build / "kernels.o", obj,
         built.build / "emulate.o", *_libs(built.offlink), "-o", built.build / "fake-cxx"])
    done = _run_fake(built, "fake-cxx")
    assert done.stdout == (SAMPLE / "expected.txt").read_text()
    assert "saxpy n=1000 a=2.0" in done.stderr
    done = _run_fake(built, "fake-cxx", FAKE_CUDA_DEVICES="0")
    assert done.stdout == (SAMPLE / "expected-host.txt").read_text()


UNLOAD_MAIN = r"""
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static int (*launch)(void);
static pthread_barrier_t both;
static void mark(const char *what) {
  FILE *f = fopen(getenv("FAKE_CUDA_LOG"), "a");
  fprintf(f, "main: %s\n", what);
  fclose(f);
}
static void *stays(void *arg) {
  (void)arg;
  long rc = launch();
  pthread_barrier_wait(&both);
  pthread_barrier_wait(&both);
  return (void *)rc;
}
static void *leaves(void *arg) { return (void)arg, (void *)(long)launch(); }
int main(int argc, char **argv) {
  void *h = dlopen(argv[1], RTLD_NOW);
  void *r1, *r2;
  pthread_t t1, t2;
  *(void **)&launch = h ? dlsym(h, "launch") : NULL;
  if (!launch || argc != 2)
    return 2;
  pthread_barrier_init(&both, NULL, 2);
  pthread_create(&t1, NULL, stays, NULL);
  pthread_barrier_wait(&both);
  pthread_create(&t2, NULL, leaves, NULL);
  pthread_join(t2, &r2);
  mark("dlclose");
  dlclose(h);
  mark("closed");
  pthread_barrier_wait(&both);
  pthread_join(t1, &r1);
  mark("exited");
  return (int)((long)r1 | (long)r2);
}
"""


@needs_nvcc
def test_threads_launching_from_a_library_that_goes_first(built, tmp_path):
    """Two threads launch from a library with a CUDA image, each on its own stream; one exits,
    the library is dlclose()d (its image unloaded) while the other still runs, then that one
    exits: nothing of the runtime is left to run at a thread's exit (no pthread key
    destructor in unmapped code), so the program ends normally."""
    (tmp_path / "entry.c").write_text(
        '#include "saxpy.h"\nint launch(void) {\n'
        '  float *d = OFFLINK_TRANSLATE(OFFLINK_TABLE, y);\n'
        '  return OFFLINK_LAUNCH(OFFLINK_TABLE, saxpy, 1, 32, 10, 1.0f, (const float *)d, d);\n}\n')
    (tmp_path / "main.c").write_text(UNLOAD_MAIN)
    cflags = run([built.offlink, "config", "--cflags"]).stdout.split()
    inc = f"-I{built.sample}"
    run([built.offlink, "cc", "--offload-target", f"{CUDA}:sm_80", "gcc", "-O2", "-fPIC", *cflags,
         inc, "-c", built.sample / "kernels.c", "-o", tmp_path / "k.o"])
    run(["gcc", "-O2", "-fPIC", *cflags, inc, "-c", tmp_path / "entry.c", "-o", tmp_path / "e.o"])
    run([built.offlink, "link", "gcc", "-shared", tmp_path / "k.o", tmp_path / "e.o",
         *_libs(built.offlink), "-o", tmp_path / "libk.so"])
    run(["gcc", "-O2", "-Wall", tmp_path / "main.c", "-o", tmp_path / "main", "-ldl",
         "-lpthread"])
    log = tmp_path / "log"
    env = {**os.environ, "OFFLINK_LIBCUDA": str(built.fake), "FAKE_CUDA_LOG": str(log),
           "OFFLINK_MANDATORY": "1"}
    run([tmp_path / "main", tmp_path / "libk.so"], env=env)
    lines = [ln for ln in log.read_text().splitlines()
             if ln.startswith(("main:", "cuLaunchKernel", "cuStream", "unload"))]
    assert lines == ["cuLaunchKernel saxpy grid 1x1x1 block 32x1x1 shared 0 stream pts1",
                     "cuStreamSynchronize pts1",
                     "cuLaunchKernel saxpy grid 1x1x1 block 32x1x1 shared 0 stream pts2",
                     "cuStreamSynchronize pts2", "main: dlclose", "unload", "main: closed",
                     "main: exited"]
