"""`offlink link`: the stages in order, from a command line to a verified output.

plan -> extract -> compile -> device -> reserve -> host -> fill -> verify. The output is written
in the work folder and moved into place only when verified, so a failure leaves the previous
output as it was, and a killed link nothing beside it (staging.py).
"""

from __future__ import annotations

import os
import sys
import time

from .. import run as runner
from .. import settings
from ..errors import LinkError, ToolError, UsageError
from .plan import LinkPlan, plan_link

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from ..plugins import Target


class LinkOptions:
    """What `offlink link`'s own options ask for (a plain class: importing dataclasses costs
    a relink more than the class saves)."""

    def __init__(self,
                 targets: list[str] | None = None,  # empty: every target the inputs have
                 jobs: int = 0,  # 0: OFFLINK_JOBS or the CPU count
                 save_temps: bool = False,
                 dry_run: bool = False,
                 timings: bool = False,  # also OFFLINK_TIMINGS=1
                 cache: bool = True,  # --no-cache; OFFLINK_NO_CACHE=1 (cache/store.py)
                 launcher: list[str] | None = None,  # empty: OFFLINK_TARGET_LAUNCHER
                 deep_verify: bool = False,  # --verify-deep; OFFLINK_VERIFY=deep (deep_verify.py)
                 offload_options: list[str] | None = None,  # --offload-option (GCC syntax)
                 time_trace: str = "",  # --time-trace FILE: a Chrome trace of stages, compiles
                 host_said: dict[str, str] | None = None,  # source -> its host compile's words
                 offload_symbols: list[str] | None = None,  # --offload-symbol (link/narrow.py)
                 offload_symbol_lists: list[str] | None = None,  # --offload-symbol-list
                 origin_names: dict[str, str] | None = None,  # temporary object -> source
                 # A toolchain's own link options (the registry's LINK_OPTIONS), by name.
                 toolchain_options: dict[str, object] | None = None):
        self.targets = targets if targets is not None else []
        self.jobs = jobs
        self.save_temps = save_temps
        self.dry_run = dry_run
        self.timings = timings
        self.cache = cache
        self.launcher = launcher if launcher is not None else []
        self.deep_verify = deep_verify
        self.offload_options = offload_options if offload_options is not None else []
        self.time_trace = time_trace
        self.host_said = host_said if host_said is not None else {}
        self.offload_symbols = offload_symbols if offload_symbols is not None else []
        self.offload_symbol_lists = offload_symbol_lists if offload_symbol_lists is not None \
            else []
        self.origin_names = origin_names if origin_names is not None else {}
        self.toolchain_options = toolchain_options if toolchain_options is not None else {}

    def __repr__(self) -> str:
        return "LinkOptions(" + ", ".join(f"{k}={v!r}" for k, v in vars(self).items()) + ")"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was


def target_launcher(options: LinkOptions) -> list[str]:
    """The command prefix for target compiles: --target-launcher or OFFLINK_TARGET_LAUNCHER."""
    if options.launcher:
        return options.launcher
    text = settings.text("OFFLINK_TARGET_LAUNCHER")
    if not text.strip():
        return []
    import shlex

    return shlex.split(text)


class _Timer:
    def __init__(self, enabled: bool):
        self.enabled = enabled or settings.flag("OFFLINK_TIMINGS")
        self.marks: list[tuple[str, float]] = []
        self.start = self.last = time.perf_counter()
        self.spans: list[tuple[str, float, float]] = []  # stage, start, end
        self.compiled: list = []  # CompiledCU of every target, for the trace

    def stage(self, name: str) -> None:
        now = time.perf_counter()
        self.marks.append((name, now - self.last))
        self.spans.append((name, self.last, now))
        self.last = now

    def write_trace(self, path: str, output: str) -> None:
        """A Chrome trace (chrome://tracing, Perfetto): one event per stage on the first row,
        one per target compile on the row of the thread that ran it, as clang-linker-wrapper's
        --wrapper-time-trace writes."""
        import json

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
        from .staging import write_whole

        # Written beside and renamed into place: the trace is whole or not there.
        write_whole(path, json.dumps({"traceEvents": events, "displayTimeUnit": "ms"},
                                     indent=1).encode())

    def report(self) -> None:
        if self.enabled:
            total = sum(t for _, t in self.marks)
            parts = "  ".join(f"{n} {t * 1000:.1f}" for n, t in self.marks)
            print(f"offlink: timing (ms): {parts}  total {total * 1000:.1f}", file=sys.stderr)


PLACEHOLDER = "offlink-table.o"  # stage 5's object, in the work folder


