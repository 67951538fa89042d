"""Offload targets: names, how a CU's code is compiled for one, how its objects become an image."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

from .errors import UsageError

HOST_TRIPLES = {"x86_64": "x86_64-pc-linux-gnu", "aarch64": "aarch64-unknown-linux-gnu"}


def host_triple() -> str:
    machine = platform.machine()
    if machine not in HOST_TRIPLES:
        raise UsageError(f"host machine '{machine}' is not supported (x86-64 and AArch64 are)")
    return HOST_TRIPLES[machine]


@dataclass(frozen=True)
class Target:
    """A target offlink can build images for."""

    name: str  # canonical: the section suffix and the table's target name
    image_kind: str  # the table's image kind
    macro: str  # defined to 1 in the target compile besides __OFFLINK_TARGET__

    def defines(self) -> list[str]:
        return [f'-D__OFFLINK_TARGET__="{self.name}"', f"-D{self.macro}=1"]


def _known() -> dict[str, Target]:
    host = Target(host_triple(), "shared-object", "__OFFLINK_TARGET_HOST__")
    return {host.name: host}


def resolve(name: str) -> Target:
    """A target by name or alias (`host`); an unknown name is a usage error listing the known."""
    known = _known()
    canonical = host_triple() if name == "host" else name
    if canonical in known:
        return known[canonical]
    names = ", ".join(["host", *sorted(known)])
    raise UsageError(f"unknown offload target '{name}' (known: {names})")


def default_targets() -> list[str]:
    """Targets for `offlink cc` without --offload-target: OFFLINK_TARGETS (comma list) or host."""
    env = os.environ.get("OFFLINK_TARGETS", "")
    return [t for t in env.split(",") if t] or ["host"]
