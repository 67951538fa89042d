"""`offlink cc`'s work: one planned compile into a fat object, its target code into the cache.

`run_compile` preprocesses each source for each target (with __OFFLINK_TARGET__ defined) while
the host compile runs, then adds one payload section per target to the host object and moves it
into place, so the output is either the complete fat object or untouched. With the object
cache on (fatcache.py), the preprocessing is waited for first and a hit is served as warm.py
serves it.
"""

from __future__ import annotations

import os
import shlex
import sys

from .. import run as runner
from .. import settings
from ..cache.native import native_options
from ..cache.store import Cache
from ..errors import ToolError, UsageError
from ..formats.payload import Payload, build_record, parse_records
from ..link.compile import fill_cache
from ..link.staging import OutputSlot, WorkFolder
from ..model import CU
from ..plugins import Target
from . import fatcache
from .plan import CompilePlan, Source, host_argv
from .warm import HOST_CODE, Job, Started, close, output_problem, say, serve, show_target_warnings


def run_compile(plan: CompilePlan, target_compile: bool = True,
                host_said_by_source: dict[str, str] | None = None,
                started: Started | None = None,
                recipe: tuple[list[str], list[str], tuple[str, ...]] | None = None) -> int:
    """Preprocess for every target beside the host compile, write each fat object, then
    compile its target code into the link cache (`_target_compile`) unless told not to.

    `host_said_by_source` gets what each source's host compile said, for a link in this
    process to leave out of its target warnings. With one -o output the host compile writes
    into the work folder, and the fat object replaces the output whole, so a failure leaves
    the previous output as it was and a killed compile nothing beside it (link/staging.py).
    With the object cache on (fatcache.py), the preprocessing is waited for first: its code
    is the key, and a hit installs the cached fat object without a host compile. `started`:
    what warm.warm began from a recipe and did not finish (a miss); `recipe`: the
    arguments of warm.recipe_key, for the first compile of a command line to write one.
    """
    single = plan.output_given
    if started is not None and [j.target for j in started.jobs] != [t.name for t in plan.targets]:
        close(started)  # a recipe that is not this plan's: begin again
        started = None
    if started is None:
        _check_outputs(plan)
        slot = OutputSlot(plan.sources[0].output) if single else None
        work = WorkFolder(keep=False, kind="cc")
        jobs: list[Job] = []
    else:
        slot, work, jobs = started.slot, started.work, started.jobs
    tmp = work.path
    staged = os.path.join(tmp, "host.o") if single else ""
    begun = started
    try:
        cache, key = (started.cache, started.key) if started is not None else (None, None)
        if started is None and single:
            cache = fatcache.open_cache(plan)
        if started is None and cache is not None:
            src = plan.sources[0]
            depfile = os.path.join(tmp, "deps.d")
            deps, host_depfile = fatcache.dependency_options(plan, depfile)
            _start_preprocessing(plan, tmp, jobs, deps)
            if any(job.deps for job in jobs):
                assert slot is not None
                parts = fatcache.static_parts(plan, cache)
                begun = Started(work, slot, jobs, cache,
                                host_argv=_host_preprocessing(plan, jobs, deps, depfile,
                                                              host_depfile),
                                verbose=runner.VERBOSE)
                native = native_options(plan.expanded)
                serve(begun, plan.argv, src.path, parts, depfile, host_depfile, native)
                if begun.hit:
                    if host_said_by_source is not None:
                        host_said_by_source[src.path] = begun.host_said
                    return 0
                key = begun.key
                if recipe is not None:
                    fatcache.write_recipe(cache, *recipe, plan, parts, begun, host_depfile,
                                          native)
        if not jobs:
            _start_preprocessing(plan, tmp, jobs)
        host_said = ""
        if single:
            try:
                host_said = _host_compile(host_argv(plan, staged))
            except ToolError as e:
                raise ToolError(f"host compile failed (exit status {e.exit_code}): "
                                f"{runner.show(plan.argv)}", e.exit_code, e.output) from None
        said = _wait(jobs)
        if not single:
            host_said = _host_compile(plan.argv)
        show_target_warnings(said, host_said)
        if host_said_by_source is not None:
            for src in plan.sources:
                host_said_by_source[src.path] = host_said
        for si, src in enumerate(plan.sources):
            fat = _fat_object(plan, si, src, tmp, staged)
            if cache is not None and key is not None:
                fatcache.store(cache, key, fat, host_said)
            _install(fat, slot, src.output)
        if target_compile:
            _target_compile(plan, tmp, host_said, cache)
        elif cache is not None:
            cache.trim()
    finally:
        for job in jobs:  # after a failure: no preprocessor outlives its folder
            job.kill()
        if begun is not None and begun.host_job is not None:
            begun.host_job.kill()
        if slot is not None:
            slot.close()
        work.close()
    return 0


