"""The stages after extract, for a link whose inputs have target code: the targets, stages 3
and 4 target by target (compile, device link), reserve, the host link and verify, each a
function from data to data that pipeline.link calls in order; and --dry-run's commands, as
these stages make them."""

from __future__ import annotations

import os
import shlex
import sys

from .. import run as runner
from .. import settings
from ..cache.store import Cache
from ..errors import LinkError, UsageError
from ..formats import origins as origins_format
from ..formats.table import Layout, reserve
from ..model import CU
from ..plugins import CompiledCU, Image, Target, host_e_machine
from ..toolchains import dialects, registrations, resolve
from . import host
from .compile import compile_all, object_names, planned, show_warnings
from .context import LinkContext
from .deep_verify import deep_verify
from .device import cached_image, device_link, image_command, image_path
from .fill import Filled, fill
from .narrow import Narrowing
from .options import LinkOptions, Timer, target_launcher
from .plan import LinkPlan
from .reserve import origins_content, placeholder_object
from .staging import OutputSlot
from .verify import verify

# What pipeline.link calls, in its order.
__all__ = ["prefetch_identity", "link_targets", "print_commands", "LinkContext", "build_images",
           "reserve_table", "host_link", "fill", "verify_output"]

PLACEHOLDER = "offlink-table.o"  # stage 5's object, in the work folder


def link_targets(cus: list[CU], options: LinkOptions, plan: LinkPlan) -> list[Target]:
    """The targets the link builds images for (--offload-target, else every target the CUs
    have), each set up for its CUs and the link line."""
    present = list(dict.fromkeys(cu.payload.target for cu in cus))
    wanted = [resolve(t) for t in options.targets or present]
    for t in wanted:
        if t.name not in present:
            raise UsageError(f"no input has code for target {t.name} (the inputs have: "
                             f"{', '.join(present)})")
    # Each target sees its CUs and the link line first (the CUDA target takes their
    # architectures, clang's OpenMP targets the line's optimisation level).
    targets = [t.for_inputs([cu for cu in cus if cu.payload.target == t.name], plan)
               for t in wanted]
    for t in targets:
        if plan.static and t.static_link_problem:
            raise LinkError(f"-static: target {t.name}: {t.static_link_problem}; link "
                            f"without -static")
    return targets


def prefetch_identity(plan: LinkPlan, options: LinkOptions, cus: list[CU]) -> None:
    """Start the driver's identity probe (its `--version`, once per cache) beside the first
    compiles, whose keys need it, when some CU is compiled here. Where none is (clang's
    device objects as they are), nothing waits for the driver's identity: the keys that
    take it are made while the host link runs (cache.put_later), and so is the probe."""
    if options.dry_run or not options.cache:
        return
    if all(cu.payload.code_kind == "object" for cu in cus):
        return
    cache = Cache.open(True)
    if cache is not None:
        cache.probe_early(plan.driver)


def build_images(ctx: LinkContext, plan: LinkPlan, cus: list[CU], targets: list[Target],
                 narrowing: Narrowing, timer: Timer) -> tuple[list[Image], list[CompiledCU]]:
    """Stages 3 and 4, target by target: the CUs compiled (or their objects taken from the
    cache), then linked into the target's image (or the image taken from the cache); every
    target's CompiledCU, in link-line order. Every name listed exactly is checked to be
    offered before the host link."""
    ctx.started = registrations.start(plan, targets, ctx.workdir, ctx.cache)  # beside these
    said: set[tuple[str, str]] = set()  # target compiler warnings shown (once per CU)
    images: list[Image] = []
    every: list[CompiledCU] = []
    for target in targets:
        mine = [cu for cu in cus if cu.payload.target == target.name]
        tdir = os.path.join(ctx.workdir, target.name)
        os.mkdir(tdir)
        with timer.stage(f"compile[{target.name}]"):
            # Nothing changed: the image from the cache, no object entry read.
            found = (cached_image(plan, target, mine, tdir, ctx.cache, narrowing)
                     if ctx.cache is not None else None)
            if found is None and ctx.cache is not None and not narrowing.words:
                prefetch_image_link(ctx, plan, target, mine, tdir)
            if not images:  # asked once the image link's is answered
                host.prefetch(ctx.jobs, plan, targets, ctx.workdir, PLACEHOLDER)
            compiled = found[1] if found is not None else compile_all(
                mine, target, tdir, ctx.slots, ctx.cache, ctx.launcher, plan.output)
            show_warnings(compiled, said, ctx.options.host_said)
        timer.compiled += compiled
        every += compiled
        with timer.stage(f"device[{target.name}]"):
            hits = ctx.cache.hits if ctx.cache is not None else 0
            images.append(found[0] if found is not None
                          else device_link(plan, target, compiled, tdir, ctx.cache, narrowing))
        if timer.enabled or runner.VERBOSE:
            from_cache = found is not None or ctx.cache is not None and ctx.cache.hits > hits
            _say_target(target, compiled, from_cache)
    narrowing.check({o.name for c in every for o in c.offers})
    return images, every


