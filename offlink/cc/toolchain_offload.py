"""Whether a compile carries the toolchain's own offload code (-foffload, -fopenmp-targets).

Such a compile is GCC's or clang's to make: `offlink cc` passes it through untouched (adding
offlink's own payload would give the link a target the user never asked for), and `offlink
link` links the objects as the toolchain's. A pure function of the command line, tested with
literal command lines, cheap enough for every compile (no subprocess, no lief).
"""

from __future__ import annotations

from ..driver_args import expand_response_files
from ..errors import OfflinkError

# Options whose value names offload targets or their options (GCC: -foffload=, clang:
# -fopenmp-targets=, --offload-arch= and its older spelling, the new driver's --offload=).
TARGET_PREFIXES = ("-foffload=", "-foffload-options=", "-fopenmp-targets=", "--offload-arch=",
                   "--cuda-gpu-arch=", "--offload=", "--offload-targets=")
# GCC's OpenACC compiles write offload code for every configured target on their own.
TARGET_FLAGS = ("-fopenacc",)


def offload_word(args: list[str]) -> str | None:
    """The first word of a compile's arguments (after the compiler) that makes the compiler
    write its own offload code, else None. `-foffload=disable` writes none; response files
    are read as the compiler reads them."""
    if any(a.startswith("@") for a in args):
        try:
            args = expand_response_files(args)
        except (OfflinkError, OSError):  # an unreadable one: the compiler says so itself
            pass
    for a in args:
        if a in TARGET_FLAGS:
            return a
        if a.startswith(TARGET_PREFIXES) and a != "-foffload=disable":
            return a
    return None
