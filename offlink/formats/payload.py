"""The fat-object payload: section `gnu.target_lto_<target>`, format version 1 (formats/payload.md).

One record holds what the target compiler needs for one CU at link time. A relocatable link
(`ld -r`) concatenates same-named sections, so a section holds one or more records back to
back; each record is 8-aligned and a multiple of 8 long, so no padding appears between them.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from ..errors import FormatError
from . import PAYLOAD_SECTION_PREFIX

MAGIC = b"OFLKCU\0\1"
VERSION = 1
SECTION_PREFIX = PAYLOAD_SECTION_PREFIX

CODE_KINDS = {"c": 1, "c++": 2, "cuda": 3, "llvm-bc": 4, "object": 5}
FLAG_ZLIB = 1

HEADER_STRUCT = struct.Struct("<8sHHIQ")  # magic, version, flags, body_crc32, body_size
HEADER_SIZE = HEADER_STRUCT.size


def declarations():
    """The construct declarations of a record's header and body: the reference.

    The link reads records with `_parse_body` (struct only: importing construct costs ~18 ms
    of every relink); tests/test_formats.py checks that both agree.
    """
    global _DECLS
    if _DECLS is None:
        from construct import (
            Const,
            Enum,
            GreedyBytes,
            Int16ul,
            Int32ul,
            Int64ul,
            PascalString,
            Prefixed,
            PrefixedArray,
            Struct,
        )

        RecordHeader = Struct(
            "magic" / Const(MAGIC),
            "version" / Int16ul,
            "flags" / Int16ul,  # bit 0: code is zlib-compressed
            "body_crc32" / Int32ul,
            "body_size" / Int64ul,
        )

        Body = Struct(
            "target" / PascalString(Int16ul, "utf8"),
            "code_kind" / Enum(Int16ul, **CODE_KINDS),
            "source" / PascalString(Int16ul, "utf8"),
            "compiler" / PascalString(Int16ul, "utf8"),
            "options" / PrefixedArray(Int16ul, PascalString(Int32ul, "utf8")),
            "offered" / PrefixedArray(Int32ul, PascalString(Int16ul, "utf8")),
            "code" / Prefixed(Int64ul, GreedyBytes),
        )
        _DECLS = (RecordHeader, Body)
    return _DECLS


_DECLS = None


@dataclass(frozen=True)
class Payload:
    """One CU's target code for one target."""

    target: str
    code_kind: str
    source: str  # the source file, for diagnostics
    compiler: str  # the compiler driver that made the host object
    options: tuple[str, ...]  # options the target compile must use
    code: bytes  # e.g. preprocessed source
    offered: tuple[str, ...] = field(default=())  # empty: every external definition

    @property
    def section_name(self) -> str:
        return SECTION_PREFIX + self.target


def build_record(p: Payload) -> bytes:
    if p.code_kind not in CODE_KINDS:
        raise FormatError(f"unknown code kind '{p.code_kind}'")
    code = zlib.compress(p.code, 6)
    record_header, body_decl = declarations()
    body = body_decl.build(dict(target=p.target, code_kind=p.code_kind, source=p.source,
                           compiler=p.compiler, options=list(p.options),
                           offered=list(p.offered), code=code))
    body += b"\0" * (-len(body) % 8)
    head = record_header.build(dict(version=VERSION, flags=FLAG_ZLIB, body_crc32=zlib.crc32(body),
                                   body_size=len(body)))
    return head + body


def parse_records(data: bytes, where: str) -> list[Payload]:
    """All records of one section; `where` names the file and section in errors."""
    out = []
    pos = 0
    while pos < len(data):
        if data[pos : pos + 8] == b"\0" * min(8, len(data) - pos):  # alignment padding
            pos += 8
            continue
        if len(data) - pos < HEADER_SIZE:
            raise FormatError(f"{where}: truncated payload header")
        magic, version, flags, crc, size = HEADER_STRUCT.unpack_from(data, pos)
        if magic != MAGIC:
            raise FormatError(f"{where}: corrupt payload (bad magic at offset {pos})")
        if version != VERSION:
            raise FormatError(f"{where}: payload version {version} is not supported "
                              f"(this offlink reads version {VERSION})")
        body = data[pos + HEADER_SIZE : pos + HEADER_SIZE + size]
        if len(body) != size:
            raise FormatError(f"{where}: truncated payload ({len(body)} of {size} bytes)")
        if zlib.crc32(body) != crc:
            raise FormatError(f"{where}: corrupt payload (checksum mismatch)")
        try:
            fields = _parse_body(body)
            code = zlib.decompress(fields[-1]) if flags & FLAG_ZLIB else fields[-1]
        except (ValueError, zlib.error, UnicodeDecodeError) as e:
            raise FormatError(f"{where}: corrupt payload ({type(e).__name__})") from None
        target, kind, source, compiler, options, offered, _ = fields
        out.append(Payload(target, kind, source, compiler, options, code, offered))
        pos += HEADER_SIZE + size
    return out


_KIND_NAMES = {v: k for k, v in CODE_KINDS.items()}


def _parse_body(body: bytes) -> tuple:
    """A record body as `Body` declares it: (target, kind, source, compiler, options, offered,
    code). Every length is checked; a short or inconsistent body raises ValueError."""
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(body):
            raise ValueError("field past the end of the payload")
        pos += n
        return body[pos - n : pos]

    def number(fmt: str) -> int:
        return struct.unpack(fmt, take(struct.calcsize(fmt)))[0]

    def text(fmt: str) -> str:
        return take(number(fmt)).decode("utf-8")

    target = text("<H")
    kind = number("<H")
    if kind not in _KIND_NAMES:
        raise ValueError(f"unknown code kind {kind}")
    source = text("<H")
    compiler = text("<H")
    options = tuple(text("<I") for _ in range(number("<H")))
    offered = tuple(text("<H") for _ in range(number("<I")))
    code = take(number("<Q"))
    if any(body[pos:]):  # only the record's zero padding may follow
        raise ValueError("trailing bytes in the payload")
    return target, _KIND_NAMES[kind], source, compiler, options, offered, code
