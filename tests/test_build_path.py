"""Build-path independence, as reprotest varies it: the same objects linked in two folders, named
by absolute paths, give byte-identical outputs (as ld's own link of them does), for GCC's, clang's
and `offlink cc`'s objects; `.offlink.origins` names an absolute input relative to the output's
folder, or as -ffile-prefix-map maps it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import SAMPLES, need_tool, run

from offlink.formats.origins import portable, prefix_maps

SOURCES = ("main", "util", "vecops", "stats")


@pytest.mark.parametrize("origin, output_dir, maps, recorded", [
    ("build/a.o", "/w/one/build", [], "build/a.o"),  # as the link line gives it
    ("/w/one/build/a.o", "/w/one/build", [], "a.o"),
    ("/w/one/obj/libx.a(m.o)", "/w/one/build", [], "../obj/libx.a(m.o)"),
    ("/w/one/obj/a.o#2", "/w/one/out", [], "../obj/a.o#2"),
    ("/usr/lib/libx.a(m.o)", "/w/one/build", [], "/usr/lib/libx.a(m.o)"),  # does not move
    ("/w/one/obj/a.o", "/w/one/build", [("/w/one", ".")], "./obj/a.o"),
    ("/w/one/obj/a.o", "/w/one/build", [("/w/one/obj", "/o"), ("/w", "/x")], "/o/a.o"),
])
def test_portable_names(origin, output_dir, maps, recorded):
    assert portable(origin, output_dir, maps) == recorded


def test_prefix_maps_last_given_first():
    argv = ["gcc", "-ffile-prefix-map=/a=.", "-O2", "-fdebug-prefix-map=/a/b=/src",
            "-fmacro-prefix-map=/c=/d", "-ffile-prefix-map=bad"]
    assert prefix_maps(argv) == [("/a/b", "/src"), ("/a", ".")]


def objects(kind: str, offlink: str, dest: Path) -> tuple[list[str], list[str]]:
    """The sample's objects made once in `dest` (the last one in liblast.a); the link's flags
    before and after the inputs."""
    sample = SAMPLES / "users_openmp"
    dest.mkdir()
    if kind == "gcc":
        need_tool(shutil.which("x86_64-linux-gnu-accel-nvptx-none-gcc-12"),
                  "gcc-12-offload-nvptx is not installed")
        flags = ["-fopenmp", "-foffload=nvptx-none", "-foffload-options=nvptx-none=-misa=sm_80"]
        cc = ["gcc", "-frandom-seed=1"]
    elif kind == "clang":
        need_tool(shutil.which("clang-19"), "clang-19 is not installed")
        flags = ["-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu"]
        cc = ["clang-19"]
    else:  # offlink's own payload: offlink's host target
        sample = SAMPLES / "multi_cu"
        flags = run([offlink, "config", "--cflags"]).stdout.split()
        cc = [offlink, "cc", "gcc"]
    sources = sorted(p.stem for p in sample.glob("*.c"))
    for name in sources:
        run([*cc, "-O2", *flags, "-c", sample / f"{name}.c", "-o", dest / f"{name}.o"])
    run(["ar", "rcs", dest / "liblast.a", dest / f"{sources[-1]}.o"])
    (dest / f"{sources[-1]}.o").unlink()
    if kind == "offlink":
        return [], run([offlink, "config", "--libs"]).stdout.split()
    return flags, []


@pytest.mark.parametrize("kind", ["gcc", "clang", "offlink"])
def test_the_same_objects_linked_in_two_folders_give_the_same_bytes(offlink, tmp_path, kind):
    flags, libs = objects(kind, offlink, tmp_path / "objs")
    compiler = "clang-19" if kind == "clang" else "gcc"
    outputs = []
    for where in ("one/build", "other/place/build"):  # depth differs too
        top = tmp_path / where.split("/build")[0]
        shutil.copytree(tmp_path / "objs", top / "objs")
        (top / "build").mkdir()
        objs = sorted(str(p) for p in (top / "objs").glob("*.o"))
        env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
        for link in ([offlink, "link", compiler], [compiler]):
            out = top / "build" / ("app" if len(link) > 1 else "app.plain")
            run([*link, "-O2", *flags, *objs, top / "objs" / "liblast.a", *libs, "-o", out],
                cwd=top / "build", env=env)
        outputs.append(top / "build")
    one, other = outputs
    assert (one / "app.plain").read_bytes() == (other / "app.plain").read_bytes()  # ld's own
    assert (one / "app").read_bytes() == (other / "app").read_bytes()
    shown = run([offlink, "inspect", "app"], cwd=one).stdout
    assert str(tmp_path) not in shown and "    ../objs/liblast.a(" in shown, shown


def test_file_prefix_map_on_the_link_line_names_the_inputs(offlink, tmp_path):
    _, libs = objects("offlink", offlink, tmp_path / "objs")
    objs = sorted(str(p) for p in (tmp_path / "objs").glob("*.o"))
    run([offlink, "link", "gcc", f"-ffile-prefix-map={tmp_path}=/src", *objs,
         tmp_path / "objs" / "liblast.a", *libs, "-o", tmp_path / "app"])
    shown = run([offlink, "inspect", tmp_path / "app"]).stdout
    assert "    /src/objs/liblast.a(" in shown and "    /src/objs/main.o:" in shown
