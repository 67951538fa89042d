"""The code-health figures of issue 31, read from a checkout of offlink/ with ast.

    python benchmarks/health/metrics.py [ROOT]        (ROOT: the checkout; default: this one)

Prints one line per figure: link()'s length, functions over 80 and over 100 lines, imports
inside functions, uses of private CPython modules or attributes, hand-made TYPE_CHECKING
stand-ins, modules over 400 lines, import circles (imports under TYPE_CHECKING counted) and
toolchain names in link/, cache/, cc/ and cli/. Pairs of repeated code come from the
`duplicates` tool (run separately: `duplicates --repo ROOT/offlink --most 200`).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

# What names a toolchain in code, and what an import circle is, are test_layout's rules, read
# from the checkout's own tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from test_layout import circles, toolchain_words  # noqa: E402

PRIVATE_MODULES = {"_signal", "_thread", "_sha2", "_sha256", "_posixsubprocess", "_io",
                   "_json", "_weakref", "_collections", "_functools", "_operator", "_stat",
                   "_struct", "_hashlib", "_bisect", "_heapq", "_pickle", "_socket", "_locale",
                   "_posixshmem", "_opcode", "_abc", "_warnings", "_imp", "_codecs", "posix"}
PRIVATE_ATTRS = {"_ncallbacks", "_exit_function", "_getframe", "_current_frames",
                 "_clear_type_cache", "_shutdown", "_active", "_limbo"}
GENERIC = ("link", "cache", "cc", "cli")


def modules(root: Path):
    for path in sorted((root / "offlink").rglob("*.py")):
        yield path, ast.parse(path.read_text(), str(path))


def module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def length(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1


def imports_in_functions(tree: ast.AST) -> int:
    count = 0
    for f in functions(tree):
        for node in ast.walk(f):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                count += 1
    # nested functions are walked twice above: count each import once
    seen = set()
    for f in functions(tree):
        for node in ast.walk(f):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                seen.add(id(node))
    return len(seen)


def private_uses(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in PRIVATE_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in PRIVATE_MODULES:
                found.append(node.module)
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE_ATTRS:
            found.append(node.attr)
    return found


def type_checking_standins(tree: ast.AST) -> int:
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.Assign)
               and any(isinstance(t, ast.Name) and t.id == "TYPE_CHECKING"
                       for t in node.targets))


def imported(name: str, path: Path, tree: ast.AST, known: set[str]) -> set[str]:
    """The offlink modules a module imports, anywhere in it (TYPE_CHECKING blocks too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("offlink")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("offlink"):
                continue
            for a in node.names:  # `from . import x` imports the module x, not the package
                out.add(f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod)
    return out


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parents[2]).resolve()
    parsed = [(p, t) for p, t in modules(root)]
    names = {module_name(root, p): (p, t) for p, t in parsed}
    link_len = None
    long80, long100 = [], []
    inner = 0
    private: list[str] = []
    standins = 0
    big = []
    graph: dict[str, set[str]] = {}
    toolchain_hits: dict[str, int] = {}
    for name, (path, tree) in names.items():
        rel = path.relative_to(root)
        for f in functions(tree):
            if name == "offlink.link.pipeline" and f.name == "link":
                link_len = length(f)
            if length(f) > 80:
                long80.append(f"{rel}:{f.name}({length(f)})")
            if length(f) > 100:
                long100.append(f"{rel}:{f.name}({length(f)})")
        inner += imports_in_functions(tree)
        private += [f"{rel}:{u}" for u in private_uses(tree)]
        standins += type_checking_standins(tree)
        lines = len(path.read_text().splitlines())
        if lines > 400:
            big.append(f"{rel}({lines})")
        graph[name] = {m for m in imported(name, path, tree, set(names))
                       if m in names and m != name}
        if rel.parts[1] in GENERIC:
            hits = len(toolchain_words(tree))
            if hits:
                toolchain_hits[str(rel)] = hits
    # A package's __init__ imported through `from .x import y` is not an edge of its own.
    rings = circles(graph)
    print(f"link() lines: {link_len}")
    print(f"functions over 80 lines: {len(long80)}  {' '.join(long80)}")
    print(f"functions over 100 lines: {len(long100)}  {' '.join(long100)}")
    print(f"imports inside functions: {inner}")
    print(f"private CPython modules/attributes: {len(private)}  {' '.join(private)}")
    print(f"TYPE_CHECKING stand-ins: {standins}")
    print(f"modules over 400 lines: {len(big)}  {' '.join(big)}")
    print(f"import circles: {len(rings)}  " + "  ".join("[" + ", ".join(r) + "]" for r in rings))
    in_link_cache = {k: v for k, v in toolchain_hits.items()
                     if k.split("/")[1] in ("link", "cache")}
    print(f"modules of link/ and cache/ naming a toolchain: {len(in_link_cache)}  "
          + " ".join(f"{k}({v})" for k, v in sorted(in_link_cache.items())))
    print(f"modules of link/, cache/, cc/, cli/ naming a toolchain: {len(toolchain_hits)}  "
          + " ".join(f"{k}({v})" for k, v in sorted(toolchain_hits.items())))


if __name__ == "__main__":
    main()
