"""Runtime registrations: what a toolchain's offload runtime expects at program start, built
from this link's images and table layout (libomptarget's here; libgomp's still lives in
link/gomp_register.py).

A target names its registration (`Target.registration`); the link's pipeline asks `objects`
for the objects to add to the host link and names no runtime itself.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..formats.table import Layout
    from ..link.cache import Cache
    from ..link.device import Image
    from ..link.plan import LinkPlan


def objects(plan: LinkPlan, images: list[Image], layout: Layout, workdir: str,
            cache: Cache | None = None) -> list[str]:
    """One object per registration the images' targets ask for (none for most targets)."""
    groups: dict[str, list[int]] = {}
    for i, img in enumerate(images):
        name = getattr(img.target, "registration", "")
        if name:
            groups.setdefault(name, []).append(i)
    out = []
    for name, indexes in groups.items():
        module = importlib.import_module(f"{__name__}.{name}")
        out.append(module.build(plan, [images[i] for i in indexes],
                                [layout.image_offsets[i] for i in indexes], workdir, cache))
    return out
