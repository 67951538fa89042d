"""The rough edges a new user met before inspect read every binary (issue 34): a compiler that
is not installed, extract's output in a folder that is not there, a damaged object, the CMake
launcher and Meson recipes, the docs' citations, `link --help` on --gomp-register."""

from __future__ import annotations

import json
import os
import re
import shlex
import struct
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, need_tool, run
from test_inspect_matrix import GCC_NEED, NVPTX, SOURCES

README = (ROOT / "README.md").read_text()


@pytest.mark.parametrize("compiler", ["gcc-99", "clang-1", "/no/such/cc"])
def test_a_compiler_not_installed_is_one_line_and_status_127(offlink, tmp_path, compiler):
    proc = run([offlink, "link", compiler, "-fopenmp", tmp_path / "a.o", "-o", tmp_path / "x"],
               check=False)
    where = "" if "/" in compiler else " on PATH"
    assert (proc.returncode, proc.stdout) == (127, "")
    assert proc.stderr == (f"offlink: error: compiler '{compiler}' is not installed (not "
                           f"found{where})\n")
    assert not (tmp_path / "x").exists()


@pytest.fixture(scope="module")
def own(offlink, tmp_path_factory) -> Path:
    """A program of offlink's own runtime (one image)."""
    folder = tmp_path_factory.mktemp("own")
    cflags = run([offlink, "config", "--cflags"]).stdout.split()
    libs = run([offlink, "config", "--libs"]).stdout.split()
    run([offlink, "cc", "gcc", "-O2", *cflags, "-c", SOURCES / "own.c", "-o", folder / "o.o"])
    run([offlink, "link", "gcc", folder / "o.o", *libs, "-o", folder / "prog"])
    return folder / "prog"


def test_extract_into_a_missing_folder_names_the_folder(offlink, own, tmp_path):
    out = tmp_path / "nodir" / "x.so"
    proc = run([offlink, "extract", "--all", "-o", out, own], check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"offlink: error: cannot write {out}: no folder {out.parent} (-o "
                           f"{out.parent}/ makes one and writes every image there)\n")
    assert not out.parent.exists()


def _section_header(data: bytes, index: int) -> int:
    e_shoff = struct.unpack_from("<Q", data, 0x28)[0]
    return e_shoff + 64 * index


