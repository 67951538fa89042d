"""What clang's own offload link (`clang -fopenmp -fopenmp-targets=...`, clang 17-22) put into a
binary: the offload entries of every generation (32-byte rows in `omp_offloading_entries` up to
19, 56-byte rows there in 20 and in `llvm_offload_entries` from 21; dynamic relocations
applied; read by the LLVM dialect) and the OffloadBinary images of `.llvm.offloading`.
toolchains/binaries.py says what this module answers.
"""

from __future__ import annotations

from collections.abc import Callable

from ...elf import ElfFile
from ...formats.offload_binary import ENTRY_CTOR, ENTRY_DTOR, SECTION, parse_binaries
from ..binaries import (
    Entry,
    Image,
    Offload,
    Registered,
    defines,
    differs,
    host_names,
    registration,
)
from .dialect import linked_entries

RUNTIME = "libomptarget"  # the runtime that gets the images
TITLE = "clang's offload code (offload entries)"  # how inspect names its view

# The host side's entry sections by LLVM generation. 19: `omp_offloading_entries` (OpenMP) and
# `cuda_offloading_entries`, 32-byte rows; 20: the same sections, 56-byte rows; 21+: one
# `llvm_offload_entries`, 56-byte rows.
ENTRY_SECTIONS = ("omp_offloading_entries", "cuda_offloading_entries", "llvm_offload_entries")
REGISTRATIONS = ("__tgt_register_lib",)
OPENMP_PREFIX = "openmp-"  # clang's OpenMP targets (openmp*.py)
RUNTIMES = ("libomptarget",)  # the libraries its programs need to start, by name
RUNTIME_FIX = ("add its folder (e.g. /usr/lib/llvm-19/lib) to LD_LIBRARY_PATH or "
               "link with -Wl,-rpath,<folder>")
NO_REGISTRATION_FIX = ("link with clang and the same -fopenmp-targets=/--offload-arch= as the "
                       "compiles (clang-linker-wrapper writes the registration)")


def read(elf: ElfFile, sections: set[str]) -> Offload | None:
    if SECTION not in sections and not any(n in sections for n in ENTRY_SECTIONS):
        return None
    out = Offload("llvm", registration(elf, REGISTRATIONS))
    # every LLVM generation's rows (formats/offload_entries.py), dynamic relocations applied
    rows = [row for name in ENTRY_SECTIONS for row in linked_entries(elf, name)]
    host = host_names(elf, {a for a, _ in rows})
    for address, e in rows:
        if e.flags & (ENTRY_CTOR | ENTRY_DTOR):
            continue  # a global constructor's or destructor's kernel: no user name
        out.entries.append(Entry(e.name, e.kind, address,
                                 e.size if "variable" in e.kind else 0,
                                 differs(host.get(address), e.name)))
    section = elf.section(SECTION)
    if section is not None:
        content = bytes(elf.content(section))
        for img in parse_binaries(content, f"{elf.name}: section {SECTION}"):
            at = content.find(img.image)
            out.images.append(Image(img.triple, (img.arch,) if img.arch else (),
                                    img.image_kind, img.offload_kind, img.image,
                                    section.sh_offset + at if at >= 0 else None, SECTION))
    if out.registration is not None:  # one call for every image: its descriptor has no version
        out.registered.append(Registered("*", None, f"{out.registration} in the symbol tables"))
    if out.registration is None:
        out.notes.append("no __tgt_register_lib call: no image is registered with "
                         "libomptarget, so every target region runs on the host")
    return out


def findings(offload: dict, loadable: Callable[[str], str | None],
             device: Callable[[str, str], list[tuple[str, str, str]]]
             ) -> list[tuple[str, str, str]]:
    out = []
    for image in offload["images"]:
        if image["triple"].startswith(("x86_64", "aarch64")):
            continue  # libomptarget's host plugin: the CPU
        arch = f" ({' '.join(image['archs'])})" if image["archs"] else ""
        out += device(image["triple"], f"{image['triple']}{arch} image")
    return out


def module_findings(targets: list[str], symbols: set[str]) -> list[tuple[str, str, str]]:
    return []


ENTRY_TERMS = {"function": "an offload entry (a target region's kernel)",
               "indirect-function": "an indirect offload entry (`declare target indirect`: "
                                    "a host pointer to it is translated)",
               "variable": "an offload entry (a `declare target` variable)",
               "link-variable": "an offload entry (a `declare target link` variable)"}


def claims(target: str) -> bool:
    return target.startswith(OPENMP_PREFIX)


def device_only(name: str, where: list[str], exported: bool) -> str:
    """A name the images define but no offload entry lists."""
    return (f"'{name}' is in the images {', '.join(where)} but is no offload entry: called by "
            f"name in target regions; a host pointer to it is not translated unless it is "
            f"`declare target indirect` (between `#pragma omp begin declare target indirect` "
            f"and `#pragma omp end declare target`, clang >= 19)")


def unnamed(triples: list[str]) -> str | None:
    """clang's device link (LTO, always for AMD GPUs) internalises a function no entry lists;
    an AMD code object keeps no symbol for such a function (clang-22's gfx90a images: `scale`'s
    code is there, called by the kernel, unnamed), where a cubin keeps its local symbols."""
    amd = sorted({t.removeprefix(OPENMP_PREFIX) for t in triples if "amdgcn" in t})
    if not amd:
        return None
    return (f"clang's device link internalises a function that no offload entry lists, and an "
            f"{', '.join(amd)} image keeps no symbol for it: its code may be there unnamed")


def extract_target(image: Image) -> str | None:
    """None: `offlink extract` reads the OffloadBinaries as in objects."""
    return None


# how LLVM's OpenMPOpt renames a device function it internalises (`scale_$_internalized` in
# clang-22's sm_80 cubins; `.internalized` on targets whose names take a dot)
INTERNALIZED = ("_$_internalized", ".internalized")


def not_offered(table, name: str) -> str | None:
    clang = [t for t in table.targets if t.name.startswith(OPENMP_PREFIX)]
    if not clang:
        return None
    names = [t.name for t in table.targets]
    held = [t.name for t in clang
            if any(defines(t.image, t.name, name + s) for s in ("", *INTERNALIZED))]
    hidden = None if held else unnamed(names)
    where = (f"is in the {', '.join(held)} image but" if held
             else f"is named by no device image ({hidden}) and" if hidden
             else "is in no device image and")
    return (f"'{name}' {where} has no row: clang lists a function only when it is "
            f"`declare target indirect`. For a host function pointer called in a target "
            f"region, declare it between `#pragma omp begin declare target indirect` and "
            f"`#pragma omp end declare target` (clang >= 19); a variable needs `#pragma omp "
            f"declare target` (targets: {', '.join(names)})")
