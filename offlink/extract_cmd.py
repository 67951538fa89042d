"""`offlink extract`: write target images out of a linked binary."""

from __future__ import annotations


def extract_image(path: str, target: str, output: str) -> int:
    """Write one target's image (checksum verified) to `output`, atomically."""
    from .link.staging import write_whole
    from .table import Table
    from .targets import host_triple

    name = host_triple() if target == "host" else target
    image = Table.open(path).target(name).image
    write_whole(output, image, 0o644)
    return len(image)
