"""`offlink inspect`: what a linked binary's table or a fat object's target code holds."""

from __future__ import annotations

import re
import subprocess
import warnings
from fnmatch import fnmatchcase

from ..elf import (
    EM_AMDGPU,
    STT_FUNC,
    STT_GNU_IFUNC,
    STT_OBJECT,
    STV_HIDDEN,
    STV_INTERNAL,
    ElfFile,
    Section,
    elf_files,
    first_load_vaddr,
)
from ..errors import FormatError, TableError, UsageError
from ..formats.cubin import cubin_arch
from ..formats.fatbin import fatbin_archs
from ..formats.origins import SECTION as ORIGINS_SECTION
from ..formats.origins import Origins, decode
from ..formats.table import PTX_TEXT_KINDS, SECTION
from ..link.extract import cus_of
from ..link.fill import host_symbols
from ..table import Table
from ..toolchains import binaries

SCHEMA_VERSION = 2
SCHEMA_ID = "urn:offlink:schema:inspect:2"  # the $id of inspect.schema.json, in every output
KINDS = ("function", "variable", "indirect-function", "link-variable")
LEGEND = ("  size: a variable's bytes; '-' for a function (its row stores 1: an entry point, "
          "not an extent)\n"
          "  address: st_value, as nm prints it (at run time: plus the load base of a PIE or "
          "shared library)")


def inspect_file(path: str, name_glob: str | None = None,
                 kinds: tuple[str, ...] | None = None, cu_glob: str | None = None) -> dict:
    """A JSON-able description (schema: offlink/inspect.schema.json), its rows (or a CU's
    offered names) narrowed to those matching `name_glob`, of one of `kinds` and offered by a
    CU matching `cu_glob`."""
    head = {"schema": SCHEMA_ID, "schema_version": SCHEMA_VERSION, "file": path}
    files = elf_files(path)  # mapped, not read whole
    if not files or files[0][0]:  # an archive: its ELF members, each named
        cus = [cu for member, elf in files for cu in _cus(elf, elf.name, member)]
        return {**head, "kind": "archive",
                "cus": _narrow_cus(_cus_matching(cus, cu_glob), name_glob, kinds)}
    elf = files[0][1]
    section = elf.section(SECTION)
    if elf.e_type != 1 and section is None:
        found = binaries.read(elf)
        if found:  # the toolchain's own link: GCC's, clang's, nvcc's
            if cu_glob is not None:
                raise UsageError(f"--cu: {path} was linked by the toolchain, whose tables do "
                                 f"not record CUs")
            return {**head, "kind": "toolchain-module",
                    "offload": [_toolchain_json(o, name_glob, kinds) for o in found]}
    if elf.e_type == 1 or section is None:
        cus = _cus(elf, path, None)
        if elf.e_type != 1 and not cus:
            raise FormatError(f"{path}: no {SECTION} section (not linked with offlink, or no "
                              f"target code in its inputs)")
        return {**head, "kind": "object",
                "cus": _narrow_cus(_cus_matching(cus, cu_glob), name_glob, kinds)}
    table = _checked_table(elf, section, path)
    symbols = table.symbols  # made anew on each call: once here (100k rows: 0.6 s)
    host = host_spellings(elf, symbols)
    readable = demangle([s.name for s in symbols])
    rows: list[dict] = [{"name": s.name, "kind": s.kind, "address": s.address, "size": s.size,
                         "host_name": host.get(s.name), "demangled": readable.get(s.name)}
                        for s in symbols]
    origins = _origins(elf, path, warn=True)
    if origins is not None:  # the CU that offered each row, as the link line named it
        for r in rows:
            r["cu"] = origins.rows.get(r["name"], UNKNOWN_CU)
    elif cu_glob is not None:
        raise UsageError(f"--cu: {path} does not record the CU of its rows (no "
                         f"{ORIGINS_SECTION} section: an older offlink linked it, or strip -R "
                         f"removed it)")
    return {
        **head,
        "kind": "module",
        "table": {
            "section": SECTION,
            "address": section.sh_addr,
            "file_offset": section.sh_offset,
            "size": table.total_size,
            "backend": table.backend,
            "symbol_count": len(rows),
            "targets": [{"name": t.name, "kind": t.kind, "image_size": len(t.image),
                         "file_offset": section.sh_offset + t.offset,
                         "archs": image_archs(t.kind, t.image)}
                        for t in table.targets],
            "symbols": [r for r in rows if _wanted(r, name_glob, kinds)
                        and (cu_glob is None or fnmatchcase(r["cu"], cu_glob))],
        },
    }


