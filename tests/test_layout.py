"""The package's layering (README, Layout), read from the imports of every module (ast):

- `offlink/link/` keeps the generic stages: it reaches the input dialects, the runtime
  registrations and the targets only through the registry (`offlink/toolchains/__init__.py`,
  `dialects.py`, `registrations.py`) and the interfaces (`offlink/plugins.py`), never one
  toolchain's module (`offlink/toolchains/gcc/...`);
- the cache (`offlink/cache/`) is a library: it imports nothing of link/, the toolchains or
  the plug-ins' interfaces, not even for annotations;
- `offlink/plugins.py` imports no implementation, and no toolchain module imports the registry;
- no import circle between offlink's parts (each subpackage counts as one part, each top-level
  module as one): link/ imports toolchains/, so toolchains/ must not import link/;
- no import circle between modules either, among the imports a module makes at its top level
  (those under `if TYPE_CHECKING:` included; imports inside functions run late and are how a
  module reaches one above it);
- `offlink/model.py`, the data types the parts share, sits below all of them;
- the generic parts (link/, cache/, cc/, cli/) name no toolchain in their code: no target,
  no registration, no import of a toolchain's package (`toolchains_named`).
- ELF and fatbin bytes are parsed only by their readers (`offlink/elf.py`, `offlink/formats/`),
  and CUDA's variables read only by its locator (`offlink/toolchains/cuda_toolkit.py`).

Imports under `if TYPE_CHECKING:` only name types for annotations and never run, so they do not
count for the parts' circles (they do for the stage rule: a stage that names a toolchain's
module is not generic).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "offlink"
PLUGINS = ("toolchains",)
# The registry and the interfaces of the plug-ins, which link/ may name.
REGISTRY = ("offlink.toolchains", "offlink.toolchains.dialects",
            "offlink.toolchains.registrations", "offlink.plugins")


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


def imports(name: str, path: Path, known: dict[str, Path],
            tree: ast.AST | None = None) -> list[tuple[str, bool]]:
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

    visit(tree if tree is not None else ast.parse(path.read_text(), str(path)), True)
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
            if len(bits) > 2 and bits[1] in PLUGINS and imported not in REGISTRY:
                problems.append(f"{name} imports {imported}: link/ reaches offlink.{bits[1]} "
                                f"through its registry only")
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


def top_level_imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, bool]]:
    """`imports`, but only those a module makes at its top level (not inside a function)."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.body = []
    return imports(name, path, known, tree)


def module_circles(root: Path = PACKAGE) -> list[str]:
    """The import circles between modules, through top-level imports (TYPE_CHECKING ones
    included); each as its modules and the imports that close it."""
    known = modules(root)
    edges: dict[str, dict[str, list[str]]] = {}
    for name, path in known.items():
        for imported, _runs in top_level_imports(name, path, known):
            if imported in known and imported != name:
                edges.setdefault(name, {}).setdefault(imported, []).append(
                    f"{name} -> {imported}")
    out = []
    for group in circles(edges):
        inside = {(a, b) for a in group for b in edges.get(a, {}) if b in group}
        out.append(f"import circle between {', '.join(group)}: "
                   f"{'; '.join(e for a, b in sorted(inside) for e in edges[a][b][:1])}")
    return out


def library_problems(root: Path = PACKAGE) -> list[str]:
    """The cache importing link/, a toolchain or the interfaces; plugins.py importing an
    implementation; a toolchain module importing the registry."""
    known = modules(root)
    problems = []
    for name, path in known.items():
        for imported, _runs in imports(name, path, known):
            if name.startswith("offlink.cache") and imported.startswith(
                    ("offlink.link", "offlink.toolchains", "offlink.plugins", "offlink.model")):
                problems.append(f"{name} imports {imported}: the cache knows no link")
            if name == "offlink.plugins" and imported.startswith(("offlink.toolchains",
                                                                   "offlink.link")):
                problems.append(f"{name} imports {imported}: the interfaces import no "
                                f"implementation")
            if (name.startswith("offlink.toolchains.") and name not in REGISTRY
                    and imported in REGISTRY[:3]):
                problems.append(f"{name} imports {imported}: the registry imports the "
                                f"toolchains, not they it")
    return problems


def test_no_module_imports_in_a_circle():
    assert module_circles() == []


def test_the_cache_is_a_library_and_the_interfaces_import_no_implementation():
    assert library_problems() == []


def test_link_is_generic_and_no_part_imports_in_a_circle():
    assert layering_problems() == []


