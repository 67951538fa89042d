"""The README's claims, tried: its worked example runs as written, and its runtime section names
the whole C API that offlink.h declares."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
HEADER = (ROOT / "offlink" / "runtime" / "offlink.h").read_text()


def section(title: str) -> str:
    """The README's text from `## title` to the next `## `."""
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end >= 0 else len(README)]


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
    code = "\n".join(re.findall(r"```.*?```", README, re.S) + re.findall(r"`[^`\n]+`", README))
    used = set(re.findall(r"(?<![\w/.-])(?<!from )offlink (?:-\S+ )*([a-z]+)", code))
    assert {"cc", "link", "inspect", "config"} <= used, used  # the parse found them
    unknown = sorted(word for word in used if not re.search(rf"^\s+{word}\s", run.stdout, re.M))
    assert not unknown, f"README uses commands that offlink --help does not list: {unknown}"
