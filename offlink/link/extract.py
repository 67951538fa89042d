"""Stage 2, extract: the CUs with target code among the objects and archive members linked.

Archive members count only when the host link would pull them in; that is worked out here as
ld does it (members defining a symbol still undefined, repeated until nothing changes,
--whole-archive and --start-group honoured), from the members' symbol tables.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence

from ..elf import (
    ELF_MAGIC,
    SHN_UNDEF,
    STB_WEAK,
    THIN_AR_MAGIC,
    ElfFile,
    archive_members,
    is_archive,
    is_relocatable,
)
from ..errors import FormatError
from ..formats.bitcode import carries_offload, is_bitcode
from ..model import CU, Input, LinkPlan, find_library
from ..toolchains import dialects

OBJECT_SUFFIXES = (".o", ".obj", ".lo", ".a")


class _Obj:
    __slots__ = ("origin", "elf", "defined", "undefined")

    def __init__(self, origin: str, elf: ElfFile, defined: set[str], undefined: set[str]):
        self.origin = origin
        self.elf = elf
        self.defined = defined
        self.undefined = undefined


def _read(path: str) -> bytes | memoryview:
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return b""
            return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    except OSError as e:
        raise FormatError(f"{path}: {e.strerror}") from None


def cus_of(obj: ElfFile, origin: str, link_args: list[str], lto: bool = False) -> list[CU]:
    """The CUs with target code in one object, in whichever dialect it carries them (offlink's
    payload, GCC's or LLVM's offload object: offlink/toolchains/); the link options matter to
    GCC's."""
    return dialects.cus_of(obj, origin, link_args, lto)


def _symbols(elf: ElfFile) -> tuple[set[str], set[str]]:
    """Globals an object defines, and those it needs (strong references only)."""
    if elf.is_lto_slim:
        return _lto_symbols(elf)
    defined, undefined = set(), set()
    for s in elf.symbols():
        if not s.is_global or not s.name:
            continue
        if s.st_shndx == SHN_UNDEF:
            if s.st_bind != STB_WEAK:  # ld does not pull members for weak references
                undefined.add(s.name)
        else:
            defined.add(s.name)
    return defined, undefined


# GCC's LTO symbol table (.gnu.lto_.symtab.*), what its linker plugin reads: per symbol a
# name and a comdat group (NUL-terminated), a kind, a visibility, a u64 size, a u32 slot.
_LTO_DEF, _LTO_WEAKDEF, _LTO_UNDEF, _LTO_WEAKUNDEF, _LTO_COMMON = range(5)


def _lto_symbols(elf: ElfFile) -> tuple[set[str], set[str]]:
    """A slim -flto object's globals: its ELF symbol table has none, its LTO table has them."""
    defined, undefined = set(), set()
    for section in elf.sections:
        if not section.name.startswith(".gnu.lto_.symtab."):
            continue
        data = bytes(elf.content(section))
        pos = 0
        while pos < len(data):
            name_end = data.find(b"\0", pos)
            comdat_end = data.find(b"\0", name_end + 1) if name_end >= 0 else -1
            if comdat_end < 0 or comdat_end + 15 > len(data):
                raise FormatError(f"{elf.name}: corrupt LTO symbol table ({section.name})")
            name = data[pos:name_end].decode("utf-8", "replace")
            kind = data[comdat_end + 1]
            if kind == _LTO_UNDEF:
                undefined.add(name)
            elif kind in (_LTO_DEF, _LTO_WEAKDEF, _LTO_COMMON):
                defined.add(name)
            pos = comdat_end + 15  # kind, visibility, size, slot
    return defined, undefined


class _File:
    __slots__ = ("inp", "path", "archive", "objects", "index", "places", "thin")

    def __init__(self, inp: Input, path: str, archive: bool,
                 objects: list[tuple[str, ElfFile]],  # (origin, object): members, or the file
                 index: int = 0,  # in input_paths(plan)
                 places: tuple[int, ...] = (0,),  # each object's place among the members
                 thin: bool = False):  # a thin archive: its members are files of their own
        self.inp = inp
        self.path = path
        self.archive = archive
        self.objects = objects
        self.index = index
        self.places = places
        self.thin = thin


