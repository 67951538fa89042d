"""GCC's own offload objects (`gcc -fopenmp -foffload=nvptx-none -c`): reading the dialect.

Such an object carries its device code as GIMPLE in `.gnu.offload_lto_*` sections and two host
tables without names: `.gnu.offload_funcs` (the address of every outlined target region) and
`.gnu.offload_vars` (address and size of every `declare target` variable; bit 63 of the size
marks `declare target link`). The names exist only on the device side, as the accel
compiler's `//:FUNC_MAP "..."` and `//:VAR_MAP "..."` lines. GCC pairs the two by position over
the whole program; offlink pairs them one CU at a time, by name (the host symbol each table
slot's relocation names, spelled as PTX spells it), and keys the table by name. Everything
here is plain data in, plain data out. (GCC's host tables carry addresses only, no names: names
exist only on the device side, in those PTX lines, with `.` spelled `$`.)
"""

from __future__ import annotations

import functools
import os
import re
import struct
import zlib
from typing import NamedTuple

from ... import run as runner
from ...elf import (
    STB_GLOBAL,
    STB_LOCAL,
    STT_FILE,
    STT_FUNC,
    STT_SECTION,
    ElfFile,
    Symbol,
    loaded_words,
    rela_entries,
)
from ...errors import FormatError, LinkError
from ...formats.payload import Payload
from ...model import CU
from .link_words import CONFIGURED, GCN, OffloadWords, check_buildable, read_words, wanted

TARGET = "nvptx-none"  # the target of its CUs (toolchains/gcc/nvptx.py)
RUNTIME = "libgomp"  # what its host code calls (GOMP_target_ext, ...)
MADE_BY = "a GCC offload object (gcc -foffload)"
WHOLE_OBJECT = True  # one CU per object, read once for all its sections (object_cus)
OPTS_SECTION = ".gnu.offload_lto_.opts"
FUNCS_SECTION = ".gnu.offload_funcs"
VARS_SECTION = ".gnu.offload_vars"
IND_FUNCS_SECTION = ".gnu.offload_ind_funcs"  # GCC 14+: `declare target indirect` functions
INDIRECT = "indirect-function"  # the kind of their slots and table rows
LINK_FLAG = 1 << 63  # in a .gnu.offload_vars size: `declare target link`

# Options of the host compile that reach the accel compiler (as lto-wrapper's
# append_compiler_options passes them; host machine options are never in `.opts`).
_PASSED = ("-fPIC", "-fpic", "-fPIE", "-fpie", "-fno-PIC", "-fno-pic", "-fno-PIE", "-fno-pie",
           "-fcommon", "-fno-common", "-fgnu-tm", "-fopenmp", "-fopenacc", "-fno-openacc",
           "-fno-openmp", "-fshow-column")
_PASSED_PREFIXES = ("-fopenacc-dim=", "-foffload-abi=", "-foffload-abi-host-opts=",
                    "-fcf-protection", "-fdiagnostics-", "-O", "-g")
_OPT_QUOTED = re.compile(r"'((?:[^']|'\\'')*)'")
# Each match starts with the newline before its line (the text gets one in front): a literal
# first lets the regex engine jump from line to line, 3-4x faster than `^` with re.M over an
# image of ~1 MB (libgomp's PTX included); _MAP_LINE and _FUNC_DIMS ~7x over the image of
# 300 CUs (benchmarks/gcc_offload/RESULTS.md).
_MAP_LINE = re.compile(r'\n//:(FUNC_MAP|VAR_MAP|IND_FUNC_MAP) "([^"]*)"')
_FUNC_DIMS = re.compile(rb'\n//:FUNC_MAP "([^"]*)"((?:[ \t]*,[ \t]*(?:0x[0-9a-fA-F]+|\d+))*)'
                        rb'[ \t]*$', re.M)
# External functions count by their definition's comment (`declare target indirect` ones are
# table rows, GCC 14+).
_PTX_DEF = re.compile(r"\n\s*(?:\.visible\s+|\.weak\s+)?(?:\.entry\s+([\w$]+)|"
                      r"\.(?:global|const)\s+(?:\.align\s+\d+\s+)?\.\w+\s+([\w$]+))"
                      r"|\n// BEGIN GLOBAL FUNCTION DEF: ([\w$]+)")


# Named tuples: made per slot of every CU on every link.
class HostEntry(NamedTuple):
    """One slot of a CU's host table, with the host symbol its relocation names."""

    kind: str  # "function", "variable" or INDIRECT
    host_name: str
    size: int  # 1 for functions; the object's size for variables (link flag removed)
    link: bool  # `declare target link`
    local: bool  # the host symbol is static (STB_LOCAL)
    strong: bool  # STB_GLOBAL (a weak or unique definition may come from many CUs)