def _check_outputs(plan: CompilePlan) -> None:
    """Refuse, before any work, an output that is a folder or the source itself."""
    for src in plan.sources:
        problem = output_problem(src.path, src.output)
        if problem is not None:
            raise UsageError(problem)


def _start_preprocessing(plan: CompilePlan, tmp: str, jobs: list[Job],
                         deps: list[str] | None = None) -> None:
    """Start each source's preprocessing for each target. `deps` (dependency options) go to
    the first one the host compiler runs with the host's preprocessing options, whose code is
    then the host's but for the target macros (fatcache.py)."""
    for si, src in enumerate(plan.sources):
        for target in plan.targets:
            out = os.path.join(tmp, f"{si}-{target.name}.i")
            argv = target.capture_argv(plan.compiler, plan.preprocess_args, src.language,
                                       src.path, out)
            given = bool(deps) and not any(j.deps for j in jobs) and "-E" in argv and \
                argv[: 1 + len(plan.preprocess_args)] == [plan.compiler, *plan.preprocess_args]
            if given:
                argv = [*argv, *(deps or ())]
            say(argv, runner.VERBOSE)
            job = Job(argv, os.path.join(tmp, f"{si}-{target.name}.err"), given, src.path,
                      target.name)
            try:
                job.start()
            except (FileNotFoundError, PermissionError):
                raise ToolError(f"compiler '{argv[0]}' not found") from None
            jobs.append(job)


def _host_preprocessing(plan: CompilePlan, jobs: list[Job], deps: list[str], depfile: str,
                        host_depfile: str | None) -> list[str]:
    """The host's own preprocessing, for the object cache where a file names a target macro:
    the target preprocessing that writes the depfile without that target's defines, writing
    warm.HOST_CODE's .i (and, where the host compile writes a depfile, its .d: the host's
    list of files, which a hit writes)."""
    job = next(j for j in jobs if j.deps)
    target = next(t for t in plan.targets if t.name == job.target)
    src = plan.sources[0]
    tmp = os.path.dirname(depfile)
    argv = target.capture_argv(plan.compiler, plan.preprocess_args, src.language, src.path,
                               os.path.join(tmp, f"{HOST_CODE}.i"))
    host_deps = [] if host_depfile is None else \
        [os.path.join(tmp, f"{HOST_CODE}.d") if w == depfile else w for w in deps]
    return fatcache.host_capture(argv, 1 + len(plan.preprocess_args), target.defines(), host_deps)


def _host_compile(argv: list[str]) -> str:
    """The host compile; what it says is shown and returned (to leave the target side's
    identical warnings out)."""
    said = _said(argv, "host compile")
    if said:
        sys.stderr.write(said)
        sys.stderr.flush()
    return said


def _said(argv: list[str], what: str) -> str:
    """Run a tool (runner.run: a missing tool or a failure one ToolError naming `what`,
    carrying the output); what it said, its output and diagnostics together."""
    return runner.run(argv, what).stdout.decode(errors="replace")


def _wait(jobs: list[Job]) -> list[str]:
    """Wait for the target preprocessing; what each said (its warnings)."""
    failed = None
    said = []
    for job in jobs:
        code = job.wait()
        text = job.said()
        if code != 0 and failed is None:
            failed = ToolError(f"preprocessing {job.source} for target {job.target} failed: "
                               f"{runner.show(job.argv)}", code, text)
        said.append(text)
    if failed:
        raise failed
    return said


