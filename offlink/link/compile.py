"""Stage 3, compile: each CU's target code through its target's compiler, in parallel.

One compile per CU per target. A CU's result is its target object and the symbols it offers
(the target decides which: for ELF targets, the external functions and variables defined).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .. import run as runner
from ..errors import ToolError
from ..targets import Target
from .extract import CU


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


def compile_all(cus: list[CU], target: Target, workdir: str, jobs: int) -> list[CompiledCU]:
    """Compile every CU for `target`; the first failure (in CU order) is reported."""

    def one(item: tuple[int, CU]) -> CompiledCU:
        i, cu = item
        base = os.path.join(workdir, f"{i:04d}-{os.path.basename(cu.payload.source)}")
        src = base + target.source_suffix(cu)
        with open(src, "wb") as f:
            f.write(cu.payload.code)
        obj = base + ".o"
        argv = target.compile_argv(cu, src, obj)
        what = f"target compile of {cu.label} for {target.name}"
        if runner.which(argv[0]) is None:
            raise ToolError(f"{what}: target compiler '{argv[0]}' not found")
        runner.run(argv, what)
        return CompiledCU(cu, target, obj, target.offers(cu, obj))

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(one, item) for item in enumerate(cus)]
        results = []
        error = None
        for fut in futures:
            try:
                results.append(fut.result())
            except Exception as e:  # noqa: BLE001 - report the first in CU order
                error = error or e
        if error:
            raise error
    return results
