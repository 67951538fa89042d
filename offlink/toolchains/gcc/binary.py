"""What GCC's own offload link (`gcc -fopenmp -foffload=nvptx-none`) put into a binary.

The host tables `.gnu.offload_funcs` (kernel addresses) and `.gnu.offload_vars` (address,
size; bit 63: `declare target link`), paired by position with the names of mkoffload's image
(`func_mappings`, `var_mappings`, `ptx_objs`: the C arrays its generated constructor hands
GOMP_offload_register_ver; found by their symbols, so a stripped binary shows the host tables
alone). toolchains/binaries.py says what this module answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ...elf import ElfFile
from ..binaries import (
    Entry,
    Image,
    Memory,
    Offload,
    defines,
    differs,
    host_names,
    registration,
    symbol,
)
from .dialect import TARGET as NVPTX
from .dialect import compile_options, offload_options, table_slots

GCC_FUNCS, GCC_VARS = ".gnu.offload_funcs", ".gnu.offload_vars"
LINK_BIT = 1 << 63  # GCC's .gnu.offload_vars size word: a `declare target link` variable
REGISTRATIONS = ("GOMP_offload_register_ver", "GOMP_offload_register")
TARGETS = (NVPTX, "amdgcn-amdhsa")
PLUGINS = {NVPTX: "libgomp-plugin-nvptx.so.1", "amdgcn-amdhsa": "libgomp-plugin-gcn.so.1"}
RUNTIMES = ()  # the libraries its programs need to start, by name
RUNTIME_FIX = ""
EXTRACT_TARGET = NVPTX  # mkoffload's image: PTX, one text per CU
NO_REGISTRATION_FIX = ("link with gcc and the same -foffload= as the compiles (mkoffload writes "
                       "the registration), or with `offlink link --gomp-register`")


def read(elf: ElfFile, sections: set[str]) -> Offload | None:
    if GCC_FUNCS not in sections and GCC_VARS not in sections:
        return None
    funcs = table_slots(elf, GCC_FUNCS, 8) or []
    variables = table_slots(elf, GCC_VARS, 16) or []
    out = Offload("gcc", registration(elf, REGISTRATIONS))
    memory = Memory(elf)
    func_names, var_names, images = _mkoffload_nvptx(elf, memory, out.notes)
    out.images = images
    if func_names is not None and len(func_names) != len(funcs):
        out.notes.append(f"{len(funcs)} host functions ({GCC_FUNCS}) but {len(func_names)} "
                         f"device names: libgomp pairs them by position and refuses the image "
                         f"('expected {len(funcs)}, have {len(func_names)}')")
    if var_names is not None and len(var_names) != len(variables):
        out.notes.append(f"{len(variables)} host variables ({GCC_VARS}) but {len(var_names)} "
                         f"device names: libgomp refuses the image")
    host = host_names(elf, {a for a, _ in funcs} | {a for a, _ in variables})
    for i, (address, _) in enumerate(funcs):
        name = func_names[i] if func_names and i < len(func_names) else host.get(address, "")
        out.entries.append(Entry(name or f"{GCC_FUNCS}[{i}]", "function", address, 0,
                                 differs(host.get(address), name)))
    for i, (address, size) in enumerate(variables):
        name = var_names[i] if var_names and i < len(var_names) else host.get(address, "")
        kind = "link-variable" if size & LINK_BIT else "variable"
        out.entries.append(Entry(name or f"{GCC_VARS}[{i}]", kind, address, size & ~LINK_BIT,
                                 differs(host.get(address), name)))
    if out.registration is None:
        out.notes.append("no GOMP_offload_register_ver call: the host tables are there but no "
                         "image is registered, so every target region runs on the host")
    return out


def _mkoffload_nvptx(elf: ElfFile, memory: Memory, notes: list[str]):
    """(function names, variable names, images) of GCC 12's nvptx mkoffload arrays; (None,
    None, []) where their symbols are gone (a stripped binary) or it is not nvptx's."""
    syms = {n: symbol(elf, n) for n in ("func_mappings", "var_mappings", "ptx_objs")}
    if syms["ptx_objs"] is None:
        notes.append("mkoffload's image arrays (ptx_objs, func_mappings, var_mappings) are not "
                     "in the symbol table (stripped, or not nvptx-none): the device names are "
                     "not known")
        return None, None, []
    funcs = syms["func_mappings"]
    variables = syms["var_mappings"]
    # struct nvptx_fn { const char *name; unsigned short dim[3]; }: 16 bytes
    func_names = [memory.cstr(memory.word(funcs.st_value + 16 * i))
                  for i in range(funcs.st_size // 16)] if funcs else []
    var_names = [memory.cstr(memory.word(variables.st_value + 8 * i))
                 for i in range(variables.st_size // 8)] if variables else []
    ptx = []  # struct ptx_obj { const char *code; size_t size; }
    objs = syms["ptx_objs"]
    offsets = []
    for i in range(objs.st_size // 16):
        code, size = memory.word(objs.st_value + 16 * i), memory.word(objs.st_value + 16 * i + 8)
        text, offset = memory.bytes_at(code, size)
        ptx.append(text.rstrip(b"\0"))
        offsets.append(offset)
    data = b"\0".join(ptx)  # as offlink's nvptx-none image: one PTX text per CU
    archs = sorted({m.decode() for m in re.findall(rb"^\s*\.target\s+(sm_\w+)", data, re.M)},
                   key=lambda a: (len(a), a))
    image = Image("nvptx-none", tuple(archs), "ptx", "gcc-mkoffload", data,
                  offsets[0] if len(offsets) == 1 else None)  # in pieces: one per CU
    return func_names, var_names, [image]


def findings(offload: dict, loadable: Callable[[str], str | None],
             device: Callable[[str, str], list[tuple[str, str]]]) -> list[tuple[str, str]]:
    out = []
    for image in offload["images"]:
        plugin = PLUGINS.get(image["triple"])
        if plugin and loadable(plugin) is None:
            out.append((f"libgomp's plugin {plugin} is not installed: libgomp cannot use "
                        f"the {image['triple']} image", "install the toolchain's offload "
                        "plugin (Debian: libgomp-plugin-nvptx1 / libgomp-plugin-amdgcn1)"))
        out += device(image["triple"], f"{image['triple']} image")
    return out


def module_findings(targets: list[str], symbols: set[str]) -> list[tuple[str, str]]:
    if "nvptx-none" in targets and "GOMP_offload_register_ver" not in symbols:
        return [("the nvptx-none image of GCC's objects is in the table but not registered "
                 "with libgomp: GCC's target regions run on the host (offlink's table serves "
                 "offlink_translate only)", "link with `offlink link --gomp-register`")]
    return []


def in_image(target, name: str) -> bool:
    """Whether a target's image defines `name`: GCC's PTX by its definition comment (the
    accel compiler writes one per function: `// BEGIN [GLOBAL ]FUNCTION DEF: NAME`, and
    `.global`/`.const` lines for variables), an ELF image by its symbol table."""
    if target.name == "nvptx-none":
        word = re.escape(name.encode())
        return re.search(rb"^// BEGIN (GLOBAL )?(FUNCTION DEF|VAR DEF): " + word + rb"$",
                         target.image, re.M) is not None
    return defines(target.image, target.name, name)


def not_offered(table, name: str) -> str | None:
    gcc = [t for t in table.targets if t.name in TARGETS]
    if not gcc:
        return None
    held = [t.name for t in gcc if in_image(t, name)]
    where = (f"is in the {', '.join(held)} image (a `declare target` function or "
             f"variable GCC compiled for the device)" if held else
             "is not in the device image (not `declare target`)")
    return (f"'{name}' {where}, but GCC's offload tables list only target regions' "
            f"kernels and `declare target` variables, so the table has no row for it and "
            f"translate returns the host pointer. In a target region call it by name (it "
            f"resolves on the device); GCC 12 has no `declare target indirect` for a "
            f"host function pointer")


def object_image(elf: ElfFile) -> tuple[str, tuple[str, ...]]:
    """The target and architecture of a GCC offload object's `.gnu.offload_lto_*` sections, as
    an object of their own (what `x86_64-linux-gnu-accel-nvptx-none-gcc-12 -xlto ... -c`
    compiles): the architecture is the -misa of the object's -foffload-options, where it has
    one."""
    options = offload_options(compile_options(elf)[1], NVPTX)
    return NVPTX, tuple(o[len("-misa="):] for o in options if o.startswith("-misa="))[-1:]