def link(argv: list[str], options: LinkOptions) -> int:
    timer = _Timer(options.timings)
    plan = plan_link(argv)
    stats = check_output(plan)
    timer.stage("plan")
    if plan.mode == "relocatable":
        # `ld -r` concatenates the payload sections, so the result is a fat object that a
        # later offlink link reads CU by CU (no driver may link the device code here).
        from ..toolchains.dialects import relocatable_argv

        return _plain(plan._replace(argv=relocatable_argv(plan.argv)), options, timer)
    from .narrow import Narrowing
    from .relink import extract  # from the last link's record when its inputs are unchanged

    narrowing = Narrowing.from_options(options.offload_symbols, options.offload_symbol_lists)
    cus = extract(plan, options.offload_options, options.cache, stats)
    if cus:  # GCC's objects build the images GCC's own link would build, and only those
        from ..toolchains.dialects import select

        cus = select(cus, plan.base_args)
    timer.stage("extract")
    if not cus:
        return _plain(plan, options, timer)
    _probe_early(plan, options, cus)
    targets = _targets(cus, options, plan)
    for t in targets:
        if plan.static and t.static_link_problem:
            raise LinkError(f"-static: target {t.name}: {t.static_link_problem}; link "
                            f"without -static")
    # _signal, not signal: the module over it, with the enum it imports, costs a link ~1.5 ms
    import _signal as signal

    from ..cache.store import join_early
    from ..jobserver import slots_for, stop_on_signals
    from ..toolchains import driver_jobs
    from .staging import OutputSlot, WorkFolder

    expansion = driver_jobs()

    if options.dry_run:  # before the work folder: a dry run makes nothing
        return _dry_run(plan, cus, targets, options, narrowing)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    work = WorkFolder(options.save_temps, sweep_now=False)  # swept while the host link runs
    workdir = work.path
    slot = None
    slots = None
    cache = None
    started = []  # registrations whose work started beside the device links
    try:
        from ..cache.store import Cache
        from .compile import compile_all
        from .device import cached_image, device_link

        stop_on_signals()  # SIGTERM unwinds too: tokens back, temporaries removed
        cache = Cache.open(options.cache)
        expansion.use(cache, workdir)  # clang's links start their linker from the cache
        launcher = target_launcher(options)
        slots = slots_for(options.jobs)
        if runner.VERBOSE:
            print(f"offlink: parallel target compiles: {slots.why}", file=sys.stderr)
        images = []
        from .compile import show_warnings

        said: set[tuple[str, str]] = set()  # target compiler warnings shown (once per CU)
        offered: set[str] = set()  # every name the CUs offer, before narrowing
        every: list = []  # every target's CompiledCU, in link-line order (origins_content)
        from ..toolchains import registrations

        started = registrations.start(plan, targets, workdir, cache)  # beside the device links
        host_early = False
        for target in targets:
            mine = [cu for cu in cus if cu.payload.target == target.name]
            tdir = os.path.join(workdir, target.name)
            os.mkdir(tdir)
            # Nothing changed: the image from the cache, no object entry read.
            found = (cached_image(plan, target, mine, tdir, cache, narrowing) if cache
                     else None)
            if found is None and cache is not None and not narrowing.words:
                _expand_image_early(plan, target, mine, tdir)
            if not host_early:  # asked once the image link's is answered
                _expand_host_early(plan, targets, workdir)
                host_early = True
            if found is None:
                compiled = compile_all(mine, target, tdir, slots, cache, launcher, plan.output)
            else:
                compiled = found[1]
            timer.compiled += compiled
            every += compiled
            offered.update(o.name for c in compiled for o in c.offers)
            show_warnings(compiled, said, options.host_said)
            timer.stage(f"compile[{target.name}]")
            hits = cache.hits if cache else 0
            images.append(found[0] if found
                          else device_link(plan, target, compiled, tdir, cache, narrowing))
            timer.stage(f"device[{target.name}]")
            if timer.enabled or runner.VERBOSE:
                cached = sum(c.cached for c in compiled)
                # CUs whose code is the target object already (clang's cubins): nothing ran
                as_is = sum(not c.cached and not c.span[1] for c in compiled)
                image = "from cache" if found or cache and cache.hits > hits else "linked"
                print(f"offlink: {target.name}: {len(compiled)} CUs, "
                      f"{len(compiled) - cached - as_is} compiled, {cached} from cache"
                      f"{f', {as_is} used as they are' if as_is else ''}; image {image}",
                      file=sys.stderr)
        narrowing.check(offered)  # before the host link: every name listed exactly is offered
        from ..formats import origins as origins_format
        from ..formats.table import reserve
        from ..plugins import host_e_machine
        from .reserve import origins_content, placeholder_object

        names = sorted({n for img in images for n in img.offers})
        layout = reserve(names, [i.target.name for i in images], [len(i.data) for i in images])
        placeholder = os.path.join(workdir, PLACEHOLDER)
        with open(placeholder, "wb") as f:
            f.write(placeholder_object(layout, [i.data for i in images], host_e_machine(),
                                       origins_content(
                                           images, every, narrowing, options.origin_names,
                                           os.path.dirname(os.path.abspath(plan.output)),
                                           origins_format.prefix_maps(plan.argv))))
        timer.stage("reserve")
        # The linker writes into the work folder (a killed link leaves nothing beside the
        # output) and creates the file itself, so its mode is the plain link's.
        slot = OutputSlot(plan.output)
        os.mkdir(os.path.join(workdir, "out"))
        staged = os.path.join(workdir, "out", os.path.basename(plan.output))
        from .host import host_link

        # The host link's early `-###` (its answer is the host link's command) ends first, so
        # the entry it keeps for the next link is among those written while the link runs.
        expansion.join_early()
        later = cache.write_later() if cache is not None else None
        from ..cache.store import in_thread

        swept = in_thread(work.sweep)
        try:
            host_link(plan, staged, placeholder, images, targets, workdir, cache,
                      options.toolchain_options)
        finally:
            swept.join()
            if later is not None:
                later.join()
        timer.stage("host")
        from .fill import fill
        from .verify import verify

        filled = fill(staged, images, layout)
        timer.stage("fill")
        verify(staged, filled, images)
        deep = options.deep_verify or settings.text("OFFLINK_VERIFY") == "deep"
        if deep:
            from .deep_verify import deep_verify

            deep_verify(staged, filled)
        if plan.strip:
            runner.run(["strip", "--strip-all", staged], f"stripping {plan.output}")
            verify(staged, filled, images, check_symbols=False)
            if deep:
                deep_verify(staged, filled, check_symbols=False)
        timer.stage("verify")
        if filled.dropped and runner.VERBOSE:
            print(f"offlink: not in the host binary (discarded or inlined there): "
                  f"{', '.join(filled.dropped)}", file=sys.stderr)
        slot.install(staged)
        if cache is not None:
            cache.trim()
        timer.report()
        if options.time_trace:
            timer.write_trace(options.time_trace, plan.output)
        return 0
    finally:
        expansion.use(None)
        join_early()
        for reg in started:
            reg.discard()
        if slots is not None:
            slots.close()
        if slot is not None:
            slot.close()
        work.close()
        if options.save_temps:
            print(f"offlink: temporary files kept in {workdir}", file=sys.stderr)
        for sig, handler in handlers.items():  # as they were (offlink used as a library)
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)