def _toolchain_json(o, name_glob: str | None, kinds: tuple[str, ...] | None) -> dict:
    readable = demangle([e.name for e in o.entries])
    entries = [{"name": e.name, "kind": e.kind, "address": e.address,
                "size": e.size if "variable" in e.kind else 1, "host_name": e.host_name,
                "demangled": readable.get(e.name)} for e in o.entries]
    return {"toolchain": o.toolchain, "registration": o.registration,
            "entry_count": len(entries),
            "entries": [r for r in entries if _wanted(r, name_glob, kinds)],
            "images": [{"triple": i.triple, "archs": list(i.archs), "kind": i.kind,
                        "producer": i.producer, "image_size": len(i.data),
                        "file_offset": i.file_offset} for i in o.images],
            "notes": list(o.notes)}


TOOLCHAINS = {"gcc": "GCC's own offload link (mkoffload)", "llvm": "clang's own offload link "
              "(clang-linker-wrapper)", "cuda": "nvcc's link (a CUDA fatbin)"}


def _render_toolchain(info: dict) -> list[str]:
    lines = []
    for o in info["offload"]:
        reg = o["registration"] or "none"
        lines.append(f"  {TOOLCHAINS[o['toolchain']]}; registration: {reg}")
        lines.append("  images:")
        for i in o["images"]:
            archs = f"  {' '.join(i['archs'])}" if i["archs"] else ""
            at = (f"at file offset {i['file_offset']:#x}" if i["file_offset"] is not None
                  else "in pieces")
            lines.append(f"    {i['triple']:<28} {i['kind']:<7} {i['producer']:<14} "
                         f"{i['image_size']:>10} bytes {at}{archs}")
        shown = (f", {len(o['entries'])} shown" if len(o["entries"]) != o["entry_count"]
                 else "")
        lines.append(f"  entries: {o['entry_count']}{shown}")
        width = max([len(e["name"]) for e in o["entries"]] + [4])
        for e in o["entries"]:
            also = [x for x in (e["demangled"], e["host_name"] and f"host: {e['host_name']}")
                    if x]
            size = "-" if e["kind"].endswith("function") else str(e["size"])
            lines.append(f"    {e['name']:<{width}}  {e['kind']:<18} {e['address']:#014x}  "
                         f"size {size}" + "".join(f"  {x}" for x in also))
        lines += [f"  note: {n}" for n in o["notes"]]
    return lines


UNKNOWN_CU = "(CU not recorded)"  # a row the section does not name (a damaged section)


def _origins(elf: ElfFile, path: str, warn: bool = False) -> Origins | None:
    """The `.offlink.origins` of a linked binary; None when it has none, or (with a one-line
    warning when `warn`) when it is damaged: the rows are shown without their CUs."""
    section = elf.section(ORIGINS_SECTION)
    if section is None:
        return None
    try:
        return decode(bytes(elf.content(section)), path)
    except FormatError as e:
        if warn:
            warnings.warn(f"{e}; rows shown without their CUs", stacklevel=2)
        return None


def _cus_matching(cus: list[dict], cu_glob: str | None) -> list[dict]:
    return cus if cu_glob is None else [cu for cu in cus if fnmatchcase(cu["origin"], cu_glob)]


def parse_kinds(words: list[str]) -> tuple[str, ...]:
    """--kind values (repeatable, comma-separated) as row kinds; a unique prefix will do
    (`indirect`, `link`)."""
    out: list[str] = []
    for word in (w.strip() for ws in words for w in ws.split(",")):
        found = [k for k in KINDS if k == word] or [k for k in KINDS if k.startswith(word)]
        if not word or len(found) != 1:
            raise UsageError(f"--kind takes {', '.join(KINDS)} (or a unique prefix), not "
                             f"'{word}'")
        out.append(found[0])
    return tuple(dict.fromkeys(out))


def _wanted(row: dict, name_glob: str | None, kinds: tuple[str, ...] | None) -> bool:
    if kinds and row["kind"] not in kinds:
        return False
    if name_glob is None:
        return True
    return any(n is not None and fnmatchcase(n, name_glob)
               for n in (row["name"], row.get("host_name"), row.get("demangled")))