class Entry(NamedTuple):
    """A host table slot paired with its device name, and the key the table uses for it."""

    host: HostEntry
    device_name: str  # as the accel compiler wrote it (FUNC_MAP / VAR_MAP)
    key: str  # the device name, qualified by CU for statics (the device is renamed to match)

    @property
    def kind(self) -> str:
        return "link-variable" if self.host.link else self.host.kind


class GccCU(CU):
    """A GCC offload object's CU, with what its host side says (read once, at extract): the
    host table entries in table order and the external functions it defines."""

    __slots__ = ("host_entries", "global_functions", "tag", "fat_lto")
    host_entries: tuple[HostEntry, ...] | None  # None: unreadable, reported when used
    global_functions: frozenset[str]
    tag: str  # cu_tag of its object ("": made from the code when asked)
    fat_lto: bool  # -ffat-lto-objects: the host code is there twice, as code and as GIMPLE

    def __init__(self, origin: str, payload, host_entries: tuple[HostEntry, ...] | None = None,
                 global_functions: frozenset[str] = frozenset(), tag: str = "",
                 fat_lto: bool = False):
        super().__init__(origin, payload)
        _set(self, "host_entries", host_entries)
        _set(self, "global_functions", global_functions)
        _set(self, "tag", tag)
        _set(self, "fat_lto", fat_lto)


_set = object.__setattr__


# -- the host object -------------------------------------------------------------------------

def host_tables(elf: ElfFile) -> list[HostEntry]:
    """The CU's `.gnu.offload_funcs`, `.gnu.offload_vars` then (GCC 14+)
    `.gnu.offload_ind_funcs` entries, in table order."""
    symbols = elf.symbols()
    out = []
    for name, step in ((FUNCS_SECTION, 8), (VARS_SECTION, 16), (IND_FUNCS_SECTION, 8)):
        section = elf.section(name)
        if section is None or section.sh_size == 0:
            continue
        if section.sh_size % step:
            raise FormatError(f"{elf.name}: {name} is {section.sh_size} bytes, not a multiple "
                              f"of {step}")
        content = bytes(elf.content(section))
        targets = _relocations(elf, name, symbols)
        for off in range(0, section.sh_size, step):
            sym = targets.get(off)
            if sym is None:
                raise FormatError(f"{elf.name}: {name} entry {off // step} has no relocation")
            if step == 8:
                out.append(HostEntry("function" if name == FUNCS_SECTION else INDIRECT,
                                     sym.name, 1, False, sym.st_bind == STB_LOCAL,
                                     sym.st_bind == STB_GLOBAL))
            else:
                (raw,) = struct.unpack_from("<Q", content, off + 8)
                out.append(HostEntry("variable", sym.name, raw & ~LINK_FLAG,
                                     bool(raw & LINK_FLAG), sym.st_bind == STB_LOCAL,
                                     sym.st_bind == STB_GLOBAL))
    return out


def _relocations(elf: ElfFile, name: str, symbols: list[Symbol]) -> dict[int, Symbol]:
    """Slot offset -> the symbol its relocation points at (a section symbol plus an addend,
    as GCC writes for statics and outlined regions, becomes the symbol at that place)."""
    rela = elf.section(".rela" + name)
    if rela is None:
        return {}
    out = {}
    for r_offset, r_info, r_addend in rela_entries(elf, rela):
        index = r_info >> 32
        if index >= len(symbols):
            raise FormatError(f"{elf.name}: .rela{name}: bad symbol index {index}")
        sym = symbols[index]
        if sym.st_type == STT_SECTION or r_addend:
            place = (sym.st_value if sym.st_type != STT_SECTION else 0) + r_addend
            found = [s for s in symbols if s.st_shndx == sym.st_shndx and s.st_value == place
                     and s.name and s.st_type != STT_SECTION]
            if not found:
                raise FormatError(f"{elf.name}: .rela{name}: no symbol at section "
                                  f"{sym.st_shndx} offset {place:#x}")
            # prefer the sized function/object symbol over labels at the same place
            sym = max(found, key=lambda s: (s.st_size > 0, s.st_bind != STB_LOCAL))
        out[r_offset] = sym
    return out


def compile_options(elf: ElfFile) -> tuple[list[str], list[str]]:
    """(options of the host compile the accel compiler needs, its -foffload-options values)
    from the CU's `.gnu.offload_lto_.opts` section."""
    section = elf.section(OPTS_SECTION)
    if section is None:
        raise FormatError(f"{elf.name}: GCC offload object without {OPTS_SECTION}")
    passed, offload = _options_of(bytes(elf.content(section)))
    return list(passed), list(offload)


