"""Stage 4, device link: one image per target from its CUs' objects, and the merged offers."""

from __future__ import annotations

import os

from ..errors import LinkError
from ..model import CompiledCU, Image, LinkPlan, Offer
from ..plugins import Target
from .narrow import EVERY, Narrowing


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


def image_path(target: Target, workdir: str) -> str:
    return os.path.join(workdir, f"image-{target.name}")


def image_offers(target: Target, compiled: list[CompiledCU], data: bytes, path: str,
                 narrowing: Narrowing = EVERY) -> tuple[dict[str, Offer], dict[str, str]]:
    """The merged offers, narrowed, that the image at `path` exports; a name the program made
    hidden is left out (unless a CU or the link offers it by name), any other one not
    exported is an error."""
    offers, owners = merge_offers(compiled)
    kept = narrowing.select(offers)
    if kept is not None:
        offers = {n: o for n, o in offers.items() if n in kept}
        owners = {n: owners[n] for n in offers}
    exported = target.exports(data, path)
    explicit = {n for c in compiled for n in c.cu.payload.offered} | narrowing.exact
    for name in [n for n in offers if n not in exported]:
        why, hidden = target.why_not_exported(data, path, name, compiled)
        if hidden and name not in explicit:
            del offers[name], owners[name]  # not offered, like a hidden definition
            continue
        raise LinkError(f"target {target.name}: '{name}' offered by {owners[name]} is not "
                        f"exported by the image{': ' + why if why else ''}")
    return offers, owners


def image_command(plan: LinkPlan, target: Target, compiled: list[CompiledCU], output: str,
                  narrowing: Narrowing = EVERY) -> tuple[list[str], dict[str, bytes]]:
    """The image link and the files it reads besides the objects (path -> content): the
    target's own command, with the words that keep only what the narrowed offers reach."""
    kept = narrowing.select(merge_offers(compiled)[0])
    if kept is None:
        return target.image_argv(plan, compiled, output), {}
    return target.narrowed_image(plan, compiled, output, kept)


def device_link(plan: LinkPlan, target: Target, compiled: list[CompiledCU], workdir: str,
                narrowing: Narrowing = EVERY,
                command: tuple[list[str], dict[str, bytes]] | None = None) -> Image:
    """Link the image (with `command` when the caller has made it already: making it can
    write files, e.g. the CUDA target's PTX)."""
    merge_offers(compiled)  # duplicate names are refused before the link
    out = image_path(target, workdir)
    argv, files = command or image_command(plan, target, compiled, out, narrowing)
    for path, content in files.items():
        with open(path, "wb") as f:
            f.write(content)
    target.link_image(argv, out, compiled)
    with open(out, "rb") as f:
        data = f.read()
    offers, owners = image_offers(target, compiled, data, out, narrowing)
    return Image(target, out, data, offers, owners)
