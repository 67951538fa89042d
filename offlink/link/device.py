"""Stage 4, device link: one image per target from its CUs' objects, and the merged offers."""

from __future__ import annotations

import os
import sys
import time

from .. import run as runner
from ..cache.keys import normalise
from ..cache.store import Cache
from ..digest import sha256
from ..errors import LinkError
from ..model import LinkPlan, Offer
from ..plugins import CompiledCU, Image, Target, write_objects
from ..toolchains import driver_jobs
from .compile import planned
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
    target.narrowed = kept is not None  # rows left out on purpose (Target.host_addresses)
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


def run_link(plan: LinkPlan, target: Target, compiled: list[CompiledCU], workdir: str,
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
    if type(target).link_image is Target.link_image:  # the command as given: a clang
        # the driver's linker job from its kept expansion
        driver_jobs().run_link(argv, f"device link for target {target.name}",
                               job=lambda words: target.run_linker_job(words, compiled))
    else:
        target.link_image(argv, out, compiled)
    with open(out, "rb") as f:
        data = f.read()
    offers, owners = image_offers(target, compiled, data, out, narrowing)
    return Image(target, out, data, offers, owners)


def device_link(plan, target: Target, compiled, workdir: str, cache: Cache | None,
                narrowing: Narrowing | None = None):
    """Stage 4 through the cache: the image of these objects, linked only when not cached."""

    narrowing = narrowing or EVERY
    whole = not narrowing.words  # the image's offers are every CU's
    if cache is None or not compiled or not all(c.key for c in compiled):
        write_objects(compiled)
        target.prepare_image(plan, compiled, workdir, cache)
        return run_link(plan, target, compiled, workdir, narrowing)
    out = image_path(target, workdir)
    if target.image_argv_reads_objects:
        write_objects(compiled)
    hits = cache.hits
    target.prepare_image(plan, compiled, workdir, cache)
    cache.hits = hits  # what the target took from the cache is not the image ("image from cache")
    argv, files = image_command(plan, target, compiled, out, narrowing)

    def make_key() -> str | None:
        return _image_key(cache, target, compiled, argv, out, workdir, files, plan)

    # A linker the cache does not know keys no image in it: linked at once, and its key
    # (which waits for the linker's `--version`) made while the host link runs.
    known = cache.knows_tool(argv[0])
    key = make_key() if known else None
    if known and key is None:
        write_objects(compiled)
        return run_link(plan, target, compiled, workdir, narrowing)  # reports it
    entry = cache.get(key) if key is not None else None
    if entry is None:
        if target.link_image_reads_objects:
            write_objects(compiled)  # only now: a cached image needs none of them
        image = run_link(plan, target, compiled, workdir, narrowing, (argv, files))
        meta = _image_meta(image, compiled, whole)
        if key is not None:
            cache.put(key, meta, image.data)
        else:
            cache.put_later(make_key, meta, image.data)
        return image
    with open(out, "wb") as f:
        f.write(entry.data)
    # The offers the entry keeps, when they are the whole link's (a narrowed link's image
    # may have the same key): the image is not searched for its definitions again.
    found = _offers_of(entry.meta, compiled) if whole else None
    if found is None:
        found = image_offers(target, compiled, entry.data, out, narrowing)
    offers, owners = found
    if runner.VERBOSE:
        print(f"offlink: from cache: {runner.show(argv)}", file=sys.stderr, flush=True)
    image = Image(target, out, entry.data, offers, owners)
    if entry.meta.get("whole") is not True and (whole or "whole" not in entry.meta):
        cache.put(key, _image_meta(image, compiled, whole), entry.data)  # an older entry
    return image


def cached_image(plan, target: Target, cus, workdir: str, cache: Cache,
                 narrowing: Narrowing | None = None):
    """Stages 3 and 4 from the image's cache entry alone, when every CU's object key and the
    image's key are known without reading an object (a relink with nothing changed): the
    image and the CUs as found in the cache (their own offers left empty: the image's are
    merged already), or None to go the usual way.

    The image's key covers its objects' keys, so the entry is the image those objects link
    to; its offers were kept with it (`_image_meta`), so no object entry is read. The object
    entries' times are refreshed all the same (`_refresh`), so the next link after one
    change finds the others."""
    if (target.image_argv_reads_objects or target.image_argv_reads_offers or not cus
            or (narrowing is not None and narrowing.words)):  # narrowing reads every offer
        return None
    plans = planned(cus, target, workdir, cache)
    if not all(argv for _, _, argv, _ in plans):
        return None  # a CU whose code is its object: the usual way writes and keys it
    compiled = [CompiledCU(cu, target, obj, (), key, cached=True)
                for cu, (_, obj, _, key) in zip(cus, plans)]
    out = image_path(target, workdir)
    argv = target.image_argv(plan, compiled, out)
    key = _image_key(cache, target, compiled, argv, out, workdir, None, plan)
    entry = cache.get(key) if key is not None else None
    found = _offers_of(entry.meta, compiled) if entry is not None else None
    if entry is None or found is None:
        return None
    offers, owners = found
    _refresh(cache, [c.key for c in compiled])
    with open(out, "wb") as f:
        f.write(entry.data)
    if runner.VERBOSE:
        print(f"offlink: from cache: {runner.show(argv)}", file=sys.stderr, flush=True)
    return Image(target, out, entry.data, offers, owners), compiled


_REFRESH = 600.0  # seconds: entries used together are refreshed at most this often


def _refresh(cache: Cache, keys: list[str]) -> None:
    """Refresh the times of entries a link used together (least recently used goes first),
    unless the first was refreshed less than _REFRESH seconds ago: they were all refreshed
    then, and the eviction order misses nothing by ten minutes."""
    try:
        if keys and time.time() - os.stat(cache.path(keys[0])).st_mtime < _REFRESH:
            return
    except OSError:
        pass
    for key in keys:
        try:
            os.utime(cache.path(key))
        except OSError:
            pass  # gone (trimmed by another link): the image stands without it


def _image_key(cache: Cache, target: Target, compiled, argv: list[str], out: str,
               workdir: str, files: dict[str, bytes] | None = None,
               plan=None) -> str | None:
    """The image's key: its objects' keys, the image link command (the files it reads besides
    the objects by content), the linker's identity and the working directory; None when its
    linker is not found (the device link reports it). The files the target says the image
    takes content from (image_reads: a CPU image's static archives) are in it by their
    content, with the command that names them."""
    linker = cache.tool_identity(argv[0])
    if linker is None:
        return None
    paths = {c.object_path: f"<object {c.key}>" for c in compiled}
    # A file the link reads (the narrowed image's version script) by its content.
    paths.update({p: f"<file {sha256(d).hexdigest()}>" for p, d in (files or {}).items()})
    paths.update({out: "<image>", workdir: "<tmp>"})
    reads = target.image_reads(plan) if plan is not None else []
    if reads:
        linker = "\0".join([linker, *(f"{p}\0{cache.file_identity(p)}" for p in reads)])
    return cache.key("image", type(target).__qualname__, target.name,
                     "\0".join(normalise(argv, paths, workdir)), linker, os.getcwd())


def _image_meta(image, compiled, whole: bool) -> dict:
    """An image entry's metadata: its target and its offers in order, each with its owner as
    a CU position (labels are the link's own file names, which the key leaves out), and
    whether they are every offer (`whole`) or a narrowed link's, whose image can have the
    same key (a target without its own narrowed_image links the image whole)."""
    first: dict[str, int] = {}
    for i, c in enumerate(compiled):
        first.setdefault(c.cu.label, i)
    return {"target": image.target.name, "whole": whole,
            "offers": [[o.name, o.kind, o.size, o.strong, first[image.owners[o.name]]]
                       for o in image.offers.values()]}


def _offers_of(meta: dict, compiled):
    """(offers, owners) of the whole link as `_image_meta` keeps them; None if not kept (or
    kept by a narrowed link).

    The entry is ours (its SHA-256 checked, its layout fixed by FORMAT): the values are taken
    as JSON gave them, and only an owner is checked, which indexes the CUs."""

    offers, owners = {}, {}
    labels: dict[int, str] = {}  # a CU's label made once, not once per name it offers
    n = len(compiled)
    if meta.get("whole") is not True:
        return None
    try:
        for name, kind, size, strong, owner in meta["offers"]:
            offers[name] = Offer(name, kind, size, strong)
            label = labels.get(owner)
            if label is None:
                if type(owner) is not int or not 0 <= owner < n:
                    return None
                label = labels[owner] = compiled[owner].cu.label
            owners[name] = label
    except (KeyError, TypeError, ValueError):
        return None
    return offers, owners
