"""Stage 4, device link: one image per target from its CUs' objects, and the merged offers."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .. import run as runner
from ..elf import ElfFile
from ..errors import LinkError
from ..targets import Target
from .compile import CompiledCU, Offer
from .plan import LinkPlan, find_library


@dataclass(frozen=True)
class Image:
    target: Target
    path: str
    data: bytes
    offers: dict[str, Offer]  # by name, over all CUs
    owners: dict[str, str]  # name -> the CU that offers it (for messages)


def merge_offers(compiled: list[CompiledCU]) -> tuple[dict[str, Offer], dict[str, str]]:
    """All CUs' offers by name; a name defined (strongly) by two CUs is an error."""
    offers: dict[str, Offer] = {}
    owners: dict[str, str] = {}
    for c in compiled:
        for o in c.offers:
            prev = offers.get(o.name)
            if prev is None:
                offers[o.name] = o
                owners[o.name] = c.cu.label
                continue
            if prev.strong and o.strong:
                raise LinkError(f"symbol '{o.name}' is offered by two CUs: {owners[o.name]} and "
                                f"{c.cu.label} (target {c.target.name})")
            if prev.kind != o.kind:
                raise LinkError(f"symbol '{o.name}' is a {prev.kind} in {owners[o.name]} and a "
                                f"{o.kind} in {c.cu.label} (target {c.target.name})")
            if o.strong:
                offers[o.name], owners[o.name] = o, c.cu.label
    return offers, owners


def image_link_argv(plan: LinkPlan, compiled: list[CompiledCU], output: str) -> list[str]:
    """Link a host-target image: a shared object whose own references bind to itself."""
    cxx = next((c for c in compiled if c.cu.payload.code_kind == "c++"), None)
    driver = (cxx or compiled[0]).cu.payload.compiler
    libs = []
    for inp in plan.inputs:
        # System and shared libraries the host program uses, for the image's own references;
        # the user's static archives are not linked in (their CUs were compiled above).
        if inp.kind == "library":
            found = find_library(inp.path, plan, inp.static)
            if found is None or found.endswith(".so"):
                libs.append("-l" + inp.path)
    dirs = ["-L" + d for d in plan.lib_dirs]
    return [driver, "-shared", "-fPIC", "-Wl,-Bsymbolic", "-Wl,-z,defs", "-Wl,--hash-style=gnu",
            "-o", output, *(c.object_path for c in compiled), *dirs, *libs]


def device_link(plan: LinkPlan, target: Target, compiled: list[CompiledCU], workdir: str) -> Image:
    offers, owners = merge_offers(compiled)
    out = os.path.join(workdir, f"image-{target.name}.so")
    runner.run(image_link_argv(plan, compiled, out), f"device link for target {target.name}")
    with open(out, "rb") as f:
        data = f.read()
    exported = {s.name for s in ElfFile(data, out).symbols(dynamic=True) if s.defined}
    for name in offers:
        if name not in exported:
            raise LinkError(f"target {target.name}: '{name}' offered by {owners[name]} is not "
                            f"exported by the image")
    return Image(target, out, data, offers, owners)
