"""`offlink inspect`: what a linked binary's table or a fat object's target code holds."""

from __future__ import annotations

import re
import subprocess
import warnings
from fnmatch import fnmatchcase

from ..elf import (
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
from ..formats.origins import SECTION as ORIGINS_SECTION
from ..formats.origins import Origins, decode
from ..formats.table import SECTION
from ..link.extract import cus_of
from ..link.fill import host_symbols
from ..table import Table
from ..toolchains import binaries, device_symbols
from ..toolchains.binaries import image_archs

SCHEMA_VERSION = 3
SCHEMA_ID = "urn:offlink:schema:inspect:3"  # the $id of inspect.schema.json, in every output
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
    if elf.e_type == 1:
        return {**head, "kind": "object",
                "cus": _narrow_cus(_cus_matching(_cus(elf, path, None), cu_glob), name_glob,
                                   kinds)}
    if section is None:
        if cu_glob is not None and binaries.read(elf):
            raise UsageError(f"--cu: {path} was linked by the toolchain, whose tables do "
                             f"not record CUs")
        views = read_offload(elf, path)
        if not views:
            cus = _cus(elf, path, None)
            if not cus:
                raise FormatError(f"{path}: no {SECTION} section (not linked with offlink, or "
                                  f"no target code in its inputs)")
            return {**head, "kind": "object",
                    "cus": _narrow_cus(_cus_matching(cus, cu_glob), name_glob, kinds)}
        return {**head, "kind": "module",
                "offload": [_offload_json(o, name_glob, kinds) for o in views]}
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
    views = read_offload(elf, path, table, section, symbols, host)
    return {
        **head,
        "kind": "module",
        "offload": [_offload_json(o, name_glob, kinds, (readable, {s.name for s in symbols}))
                    for o in views],
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


def read_offload(elf: ElfFile, path: str, table: Table | None = None,
                 section: Section | None = None, rows=(),
                 spelled: dict[str, str] | None = None) -> list[binaries.Offload]:
    """The one reading of a linked binary's offload code, whoever linked it: each toolchain's
    host side (entries, registration) and images; the images of offlink's table go to the
    toolchain whose targets they are, the rest (offlink's own runtime) to an `offlink` view
    whose entries are the table's rows."""
    views = binaries.read(elf)
    if table is None or section is None:
        return views
    own = None
    for t in table.targets:
        view = next((o for o in views if binaries.module(o.toolchain).claims(t.name)), None)
        if view is None:
            if own is None:
                own = binaries.Offload(
                    "offlink", OWN_REGISTRATION, registered=[binaries.Registered(
                        "*", None, f"the {SECTION} section, found by {OWN_REGISTRATION}")])
                views.append(own)
            view = own
        view.images.append(binaries.Image(
            t.name.removeprefix("openmp-"), tuple(image_archs(t.kind, t.image)), t.kind,
            "offlink", t.image, section.sh_offset + t.offset, f"{SECTION} target {t.name}"))
    if own is not None:
        spelled = spelled if spelled is not None else host_spellings(elf, rows)
        own.entries = [binaries.Entry(r.name, r.kind, r.address,
                                      0 if r.kind.endswith("function") else r.size,
                                      spelled.get(r.name)) for r in rows]
    return views


OWN_REGISTRATION = "__OPENMP_TARGET__"  # offlink's runtime finds the table by it: no call


def _offload_json(o: binaries.Offload, name_glob: str | None, kinds: tuple[str, ...] | None,
                  demangled: tuple[dict[str, str], set[str]] = ({}, set())) -> dict:
    """A view as JSON; `demangled`: names already demangled (the table's rows), and all the
    names tried, which are not given to c++filt again (a table of 100k rows)."""
    names = [e.name for e in o.entries]
    images = []
    notes = list(o.notes)
    for i in o.images:
        syms, said = device_symbols.image_symbols(i.kind, i.data, f"{i.triple} image")
        notes += said
        images.append((i, syms))
        names += [s.name for s in syms]
    readable = {**demangled[0], **demangle([n for n in names if n not in demangled[1]])}
    entries = [{"name": e.name, "kind": e.kind, "address": e.address,
                "size": e.size if "variable" in e.kind else 1, "host_name": e.host_name,
                "demangled": readable.get(e.name)} for e in o.entries]
    return {"toolchain": o.toolchain, "runtime": binaries.module_for(o.toolchain).RUNTIME,
            "registration": o.registration,
            "registered": [{"target": r.target, "version": r.version, "evidence": r.evidence}
                           for r in o.registered],
            "entry_count": len(entries),
            "entries": [r for r in entries if _wanted(r, name_glob, kinds)],
            "images": [{"triple": i.triple, "archs": list(i.archs), "kind": i.kind,
                        "producer": i.producer, "image_size": len(i.data),
                        "file_offset": i.file_offset, "where": i.where,
                        "symbols": [{"name": s.name, "kind": s.kind, "exported": s.exported,
                                     "demangled": readable.get(s.name)} for s in syms
                                    if _wanted({"name": s.name, "kind": "",
                                                "demangled": readable.get(s.name)},
                                               name_glob, None)]}
                       for i, syms in images],
            "notes": notes}



def _render_offload(info: dict) -> list[str]:
    lines = []
    for o in info["offload"]:
        if o["toolchain"] == "offlink" and "table" in info:
            continue  # its rows and images are the table's, shown above
        reg = o["registration"] or "none"
        title = binaries.module_for(o["toolchain"]).TITLE
        lines.append(f"  {title}; runtime {o['runtime']}, registration: "
                     f"{reg}")
        for r in o["registered"]:
            version = f" version {r['version']:#x}" if r["version"] is not None else ""
            lines.append(f"    {r['target']}{version} ({r['evidence']})")
        lines.append("  images:")
        for i in o["images"]:
            archs = f"  {' '.join(i['archs'])}" if i["archs"] else ""
            at = (f"at file offset {i['file_offset']:#x}" if i["file_offset"] is not None
                  else "in pieces")
            name = i["triple"]
            if i["producer"] == "offlink":  # a table target: named as the table names it
                name = i["where"].rsplit(" ", 1)[-1]
            lines.append(f"    {name:<28} {i['kind']:<7} {i['producer']:<14} "
                         f"{i['image_size']:>10} bytes {at}{archs}")
            count = {k: sum(s["kind"] == k for s in i["symbols"])
                     for k in ("kernel", "function", "variable")}
            lines.append(f"      {count['kernel']} kernel(s), {count['function']} function(s), "
                         f"{count['variable']} variable(s) in its symbols (--json lists them, "
                         f"--symbol NAME finds one)")
            for k in (s for s in i["symbols"] if s["kind"] == "kernel"):
                lines.append(f"      kernel {k['name']}" + (f"  {k['demangled']}"
                                                            if k["demangled"] else ""))
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
    # GCC's PTX spells a C++ kernel `_Z3runv$_omp_fn$0`: demangled as the host's `_Z3runv._omp_fn.0`
    inner.update({n: n.replace("$", ".") for n in names if n.startswith("_Z") and "$" in n})
    # nvcc's whole-program cubin spells a device function `$_Z3runPi$_Z5scalei` (its kernel's)
    inner.update({n: n.rsplit("$", 1)[1] for n in names if n.startswith("$") and "$_Z" in n})
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
            found[kernel] = (plain[function] if "$" in kernel
                             else kernel.replace(function, plain[function]))
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
    """Why a name or an address is, or is not, on the device of any linked binary (offlink's,
    GCC's, clang's, nvcc's), read from its `inspect` document: what the runtime sees; and
    whether each one asked about is on the device (an entry, a row, or a symbol an image
    exports), for the exit status."""
    elf = ElfFile.open(path)
    if elf.e_type == 1:
        raise UsageError(f"{path}: --symbol and --address read a linked binary (an object's "
                         f"target code: offlink inspect {path})")
    info = inspect_file(path)
    if info["kind"] != "module":
        raise FormatError(f"{path}: no offload code (no {SECTION} table, GCC offload tables, "
                          f"clang offload entries or CUDA fatbin): every pointer stays a host "
                          f"pointer")
    section = elf.section(SECTION)
    if section is None:
        return _explain_toolchain(elf, path, info, name, address, load_base)
    text, offered = _explain_table(elf, path, section, name, address, load_base)
    if name is not None:  # the toolchains' own entries (their terms, row or not), the images
        found = [_entry_line(o, e, info) for o in info["offload"] for e in o["entries"]
                 if o["toolchain"] != "offlink"
                 and _names_match(name, e["name"], e["host_name"], e["demangled"])]
        on_device = ("\n".join(found), True) if found else \
            None if offered else _on_device(info, name, path)
        if on_device:
            text += "\n" + on_device[0]
            offered = offered or on_device[1]
    return text, offered


def _explain_table(elf: ElfFile, path: str, section: Section, name: str | None,
                   address: int | None, load_base: int | None) -> tuple[str, bool]:
    """What offlink's table says of a name or an address (rows, CUs, narrowing)."""
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
        elif mangled := [m for m, d in demangle(sorted(n for n in host if n.startswith("_Z")))
                         .items() if _names_match(name, d)]:
            lines.append(f"'{name}' is defined in {path} (as {mangled[0]}) but no CU offers it")
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


# offlink's key of a CU-private name (gcc/dialect.py): `MAIN__$_omp_fn$0$prog_f90$067e33bb`;
# LLVM's OpenMP optimisation's copy of a device function it internalised: `scale.internalized`
# (amdgcn), `scale_$_internalized` (nvptx, where PTX forbids the dot).
_CU_KEY = re.compile(r"\$[^$]+\$[0-9a-f]{8}$|(\.|_\$_)internalized$")


def _names_match(name: str, *spellings: str | None) -> bool:
    """A name as asked (mangled, demangled with or without its parameters, the host's or the
    PTX's spelling, a CU-private name without offlink's CU key) against one entity's
    spellings."""
    for x in spellings:
        if x is None:
            continue
        if name in (x, _CU_KEY.sub("", x)) or x == name.replace(".", "$"):
            return True
        if "(" in name or "[clone" in x:
            continue  # a full signature, or a clone (a kernel GCC outlined from `name`)
        if x.startswith(name + "("):
            return True
    return False


def _held(info: dict, name: str) -> list[tuple[dict, dict, dict]]:
    """(view, image, symbol) of every image symbol that `name` names."""
    return [(o, i, s) for o in info["offload"] for i in o["images"] for s in i["symbols"]
            if _names_match(name, s["name"], s["demangled"])]


def _on_device(info: dict, name: str, path: str) -> tuple[str, bool] | None:
    """What the images say of a name that is no entry: (the line, whether an image exports
    it) in its toolchain's terms; None where no image defines it."""
    held = _held(info, name)
    if not held:
        return None
    toolchain = held[0][0]["toolchain"]
    first = held[0][2]
    name = f"{first['name']} ({first['demangled']})" if first["demangled"] else first["name"]
    where = [f"{i['triple']} ({s['kind']}{'' if s['exported'] else ', local'})"
             for _, i, s in held]
    # on the device: in an image (offlink's own runtime resolves exported names only)
    exported = any(s["exported"] or o["toolchain"] != "offlink" for o, _, s in held)
    return binaries.module_for(toolchain).device_only(name, where, exported), exported


def _entry_line(o: dict, e: dict, info: dict) -> str:
    also = [x for x in (e["demangled"], e["host_name"] and f"host: {e['host_name']}") if x]
    shown = f"{e['name']} ({'; '.join(also)})" if also else e["name"]
    size = "" if e["kind"].endswith("function") else f", size {e['size']}"
    images = [f"{i['triple']} ({s['kind']})" for i in o["images"] for s in i["symbols"]
              if _names_match(e["name"], s["name"])
              or (e["host_name"] and _names_match(e["host_name"], s["name"]))]
    held = f"; in the images {', '.join(images)}" if images else ""
    return (f"{shown}: {binaries.module_for(o['toolchain']).ENTRY_TERMS.get(e['kind'], e['kind'])}"
            f" at {e['address']:#x}{size}{held}; registered with {o['runtime']} by "
            f"{o['registration'] or 'no call (see inspect --explain)'}")


def _explain_toolchain(elf: ElfFile, path: str, info: dict, name: str | None,
                       address: int | None, load_base: int | None) -> tuple[str, bool]:
    """--symbol and --address on a binary its toolchain linked: its entries, then its
    images' own symbols."""
    lines = []
    offered = True
    entries = [(o, e) for o in info["offload"] for e in o["entries"]]
    if name is not None:
        found = [(o, e) for o, e in entries
                 if _names_match(name, e["name"], e["host_name"], e["demangled"])]
        if found:
            lines += [_entry_line(o, e, info) for o, e in found]
        elif (said := _on_device(info, name, path)) is not None:
            lines.append(said[0])
            offered = said[1]
        else:
            offered = False
            host = host_symbols(elf)
            spelled = demangle(sorted(n for n in host if n.startswith("_Z")))
            hidden = [h for o in info["offload"] if (h := binaries.unnamed(
                o["toolchain"], [i["triple"] for i in o["images"]]))]
            if (name in host or any(_names_match(name, d) for d in spelled.values())) \
                    and hidden:
                lines.append(f"'{name}' is defined in {path}'s host code: no entry and no "
                             f"device image names it ({'; '.join(hidden)})")
            elif name in host or any(_names_match(name, d) for d in spelled.values()):
                lines.append(f"'{name}' is defined in {path}'s host code only: no entry and "
                             f"no device image defines it")
            else:
                lines.append(f"'{name}' is neither an entry, nor in a device image, nor "
                             f"defined in {path}")
    if address is not None:
        linked = _link_address(elf, address, load_base)
        shown = (f"{address:#x} (st_value {linked:#x}, load base {load_base:#x})"
                 if load_base is not None else f"{address:#x}")
        hit = next(((o, e) for o, e in entries
                    if e["address"] == linked or (not e["kind"].endswith("function") and
                                                  e["address"] <= linked < e["address"]
                                                  + e["size"])), None)
        if hit is not None:
            delta = linked - hit[1]["address"]
            lines.append(f"{shown} is in '{hit[1]['name']}'" + (f" (+{delta:#x})" if delta
                                                                else ""))
            lines.append(_entry_line(*hit, info))
        else:
            host = host_symbols(elf)
            near = max((s for s in host.values() if s.st_value <= linked),
                       key=lambda s: s.st_value, default=None)
            hint = f"; nearest host symbol: {near.name}+{linked - near.st_value:#x}" if near \
                else ""
            lines.append(f"{shown} is in no entry of the binary's offload tables (functions "
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
    if info["kind"] == "module" and "table" in info:
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
        lines += _render_offload(info)
        lines.append(LEGEND)
    elif info["kind"] == "module":
        lines += _render_offload(info)
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

