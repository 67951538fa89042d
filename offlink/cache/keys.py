"""Cache keys: SHA-256s of length-framed parts; `key` always puts in the cache format and
offlink's code identity, so no entry outlives a change of either."""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence

from ..digest import sha256, sha256_small

# In every key: raised when what an entry holds changes meaning under the same offlink version
# (2: a variable's offer is as strong as its binding; image entries keep their offers).
FORMAT = 2


def hasher(*parts: str | bytes):
    h = sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(struct.pack("<Q", len(data)))
        h.update(data)
    return h


def hash_parts(*parts: str | bytes) -> str:
    """A SHA-256 of the parts, each with its length (no two lists of parts hash alike)."""
    data = [p.encode() if isinstance(p, str) else p for p in parts]
    if sum(map(len, data)) < _SMALL:  # a stamp, a short key: digest.sha256_small
        return sha256_small(b"".join(struct.pack("<Q", len(d)) + d for d in data)).hexdigest()
    return hasher(*data).hexdigest()


_SMALL = 1 << 14


def hash_from(prefix, *parts: str | bytes) -> str:
    """`hash_parts` of the prefix's parts followed by `parts`; the prefix is left as it was."""
    h = prefix.copy()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(struct.pack("<Q", len(data)))
        h.update(data)
    return h.hexdigest()


def key(code: str, kind: str, *parts: str | bytes) -> str:
    """The key of an entry of `kind`: its parts after the cache format and `code`, offlink's
    code identity (Cache.code_identity), which every key must have."""
    return hash_parts(kind, str(FORMAT), code, *parts)


def key_prefix(code: str, kind: str, *parts: str | bytes):
    """`key`'s hash object over the parts given so far; `hash_from` adds the rest."""
    return hasher(kind, str(FORMAT), code, *parts)


def uses_debug_info(argv: Sequence[str]) -> bool:
    return any(a.startswith("-g") and a not in ("-g0", "-gno-record-gcc-switches")
               for a in argv)


def normalise(argv: Sequence[str], paths: dict[str, str], tmp: str = "") -> list[str]:
    """`argv` with each temporary path replaced by a fixed name.

    A word that is one of the paths is looked up; only a word holding the temporary
    folder `tmp` inside it (`-o<path>`, `file=<path>`) is searched for every path, longest
    first, so a device link of 1000 objects stays linear.
    """
    ordered: list[tuple[str, str]] | None = None
    out = []
    for word in argv:
        if word in paths:
            out.append(paths[word])
            continue
        if not tmp or tmp in word:
            if ordered is None:
                ordered = sorted(paths.items(), key=lambda kv: -len(kv[0]))
            for path, name in ordered:
                word = word.replace(path, name)
        out.append(word)
    return out


def file_stamp(st: os.stat_result) -> str:
    """What tells one version of a file from the next without reading it: device, inode,
    size, and mtime and ctime in nanoseconds (a same-size rewrite that puts the old mtime
    back still moves ctime, which no user can set)."""
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