def _say_target(target: Target, compiled: list[CompiledCU], image_cached: bool) -> None:
    cached = sum(c.cached for c in compiled)
    # CUs whose code is the target object already (clang's cubins): nothing ran
    as_is = sum(not c.cached and not c.span[1] for c in compiled)
    image = "from cache" if image_cached else "linked"
    print(f"offlink: {target.name}: {len(compiled)} CUs, "
          f"{len(compiled) - cached - as_is} compiled, {cached} from cache"
          f"{f', {as_is} used as they are' if as_is else ''}; image {image}", file=sys.stderr)


def prefetch_image_link(ctx: LinkContext, plan: LinkPlan, target: Target, cus: list[CU],
                        tdir: str) -> None:
    """The image link's command as stage 4 will run it, for a target whose command names its
    objects and reads none of them (clang's CPU images), given to the driver jobs'
    expand_early with the objects stage 3 will write: clang's `-###` of it runs beside the
    compile stage."""
    if (type(target).link_image is not Target.link_image or target.image_argv_reads_objects
            or target.image_argv_reads_offers):
        return
    compiled = [CompiledCU(cu, target, object_names(i, cu, target, tdir)[1], (), "", cached=True)
                for i, cu in enumerate(cus)]
    argv = target.image_argv(plan, compiled, image_path(target, tdir))
    ctx.jobs.expand_early(argv, [c.object_path for c in compiled])


def reserve_table(ctx: LinkContext, plan: LinkPlan, images: list[Image],
                  compiled: list[CompiledCU], narrowing: Narrowing) -> Layout:
    """Stage 5: the table's layout, and the placeholder object that holds it at its size
    (with the images in place and `.offlink.origins`), written in the work folder."""
    names = sorted({n for img in images for n in img.offers})
    layout = reserve(names, [i.target.name for i in images], [len(i.data) for i in images])
    origins = origins_content(images, compiled, narrowing, ctx.options.origin_names,
                              os.path.dirname(os.path.abspath(plan.output)),
                              origins_format.prefix_maps(plan.argv))
    with open(os.path.join(ctx.workdir, PLACEHOLDER), "wb") as f:
        f.write(placeholder_object(layout, [i.data for i in images], host_e_machine(),
                                   origins))
    return layout


def host_link(ctx: LinkContext, plan: LinkPlan, images: list[Image],
              targets: list[Target]) -> str:
    """Stage 6: the host link, into the work folder (a killed link leaves nothing beside the
    output); the linker creates the file itself, so its mode is the plain link's. The staged
    output's path."""
    ctx.slot = OutputSlot(plan.output)
    os.mkdir(os.path.join(ctx.workdir, "out"))
    staged = os.path.join(ctx.workdir, "out", os.path.basename(plan.output))
    with ctx.while_host_links():
        host.host_link(plan, staged, os.path.join(ctx.workdir, PLACEHOLDER), images, targets,
                       ctx.workdir, ctx.cache, ctx.options.toolchain_options)
    return staged