def _narrow_cus(cus: list[dict], name_glob: str | None,
                kinds: tuple[str, ...] | None) -> list[dict]:
    """An object's CUs with only the offered names that match; a CU that names what it
    offers and offers none of them is left out. The kinds of an object's offers are known
    only once compiled: --kind needs a linked binary."""
    if kinds:
        raise UsageError("--kind needs a linked binary: a fat object's CUs do not record the "
                         "kind of what they offer (--name works on both)")
    if name_glob is None:
        return cus
    out = []
    for cu in cus:
        names = [n for n in cu["offered"]
                 if _wanted({"name": n, "kind": "", "demangled": cu["demangled"].get(n)},
                            name_glob, None)]
        if names or not cu["offered"]:
            out.append({**cu, "offered": names,
                        "demangled": {n: d for n, d in cu["demangled"].items() if n in names}})
    return out


def host_spellings(elf: ElfFile, rows) -> dict[str, str]:
    """Row name -> the name the host's symbol table gives the same address, where the two
    differ: GCC's rows are spelled as in the PTX (`run_a$_omp_fn$0` for the host's
    `run_a._omp_fn.0`, `calls$stats_c$63c78480` for a static `calls`, `squares$linkptr`),
    clang's kernels are keyed by kernel name at the host's `.<kernel>.region_id`, and an
    indirect function's row is at the host function itself. nm and backtraces show these."""
    wanted = {s.address for s in rows}
    at: dict[int, list[tuple[bool, str]]] = {}
    for s in elf.symbols():
        if s.name and s.defined and s.st_value in wanted and s.st_type in _NAMED_TYPES:
            at.setdefault(s.st_value, []).append((s.is_global, s.name))
    out = {}
    for row in rows:
        names = at.get(row.address, [])
        if names and row.name not in {n for _, n in names}:
            out[row.name] = min(names, key=lambda g_n: (not _same_entity(g_n[1], row.name),
                                                        not g_n[0], g_n[1]))[1]
    return out


_NAMED_TYPES = (STT_FUNC, STT_OBJECT, STT_GNU_IFUNC)


def _same_entity(host: str, row: str) -> bool:
    return (host.replace(".", "$") == row or row.startswith(host + "$")
            or host == f".{row}.region_id")


def image_archs(kind: str, image: bytes) -> list[str]:
    """The CUDA architectures an image holds code for (sm_NN: machine code, compute_NN: PTX
    for the driver's JIT), an AMD GPU code object's (gfxNNN); empty for other images."""
    if kind == "cubin":
        return [a] if (a := _cubin_arch(image)) else []
    if kind == "fatbin":
        return fatbin_archs(image)
    if kind in PTX_TEXT_KINDS:
        found = {m.decode() for m in re.findall(rb"^\s*\.target\s+(sm_\w+)", image, re.M)}
        return sorted(found, key=lambda a: (len(a), a))
    if kind == "shared-object":
        return [a] if (a := _amdgpu_arch(image)) else []
    return []


# LLVM's EF_AMDGPU_MACH_AMDGCN_* values (e_flags & 0xff of an amdgcn ELF), the common ones.
_AMDGPU_MACHS = {0x2c: "gfx900", 0x2f: "gfx906", 0x30: "gfx908", 0x3f: "gfx90a",
                 0x40: "gfx940", 0x4c: "gfx942", 0x36: "gfx1030", 0x41: "gfx1100"}


def _amdgpu_arch(image: bytes) -> str | None:
    """An HSA code object's GPU (EM_AMDGPU), from e_flags; None for other ELF files."""
    try:
        elf = ElfFile(image, "image")
    except FormatError:
        return None
    if elf.e_machine != EM_AMDGPU:
        return None
    mach = elf.e_flags & 0xFF
    return _AMDGPU_MACHS.get(mach, f"amdgcn-mach-{mach:#x}")


def _cubin_arch(image: bytes) -> str | None:
    try:
        arch = cubin_arch(image, "image")
    except FormatError:
        return None
    return None if arch == "sm_0" else arch


