"""`offlink link`: the stages in order, from a command line to a verified output.

plan -> extract -> compile -> device -> reserve -> host -> fill -> verify. The output is written
under a temporary name beside the final one and moved into place only when verified, so a
failure leaves the previous output as it was.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import run as runner
from ..errors import LinkError, ToolError, UsageError

if TYPE_CHECKING:
    from ..targets import Target
from .plan import LinkPlan, host_link_argv, plan_link


@dataclass
class LinkOptions:
    targets: list[str] = field(default_factory=list)  # empty: every target the inputs have
    jobs: int = 0  # 0: OFFLINK_JOBS or the CPU count
    save_temps: bool = False
    dry_run: bool = False
    timings: bool = False  # also OFFLINK_TIMINGS=1
    cache: bool = True  # --no-cache; OFFLINK_NO_CACHE=1 (link/cache.py)
    launcher: list[str] = field(default_factory=list)  # empty: OFFLINK_TARGET_LAUNCHER
    deep_verify: bool = False  # --verify-deep; OFFLINK_VERIFY=deep (link/deep_verify.py)
    offload_options: list[str] = field(default_factory=list)  # --offload-option (GCC syntax)
    gomp_register: bool = False  # --gomp-register; OFFLINK_GOMP_REGISTER=1 (gomp_register.py)


def target_launcher(options: LinkOptions) -> list[str]:
    """The command prefix for target compiles: --target-launcher or OFFLINK_TARGET_LAUNCHER."""
    if options.launcher:
        return options.launcher
    import shlex

    return shlex.split(os.environ.get("OFFLINK_TARGET_LAUNCHER", ""))


class _Timer:
    def __init__(self, enabled: bool):
        self.enabled = enabled or os.environ.get("OFFLINK_TIMINGS", "") not in ("", "0")
        self.marks: list[tuple[str, float]] = []
        self.last = time.perf_counter()

    def stage(self, name: str) -> None:
        now = time.perf_counter()
        self.marks.append((name, now - self.last))
        self.last = now

    def report(self) -> None:
        if self.enabled:
            total = sum(t for _, t in self.marks)
            parts = "  ".join(f"{n} {t * 1000:.1f}" for n, t in self.marks)
            print(f"offlink: timing (ms): {parts}  total {total * 1000:.1f}", file=sys.stderr)


def link(argv: list[str], options: LinkOptions) -> int:
    timer = _Timer(options.timings)
    plan = plan_link(argv)
    timer.stage("plan")
    if plan.mode == "relocatable":
        # `ld -r` concatenates the payload sections, so the result is a fat object that a
        # later offlink link reads CU by CU (no driver may link the device code here).
        from dataclasses import replace

        from ..dialects import relocatable_argv

        return _plain(replace(plan, argv=relocatable_argv(plan.argv)), options)
    from .extract import extract

    cus = extract(plan, options.offload_options)
    timer.stage("extract")
    if not cus:
        return _plain(plan, options)
    targets = _targets(cus, options)
    for t in targets:
        if plan.static and t.static_link_problem:
            raise LinkError(f"-static: target {t.name}: {t.static_link_problem}; link "
                            f"without -static")
    import shutil
    import tempfile

    from ..jobserver import slots_for, stop_on_signals

    keep = options.save_temps
    workdir = tempfile.mkdtemp(prefix="offlink-link-")
    staged = None
    slots = None
    cache = None
    try:
        from .cache import Cache, device_link
        from .compile import compile_all

        if options.dry_run:
            return _dry_run(plan, cus, targets, workdir)
        stop_on_signals()  # SIGTERM unwinds too: tokens back, temporaries removed
        cache = Cache.open(options.cache)
        launcher = target_launcher(options)
        slots = slots_for(options.jobs)
        if runner.VERBOSE:
            print(f"offlink: parallel target compiles: {slots.why}", file=sys.stderr)
        images = []
        for target in targets:
            mine = [cu for cu in cus if cu.payload.target == target.name]
            tdir = os.path.join(workdir, target.name)
            os.mkdir(tdir)
            compiled = compile_all(mine, target, tdir, slots, cache, launcher)
            timer.stage(f"compile[{target.name}]")
            hits = cache.hits if cache else 0
            images.append(device_link(plan, target, compiled, tdir, cache))
            timer.stage(f"device[{target.name}]")
            if timer.enabled or runner.VERBOSE:
                cached = sum(c.cached for c in compiled)
                image = "from cache" if cache and cache.hits > hits else "linked"
                print(f"offlink: {target.name}: {len(compiled)} CUs, "
                      f"{len(compiled) - cached} compiled, {cached} from cache; image {image}",
                      file=sys.stderr)
        from ..formats.table import reserve
        from ..targets import host_e_machine
        from .reserve import placeholder_object

        names = sorted({n for img in images for n in img.offers})
        layout = reserve(names, [i.target.name for i in images], [len(i.data) for i in images])
        placeholder = os.path.join(workdir, "offlink-table.o")
        with open(placeholder, "wb") as f:
            f.write(placeholder_object(layout, [i.data for i in images], host_e_machine()))
        timer.stage("reserve")
        out_dir = os.path.dirname(os.path.abspath(plan.output)) or "."
        try:
            fd, staged = tempfile.mkstemp(prefix=f".{os.path.basename(plan.output)}.",
                                          dir=out_dir)
        except OSError as e:
            raise LinkError(f"cannot write {plan.output}: {e.strerror}") from None
        os.close(fd)
        # The linker creates the file itself, so its mode is the plain link's (0777 & ~umask),
        # not mkstemp's 0600; the unique name stays reserved for this link in practice.
        os.unlink(staged)
        from ..registrations import objects as registration_objects

        extra = [placeholder, *registration_objects(plan, images, layout, workdir, cache),
                 *_host_link_args(plan, targets)]
        host = _drop_words(host_link_argv(plan, staged, extra), targets)
        registration = None
        from . import gomp_register

        if gomp_register.enabled(options.gomp_register):
            registration = gomp_register.Registration.for_link(plan, images, workdir,
                                                               options.gomp_register)
        if registration is not None:
            registration.build()
            host = registration.host_argv(host, len(host) - len(extra) - 2)
        _host_link(host)
        while registration is not None and not registration.check(staged):
            _host_link(host)  # the registration in the order the link gave the host table
        timer.stage("host")
        from .fill import fill
        from .verify import verify

        filled = fill(staged, images, layout)
        timer.stage("fill")
        verify(staged, filled, images)
        deep = options.deep_verify or os.environ.get("OFFLINK_VERIFY", "") == "deep"
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
        os.replace(staged, plan.output)
        staged = None
        if cache is not None:
            cache.trim()
        timer.report()
        return 0
    finally:
        if slots is not None:
            slots.close()
        if staged and os.path.exists(staged):
            os.unlink(staged)
        if keep:
            print(f"offlink: temporary files kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _host_link(host: list[str]) -> None:
    try:
        runner.run(host, "host link", capture=False)
    except ToolError as e:
        raise ToolError(f"host link failed (exit status {e.exit_code}): "
                        f"{runner.show(host)}", e.exit_code) from None


def _targets(cus, options: LinkOptions) -> list[Target]:
    from ..targets import resolve

    present = []
    for cu in cus:
        if cu.payload.target not in present:
            present.append(cu.payload.target)
    wanted = [resolve(t) for t in options.targets or present]
    for t in wanted:
        if t.name not in present:
            raise UsageError(f"no input has code for target {t.name} (the inputs have: "
                             f"{', '.join(present)})")
    # Each target sees its CUs first (the CUDA target takes their architectures).
    return [t.for_inputs([cu for cu in cus if cu.payload.target == t.name]) for t in wanted]


def _plain(plan: LinkPlan, options: LinkOptions) -> int:
    """No target code: the link exactly as given (byte-identical output)."""
    if options.dry_run:
        print(runner.show(plan.argv))
        return 0
    if runner.VERBOSE:
        print(f"offlink: {runner.show(plan.argv)}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(plan.argv[0], plan.argv)
    except OSError as e:
        raise ToolError(f"linker '{plan.argv[0]}': {e.strerror}", 127) from None


def _dry_run(plan, cus, targets, workdir) -> int:
    from .compile import CompiledCU

    for target in targets:
        mine = [cu for cu in cus if cu.payload.target == target.name]
        fake = []
        for i, cu in enumerate(mine):
            base = os.path.join(workdir, target.name, f"{i:04d}")
            src = base + target.source_suffix(cu)
            argv = target.compile_argv(cu, src, base + ".o")
            if argv:  # [] : the code is the object already
                print(runner.show(argv))
            fake.append(CompiledCU(cu, target, base + ".o", ()))
        print(runner.show(target.image_argv(plan, fake, os.path.join(workdir, "image"))))
    placeholder = os.path.join(workdir, "offlink-table.o")
    registrations = [os.path.join(workdir, f"offlink-{r}-register.o")
                     for r in dict.fromkeys(t.registration for t in targets if t.registration)]
    print(runner.show(_drop_words(host_link_argv(
        plan, plan.output, [placeholder, *registrations, *_host_link_args(plan, targets)]),
        targets)))
    return 0


def _drop_words(argv: list[str], targets: list[Target]) -> list[str]:
    """The host link without the driver words a target replaces (words that would make the
    driver run its own device link and registration as well)."""
    return [argv[0], *(w for w in argv[1:] if not any(t.host_link_drops(w) for t in targets))]


def _host_link_args(plan: LinkPlan, targets: list[Target]) -> list[str]:
    """What the targets need added to the host link (e.g. -foffload=disable for GCC's)."""
    return [a for t in targets for a in t.host_link_args(plan)]
