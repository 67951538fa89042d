"""The kernels, functions and variables a device image defines, read from the image itself: a
PTX text (GCC's, nvcc's JIT PTX), an ELF code object (clang's x86_64 and amdgcn images, GCC's
amdgcn image, a cubin), or a CUDA fatbin's cubins and PTX. For `offlink inspect`, which lists
them beside the host's entries, and `--symbol`, which looks a name up in them.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..elf import ELF_MAGIC, EM_AMDGPU, STB_LOCAL, STT_FUNC, STT_OBJECT, ElfFile
from ..errors import FormatError
from ..formats.fatbin import FATBIN_ELF, FATBIN_PTX, fatbin_containers

STT_CUDA_OBJECT = 13  # a cubin's `__device__` variables


class DeviceSymbol(NamedTuple):
    name: str  # as the image spells it
    kind: str  # kernel, function, variable
    exported: bool  # global (or weak) in the image: found by name from outside it


# PTX directives: `.visible .entry k (`, `.visible .func (.param ...) f (`, `.visible .global
# .align 4 .u32 v[1] = ...;`; `.extern` lines declare what another text defines.
_PTX_ENTRY = re.compile(rb"^[ \t]*(\.visible[ \t]+|\.weak[ \t]+)?\.entry[ \t]+([\w$.]+)", re.M)
_PTX_FUNC = re.compile(rb"^[ \t]*(\.visible[ \t]+|\.weak[ \t]+)?\.func[ \t]+(?:\([^)]*\)[ \t]*)?"
                       rb"([\w$.]+)[ \t]*(\([^;{]*\))?[ \t\n]*([;{]?)", re.M)
_PTX_VAR = re.compile(rb"^[ \t]*(\.visible[ \t]+|\.weak[ \t]+)?\.(?:global|const)[ \t]+"
                      rb"[^;=\n]*?([\w$.]+)[ \t]*(?:\[[^\]]*\])*[ \t]*(?:=|;)", re.M)


def ptx_symbols(text: bytes) -> list[DeviceSymbol]:
    """The definitions of one or more PTX texts (NUL-separated: GCC's image, one per CU)."""
    found: dict[str, DeviceSymbol] = {}
    for m in _PTX_ENTRY.finditer(text):
        found.setdefault(m.group(2).decode(), DeviceSymbol(m.group(2).decode(), "kernel",
                                                           m.group(1) is not None))
    for m in _PTX_FUNC.finditer(text):
        if m.group(4) == b";":
            continue  # a prototype: its body is elsewhere
        name = m.group(2).decode()
        found.setdefault(name, DeviceSymbol(name, "function", m.group(1) is not None))
    for m in _PTX_VAR.finditer(text):
        name = m.group(2).decode()
        found.setdefault(name, DeviceSymbol(name, "variable", m.group(1) is not None))
    return sorted(found.values())


def elf_symbols(image: bytes, where: str) -> list[DeviceSymbol]:
    """The defined functions and variables of an ELF code object; its kernels are clang's
    `__omp_offloading_*` functions (x86_64), an AMD GPU kernel's descriptor `NAME.kd`, a
    cubin's function with parameter space of its own (`.nv.constant0.NAME`)."""
    elf = ElfFile(image, where)
    sections = {s.name for s in elf.sections}
    kernels = {s.name[: -len(".kd")] for s in elf.symbols()
               if elf.e_machine == EM_AMDGPU and s.name.endswith(".kd") and s.defined}
    found: dict[str, DeviceSymbol] = {}
    for s in elf.symbols():
        if not s.name or not s.defined or s.name.endswith(".kd") \
                or s.st_type not in (STT_FUNC, STT_OBJECT, STT_CUDA_OBJECT):
            continue
        if s.st_type != STT_FUNC:
            kind = "variable"
        elif s.name in kernels or s.name.startswith("__omp_offloading_") \
                or f".nv.constant0.{s.name}" in sections:
            kind = "kernel"
        else:
            kind = "function"
        found.setdefault(s.name, DeviceSymbol(s.name, kind, s.st_bind != STB_LOCAL))
    return sorted(found.values())


def image_symbols(kind: str, image: bytes, where: str) -> tuple[list[DeviceSymbol], list[str]]:
    """(the symbols, notes on what could not be read) of an image of `kind`: ptx (or GCC's
    nvptx-none, NUL-separated PTX texts), elf, shared-object, cubin, fatbin; bitcode is not
    read."""
    notes: list[str] = []
    if kind in ("ptx", "nvptx-none"):
        return ptx_symbols(image), notes
    if kind == "fatbin":
        found: dict[str, DeviceSymbol] = {}
        for e in (e for _, _, entries in fatbin_containers(image) for e in entries):
            if e.compressed:
                notes.append(f"{where}: sm_{e.sm}: compressed, its symbols not read (nvcc "
                             f"-Xfatbin=-compress-all=false keeps them readable)")
                continue
            try:
                syms = (elf_symbols(e.data, where) if e.kind == FATBIN_ELF
                        else ptx_symbols(e.data) if e.kind == FATBIN_PTX else [])
            except FormatError as err:
                notes.append(str(err))
                continue
            for s in syms:
                found.setdefault(s.name, s)
        return sorted(found.values()), notes
    if image[:4] == ELF_MAGIC:
        try:
            return elf_symbols(image, where), notes
        except FormatError as e:
            return [], [str(e)]
    return [], [f"{where}: a {kind} image: its symbols are not read"]
