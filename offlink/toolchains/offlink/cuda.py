"""The CUDA target (nvptx64-nvidia-cuda): per-CU nvcc builds, nvlink per architecture, a fatbin.

`offlink cc` captures a CU as CUDA source preprocessed by nvcc for the device (`nvcc -E -x cu
-rdc=true -arch=sm_NN`, with __OFFLINK_TARGET__ and __OFFLINK_TARGET_CUDA__ defined), so the
fat object holds everything the link-time compile needs. `__CUDA_ARCH__` is fixed at that
point: the capture uses the lowest architecture asked for, and the link refuses to build a CU
for an older one.

`offlink link` compiles each CU once with nvcc (`-rdc=true -fatbin`, one `-gencode` per
architecture), links the CUs per architecture with nvlink, and makes the image: the linked
cubin when there is one architecture, else a fatbin (fatbinary) holding one cubin per `sm_NN`
and, for each `compute_NN`, every CU's relocatable PTX, which the runtime JIT-links on a GPU
that none of the cubins fits.

The preprocessed text already contains cuda_runtime.h, which nvcc would include again; the
link-time compile puts `cuda_include/` (an empty cuda_runtime.h) first on the include path.

A CU offers its kernels (`__global__`, STO_CUDA_ENTRY) and its external `__device__` and
`__constant__` variables, by their symbol names (C++ names mangled, `extern "C"` ones plain;
offlink.h's OFFLINK_KERNEL gives C linkage). Device functions are not offered: the driver
cannot look them up by name.

Tools: `OFFLINK_NVCC` (the nvcc to run), else `$CUDA_HOME/bin/nvcc` (or `$CUDA_PATH`), else
nvcc on PATH, else /usr/local/cuda/bin/nvcc; nvlink and fatbinary beside that nvcc, else in
the same places (toolchains/cuda_toolkit.py finds them). `OFFLINK_NVCC_FLAGS` adds options to
every nvcc command (e.g. `-ccbin g++-12`, `-Xptxas -v`, `-lineinfo`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from pathlib import Path

from ...driver_args import words
from ...errors import LinkError, UsageError
from ...formats.cubin import DeviceSymbol, cubin_symbols
from ...formats.fatbin import FATBIN_ELF, FATBIN_PTX, fatbin_entries, is_fatbin
from ...model import Offer
from ...plugins import Target
from ..cuda_toolkit import toolkit

NAME = "nvptx64-nvidia-cuda"
DEFAULT_ARCHS = ("sm_80",)  # CUDA 13 dropped sm_35..sm_70; sm_80 runs on A100 and 8.x GPUs
SHADOW_INCLUDE = Path(__file__).resolve().parent / "cuda_include"
ARCH_OPTION = "arch="  # the payload's options: one "arch=sm_NN" or "arch=compute_NN" each
_ARCH = re.compile(r"(sm|compute)_(\d{2,3})\Z")

# -- architectures -------------------------------------------------------------------------

def parse_archs(spec: str, where: str) -> tuple[str, ...]:
    """`sm_90,compute_90` -> ("sm_90", "compute_90"): sm_NN for cubins, compute_NN for PTX."""
    archs: list[str] = []
    for word in spec.split(","):
        arch = word.strip()
        if not _ARCH.match(arch):
            raise UsageError(f"{where}: '{arch}' is not a CUDA architecture (sm_NN for a "
                             f"cubin, compute_NN for PTX to JIT, e.g. sm_80 or compute_90)")
        if arch not in archs:
            archs.append(arch)
    return tuple(archs)


def arch_number(arch: str) -> int:
    return int(arch.split("_", 1)[1])


def _sorted(archs) -> tuple[str, ...]:
    return tuple(sorted(set(archs), key=lambda a: (a.startswith("compute"), arch_number(a))))


# -- the symbols an image defines ----------------------------------------------------------

_PTX_ENTRY = re.compile(r"^\s*\.(?:visible|weak)\s+\.entry\s+([\w$.]+)", re.M)
_PTX_DATA = re.compile(r"^\s*\.(visible|weak)\s+\.(?:global|const)\s+(?:\.align\s+\d+\s+)?"
                       r"\.[busf](8|16|32|64)\s+([\w$.]+)((?:\s*\[\d+\])*)", re.M)


def ptx_symbols(text: bytes) -> dict[str, DeviceSymbol]:
    """Kernels and external variables a PTX module defines."""
    ptx = text.decode(errors="surrogateescape")
    out = {m.group(1): DeviceSymbol(m.group(1), "function", 1, True)
           for m in _PTX_ENTRY.finditer(ptx)}
    for m in _PTX_DATA.finditer(ptx):
        size = int(m.group(2)) // 8
        for dim in re.findall(r"\d+", m.group(4)):
            size *= int(dim)
        out[m.group(3)] = DeviceSymbol(m.group(3), "variable", size, m.group(1) == "visible")
    return out


def image_symbols(data: bytes, where: str) -> list[tuple[str, dict[str, DeviceSymbol]]]:
    """Per architecture in an image or per-CU object (cubin or fatbin): (label, symbols)."""
    if not is_fatbin(data):
        return [("cubin", cubin_symbols(data, where))]
    out: dict[str, dict[str, DeviceSymbol]] = {}
    for e in fatbin_entries(data, where):
        if e.kind == FATBIN_ELF:
            out[f"sm_{e.sm}"] = cubin_symbols(e.data, f"{where} (sm_{e.sm})")
        else:  # one PTX entry per CU: together they are that architecture's code
            out.setdefault(f"compute_{e.sm} PTX", {}).update(ptx_symbols(e.data))
    return list(out.items())


# -- the target ----------------------------------------------------------------------------

class CudaTarget(Target):
    name = NAME
    macro = "__OFFLINK_TARGET_CUDA__"
    distributable = False
    not_distributable_because = ("its compile is nvcc's (distcc runs it locally; sccache can "
                                 "cache nvcc compiles but offlink does not rely on it)")
    static_link_problem = ("the runtime opens the CUDA driver (libcuda.so.1) with dlopen, "
                           "which a static executable cannot do")

    def __init__(self, archs: tuple[str, ...] = DEFAULT_ARCHS, explicit: bool = False):
        self.archs = archs
        self.explicit = explicit  # given as nvptx64-nvidia-cuda:ARCHS (else from the inputs)

    def __repr__(self) -> str:
        return f"CudaTarget({','.join(self.archs)})"

    @property
    def sm_archs(self) -> tuple[str, ...]:
        return tuple(a for a in self.archs if a.startswith("sm_"))

    @property
    def ptx_archs(self) -> tuple[str, ...]:
        return tuple(a for a in self.archs if a.startswith("compute_"))

    @property
    def image_kind(self) -> str:  # type: ignore[override]
        return "cubin" if len(self.sm_archs) == 1 and not self.ptx_archs else "fatbin"

    @property
    def capture_arch(self) -> str:
        """The sm_NN the device code is preprocessed for: the lowest one asked for."""
        return f"sm_{min(arch_number(a) for a in self.archs)}"

    def with_variant(self, variant: str) -> CudaTarget:
        return CudaTarget(_sorted(parse_archs(variant, f"target {NAME}")), explicit=True)

    # -- offlink cc ----------------------------------------------------------------------
    def capture_argv(self, compiler, preprocess_args, language, source, output):
        tk = toolkit()
        return [tk.nvcc, "-E", "-x", "cu", "-rdc=true", f"-arch={self.capture_arch}",
                *self.defines(), *preprocess_options(preprocess_args), *tk.flags, source,
                "-o", output]

    def code_kind(self, language: str) -> str:
        return "cuda"

    def payload_options(self, options: list[str]) -> list[str]:
        # The host compile's options are for gcc; the link-time compile needs the
        # architectures (the lowest is the one the code was preprocessed for).
        return [ARCH_OPTION + a for a in self.archs]

    # -- offlink link --------------------------------------------------------------------
    def for_inputs(self, cus, plan=None) -> CudaTarget:
        """The architectures to build: the link's own, else every one the CUs were captured
        for. A CU preprocessed for a newer GPU than one asked for cannot be built for it."""
        captured = {cu.label: cu_archs(cu) for cu in cus}
        archs = self.archs if self.explicit else \
            _sorted(a for arch_list in captured.values() for a in arch_list) or DEFAULT_ARCHS
        lowest = min(arch_number(a) for a in archs)
        for label, arch_list in captured.items():
            floor = min(arch_number(a) for a in arch_list)
            if floor > lowest:
                raise LinkError(f"{label}: its CUDA code was preprocessed for sm_{floor} (offlink "
                                f"cc --offload-target {NAME}:...) and cannot be built for "
                                f"sm_{lowest}; compile it for sm_{lowest} or link for "
                                f"sm_{floor} and newer")
        return CudaTarget(archs, explicit=True)

    def source_suffix(self, cu):
        return ".cu"

    def compile_argv(self, cu, source, output):
        tk = toolkit()
        gencode = []
        for a in self.archs:
            virtual = "compute_" + a.split("_", 1)[1]
            gencode += ["-gencode", f"arch={virtual},code={a}"]
        # nvcc names a CU's statics after a hash of the source's absolute path, which is a
        # temporary one here; a stable name keeps the image the same from link to link.
        digest = hashlib.sha256(cu.payload.code).hexdigest()[:16]
        stable = f"/offlink/{digest}/{os.path.basename(cu.payload.source)}"
        return [tk.nvcc, "-I", str(SHADOW_INCLUDE), "-rdc=true", "-fatbin", "-no-compress",
                *gencode, "-Xcicc", f"--orig_src_path_name={stable}", *tk.flags, "-x", "cu",
                source, "-o", output]

    def offers(self, cu, obj_path):
        with open(obj_path, "rb") as f:
            data = f.read()
        per_arch = image_symbols(data, obj_path)
        found: dict[str, DeviceSymbol] = {}
        for _, syms in per_arch:
            found.update(syms)
        for label, syms in per_arch:  # every architecture has the same names
            missing = sorted(set(found) - set(syms))
            if missing:
                raise LinkError(f"{cu.label}: '{missing[0]}' is missing from its {label} code")
        wanted = sorted(set(cu.payload.offered)) if cu.payload.offered else sorted(found)
        for name in wanted:
            if name not in found:
                raise LinkError(f"{cu.label}: offered symbol '{name}' is not a kernel or an "
                                f"external __device__ variable of its CUDA code")
        return tuple(Offer(n, found[n].kind, found[n].size, found[n].strong) for n in wanted)

    def image_argv(self, plan, compiled, output):
        return self._image_argv(compiled, output, [])

    def narrowed_image(self, plan, compiled, output, offered):
        """nvlink drops the kernels not listed in -kernels-used and the variables not listed in
        -variables-used that no kept code uses. Both match substrings (a superset of the names:
        harmless), and an empty list is left out (that kind is kept whole). The PTX of
        compute_NN architectures is JIT-linked by the driver as it is."""
        kinds: dict[str, list[str]] = {"function": [], "variable": []}
        offers = {o.name: o.kind for c in compiled for o in c.offers}  # the device link
        for name, kind in offers.items():  # refused duplicates already
            if name in offered:
                kinds[kind].append(name)
        extra = [f"-{option}={','.join(sorted(kinds[kind]))}"
                 for kind, option in (("function", "kernels-used"),
                                      ("variable", "variables-used")) if kinds[kind]]
        return self._image_argv(compiled, output, extra), {}

    def _image_argv(self, compiled, output, nvlink_options: list[str]):
        """One shell command: nvlink per sm_NN, then fatbinary unless the image is one cubin.
        nvlink takes a fatbin by its `.fatbin` suffix only (a `.o` is read as a host object
        and silently contributes nothing), hence the links to each CU's object."""
        tk = toolkit()
        script = []
        fatbins = []
        for c in compiled:
            script.append(shlex.join(["ln", "-sf", c.object_path, c.object_path + ".fatbin"]))
            fatbins.append(c.object_path + ".fatbin")
        if self.image_kind == "cubin":
            script.append(shlex.join([tk.nvlink, f"-arch={self.sm_archs[0]}", *nvlink_options,
                                      *fatbins, "-o", output]))
            return ["sh", "-ec", "\n".join(script)]
        images = []
        for a in self.sm_archs:
            cubin = f"{output}.{a}.cubin"
            script.append(shlex.join([tk.nvlink, f"-arch={a}", *nvlink_options, *fatbins, "-o",
                                      cubin]))
            images.append(f"--image3=kind=elf,sm={arch_number(a)},file={cubin}")
        for a in self.ptx_archs:
            for ptx in self._write_ptx(compiled, output, arch_number(a)):
                images.append(f"--image3=kind=ptx,sm={arch_number(a)},file={ptx}")
        # Uncompressed, so offlink (and the runtime's JIT link) can read the entries.
        script.append(shlex.join([tk.fatbinary, "-64", f"--create={output}", "--compress=false",
                                  *images]))
        return ["sh", "-ec", "\n".join(script)]

    def _write_ptx(self, compiled, output: str, sm: int) -> list[str]:
        """Each CU's PTX for `sm`, taken out of its object into a file fatbinary reads."""
        paths = []
        for i, c in enumerate(compiled):
            path = f"{output}.{i:04d}.compute_{sm}.ptx"
            paths.append(path)
            if not os.path.exists(c.object_path):  # --dry-run
                continue
            with open(c.object_path, "rb") as f:
                entries = fatbin_entries(f.read(), c.object_path)
            ptx = next((e.data for e in entries if e.kind == FATBIN_PTX and e.sm == sm), None)
            if ptx is None:
                raise LinkError(f"{c.cu.label}: no compute_{sm} PTX in its CUDA object")
            with open(path, "wb") as f:
                f.write(ptx + b"\n")
        return paths

    def exports(self, image, path):
        per_arch = image_symbols(image, path)
        names = set.intersection(*(set(syms) for _, syms in per_arch)) if per_arch else set()
        return names


def cu_archs(cu) -> tuple[str, ...]:
    """The architectures a CU was captured for (its payload's `arch=` options)."""
    archs = tuple(o[len(ARCH_OPTION):] for o in cu.payload.options if o.startswith(ARCH_OPTION))
    return archs or DEFAULT_ARCHS


def preprocess_options(args: list[str]) -> list[str]:
    """The host compile's -D, -U, -I, -isystem and -include options, spelled for nvcc; the rest
    (warnings, -std=c11, -O2 ...) are gcc's and do not apply to the CUDA preprocessing."""
    out: list[str] = []
    for w in words(args):
        if w.option in ("-D", "-U", "-I"):
            out.append(w.option + w.value)
        elif w.option in ("-isystem", "-include"):
            out += [w.option, w.value]
    return out