def input_paths(plan: LinkPlan) -> list[tuple[Input, str]]:
    """The files the extract stage reads, in link order: each file the link names, and each
    -l library found as a static archive in the user's -L folders (system and shared
    libraries carry no fat code)."""
    out = []
    for inp in plan.inputs:
        path = inp.path
        if inp.kind == "library":
            found = find_library(inp.path, plan, inp.static)
            if found is None or not found.endswith(".a"):
                continue
            path = found
        out.append((inp, path))
    return out


def _files(plan: LinkPlan) -> list[_File]:
    """The link's objects and archives in order, read as far as their section headers.

    Only relocatable ELF64 little-endian objects are kept: anything else carries no target
    code offlink reads (32-bit objects, shared libraries, scripts), and the linker judges it.
    """
    return [f for index, (inp, path) in enumerate(input_paths(plan))
            if (f := _file(index, inp, path)) is not None]


def _file(index: int, inp: Input, path: str) -> _File | None:
    """One file of `_files`, None for one that holds no object offlink reads."""
    data = _read(path)
    if is_archive(bytes(data[:8])):
        members = [(n, f"{path}({m.name})", e)
                   for n, m in enumerate(archive_members(data, path))
                   if (e := _object(m.data, f"{path}({m.name})"))]
        return _File(inp, path, True, [(o, e) for _, o, e in members], index,
                     tuple(n for n, _, _ in members), bytes(data[:8]) == THIN_AR_MAGIC)
    if bytes(data[:4]) != ELF_MAGIC:
        if is_bitcode(bytes(data[:4])):
            _check_bitcode(data, path)
            return None  # an LTO object with no target code: the linker's plugin reads it
        if path.endswith(OBJECT_SUFFIXES):
            raise FormatError(f"{path}: not an ELF object file")
        return None  # a linker script, a shared library stub, ...
    elf = _object(data, path)
    return _File(inp, path, False, [(path, elf)], index) if elf is not None else None


def object_at(path: str, place: int) -> tuple[str, ElfFile]:
    """The object `_files` finds at `place` of the file at `path` (origin, object): the
    archive member there, or the file itself (link/relink.py reads a CU's code again)."""
    data = _read(path)
    if not is_archive(bytes(data[:8])):
        return path, ElfFile(data, path)
    for n, m in enumerate(archive_members(data, path)):
        if n == place:
            return f"{path}({m.name})", ElfFile(m.data, f"{path}({m.name})")
    raise FormatError(f"{path}: member {place} is gone")


def _object(data, name: str) -> ElfFile | None:
    """A relocatable ELF64 LE object, or None for anything else (LLVM bitcode with no target
    code too: `_check_bitcode`)."""
    raw = bytes(data[:18])
    if is_bitcode(raw):
        _check_bitcode(data, name)
    if not is_relocatable(raw):
        return None
    return ElfFile(data, name)


def _check_bitcode(data, name: str) -> None:
    """Refuse a bitcode object that embeds target code: clang's host compile with -flto.
    offlink reads clang's offload objects as ELF; one without target code (a plain -flto
    object) is the host link's to read (its LTO plugin), as in any link."""
    if carries_offload(bytes(data), name):
        raise FormatError(f"{name}: LLVM bitcode with target code (clang's host compile with "
                          f"-flto): offlink reads clang's offload objects as ELF only; compile "
                          f"the host side without -flto (-foffload-lto keeps the device code's "
                          f"LTO)")


# Where a CU was read: (file: its index in input_paths, place: of the object in the file
# (`object_at`), the CU's position among those of that object (`cus_of`)).
Provenance = tuple[int, int, int]


# The dialects of each object a link uses that carries target code, by file (its index in
# input_paths, the object's origin, the dialect: toolchains/dialects.py), for check_runtimes.
Used = list[tuple[int, str, str]]


def extract(plan: LinkPlan, offload_options: Sequence[str] = ()) -> list[CU]:
    """All CUs with target code that the host link uses, in link order.

    `offload_options` (offlink link --offload-option) count as -foffload-options words of
    the link line, after the line's own."""
    return extract_from(plan, offload_options)[0]


