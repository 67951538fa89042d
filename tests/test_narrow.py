"""`offlink link --offload-symbol` / `--offload-symbol-list`: a narrowed table, and a host image
that keeps only what the offered names reach (link/narrow.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run

OPS = """\
static int helper(int x) { return x + 1; }
int op_reached(int x) { return x * 5; }                  /* reached from op_add, not listed */
int op_add(int a, int b) { return helper(a) + b - 1 + op_reached(0) + scale; }
int op_unused(int a) { return a * 12345 + 777; }         /* reached from nothing listed */
"""
DATA = """\
int scale = 0;
int big_unused[4096] = {1};
"""
MAIN = """\
#include <stdio.h>
#include <offlink.h>
int op_add(int, int);
int op_unused(int);
extern int big_unused[];
int main(void) {
  int (*add)(int, int) = offlink_translate(OFFLINK_TABLE, (const void *)op_add);
  printf("%d %d %d\\n", add != op_add, add(2, 3), op_unused(1) + big_unused[0]);
  return 0;
}
"""
OUT = "1 5 13123\n"  # translated to the image's op_add, which runs


@pytest.fixture(scope="module")
def objects(offlink, tmp_path_factory) -> tuple[Path, list[str]]:
    d = tmp_path_factory.mktemp("narrow")
    cflags = run([offlink, "config", "--cflags"]).stdout.split()
    for name, text in (("ops", OPS), ("data", DATA), ("main", MAIN)):
        (d / f"{name}.c").write_text(text if name != "ops" else "extern int scale;\n" + text)
        run([offlink, "cc", "gcc", "-O2", *cflags, "-c", f"{name}.c"], cwd=d)
    libs = run([offlink, "config", "--libs"]).stdout.split()
    return d, ["ops.o", "data.o", "main.o", *libs]


def link(offlink: str, d: Path, inputs: list[str], output: str, *options: str,
         check: bool = True):
    return run([offlink, "link", *options, "gcc", *inputs, "-o", output], cwd=d, check=check)


def rows(offlink: str, binary: Path) -> set[str]:
    info = json.loads(run([offlink, "inspect", "--json", binary]).stdout)
    return {s["name"] for s in info["table"]["symbols"]}


def image(offlink: str, binary: Path) -> Path:
    out = binary.with_name(binary.name + ".image.so")
    run([offlink, "extract", binary, "--target", "host", "--output", out])
    return out


def nm(path: Path, *options: str) -> dict[str, str]:
    """Defined symbols of `path`: name -> nm's type letter."""
    out = run(["nm", "--defined-only", *options, path]).stdout
    return {ln.split()[2]: ln.split()[1] for ln in out.splitlines() if len(ln.split()) == 3}


def test_default_offers_every_external_name(offlink, objects):
    d, inputs = objects
    link(offlink, d, inputs, "app")
    assert run([d / "app"]).stdout == OUT
    assert rows(offlink, d / "app") == {"main", "op_add", "op_reached", "op_unused", "scale",
                                        "big_unused"}
    exported = nm(image(offlink, d / "app"), "-D")
    assert {"op_unused", "big_unused", "main"} <= exported.keys()


def test_narrowed_link_drops_rows_and_unreached_code(offlink, objects):
    d, inputs = objects
    (d / "offered.txt").write_text("# the API\n  scale   # a variable\n\nnothing_matches_*\n")
    link(offlink, d, inputs, "default")
    link(offlink, d, inputs, "narrow", "--offload-symbol=op_a*",
         "--offload-symbol-list", "offered.txt")
    assert run([d / "narrow"]).stdout == OUT
    assert rows(offlink, d / "narrow") == {"op_add", "scale"}
    img = image(offlink, d / "narrow")
    assert set(nm(img, "-D")) == {"op_add", "scale"}
    symtab = nm(img)
    # Reached from an offered function: in the image, local to it, not in the table.
    assert symtab["op_reached"] == "t"
    assert not {"op_unused", "big_unused", "main"} & symtab.keys()
    assert img.stat().st_size < image(offlink, d / "default").stat().st_size
    assert (d / "narrow").stat().st_size < (d / "default").stat().st_size


