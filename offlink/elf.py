"""Reading ELF files: section headers, symbols, archive members, as small plain-data records;
and writing the objects offlink makes without a compiler (`relocatable`): data with pointers
(`data_object`), the table's placeholder (link/reserve.py).

A direct struct reader of the few structures offlink needs (ELF64 little-endian only, as the
table format requires). It is fast to import and to run, which keeps a relink cheap.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from typing import NamedTuple

from .errors import FormatError

ELF_MAGIC = b"\x7fELF"
AR_MAGIC = b"!<arch>\n"
THIN_AR_MAGIC = b"!<thin>\n"

ET_REL, ET_EXEC, ET_DYN = 1, 2, 3
EM_X86_64, EM_AARCH64 = 62, 183
EM_AMDGPU = 224  # an AMD GPU's HSA code object (e_flags & 0xff: its EF_AMDGPU_MACH)
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_NOBITS, SHT_DYNSYM = 1, 2, 3, 8, 11
SHF_ALLOC = 0x2
SHF_GNU_RETAIN = 0x200000
SHF_EXCLUDE = 0x80000000
SHN_UNDEF, SHN_ABS, SHN_COMMON = 0, 0xFFF1, 0xFFF2
STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 0, 1, 2, 10
STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE, STT_COMMON, STT_TLS = 0, 1, 2, 3, 4, 5, 6
STT_GNU_IFUNC = 10
STV_INTERNAL, STV_HIDDEN = 1, 2

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
SYMBOL_ENTRY = struct.Struct("<IBBHQQ")  # Elf64_Sym


class Section(NamedTuple):
    """One section header."""

    index: int  # type: ignore[assignment]  # the field, in place of tuple.index
    name: str
    sh_type: int
    sh_flags: int
    sh_addr: int
    sh_offset: int
    sh_size: int
    sh_link: int
    sh_addralign: int


class Symbol(NamedTuple):
    """One symbol table entry."""

    name: str
    st_value: int
    st_size: int
    st_bind: int
    st_type: int
    st_visibility: int
    st_shndx: int

    @property
    def defined(self) -> bool:
        return self.st_shndx != SHN_UNDEF

    @property
    def is_global(self) -> bool:
        return self.st_bind in (STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE)


class ElfFile:
    """An ELF64 little-endian file held in memory, read on demand."""

    def __init__(self, data: bytes | memoryview | mmap.mmap, name: str = "<buffer>"):
        self.name = name
        self.data = memoryview(data)
        if len(data) < 4 or bytes(self.data[:4]) != ELF_MAGIC:
            raise FormatError(f"{name}: not an ELF file")
        if len(data) < _EHDR.size:
            raise FormatError(f"{name}: truncated ELF header")
        ident = bytes(self.data[:16])
        if ident[4] != 2 or ident[5] != 1:
            raise FormatError(f"{name}: only little-endian ELF64 is supported "
                              f"(class {ident[4]}, data {ident[5]})")
        (_, self.e_type, self.e_machine, _, self.e_entry, _, self.e_shoff, self.e_flags, _, _, _,
         self.e_shentsize, self.e_shnum, self.e_shstrndx) = _EHDR.unpack_from(self.data, 0)
        self._sections: list[Section] | None = None
        self._symbols: dict[bool, list[Symbol]] = {}  # parsed once: callers must not change it

    @classmethod
    def open(cls, path: str | os.PathLike) -> ElfFile:
        """The file mapped, not read: only the pages of what is asked for (headers, the
        symbol table, one section) are ever read, so opening a linked binary to fill or verify
        its table costs the same at 200 MB as at 20 KB. The mapping goes with the object."""
        return cls(_mapped(path), os.fspath(path))

    @property
    def sections(self) -> list[Section]:
        if self._sections is None:
            self._sections = self._read_sections()
        return self._sections

    def _read_sections(self) -> list[Section]:
        shoff, shnum = self.e_shoff, self.e_shnum
        if shoff == 0:
            return []
        if self.e_shentsize != _SHDR.size:
            raise FormatError(f"{self.name}: unexpected section header size {self.e_shentsize}")
        if shnum == 0 and shoff + _SHDR.size <= len(self.data):  # more than 0xff00 sections
            shnum = _SHDR.unpack_from(self.data, shoff)[5]
        if shoff + shnum * _SHDR.size > len(self.data):
            raise FormatError(f"{self.name}: truncated (section headers past the end of file)")
        raw = [_SHDR.unpack_from(self.data, shoff + i * _SHDR.size) for i in range(shnum)]
        strndx = self.e_shstrndx
        if strndx == 0xFFFF and raw:
            strndx = raw[0][6]
        names = b""
        if strndx != 0:  # SHN_UNDEF: no section names
            if strndx >= shnum:
                raise FormatError(f"{self.name}: corrupt ELF (section name table index "
                                  f"{strndx}, but {shnum} sections)")
            s = raw[strndx]
            if s[1] != SHT_STRTAB:
                raise FormatError(f"{self.name}: corrupt ELF (section name table {strndx} is "
                                  f"not a string table)")
            names = self._bytes(s[4], s[5], "section names")
        out = []
        end = len(self.data)
        for i, (name, sh_type, flags, addr, off, size, link, _info, align, _ent) in enumerate(raw):
            if sh_type != SHT_NOBITS and size and off + size > end:
                state = "corrupt ELF" if self._headers_last(shnum) else "truncated"
                raise FormatError(f"{self.name}: {state} (section {i} past the end of file)")
            out.append(Section(i, _cstr(names, name), sh_type, flags, addr, off, size, link,
                               align))
        return out

    def _headers_last(self, shnum: int) -> bool:
        """Whether the file ends with its section headers, as assemblers and linkers write
        them: then what points past the end is damaged, the file not cut short."""
        return self.e_shoff + shnum * _SHDR.size == len(self.data)

    def _bytes(self, off: int, size: int, what: str) -> bytes:
        if off + size > len(self.data):
            state = "corrupt ELF" if self._headers_last(self.e_shnum) else "truncated"
            raise FormatError(f"{self.name}: {state} ({what} past the end of file)")
        return bytes(self.data[off : off + size])

    def section(self, name: str) -> Section | None:
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def content(self, section: Section) -> memoryview:
        if section.sh_type == SHT_NOBITS:
            return memoryview(b"")
        return self.data[section.sh_offset : section.sh_offset + section.sh_size]

    def symbols(self, dynamic: bool = False) -> list[Symbol]:
        """The symbol table (or the dynamic one), parsed on first use and shared by every
        later call (a link asks an object for it several times)."""
        found = self._symbols.get(dynamic)
        if found is None:
            found = self._symbols[dynamic] = self._read_symbols(dynamic)
        return found

    def _read_symbols(self, dynamic: bool) -> list[Symbol]:
        kind = SHT_DYNSYM if dynamic else SHT_SYMTAB
        table = next((s for s in self.sections if s.sh_type == kind), None)
        if table is None:
            return []
        if not 0 < table.sh_link < len(self.sections):
            raise FormatError(f"{self.name}: corrupt symbol table (bad string table link)")
        strtab = bytes(self.content(self.sections[table.sh_link]))
        raw = self.content(table)
        raw = raw[: len(raw) - len(raw) % SYMBOL_ENTRY.size]
        if strtab.isascii():
            # Decoded once, with a NUL at the end, so a name runs to the next NUL as _cstr
            # reads it.
            text = strtab.decode("ascii") + "\0"
            find = text.find
            return [Symbol(text[name : find("\0", name)], value, size, info >> 4, info & 0xF,
                           other & 3, shndx)
                    for name, info, other, shndx, value, size in SYMBOL_ENTRY.iter_unpack(raw)]
        return [Symbol(_cstr(strtab, name), value, size, info >> 4, info & 0xF, other & 3, shndx)
                for name, info, other, shndx, value, size in SYMBOL_ENTRY.iter_unpack(raw)]

    @property
    def is_lto_slim(self) -> bool:
        """A GCC LTO object without host code (`-flto` without `-ffat-lto-objects`)."""
        return any(s.name == "__gnu_lto_slim" for s in self.symbols())


_RELA = struct.Struct("<QQq")
SHT_RELA = 4
SHF_WRITE, SHF_INFO_LINK = 0x1, 0x40
# (R_*_RELATIVE, R_*_64) by e_machine: x86-64 and AArch64, the hosts offlink supports, and
# AMD GPU code objects (R_AMDGPU_RELATIVE64, R_AMDGPU_ABS64), whose tables inspect reads.
_DYNAMIC_RELOCS = {62: (8, 1), 183: (1027, 257), 224: (13, 3)}


def rela_entries(elf: ElfFile, rela: Section) -> Iterator[tuple[int, int, int]]:
    """(r_offset, r_info, r_addend) of every Elf64_Rela of a relocation section."""
    raw = bytes(elf.content(rela))
    return _RELA.iter_unpack(raw[: len(raw) - len(raw) % _RELA.size])


def loaded_words(elf: ElfFile, section: Section, step: int) -> dict[int, int]:
    """Offset -> the 8-byte word at every `step` bytes of a loaded section of a linked
    executable or shared library, as the loader leaves it: with the dynamic relocations of a
    PIE or DSO applied (R_*_RELATIVE, and R_*_64 against a defined dynamic symbol)."""
    content = bytes(elf.content(section))
    words = {off: struct.unpack_from("<Q", content, off)[0]
             for off in range(0, len(content) - len(content) % step, step)}
    relative, absolute = _DYNAMIC_RELOCS.get(elf.e_machine, (None, None))
    dynsym = None
    for rela in elf.sections:
        if rela.sh_type != SHT_RELA or not rela.sh_flags & SHF_ALLOC:
            continue
        for r_offset, r_info, r_addend in rela_entries(elf, rela):
            off = r_offset - section.sh_addr
            if off not in words:
                continue
            if r_info & 0xFFFFFFFF == relative:
                words[off] = r_addend
            elif r_info & 0xFFFFFFFF == absolute:
                dynsym = dynsym if dynsym is not None else elf.symbols(dynamic=True)
                index = r_info >> 32
                target = dynsym[index] if index < len(dynsym) else None
                words[off] = (target.st_value if target and target.defined else 0) + r_addend
    return words


def _cstr(table: bytes, off: int) -> str:
    end = table.find(b"\0", off)
    return table[off : end if end >= 0 else len(table)].decode("utf-8", "replace")


class Member(NamedTuple):
    """One member of an `ar` archive."""

    name: str
    offset: int  # of the member's data in the archive file
    data: bytes | memoryview


def _mapped(path: str | os.PathLike) -> bytes | mmap.mmap:
    """A file's bytes, mapped (read where it cannot be mapped)."""
    try:
        with open(path, "rb") as f:
            try:
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:  # an empty file
                return b""
            except OSError:  # not mappable (a pipe, some file systems): read it
                return f.read()
    except OSError as e:
        raise FormatError(f"{os.fspath(path)}: {e.strerror}") from None