def extract_from(plan: LinkPlan, offload_options: Sequence[str] = ()
                 ) -> tuple[list[CU], list[Provenance] | None, Used | None]:
    """`extract`, where each CU was read (None where a thin archive has some: its members
    are files of their own), and the dialects of the objects used, when each file's CUs are
    its own alone (no archive member was chosen by the others' symbols: `extract_files` can
    read one file again on its own), else None."""
    files = _files(plan)
    fat = {id(elf) for f in files for _, elf in f.objects if dialects.is_fat(elf)}
    if not fat:
        return [], [], []  # a plain link: no symbol table needs reading
    r = _Reader(plan, offload_options)
    thin = any(f.thin for f in files)

    if not any(f.archive and not f.inp.whole_archive and any(id(e) in fat for _, e in f.objects)
               for f in files):
        # No archive member to choose has target code: the CUs are those of every object
        # the link names (and of whole archives), in order; no symbol table needs reading.
        for f in files:
            for place, (origin, elf) in zip(f.places, f.objects):
                if id(elf) in fat:
                    r.read(f.index, place, origin, elf)
        found = r.dialects()
        # before any work: two offload runtimes cannot be linked
        dialects.check_dialects((origin, d) for _, origin, d in found)
        return r.cus, None if thin else r.where, found
    defined: set[str] = set()
    undefined: set[str] = set()
    pending: list[tuple[Input, str, list[_Obj]]] = []  # archives, for member selection
    files_of: dict[int, tuple[_File, int]] = {}

    def add(obj: _Obj) -> None:
        defined.update(obj.defined)
        undefined.update(obj.undefined)
        f, place = files_of[id(obj.elf)]
        r.read(f.index, place, obj.origin, obj.elf)

    for f in files:
        objs = [_Obj(origin, elf, *_symbols(elf)) for origin, elf in f.objects]
        files_of.update((id(elf), (f, place)) for place, (_, elf) in zip(f.places, f.objects))
        if not f.archive or f.inp.whole_archive:
            for obj in objs:
                add(obj)
        else:
            pending.append((f.inp, f.path, objs))
            _select(pending, defined, undefined, add)
    dialects.check_runtimes(r.used)  # before any work: two offload runtimes cannot be linked
    return r.cus, None if thin else r.where, None


class _Reader:
    """The CUs of the objects read, in the order read, where each was read, and the objects
    used that carry target code with the index of each one's file."""

    def __init__(self, plan: LinkPlan, offload_options: Sequence[str]):
        self.link_args = [*plan.base_args, *(f"-foffload-options={o}" for o in offload_options)]
        self.lto = plan.lto
        self.cus: list[CU] = []
        self.where: list[Provenance] = []
        self.used: list[tuple[str, ElfFile]] = []
        self.used_in: list[int] = []

    def read(self, index: int, place: int, origin: str, elf: ElfFile) -> None:
        found = cus_of(elf, origin, self.link_args, self.lto)
        if found:
            self.used.append((origin, elf))
            self.used_in.append(index)
        self.cus.extend(found)
        self.where.extend((index, place, k) for k in range(len(found)))

    def dialects(self) -> Used:
        """Each used object's dialects, with its file's index and its origin."""
        return [(index, origin, d) for index, (origin, elf) in zip(self.used_in, self.used)
                for d in dialects.dialects_in(elf)]


def extract_files(plan: LinkPlan, offload_options: Sequence[str], indices: set[int]
                  ) -> tuple[list[CU], list[Provenance], Used] | None:
    """The CUs of the files at `indices` of input_paths(plan) alone, with extract_from's
    provenance and dialects of them, as extract_from reads them where no archive member is
    chosen; None when one of them is a thin archive or an archive whose members would be
    chosen (not --whole-archive, with target code): then the whole link is read again. The
    runtimes are not checked here (the caller checks them with the other files')."""
    r = _Reader(plan, offload_options)
    for index, (inp, path) in enumerate(input_paths(plan)):
        if index not in indices:
            continue
        f = _file(index, inp, path)
        if f is None:
            continue
        fat = [(place, origin, elf) for place, (origin, elf) in zip(f.places, f.objects)
               if dialects.is_fat(elf)]
        if f.thin or (fat and f.archive and not f.inp.whole_archive):
            return None
        for place, origin, elf in fat:
            r.read(index, place, origin, elf)
    return r.cus, r.where, r.dialects()


def _select(pending, defined: set[str], undefined: set[str], add) -> None:
    """Pull members of the newest archive (and of its whole group) that resolve a symbol."""
    inp = pending[-1][0]
    scope = [p for p in pending if inp.group and p[0].group == inp.group] or [pending[-1]]
    changed = True
    while changed:
        changed = False
        for _inp, _path, members in scope:
            for obj in list(members):
                if obj.defined & (undefined - defined):
                    members.remove(obj)
                    add(obj)
                    changed = True
