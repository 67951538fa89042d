"""The plug-ins' registry: tables of the input dialects, targets, runtime registrations and
driver link jobs each toolchain provides, one line each, and the lookups over them (a
toolchain's module is imported only when used; dialects.py and registrations.py dispatch to
them). No toolchain module imports this one; adding a toolchain is its own folder and its
lines here."""

from __future__ import annotations

import importlib
from types import ModuleType

from .. import settings
from ..errors import UsageError
from ..formats import GCC_OFFLOAD_SECTION_PREFIX, PAYLOAD_SECTION_PREFIX
from ..plugins import Registration, Target, host_triple

# Section name prefix -> the toolchain whose dialect.py reads the objects' sections that
# carry its CUs (dialects.py).
DIALECTS = {
    PAYLOAD_SECTION_PREFIX: "offlink",
    GCC_OFFLOAD_SECTION_PREFIX: "gcc",
    ".llvm.offloading": "llvm",
}

# Target name (HOST: the host's triple; a name ending in '*': every name it begins) -> the
# module under toolchains/ and the class. The first row that matches a name is its target.
HOST = "host"
TARGETS = (
    (HOST, "offlink.host", "HostTarget"),
    ("nvptx64-nvidia-cuda", "offlink.cuda", "CudaTarget"),
    ("nvptx-none", "gcc.nvptx", "GccNvptxTarget"),
    ("amdgcn-amdhsa", "gcc.gcn", "GccGcnTarget"),
)
# The targets named by their objects only (not offered by `offlink cc`, nor listed in the
# message for an unknown name), as TARGETS.
OBJECT_TARGETS = (
    ("openmp-nvptx64-nvidia-cuda", "llvm.openmp_nvptx", "OpenMPNvptxTarget"),
    ("openmp-amdgcn-amd-amdhsa", "llvm.openmp_amdgpu", "OpenMPAmdgpuTarget"),
    ("openmp-*", "llvm.openmp", "OpenMPTarget"),
    ("cuda-*", "llvm.clang_cuda", "ClangCudaTarget"),
)
ALIASES = {"cuda": "nvptx64-nvidia-cuda"}

# Registration name (Target.registration) -> the module under toolchains/ and the class.
REGISTRATIONS = {
    "gomp": ("gcc.gomp", "GompRegistration"),
    "omptarget": ("llvm.omptarget", "OmptargetRegistration"),
    "cudart": ("llvm.cudart", "CudartRegistration"),
}
# A link option that asks for a registration (plugins.Registration.option) -> its name.
LINK_OPTIONS = {"--gomp-register": "gomp"}

# The module that runs a driver's link through its kept `-###` expansion (clang's), with the
# interface plugins.DriverJobs describes.
DRIVER_JOBS = "llvm.expansion"


def _class(module: str, name: str) -> type:
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def _row(canonical: str) -> tuple[str, str] | None:
    """The module and class of a target name (TARGETS, OBJECT_TARGETS), or None."""
    for name, module, cls in (*TARGETS, *OBJECT_TARGETS):
        if name == HOST:
            name = host_triple()
        if canonical == name or name.endswith("*") and canonical.startswith(name[:-1]):
            return module, cls
    return None


def _target(canonical: str) -> Target | None:
    row = _row(canonical)
    if row is None:
        return None
    target = _class(*row)
    # A class that names its one target takes no name; the others are told theirs.
    return target() if target.name else target(canonical)


def toolchain_of(target: str) -> str:
    """The toolchain (its folder under toolchains/, which names its dialect) of a target's
    canonical name; "" for an unknown name."""
    row = _row(target)
    return row[0].partition(".")[0] if row is not None else ""


def _aliases() -> dict[str, str]:
    return {HOST: host_triple(), **ALIASES}


def resolve(name: str) -> Target:
    """A target by name or alias (`host`, `cuda`), with its options after ':' if any
    (`nvptx64-nvidia-cuda:sm_80,sm_90`); an unknown name is a usage error listing the known."""
    aliases = _aliases()
    base, colon, variant = name.partition(":")
    canonical = aliases.get(base, base)
    target = _target(canonical)
    if target is not None:
        return target.with_variant(variant) if colon else target
    names = ", ".join([*sorted(aliases), *sorted(aliases.get(n, n) for n, _m, _c in TARGETS)])
    raise UsageError(f"unknown offload target '{name}' (known: {names})")


def registration(name: str) -> Registration:
    """The runtime registration of this name (Target.registration, REGISTRATIONS)."""
    module, cls = REGISTRATIONS[name]
    return _class(module, cls)()


def driver_jobs() -> ModuleType:
    """The module that runs a driver's links through their kept expansions (DRIVER_JOBS)."""
    return importlib.import_module(f"{__name__}.{DRIVER_JOBS}")


def default_targets() -> list[str]:
    """Targets for `offlink cc` without --offload-target: OFFLINK_TARGETS (comma list) or host.

    A word without a target name continues the previous target's ':' list, so
    `host,nvptx64-nvidia-cuda:sm_80,sm_90` is two targets."""
    env = settings.text("OFFLINK_TARGETS")
    out: list[str] = []
    for word in (w for w in env.split(",") if w):
        if out and ":" in out[-1] and "-" not in word and word not in _aliases():
            out[-1] += "," + word
        else:
            out.append(word)
    return out or ["host"]