def check_output(plan: LinkPlan) -> dict[str, os.stat_result]:
    """Refuse, before any work, an output that is a folder or one of the inputs (through any
    name: device and inode compared), which the link would replace (gcc refuses it too).

    Gives the inputs' stats it took, by path, which the relink's extract uses rather than
    asking for each again (1000 inputs: ~2 ms)."""
    stats: dict[str, os.stat_result] = {}
    try:
        out = os.stat(plan.output)
    except OSError:
        return stats  # not there yet (a missing folder is reported when the output is written)
    import stat

    if stat.S_ISDIR(out.st_mode):
        raise UsageError(f"cannot write {plan.output}: it is a directory (-o names the output "
                         f"file)")
    for i in plan.inputs:
        if i.kind != "file":
            continue
        try:
            st = stats[i.path] = os.stat(i.path)
        except OSError:
            continue  # the linker says what is missing
        if (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino):
            same = "" if i.path == plan.output else f" '{plan.output}'"
            raise UsageError(f"input file '{i.path}' is the same as output file{same}")
    return stats


def _targets(cus, options: LinkOptions, plan: LinkPlan) -> list[Target]:
    from ..toolchains import resolve

    present = []
    for cu in cus:
        if cu.payload.target not in present:
            present.append(cu.payload.target)
    wanted = [resolve(t) for t in options.targets or present]
    for t in wanted:
        if t.name not in present:
            raise UsageError(f"no input has code for target {t.name} (the inputs have: "
                             f"{', '.join(present)})")
    # Each target sees its CUs and the link line first (the CUDA target takes their
    # architectures, clang's OpenMP targets the line's optimisation level).
    return [t.for_inputs([cu for cu in cus if cu.payload.target == t.name], plan)
            for t in wanted]


def _expand_image_early(plan: LinkPlan, target, cus: list, tdir: str) -> None:
    """The image link's command as stage 4 will run it, for a target whose command names its
    objects and reads none of them (clang's CPU images), given to expansion.expand_early with
    the objects stage 3 will write: clang's `-###` of it runs beside the compile stage."""
    from ..model import CompiledCU
    from ..plugins import Target

    if (type(target).link_image is not Target.link_image or target.image_argv_reads_objects
            or target.image_argv_reads_offers):
        return
    from ..toolchains import driver_jobs
    from .compile import object_names
    from .device import image_path

    compiled = [CompiledCU(cu, target, object_names(i, cu, target, tdir)[1], (), "", cached=True)
                for i, cu in enumerate(cus)]
    argv = target.image_argv(plan, compiled, image_path(target, tdir))
    driver_jobs().expand_early(argv, [c.object_path for c in compiled])