@functools.lru_cache(maxsize=64)
def _options_of(opts: bytes) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """compile_options of one `.opts` section's bytes: the CUs of a program compiled with the
    same flags have the same section, read once per link, not once per CU."""
    passed: list[str] = []
    offload: list[str] = []
    for chunk in opts.split(b"\0"):
        text = chunk.decode("utf-8", "replace")
        for m in _OPT_QUOTED.finditer(text):
            opt = m.group(1).replace("'\\''", "'")
            if opt.startswith("-foffload-options="):
                offload.append(opt[len("-foffload-options="):])
            elif opt in _PASSED or opt.startswith(_PASSED_PREFIXES):
                if opt not in passed or opt.startswith(("-O", "-g")):
                    passed.append(opt)
    return tuple(passed), tuple(offload)


_LINK_WORDS: tuple[list[str], OffloadWords] | None = None  # (link_args, their read_words)


def _link_words(link_args: list[str]) -> OffloadWords:
    """read_words of the link line, found once per link (extract passes the same list for
    every object), not once per CU: a line of N objects has N words, so once per CU is N²."""
    global _LINK_WORDS
    known = _LINK_WORDS
    # Equal, not the same list: the dialects' cus_of passes each object a copy of the line
    # (comparing N words that are the same objects is C-speed; the scan is N startswith).
    if known is None or known[0] != link_args:
        known = (link_args, read_words(link_args))
        _LINK_WORDS = known
    return known[1]


def _link_offload_options(link_args: list[str]) -> list[str]:
    """The link line's -foffload-options values (-foffload=-lm and -foffload=T=-lm too, as
    GCC 12: read_words)."""
    return list(_link_words(link_args).options)


def is_openacc(options) -> bool:
    """Whether a CU's options (its `.opts`: `-fno-openmp ... -fopenacc` for OpenACC,
    `-fno-openacc ... -fopenmp` for OpenMP) make it an OpenACC CU: the last of -fopenacc and
    -fno-openacc."""
    acc = False
    for o in options:
        if o in ("-fopenacc", "-fno-openacc"):
            acc = o == "-fopenacc"
    return acc


def offload_options(values: list[str], target: str) -> list[str]:
    """The words of -foffload-options values that apply to `target` (GCC's syntax: `OPTS` for
    every target, `TARGET[,TARGET...]=OPTS` for some)."""
    out: list[str] = []
    for value in values:
        head, sep, rest = value.partition("=")
        if sep and not head.startswith("-"):
            if target not in head.split(","):
                continue
            value = rest
        out.extend(value.split())
    return out


def gcc_major(elf: ElfFile) -> str | None:
    """The GCC major version that wrote the object (its `.comment`), e.g. "12"."""
    section = elf.section(".comment")
    return None if section is None else _major_of(bytes(elf.content(section)))


@functools.lru_cache(maxsize=64)
def _major_of(comment: bytes) -> str | None:
    """gcc_major of one `.comment` section's bytes (the same in most CUs of a program)."""
    for text in comment.split(b"\0"):
        m = re.match(rb"GCC: \(.*\) (\d+)\.", text)
        if m:
            return m.group(1).decode()
    return None


# The GCC releases whose offload objects offlink links, each with its libgomp registration
# (gomp.py, LAYOUTS), each checked against its own link (tests/test_gcc_later.py).
RELEASES = (12, 13, 14, 15, 16)
_LTO_SECTION = OPTS_SECTION[:-len("opts")] + "lto."  # `.gnu.offload_lto_.lto.<id>`


def lto_version(elf: ElfFile) -> tuple[int, int] | None:
    """(major, minor) of the object's offload LTO bytecode: the first two 16-bit words of its
    `.gnu.offload_lto_.lto.<id>` section, GCC's `struct lto_section`, which lto1 checks
    against its own (lto_check_version: the same major and minor, or a fatal error; GCC 10+
    writes its own major there)."""
    for s in elf.sections:
        if s.name.startswith(_LTO_SECTION) and s.sh_size >= 4:
            major, minor = struct.unpack_from("<HH", bytes(elf.content(s)), 0)
            return major, minor
    return None


def check_version(elf: ElfFile, origin: str) -> str | None:
    """The GCC release that wrote the object (its LTO bytecode's major: lto1 reads one
    major's bytecode only), or None where the object does not say; a release offlink does
    not link is refused in one line naming it and those it links (each release registers
    with libgomp in its own layout: GCC 13's GOMP_VERSION 2 is not GCC 14's 3, and a layout
    offlink has not seen is never guessed)."""
    version = lto_version(elf)
    if version is None:
        return gcc_major(elf)
    if version[0] in RELEASES:
        return str(version[0])
    made = gcc_major(elf) or str(version[0])
    known = ", ".join(map(str, RELEASES))
    raise LinkError(f"{origin}: a GCC {made} offload object (LTO bytecode {version[0]}."
                    f"{version[1]}); offlink links those of GCC {known}: compile it with "
                    f"one of them, or link it with GCC {made}'s own link")