def test_narrowed_links_are_deterministic_and_keyed_by_the_offered_set(offlink, objects):
    d, inputs = objects
    link(offlink, d, inputs, "a1", "--offload-symbol", "op_add")
    link(offlink, d, inputs, "a2", "--offload-symbol", "op_add")  # its image from the cache
    link(offlink, d, inputs, "a3", "--offload-symbol", "op_add", "--no-cache")
    assert (d / "a1").read_bytes() == (d / "a2").read_bytes() == (d / "a3").read_bytes()
    # Another set after it, from the same cached objects: another image, not the cached one.
    link(offlink, d, inputs, "b", "--offload-symbol", "op_unused")
    assert rows(offlink, d / "b") == {"op_unused"}
    assert set(nm(image(offlink, d / "b"), "-D")) == {"op_unused"}
    assert "op_add" not in nm(image(offlink, d / "b"))


def test_pattern_matching_nothing_gives_an_empty_table(offlink, objects):
    d, inputs = objects
    link(offlink, d, inputs, "none", "--offload-symbol", "zz_*")
    assert rows(offlink, d / "none") == set()
    assert run([d / "none"]).stdout == "0 5 13123\n"  # no row: translate gives the pointer


def test_exact_name_no_cu_offers_is_an_error(offlink, objects):
    d, inputs = objects
    proc = link(offlink, d, inputs, "typo", "--offload-symbol", "op_ad", "--offload-symbol",
                "scale", check=False)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "offlink: error: --offload-symbol: no CU offers 'op_ad': offered are the external "
        "functions and variables their target code defines; did you mean 'op_add'?"]
    assert not (d / "typo").exists()
    # A static function is not offered either, named exactly.
    proc = link(offlink, d, inputs, "typo", "--offload-symbol", "helper", check=False)
    assert proc.returncode == 1 and "no CU offers 'helper'" in proc.stderr


def test_missing_list_file_and_bad_word_are_usage_errors(offlink, objects):
    d, inputs = objects
    proc = link(offlink, d, inputs, "x", "--offload-symbol-list", "absent.txt", check=False)
    assert proc.returncode == 2
    assert proc.stderr == ("offlink: error: --offload-symbol-list: absent.txt: No such file or "
                           "directory\n")
    proc = link(offlink, d, inputs, "x", "--offload-symbol", "a b", check=False)
    assert proc.returncode == 2 and "'a b' is not a symbol name or pattern" in proc.stderr


def test_dry_run_shows_the_narrowed_image_link(offlink, objects):
    d, inputs = objects
    out = link(offlink, d, inputs, "x", "--dry-run", "--offload-symbol", "op_add").stdout
    image_link = next(ln for ln in out.splitlines() if " -shared " in ln)
    assert "-Wl,--gc-sections" in image_link and "-Wl,--version-script=" in image_link
    plain = link(offlink, d, inputs, "x", "--dry-run").stdout
    assert "--gc-sections" not in plain and "-ffunction-sections" in plain


def test_names_and_patterns_select_as_a_version_script_does(tmp_path):
    from offlink.link.narrow import EVERY, Narrowing

    names = ["lua_call", "luaL_check", "luaopen_base", "main", "x1", "x2", "x10"]
    assert EVERY.select(names) is None  # the default: every name
    (tmp_path / "list").write_text("# API\nlua_*   # the core\n\n  x[12]\n")
    n = Narrowing.from_options(["luaL_*", "main", "lua_*"], [str(tmp_path / "list")])
    assert n.words == ("luaL_*", "main", "lua_*", "x[12]")
    assert n.exact == {"main"}
    assert n.select(names) == {"lua_call", "luaL_check", "main", "x1", "x2"}
    assert Narrowing(("?1",)).select(names) == {"x1"}
    assert Narrowing(("nothing*",)).select(names) == frozenset()