def test_the_rules_see_a_circle_and_a_toolchain_module_imported_by_a_stage(tmp_path):
    """The checker itself: a stage importing a dialect's module, and a target importing a
    stage at run time (while the stage imports toolchains/), are both found."""
    root = tmp_path / "offlink"
    for rel, text in {
        "__init__.py": "",
        "model.py": "",
        "link/__init__.py": "",
        "link/extract.py": "from ..toolchains.gcc import dialect\nfrom .. import toolchains\n",
        "toolchains/__init__.py": "",
        "toolchains/gcc/__init__.py": "",
        "toolchains/gcc/dialect.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                     "    from ...link import extract\n",
        "toolchains/offlink/__init__.py": "",
        "toolchains/offlink/host.py": "def f():\n    from ...link.extract import x\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    problems = layering_problems(root)
    assert problems[0].startswith("offlink.link.extract imports offlink.toolchains.gcc.dialect:")
    assert problems[1] == ("import circle between offlink.link, offlink.toolchains: "
                           "offlink.link.extract -> offlink.toolchains.gcc.dialect; "
                           "offlink.link.extract -> offlink.toolchains; "
                           "offlink.toolchains.offlink.host -> offlink.link.extract")
    assert len(problems) == 2  # gcc/dialect's import is for annotations only
    # Between modules, the annotation-only import counts (and no pair excuses it); the one
    # inside a function does not.
    assert module_circles(root) == [
        "import circle between offlink.link.extract, offlink.toolchains.gcc.dialect: "
        "offlink.link.extract -> offlink.toolchains.gcc.dialect; "
        "offlink.toolchains.gcc.dialect -> offlink.link.extract"]
    (root / "cache").mkdir()
    (root / "cache" / "__init__.py").write_text("")
    (root / "cache" / "store.py").write_text("def f():\n    from ..link import compile\n")
    assert library_problems(root) == ["offlink.cache.store imports offlink.link: the "
                                      "cache knows no link"]


# What names a toolchain in generic code: its targets' names, its registrations' names, its
# plug-in's package (as benchmarks/health/metrics.py counts them).
TOOLCHAIN_WORDS = re.compile(r"nvptx-none|amdgcn-amdhsa|nvptx64-nvidia-cuda|x86_64-pc-linux-gnu"
                             r"|omptarget|gomp|cudart|toolchains\.(?:gcc|llvm|offlink)\b")
GENERIC = ("link", "cache", "cc", "cli")
# The one module of generic code that names a toolchain: the link's options, GCC's
# --gomp-register and --offload-option's example among them, are declared where `offlink cc`'s
# warm hit reads them (its misplaced-option warning); the registry that could declare them
# instead is not on the warm path (benchmarks/health/RESULTS.md says what it would cost).
NAMING_ALLOWED = {"cli/options.py"}


def toolchain_words(tree: ast.AST) -> list[str]:
    """Toolchain names in a module's code: string constants other than docstrings,
    identifiers, attribute names and imported modules (comments and docstrings aside)."""
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            words.append(node.value)
        elif isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, ast.ImportFrom):
            words.append("." * node.level + (node.module or ""))
            words += [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            words += [a.name for a in node.names]
    return [w for w in words if TOOLCHAIN_WORDS.search(w)]


def toolchains_named(root: Path = PACKAGE) -> list[str]:
    """The generic parts' modules (link/, cache/, cc/, cli/) whose code names a toolchain:
    they reach the toolchains through the registry and the interfaces only."""
    out = []
    for part in GENERIC:
        for path in sorted((root / part).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            found = toolchain_words(ast.parse(path.read_text(), str(path)))
            if found and rel not in NAMING_ALLOWED:
                out.append(f"{rel} names a toolchain: {', '.join(sorted(set(found)))}")
    return out


def test_generic_code_names_no_toolchain():
    assert toolchains_named() == []


def test_the_naming_rule_sees_a_toolchain_name(tmp_path):
    for rel, text in {
        "link/pipeline.py": '"""Links nvptx-none images (a docstring may say so)."""\n'
                            'GCC = ("nvptx-none", "amdgcn-amdhsa")\n',
        "link/host.py": "def f(options):\n    return options.gomp_register\n",
        "cache/store.py": "from ..toolchains.llvm import omptarget\n",
        "cc/plan.py": "# cudart in a comment is fine\nx = 1\n",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / "cli").mkdir()
    assert toolchains_named(tmp_path) == [
        "link/host.py names a toolchain: gomp_register",
        "link/pipeline.py names a toolchain: amdgcn-amdhsa, nvptx-none",
        "cache/store.py names a toolchain: ..toolchains.llvm, omptarget"]


def test_readme_layout_shows_every_module():
    """README's Layout tree names every module of the package (runtime/'s build helpers and
    the packages' __init__ aside) and no module that is not there."""
    import re

    readme = (PACKAGE.parent / "README.md").read_text()
    tree = readme.split("## Layout\n", 1)[1].split("```\n")[1]  # the tree's fenced block
    shown = set(re.findall(r"[\w.]+\.(?:py|json)\b", tree))
    files = {p.name for p in PACKAGE.rglob("*.py")} | {"inspect.schema.json"}
    assert sorted(shown - files) == []
    missing = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
               if p.name not in shown and p.parent.name != "runtime"}
    assert sorted(missing) == []


def test_the_registry_picks_the_target_class():
    """A target's class comes from the registry, not from another target's for_inputs."""
    from offlink.plugins import host_triple
    from offlink.toolchains import resolve

    names = {"host": "HostTarget", "cuda": "CudaTarget", "nvptx-none": "GccNvptxTarget",
             "openmp-nvptx64-nvidia-cuda": "OpenMPNvptxTarget",
             f"openmp-{host_triple()}": "OpenMPTarget",
             "cuda-nvptx64-nvidia-cuda": "ClangCudaTarget"}
    assert {n: type(resolve(n)).__name__ for n in names} == names
    cpu = resolve(f"openmp-{host_triple()}")
    assert type(cpu.for_inputs([])) is type(cpu)


def test_every_offlink_variable_is_read_through_settings():
    """offlink's Python reads OFFLINK_* variables through settings.py only, and each name it
    asks for is declared there once (with its kind, default and help)."""
    import re

    from offlink.settings import SETTINGS

    asked, direct = set(), []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        if path.name != "settings.py":
            direct += [f"{path.relative_to(PACKAGE)}: {m}" for m in
                       re.findall(r"(?:environ\.get\(|getenv\()\s*\"OFFLINK_\w+"
                                  r"|environ\[\"OFFLINK_\w+\"\](?!\s*=)", text)]
        asked |= set(re.findall(r"settings\.(?:text|flag)\(\"(OFFLINK_\w+)\"\)", text))
        asked |= set(re.findall(r"^\w+_ENV = \"(OFFLINK_\w+)\"", text, re.M))
    assert direct == []
    assert sorted(asked - set(SETTINGS)) == []
    assert sorted(set(SETTINGS) - asked) == []
    assert all(kind and help_ for kind, _default, help_ in SETTINGS.values())


# Byte formats read by hand: the ELF and fatbin magics, an ELF header's fields by offset, the
# fatbin's header structs. Only their readers (formats/, elf.py) may hold these.
HAND_PARSING = (r"\\x7fELF", r"0x[Bb][Aa]55[Ee][Dd]50", r"FATBIN_(?:HEADER|ENTRY)\.unpack",
                r"\[16:18\]", r"\[4:6\]", r"\.unpack_from\([^)]*, 0x(?:28|30|3[Aa])\)")
FORMAT_READERS = ("formats/", "elf.py")
# The CUDA installation's variables: only the one locator reads them (settings.py declares
# OFFLINK_NVCC*).
CUDA_VARIABLES = r"[\"'](?:CUDA_HOME|CUDA_PATH|OFFLINK_NVCC\w*)[\"']"
CUDA_LOCATOR = ("toolchains/cuda_toolkit.py", "settings.py")


def hand_parsers(root: Path = PACKAGE) -> list[str]:
    """Modules outside the format readers that parse ELF or fatbin bytes by hand, and modules
    other than the CUDA locator that read CUDA's variables (a grep of each module's text)."""
    import re

    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text()
        if not rel.startswith(FORMAT_READERS):
            out += [f"{rel}: parses '{m}' by hand (elf.py, formats/ read it)"
                    for p in HAND_PARSING for m in re.findall(p, text)]
        if rel not in CUDA_LOCATOR:
            out += [f"{rel}: reads {m} (toolchains/cuda_toolkit.py finds CUDA)"
                    for m in re.findall(CUDA_VARIABLES, text)]
    return out


def test_bytes_are_parsed_by_their_readers_and_cuda_found_in_one_place():
    assert hand_parsers() == []


def test_the_reader_rule_sees_a_hand_parser(tmp_path):
    (tmp_path / "formats").mkdir()
    (tmp_path / "formats" / "fatbin.py").write_text("MAGIC = 0xBA55ED50\n")
    (tmp_path / "elf.py").write_text('ELF_MAGIC = b"\\x7fELF"\n')
    (tmp_path / "toolchains").mkdir()
    (tmp_path / "toolchains" / "cuda_toolkit.py").write_text('os.environ.get("CUDA_HOME")\n')
    (tmp_path / "inspect_cmd.py").write_text(
        'ok = head[:4] == b"\\x7fELF" and int.from_bytes(head[16:18], "little")\n'
        'home = os.environ["CUDA_PATH"]\n')
    assert hand_parsers(tmp_path) == [
        "inspect_cmd.py: parses '\\x7fELF' by hand (elf.py, formats/ read it)",
        "inspect_cmd.py: parses '[16:18]' by hand (elf.py, formats/ read it)",
        "inspect_cmd.py: reads \"CUDA_PATH\" (toolchains/cuda_toolkit.py finds CUDA)"]
