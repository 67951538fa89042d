"""`offlink inspect --explain`: why a binary's kernels would run on the host, with fixes.

What can be told from the file and this machine without a GPU: no registration, no image for a
device kind, the runtime library or its device plugin not found, the driver missing,
OMP_TARGET_OFFLOAD / OFFLINK_TARGET asking for the host. Each finding says what was checked.
"""

from __future__ import annotations

import ctypes.util
import os
import subprocess

from .. import settings
from ..elf import ElfFile
from ..toolchains import binaries

DRIVERS = {"nvptx": ("libcuda.so.1", "the NVIDIA driver"), "amdgcn": ("libhsa-runtime64.so.1",
                                                                     "ROCm's HSA runtime")}


def _loadable(soname: str, rpath_dirs: list[str] | None = None) -> str | None:
    """Where the dynamic loader would find `soname` (its cache, LD_LIBRARY_PATH, the
    binary's run paths, the usual folders); None where it would not."""
    dirs = [*(rpath_dirs or []), *os.environ.get("LD_LIBRARY_PATH", "").split(":")]
    dirs += ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
             "/lib", "/usr/lib", "/usr/local/lib"]
    for d in dirs:
        if d and os.path.exists(os.path.join(d, soname)):
            return os.path.join(d, soname)
    found = ctypes.util.find_library(soname.split(".so")[0].removeprefix("lib"))
    return found if found == soname else None


def _needed_and_runpath(path: str) -> tuple[list[str], list[str]]:
    out = subprocess.run(["readelf", "-dW", path], capture_output=True, text=True).stdout
    needed, runpath = [], []
    for line in out.splitlines():
        if "(NEEDED)" in line:
            needed.append(line.split("[", 1)[1].rstrip("]"))
        elif "(RUNPATH)" in line or "(RPATH)" in line:
            origin = os.path.dirname(os.path.abspath(path))
            runpath += [p.replace("$ORIGIN", origin) for p in
                        line.split("[", 1)[1].rstrip("]").split(":")]
    return needed, runpath


def findings(path: str, info: dict) -> list[tuple[str, str, str]]:
    """(finding, evidence, fix) for the binary `path`, whose `inspect_file` description is
    `info` (the one document: no finding contradicts what it reads)."""
    elf = ElfFile.open(path)
    needed, runpath = _needed_and_runpath(path)
    out: list[tuple[str, str, str]] = []
    offload = os.environ.get("OMP_TARGET_OFFLOAD", "").upper()
    if offload == "DISABLED":
        out.append(("OMP_TARGET_OFFLOAD=DISABLED is set: every target region runs on the host",
                    "the environment of this shell",
                    "unset OMP_TARGET_OFFLOAD (or set it to MANDATORY to make host fallback an "
                    "error)"))
    for lib in needed:  # offlink's links of a toolchain's objects need them as its own do
        for toolchain in binaries.modules():
            if lib.startswith(toolchain.RUNTIMES) and _loadable(lib, runpath) is None:
                out.append((f"{lib} is not on the loader's path: the program does not start",
                            f"DT_NEEDED {lib} (readelf -d); searched the binary's run path, "
                            f"LD_LIBRARY_PATH and the system folders", toolchain.RUNTIME_FIX))
    if "table" in info:
        out += _offlink_module(elf, info)
    for o in info.get("offload", []):
        out += _toolchain(o)
    return out


def _device_findings(triple: str, what: str) -> list[tuple[str, str, str]]:
    """The driver a device kind needs, as far as this machine can tell."""
    for key, (soname, name) in DRIVERS.items():
        if triple.startswith(key) and _loadable(soname) is None:
            return [(f"{name} ({soname}) is not installed here, so the {what} cannot run on a "
                     f"GPU on this machine: target regions fall back to the host",
                     f"{soname} not on this machine's loader path",
                     f"run on a machine with {name} (and its GPU)")]
    return []


def _toolchain(o: dict) -> list[tuple[str, str, str]]:
    """A view's findings: every one follows from the view's own fields (the images it lists,
    the registration it read), so none contradicts `inspect`."""
    if o["toolchain"] == "offlink":
        return []  # the table's findings (_offlink_module)
    toolchain = binaries.module(o["toolchain"])
    out = []
    from_table = any(i["producer"] == "offlink" for i in o["images"])
    if o["registration"] is None and not from_table:  # else: the table's finding says it
        out.append(("no registration call: no image is handed to the runtime, so every target "
                    "region runs on the host", f"no {' or '.join(toolchain.REGISTRATIONS)} in "
                    f"the binary's symbol tables", toolchain.NO_REGISTRATION_FIX))
    elif not o["images"]:  # registered, yet no image read: say what the reading found
        out.append((f"{toolchain.TITLE} has entries but no device "
                    f"image in the binary",
                    "inspect's reading: " + ("; ".join(o["notes"]) or "no image found"),
                    "compile and link with the toolchain's offload flags (-foffload=..., "
                    "-fopenmp-targets=...)"))
    return out + toolchain.findings(o, _loadable, _device_findings)


def _offlink_module(elf: ElfFile, info: dict) -> list[tuple[str, str, str]]:
    out = []
    if settings.text("OFFLINK_TARGET").lower() == "none":
        out.append(("OFFLINK_TARGET=none is set: offlink's runtime runs every module on the "
                    "host", "the environment of this shell", "unset OFFLINK_TARGET"))
    targets = [t["name"] for t in info["table"]["targets"]]
    names = {s.name for s in elf.symbols(dynamic=True)} | {s.name for s in elf.symbols()}
    for toolchain in binaries.modules():
        out += toolchain.module_findings(targets, names)
    for t in info["table"]["targets"]:
        if t["name"].startswith(("nvptx", "cuda", "openmp-nvptx")):
            out += _device_findings("nvptx", f"{t['name']} image")
    return out
