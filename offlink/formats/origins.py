"""`.offlink.origins`, format version 1: the CU that offered each row (spec: formats/origins.md).

The table records names, not where they came from; the link knows (Image.owners), so it
writes that down beside the table in a non-allocated section: no memory at run time, read by
`offlink inspect` only. Read as untrusted: anything off is one FormatError line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ..errors import FormatError

SECTION = ".offlink.origins"
MAGIC = b"offlink.origins "  # then the version in decimal and a newline, then JSON
VERSION = 1


class Origins(NamedTuple):
    rows: dict[str, str]  # row name -> the CU that offered it
    left_out: dict[str, str]  # offered name the narrowing left out -> its CU
    cus: tuple[str, ...]  # every CU named above, in link-line order


def prefix_maps(argv: Sequence[str]) -> list[tuple[str, str]]:
    """The link line's -ffile-prefix-map=OLD=NEW and -fdebug-prefix-map=OLD=NEW, the last
    given first (GCC tries them in that order and takes the first that matches)."""
    maps = []
    for word in argv:
        for option in ("-ffile-prefix-map=", "-fdebug-prefix-map="):
            if word.startswith(option) and "=" in word[len(option):]:
                old, _, new = word[len(option):].partition("=")
                maps.append((old, new))
    return maps[::-1]


def portable(origin: str, output_dir: str, maps: Sequence[tuple[str, str]] = ()) -> str:
    """A CU's name as recorded, so that the binary does not depend on the folder it was built
    in (reproducible builds vary it): a relative path stays as the link line gives it; an
    absolute one is mapped as -ffile-prefix-map maps it (a plain prefix, as GCC compares),
    else made relative to the output's folder (absolute) where the two share a folder below
    `/`; a path elsewhere (`/usr/lib/...`) does not move with the build and stays."""
    if not origin.startswith("/"):
        return origin
    for old, new in maps:
        if old and origin.startswith(old):
            return new + origin[len(old):]
    if os.path.commonpath([origin, output_dir]) == "/":
        return origin
    return os.path.relpath(origin, output_dir)


def encode(rows: Mapping[str, str], left_out: Mapping[str, str], order: list[str]) -> bytes:
    """Deterministic bytes: CUs in `order` (the link line's), names sorted."""
    named = set(rows.values()) | set(left_out.values())
    cus = [c for c in dict.fromkeys(order) if c in named]
    cus += sorted(named.difference(cus))
    index = {c: i for i, c in enumerate(cus)}
    body = {"cus": cus,
            "rows": [[n, index[rows[n]]] for n in sorted(rows)],
            "left_out": [[n, index[left_out[n]]] for n in sorted(left_out)]}
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return MAGIC + f"{VERSION}\n".encode() + text.encode()


def decode(data: bytes, where: str) -> Origins:
    """The section's content; FormatError (one line, naming `where`) if it is not version 1."""
    def bad(why: str) -> FormatError:
        return FormatError(f"{where}: {SECTION}: {why}")

    if not data.startswith(MAGIC):
        raise bad("corrupt (bad magic)")
    head, newline, text = data[len(MAGIC):].partition(b"\n")
    if not newline or not head.isdigit():
        raise bad("corrupt (no version line)")
    if int(head) != VERSION:
        raise bad(f"format version {int(head)}, this offlink reads {VERSION}")
    try:
        body = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise bad("corrupt (not JSON)") from None
    cus = body.get("cus") if isinstance(body, dict) else None
    if not isinstance(cus, list) or not all(isinstance(c, str) for c in cus):
        raise bad("corrupt (no list of CUs)")

    def pairs(key: str) -> dict[str, str]:
        items = body.get(key, [])
        if not isinstance(items, list):
            raise bad(f"corrupt ({key} is not a list)")
        out = {}
        for item in items:
            if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str)
                    or type(item[1]) is not int or not 0 <= item[1] < len(cus)):
                raise bad(f"corrupt (an entry of {key} is not [name, CU index])")
            out[item[0]] = cus[item[1]]
        return out

    return Origins(pairs("rows"), pairs("left_out"), tuple(cus))
