"""Stage 3, compile: each CU's target code through its target's compiler, in parallel.

One compile per CU per target. A CU's result is its target object and the symbols it offers
(the target decides which: for ELF targets, the external functions and variables defined).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import run as runner
from ..errors import OfflinkError, ToolError
from ..jobserver import Children, Slots, run_jobs
from ..targets import Target
from .extract import CU

if TYPE_CHECKING:
    from .cache import Cache


@dataclass(frozen=True)
class Offer:
    """A symbol a CU's target code offers, as the target object defines it."""

    name: str
    kind: str  # "function" or "variable"
    size: int
    strong: bool  # STB_GLOBAL (a weak or COMDAT definition may appear in many CUs)


@dataclass(frozen=True)
class CompiledCU:
    cu: CU
    target: Target
    object_path: str
    offers: tuple[Offer, ...]
    key: str = ""  # the cache key ("" without a cache)
    cached: bool = False  # the object came from the cache
    # A cached object's bytes: written to object_path only when something reads the file (the
    # device link of an image not in the cache, write_objects), so a relink with nothing
    # changed writes no object into the work folder.
    data: bytes | None = field(default=None, repr=False, compare=False)


def write_objects(compiled: Sequence[CompiledCU]) -> None:
    """Write the cached objects that are not in the work folder yet (CompiledCU.data)."""
    for c in compiled:
        if c.data is not None and not os.path.exists(c.object_path):
            with open(c.object_path, "wb") as f:
                f.write(c.data)


def compile_all(cus: list[CU], target: Target, workdir: str, jobs: int | Slots,
                cache: Cache | None = None, launcher: Sequence[str] = (),
                show_progress: bool = True) -> list[CompiledCU]:
    """Compile every CU for `target`; the first failure (in CU order) is reported.

    `jobs` is a number of parallel compiles or the link's Slots (make's jobserver). With a
    cache, a CU whose key is known is not compiled; `launcher` prefixes each compile command
    (ccache, sccache, distcc, ...).
    """
    slots = jobs if isinstance(jobs, Slots) else Slots(jobs)
    results: list[CompiledCU | None] = [None] * len(cus)
    todo = []  # (index, source, object, argv, what, key) of the CUs to compile
    for i, cu in enumerate(cus):
        base = os.path.join(workdir, f"{i:04d}-{os.path.basename(cu.payload.source)}")
        src = base + target.source_suffix(cu)
        obj = base + ".o"
        argv = target.compile_argv(cu, src, obj)
        what = f"target compile of {cu.label} for {target.name}"
        key = ""
        if cache is not None:
            compiler = cache.tool_identity(argv[0])
            if compiler is None:
                raise ToolError(f"{what}: target compiler '{argv[0]}' not found")
            key = cache.object_key(target, cu, argv, {src: "<source>", obj: "<object>",
                                                      workdir: "<tmp>"}, compiler)
            hit = cache.get_object(key)
            if hit is not None:
                if runner.VERBOSE:
                    print(f"offlink: from cache: {runner.show(argv)}", file=sys.stderr)
                results[i] = CompiledCU(cu, target, obj, hit[1], key, cached=True, data=hit[0])
                continue
        todo.append((i, src, obj, argv, what, key))
    children = Children()

    def one(j: int) -> CompiledCU:
        i, src, obj, argv, what, key = todo[j]
        cu = cus[i]
        with open(src, "wb") as f:
            f.write(cu.payload.code)
        if runner.which(argv[0]) is None:
            raise ToolError(f"{what}: target compiler '{argv[0]}' not found")
        if launcher and runner.which(launcher[0]) is None:
            raise ToolError(f"{what}: target launcher '{launcher[0]}' not found")
        children.run([*launcher, *argv], what)
        offers = target.offers(cu, obj)
        if cache is not None:
            with open(obj, "rb") as f:
                cache.put_object(key, f.read(), offers)
        return CompiledCU(cu, target, obj, offers, key)

    if todo:
        from .. import progress

        display = None
        if show_progress and progress.wanted():
            display = progress.CompileProgress(target.name, len(cus), len(cus) - len(todo))
        if display is None:
            done = run_jobs(len(todo), one, slots, children=children)
        else:
            with display:
                done = run_jobs(len(todo), one, slots, children=children, progress=display)
        for (i, *_), compiled in zip(todo, done):
            results[i] = compiled
    return [r for r in results if r is not None]


def fill_cache(cus: list[CU], target: Target, workdir: str, cache: Cache,
               launcher: Sequence[str] = ()) -> int:
    """Compile into the cache the CUs whose objects it lacks, one at a time (`offlink cc`);
    the number compiled, or -1 when a compile failed: that CU is left to the link, which
    reports the failure with the compiler's output, as it would have without this step."""
    try:
        compiled = compile_all(cus, target, workdir, 1, cache, launcher, show_progress=False)
    except OfflinkError as e:  # a compile that failed, offers the link refuses, ...
        if runner.VERBOSE:
            print(f"offlink: {e.args[0] if e.args else e}; left to the link", file=sys.stderr)
        return -1
    return sum(not c.cached for c in compiled)
