"""Runtime registrations: what a toolchain's offload runtime expects at program start, built
from this link's images (named by their index in the table: link/reserve.py's symbols):
libomptarget's (`omptarget.py`) and libgomp's (`gomp.py`). offlink's own runtime needs none:
it finds the table the reserve and fill stages write into every module.

A target names the registration its images always need (`Target.registration`); the link's
pipeline asks `objects` for the objects to add to the host link, and `opt_in` for one asked
for on the command line; it names no runtime itself.
"""

from __future__ import annotations

import importlib
import os

from .. import settings

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from ..cache.store import Cache
    from ..model import Image, LinkPlan
    from .gcc.gomp import Registration

# Registration name (Target.registration) -> the toolchain folder whose module it is.
TOOLCHAIN = {"gomp": "gcc", "omptarget": "llvm", "cudart": "llvm"}


def objects(plan: LinkPlan, images: list[Image], workdir: str,
            cache: Cache | None = None) -> list[str]:
    """One object per registration the images' targets ask for (none for most targets)."""
    groups: dict[str, list[int]] = {}
    for i, img in enumerate(images):
        name = getattr(img.target, "registration", "")
        if name:
            groups.setdefault(name, []).append(i)
    out = []
    for name, indexes in groups.items():
        module = importlib.import_module(f".{TOOLCHAIN[name]}.{name}", __package__)
        out.append(module.build(plan, [images[i] for i in indexes], indexes, workdir, cache))
    return out


def start(plan: LinkPlan, targets: list, workdir: str, cache: Cache | None = None) -> None:
    """Start, beside the device links, the compiles `objects` will want for the images of
    `targets` (one image per target, in their order): libomptarget's (`omptarget.start`)."""
    for name, indexes in _groups(targets).items():
        if name == "omptarget":  # the others' modules start nothing early
            from .llvm import omptarget

            omptarget.start(plan, targets, indexes, workdir, cache)


def object_names(targets: list, workdir: str) -> list[str] | None:
    """The objects `objects` will return for the images of `targets`, known before they are
    built (libomptarget's: its file name is fixed), or None where a registration's is not."""
    out = []
    for name in _groups(targets):
        if name != "omptarget":
            return None
        from .llvm.omptarget import SOURCE, object_name

        out.append(os.path.join(workdir, object_name(SOURCE)))
    return out


def discard() -> None:
    """End the compiles `start` began that `objects` did not take (a failed link)."""
    import sys

    module = sys.modules.get(f"{__package__}.llvm.omptarget")
    if module is not None:
        module.discard()


def _groups(targets: list) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for i, t in enumerate(targets):
        name = getattr(t, "registration", "")
        if name:
            groups.setdefault(name, []).append(i)
    return groups


def opt_in(plan: LinkPlan, images: list[Image], workdir: str,
           asked: bool, cache: Cache | None = None) -> Registration | None:
    """The registration this link makes besides its targets' own, or None: libgomp's of
    GCC's image (by default; `asked`: --gomp-register, which then requires one). The pipeline
    builds it, puts it into the host link (`host_argv`) and relinks until `check` accepts the order
    of the linked binary's host table; `option` names it in messages."""
    if not enabled(asked) or not asked and not any(
            i.target.name in ("nvptx-none", "amdgcn-amdhsa") for i in images):
        return None
    from .gcc import gomp  # only now: a link that asks for none does not import it

    return gomp.Registration.for_link(plan, images, workdir, asked, cache)


def enabled(asked: bool) -> bool:
    """Whether libgomp's registration is made: by default (as GCC's own link makes it), but
    where OFFLINK_GOMP_REGISTER=0 leaves it out (--gomp-register then wins)."""
    return asked or settings.flag("OFFLINK_GOMP_REGISTER")