def release_of(cu) -> str | None:
    """The GCC release of a GCC CU: its accel compiler's suffix (`...-gcc-14`)."""
    last = cu.payload.compiler.rsplit("-", 1)[-1]
    return last if last.isdigit() else None


def check_one_release(cus: list) -> str | None:
    """The one GCC release of a link's GCC CUs; CUs of two releases are refused in one line
    naming both (GCC's own link of them fails in lto1: "bytecode stream ... version")."""
    first: dict[str | None, object] = {}
    for cu in cus:
        first.setdefault(release_of(cu), cu)
    if len(first) > 1:
        (r1, a), (r2, b) = list(first.items())[:2]
        raise LinkError(f"{a.label} is a GCC {r1} offload object and {b.label} a GCC {r2} "
                        f"one: one link takes one GCC release's objects (lto1 reads its own "
                        f"bytecode only, libgomp one registration layout); compile them all "
                        f"with one GCC")
    return next(iter(first), None)


def source_name(elf: ElfFile, fallback: str) -> str:
    """The CU's source file as its STT_FILE symbol names it."""
    for s in elf.symbols():
        if s.st_type == STT_FILE and s.name:
            return s.name
    return fallback


def accel_compiler(major: str | None, target: str = TARGET) -> str:
    """GCC's accel compiler for `target` matching the GCC that wrote the objects."""
    return _accel_compiler(major, os.environ.get("PATH", ""), target)


@functools.lru_cache(maxsize=16)
def _accel_compiler(major: str | None, path: str, target: str = TARGET) -> str:
    """One PATH search per GCC version (and PATH), not one per CU."""
    machine = os.uname().machine
    names = [f"{machine}-linux-gnu-accel-{target}-gcc"]
    if major:
        names.insert(0, f"{names[0]}-{major}")

    return next((n for n in names if runner.which(n)), names[0])


def object_cus(elf: ElfFile, origin: str, link_args: list[str], lto: bool = False) -> list[CU]:
    """The object's nvptx-none CU, and its amdgcn-amdhsa CU where the link would build an
    amdgcn-amdhsa image (the link words name it, or none do and its accel compiler is
    installed): one CU per target, from the same object (`select` keeps those the link
    builds)."""
    cu = gcc_cu(elf, origin, link_args, lto)
    major = release_of(cu)
    if GCN in wanted(_link_words(link_args), major):
        passed, offload = compile_options(elf)
        options = tuple(passed + offload_options(offload + _link_offload_options(link_args),
                                                 GCN))
        p = cu.payload
        payload = type(p)(GCN, p.code_kind, p.source, accel_compiler(major, GCN), options, p.code)
        return [cu, GccCU(origin, payload, cu.host_entries, cu.global_functions, cu.tag,
                          cu.fat_lto)]
    return [cu]


def gcc_cu(elf: ElfFile, origin: str, link_args: list[str], lto: bool = False) -> GccCU:
    """The CU record of a GCC offload object: the object itself is the target code, the
    options are its host compile's plus every -foffload-options value for nvptx-none (the
    object's own, then the link line's, so the link line wins). Its host tables are read
    here too, from the object extract has open (whose symbol table is parsed once for all)."""
    fat_lto = any(s.name.startswith(".gnu.lto_") for s in elf.sections)
    if fat_lto and (elf.is_lto_slim or lto):
        raise LinkError(f"{origin}: a GCC offload object in a host -flto link: GCC writes its "
                        f"host tables only during that link, and offlink reads them from the "
                        f"objects (compile with -fno-lto, or with -ffat-lto-objects and link "
                        f"without -flto)")
    release = check_version(elf, origin)
    passed, offload = compile_options(elf)
    options = tuple(passed + offload_options(offload + _link_offload_options(link_args), TARGET))
    source = source_name(elf, origin)
    code = stable_code(elf)
    payload = Payload(TARGET, "object", source, accel_compiler(release), options, code)
    try:
        entries: tuple[HostEntry, ...] | None = tuple(host_tables(elf))
    except FormatError:  # the link reports it where it needs the tables; inspect does not
        entries = None
    return GccCU(origin, payload, entries, frozenset(global_functions(elf)),
                 cu_tag(source, code), fat_lto)


# An LTO section's name ends in its unit's id, `.<hex>`: random on every compile unless
# -frandom-seed is given (lto-section-out.cc, lto_get_section_name), and the only bytes by
# which two compiles of one source differ.
_LTO_NAME_ID = re.compile(rb"(\.gnu\.(?:offload_)?lto_.*?\.)([0-9a-f]+)", re.S)


