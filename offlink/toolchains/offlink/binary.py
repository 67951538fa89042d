"""What nvcc's own link put into a binary: the `.nv_fatbin` section, its architectures and the
kernels and variables of its cubins (offlink's CUDA target links with nvcc); and the
architectures of an `offlink cc` payload. toolchains/binaries.py says what this module answers."""

from __future__ import annotations

from collections.abc import Callable

from ...elf import ElfFile
from ...errors import FormatError
from ...formats.fatbin import FATBIN_ELF, fatbin_containers
from ..binaries import Entry, Image, Offload, Registered, registration
from .cuda import ARCH_OPTION, NAME

RUNTIME = "cudart"  # the runtime that gets the images
TITLE = "nvcc's link (a CUDA fatbin)"  # how inspect names its view

NV_FATBIN = ".nv_fatbin"
REGISTRATIONS = ("__cudaRegisterFatBinary", "__cudaRegisterLinkedBinary")
RUNTIMES = ()  # the libraries its programs need to start, by name
RUNTIME_FIX = ""
NO_REGISTRATION_FIX = "link with nvcc (or -lcudart)"
EXTRACT_TARGET = "cuda"


def read(elf: ElfFile, sections: set[str]) -> Offload | None:
    if NV_FATBIN not in sections:
        return None
    section = elf.section(NV_FATBIN)
    assert section is not None
    data = bytes(elf.content(section))
    out = Offload("cuda", registration(elf, REGISTRATIONS))
    kernels: list[tuple[str, str, int]] = []
    for pos, end, entries in fatbin_containers(data):
        archs = []
        for e in entries:
            archs.append(f"{'sm' if e.kind == FATBIN_ELF else 'compute'}_{e.sm}")
            if e.kind == FATBIN_ELF and not e.compressed:
                kernels += _cubin_kernels(e.data)
            elif e.kind == FATBIN_ELF:
                out.notes.append(f"sm_{e.sm}: compressed cubin, its kernels not read (nvcc "
                                 f"-Xfatbin=-compress-all=false keeps them readable)")
        out.images.append(Image(NAME, tuple(dict.fromkeys(archs)), "fatbin", "nvcc",
                                data[pos:end], section.sh_offset + pos, NV_FATBIN))
    if out.registration is not None:
        out.registered.append(Registered(NAME, None, f"{out.registration} in the symbol tables"))
    host = {s.name: s.st_value for s in elf.symbols() if s.defined and s.name}
    for name, kind, size in dict.fromkeys(kernels):  # the host stub or shadow: same name
        out.entries.append(Entry(name, kind, host.get(name, 0), size, None))
    return out


def _cubin_kernels(cubin: bytes) -> list[tuple[str, str, int]]:
    """(name, kind, size) of the global functions (kernels, and -rdc's extern device functions)
    and the variables (`__device__`: STT_OBJECT, or CUDA's own object type 13; local to a
    whole-program cubin, yet registered by name through the host's shadow) a cubin defines."""
    try:
        syms = ElfFile(cubin, "cubin").symbols()
    except FormatError:
        return []
    return [(s.name, "function" if s.st_type == 2 else "variable",
             0 if s.st_type == 2 else s.st_size)
            for s in syms if s.defined and s.name and not s.name.startswith(".")
            and ((s.st_type == 2 and s.is_global) or s.st_type in (1, 13))]


def findings(offload: dict, loadable: Callable[[str], str | None],
             device: Callable[[str, str], list[tuple[str, str, str]]]
             ) -> list[tuple[str, str, str]]:
    return device("nvptx", "fatbin")


def module_findings(targets: list[str], symbols: set[str]) -> list[tuple[str, str, str]]:
    return []


ENTRY_TERMS = {"function": "a kernel (`__global__`) of the fatbin's cubins, launched through "
                            "its host stub",
               "variable": "a `__device__` variable of the fatbin's cubins, reached through "
                           "its host shadow"}


def claims(target: str) -> bool:
    return False  # offlink's CUDA target is offlink's own runtime's


def device_only(name: str, where: list[str], exported: bool) -> str:
    what = ("a `__device__` variable the host does not register (local to the cubin)"
            if "(variable" in where[0] else "a `__device__` function, called from device code")
    return f"'{name}' is in the fatbin {', '.join(where)}: {what}"


def extract_target(image: Image) -> str | None:
    return EXTRACT_TARGET


def not_offered(table, name: str) -> str | None:
    return None


def payload_archs(options: tuple[str, ...]) -> tuple[str, ...]:
    """The architectures an `offlink cc` payload's options name (the CUDA target's)."""
    return tuple(o[len(ARCH_OPTION):] for o in options if o.startswith(ARCH_OPTION))


def unnamed(triples: list[str]) -> str | None:
    """None: its images keep a symbol for each function they hold."""
    return None
