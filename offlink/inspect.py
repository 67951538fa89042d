"""`offlink inspect`: what a linked binary's table or a fat object's target code holds."""

from __future__ import annotations

import os

from .elf import ElfFile, archive_members, is_archive
from .errors import FormatError
from .formats.payload import SECTION_PREFIX, parse_records
from .formats.table import SECTION


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
    from .table import Table

    table = Table(bytes(elf.content(section)), section.sh_addr, path)
    return {
        "file": path,
        "kind": "module",
        "table": {
            "section": SECTION,
            "address": section.sh_addr,
            "size": table.total_size,
            "backend": table.backend,
            "targets": [{"name": t.name, "kind": t.kind, "image_size": len(t.image)}
                        for t in table.targets],
            "symbols": [{"name": s.name, "kind": s.kind, "address": s.address, "size": s.size}
                        for s in table.symbols],
        },
    }


def _cus(elf: ElfFile, origin: str) -> list[dict]:
    out = []
    for section in elf.sections:
        if section.name.startswith(SECTION_PREFIX):
            for p in parse_records(bytes(elf.content(section)), f"{origin}: {section.name}"):
                out.append({"origin": origin, "target": p.target, "source": p.source,
                            "code_kind": p.code_kind, "code_size": len(p.code),
                            "compiler": p.compiler, "options": list(p.options),
                            "offered": list(p.offered)})
    return out


def render_text(info: dict) -> str:
    lines = [f"{info['file']}: {info['kind']}"]
    if info["kind"] == "module":
        t = info["table"]
        lines.append(f"  {t['section']} at {t['address']:#x}, {t['size']} bytes, "
                     f"{len(t['targets'])} target(s), {len(t['symbols'])} symbol(s)")
        lines.append("  targets:")
        for tg in t["targets"]:
            lines.append(f"    {tg['name']:<28} {tg['kind']:<14} {tg['image_size']:>10} bytes")
        lines.append("  symbols:")
        width = max([len(s["name"]) for s in t["symbols"]] + [4])
        for s in t["symbols"]:
            lines.append(f"    {s['name']:<{width}}  {s['kind']:<18} {s['address']:#014x}  "
                         f"size {s['size']}")
    else:
        if not info["cus"]:
            lines.append("  no target code")
        for cu in info["cus"]:
            offered = ", ".join(cu["offered"]) if cu["offered"] else "every external definition"
            lines.append(f"  {cu['origin']}: {cu['source']} for {cu['target']} "
                         f"({cu['code_kind']}, {cu['code_size']} bytes, compiler {cu['compiler']})")
            lines.append(f"    options: {' '.join(cu['options']) or '(none)'}")
            lines.append(f"    offers:  {offered}")
    return "\n".join(lines)


def extract_image(path: str, target: str, output: str) -> int:
    """Write one target's image (checksum verified) to `output`, atomically."""
    import tempfile

    from .table import Table
    from .targets import host_triple

    name = host_triple() if target == "host" else target
    image = Table.open(path).target(name).image
    out_dir = os.path.dirname(os.path.abspath(output))
    fd, tmp = tempfile.mkstemp(prefix=".offlink-", dir=out_dir)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(image)
        os.chmod(tmp, 0o644)
        os.replace(tmp, output)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return len(image)