def stable_code(elf: ElfFile) -> bytes:
    """The object with its LTO sections' random unit ids renumbered in order of first
    appearance (0x1000000000000000, 0x1000000000000001, ...: lto1 finds `.lto.<id>` by the
    id's spelling without leading zeros), laid out again: each section's bytes in order,
    aligned, then the section names, then the headers. An id is 1 to 16 hex digits, so
    the names' length differs between compiles and every offset after them with it; laid out
    again, an unchanged source compiled again is the same code, so its CU cache key and its
    statics' tag (cu_tag) are too. A relocatable object locates nothing by file offset but
    through its section headers, so the accel compiler reads this copy as the original.
    Anything but a relocatable object with 64-byte section headers comes back as it is."""
    data = bytes(elf.data)
    sections = elf.sections
    if elf.e_type != 1 or elf.e_shentsize != 64 or not 0 < elf.e_shstrndx < len(sections):
        return data
    ids: dict[bytes, bytes] = {}
    table = bytearray(b"\0")
    names = [0]
    for sec in sections[1:]:
        name = sec.name.encode("utf-8", "surrogateescape")
        m = _LTO_NAME_ID.fullmatch(name)
        if m:
            new = ids.setdefault(m.group(2), b"%x" % ((1 << 60) + len(ids)))
            name = m.group(1) + new
        names.append(len(table))
        table += name + b"\0"
    out = bytearray(data[:64])
    headers = []
    for sec in sections:
        header = bytearray(data[elf.e_shoff + sec.index * 64:elf.e_shoff + sec.index * 64 + 64])
        if sec.index:
            content = bytes(table) if sec.index == elf.e_shstrndx else \
                b"" if sec.sh_type == 8 else data[sec.sh_offset:sec.sh_offset + sec.sh_size]
            if sec.sh_type != 8 and sec.index != elf.e_shstrndx and len(content) != sec.sh_size:
                return data  # a section past the end of the file: as it is, for errors
            out += bytes(-len(out) % max(sec.sh_addralign, 1))
            struct.pack_into("<I", header, 0, names[sec.index])  # sh_name
            struct.pack_into("<Q", header, 0x18, len(out))  # sh_offset
            if sec.index == elf.e_shstrndx:
                struct.pack_into("<Q", header, 0x20, len(table))  # sh_size
            out += content
        headers.append(bytes(header))
    out += bytes(-len(out) % 8)
    struct.pack_into("<Q", out, 0x28, len(out))  # e_shoff
    return bytes(out) + b"".join(headers)


# -- a relink's record of its inputs (link/relink.py) ----------------------------------------

def relink_state(cu: CU) -> list | None:
    """What a GccCU holds besides its payload, as JSON values, for the relink's record; None
    for any other CU (its dialect's own)."""
    if not isinstance(cu, GccCU):
        return None
    hosts = None if cu.host_entries is None else [list(e) for e in cu.host_entries]
    return [hosts, sorted(cu.global_functions), cu.tag, cu.fat_lto]


def relink_cu(origin: str, payload, state: list) -> GccCU:
    """The GccCU `relink_state` recorded, with its payload (whose code is read again only
    where it is needed: link/relink.py)."""
    hosts, functions, tag = state[:3]
    entries = None if hosts is None else tuple(HostEntry(str(k), str(n), int(s), bool(li),
                                                         bool(lo), bool(st))
                                               for k, n, s, li, lo, st in hosts)
    return GccCU(origin, payload, entries, frozenset(map(str, functions)), str(tag),
                 bool(state[3]) if len(state) > 3 else False)


# -- pairing with the device side ------------------------------------------------------------

def device_maps(ptx: str) -> tuple[list[str], list[str], list[str]]:
    """The FUNC_MAP, VAR_MAP and IND_FUNC_MAP names of the accel compiler's output, in
    order."""
    found: dict[str, list[str]] = {"FUNC_MAP": [], "VAR_MAP": [], "IND_FUNC_MAP": []}
    for kind, name in _MAP_LINE.findall("\n" + ptx):
        found[kind].append(name)
    return found["FUNC_MAP"], found["VAR_MAP"], found["IND_FUNC_MAP"]


