"""Stage 3, compile: each CU's target code through its target's compiler, in parallel.

One compile per CU per target. A CU's result is its target object and the symbols it offers
(the target decides which: for ELF targets, the external functions and variables defined).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import run as runner
from ..errors import ToolError
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


def compile_all(cus: list[CU], target: Target, workdir: str, jobs: int | Slots,
                cache: Cache | None = None, launcher: Sequence[str] = ()) -> list[CompiledCU]:
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
        if not argv:  # the CU's code is its target object already: nothing to run or cache
            with open(obj, "wb") as f:
                f.write(cu.payload.code)
            key = ""
            if cache is not None:  # a key all the same, so the image can come from the cache
                import hashlib

                key = hashlib.sha256(b"object\0" + cu.payload.code).hexdigest()
            results[i] = CompiledCU(cu, target, obj, target.offers(cu, obj), key)
            continue
        key = ""
        if cache is not None:
            compiler = cache.tool_identity(argv[0])
            if compiler is None:
                raise ToolError(f"{what}: target compiler '{argv[0]}' not found")
            key = cache.object_key(target, cu, argv, {src: "<source>", obj: "<object>",
                                                      workdir: "<tmp>"}, compiler)
            hit = cache.get_object(key)
            if hit is not None:
                with open(obj, "wb") as f:
                    f.write(hit[0])
                if runner.VERBOSE:
                    print(f"offlink: from cache: {runner.show(argv)}", file=sys.stderr)
                results[i] = CompiledCU(cu, target, obj, hit[1], key, cached=True)
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
        if progress.wanted():
            display = progress.CompileProgress(target.name, len(cus), len(cus) - len(todo))
        if display is None:
            done = run_jobs(len(todo), one, slots, children=children)
        else:
            with display:
                done = run_jobs(len(todo), one, slots, children=children, progress=display)
        for (i, *_), compiled in zip(todo, done):
            results[i] = compiled
    return [r for r in results if r is not None]
