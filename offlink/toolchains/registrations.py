"""Runtime registrations: what a toolchain's offload runtime expects at program start, built
from this link's images (plugins.Registration; the registry's REGISTRATIONS names each one's
module). offlink's own runtime needs none: it finds the table the reserve and fill stages
write into every module.

A target names the registration its images need (`Target.registration`); a registration may
also be asked for by a link option (`Registration.option`, in LinkOptions.toolchain_options).
The link's stages ask this module which to start early, which objects to add to the host link
and which host steps to run; they name no runtime themselves.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from . import LINK_OPTIONS, registration

if TYPE_CHECKING:
    from ..cache.store import Cache
    from ..model import LinkPlan
    from ..plugins import HostStep, Image, Registration, Target


def _groups(targets: list) -> dict[str, list[int]]:
    """Registration name -> the indexes of the targets (or images' targets) that name it."""
    groups: dict[str, list[int]] = {}
    for i, t in enumerate(targets):
        name = t.registration
        if name:
            groups.setdefault(name, []).append(i)
    return groups


def _asked(reg: Registration, toolchain_options: Mapping[str, object]) -> bool:
    """Whether the link's own option for `reg` (Registration.option) was given."""
    return bool(reg.option and toolchain_options.get(reg.option))


def start(plan: LinkPlan, targets: list[Target], workdir: str,
          cache: Cache | None = None) -> list[Registration]:
    """Start, beside the device links, what the registrations of `targets` (one image per
    target, in their order) will want; the registrations, for `discard`."""
    started = []
    for name, indexes in _groups(targets).items():
        reg = registration(name)
        reg.start(plan, targets, indexes, workdir, cache)
        started.append(reg)
    return started


def object_names(targets: list[Target], workdir: str) -> list[str] | None:
    """The objects `objects` will return for the images of `targets`, known before they are
    built, or None where one is not."""
    out = []
    for name in _groups(targets):
        path = registration(name).object_name(workdir)
        if path is None:
            return None
        out.append(path)
    return out


def objects(plan: LinkPlan, images: list[Image], workdir: str,
            cache: Cache | None = None) -> list[str]:
    """One object per registration the images' targets ask for (none for most targets),
    but for those that put themselves into the host link (`host_steps`)."""
    out = []
    for name, indexes in _groups([img.target for img in images]).items():
        reg = registration(name)
        if not reg.relinks:
            out.append(reg.build(plan, [images[i] for i in indexes], indexes, workdir, cache))
    return out


def host_steps(plan: LinkPlan, images: list[Image], workdir: str, cache: Cache | None,
               toolchain_options: Mapping[str, object]) -> list[HostStep]:
    """The registrations that rewrite the host link and check its output (`relinks`), named
    by the images' targets or asked for by an option of toolchain_options."""
    names = [*_groups([img.target for img in images]),
             *(name for option, name in LINK_OPTIONS.items() if toolchain_options.get(option))]
    out = []
    for name in dict.fromkeys(names):
        reg = registration(name)
        asked = _asked(reg, toolchain_options)
        if reg.relinks and reg.enabled(asked):
            step = reg.host_step(plan, images, workdir, cache, asked)
            if step is not None:
                out.append(step)
    return out


def dry_run_objects(targets: list[Target], workdir: str,
                    toolchain_options: Mapping[str, object]) -> list[str]:
    """The registrations' objects --dry-run shows in the host link: one per registration the
    targets name that the link makes."""
    out = []
    for name in _groups(targets):
        reg = registration(name)
        if reg.enabled(_asked(reg, toolchain_options)):
            out.append(os.path.join(workdir, f"offlink-{name}-register.o"))
    return out