def func_dims(ptx: str | bytes) -> dict[str, tuple[int, ...]]:
    """The launch dimensions a FUNC_MAP line gives after the name (`, 0x1, 0x20, 0x20`; only
    OpenACC regions have them), by name. A whole image is searched as bytes (a link's
    registration: 1 ms for 300 CUs' 3.6 MB, against 3.4 ms decoded)."""
    if isinstance(ptx, str):
        ptx = ptx.encode("utf-8", "surrogateescape")
    out = {}
    for name, tail in _FUNC_DIMS.findall(b"\n" + ptx):
        out[name.decode("utf-8", "replace")] = tuple(
            int(d, 16) if d.startswith(b"0x") else int(d)
            for d in re.findall(rb"0x[0-9a-fA-F]+|\d+", tail))
    return out


def cu_tag(source: str, code: bytes) -> str:
    """What qualifies a CU's statics: its source's name and a hash of its object, spelled as
    a PTX identifier allows. From content, not paths, so a cached compile stays right when
    the same object is linked from elsewhere."""
    stem = re.sub(r"[^A-Za-z0-9_]", "_", source.rsplit("/", 1)[-1])
    return f"{stem}${zlib.crc32(code):08x}"


def device_name(host: HostEntry) -> str:
    """The name the accel compiler gives a host table entry: PTX has no `.` in names."""
    return host.host_name.replace(".", "$") + ("$linkptr" if host.link else "")


def pair(entries: list[HostEntry], ptx: str, tag: str, label: str,
         global_functions: set[str]) -> list[Entry]:
    """Host table slots with their device names, within this one CU, by name.

    Not by position: nvptx-as reorders a CU's definitions and their MAP lines with them, so
    the MAP lines of an accel compile's object are not always in host table order (GCC's own
    link pairs them by position all the same). The counts must agree and every entry must
    find its own name, but for statics the compiler made, whose numbers differ between the
    host and the target code: those left over are paired by position. A static (a static
    variable, or a region outlined from a function
    that is not external) could have a namesake in another CU: its key is qualified with
    `tag`. A region outlined from an external function is unique program-wide and keeps
    GCC's name.
    """
    funcs, variables, indirect = device_maps(ptx)
    unpaired = {"function": set(funcs), "variable": set(variables), INDIRECT: set(indirect)}
    for kind, what, dev, tag_line in (("function", "target regions", funcs, "FUNC_MAP"),
                                      ("variable", "variables", variables, "VAR_MAP"),
                                      (INDIRECT, "indirect functions", indirect,
                                       "IND_FUNC_MAP")):
        listed = [e for e in entries if e.kind == kind]
        if len(listed) != len(dev) or len(set(dev)) != len(dev):
            raise LinkError(f"{label}: the host table lists {len(listed)} {what} and the target "
                            f"code {len(dev)} {tag_line} names (is the accel compiler the "
                            f"same GCC version?)")
    out: list[Entry | None] = []
    missed: list[int] = []  # entries whose name the target code does not have
    for host in entries:
        if host.kind == INDIRECT and host.local:
            raise LinkError(f"{label}: static function '{host.host_name}' is `declare target "
                            f"indirect`: GCC's mkoffload refuses it (\"Cannot find function "
                            f"declaration for '{host.host_name}'\": the device code does not "
                            f"export it), and so does offlink; give it external linkage")
        qualify = host.local
        if host.kind == "function" and "._omp_fn." in host.host_name:
            qualify = host.host_name.split("._omp_fn.", 1)[0] not in global_functions
        expected = device_name(host)
        for name in (expected, "__nvptx_" + expected,
                     *sorted(n for n in unpaired[host.kind] if _nohost_of(n, expected))):
            key = f"{name}${tag}" if qualify else name
            found = name if name in unpaired[host.kind] else \
                key if key in unpaired[host.kind] else None  # already renamed to its key
            if found is not None:
                unpaired[host.kind].discard(found)
                out.append(Entry(host, name, key))
                break
        else:
            missed.append(len(out))
            out.append(None)
    # A variable the compiler made (gfortran's constant arrays `A.8.6`: the number is a
    # declaration's uid, counted apart on the host and in the offload stream, `A$6$20`) has
    # no namesake: such statics are paired by position among the CU's unpaired names of
    # their kind, as GCC's link pairs every entry, when nothing else is left unpaired.
    order = {"function": funcs, "variable": variables, INDIRECT: indirect}
    for kind in ("function", "variable"):
        mine = [i for i in missed if entries[i].kind == kind]
        rest = [n for n in order[kind] if n in unpaired[kind]]
        if mine and len(mine) == len(rest) and all(entries[i].local for i in mine):
            for i, found in zip(mine, rest):
                name = found[:-len(tag) - 1] if found.endswith("$" + tag) else found
                out[i] = Entry(entries[i], name, f"{name}${tag}")
    for i in missed:
        if out[i] is None:
            raise LinkError(f"{label}: host table entry '{entries[i].host_name}' has no "
                            f"'{device_name(entries[i])}' in the target code")
    return [e for e in out if e is not None]