def _fat_object(plan: CompilePlan, si: int, src: Source, tmp: str, host_obj: str) -> str:
    """The host object with the payload sections added, in the work folder: its path."""
    args = []
    for target in plan.targets:
        payload = _payload(plan, si, src, target, tmp)
        blob = os.path.join(tmp, f"{si}-{target.name}.payload")
        with open(blob, "wb") as f:
            f.write(build_record(payload))
        name = payload.section_name
        args += ["--add-section", f"{name}={blob}",
                 "--set-section-flags", f"{name}=exclude,readonly,contents"]
    host_obj = host_obj or src.output
    fat = os.path.join(tmp, f"{si}-fat.o")
    runner.run(["objcopy", *args, host_obj, fat], f"adding target code to {src.output}")
    os.chmod(fat, 0o666 & ~_umask())
    return fat


def _install(fat: str, slot: OutputSlot | None, output: str) -> None:
    """Move the fat object to the output, replacing it whole."""
    if slot is None:  # several sources: each object compiled in place, replaced whole
        slot = OutputSlot(output)
    try:
        slot.install(fat)
    finally:
        slot.close()


def _payload(plan: CompilePlan, si: int, src: Source, target: Target, tmp: str) -> Payload:
    """The payload of source `si` for `target`, from its preprocessed code in `tmp`."""
    with open(os.path.join(tmp, f"{si}-{target.name}.i"), "rb") as f:
        code = f.read()
    return Payload(target.name, target.code_kind(src.language), src.path, plan.compiler,
                   tuple(target.payload_options(plan.target_options)), code, plan.offered)


def _target_compile(plan: CompilePlan, tmp: str, host_said: str = "",
                    cache: Cache | None = None) -> None:
    """Compile each new fat object's target code now and leave it in the link cache.

    The link looks its CUs up by the same key (cache/store.py), so after a build system's
    parallel compile phase it finds them all there and compiles none; the fat object keeps
    its payload, so a link without this cache compiles as before. This runs in the cc
    process, after the fat object is in place, one compile at a time: the build system
    already runs as many cc processes as its -j allows. A failure here is not this
    compile's to report (the host object is right and the link gives the same error with
    the compiler's output), so it is left to the link; --verbose says so. What a target
    compiler says is shown here, as a device compile's warnings are, less what the host
    compile said already (the link shows no cached CU's warnings again).
    OFFLINK_CC_TARGET_COMPILE=0, OFFLINK_NO_CACHE=1 or OFFLINK_CACHE_SIZE=0 turn it off.
    `cache`: the object cache's, where it stored the fat object (one opening, one trim of
    the cache folder, which lists every entry, per compile).
    """
    if not settings.flag("OFFLINK_CC_TARGET_COMPILE"):
        if cache is not None:
            cache.trim()
        return
    if cache is None:
        try:
            cache = Cache.open()
        except UsageError:  # a cache folder the link refuses too: it says so there
            return
        if cache is None:
            return
    # cc has no --target-launcher: the environment decides (link.options.target_launcher)
    launcher: list[str] = []
    if settings.text("OFFLINK_TARGET_LAUNCHER"):
        launcher = shlex.split(settings.text("OFFLINK_TARGET_LAUNCHER"))
    said: list[str] = []
    for si, src in enumerate(plan.sources):
        for target in plan.targets:
            # The record as the link reads it, so the key is the one the link computes.
            with open(os.path.join(tmp, f"{si}-{target.name}.payload"), "rb") as f:
                payload = parse_records(f.read(), src.output, lazy=True)[0]
            cu = CU(src.output, payload)
            folder = os.path.join(tmp, f"{si}-{target.name}-target")
            os.mkdir(folder)
            compiled = fill_cache([cu], target.for_inputs([cu]), folder, cache, launcher)
            said.extend(c.warnings for c in compiled)
    show_target_warnings(said, host_said)
    cache.trim()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
