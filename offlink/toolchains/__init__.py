"""The plug-ins' registry: a target by name or alias (each toolchain's module imported only
when used); the dialects by section (dialects.py) and the runtime registrations by name
(registrations.py) beside it. No toolchain module imports this one."""

from __future__ import annotations

from .. import settings
from ..errors import UsageError
from ..plugins import host_triple

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from ..plugins import Target

# Canonical name -> (module, class); a target's module is imported only when it is used,
# so a host-only link does not pay for the CUDA and GCC modules' imports.
_TARGETS = {
    "nvptx-none": ("gcc.nvptx", "GccNvptxTarget"),
    "amdgcn-amdhsa": ("gcc.gcn", "GccGcnTarget"),
    "nvptx64-nvidia-cuda": ("offlink.cuda", "CudaTarget"),
}
_ALIASES = {"cuda": "nvptx64-nvidia-cuda"}


def _target(canonical: str) -> Target | None:
    import importlib

    if canonical == host_triple():
        from .offlink.host import HostTarget

        return HostTarget(canonical)
    if canonical == "openmp-nvptx64-nvidia-cuda":  # its own class: the device runtime, cubins
        from .llvm.openmp_nvptx import OpenMPNvptxTarget

        return OpenMPNvptxTarget(canonical)
    if canonical == "openmp-amdgcn-amd-amdhsa":  # its own class: bitcode CUs, ld.lld
        from .llvm.openmp_amdgpu import OpenMPAmdgpuTarget

        return OpenMPAmdgpuTarget(canonical)
    if canonical.startswith("openmp-"):  # clang's OpenMP offload objects (llvm/dialect.py)
        from .llvm.openmp import OpenMPTarget

        return OpenMPTarget(canonical)
    if canonical.startswith("cuda-"):  # clang's CUDA objects (--offload-new-driver)
        from .llvm.clang_cuda import ClangCudaTarget

        return ClangCudaTarget(canonical)
    if canonical not in _TARGETS:
        return None
    module, cls = _TARGETS[canonical]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)()


def _aliases() -> dict[str, str]:
    return {"host": host_triple(), **_ALIASES}


def resolve(name: str) -> Target:
    """A target by name or alias (`host`, `cuda`), with its options after ':' if any
    (`nvptx64-nvidia-cuda:sm_80,sm_90`); an unknown name is a usage error listing the known."""
    aliases = _aliases()
    base, colon, variant = name.partition(":")
    canonical = aliases.get(base, base)
    target = _target(canonical)
    if target is not None:
        return target.with_variant(variant) if colon else target
    names = ", ".join([*sorted(aliases), *sorted([host_triple(), *_TARGETS])])
    raise UsageError(f"unknown offload target '{name}' (known: {names})")


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