def _nohost_of(name: str, expected: str) -> bool:
    """Whether device function `name` is host region `expected`'s host-only (reverse
    offload, `device (ancestor: 1)`) form: `main$_omp_fn$1$nohost$0`."""
    return name.startswith(expected + "$nohost") and (
        name == expected + "$nohost" or name[len(expected) + 7:].lstrip("$").isdigit())


def entries_of(hosts: tuple[HostEntry, ...], keys: list[str], tag: str) -> list[Entry] | None:
    """The paired entries again, from the host entries and the keys `pair` gave them (a
    compiled CU's offers, in host table order, also when they come from the cache): no PTX
    read. None when the keys are not what pairing these entries gives."""
    if len(hosts) != len(keys):
        return None
    out = []
    for host, key in zip(hosts, keys):
        name = key[: -len(tag) - 1] if key.endswith("$" + tag) else key
        expected = device_name(host)
        if name not in (expected, "__nvptx_" + expected) and not _nohost_of(name, expected):
            return None
        out.append(Entry(host, name, key))
    return out


def global_functions(elf: ElfFile) -> set[str]:
    return {s.name for s in elf.symbols()
            if s.defined and s.st_bind == STB_GLOBAL and s.st_type == STT_FUNC}


def rename(ptx: str, renames: dict[str, str]) -> str:
    """Rename PTX identifiers (definitions, uses and the MAP lines), whole tokens only."""
    if not renames:
        return ptx
    names = "|".join(re.escape(n) for n in sorted(renames, key=len, reverse=True))
    token = re.compile(rf"(?<![\w$%.])({names})(?![\w$.])")
    return token.sub(lambda m: renames[m.group(1)], ptx)


def ptx_definitions(image: bytes, after_nul: bool = False) -> set[str]:
    """Kernels and global variables an image (PTX text, files separated by NULs) defines.
    `after_nul`: the text is the rest of an image after a NUL, where a definition on its
    first line is not found (no match spans a NUL: the image's is the union of its parts')."""
    text = ("" if after_nul else "\n") + image.decode("utf-8", "replace")
    return {a or b or c for a, b, c in _PTX_DEF.findall(text)}


# -- the linked host binary -------------------------------------------------------------------

class Placed(NamedTuple):
    address: int
    size: int
    kind: str


def table_slots(elf: ElfFile, name: str, step: int) -> list[tuple[int, int]] | None:
    """(address, second word) of every slot of a host table in a linked binary, with the
    dynamic relocations of a PIE or shared library applied; None if the link dropped it."""
    section = elf.section(name)
    if section is None or not section.sh_addr:
        return None
    content = bytes(elf.content(section))
    values = loaded_words(elf, section, step)
    out = []
    for off in sorted(values):
        second = struct.unpack_from("<Q", content, off + 8)[0] if step == 16 else 0
        out.append((values[off], second))
    return out


def place(elf: ElfFile, cus: list[tuple[str, str, list[Entry]]]) -> dict[str, Placed]:
    """Host address of every entry of every CU (label, source, entries) in a linked binary,
    by key.

    The linked `.gnu.offload_funcs`/`.gnu.offload_vars` are the CUs' tables back to back in
    link order. Each CU's run of slots is found by checking that every slot's address holds
    the symbol its relocation named in the object (link order decides only between CUs that
    look the same). Where the link dropped the tables (-Wl,--gc-sections), entries are found
    by symbol name, a static by its CU's source file among the binary's local symbols; that
    must then be unambiguous. An entry the link discarded is left out.
    """
    tables = _tables(elf)
    at = _symbols_at(elf, {a for _, _, slots in tables for a, _ in slots})
    names: tuple[dict[str, set[int]], dict[tuple[str, str], set[int]]] | None = None
    out: dict[str, Placed] = {}
    for kind, name, slots in tables:
        matched, pending = _match_runs(cus, kind, slots, at)
        for pos, e in matched.items():
            out[e.key] = _placed(e, slots[pos][0])
        if pending and names is None:
            names = _symbols(elf)
        by_name, by_file = names or ({}, {})
        for label, source, entries in pending:
            for e in entries:
                found = by_name.get(e.host.host_name, set())
                if len(found) > 1 and e.host.local:
                    found = by_file.get((source, e.host.host_name), set())
                if len(found) == 1:
                    out[e.key] = _placed(e, next(iter(found)))
                elif len(found) > 1:
                    raise LinkError(f"{label}: the host binary has {len(found)} static "
                                    f"'{e.host.host_name}' of {source} and no {name} to tell "
                                    f"them apart (did -Wl,--gc-sections remove it?)")
    return out


