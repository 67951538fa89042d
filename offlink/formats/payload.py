"""The fat-object payload: section `gnu.target_lto_<target>`, format version 2 (formats/payload.md).

One record holds what the target compiler needs for one CU at link time. A relocatable link
(`ld -r`) concatenates same-named sections, so a section holds one or more records back to
back; each record is 8-aligned and a multiple of 8 long, so no padding appears between them.

Version 2 added `code_size` to the header: the code's size once inflated, so a reader inflates
at most that much (and never more than MAX_CODE_SIZE); version 1 records are still read,
bounded by MAX_CODE_SIZE alone.

declarations.py declares the record with construct: the reference. This module reads and
writes it with struct (benchmarks/formats/RESULTS.md says why), held to it by the tests.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import NamedTuple

from ..digest import sha256
from ..errors import FormatError
from . import PAYLOAD_SECTION_PREFIX, Frozen

MAGIC = b"OFLKCU\0\1"
VERSION = 2
READS = (1, 2)  # versions this reader accepts
SECTION_PREFIX = PAYLOAD_SECTION_PREFIX

CODE_KINDS = {"c": 1, "c++": 2, "cuda": 3, "llvm-bc": 4, "object": 5}
FLAG_ZLIB = 1
KNOWN_FLAGS = FLAG_ZLIB
# The most code one record may hold once inflated. Preprocessed sources and bitcode of real
# CUs stay far below it; it bounds what a forged record can cost (memory and time).
MAX_CODE_SIZE = 256 << 20

# A record's header as declarations.py declares it (tests/test_format_declarations.py holds
# them to it): magic, version, flags, body_crc32, body_size; version 2 adds code_size.
V1_HEADER_STRUCT = struct.Struct("<8sHHIQ")
HEADER_STRUCT = struct.Struct(V1_HEADER_STRUCT.format + "Q")
HEADER_SIZE = HEADER_STRUCT.size


class Stored(NamedTuple):
    """A record's code as stored (compressed or not), inflated only when read (`_code`)."""

    data: bytes
    compressed: bool
    declared: int | None  # the header's code_size (version 2), None for version 1
    where: str


class Deferred:
    """A record's code known so far only by its `code_id` (a relink's record of its inputs:
    link/relink.py): `load` reads the record again and gives its Stored form, used only
    when the code itself is needed, and refused unless it has that same code_id."""

    def __init__(self, code_id: str, load, where: str):
        self.code_id = code_id
        self._load = load
        self.where = where

    def stored(self) -> Stored:
        stored = self._load()
        if stored_id(stored) != self.code_id:
            raise FormatError(f"{self.where}: changed while being linked; link again")
        return stored


def stored_id(s: Stored) -> str:
    """Payload.code_id of a record's stored code."""
    form = b"zlib" if s.compressed else b"raw"
    return sha256(form + b"\0" + s.data).hexdigest()


