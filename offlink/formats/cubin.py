"""CUDA's ELF objects (cubins): their architecture and the symbols a link needs, read from
the bytes (a cubin's kernel mark and .nv.global section are CUDA's own, see cubin_symbols)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import FormatError

# CUDA ELF (cubin) details.
STO_CUDA_ENTRY = 0x10  # st_other bit of a kernel
STT_OBJECT, STT_FUNC, STT_CUDA_OBJECT = 1, 2, 13
STB_GLOBAL, STB_WEAK = 1, 2
STV_HIDDEN = 2
STV_INTERNAL = 3


def cubin_arch(data: bytes, where: str) -> str:
    """A cubin's architecture (`sm_80`) from its ELF header: e_flags holds the SM number,
    in bits 8-15 from ELF ABI version 8 (CUDA 13's tools), in bits 0-7 before."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2:
        raise FormatError(f"{where}: not a 64-bit cubin")
    e_flags, = struct.unpack_from("<I", data, 0x30)
    sm = (e_flags >> 8) & 0xFF if data[8] >= 8 else e_flags & 0xFF
    return f"sm_{sm}"


@dataclass(frozen=True)
class DeviceSymbol:
    name: str
    kind: str  # "function" (a kernel) or "variable"
    size: int
    strong: bool


def cubin_symbols(data: bytes, where: str) -> dict[str, DeviceSymbol]:
    """The kernels and external variables a cubin defines.

    Read here rather than with offlink.elf: a cubin's symbols carry the kernel mark in
    st_other, and its .nv.global has a CUDA-specific NOBITS type (SHT_LOPROC + 7) with no
    bytes in the file."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise FormatError(f"{where}: not a 64-bit little-endian cubin")
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if e_shentsize != 64 or e_shoff + e_shnum * 64 > len(data):
        raise FormatError(f"{where}: truncated cubin (section headers)")
    # (sh_name, sh_type, sh_offset, sh_size, sh_link) of every section
    shdrs = [struct.unpack_from("<IIQQQQI", data, e_shoff + i * 64)[:6] + (
        struct.unpack_from("<I", data, e_shoff + i * 64 + 40)[0],) for i in range(e_shnum)]

    def content(i: int) -> bytes:
        _, _, _, _, off, size, _ = shdrs[i]
        if off + size > len(data):
            raise FormatError(f"{where}: truncated cubin (section {i})")
        return data[off : off + size]

    def cstr(table: bytes, off: int) -> str:
        if off >= len(table):
            raise FormatError(f"{where}: corrupt cubin (name offset {off})")
        return table[off : table.find(b"\0", off)].decode(errors="surrogateescape")

    shstr = content(e_shstrndx) if 0 < e_shstrndx < e_shnum else b""
    names = [cstr(shstr, h[0]) if shstr else "" for h in shdrs]
    out: dict[str, DeviceSymbol] = {}
    for i, h in enumerate(shdrs):
        if h[1] != 2:  # SHT_SYMTAB
            continue
        link = h[6]
        if not 0 < link < e_shnum:
            raise FormatError(f"{where}: corrupt cubin (symbol table's string table)")
        strtab, raw = content(link), content(i)
        for off in range(24, len(raw) - 23, 24):  # entry 0 is the null symbol
            st_name, st_info, st_other, st_shndx, _, st_size = struct.unpack_from(
                "<IBBHQQ", raw, off)
            bind, typ = st_info >> 4, st_info & 0xF
            if bind not in (STB_GLOBAL, STB_WEAK) or st_other & 3 in (STV_HIDDEN, STV_INTERNAL):
                continue
            if not 0 < st_shndx < e_shnum or names[st_shndx].startswith((".nv.shared",
                                                                         ".nv.local")):
                continue  # undefined, absolute, or per-block/per-thread memory
            name = cstr(strtab, st_name)
            if typ == STT_FUNC and st_other & STO_CUDA_ENTRY:
                out[name] = DeviceSymbol(name, "function", 1, bind == STB_GLOBAL)
            elif typ in (STT_OBJECT, STT_CUDA_OBJECT):
                out[name] = DeviceSymbol(name, "variable", st_size, bind == STB_GLOBAL)
    return out


def cubin_names(data: bytes, where: str) -> set[str]:
    """Every symbol name of a cubin (defined or not): what the wrapper's UsedInRegularObj
    collects from a relocatable device object."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2:
        raise FormatError(f"{where}: not a 64-bit cubin")
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
    if e_shentsize != 64 or e_shoff + e_shnum * 64 > len(data):
        raise FormatError(f"{where}: truncated cubin (section headers)")
    names: set[str] = set()
    headers = [struct.unpack_from("<IIQQQQII", data, e_shoff + i * 64) for i in range(e_shnum)]
    for _, sh_type, _, _, off, size, link, _ in headers:
        if sh_type != 2 or not 0 < link < e_shnum:  # SHT_SYMTAB
            continue
        str_off, str_size = headers[link][4], headers[link][5]
        if off + size > len(data) or str_off + str_size > len(data):
            raise FormatError(f"{where}: truncated cubin (symbol table)")
        strtab = data[str_off : str_off + str_size]
        for pos in range(off + 24, off + size - 23, 24):
            st_name, = struct.unpack_from("<I", data, pos)
            if st_name and st_name < len(strtab):
                end = strtab.find(b"\0", st_name)
                names.add(strtab[st_name : end if end >= 0 else None].decode(errors="replace"))
    return names
