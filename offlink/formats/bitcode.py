"""The symbol table of an LLVM bitcode file, read without LLVM (what `llvm-lto2 dump-symtab`
lists), so a link can see every CU's symbols without a process per CU.

Bitcode (llvm/Bitstream, docs/BitCodeFormat.rst) is a stream of blocks; since LLVM 5 the
writer adds two top-level blocks after the module: SYMTAB_BLOCK (id 25) with one blob, the
irsymtab (llvm/Object/IRSymtab.h, `storage::Header`, version 3 in LLVM 17-22, 4 in LLVM 23), and
STRTAB_BLOCK (id 23) whose blob holds the names the irsymtab points at. Top-level blocks are
skipped by their length word; only those two are read. A file without them (or of another
irsymtab version) is not read here: `symbols()` returns None and the caller asks LLVM.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import FormatError

MAGIC = b"BC\xc0\xde"
WRAPPER_MAGIC = b"\xde\xc0\x17\x0b"  # Darwin's wrapper header (magic, version, offset, size)
SYMTAB_BLOCK = 25
STRTAB_BLOCK = 23

# irsymtab::storage: Word = u32; Str = {offset, size} in the strtab; Range = {offset in the
# symtab blob, count}.
HEADER = struct.Struct("<I2I2I2I2I2I2I2I2I2I")  # Version, Producer, Modules, Comdats,
#   Symbols, Uncommons, TargetTriple, SourceFileName, COFFLinkerOpts, DependentLibraries
SYMBOL = struct.Struct("<2I2III")  # Name, IRName, ComdatIndex, Flags
# Uncommon, by the irsymtab versions read here (LLVM 17-22 write 3, LLVM 23 writes 4):
# CommonSize, CommonAlign, COFFWeakExternFallbackName, SectionName; in version 4 CommonSize is
# a u64 (checked against llvm-lto2-23 dump-symtab of clang-23's bitcode: the rest as in 3).
UNCOMMON = {3: struct.Struct("<II2I2I"), 4: struct.Struct("<QI2I2I")}

# Symbol::FlagBits
FB_HAS_UNCOMMON = 1 << 2
FB_UNDEFINED = 1 << 3
FB_WEAK = 1 << 4
FB_COMMON = 1 << 5
FB_INDIRECT = 1 << 6
FB_USED = 1 << 7
FB_TLS = 1 << 8
FB_MAY_OMIT = 1 << 9
FB_GLOBAL = 1 << 10
FB_FORMAT_SPECIFIC = 1 << 11
FB_EXECUTABLE = 1 << 13
VISIBILITY = "DHP"  # default, hidden, protected (the low two bits)


class Symbol(NamedTuple):
    """One symbol of a bitcode module, as the LTO API sees it (a tuple: a link reads
    thousands)."""

    name: str
    flags: int
    section: str = ""

    @property
    def visibility(self) -> str:
        return VISIBILITY[self.flags & 3] if self.flags & 3 < 3 else "D"

    @property
    def undefined(self) -> bool:
        return bool(self.flags & FB_UNDEFINED)

    @property
    def common(self) -> bool:
        return bool(self.flags & FB_COMMON)

    @property
    def may_omit(self) -> bool:
        """A definition the symbol table may leave out (linkonce_odr, unnamed_addr)."""
        return bool(self.flags & FB_MAY_OMIT)

    @property
    def dump_flags(self) -> str:
        """The flags column of `llvm-lto2 dump-symtab` (visibility, then U C W I O T X)."""
        f = self.flags
        return self.visibility + "".join(
            c if f & bit else "-" for c, bit in (("U", FB_UNDEFINED), ("C", FB_COMMON),
                                                 ("W", FB_WEAK), ("I", FB_INDIRECT),
                                                 ("O", FB_MAY_OMIT), ("T", FB_TLS),
                                                 ("X", FB_EXECUTABLE)))


class _Bits:
    """A little-endian bit reader over bitcode (bits come LSB first from 32-bit words)."""

    def __init__(self, data: bytes, pos: int, where: str):
        self.data = data
        self.pos = pos * 8
        self.where = where

    def fixed(self, width: int) -> int:
        if not width:
            return 0
        end = self.pos + width
        if end > len(self.data) * 8:
            raise FormatError(f"{self.where}: bitcode ends inside a record")
        first, last = self.pos >> 3, (end + 7) >> 3
        value = int.from_bytes(self.data[first:last], "little") >> (self.pos & 7)
        self.pos = end
        return value & ((1 << width) - 1)

    def vbr(self, width: int) -> int:
        if width < 2:
            raise FormatError(f"{self.where}: a bitcode VBR field of width {width}")
        hi = 1 << (width - 1)
        value, shift = 0, 0
        while True:
            piece = self.fixed(width)
            value |= (piece & (hi - 1)) << shift
            if not piece & hi:
                return value
            shift += width - 1
            if shift > 64:
                raise FormatError(f"{self.where}: a bitcode number is too long")

    def align32(self) -> None:
        self.pos = (self.pos + 31) & ~31


def _block_blob(data: bytes, start: int, width: int, where: str) -> bytes | None:
    """The blob of the first record of a block (abbreviated with an Array/Blob operand), the
    block's content starting at byte `start` with abbreviation width `width`."""
    bits = _Bits(data, start, where)
    abbrevs: list[list[tuple[int, int]]] = []  # per abbreviation: (encoding, value)
    while True:
        abbrev = bits.fixed(width)
        if abbrev == 0:  # END_BLOCK
            return None
        if abbrev == 1:  # ENTER_SUBBLOCK: not expected in these blocks; skip it
            bits.vbr(8)
            bits.vbr(4)
            bits.align32()
            bits.pos += bits.fixed(32) * 32
            continue
        if abbrev == 2:  # DEFINE_ABBREV
            ops = []
            for _ in range(bits.vbr(5)):
                if bits.fixed(1):
                    ops.append((0, bits.vbr(8)))  # a literal
                else:
                    enc = bits.fixed(3)
                    ops.append((enc, bits.vbr(5) if enc in (1, 2) else 0))
            abbrevs.append(ops)
            continue
        if abbrev == 3:  # UNABBREV_RECORD: no blob
            bits.vbr(6)
            for _ in range(bits.vbr(6)):
                bits.vbr(6)
            continue
        if abbrev - 4 >= len(abbrevs):
            raise FormatError(f"{where}: bitcode record with unknown abbreviation {abbrev}")
        for enc, value in abbrevs[abbrev - 4]:
            if enc == 0:
                continue
            if enc == 1:
                bits.fixed(value)
            elif enc == 2:
                bits.vbr(value)
            elif enc == 4:
                bits.fixed(6)
            elif enc == 5:  # Blob: the record's payload
                size = bits.vbr(6)
                bits.align32()
                begin = bits.pos >> 3
                if begin + size > len(data):
                    raise FormatError(f"{where}: bitcode blob out of bounds")
                return data[begin : begin + size]
            else:  # Array (not in these blocks' records)
                return None


