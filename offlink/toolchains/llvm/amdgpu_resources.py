"""Whether an AMD GPU image linked from per-CU objects gives each kernel the resources of the
functions it calls in other CUs.

An AMDGPU kernel's descriptor (`.kd`: VGPR, AGPR and SGPR counts, scratch size) is fixed when
its CU is compiled. A whole-program link (clang's: one LTO of every CU) sizes a kernel for
everything it calls. Compiled on its own, a CU knows nothing of a function another CU defines:
LLVM sizes the kernel for its own module (its largest function) and marks its stack dynamic,
so a callee that needs more registers or scratch than that runs with too few, silently wrong
code (the LLVM maintainers' warning on per-CU AMDGPU linking). offlink does not rewrite
descriptors: such a link is refused, naming the kernel and the callee.

The call graph is read from the CUs' objects (relocations from each function's code to the
symbols it names); a kernel's resources from its object's `<kernel>.num_vgpr` (and so on)
symbols, which LLVM 20+ writes for kernels; a callee's from its CU's code compiled to assembly,
whose `.set <function>.num_vgpr, ...` lines give each function's needs with its own CU's
callees included. clang 19's objects have neither: their links are not checked.
"""

from __future__ import annotations

import re

from ...elf import STT_FUNC, ElfFile, rela_entries

# The per-function resource symbols LLVM 20+ sets (AMDGPUMCResourceInfo: `<function>.num_vgpr`
# and so on), which a kernel's descriptor is computed from, and what the error calls them.
MEASURES = (("num_vgpr", "VGPRs"), ("num_agpr", "AGPRs"), ("numbered_sgpr", "SGPRs"),
            ("private_seg_size", "bytes of scratch"))
SHN_ABS = 0xFFF1


def _functions(elf: ElfFile) -> list[tuple[int, int, int, str]]:
    """(section index, start, end, name) of each function the object defines."""
    return sorted((s.st_shndx, s.st_value, s.st_value + s.st_size, s.name)
                  for s in elf.symbols() if s.st_type == STT_FUNC and s.defined and s.name)


def calls(elf: ElfFile) -> dict[str, set[str]]:
    """The symbols each defined function's code names (calls, and addresses it takes)."""
    funcs = _functions(elf)
    syms = elf.symbols()
    by_name = {s.name: s for s in elf.sections}
    out: dict[str, set[str]] = {f[3]: set() for f in funcs}
    for rela in elf.sections:
        if rela.sh_type != 4 or not rela.name.startswith(".rela"):
            continue
        target = by_name.get(rela.name[len(".rela"):])
        if target is None:
            continue
        inside = [f for f in funcs if f[0] == target.index]
        for offset, info, _ in rela_entries(elf, rela):
            caller = next((f[3] for f in inside if f[1] <= offset < f[2]), None)
            index = info >> 32
            if caller is not None and 0 < index < len(syms) and syms[index].name:
                out[caller].add(syms[index].name)
    return out


def cross_cu_calls(objects: dict[str, ElfFile], kernels: set[str]) -> list[tuple[str, str, str,
                                                                                  str]]:
    """(kernel, its CU, callee, the callee's CU) for each function another CU defines that a
    kernel reaches through its own CU's functions, sorted."""
    defined: dict[str, str] = {}
    for label, elf in objects.items():
        for _, _, _, name in _functions(elf):
            defined.setdefault(name, label)
    found = set()
    for label, elf in objects.items():
        graph = calls(elf)
        own = set(graph)
        for kernel in sorted(own & kernels):
            seen, todo = set(), [kernel]
            while todo:
                f = todo.pop()
                for callee in graph.get(f, ()):
                    if callee in own:
                        if callee not in seen:
                            seen.add(callee)
                            todo.append(callee)
                    elif callee in defined and defined[callee] != label:
                        found.add((kernel, label, callee, defined[callee]))
    return sorted(found)


def kernels(elf: ElfFile) -> dict[str, dict[str, int]]:
    """The resource values of each kernel an object defines (its `.kd` descriptor's), from the
    object's `<kernel>.<measure>` symbols, by kernel name."""
    syms = elf.symbols()
    names = {s.name[:-3] for s in syms if s.name.endswith(".kd") and s.defined}
    out: dict[str, dict[str, int]] = {n: {} for n in names}
    for sym in syms:
        head, _, measure = sym.name.rpartition(".")
        if head in out and sym.st_shndx == SHN_ABS:
            out[head][measure] = sym.st_value
    return out


_TOKEN = re.compile(r"\s*(\d+|[A-Za-z_.$][\w.$]*|[-+*(),])")


def function_info(asm: str) -> dict[str, dict[str, int]]:
    """Each function's resource values in an AMDGPU assembly file, by name: the `.set
    <function>.<measure>, <expression>` lines, evaluated (integers, names set in the file,
    max(), or(), +, -, *)."""
    sets = dict(re.findall(r"^\s*\.set\s+([^,\s]+)\s*,\s*(.+?)\s*$", asm, re.M))
    values: dict[str, int] = {}

    def value(name: str, depth: int = 0) -> int:
        if name not in values:
            if name not in sets or depth > 64:
                raise ValueError(name)
            values[name] = evaluate(sets[name], depth + 1)
        return values[name]

    def evaluate(text: str, depth: int) -> int:
        tokens = _TOKEN.findall(text)
        pos = 0

        def term() -> int:
            nonlocal pos
            tok = tokens[pos]
            pos += 1
            if tok.isdigit():
                return int(tok)
            if tok == "(":
                v = expr()
                pos += 1
                return v
            if tok == "-":
                return -term()
            if pos < len(tokens) and tokens[pos] == "(" and tok in ("max", "or"):
                pos += 1
                args = [expr()]
                while tokens[pos] == ",":
                    pos += 1
                    args.append(expr())
                pos += 1
                return max(args) if tok == "max" else int(any(args))
            return value(tok, depth)

        def expr() -> int:
            nonlocal pos
            v = product()
            while pos < len(tokens) and tokens[pos] in "+-":
                op = tokens[pos]
                pos += 1
                v = v + product() if op == "+" else v - product()
            return v

        def product() -> int:
            nonlocal pos
            v = term()
            while pos < len(tokens) and tokens[pos] == "*":
                pos += 1
                v *= term()
            return v

        return expr()

    out: dict[str, dict[str, int]] = {}
    for name in sets:
        function, _, measure = name.rpartition(".")
        if measure in dict(MEASURES) and function:
            out.setdefault(function, {})[measure] = value(name)
    return out


def problem(kernel: str, kernel_cu: str, callee: str, callee_cu: str,
            have: dict[str, int], need: dict[str, int]) -> str:
    """What the kernel lacks for the callee ("" when nothing), as the refusal says it."""
    if not need:
        return (f"kernel {kernel} ({kernel_cu}) calls {callee} ({callee_cu}), whose resource "
                f"needs offlink cannot read")
    for measure, what in MEASURES:
        if need.get(measure, 0) > have.get(measure, 0):
            return (f"kernel {kernel} ({kernel_cu}) calls {callee} ({callee_cu}), which needs "
                    f"{need[measure]} {what}; compiled on its own the kernel was given "
                    f"{have.get(measure, 0)}, and offlink does not rewrite kernel descriptors "
                    f"(clang's whole-program link sizes the kernel for its callees): define "
                    f"{callee} in the kernel's CU, or link with clang")
    return ""
