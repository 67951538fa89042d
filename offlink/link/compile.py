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
    warnings: str = ""  # what the target compiler said (shown by show_warnings)
    span: tuple[float, float, int] = (0.0, 0.0, 0)  # compile start, end (perf_counter), thread


def object_names(i: int, cu: CU, target: Target, workdir: str) -> tuple[str, str]:
    """The target code's file and the target object of the i-th CU in `workdir`."""
    base = os.path.join(workdir, f"{i:04d}-{os.path.basename(cu.payload.source)}")
    return base + target.source_suffix(cu), base + ".o"


def compile_all(cus: list[CU], target: Target, workdir: str, jobs: int | Slots,
                cache: Cache | None = None, launcher: Sequence[str] = (),
                output: str = "") -> list[CompiledCU]:
    """Compile every CU for `target`; the first failure (in CU order) is reported.

    `jobs` is a number of parallel compiles or the link's Slots (make's jobserver). With a
    cache, a CU whose key is known is not compiled; `launcher` prefixes each compile command
    (ccache, sccache, distcc, ...). `output` names the link's output in the progress display.
    """
    slots = jobs if isinstance(jobs, Slots) else Slots(jobs)
    results: list[CompiledCU | None] = [None] * len(cus)
    todo = []  # (index, source, object, argv, what, key) of the CUs to compile
    for i, cu in enumerate(cus):
        src, obj = object_names(i, cu, target, workdir)
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
        import threading
        import time

        start = time.perf_counter()
        said = children.run([*launcher, *argv], what)
        span = (start, time.perf_counter(), threading.get_ident())
        offers = target.offers(cu, obj)
        if cache is not None:
            with open(obj, "rb") as f:
                cache.put_object(key, f.read(), offers)
        return CompiledCU(cu, target, obj, offers, key, warnings=said, span=span)

    if todo:
        from .. import progress

        display = None
        if progress.wanted():
            if progress.siblings():
                progress.announce(output, target.name, len(cus), len(cus) - len(todo))
            else:
                display = progress.CompileProgress(target.name, len(cus),
                                                   len(cus) - len(todo), output)
        if display is None:
            done = run_jobs(len(todo), one, slots, children=children)
        else:
            with display:
                done = run_jobs(len(todo), one, slots, children=children, progress=display)
        for (i, *_), compiled in zip(todo, done):
            results[i] = compiled
    return [r for r in results if r is not None]


def show_warnings(compiled: list[CompiledCU], shown: set[tuple[str, str]]) -> None:
    """What the target compilers said, as GCC and clang show device warnings: after the
    compiles (not into the progress display), in CU order, each CU's diagnostics once (a
    CU built for several targets that says the same thing says it once; `shown` spans the
    link)."""
    for c in compiled:
        key = (c.cu.payload.source, c.warnings)
        if not c.warnings.strip() or key in shown:
            continue
        shown.add(key)
        sys.stderr.write(c.warnings if c.warnings.endswith("\n") else c.warnings + "\n")
    sys.stderr.flush()