def elf_files(path: str | os.PathLike) -> list[tuple[str, ElfFile]]:
    """The ELF files in `path`, mapped: ("", the file itself), or (member name, member) for
    each ELF member of an archive (named `path(member)`), in archive order."""
    data = memoryview(_mapped(path))
    name = os.fspath(path)
    if is_archive(data):
        return [(m.name, ElfFile(m.data, f"{name}({m.name})"))
                for m in archive_members(data, name) if bytes(m.data[:4]) == ELF_MAGIC]
    return [("", ElfFile(data, name))]


def elf_type(head: bytes) -> int | None:
    """e_type (ET_REL, ET_EXEC, ET_DYN) of an ELF file from its first 18 bytes, in the file's
    byte order as LLVM's identify_magic reads it; None for anything shorter or not ELF."""
    if len(head) < 18 or head[:4] != ELF_MAGIC:
        return None
    return int.from_bytes(head[16:18], "little" if head[5] == 1 else "big")


def is_relocatable(head: bytes) -> bool:
    """Whether the first 18 bytes of a file are those of a relocatable ELF64 little-endian
    object (what ElfFile reads and the link's extract looks in)."""
    return head[:4] == ELF_MAGIC and head[4:6] == b"\x02\x01" and head[16:18] == b"\x01\x00"


