"""The one place that finds CUDA's tools (nvcc, nvlink, fatbinary, ptxas) for every target.

Two searches, each as the README documents it for its targets: offlink's own CUDA target runs
the nvcc that `OFFLINK_NVCC` names, else `$CUDA_HOME/bin/nvcc` (or `$CUDA_PATH`), else nvcc on
PATH, else /usr/local/cuda/bin/nvcc, with nvlink and fatbinary beside it (`toolkit`); clang's
NVIDIA targets run the tools of the CUDA that the link line's `--cuda-path=` names, else
$CUDA_HOME, $CUDA_PATH, /usr/local/cuda, or the one of the ptxas on PATH (`cuda_home`,
`cuda_bin`), as clang finds its CUDA.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

from .. import run as runner
from .. import settings
from ..errors import ToolError

NVCC_TARGET = "nvptx64-nvidia-cuda"  # offlink's CUDA target, which runs nvcc
CLANG_TARGET = "openmp-nvptx64-nvidia-cuda"  # named by the clang search's errors


@dataclass(frozen=True)
class Toolkit:
    nvcc: str
    nvlink: str
    fatbinary: str
    flags: tuple[str, ...]  # OFFLINK_NVCC_FLAGS


def _homes() -> list[str]:
    return [os.environ[v] for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]


def toolkit() -> Toolkit:
    """The CUDA tools offlink's CUDA target runs; a missing nvcc is one clear error naming
    what to set."""
    bins = [os.path.join(h, "bin") for h in _homes()]
    given = settings.text("OFFLINK_NVCC")
    if given:
        nvcc = runner.which(given)
        if nvcc is None:
            raise ToolError(f"OFFLINK_NVCC: '{given}' not found (the CUDA compiler to use)")
    else:
        candidates = [os.path.join(b, "nvcc") for b in bins]
        candidates += ["nvcc", "/usr/local/cuda/bin/nvcc"]
        nvcc = next((found for c in candidates if (found := runner.which(c))), None)
        if nvcc is None:
            raise ToolError(f"target {NVCC_TARGET}: the CUDA toolkit was not found (no nvcc in "
                            f"$CUDA_HOME/bin, on PATH or in /usr/local/cuda/bin); install it, "
                            f"or set CUDA_HOME or OFFLINK_NVCC")
    # nvlink and fatbinary come with nvcc; /usr/local/bin/nvcc may be a wrapper script.
    dirs = [os.path.dirname(os.path.realpath(nvcc)), *bins, "/usr/local/cuda/bin"]

    def beside(tool: str) -> str:
        for d in dirs:
            if runner.which(os.path.join(d, tool)):
                return os.path.join(d, tool)
        return runner.which(tool) or tool  # running it then names the missing tool

    flags = tuple(shlex.split(settings.text("OFFLINK_NVCC_FLAGS")))
    return Toolkit(nvcc, beside("nvlink"), beside("fatbinary"), flags)


def cuda_home(plan_argv: list[str] | None = None) -> str:
    """The CUDA installation clang's targets use (a folder with bin/ptxas): the link line's
    last --cuda-path=, else $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, else the one of the ptxas
    on PATH; one clear error when there is none."""
    homes = [w.split("=", 1)[1] for w in (plan_argv or []) if w.startswith("--cuda-path=")]
    for home in [*homes[-1:], *_homes(), "/usr/local/cuda"]:
        if os.access(os.path.join(home, "bin", "ptxas"), os.X_OK):
            return home
    found = runner.which("ptxas")
    if found:
        return os.path.dirname(os.path.dirname(os.path.realpath(found)))
    raise ToolError(f"target {CLANG_TARGET}: CUDA's ptxas was not found (give "
                    f"--cuda-path=DIR on the link line, or set CUDA_HOME)")


def cuda_bin(tool: str, plan_argv: list[str] | None = None) -> str:
    """A CUDA tool (ptxas, nvlink, fatbinary) of cuda_home()."""
    path = os.path.join(cuda_home(plan_argv), "bin", tool)
    if not os.access(path, os.X_OK):
        raise ToolError(f"target {CLANG_TARGET}: CUDA's {tool} was not found ({path})")
    return path