def _top_blobs(data: bytes, where: str) -> dict[int, bytes]:
    """The blobs of the top-level SYMTAB and STRTAB blocks (the last of each, as a file of
    several modules keeps one of each after them)."""
    if data[:4] == WRAPPER_MAGIC and len(data) >= 20:
        offset, size = struct.unpack_from("<II", data, 8)
        data = data[offset : offset + size]
    if data[:4] != MAGIC:
        raise FormatError(f"{where}: not LLVM bitcode")
    out: dict[int, bytes] = {}
    pos = 4
    while pos + 8 <= len(data):
        head, words = struct.unpack_from("<II", data, pos)
        if head & 3 != 1:  # only blocks at the top level (then padding)
            break
        if not head & 0x2200:  # block id < 128, width < 8: one word, then the length word
            block, width, content = (head >> 2) & 0x7F, (head >> 10) & 7, pos + 8
        else:
            bits = _Bits(data, pos, where)
            bits.fixed(2)
            block = bits.vbr(8)
            width = bits.vbr(4)
            bits.align32()
            words = bits.fixed(32)
            content = bits.pos >> 3
        pos = content + words * 4
        if pos > len(data):
            raise FormatError(f"{where}: bitcode block {block} runs past the end")
        if block in (SYMTAB_BLOCK, STRTAB_BLOCK):
            blob = _block_blob(data, content, width, where)
            if blob is not None:
                out[block] = blob
    return out


# The global clang's -fembed-offload-object (its offload driver's host compile) puts the
# OffloadBinary in (llvm::embedBufferInModule: section .llvm.offloading); its name is among the
# module's names in the STRTAB blob, whatever its linkage.
EMBEDDED_OBJECT = b"llvm.embedded.object"


def is_bitcode(head: bytes) -> bool:
    """Whether a file beginning with `head` (4 bytes or more) is LLVM bitcode."""
    return head[:4] in (MAGIC, WRAPPER_MAGIC)


def carries_offload(data: bytes, where: str) -> bool:
    """Whether a bitcode module embeds an offload object (a host compile with -flto by clang's
    offload driver). A file without a STRTAB block (LLVM < 5) embeds none: the embedding is
    newer."""
    return EMBEDDED_OBJECT in _top_blobs(data, where).get(STRTAB_BLOCK, b"")


def symbols(data: bytes, where: str) -> list[Symbol] | None:
    """The module's symbols in the order the LTO API lists them (llvm-lto2 wants one
    resolution per symbol), or None when the file carries no irsymtab this reader knows."""
    blobs = _top_blobs(data, where)
    symtab, strtab = blobs.get(SYMTAB_BLOCK), blobs.get(STRTAB_BLOCK)
    if symtab is None or strtab is None or len(symtab) < HEADER.size:
        return None
    h = HEADER.unpack_from(symtab)
    uncommon_row = UNCOMMON.get(h[0])
    if uncommon_row is None:
        return None
    sym_off, sym_count, unc_off, unc_count = h[7], h[8], h[9], h[10]
    if (sym_off + sym_count * SYMBOL.size > len(symtab)
            or unc_off + unc_count * uncommon_row.size > len(symtab)):
        raise FormatError(f"{where}: bitcode symbol table out of bounds")

    def string(offset: int, size: int) -> str:
        if offset + size > len(strtab):
            raise FormatError(f"{where}: bitcode symbol name out of bounds")
        return strtab[offset : offset + size].decode("utf-8", "replace")

    out = []
    uncommon = 0
    for i in range(sym_count):
        n_off, n_size, _ir_off, _ir_size, _comdat, flags = SYMBOL.unpack_from(
            symtab, sym_off + i * SYMBOL.size)
        section = ""
        if flags & FB_HAS_UNCOMMON:
            if uncommon >= unc_count:
                raise FormatError(f"{where}: bitcode symbol table out of bounds")
            u = uncommon_row.unpack_from(symtab, unc_off + uncommon * uncommon_row.size)
            section = string(u[4], u[5])
            uncommon += 1
        # lto::InputFile keeps the global symbols that are not format specific (llvm.*).
        if flags & FB_GLOBAL and not flags & FB_FORMAT_SPECIFIC:
            out.append(Symbol(string(n_off, n_size), flags, section))
    return out