def first_load_vaddr(elf: ElfFile) -> int:
    """The page of the first PT_LOAD segment's address (0 when the file has none): where a
    module's link addresses start."""
    (e_phoff,) = struct.unpack_from("<Q", elf.data, 32)
    e_phentsize, e_phnum = struct.unpack_from("<HH", elf.data, 54)
    for i in range(e_phnum):
        off = e_phoff + i * e_phentsize
        if off + 56 > len(elf.data):
            break
        p_type, _flags, _offset, p_vaddr = struct.unpack_from("<IIQQ", elf.data, off)
        if p_type == 1:  # PT_LOAD
            return p_vaddr & ~0xFFF
    return 0


def is_archive(data: bytes | memoryview) -> bool:
    return bytes(data[:8]) in (AR_MAGIC, THIN_AR_MAGIC)


def archive_members(data: bytes | memoryview, path: str) -> Iterator[Member]:
    """Members of a regular or thin archive (thin members are read from disk)."""
    data = memoryview(data)
    thin = bytes(data[:8]) == THIN_AR_MAGIC
    pos = 8
    longnames = b""
    while pos + 60 <= len(data):
        header = bytes(data[pos : pos + 60])
        if header[58:60] != b"`\n":
            raise FormatError(f"{path}: corrupt archive member header at offset {pos}")
        raw_name = header[:16].decode("ascii", "replace").rstrip()
        try:
            size = int(header[48:58].decode().strip())
        except ValueError:
            raise FormatError(f"{path}: corrupt archive member size at offset {pos}") from None
        start = pos + 60
        if raw_name in ("/", "/SYM64/"):
            pass
        elif raw_name == "//":
            longnames = bytes(data[start : start + size])
        else:
            if raw_name.startswith("/") and raw_name[1:].isdigit():
                off = int(raw_name[1:])
                end = longnames.find(b"/\n", off)
                name = longnames[off:end].decode()
            else:
                name = raw_name.rstrip("/")
            if thin:
                member_path = os.path.join(os.path.dirname(path), name)
                try:
                    with open(member_path, "rb") as f:
                        yield Member(name, 0, f.read())
                except OSError as e:
                    raise FormatError(f"{path}: thin member {name}: {e.strerror}") from None
                pos = start
                continue
            if start + size > len(data):
                raise FormatError(f"{path}: truncated archive member {name}")
            yield Member(name, start, data[start : start + size])
        pos = start + size + (size & 1)


