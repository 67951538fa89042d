"""The README's claims, tried: its worked example runs as written, and its runtime section names
the whole C API that offlink.h declares."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import need_tool

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = {p.name: p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))}
HEADER = (ROOT / "offlink" / "runtime" / "offlink.h").read_text()


def section(title: str) -> str:
    """The text from `## title` to the next `## `, in the README or the docs/ page that has it
    (the README's long reference moved there)."""
    for text in (README, *DOCS.values()):
        start = text.find(f"\n## {title}\n")
        if start >= 0:
            end = text.find("\n## ", start + 1)
            return text[start : end if end >= 0 else len(text)]
    raise AssertionError(f"no section '## {title}' in README.md or docs/")


def first_block(text: str, lang: str) -> str:
    match = re.search(rf"```{lang}\n(.*?)```", text, re.S)
    assert match, f"no ```{lang} block"
    return match.group(1)


def test_worked_example_runs_as_written(tmp_path):
    """The shell lines of "A worked example", run verbatim by bash -e in a copy of the tree's
    samples/ folder, with offlink on PATH as `. .venv/bin/activate` puts it there."""
    script = first_block(section("A worked example"), "sh")
    shutil.copytree(
        ROOT / "samples" / "multi_cu",
        tmp_path / "samples" / "multi_cu",
        ignore=shutil.ignore_patterns("build"),
    )
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    run = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    expected = (ROOT / "samples" / "multi_cu" / "expected.txt").read_text()
    assert run.stdout.startswith(expected), run.stdout  # ./app's output, then inspect's
    inspect = run.stdout[len(expected) :]
    assert "op_mul" in inspect and "x86_64-pc-linux-gnu" in inspect, inspect


def public_api() -> set[str]:
    functions = set(re.findall(r"OFFLINK_API [^;(]*?\b(offlink_\w+)\(", HEADER))
    macros = set(re.findall(r"#define (OFFLINK_[A-Z_]*[A-Z])[ (\n]", HEADER))
    return functions | (macros - {"OFFLINK_H", "OFFLINK_API"})


def test_runtime_section_names_the_whole_api():
    api = public_api()
    assert {
        "offlink_translate",
        "offlink_lookup",
        "offlink_target_name",
        "offlink_update_to_range",
        "OFFLINK_LAUNCH",
    } <= api, api  # the parse found them
    text = section("The runtime (C)")
    missing = sorted(name for name in api if not re.search(rf"\b{name}\b", text))
    assert not missing, f"README's runtime section does not name {missing}"


def test_readme_commands_exist():
    """Every `offlink COMMAND` in the README's code (blocks and `spans`) is a command that
    `offlink --help` lists."""
    run = subprocess.run(
        [str(Path(sys.executable).parent / "offlink"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    every = "\n".join([README, *DOCS.values()])
    code = "\n".join(re.findall(r"```.*?```", every, re.S) + re.findall(r"`[^`\n]+`", every))
    used = set(re.findall(r"(?<![\w/.-])(?<!from )offlink (?:-\S+ )*([a-z]+)", code))
    assert {"cc", "link", "inspect", "config"} <= used, used  # the parse found them
    unknown = sorted(word for word in used if not re.search(rf"^\s+{word}\s", run.stdout, re.M))
    assert not unknown, f"README uses commands that offlink --help does not list: {unknown}"


def sh_blocks() -> list[tuple[str, int, str]]:
    """(page, first line, text) of every ```sh block of the README and docs/."""
    out = []
    for page, text in (("README.md", README), *((f"docs/{n}", t) for n, t in DOCS.items())):
        for m in re.finditer(r"^```sh\n(.*?)^```", text, re.S | re.M):
            out.append((page, text[: m.start()].count("\n") + 1, m.group(1)))
    return out


# What a block needs, by the words in it: a test without the tool skips (fails under CI=true).
TOOLS = {"-foffload=nvptx-none": "x86_64-linux-gnu-accel-nvptx-none-gcc-12", "clang-19": "clang-19",
         "cmake": "cmake", "meson": "meson", "nvptx64-nvidia-cuda": "nvcc", "jq": "jq"}


@pytest.mark.parametrize("page, line, block", sh_blocks(),
                         ids=[f"{p}:{n}" for p, n, _ in sh_blocks()])
def test_every_sh_block_runs_as_written(tmp_path, page, line, block):
    """Each command block of the README and docs/, run verbatim by bash -e in a copy of
    samples/ (the set-up block in the checkout, where it is a no-op once `make venv` ran), with
    offlink on PATH as `. .venv/bin/activate` puts it there."""
    if "A worked example" in section_of(page, line):
        pytest.skip("test_worked_example_runs_as_written runs it and checks its output")
    for word, tool in TOOLS.items():
        if word in block:
            need_tool(nvcc() if tool == "nvcc" else shutil.which(tool), f"{tool} is not installed")
    cwd = tmp_path
    if "make venv" in block:
        cwd = ROOT
    else:
        shutil.copytree(ROOT / "samples", tmp_path / "samples",
                        ignore=shutil.ignore_patterns("build", "build-*"))
    bindir = Path(sys.executable).parent
    env = dict(os.environ, OFFLINK_PROGRESS="0", OFFLINK_CACHE_DIR=str(tmp_path / "cache"),
               PATH=f"{bindir}{os.pathsep}/usr/local/cuda/bin{os.pathsep}{os.environ['PATH']}",
               LD_LIBRARY_PATH="/usr/lib/llvm-19/lib")
    env.pop("MAKEFLAGS", None)
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{page}:{line}:\n{block}\n{done.stdout}\n{done.stderr}"


def nvcc() -> str | None:
    """The nvcc offlink finds (CUDA_HOME, OFFLINK_NVCC, PATH, /usr/local/cuda), or None."""
    from offlink.errors import ToolError
    from offlink.toolchains.offlink.cuda import toolkit

    try:
        return toolkit().nvcc
    except ToolError:
        return None


def section_of(page: str, line: int) -> str:
    text = README if page == "README.md" else DOCS[page.split("/", 1)[1]]
    heads = [h for h in re.finditer(r"^## (.*)$", text, re.M)
             if text[: h.start()].count("\n") + 1 < line]
    return heads[-1].group(1) if heads else ""