class _Code:
    """Payload.code: the bytes given, or a record's `Stored` code inflated on first read, so
    a relink whose objects are all in the cache inflates none (the cache keys the stored
    bytes: Payload.code_id). The bounds checks are those of an eager read (`_code`)."""

    def __set_name__(self, owner, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            raise AttributeError("code")  # no default: the field is required
        value = obj.__dict__[self.slot]
        if isinstance(value, Deferred):
            code = obj.__dict__.get(self.slot + "_inflated")
            if code is None:
                code = _code(*value.stored())
                obj.__dict__[self.slot + "_inflated"] = code
            return code
        if not isinstance(value, Stored):
            return value
        code = obj.__dict__.get(self.slot + "_inflated")
        if code is None:  # the Stored form stays: code_id never depends on what was read
            code = _code(*value)
            obj.__dict__[self.slot + "_inflated"] = code
        return code

    def __set__(self, obj, value) -> None:
        obj.__dict__[self.slot] = value


class Payload(Frozen):
    """One CU's target code for one target (a Frozen class, as a frozen dataclass would be:
    benchmarks/formats/RESULTS.md says why not one)."""

    target: str
    code_kind: str
    source: str  # the source file, for diagnostics
    compiler: str  # the compiler driver that made the host object
    options: tuple[str, ...]  # options the target compile must use
    code: bytes = _Code()  # type: ignore[assignment]  # e.g. preprocessed source
    offered: tuple[str, ...]  # empty: every external definition

    def __init__(self, target: str, code_kind: str, source: str, compiler: str,
                 options: tuple[str, ...], code: bytes | Stored | Deferred,
                 offered: tuple[str, ...] = ()):
        d = self.__dict__
        d["target"] = target
        d["code_kind"] = code_kind
        d["source"] = source
        d["compiler"] = compiler
        d["options"] = options
        d["_code"] = code  # the _Code descriptor's slot
        d["offered"] = offered

    def _values(self) -> tuple:
        return (self.target, self.code_kind, self.source, self.compiler, self.options,
                self.code, self.offered)

    def __repr__(self) -> str:
        names = ("target", "code_kind", "source", "compiler", "options", "code", "offered")
        return "Payload(" + ", ".join(f"{n}={v!r}" for n, v in zip(names, self._values())) + ")"

    @property
    def section_name(self) -> str:
        return SECTION_PREFIX + self.target

    @property
    def code_id(self) -> str:
        """A SHA-256 that tells this code from any other: of the record's stored bytes when
        read from a record (no inflation needed), else of the code itself."""
        value = self.__dict__["_code"]
        if isinstance(value, Stored):
            return stored_id(value)
        if isinstance(value, Deferred):
            return value.code_id
        return sha256(b"code\0" + value).hexdigest()


def build_record(p: Payload) -> bytes:
    if p.code_kind not in CODE_KINDS:
        raise FormatError(f"unknown code kind '{p.code_kind}'")
    if len(p.code) > MAX_CODE_SIZE:
        raise FormatError(f"{p.source}: {len(p.code)} bytes of target code is more than a "
                          f"payload holds ({MAX_CODE_SIZE} bytes)")
    # Level 4, not zlib's default 6: benchmarks/formats/RESULTS.md. Readers take any level.
    code = zlib.compress(p.code, 4)
    body = _build_body(p.target, p.code_kind, p.source, p.compiler, p.options, p.offered, code)
    body += b"\0" * (-len(body) % 8)
    return HEADER_STRUCT.pack(MAGIC, VERSION, FLAG_ZLIB, zlib.crc32(body), len(body),
                              len(p.code)) + body


def _build_body(target: str, kind: str, source: str, compiler: str, options: Sequence[str],
                offered: Sequence[str], code: bytes) -> bytes:
    """A record body as declarations.PayloadBody declares it, written with struct as
    `_parse_body` reads it. Raises FormatError for a field too long for its length prefix."""

    def text(fmt: str, value: str) -> bytes:
        raw = value.encode("utf-8")
        return counted(fmt, len(raw), "text") + raw

    def counted(fmt: str, n: int, what: str) -> bytes:
        try:
            return struct.pack(fmt, n)
        except struct.error:
            raise FormatError(f"{source}: {what} too long for a payload ({n})") from None

    parts = [text("<H", target), struct.pack("<H", CODE_KINDS[kind]), text("<H", source),
             text("<H", compiler), counted("<H", len(options), "options")]
    parts += [text("<I", o) for o in options]
    parts.append(counted("<I", len(offered), "offered names"))
    parts += [text("<H", o) for o in offered]
    parts += [struct.pack("<Q", len(code)), code]
    return b"".join(parts)


def parse_records(data: bytes, where: str, lazy: bool = False) -> list[Payload]:
    """All records of one section; `where` names the file and section in errors.

    `lazy`: each record's code is inflated (and its bounds checked) when first read, not
    here; everything else is checked here as without it (the link: see `_Code`)."""
    out = []
    pos = 0
    while pos < len(data):
        if data[pos : pos + 8] == b"\0" * min(8, len(data) - pos):  # alignment padding
            pos += 8
            continue
        if len(data) - pos < V1_HEADER_STRUCT.size:
            raise FormatError(f"{where}: truncated payload header")
        magic, version, flags, crc, size = V1_HEADER_STRUCT.unpack_from(data, pos)
        if magic != MAGIC:
            raise FormatError(f"{where}: corrupt payload (bad magic at offset {pos})")
        if version not in READS:
            raise FormatError(f"{where}: payload version {version} is not supported "
                              f"(this offlink reads versions {READS[0]} to {READS[-1]})")
        if flags & ~KNOWN_FLAGS:
            raise FormatError(f"{where}: corrupt payload (unknown flags {flags:#06x})")
        head = V1_HEADER_STRUCT.size
        declared = None  # version 1 declares no code size
        if version >= 2:
            if len(data) - pos < HEADER_STRUCT.size:
                raise FormatError(f"{where}: truncated payload header")
            head = HEADER_STRUCT.size
            declared = HEADER_STRUCT.unpack_from(data, pos)[-1]
            if declared > MAX_CODE_SIZE:
                raise FormatError(f"{where}: corrupt payload (declares {declared} bytes of "
                                  f"code, more than the {MAX_CODE_SIZE}-byte limit)")
        body = data[pos + head : pos + head + size]
        if len(body) != size:
            raise FormatError(f"{where}: truncated payload ({len(body)} of {size} bytes)")
        if zlib.crc32(body) != crc:
            raise FormatError(f"{where}: corrupt payload (checksum mismatch)")
        try:
            fields = _parse_body(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise FormatError(f"{where}: corrupt payload ({type(e).__name__})") from None
        stored = Stored(fields[-1], bool(flags & FLAG_ZLIB), declared, where)
        code: bytes | Stored = stored if lazy else _code(*stored)
        target, kind, source, compiler, options, offered, _ = fields
        out.append(Payload(target, kind, source, compiler, options, code,  # type: ignore[arg-type]
                           offered))
        pos += head + size
    return out


def _code(stored: bytes, compressed: bool, declared: int | None, where: str) -> bytes:
    """The record's code: inflated as a stream that stops one byte past the declared size
    (or past MAX_CODE_SIZE for version 1), so a forged record costs no more than that."""
    if not compressed:
        if declared is not None and declared != len(stored):
            raise FormatError(f"{where}: corrupt payload (the header declares {declared} "
                              f"bytes of code, the record holds {len(stored)})")
        return stored
    limit = MAX_CODE_SIZE if declared is None else declared
    inflater = zlib.decompressobj()
    try:
        code = inflater.decompress(stored, limit + 1)
    except zlib.error:
        raise FormatError(f"{where}: corrupt payload (bad compressed code)") from None
    if len(code) > limit:
        what = (f"the {declared} bytes its header declares" if declared is not None
                else f"the {MAX_CODE_SIZE}-byte limit")
        raise FormatError(f"{where}: corrupt payload (the code inflates to more than {what})")
    if not inflater.eof or inflater.unused_data:
        raise FormatError(f"{where}: corrupt payload (bad compressed code)")
    if declared is not None and len(code) != declared:
        raise FormatError(f"{where}: corrupt payload (the code inflates to {len(code)} bytes, "
                          f"its header declares {declared})")
    return code


_KIND_NAMES = {v: k for k, v in CODE_KINDS.items()}


def _parse_body(body: bytes) -> tuple:
    """A record body as declarations.PayloadBody declares it: (target, kind, source, compiler,
    options, offered, code). Every length is checked; a short or inconsistent body raises
    ValueError."""
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
