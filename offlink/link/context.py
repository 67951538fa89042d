"""What a link's stages share: the LinkContext that sets up and tears down, in one place, the
work folder, the cache, the job slots, the signal handlers and the work started early beside
the stages."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from .. import run as runner
from ..cache.identity import join_early
from ..cache.store import Cache, in_thread
from ..jobs import stop_on_signals
from ..jobserver import Slots, slots_for
from ..plugins import Registration
from ..toolchains import driver_jobs
from .options import LinkOptions, target_launcher
from .staging import OutputSlot, WorkFolder


class LinkContext:
    """What a link's stages share, set up and torn down in one place (LinkContext.open): the
    work folder, the cache, the target compiles' job slots, the signal handlers, the output's
    slot, and the work started early beside the stages (the driver's link jobs asked ahead,
    the registrations started, the cache's deferred writes, the TMPDIR sweep)."""

    def __init__(self, options: LinkOptions, work: WorkFolder):
        self.options = options
        self.work = work
        self.cache: Cache | None = None
        self.slots: Slots | None = None
        self.jobs: ModuleType | None = None  # the registry's driver_jobs (plugins.DriverJobs)
        self.launcher: list[str] = []
        self.started: list[Registration] = []  # registrations' early work, ended by close
        self.slot: OutputSlot | None = None

    @property
    def workdir(self) -> str:
        return self.work.path

    @classmethod
    @contextmanager
    def open(cls, options: LinkOptions) -> Iterator[LinkContext]:
        handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
        # Swept while the host link runs (while_host_links), not before the first stage.
        ctx = cls(options, WorkFolder(options.save_temps, sweep_now=False))
        try:
            stop_on_signals()  # SIGTERM unwinds too: tokens back, temporaries removed
            ctx.cache = Cache.open(options.cache)
            ctx.jobs = driver_jobs()
            ctx.jobs.use(ctx.cache, ctx.workdir)  # clang's links start their linker from it
            ctx.launcher = target_launcher(options)
            ctx.slots = slots_for(options.jobs)
            if runner.VERBOSE:
                print(f"offlink: parallel target compiles: {ctx.slots.why}", file=sys.stderr)
            yield ctx
        finally:
            ctx.close(handlers)

    def close(self, handlers: dict) -> None:
        if self.jobs is not None:
            self.jobs.use(None)
        join_early()
        for reg in self.started:
            reg.discard()
        if self.slots is not None:
            self.slots.close()
        if self.slot is not None:
            self.slot.close()
        self.work.close()
        if self.options.save_temps:
            print(f"offlink: temporary files kept in {self.workdir}", file=sys.stderr)
        for sig, handler in handlers.items():  # as they were (offlink used as a library)
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)

    @contextmanager
    def while_host_links(self) -> Iterator[None]:
        """Work that runs beside the host link: the cache's deferred writes, the TMPDIR
        sweep. The host link's early `-###` ends first, so the entry it keeps for the next
        link is among those written."""
        self.jobs.join_early()
        later = self.cache.write_later() if self.cache is not None else None
        swept = in_thread(self.work.sweep)
        try:
            yield
        finally:
            swept.join()
            if later is not None:
                later.join()

    def install(self, staged: str) -> None:
        """The verified output into place, the cache trimmed to its size."""
        self.slot.install(staged)
        if self.cache is not None:
            self.cache.trim()
