"""The package's layering (README, Layout), read from the imports of every module (ast):

- `offlink/link/` keeps the generic stages: it reaches the input dialects, the runtime
  registrations and the targets only through their packages' interfaces
  (`offlink/dialects/__init__.py`, ...), never one toolchain's module;
- no import circle between offlink's parts (each subpackage counts as one part, each top-level
  module as one): link/ imports targets/, so targets/ must not import link/;
- `offlink/model.py`, the data types the parts share, sits below all of them.

Imports under `if TYPE_CHECKING:` only name types for annotations and never run, so they do not
count for the circles (they do for the first rule: a stage that names a toolchain's module is
not generic).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "offlink"
PLUGINS = ("dialects", "registrations", "targets")


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package under `root`, by dotted name (a package by its own name)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = ["offlink", *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, bool]]:
    """(module imported, whether the import runs) for every import of offlink's own modules
    in one module, lazy ones inside functions included; `from X import y` names X.y when that
    is a module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, bool]] = []

    def visit(node: ast.AST, runs: bool) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.body:
                visit(child, False)
            for child in node.orelse:
                visit(child, runs)
            return
        if isinstance(node, ast.Import):
            out.extend((a.name, runs) for a in node.names if a.name.split(".")[0] == "offlink")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module.split(".")[0] == "offlink":
                for a in node.names:
                    sub = f"{module}.{a.name}"
                    out.append((sub if sub in known else module, runs))
        for child in ast.iter_child_nodes(node):
            visit(child, runs)

    visit(ast.parse(path.read_text(), str(path)), True)
    return out


def part(module: str) -> str:
    """The part of the package a module belongs to: its subpackage, or itself at top level."""
    bits = module.split(".")
    return ".".join(bits[:2])


def graph(root: Path) -> dict[str, dict[str, list[str]]]:
    """part -> imported part -> the module-level imports that make the edge ("a -> b")."""
    known = modules(root)
    out: dict[str, dict[str, list[str]]] = {}
    for name, path in known.items():
        for imported, runs in imports(name, path, known):
            a, b = part(name), part(imported)
            if runs and a != b:
                out.setdefault(a, {}).setdefault(b, []).append(f"{name} -> {imported}")
    return out


def circles(edges: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected groups of more than one part (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, {}):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return sorted(out)


def layering_problems(root: Path = PACKAGE) -> list[str]:
    """Everything the layering rules find wrong in the package under `root`."""
    known = modules(root)
    problems = []
    for name, path in known.items():
        if not name.startswith("offlink.link."):
            continue
        for imported, _runs in imports(name, path, known):
            bits = imported.split(".")
            if len(bits) > 2 and bits[1] in PLUGINS:
                problems.append(f"{name} imports {imported}: link/ reaches offlink.{bits[1]} "
                                f"through its package's interface only")
    edges = graph(root)
    for group in circles(edges):
        # Only the parts' own circles: cli and app, the two halves of the command line,
        # import each other lazily and are no layer of the link.
        if not any(p.split(".")[1] in ("link", "model", *PLUGINS) for p in group):
            continue
        why = [e for a in group for b in group for e in edges.get(a, {}).get(b, [])[:2]]
        problems.append(f"import circle between {', '.join(group)}: {'; '.join(why)}")
    for imported, lines in edges.get("offlink.model", {}).items():
        if imported.split(".")[1] in ("link", *PLUGINS):
            problems.append(f"offlink.model imports {imported} ({lines[0]}): it sits below "
                            f"them")
    return list(dict.fromkeys(problems))


def test_link_is_generic_and_no_part_imports_in_a_circle():
    assert layering_problems() == []


def test_the_rules_see_a_circle_and_a_toolchain_module_imported_by_a_stage(tmp_path):
    """The checker itself: a stage importing a dialect's module, and a target importing a
    stage at run time (while the stage imports targets/), are both found."""
    root = tmp_path / "offlink"
    for rel, text in {
        "__init__.py": "",
        "model.py": "",
        "link/__init__.py": "",
        "link/extract.py": "from ..dialects import gcc\nfrom .. import targets\n",
        "dialects/__init__.py": "",
        "dialects/gcc.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                           "    from ..link import extract\n",
        "targets/__init__.py": "",
        "targets/host.py": "def f():\n    from ..link.extract import x\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    problems = layering_problems(root)
    assert problems[0].startswith("offlink.link.extract imports offlink.dialects.gcc:")
    assert problems[1].startswith("import circle between offlink.link, offlink.targets: "
                                  "offlink.link.extract -> offlink.targets; "
                                  "offlink.targets.host -> offlink.link.extract")
    assert len(problems) == 2  # dialects/gcc's import is for annotations only