def test_a_damaged_object_is_corrupt_and_a_cut_one_truncated(offlink, tmp_path):
    (tmp_path / "a.c").write_text("int f(void) { return 1; }\n")
    run(["gcc", "-c", tmp_path / "a.c", "-o", tmp_path / "a.o"])
    data = bytearray((tmp_path / "a.o").read_bytes())
    header = _section_header(data, 1)  # .text: its sh_offset now past the end
    struct.pack_into("<Q", data, header + 0x18, len(data) * 4)
    (tmp_path / "damaged.o").write_bytes(data)
    proc = run([offlink, "inspect", tmp_path / "damaged.o"], check=False)
    assert proc.returncode != 0
    assert proc.stderr == (f"offlink: error: {tmp_path / 'damaged.o'}: corrupt ELF (section 1 "
                           f"past the end of file)\n")
    cut = bytes((tmp_path / "a.o").read_bytes())
    (tmp_path / "cut.o").write_bytes(cut[: len(cut) // 2])
    proc = run([offlink, "inspect", tmp_path / "cut.o"], check=False)
    assert proc.returncode != 0 and ": truncated (" in proc.stderr, proc.stderr


def test_the_cmake_launcher_recipe_names_offlink_by_its_path(offlink, tmp_path):
    """A build's shell need not have the virtual environment on PATH: the recipe asks `offlink
    config --command` for offlink's absolute path, which runs from an empty PATH."""
    assert '"offlink;link"' not in README
    assert 'CMAKE_C_LINKER_LAUNCHER="$(offlink config --command);link"' in README
    docs = (ROOT / "docs" / "build-systems.md").read_text()
    assert '"offlink;link"' not in docs and "$(offlink config --command);link" in docs
    command = run([offlink, "config", "--command"]).stdout.strip()
    assert os.path.isabs(command) and os.access(command, os.X_OK)
    bare = subprocess.run([command, "--version"], env={"PATH": "/nonexistent"},
                          capture_output=True, text=True, cwd=tmp_path)
    assert bare.returncode == 0 and bare.stdout.startswith("offlink "), bare.stderr
    proc = run([offlink, "config", "--command", "--libs"], check=False)
    assert proc.returncode == 2 and proc.stderr == "offlink: error: --command goes alone\n"


def test_the_meson_recipe_is_the_samples_own(offlink):
    """README's Meson recipe links with the same words as samples/users_openmp/meson.build's:
    GCC's link names its target (-foffload=nvptx-none), or it builds every installed one."""
    sample = (ROOT / "samples" / "users_openmp" / "meson.build").read_text()

    def link_args(text: str) -> list[str]:
        (words,) = re.findall(r"-Dc_link_args=(\"[^\"]*\"|\S+)", text)
        return shlex.split(words.strip('"'))
    assert link_args(README) == link_args(sample) == ["-fopenmp", "-foffload=nvptx-none"]


def test_docs_cite_only_files_the_repository_has():
    tracked = {Path(p).name for p in run(["git", "ls-files"], cwd=ROOT).stdout.split()}
    for doc in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for cited in re.findall(r"\b[\w-]+\.md\b", doc.read_text()):
            assert cited in tracked, f"{doc.name} cites {cited}, which is not in the repository"


def test_link_help_says_what_gomp_register_does(offlink):
    text = " ".join(run([offlink, "link", "--help"]).stdout.split())
    assert "changes nothing" not in text
    assert "OFFLINK_GOMP_REGISTER=0 leaves the registration out (the option wins over it" in text


def test_gomp_register_wins_over_the_environment(offlink, tmp_path):
    """What the help says, read back by inspect: the registration is there with the option,
    whatever OFFLINK_GOMP_REGISTER says, and not without it."""
    need_tool(*GCC_NEED)
    run(["gcc", "-O2", "-fopenmp", *NVPTX, "-c", SOURCES / "prog.c", "-o", tmp_path / "p.o"])
    env = {**os.environ, "OFFLINK_GOMP_REGISTER": "0"}
    for option, registered in (([], None), (["--gomp-register"], "GOMP_offload_register_ver")):
        out = tmp_path / f"prog{len(option)}"
        run([offlink, "link", *option, "gcc", "-fopenmp", *NVPTX, tmp_path / "p.o", "-o", out],
            env=env)
        info = json.loads(run([offlink, "inspect", "--json", out]).stdout)
        (gcc,) = [o for o in info["offload"] if o["toolchain"] == "gcc"]
        assert gcc["registration"] == registered
        assert [r["version"] for r in gcc["registered"]] == ([0x10001] if registered else [])


def test_registration_calls_are_found_where_a_displacement_holds_0xba():
    """Two tail-called registrations as gcc -O2 compiled offlink's (objdump of a GCC 15 link
    with nvptx-none and amdgcn-amdhsa): the `lea`'s displacement before `mov $8,%edx` holds a
    0xba byte, which once started a match that swallowed the real one (the GCN registration
    was not found)."""
    from offlink.toolchains.gcc import binary

    nvptx = bytes.fromhex("488d0d36bb1f005d4883c001ba05000000bf0100030041 5c488d35deba1f00"
                          "488905dfc11f00e902ffffff6690".replace(" ", ""))
    gcn = bytes.fromhex("488d0d29ba1f00ba08000000bf03000300488d35b8ba1f00e9e3feffff0f1f00")
    code = nvptx + gcn
    at = 0x1143  # where the nvptx part is loaded, as in that binary

    class Text:  # the one executable section registered() reads
        sh_flags, sh_type, sh_addr = binary.SHF_EXECINSTR, binary.SHT_PROGBITS, at

    class Elf:
        sections = [Text()]

        def content(self, section):
            return code

    notes: list[str] = []
    found = binary.registered(Elf(), None, notes)  # type: ignore[arg-type]
    # each one's target_data: its `lea disp(%rip),%rcx`, as objdump resolved them
    assert sorted((t, hex(v), hex(d)) for t, v, d in found) == [
        ("amdgcn-amdhsa", "0x30003", "0x1fcba0"), ("nvptx-none", "0x30001", "0x1fcc80")]
    assert not notes