class DataTable(NamedTuple):
    """One global, hidden array of a `data_object`: its bytes, and the 8-byte words in them
    that point into the object's strings (offset in `content` -> offset in the strings)."""

    symbol: str
    content: bytes
    pointers: tuple[tuple[int, int], ...] = ()


def data_object(e_machine: int, strings: bytes, tables: list[DataTable]) -> bytes:
    """A relocatable ELF64 LE object (deterministic for the same inputs): `strings` in a
    read-only section, and each table, 8-byte aligned, in `.data.rel.ro` (its pointers are
    relocated: R_X86_64_64 / R_AARCH64_ABS64 against the strings' section, which the linker
    turns into R_*_RELATIVE in a PIE or shared library), under its hidden global symbol."""
    absolute = _DYNAMIC_RELOCS[e_machine][1]
    data = bytearray()
    rela = bytearray()
    # null, the strings' section (relocations' target: symbol 1), then one global per table
    symtab = bytearray(SYMBOL_ENTRY.size) + SYMBOL_ENTRY.pack(
        0, (STB_LOCAL << 4) | STT_SECTION, 0, 1, 0, 0)
    strtab = bytearray(b"\0")
    for t in tables:
        at = (len(data) + 7) // 8 * 8
        data += bytes(at - len(data)) + t.content
        for off, target in t.pointers:
            rela += _RELA.pack(at + off, (1 << 32) | absolute, target)
        symtab += SYMBOL_ENTRY.pack(len(strtab), (STB_GLOBAL << 4) | STT_OBJECT, STV_HIDDEN, 2, at,
                            len(t.content))
        strtab += t.symbol.encode() + b"\0"
    # Sections 1-7; info: the symbol table's first global symbol
    return bytes(relocatable(e_machine, [
        OutSection(".rodata.offlink", strings, SHT_PROGBITS, SHF_ALLOC),
        OutSection(".data.rel.ro.offlink", data, SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, align=8),
        OutSection(".rela.data.rel.ro.offlink", rela, SHT_RELA, SHF_INFO_LINK, link=5, info=2,
                align=8, entsize=_RELA.size),
        OutSection(".note.GNU-stack", b"", SHT_PROGBITS),
        OutSection(".symtab", symtab, SHT_SYMTAB, link=6, info=2, align=8,
                   entsize=SYMBOL_ENTRY.size),
        OutSection(".strtab", strtab, SHT_STRTAB),
        OutSection(".shstrtab", b"", SHT_STRTAB),
    ])[0])


class OutSection(NamedTuple):
    """A section of a `relocatable` object: its content, or its size where the caller writes
    the content into the object afterwards (zeros until then)."""

    name: str
    content: bytes | bytearray | int
    kind: int
    flags: int = 0
    link: int = 0
    info: int = 0
    align: int = 1
    entsize: int = 0


def relocatable(e_machine: int, sections: list[OutSection], osabi: int = 0
                ) -> tuple[bytearray, list[int]]:
    """An ELF64 little-endian relocatable object (ET_REL) of `sections`, numbered from 1 in
    their order, each placed after the one before at its alignment, the section headers last;
    the section named `.shstrtab` is given the sections' names. Returns the object and each
    section's offset in it (deterministic for the same inputs)."""
    names = b"\0" + b"".join(sec.name.encode() + b"\0" for sec in sections)
    body = bytearray(64)
    headers = bytearray(_SHDR.size)
    offsets = []
    for sec in sections:
        content = names if sec.name == ".shstrtab" else sec.content
        size = content if isinstance(content, int) else len(content)
        body += bytes(-len(body) % sec.align)
        offsets.append(len(body))
        headers += _SHDR.pack(names.index(b"\0" + sec.name.encode() + b"\0") + 1, sec.kind,
                              sec.flags, 0, len(body), size, sec.link, sec.info, sec.align,
                              sec.entsize)
        body += bytes(content) if isinstance(content, int) else content
    body += bytes(-len(body) % 8)
    shoff = len(body)
    ident = ELF_MAGIC + bytes([2, 1, 1, osabi]) + bytes(8)
    index = next(i for i, sec in enumerate(sections, 1) if sec.name == ".shstrtab")
    body[:64] = _EHDR.pack(ident, ET_REL, e_machine, 1, 0, 0, shoff, 0, 64, 0, 0, _SHDR.size,
                           len(sections) + 1, index)
    body += headers
    return body, offsets