def _checked_table(elf: ElfFile, section: Section, path: str) -> Table:
    """The table with every checksum checked, its images' included: a damaged image is
    named here rather than found when the runtime loads it."""
    table = Table(bytes(elf.content(section)), section.sh_addr, path)
    damaged = table.damaged_targets()
    if damaged:
        which = (f"image of target {damaged[0]} is" if len(damaged) == 1
                 else f"images of targets {', '.join(damaged)} are")
        raise TableError("bad-image-checksum", f"{path}: {SECTION}: the {which} damaged "
                                               f"(image checksum mismatch)")
    return table


def demangle(names: list[str]) -> dict[str, str]:
    """C++ names as people write them (c++filt, when binutils has it); others are left out.
    A kernel named after a C++ function (clang's `__omp_offloading_..._ZN4geom..._l15`) gets
    its function's name demangled in place."""
    kernel_name = re.compile(r"__omp_offloading_[0-9a-f]+_[0-9a-f]+_(_Z\w+)_l\d+$")
    inner = {n: m.group(1) for n in names
             if n.startswith("__omp_offloading_") and (m := kernel_name.match(n))}
    mangled = sorted({n for n in names if n.startswith("_Z")} | set(inner.values()))
    if not mangled:
        return {}
    try:
        out = subprocess.run(["c++filt"], input="\n".join(mangled), capture_output=True,
                             text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return {}
    plain = {name: d for name, d in zip(mangled, out) if d != name}
    found = {n: plain[n] for n in names if n in plain}
    for kernel, function in inner.items():
        if function in plain:
            found[kernel] = kernel.replace(function, plain[function])
    return found


USER_SPACE_END = 1 << 47  # x86-64 and AArch64 Linux: above it, no user-space mapping
PAGE = 4096


def parse_address(text: str, load_base: str | None) -> tuple[int, int | None]:
    """`--address` as given (`0x1234`, `BASE+OFFSET` as a backtrace's `prog(+0x1234)` or a
    debugger shows it) and `--load-base` (a number, or the range /proc/PID/maps prints,
    `555555554000-555555575000`): (the address, the load base or None). Every number is hex,
    with or without 0x, as nm, /proc/PID/maps and backtraces print them; a bare number of
    decimal digits whose hex reading cannot be right (past user space, a load base off a page
    boundary) while its decimal reading could is refused as ambiguous."""
    def number(word: str, what: str, base: bool = False) -> int:
        word = word.strip()
        if base and "-" in word:  # a /proc/PID/maps range: its start
            word = word.split("-", 1)[0]
        prefixed = word.lower().startswith("0x")
        digits = word[2:] if prefixed else word
        if not digits or any(c not in "0123456789abcdefABCDEF" for c in digits):
            raise UsageError(f"{what} takes a number: hex, as nm and /proc/PID/maps print it "
                             f"(0x optional), not '{word}'") from None
        value = int(digits, 16)
        why = ("past user space" if value >= USER_SPACE_END
               else "not a page boundary" if base and value % PAGE else "")
        if why and not prefixed and word.isdigit() and int(word) < USER_SPACE_END \
                and not (base and int(word) % PAGE):
            raise UsageError(f"{what} {word} is ambiguous: read as hex (as /proc/PID/maps and "
                             f"nm print it) it is {why}; if it is decimal, give it as "
                             f"{int(word):#x}")
        if base and value % PAGE:
            raise UsageError(f"{what} {word} is not a page boundary: give the start of the "
                             f"binary's first mapping in /proc/PID/maps")
        return value

    base = number(load_base, "--load-base", base=True) if load_base is not None else None
    text = text.strip()
    if text.startswith("+"):  # a backtrace's offset from the load base, as st_value
        return number(text[1:], "--address"), base
    if "+" in text:
        b, _, off = text.partition("+")
        if base is not None:
            raise UsageError("--address BASE+OFFSET already gives the load base; drop "
                             "--load-base")
        return number(b, "--address") + number(off, "--address"), number(b, "--address")
    return number(text, "--address"), base


def _link_address(elf: ElfFile, address: int, load_base: int | None) -> int:
    """A run-time address as st_value: the load base is where the first PT_LOAD segment
    (the mapping with file offset 0 in /proc/PID/maps) lies; a non-PIE executable is loaded
    at its link addresses, so there the subtraction gives the address back."""
    if load_base is None:
        return address
    return address - load_base + first_load_vaddr(elf)


def explain(path: str, name: str | None, address: int | None,
            load_base: int | None = None) -> tuple[str, bool]:
    """Why a name or an address is, or is not, in a binary's table: what the runtime sees;
    and whether each one asked about is in it (a row), for the exit status."""
    elf = ElfFile.open(path)
    section = elf.section(SECTION)
    if section is None:
        raise FormatError(f"{path}: no {SECTION} section (not linked with offlink, or no "
                          f"target code in its inputs): every pointer stays a host pointer")
    table = _checked_table(elf, section, path)
    host = host_symbols(elf)
    symbols = table.symbols
    spelled = host_spellings(elf, symbols)
    origins = _origins(elf, path)
    offered_by = origins.rows if origins is not None else {}
    lines = []
    offered = True
    if name is not None:
        readable = demangle([s.name for s in symbols])
        sym = table.lookup(name)
        found = [sym] if sym is not None else [
            table.lookup(r) for r, h in sorted(spelled.items()) if h == name]
        if not found:
            found = [table.lookup(m) for m, d in sorted(readable.items())
                     if d == name or d.startswith(name + "(")][:1]
        offered = bool(found)
        if found:
            lines += [_describe(s, readable, spelled, table, offered_by) for s in found
                      if s is not None]
        elif origins is not None and name in origins.left_out:
            lines.append(f"'{name}' is offered by {origins.left_out[name]} but was left out by "
                         f"--offload-symbol narrowing at link time, so it has no row; "
                         f"translate returns the host pointer")
        elif name in host and (hint := binaries.not_offered(table, name)) is not None:
            lines.append(hint)  # GCC's or clang's offload code: in their terms
        elif name in host and host[name].st_visibility in (STV_HIDDEN, STV_INTERNAL):
            seen = "hidden" if host[name].st_visibility == STV_HIDDEN else "internal"
            lines.append(f"'{name}' is defined in {path} with {seen} visibility, so no CU "
                         f"offers it (an image cannot export it); translate returns the host "
                         f"pointer")
        elif name in host and (images := _local_in_images(table, name)):
            lines.append(f"'{name}' is defined in {path} and in the target code of "
                         f"{', '.join(images)}, but not as an exported "
                         f"symbol (static, hidden or internal visibility), so no CU offers "
                         f"it; translate returns the host pointer")
        elif name in host:
            lines.append(f"'{name}' is defined in {path} but no CU offers it: it is not defined "
                         f"(externally, with default or protected visibility) in any CU's "
                         f"target code, or its CU was not compiled with `offlink cc`; "
                         f"translate returns the host pointer")
        else:
            lines.append(f"'{name}' is neither in the table nor defined in {path}")
    if address is not None:
        linked = _link_address(elf, address, load_base)
        shown = (f"{address:#x} (st_value {linked:#x}, load base {load_base:#x})"
                 if load_base is not None else f"{address:#x}")
        sym = table.find(linked)
        if sym is not None:
            delta = linked - sym.address
            where = f" (+{delta:#x})" if delta else ""
            lines.append(f"{shown} is in '{sym.name}'{where}")
            lines.append(_describe(sym, demangle([sym.name]), spelled, table, offered_by))
        else:
            end = max((x.sh_addr + x.sh_size for x in elf.sections if x.sh_addr), default=0)
            near = max((s for s in host.values() if s.st_value <= linked),
                       key=lambda s: s.st_value, default=None)
            hint = (f"; nearest host symbol: {near.name}+{linked - near.st_value:#x}"
                    if near and linked < end else "")
            if linked < 0:
                hint = "; below the load base"
            elif linked >= end:
                hint = ("; past the end of the binary's sections" + (
                    ": a run-time address needs --load-base" if load_base is None else ""))
            lines.append(f"{shown} is in no offered function or variable (functions "
                         f"match their exact address only){hint}")
            offered = False
    return "\n".join(lines), offered


def _local_in_images(table, name: str) -> list[str]:
    """Targets whose (ELF) image defines `name` without exporting it."""
    found = []
    for t in table.targets:
        try:
            syms = ElfFile(t.image, t.name).symbols()
        except FormatError:
            continue
        if any(s.name == name and s.defined and not s.is_global for s in syms):
            found.append(t.name)
    return found


def _describe(sym, readable: dict[str, str], spelled: dict[str, str], table,
              offered_by: dict[str, str]) -> str:
    also = [x for x in (readable.get(sym.name),
                        spelled.get(sym.name) and f"host: {spelled[sym.name]}") if x]
    shown = f"{sym.name} ({'; '.join(also)})" if also else sym.name
    targets = ", ".join(t.name for t in table.targets) or "none"
    size = "" if sym.kind.endswith("function") else f", size {sym.size}"
    by = f"; offered by {offered_by[sym.name]}" if sym.name in offered_by else ""
    return (f"{shown}: {sym.kind} at {sym.address:#x}{size}{by}; "
            f"resolved by name in each image ({targets})")


def _cus(elf: ElfFile, origin: str, member: str | None) -> list[dict]:
    found = cus_of(elf, origin, [])
    readable = demangle(sorted({n for cu in found for n in cu.payload.offered}))
    return [{"origin": cu.origin, "member": member, "target": p.target, "source": p.source,
             "code_kind": p.code_kind, "code_size": len(p.code), "compiler": p.compiler,
             "options": list(p.options), "offered": list(p.offered),
             "demangled": {n: readable[n] for n in p.offered if n in readable}}
            for cu in found for p in (cu.payload,)]


def _by_cu(rows: list[dict]) -> dict[str | None, list[dict]]:
    """Rows by their CU (None: not recorded), CUs sorted by name, rows in table order; rows
    whose CU the section does not name come last."""
    groups: dict[str | None, list[dict]] = {}
    for r in rows:
        groups.setdefault(r.get("cu"), []).append(r)
    return {cu: groups[cu] for cu in sorted(groups, key=lambda c: (c == UNKNOWN_CU, c or ""))}


def render_text(info: dict) -> str:
    lines = [f"{info['file']}: {info['kind']}"]
    if info["kind"] == "module":
        t = info["table"]
        lines.append(f"  {t['section']} at {t['address']:#x} (file offset {t['file_offset']:#x}), "
                     f"{t['size']} bytes, {len(t['targets'])} target(s), "
                     f"{t['symbol_count']} symbol(s)" + (
                         f", {len(t['symbols'])} shown" if len(t["symbols"]) != t["symbol_count"]
                         else ""))
        lines.append("  targets:")
        for tg in t["targets"]:
            archs = f"  {' '.join(tg['archs'])}" if tg["archs"] else ""
            lines.append(f"    {tg['name']:<28} {tg['kind']:<14} {tg['image_size']:>10} bytes "
                         f"at file offset {tg['file_offset']:#x}{archs}")
        lines.append("  symbols:")
        width = max([len(s["name"]) for s in t["symbols"]] + [4])
        groups = _by_cu(t["symbols"])
        indent = "    " if None in groups else "      "
        for cu, rows in groups.items():
            if cu is not None:  # grouped by the CU that offered them: a big table reads by file
                lines.append(f"    {cu}:")
            for s in rows:
                also = [x for x in (s["demangled"], s["host_name"] and f"host: {s['host_name']}")
                        if x]
                size = "-" if s["kind"].endswith("function") else str(s["size"])
                lines.append(f"{indent}{s['name']:<{width}}  {s['kind']:<18} "
                             f"{s['address']:#014x}  size {size}" + "".join(f"  {x}" for x in also))
        lines.append(LEGEND)
    elif info["kind"] == "toolchain-module":
        lines += _render_toolchain(info)
        lines.append(LEGEND.replace("row", "entry"))
    else:
        if not info["cus"]:
            lines.append("  no target code")
        member = None
        for cu in info["cus"]:
            indent = "  "
            if info["kind"] == "archive":  # grouped by member: a big archive reads by file
                if cu["member"] != member:
                    member = cu["member"]
                    lines.append(f"  {member}:")
                indent = "    "
            offered = ", ".join(
                f"{n} ({cu['demangled'][n]})" if n in cu["demangled"] else n
                for n in cu["offered"]) if cu["offered"] else (
                "no offload entries" if cu["target"].startswith(("openmp-", "cuda-")) else
                "the entries of GCC's host tables (.gnu.offload_funcs, .gnu.offload_vars)"
                if cu["code_kind"] == "object" else "every external definition")
            lines.append(f"{indent}{cu['origin']}: {cu['source']} for {cu['target']} "
                         f"({cu['code_kind']}, {cu['code_size']} bytes, compiler {cu['compiler']})")
            lines.append(f"{indent}  options: {' '.join(cu['options']) or '(none)'}")
            lines.append(f"{indent}  offers:  {offered}")
    return "\n".join(lines)