def relocatable_link(plan: LinkPlan, options: LinkOptions, dialect: str, cus: list[CU],
                     timer: Timer) -> int:
    """A `-r` link whose CUs' device code `dialect` links now, as its toolchain's own `-r`
    does (dialects.linked_at_relocatable): their images built as a final link builds them
    (per-CU compiles, the cache), then the dialect's `-r` link with them, staged and moved
    into place as a final link's output; 0."""
    narrowing = Narrowing.from_options(options.offload_symbols, options.offload_symbol_lists)
    prefetch_identity(plan, options, cus)
    targets = link_targets(cus, options, plan)
    if options.dry_run:
        print_commands(plan, cus, targets, options, narrowing)
        return 0
    with LinkContext.open(options) as ctx:
        images, _ = build_images(ctx, plan, cus, targets, narrowing, timer)
        ctx.slot = OutputSlot(plan.output)
        os.mkdir(os.path.join(ctx.workdir, "out"))
        staged = os.path.join(ctx.workdir, "out", os.path.basename(plan.output))
        with timer.stage("host"), ctx.while_host_links():
            dialects.relocatable_link(
                dialect, lambda added: host.host_argv(plan, staged, added, targets), images,
                staged, ctx.workdir)
        ctx.install(staged)
        timer.end(options, plan.output)
    return 0


def verify_output(plan: LinkPlan, staged: str, filled: Filled, images: list[Image],
                  options: LinkOptions) -> None:
    """Stage 8: the output re-read and checked (by lief too on request), and stripped where
    the link line asks (then checked again)."""
    verify(staged, filled, images)
    deep = options.deep_verify or settings.text("OFFLINK_VERIFY") == "deep"
    if deep:
        deep_verify(staged, filled)
    if plan.strip:
        runner.run(["strip", "--strip-all", staged], f"stripping {plan.output}")
        verify(staged, filled, images, check_symbols=False)
        if deep:
            deep_verify(staged, filled, check_symbols=False)
    if filled.dropped and runner.VERBOSE:
        print(f"offlink: not in the host binary (discarded or inlined there): "
              f"{', '.join(filled.dropped)}", file=sys.stderr)


# What --dry-run prints for the work folder a real run makes (under $TMPDIR, a new name each
# time): the names inside it are the real run's.
DRY_RUN_WORK = "$OFFLINK_WORK"


def print_commands(plan: LinkPlan, cus: list[CU], targets: list[Target],
                   options: LinkOptions, narrowing: Narrowing) -> None:
    """--dry-run: the commands a real run runs, in order, with the file names it uses: the
    output's own name, and the work folder's files as $OFFLINK_WORK/NAME (no folder is
    made)."""
    launcher = target_launcher(options)
    for target in targets:
        tdir = os.path.join(DRY_RUN_WORK, target.name)
        mine = [cu for cu in cus if cu.payload.target == target.name]
        compiled = []
        for cu, (_src, obj, argv, _key) in zip(mine, planned(mine, target, tdir, None)):
            if argv:  # [] : the code is the object already
                _print_dry([*launcher, *argv])
                for after in target.after_compile_argv(cu, obj):  # what offers() runs
                    _print_dry(after)
            compiled.append(CompiledCU(cu, target, obj, ()))
        for argv in target.prepare_argvs(plan, compiled, tdir):
            _print_dry(argv)
        # Narrowed, the names it keeps are known once the CUs are compiled: none here.
        _print_dry(image_command(plan, target, compiled, image_path(target, tdir), narrowing)[0])
    _print_dry(host.dry_run_argv(plan, targets, DRY_RUN_WORK, PLACEHOLDER,
                                 options.toolchain_options))


def _print_dry(argv: list[str]) -> None:
    """A command as a shell reads it, with $OFFLINK_WORK left for the shell to expand."""
    out = []
    for word in argv:
        head, sep, rest = word.partition(DRY_RUN_WORK)
        out.append(shlex.quote(head) + '"$OFFLINK_WORK"' + shlex.quote(rest) if sep and head
                   else '"$OFFLINK_WORK"' + shlex.quote(rest) if sep else shlex.quote(word))
    print(" ".join(out))
