"""`offlink inspect`: what a linked binary's table or a fat object's target code holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .elf import STV_HIDDEN, STV_INTERNAL, ElfFile, archive_members, is_archive
from .errors import FormatError, TableError
from .formats.table import SECTION

if TYPE_CHECKING:
    from .elf import Section
    from .table import Table


def inspect_file(path: str) -> dict:
    """A JSON-able description (schema: offlink/inspect.schema.json)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise FormatError(f"{path}: {e.strerror}") from None
    if is_archive(data):
        cus = []
        for m in archive_members(data, path):
            if bytes(m.data[:4]) == b"\x7fELF":
                cus += _cus(ElfFile(m.data, f"{path}({m.name})"), f"{path}({m.name})")
        return {"file": path, "kind": "archive", "cus": cus}
    elf = ElfFile(data, path)
    section = elf.section(SECTION)
    if elf.e_type == 1 or section is None:
        cus = _cus(elf, path)
        if elf.e_type != 1 and not cus:
            raise FormatError(f"{path}: no {SECTION} section (not linked with offlink, or no "
                              f"target code in its inputs)")
        return {"file": path, "kind": "object", "cus": cus}
    table = _checked_table(elf, section, path)
    return {
        "file": path,
        "kind": "module",
        "table": {
            "section": SECTION,
            "address": section.sh_addr,
            "size": table.total_size,
            "backend": table.backend,
            "targets": [{"name": t.name, "kind": t.kind, "image_size": len(t.image),
                         **_archs(t.kind, t.image)} for t in table.targets],
            "symbols": [{"name": s.name, "kind": s.kind, "address": s.address, "size": s.size}
                        for s in table.symbols],
        },
    }


def _archs(kind: str, image: bytes) -> dict:
    """{"archs": [...]} for a GPU image: the sm_NN of a cubin (from its ELF header), the
    architectures of a fatbin's entries; {} for other kinds or an unreadable image."""
    from .targets.cuda import FATBIN_ELF, cubin_arch, fatbin_entries

    try:
        if kind == "cubin":
            return {"archs": [cubin_arch(image, "image")]}
        if kind == "fatbin":
            entries = fatbin_entries(image, "image")
            return {"archs": list(dict.fromkeys(
                f"{'sm' if e.kind == FATBIN_ELF else 'compute'}_{e.sm}" for e in entries))}
    except FormatError:
        pass
    return {}


def _checked_table(elf: ElfFile, section: Section, path: str) -> Table:
    """The table with every checksum checked, its images' included: a damaged image is
    named here rather than found when the runtime loads it."""
    from .table import Table

    table = Table(bytes(elf.content(section)), section.sh_addr, path)
    damaged = table.damaged_targets()
    if damaged:
        which = (f"image of target {damaged[0]} is" if len(damaged) == 1
                 else f"images of targets {', '.join(damaged)} are")
        raise TableError("bad-image-checksum", f"{path}: {SECTION}: the {which} damaged "
                                               f"(image checksum mismatch)")
    return table