def slot_keys(elf: ElfFile, cus: list[tuple[str, str, list[Entry]]]
              ) -> dict[str, list[str | None]]:
    """The key of every slot of the linked `.gnu.offload_funcs` ("function") and
    `.gnu.offload_vars` ("variable"), in table order: what libgomp pairs position by position
    with a registration's names. None for a slot offlink does not know."""
    tables = _tables(elf)
    at = _symbols_at(elf, {a for _, _, slots in tables for a, _ in slots})
    out: dict[str, list[str | None]] = {}
    for kind, _, slots in tables:
        matched = _match_runs(cus, kind, slots, at)[0]
        out[kind] = [matched[i].key if i in matched else None for i in range(len(slots))]
    return out


def _tables(elf: ElfFile) -> list[tuple[str, str, list[tuple[int, int]]]]:
    """(kind, section name, slots) of the linked binary's two host tables."""
    return [(kind, name, table_slots(elf, name, step) or [])
            for kind, name, step in (("function", FUNCS_SECTION, 8),
                                     ("variable", VARS_SECTION, 16),
                                     (INDIRECT, IND_FUNCS_SECTION, 8))]


def _symbols_at(elf: ElfFile, addresses: set[int]) -> dict[int, set[str]]:
    """address -> the names of the symbols defined there, for the table slots' addresses only
    (a program of 300 CUs has ~10k symbols; the slots' runs are checked against a few)."""
    at: dict[int, set[str]] = {}
    for s in elf.symbols():
        if s.st_value in addresses and s.defined and s.name and \
                s.st_type not in (STT_SECTION, STT_FILE):
            at.setdefault(s.st_value, set()).add(s.name)
    for s in elf.symbols(dynamic=True):
        if s.st_value in addresses and s.defined and s.name:
            at.setdefault(s.st_value, set()).add(s.name)
    return at


def _symbols(elf: ElfFile):
    """(name -> addresses, (STT_FILE, local name) -> addresses): for entries whose table the
    link dropped (-Wl,--gc-sections)."""
    by_name: dict[str, set[int]] = {}
    by_file: dict[tuple[str, str], set[int]] = {}  # (STT_FILE, name) of local symbols
    file = ""
    for s in elf.symbols():
        if s.st_type == STT_FILE:  # the local symbols after it are that CU's
            file = s.name
        if not s.defined or not s.name or s.st_type in (STT_SECTION, STT_FILE):
            continue
        by_name.setdefault(s.name, set()).add(s.st_value)
        if s.st_bind == STB_LOCAL:
            by_file.setdefault((file, s.name), set()).add(s.st_value)
    for s in elf.symbols(dynamic=True):
        if s.defined and s.name:
            by_name.setdefault(s.name, set()).add(s.st_value)
    return by_name, by_file


def _match_runs(cus: list[tuple[str, str, list[Entry]]], kind: str,
                slots: list[tuple[int, int]], at: dict[int, set[str]]):
    """(slot index -> entry for every CU's run of `kind` entries found in the slots, the
    CUs whose run was not found)."""
    runs = [(label, source, [e for e in entries if e.host.kind == kind])
            for label, source, entries in cus]
    pending = [r for r in runs if r[2]]
    matched: dict[int, Entry] = {}
    pos = 0
    while pending and pos < len(slots):
        match = next((r for r in pending if _fits(r[2], slots, pos, at)), None)
        if match is None:
            pos += 1  # a slot from an object offlink does not know: not ours
            continue
        pending.remove(match)
        for j, e in enumerate(match[2]):
            matched[pos + j] = e
        pos += len(match[2])
    return matched, pending


def _fits(entries: list[Entry], slots: list[tuple[int, int]], pos: int,
          at: dict[int, set[str]]) -> bool:
    if pos + len(entries) > len(slots):
        return False
    for e, (address, second) in zip(entries, slots[pos:]):
        if e.host.host_name not in at.get(address, ()):
            return False
        if e.host.kind == "variable" and second != e.host.size | (LINK_FLAG if e.host.link
                                                                    else 0):
            return False
    return True


def _placed(e: Entry, address: int) -> Placed:
    return Placed(address, e.host.size, e.kind)


def select(cus: list, args: list[str]) -> list:
    """The link's CUs less GCC's where GCC's link would build no image from them
    (`-foffload=disable`, or no accel compiler installed and no target named); an error for a
    target offlink cannot build. `args`: the link line's words (plan.base_args)."""
    ours = [cu for cu in cus if cu.payload.target in CONFIGURED]
    if not ours:
        return cus
    major = check_one_release(ours)
    words = read_words(args)
    targets = wanted(words, major)
    check_buildable(targets, words, major)
    return [cu for cu in cus if cu.payload.target not in CONFIGURED
            or cu.payload.target in targets]
