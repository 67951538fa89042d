"""Which files a compile read, from its depfile and its preprocessed code, and whether one of
them names a target macro (then the host's code may differ from the target's: fatcache.py)."""

from __future__ import annotations

import os
import re

MARK = b"__OFFLINK_TARGET"  # every target's macros start so (__OFFLINK_TARGET__, ..._HOST__)


def prerequisites(text: bytes) -> list[bytes] | None:
    """The files a depfile's first rule lists (gcc's quoting: `\\ `, `\\#`, `$$`); None when it
    cannot be read."""
    text = text.replace(b"\\\n", b" ")
    first = text.split(b"\n", 1)[0]
    if b"\\" in first or b"$" in first:
        tokens = _tokens(first)
    else:
        tokens = first.split()
    for i, tok in enumerate(tokens):
        if tok.endswith(b":"):
            return tokens[i + 1 :]
    return None


def _tokens(line: bytes) -> list[bytes]:
    tokens: list[bytes] = []
    cur = bytearray()
    i = 0
    while i < len(line):
        c = line[i : i + 1]
        nxt = line[i + 1 : i + 2]
        if c == b"\\" and nxt in (b" ", b"#", b"\\"):
            cur += nxt
            i += 2
            continue
        if c == b"$" and nxt == b"$":
            cur += b"$"
            i += 2
            continue
        if c in (b" ", b"\t"):
            if cur:
                tokens.append(bytes(cur))
                cur.clear()
        else:
            cur += c
        i += 1
    if cur:
        tokens.append(bytes(cur))
    return tokens


def names_target(paths: list[bytes]) -> bool:
    """Whether any of these files names a target macro (or cannot be read: then as if so)."""
    for path in paths:
        try:
            with open(path, "rb") as f:
                if MARK in f.read():
                    return True
        except OSError:
            return True
    return False


def included(code: bytes) -> list[bytes] | None:
    """The files preprocessed code's linemarkers name (`# 1 "stdio.h" 1 3 4`: every file the
    preprocessor entered, system headers and what they include among them, which -MMD's
    depfile leaves out); None when a name is escaped (a backslash or a quote in it)."""
    names = dict.fromkeys(re.findall(rb'\n# [0-9]+ "([^"\n]*)"', code))
    names.pop(b"<built-in>", None)
    names.pop(b"<command-line>", None)
    if any(b"\\" in name for name in names):
        return None
    return list(names)


def marked(source: str, depfile: str, code: bytes | None = None) -> bool | None:
    """Whether the source or a file its depfile lists (or, given the `code` that wrote a -MMD
    depfile, a file that code came from) names a target macro (then the host's code may
    differ from the target's); None when the depfile or the code cannot be read."""
    try:
        with open(depfile, "rb") as f:
            files = prerequisites(f.read())
    except OSError:
        return None
    if files is None:
        return None
    if code is not None:
        entered = included(code)
        if entered is None:
            return None
        files = list(dict.fromkeys([*files, *entered]))  # a header is read once
    return names_target([os.fsencode(source), *files])