def demangle(names: list[str]) -> dict[str, str]:
    """C++ names as people write them (c++filt, when binutils has it); others are left out."""
    mangled = [n for n in names if n.startswith("_Z")]
    if not mangled:
        return {}
    import subprocess

    try:
        out = subprocess.run(["c++filt"], input="\n".join(mangled), capture_output=True,
                             text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return {}
    return {m: d for m, d in zip(mangled, out) if d != m}


def explain(path: str, name: str | None, address: int | None) -> str:
    """Why a name or an address is, or is not, in a binary's table: what the runtime sees."""
    from .link.fill import host_symbols

    elf = ElfFile.open(path)
    section = elf.section(SECTION)
    if section is None:
        raise FormatError(f"{path}: no {SECTION} section (not linked with offlink, or no "
                          f"target code in its inputs): every pointer stays a host pointer")
    table = _checked_table(elf, section, path)
    host = host_symbols(elf)
    lines = []
    if name is not None:
        readable = demangle([s.name for s in table.symbols])
        sym = table.lookup(name) or next(
            (table.lookup(m) for m, d in readable.items()
             if d == name or d.startswith(name + "(")), None)
        if sym is not None:
            lines.append(_describe(sym, readable, table))
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
        sym = table.find(address)
        if sym is not None:
            delta = address - sym.address
            where = f" (+{delta:#x})" if delta else ""
            lines.append(f"{address:#x} is in '{sym.name}'{where}")
            lines.append(_describe(sym, demangle([sym.name]), table))
        else:
            near = max((s for s in host.values() if s.st_value <= address),
                       key=lambda s: s.st_value, default=None)
            hint = (f"; nearest host symbol: {near.name}+{address - near.st_value:#x}"
                    if near else "")
            lines.append(f"{address:#x} is in no offered function or variable (functions "
                         f"match their exact address only){hint}")
    return "\n".join(lines)


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


def _describe(sym, readable: dict[str, str], table) -> str:
    shown = f"{sym.name} ({readable[sym.name]})" if sym.name in readable else sym.name
    targets = ", ".join(t.name for t in table.targets) or "none"
    return (f"{shown}: {sym.kind} at {sym.address:#x}, size {sym.size}; "
            f"resolved by name in each image ({targets})")


def _cus(elf: ElfFile, origin: str) -> list[dict]:
    from .link.extract import cus_of

    return [{"origin": cu.origin, "target": p.target, "source": p.source,
             "code_kind": p.code_kind, "code_size": len(p.code), "compiler": p.compiler,
             "options": list(p.options), "offered": list(p.offered)}
            for cu in cus_of(elf, origin, []) for p in (cu.payload,)]


def render_text(info: dict) -> str:
    lines = [f"{info['file']}: {info['kind']}"]
    if info["kind"] == "module":
        t = info["table"]
        lines.append(f"  {t['section']} at {t['address']:#x}, {t['size']} bytes, "
                     f"{len(t['targets'])} target(s), {len(t['symbols'])} symbol(s)")
        lines.append("  targets:")
        for tg in t["targets"]:
            archs = f"  {','.join(tg['archs'])}" if tg.get("archs") else ""
            lines.append(f"    {tg['name']:<28} {tg['kind']:<14} {tg['image_size']:>10} bytes"
                         f"{archs}")
        lines.append("  symbols:")
        width = max([len(s["name"]) for s in t["symbols"]] + [4])
        readable = demangle([s["name"] for s in t["symbols"]])
        for s in t["symbols"]:
            extra = f"  {readable[s['name']]}" if s["name"] in readable else ""
            lines.append(f"    {s['name']:<{width}}  {s['kind']:<18} {s['address']:#014x}  "
                         f"size {s['size']}{extra}")
    else:
        if not info["cus"]:
            lines.append("  no target code")
        for cu in info["cus"]:
            offered = ", ".join(cu["offered"]) if cu["offered"] else (
                "the entries of GCC's host tables (.gnu.offload_funcs, .gnu.offload_vars)"
                if cu["code_kind"] == "object" else "every external definition")
            lines.append(f"  {cu['origin']}: {cu['source']} for {cu['target']} "
                         f"({cu['code_kind']}, {cu['code_size']} bytes, compiler {cu['compiler']})")
            lines.append(f"    options: {' '.join(cu['options']) or '(none)'}")
            lines.append(f"    offers:  {offered}")
    return "\n".join(lines)


def extract_image(path: str, target: str, output: str) -> int:
    """Write one target's image (checksum verified) to `output`, atomically."""
    from .link.staging import write_whole
    from .table import Table
    from .targets import host_triple

    name = host_triple() if target == "host" else target
    image = Table.open(path).target(name).image
    write_whole(output, image, 0o644)
    return len(image)
