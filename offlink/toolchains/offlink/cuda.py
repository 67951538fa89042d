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
the same places. `OFFLINK_NVCC_FLAGS` adds options to every nvcc command (e.g. `-ccbin g++-12`,
`-Xptxas -v`, `-lineinfo`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import struct
from dataclasses import dataclass
from pathlib import Path

from ... import settings
from ...errors import FormatError, LinkError, ToolError, UsageError
from ...plugins import Target

NAME = "nvptx64-nvidia-cuda"
DEFAULT_ARCHS = ("sm_80",)  # CUDA 13 dropped sm_35..sm_70; sm_80 runs on A100 and 8.x GPUs
SHADOW_INCLUDE = Path(__file__).resolve().parent / "cuda_include"
ARCH_OPTION = "arch="  # the payload's options: one "arch=sm_NN" or "arch=compute_NN" each
_ARCH = re.compile(r"(sm|compute)_(\d{2,3})\Z")

# Fatbin container (as fatbinary writes it; cuobjdump reads the same).
FATBIN_MAGIC = 0xBA55ED50
FATBIN_HEADER = struct.Struct("<IHHQ")  # magic, version, header_size, size of the entries
FATBIN_ENTRY = struct.Struct("<HHIQ")  # kind, version, header_size, payload size (padded)
FATBIN_PTX, FATBIN_ELF = 1, 2
FATBIN_COMPRESSED = 0x2000 | 0x8000  # flag bits of a compressed entry (older, CUDA 13)

# CUDA ELF (cubin) details.
STO_CUDA_ENTRY = 0x10  # st_other bit of a kernel
STT_OBJECT, STT_FUNC, STT_CUDA_OBJECT = 1, 2, 13
STB_GLOBAL, STB_WEAK = 1, 2
STV_HIDDEN = 2
STV_INTERNAL = 3


# -- the toolkit ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Toolkit:
    nvcc: str
    nvlink: str
    fatbinary: str
    flags: tuple[str, ...]  # OFFLINK_NVCC_FLAGS


def toolkit() -> Toolkit:
    """The CUDA tools to run; a missing nvcc is one clear error naming what to set."""
    from ...run import which

    homes = [os.environ[v] for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    bins = [os.path.join(h, "bin") for h in homes]
    given = settings.text("OFFLINK_NVCC")
    if given:
        nvcc = which(given)
        if nvcc is None:
            raise ToolError(f"OFFLINK_NVCC: '{given}' not found (the CUDA compiler to use)")
    else:
        candidates = [os.path.join(b, "nvcc") for b in bins]
        candidates += ["nvcc", "/usr/local/cuda/bin/nvcc"]
        nvcc = next((found for c in candidates if (found := which(c))), None)
        if nvcc is None:
            raise ToolError(f"target {NAME}: the CUDA toolkit was not found (no nvcc in "
                            f"$CUDA_HOME/bin, on PATH or in /usr/local/cuda/bin); install it, "
                            f"or set CUDA_HOME or OFFLINK_NVCC")
    # nvlink and fatbinary come with nvcc; /usr/local/bin/nvcc may be a wrapper script.
    dirs = [os.path.dirname(os.path.realpath(nvcc)), *bins, "/usr/local/cuda/bin"]

    def beside(tool: str) -> str:
        for d in dirs:
            if which(os.path.join(d, tool)):
                return os.path.join(d, tool)
        return which(tool) or tool  # running it then names the missing tool

    flags = tuple(shlex.split(settings.text("OFFLINK_NVCC_FLAGS")))
    return Toolkit(nvcc, beside("nvlink"), beside("fatbinary"), flags)


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


# -- the fatbin container and cubins -------------------------------------------------------

@dataclass(frozen=True)
class FatbinEntry:
    kind: int  # FATBIN_PTX or FATBIN_ELF
    sm: int  # e.g. 90
    data: bytes  # the cubin, or the PTX text (trailing NULs removed)


def is_fatbin(data: bytes) -> bool:
    return len(data) >= 4 and struct.unpack_from("<I", data)[0] == FATBIN_MAGIC


def fatbin_entries(data: bytes, where: str) -> list[FatbinEntry]:
    """The images of a fatbin, every offset checked; compressed entries are refused."""
    if len(data) < FATBIN_HEADER.size or not is_fatbin(data):
        raise FormatError(f"{where}: not a fatbin")
    _, _, header_size, size = FATBIN_HEADER.unpack_from(data)
    end = header_size + size
    if header_size < FATBIN_HEADER.size or end > len(data):
        raise FormatError(f"{where}: truncated fatbin")
    out = []
    pos = header_size
    while pos < end:
        if end - pos < 64:
            raise FormatError(f"{where}: truncated fatbin entry at offset {pos}")
        kind, _, entry_header, payload = FATBIN_ENTRY.unpack_from(data, pos)
        sm = struct.unpack_from("<I", data, pos + 28)[0]
        flags = struct.unpack_from("<Q", data, pos + 40)[0]
        start = pos + entry_header
        if entry_header < 64 or start + payload > end:
            raise FormatError(f"{where}: corrupt fatbin entry at offset {pos}")
        if flags & FATBIN_COMPRESSED:
            raise FormatError(f"{where}: compressed fatbin entry at offset {pos} (offlink "
                              f"builds with -no-compress)")
        body = data[start : start + payload]
        if kind == FATBIN_PTX:
            body = body.rstrip(b"\0")
        if kind in (FATBIN_PTX, FATBIN_ELF):
            out.append(FatbinEntry(kind, sm, body))
        pos = start + payload
    return out


def cubin_arch(data: bytes, where: str) -> str:
    """A cubin's architecture (`sm_80`) from its ELF header: e_flags holds the SM number,
    in bits 8-15 from ELF ABI version 8 (CUDA 13's tools), in bits 0-7 before."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2:
        raise FormatError(f"{where}: not a 64-bit cubin")
    e_flags, = struct.unpack_from("<I", data, 0x30)
    sm = (e_flags >> 8) & 0xFF if data[8] >= 8 else e_flags & 0xFF
    return f"sm_{sm}"


@dataclass(frozen=True)
class DeviceSymbol:
    name: str
    kind: str  # "function" (a kernel) or "variable"
    size: int
    strong: bool


def cubin_symbols(data: bytes, where: str) -> dict[str, DeviceSymbol]:
    """The kernels and external variables a cubin defines.

    Read here rather than with offlink.elf: a cubin's symbols carry the kernel mark in
    st_other, and its .nv.global has a CUDA-specific NOBITS type (SHT_LOPROC + 7) with no
    bytes in the file."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise FormatError(f"{where}: not a 64-bit little-endian cubin")
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if e_shentsize != 64 or e_shoff + e_shnum * 64 > len(data):
        raise FormatError(f"{where}: truncated cubin (section headers)")
    # (sh_name, sh_type, sh_offset, sh_size, sh_link) of every section
    shdrs = [struct.unpack_from("<IIQQQQI", data, e_shoff + i * 64)[:6] + (
        struct.unpack_from("<I", data, e_shoff + i * 64 + 40)[0],) for i in range(e_shnum)]

    def content(i: int) -> bytes:
        _, _, _, _, off, size, _ = shdrs[i]
        if off + size > len(data):
            raise FormatError(f"{where}: truncated cubin (section {i})")
        return data[off : off + size]

    def cstr(table: bytes, off: int) -> str:
        if off >= len(table):
            raise FormatError(f"{where}: corrupt cubin (name offset {off})")
        return table[off : table.find(b"\0", off)].decode(errors="surrogateescape")

    shstr = content(e_shstrndx) if 0 < e_shstrndx < e_shnum else b""
    names = [cstr(shstr, h[0]) if shstr else "" for h in shdrs]
    out: dict[str, DeviceSymbol] = {}
    for i, h in enumerate(shdrs):
        if h[1] != 2:  # SHT_SYMTAB
            continue
        link = h[6]
        if not 0 < link < e_shnum:
            raise FormatError(f"{where}: corrupt cubin (symbol table's string table)")
        strtab, raw = content(link), content(i)
        for off in range(24, len(raw) - 23, 24):  # entry 0 is the null symbol
            st_name, st_info, st_other, st_shndx, _, st_size = struct.unpack_from(
                "<IBBHQQ", raw, off)
            bind, typ = st_info >> 4, st_info & 0xF
            if bind not in (STB_GLOBAL, STB_WEAK) or st_other & 3 in (STV_HIDDEN, STV_INTERNAL):
                continue
            if not 0 < st_shndx < e_shnum or names[st_shndx].startswith((".nv.shared",
                                                                         ".nv.local")):
                continue  # undefined, absolute, or per-block/per-thread memory
            name = cstr(strtab, st_name)
            if typ == STT_FUNC and st_other & STO_CUDA_ENTRY:
                out[name] = DeviceSymbol(name, "function", 1, bind == STB_GLOBAL)
            elif typ in (STT_OBJECT, STT_CUDA_OBJECT):
                out[name] = DeviceSymbol(name, "variable", st_size, bind == STB_GLOBAL)
    return out


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
        from ...model import Offer

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
    from ...driver_args import words

    out: list[str] = []
    for w in words(args):
        if w.option in ("-D", "-U", "-I"):
            out.append(w.option + w.value)
        elif w.option in ("-isystem", "-include"):
            out += [w.option, w.value]
    return out
