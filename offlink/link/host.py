"""Stage 6, the host link: the link as given, writing into the work folder, with the table's
placeholder and the runtimes' registrations added (its command line as data, then run)."""

from __future__ import annotations

from .. import run as runner
from ..errors import LinkError, ToolError

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from ..cache.store import Cache
    from ..model import Image, LinkPlan
    from ..plugins import Target

HOST_RELINKS = 2  # at most this many host links after the first (libgomp's registration's)


def host_link_argv(plan: LinkPlan, output: str, extra_inputs: list[str]) -> list[str]:
    """The real link, writing `output`, with offlink's placeholder object added (after
    `-x none` when the command line leaves a -x language in force for later files)."""
    reset = ["-x", "none"] if any(a.startswith("-x") for a in plan.base_args) else []
    return [plan.driver, *plan.host_args, *reset, *extra_inputs, "-o", output]


def added_inputs(plan: LinkPlan, placeholder: str, registrations: list[str],
                 targets: list[Target]) -> list[str]:
    """What offlink adds to the host link: the placeholder object, the registrations' objects,
    then the words the targets ask for (e.g. -foffload=disable for GCC's)."""
    return [placeholder, *registrations, *(a for t in targets for a in t.host_link_args(plan))]


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
    from ..driver_args import expand_with_origins, is_clang, respelled, words
    from ..plugins import Target

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
              gomp_register: bool) -> None:
    """Build the registrations' objects, link `staged`, and relink while libgomp's
    registration finds the host table's order unsettled."""
    from ..toolchains.registrations import objects, opt_in

    added = added_inputs(plan, placeholder, objects(plan, images, workdir, cache), targets)
    host = host_argv(plan, staged, added, targets)
    registration = opt_in(plan, images, workdir, gomp_register, cache)
    if registration is not None:
        registration.build()
        host = registration.host_argv(host, len(host) - len(added) - 2)
    run_host_link(host)
    if registration is not None:
        # A relink writes the registration in the order the link gave the host table;
        # that order must then hold, so a bounded number of links settles it.
        for _ in range(HOST_RELINKS):
            if registration.check(staged):
                break
            run_host_link(host)
        else:
            if not registration.check(staged):
                raise LinkError(f"{registration.option}: the host table's order did not settle "
                                f"in {HOST_RELINKS + 1} links")


def run_host_link(host: list[str]) -> None:
    """The host link on offlink's own output; a clang driver's linker job from its expansion
    kept in the cache (link/expansion.py)."""
    from ..toolchains.llvm.expansion import run_link

    try:
        run_link(host, "host link", here=True)
    except ToolError as e:
        raise ToolError(f"host link failed (exit status {e.exit_code}): "
                        f"{runner.show(host)}", e.exit_code) from None