def _expand_host_early(plan: LinkPlan, targets: list, workdir: str) -> None:
    """The host link's command as stage 6 will run it, when its added files' names are known
    now (link/host.py), given to expansion.expand_early: clang's `-###` of it runs beside the
    device links."""
    from ..toolchains.registrations import object_names

    names = object_names(targets, workdir)
    if names is None:
        return
    from ..toolchains import driver_jobs
    from .host import added_inputs, host_argv

    placeholder = os.path.join(workdir, PLACEHOLDER)
    staged = os.path.join(workdir, "out", os.path.basename(plan.output))
    argv = host_argv(plan, staged, added_inputs(plan, placeholder, names, targets), targets)
    driver_jobs().expand_early(argv, [placeholder, *names], after_others=True)


def _probe_early(plan: LinkPlan, options: LinkOptions, cus: list) -> None:
    """Start the driver's identity probe (its `--version`, once per cache) beside the first
    compiles, whose keys need it, when some CU is compiled here. Where none is (clang's
    device objects as they are), nothing waits for the driver's identity: the keys that
    take it are made while the host link runs (cache.put_later), and so is the probe."""
    if options.dry_run or not options.cache:
        return
    if all(cu.payload.code_kind == "object" for cu in cus):
        return
    from ..cache.store import Cache

    cache = Cache.open(True)
    if cache is not None:
        cache.probe_early(plan.driver)


def _plain(plan: LinkPlan, options: LinkOptions, timer: _Timer) -> int:
    """No target code: the link exactly as given (byte-identical output)."""
    if options.dry_run:
        print(runner.show(plan.argv))
        return 0
    from ..cache.store import join_early

    join_early()  # no probe left running when offlink becomes the linker
    status = runner.pass_through(plan.argv, "linker")
    if status != 0:
        raise ToolError(f"link failed (exit status {status}): {runner.show(plan.argv)}", status)
    timer.stage("host")
    if options.time_trace:
        timer.write_trace(options.time_trace, plan.output)
    return 0


# What --dry-run prints for the work folder a real run makes (under $TMPDIR, a new name each
# time): the names inside it are the real run's.
DRY_RUN_WORK = "$OFFLINK_WORK"


def _dry_run(plan, cus, targets, options: LinkOptions, narrowing) -> int:
    """The commands a real run runs, in order, with the file names it uses: the output's
    own name, and the work folder's files as $OFFLINK_WORK/NAME (no folder is made)."""
    from ..model import CompiledCU
    from .compile import object_names
    from .device import image_path
    from .host import added_inputs, host_argv

    launcher = target_launcher(options)
    for target in targets:
        mine = [cu for cu in cus if cu.payload.target == target.name]
        tdir = os.path.join(DRY_RUN_WORK, target.name)
        compiled = []
        for i, cu in enumerate(mine):
            src, obj = object_names(i, cu, target, tdir)
            argv = target.compile_argv(cu, src, obj)
            if argv:  # [] : the code is the object already
                print(_show_dry([*launcher, *argv]))
                for after in target.after_compile_argv(cu, obj):  # what offers() runs
                    print(_show_dry(after))
            compiled.append(CompiledCU(cu, target, obj, ()))
        image = image_path(target, tdir)
        for argv in target.prepare_argvs(plan, compiled, tdir):
            print(_show_dry(argv))
        if narrowing.active:  # the names it keeps are known once the CUs are compiled
            image_argv = target.narrowed_image(plan, compiled, image, frozenset())[0]
        else:
            image_argv = target.image_argv(plan, compiled, image)
        print(_show_dry(image_argv))
    placeholder = os.path.join(DRY_RUN_WORK, PLACEHOLDER)
    from ..toolchains.registrations import dry_run_objects

    registrations = dry_run_objects(targets, DRY_RUN_WORK, options.toolchain_options)
    print(_show_dry(host_argv(plan, plan.output,
                              added_inputs(plan, placeholder, registrations, targets), targets)))
    return 0


def _show_dry(argv: list[str]) -> str:
    """A command as a shell reads it, with $OFFLINK_WORK left for the shell to expand."""
    import shlex

    out = []
    for word in argv:
        head, sep, rest = word.partition(DRY_RUN_WORK)
        out.append(shlex.quote(head) + '"$OFFLINK_WORK"' + shlex.quote(rest) if sep and head
                   else '"$OFFLINK_WORK"' + shlex.quote(rest) if sep else shlex.quote(word))
    return " ".join(out)
