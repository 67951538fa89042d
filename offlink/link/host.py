"""Stage 6, the host link: the link as given, writing into the work folder, with the table's
placeholder and the runtimes' registrations added (its command line as data, then run)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .. import run as runner
from ..driver_args import expand_with_origins, is_clang, respelled, words
from ..errors import LinkError, ToolError
from ..plugins import Target
from ..toolchains import driver_jobs, registrations

if TYPE_CHECKING:
    from ..cache.store import Cache
    from ..model import LinkPlan
    from ..plugins import DriverJobs, Image

HOST_RELINKS = 2  # at most this many host links after the first (a registration's relinks)


def host_link_argv(plan: LinkPlan, output: str, extra_inputs: list[str]) -> list[str]:
    """The real link, writing `output`, with offlink's placeholder object added (after
    `-x none` when the command line leaves a -x language in force for later files)."""
    reset = ["-x", "none"] if any(a.startswith("-x") for a in plan.base_args) else []
    return [plan.driver, *plan.host_args, *reset, *extra_inputs, "-o", output]


def added_inputs(plan: LinkPlan, placeholder: str, registered: list[str],
                 targets: list[Target]) -> list[str]:
    """What offlink adds to the host link: the placeholder object, the registrations' objects
    (`registered`), then the words the targets ask for (e.g. -foffload=disable for GCC's)."""
    return [placeholder, *registered, *(a for t in targets for a in t.host_link_args(plan))]


def host_argv(plan: LinkPlan, output: str, added: list[str], targets: list[Target]) -> list[str]:
    """The host link's command line (pure): the link as given, writing `output`, with `added`
    (added_inputs) and without the driver words a target replaces (drop_words)."""
    return drop_words(host_link_argv(plan, output, added), targets)


def drop_words(argv: list[str], targets: list[Target]) -> list[str]:
    """The host link without the driver words a target replaces (words that would make the
    driver run its own device link and registration as well, or that only that link takes).
    An option is asked by its first word and goes with its value (`-mllvm X`); a value is
    never asked on its own (`-Xlinker --offload-arch=x` stays whole). Words in an `@file` are
    asked too: one that keeps all of its words is passed as written, one that loses a word
    is expanded (as plan_link does with the words it leaves out)."""
    # Only targets that drop words are asked (most drop none: 1000 objects, 1000 calls each).
    drops = [t for t in targets if type(t).host_link_drops is not Target.host_link_drops]
    if not drops:
        return list(argv)
    args, origins = expand_with_origins(argv[1:])
    parts = []
    for w in words(args, clang=is_clang(argv[0])):
        spelled = args[w.index : w.index + w.count]
        dropped = any(t.host_link_drops(spelled[0]) for t in drops)
        parts.append((w.index, w.count, [] if dropped else spelled))
    return [argv[0], *respelled(argv[1:], args, origins, parts)]


def host_link(plan: LinkPlan, staged: str, placeholder: str, images: list[Image],
              targets: list[Target], workdir: str, cache: Cache | None,
              toolchain_options: Mapping[str, object]) -> None:
    """Build the registrations' objects, link `staged`, and relink while a registration that
    checks the linked binary (libgomp's: the host table's order) finds it unsettled."""
    added = added_inputs(plan, placeholder, registrations.objects(plan, images, workdir, cache),
                         targets)
    host = host_argv(plan, staged, added, targets)
    steps = registrations.host_steps(plan, images, workdir, cache, toolchain_options)
    for step in steps:
        step.build()
        host = step.host_argv(host, len(host) - len(added) - 2)
    run_host_link(host)
    for step in steps:
        # A relink writes the registration in the order the link gave the host table;
        # that order must then hold, so a bounded number of links settles it.
        for _ in range(HOST_RELINKS):
            if step.check(staged):
                break
            run_host_link(host)
        else:
            if not step.check(staged):
                raise LinkError(f"{step.option}: the host table's order did not settle "
                                f"in {HOST_RELINKS + 1} links")


def run_host_link(host: list[str]) -> None:
    """The host link on offlink's own output; a clang driver's linker job from its expansion
    kept in the cache (the registry's driver_jobs)."""
    try:
        driver_jobs().run_link(host, "host link", here=True)
    except ToolError as e:
        raise ToolError(f"host link failed (exit status {e.exit_code}): "
                        f"{runner.show(host)}", e.exit_code) from None


def prefetch(jobs: DriverJobs, plan: LinkPlan, targets: list[Target], workdir: str,
             placeholder_name: str) -> None:
    """The host link's command as host_link will run it, when its added files' names are
    known now (the registrations' object_name), given to the driver jobs' expand_early:
    clang's `-###` of it runs beside the device links, after those asked before."""
    names = registrations.object_names(targets, workdir)
    if names is None:
        return
    placeholder = os.path.join(workdir, placeholder_name)
    staged = os.path.join(workdir, "out", os.path.basename(plan.output))
    argv = host_argv(plan, staged, added_inputs(plan, placeholder, names, targets), targets)
    jobs.expand_early(argv, [placeholder, *names], after_others=True)


def dry_run_argv(plan: LinkPlan, targets: list[Target], workdir: str, placeholder_name: str,
                 toolchain_options: Mapping[str, object]) -> list[str]:
    """The host link --dry-run shows, with the work folder `workdir`."""
    added = added_inputs(plan, os.path.join(workdir, placeholder_name),
                         registrations.dry_run_objects(targets, workdir, toolchain_options),
                         targets)
    return host_argv(plan, plan.output, added, targets)
