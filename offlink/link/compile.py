"""Stage 3, compile: each CU's target code through the target compiler, in parallel.

One compile per CU per target. A CU's result is its target object and the symbols it offers:
external functions and variables it defines (default or protected visibility, not TLS),
narrowed to the CU's explicit list when it has one.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .. import run as runner
from ..elf import (
    STB_GLOBAL,
    STT_FUNC,
    STT_GNU_IFUNC,
    STT_OBJECT,
    STT_TLS,
    STV_HIDDEN,
    ElfFile,
)
from ..errors import LinkError, ToolError
from ..targets import Target
from .extract import CU

LANG_X = {"c": "cpp-output", "c++": "c++-cpp-output"}


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


def compile_argv(cu: CU, target: Target, source: str, output: str) -> list[str]:
    p = cu.payload
    return [p.compiler, "-x", LANG_X[p.code_kind], *p.options, "-fPIC", "-c", source,
            "-o", output]


def compile_all(cus: list[CU], target: Target, workdir: str, jobs: int) -> list[CompiledCU]:
    """Compile every CU for `target`; the first failure (in CU order) is reported."""

    def one(item: tuple[int, CU]) -> CompiledCU:
        i, cu = item
        base = os.path.join(workdir, f"{i:04d}-{os.path.basename(cu.payload.source)}")
        src = base + (".i" if cu.payload.code_kind == "c" else ".ii")
        with open(src, "wb") as f:
            f.write(cu.payload.code)
        obj = base + ".o"
        argv = compile_argv(cu, target, src, obj)
        what = f"target compile of {cu.label} for {target.name}"
        if runner.which(argv[0]) is None:
            raise ToolError(f"{what}: target compiler '{argv[0]}' not found")
        runner.run(argv, what)
        return CompiledCU(cu, target, obj, offers(cu, obj))

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


def offers(cu: CU, obj_path: str) -> tuple[Offer, ...]:
    elf = ElfFile.open(obj_path)
    found: dict[str, Offer] = {}
    for s in elf.symbols():
        if not s.defined or not s.is_global or s.st_visibility == STV_HIDDEN or not s.name:
            continue
        if s.st_type in (STT_FUNC, STT_GNU_IFUNC):
            found[s.name] = Offer(s.name, "function", 1, s.st_bind == STB_GLOBAL)
        elif s.st_type == STT_OBJECT:
            found[s.name] = Offer(s.name, "variable", s.st_size, s.st_bind == STB_GLOBAL)
        elif s.st_type == STT_TLS and s.name in cu.payload.offered:
            raise LinkError(f"{cu.label}: '{s.name}' is thread-local and cannot be offered")
    if not cu.payload.offered:
        return tuple(found[n] for n in sorted(found))
    missing = [n for n in cu.payload.offered if n not in found]
    if missing:
        statics = {s.name for s in elf.symbols() if s.defined and not s.is_global}
        name = missing[0]
        if name in statics:
            raise LinkError(f"{cu.label}: '{name}' is static; only external symbols can be "
                            f"offered (give it external linkage or a unique name)")
        raise LinkError(f"{cu.label}: offered symbol '{name}' is not defined in its target code")
    return tuple(found[n] for n in sorted(set(cu.payload.offered)))
