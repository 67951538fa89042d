"""`offlink link`'s own options (LinkOptions) and its timer (--timings, --time-trace): what
every link needs, with target code or without."""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType
from typing import NamedTuple

from .. import settings
from ..plugins import CompiledCU

NOTHING: Mapping = MappingProxyType({})  # an empty mapping no one can fill (a shared default)

class LinkOptions(NamedTuple):
    """What `offlink link`'s own options ask for (a named tuple, as model.py's records: a
    relink imports no dataclasses, benchmarks/health/RESULTS.md)."""

    targets: Sequence[str] = ()  # empty: every target the inputs have
    jobs: int = 0  # 0: OFFLINK_JOBS or the CPU count
    save_temps: bool = False
    dry_run: bool = False
    timings: bool = False  # also OFFLINK_TIMINGS=1
    cache: bool = True  # --no-cache; OFFLINK_NO_CACHE=1 (cache/store.py)
    launcher: Sequence[str] = ()  # empty: OFFLINK_TARGET_LAUNCHER
    deep_verify: bool = False  # --verify-deep; OFFLINK_VERIFY=deep (deep_verify.py)
    offload_options: Sequence[str] = ()  # --offload-option (GCC syntax)
    time_trace: str = ""  # --time-trace FILE: a Chrome trace of stages, compiles
    host_said: Mapping[str, str] = NOTHING  # source -> its host compile's words
    offload_symbols: Sequence[str] = ()  # --offload-symbol (link/narrow.py)
    offload_symbol_lists: Sequence[str] = ()  # --offload-symbol-list
    origin_names: Mapping[str, str] = NOTHING  # temporary object -> source
    # -r: the CUs whose toolchain's own -r links their device code (clang 21+'s) linked now,
    # as it does (--relocatable-as-toolchain); by default every CU is kept for the final link
    relocatable_as_toolchain: bool = False
    # A toolchain's own link options (the registry's LINK_OPTIONS: --gomp-register), by name.
    toolchain_options: Mapping[str, object] = NOTHING


def target_launcher(options: LinkOptions) -> list[str]:
    """The command prefix for target compiles: --target-launcher or OFFLINK_TARGET_LAUNCHER."""
    if options.launcher:
        return list(options.launcher)
    return shlex.split(settings.text("OFFLINK_TARGET_LAUNCHER"))


class Timer:
    """How long each stage took (--timings, OFFLINK_TIMINGS=1), and a Chrome trace of them
    and of the target compiles (--time-trace)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled or settings.flag("OFFLINK_TIMINGS")
        self.start = time.perf_counter()
        self.spans: list[tuple[str, float, float]] = []  # stage, start, end
        self.compiled: list[CompiledCU] = []  # of every target, for the trace

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        begun = time.perf_counter()
        try:
            yield
        finally:
            self.spans.append((name, begun, time.perf_counter()))

    def report(self) -> None:
        if self.enabled:
            parts = "  ".join(f"{n} {(end - start) * 1000:.1f}" for n, start, end in self.spans)
            total = time.perf_counter() - self.start
            print(f"offlink: timing (ms): {parts}  total {total * 1000:.1f}", file=sys.stderr)

    def write_trace(self, path: str, output: str) -> None:
        """A Chrome trace (chrome://tracing, Perfetto): one event per stage on the first row,
        one per target compile on the row of the thread that ran it, as clang-linker-wrapper's
        --wrapper-time-trace writes."""
        # Imported here, by --time-trace alone (benchmarks/health/RESULTS.md).
        import json

        from .staging import write_whole

        def us(t: float) -> int:
            return round((t - self.start) * 1e6)

        pid = os.getpid()
        events = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                   "args": {"name": f"offlink link {output}"}}]
        for name, start, end in self.spans:
            events.append({"name": name, "cat": "stage", "ph": "X", "pid": pid, "tid": 0,
                           "ts": us(start), "dur": us(end) - us(start)})
        threads: dict[int, int] = {}
        for c in self.compiled:
            start, end, ident = c.span
            if c.cached or not end:
                continue
            tid = threads.setdefault(ident, len(threads) + 1)
            events.append({"name": f"compile {c.cu.payload.source}", "cat": "compile",
                           "ph": "X", "pid": pid, "tid": tid, "ts": us(start),
                           "dur": us(end) - us(start),
                           "args": {"target": c.target.name, "cu": c.cu.label}})
        # Written beside and renamed into place: the trace is whole or not there.
        write_whole(path, json.dumps({"traceEvents": events, "displayTimeUnit": "ms"},
                                     indent=1).encode())

    def end(self, options: LinkOptions, output: str) -> None:
        self.report()
        if options.time_trace:
            self.write_trace(options.time_trace, output)
