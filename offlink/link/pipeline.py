"""`offlink link`: the stages in order, from a command line to a verified output.

plan -> extract -> compile -> device -> reserve -> host -> fill -> verify. The output is written
in the work folder and moved into place only when verified, so a failure leaves the previous
output as it was, and a killed link nothing beside it (staging.py). One LinkContext owns what
the stages share (work folder, cache, job slots, signal handlers, the work started early) and
sets it up and tears it down in one place (context.py); --dry-run prints the commands the
stages would run. The stages after extract are in stages.py.
"""

from __future__ import annotations

import os
import stat

from .. import run as runner
from ..cache.identity import join_early
from ..errors import ToolError, UsageError
from ..toolchains import dialects
from .narrow import Narrowing
from .options import LinkOptions, Timer
from .plan import LinkPlan, plan_link
from .relink import extract  # from the last link's record when its inputs are unchanged


def link(argv: list[str], options: LinkOptions) -> int:
    """Link as the driver command `argv` would, with the inputs' target code built into
    images and the table; 0 (a failure raises an OfflinkError, reported by the caller)."""
    timer = Timer(options.timings)
    with timer.stage("plan"):
        plan = plan_link(argv)
        stats = check_output(plan)
    if plan.mode == "relocatable":
        # `ld -r` concatenates the payload sections, so the result is a fat object that a
        # later offlink link reads CU by CU (no driver links the device code here); with
        # --relocatable-as-toolchain, the CUs whose toolchain's own -r links them (clang
        # 21+'s) are linked here, as that -r links them.
        plan = plan._replace(argv=dialects.relocatable_argv(plan.argv))
        if not options.relocatable_as_toolchain:
            return link_as_given(plan, options, timer)
        with timer.stage("extract"):
            cus = extract(plan, options.offload_options, options.cache, stats)
            cus = dialects.select(cus, plan.base_args) if cus else cus
            linked = dialects.linked_at_relocatable(cus, plan.argv) if cus else None
        if linked is None:
            if cus:
                raise UsageError("--relocatable-as-toolchain: offlink links the device code of "
                                 "a -r as clang's own -r does for clang 21+ OpenMP objects of "
                                 "one x86_64 target only (the one checked by running here); "
                                 "without the option every CU is kept for the final link")
            return link_as_given(plan, options, timer)
        from . import stages

        return stages.relocatable_link(plan, options, *linked, timer)
    with timer.stage("extract"):
        narrowing = Narrowing.from_options(options.offload_symbols, options.offload_symbol_lists)
        cus = extract(plan, options.offload_options, options.cache, stats)
        # Each dialect's CUs build the images its own toolchain's link would build, only those
        cus = dialects.select(cus, plan.base_args) if cus else cus
    if not cus:
        return link_as_given(plan, options, timer)
    # The stages after extract, imported only by a link with target code: a link without
    # any does not pay for their imports (benchmarks/health/RESULTS.md).
    from . import stages

    stages.prefetch_identity(plan, options, cus)
    targets = stages.link_targets(cus, options, plan)
    if options.dry_run:  # before the work folder: a dry run makes nothing
        stages.print_commands(plan, cus, targets, options, narrowing)
        return 0
    with stages.LinkContext.open(options) as ctx:
        images, compiled = stages.build_images(ctx, plan, cus, targets, narrowing, timer)
        with timer.stage("reserve"):
            layout = stages.reserve_table(ctx, plan, images, compiled, narrowing)
        with timer.stage("host"):
            staged = stages.host_link(ctx, plan, images, targets)
        with timer.stage("fill"):
            filled = stages.fill(staged, images, layout)
        with timer.stage("verify"):
            stages.verify_output(plan, staged, filled, images, options)
        ctx.install(staged)
        timer.end(options, plan.output)
    return 0


def check_output(plan: LinkPlan) -> dict[str, os.stat_result]:
    """Refuse, before any work, an output that is a folder or one of the inputs (through any
    name: device and inode compared), which the link would replace (gcc refuses it too).

    Gives the inputs' stats it took, by path, which the relink's extract uses rather than
    asking for each again."""
    stats: dict[str, os.stat_result] = {}
    try:
        out = os.stat(plan.output)
    except OSError:
        return stats  # not there yet (a missing folder is reported when the output is written)
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


def link_as_given(plan: LinkPlan, options: LinkOptions, timer: Timer) -> int:
    """No target code: the link exactly as given (byte-identical output)."""
    if options.dry_run:
        print(runner.show(plan.argv))
        return 0
    join_early()  # no probe left running when offlink becomes the linker
    with timer.stage("host"):
        status = runner.pass_through(plan.argv, "linker")
    if status != 0:
        raise ToolError(f"link failed (exit status {status}): {runner.show(plan.argv)}", status)
    if options.time_trace:
        timer.write_trace(options.time_trace, plan.output)
    return 0
