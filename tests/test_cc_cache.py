"""`offlink cc`'s object cache (offlink/cc/fatcache.py): a warm compile installs the cached fat
object, byte for byte what a compile would write, without a host compile."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import copy_sample, run

from offlink.cache.store import Cache

# A compiler that logs each command line, so a test sees whether the host compile ran.
LOGGING_CC = """#!/bin/sh
printf '%s\\n' "$*" >> {log}
exec gcc "$@"
"""

SOURCE = """#include "unit.h"
int unit_value(void) { return UNIT_VALUE; }
"""


@pytest.fixture
def project(tmp_path: Path):
    """A folder with a source, its header and a logging compiler; the cache beside it."""
    src = tmp_path / "p"
    src.mkdir()
    (src / "unit.c").write_text(SOURCE)
    (src / "unit.h").write_text("#define UNIT_VALUE 42\n")
    cc = tmp_path / "cc-log"
    cc.write_text(LOGGING_CC.format(log=tmp_path / "log"))
    cc.chmod(0o755)
    return src


def env_for(src: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
    env.update({"OFFLINK_CACHE_DIR": str(src.parent / "cache"), "OFFLINK_PROGRESS": "0",
                "OFFLINK_CC_TARGET_COMPILE": "0", "TMPDIR": str(src.parent / "tmp"), **extra})
    (src.parent / "tmp").mkdir(exist_ok=True)
    return env


def compile_(offlink: str, src: Path, *args: str, cwd: Path | None = None, **extra: str):
    """`offlink cc cc-log ARGS -c unit.c -o unit.o` (CMake's way: -MD -MT -MF); returns the
    result and the host compiles it ran (the logged commands without -E)."""
    log = src.parent / "log"
    log.unlink(missing_ok=True)
    argv = [offlink, "cc", src.parent / "cc-log", "-O2", *args, "-MD", "-MT", "unit.o",
            "-MF", "unit.o.d", "-c", "unit.c", "-o", "unit.o"]
    proc = run(argv, cwd=cwd or src, env=env_for(src, **extra))
    return proc, host_compiles(log)


def host_compiles(log: Path) -> list[str]:
    """The logged commands that compiled: not a preprocessing, nor a probe (`--version`: the
    compiler's identity, probed until its file has settled; `-###`: what -march=native is)."""
    return [line for line in log.read_text().splitlines()
            if not {"-E", "-###"} & set(line.split()) and line != "--version"]


def outputs(folder: Path) -> tuple[bytes, bytes]:
    return (folder / "unit.o").read_bytes(), (folder / "unit.o.d").read_bytes()


def cc_entries(src: Path) -> list[Path]:
    found = []
    for path in (src.parent / "cache" / "objects").rglob("*"):
        entry = Cache.decode(path.read_bytes()) if path.is_file() else None
        if entry is not None and entry.meta.get("kind") == "cc-object":
            found.append(path)
    return found


def test_a_hit_writes_the_object_and_depfile_a_compile_writes(offlink, project):
    _, host = compile_(offlink, project, OFFLINK_NO_CACHE="1")
    uncached = outputs(project)
    _, host = compile_(offlink, project, OFFLINK_CC_TARGET_COMPILE="1")
    assert len(host) == 2  # the host compile and the target compile
    miss = outputs(project)
    for name in ("unit.o", "unit.o.d"):
        (project / name).unlink()
    _, host = compile_(offlink, project, OFFLINK_CC_TARGET_COMPILE="1")
    assert host == []  # neither compile ran
    assert outputs(project) == miss == uncached
    # the depfile is the compiler's own, byte for byte
    run([project.parent / "cc-log", "-O2", "-MD", "-MT", "unit.o", "-MF", "plain.d", "-c",
         "unit.c", "-o", "plain.o"], cwd=project)
    assert (project / "plain.d").read_bytes() == miss[1]
    assert oct((project / "unit.o").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_changed_header_misses(offlink, project):
    compile_(offlink, project)
    assert compile_(offlink, project)[1] == []
    before = outputs(project)[0]
    (project / "unit.h").write_text("#define UNIT_VALUE 43\n")
    _, host = compile_(offlink, project)
    assert len(host) == 1
    # the warm path's preprocessing (from the recipe) served the compile: it ran once
    assert sum(" -E " in line for line in (project.parent / "log").read_text().splitlines()) == 1
    assert outputs(project)[0] != before
    assert compile_(offlink, project)[1] == []


SPLIT_HEADER = """#ifdef __OFFLINK_TARGET__
#include "target.h"
#define UNIT_VALUE TARGET_VALUE
#else
#include "host.h"
#define UNIT_VALUE HOST_VALUE
#endif
"""


def recipes(src: Path) -> list[dict]:
    return [meta for p in (src.parent / "cache" / "objects").rglob("*")
            if p.is_file() and (meta := Cache.decode(p.read_bytes()).meta).get("kind")
            == "cc-recipe"]


def test_a_header_testing_the_target_macro_is_keyed_by_the_host_code(offlink, project):
    """Where a header tests __OFFLINK_TARGET__ the host's code is not the target's: it is
    preprocessed too and keyed, so the CU is served when neither changed, and a change to
    either side's code misses and gives the object (and depfile) a compile gives."""
    (project / "unit.h").write_text(SPLIT_HEADER)
    (project / "target.h").write_text("#define TARGET_VALUE 1\n")
    (project / "host.h").write_text("#define HOST_VALUE 7\n")

    def uncached() -> tuple[bytes, bytes]:
        compile_(offlink, project, OFFLINK_NO_CACHE="1")
        found = outputs(project)
        for name in ("unit.o", "unit.o.d"):
            (project / name).unlink()
        return found

    plain = uncached()
    assert len(compile_(offlink, project)[1]) == 1
    assert [r["host_first"] for r in recipes(project)] == [True]
    for name in ("unit.o", "unit.o.d"):
        (project / name).unlink()
    assert compile_(offlink, project)[1] == []  # served
    assert outputs(project) == plain  # the depfile lists host.h, not target.h
    assert b"host.h" in plain[1] and b"target.h" not in plain[1]
    # what only the host side sees changes: a miss, and the object a compile gives
    (project / "host.h").write_text("#define HOST_VALUE 8\n")
    plain = uncached()
    assert len(compile_(offlink, project)[1]) == 1
    assert outputs(project) == plain
    assert "$0x8," in run(["objdump", "-d", project / "unit.o"]).stdout
    assert compile_(offlink, project)[1] == []
    # what only the target side sees changes: a miss too (the payload differs)
    (project / "target.h").write_text("#define TARGET_VALUE 2\n")
    plain = uncached()
    assert len(compile_(offlink, project)[1]) == 1
    assert outputs(project) == plain
    assert compile_(offlink, project)[1] == []


def test_the_recipe_follows_a_header_that_begins_to_test_the_target_macro(offlink, project):
    compile_(offlink, project)
    assert [r["host_first"] for r in recipes(project)] == [False]
    assert compile_(offlink, project)[1] == []
    log = (project.parent / "log").read_text().splitlines()
    assert sum(" -E " in f" {line} " for line in log) == 1  # no host preprocessing
    (project / "unit.h").write_text(SPLIT_HEADER)
    (project / "target.h").write_text("#define TARGET_VALUE 1\n")
    (project / "host.h").write_text("#define HOST_VALUE 7\n")
    assert len(compile_(offlink, project)[1]) == 1
    assert [r["host_first"] for r in recipes(project)] == [True]
    assert compile_(offlink, project)[1] == []
    assert "$0x7," in run(["objdump", "-d", project / "unit.o"]).stdout


def test_a_cu_including_the_runtime_header_is_served(offlink, project, tmp_path):
    """Samples' style: offlink.h tests the target macros, and so does the source."""
    sample = copy_sample("multi_cu", tmp_path)
    cflags = run([offlink, "config", "--cflags"]).stdout.split()
    argv = [offlink, "cc", tmp_path / "cc-log", "-O2", *cflags, "-c", "ops.c", "-o", "ops.o"]
    log = tmp_path / "log"
    run(argv, cwd=sample, env=env_for(project, OFFLINK_NO_CACHE="1"))
    plain = (sample / "ops.o").read_bytes()
    for _ in range(2):
        (sample / "ops.o").unlink()
        log.unlink()
        run(argv, cwd=sample, env=env_for(project))
    assert [line for line in log.read_text().splitlines()
            if " -E " not in f" {line} " and line != "--version"] == []
    assert (sample / "ops.o").read_bytes() == plain


def test_debug_info_in_another_folder_misses(offlink, project, tmp_path):
    other = tmp_path / "q"
    shutil.copytree(project, other)
    compile_(offlink, project, "-g")
    assert compile_(offlink, project, "-g")[1] == []
    (other / "unit.h").write_text((project / "unit.h").read_text())
    _, host = compile_(offlink, project, "-g", cwd=other)
    assert len(host) == 1
    # without debug info the folder is not in the object: the other folder's compile hits
    compile_(offlink, project)
    assert compile_(offlink, project, cwd=other)[1] == []


def test_warnings_are_said_again_on_a_hit(offlink, project):
    (project / "unit.c").write_text(SOURCE + "int unused(void) { int x; return 0; }\n"
                                    "#warning from the source\n")
    miss, _ = compile_(offlink, project, "-Wall")
    hit, host = compile_(offlink, project, "-Wall")
    assert host == []
    assert "unused variable" in miss.stderr and "from the source" in miss.stderr
    assert hit.stderr == miss.stderr


def test_coverage_is_not_cached(offlink, project):
    compile_(offlink, project)
    assert compile_(offlink, project)[1] == []
    for _ in range(2):
        _, host = compile_(offlink, project, "--coverage")
        assert len(host) == 1


def test_coverage_files_are_named_after_the_output_as_gcc_names_them(offlink, tmp_path):
    """The host compile writes its object in the work folder; gcc names the coverage notes and
    the data file the program writes after that object, so before, build/x.gcno was lost (left
    in the removed work folder) and the program wrote its .gcda there. Now both are where a
    plain compile puts them, and gcov reads them."""
    src = tmp_path / "x.c"
    src.write_text("int f(int x) { return x + 1; }\nint main(void) { return f(0) - 1; }\n")
    build = tmp_path / "build"
    build.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
    env.update(OFFLINK_CACHE_DIR=str(tmp_path / "cache"), OFFLINK_PROGRESS="0",
               TMPDIR=str(tmp_path))
    run([offlink, "cc", "gcc", "--coverage", "-c", "x.c", "-o", "build/x.o"], cwd=tmp_path,
        env=env)
    assert sorted(p.name for p in build.iterdir()) == ["x.gcno", "x.o"]
    run(["gcc", "--coverage", "build/x.o", "-o", "prog"], cwd=tmp_path)
    run([tmp_path / "prog"], cwd=tmp_path)
    assert (build / "x.gcda").exists()
    report = run(["gcov", "-o", "build", "x.c"], cwd=tmp_path).stdout
    assert "Lines executed:100.00% of 2" in report
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build", "cache", "prog", "x.c",
                                                          "x.c.gcov"]


def test_a_corrupt_entry_is_ignored(offlink, project):
    compile_(offlink, project)
    good = outputs(project)
    [entry] = cc_entries(project)
    data = bytearray(entry.read_bytes())
    data[-100] ^= 0xFF
    entry.write_bytes(bytes(data))
    (project / "unit.o").unlink()
    proc, host = compile_(offlink, project)
    assert len(host) == 1 and proc.stderr == ""
    assert outputs(project) == good
    assert compile_(offlink, project)[1] == []


def test_cache_off_and_no_litter(offlink, project):
    compile_(offlink, project, OFFLINK_NO_CACHE="1")
    compile_(offlink, project, OFFLINK_CACHE_SIZE="0")
    assert cc_entries(project) == [] if (project.parent / "cache").exists() else True
    compile_(offlink, project)
    compile_(offlink, project)
    assert sorted(p.name for p in project.iterdir()) == ["unit.c", "unit.h", "unit.o",
                                                         "unit.o.d"]
    assert list((project.parent / "tmp").iterdir()) == []
    assert len(cc_entries(project)) == 1
    assert not [p for p in (project.parent / "cache").rglob("*") if ".tmp-" in p.name]


@pytest.mark.parametrize("args, cached", [
    ("-O2 -c a.c -o a.o", True),
    ("-O2 -MD -MF a.d -c a.c -o a.o", True),
    ("-g -Wa,--noexecstack -c a.c -o a.o", True),
    ("-c a.c", False),  # no -o
    ("-MMD -c a.c -o a.o", True),
    ("-MMD -MP -MF a.d -MQ a.o -c a.c -o a.o", True),
    ("-MD -MG -c a.c -o a.o", False),  # gcc: -MG only with -M or -MM
    ("--coverage -c a.c -o a.o", False),
    ("-fprofile-generate=dir -c a.c -o a.o", False),
    ("-gsplit-dwarf -c a.c -o a.o", False),
    ("-save-temps=obj -c a.c -o a.o", False),
    ("-fdump-tree-all -c a.c -o a.o", False),
    ("-fstack-usage -c a.c -o a.o", False),
    ("-frecord-gcc-switches -c a.c -o a.o", False),
    ("-Wa,-adhln=a.lst -c a.c -o a.o", False),
    ("-Wp,-MD,a.d -c a.c -o a.o", False),
    ("-march=native -c a.c -o a.o", True),  # keyed by what native is here
    ("-mtune=native -c a.c -o a.o", True),
    ("-fdiagnostics-format=sarif-file -c a.c -o a.o", False),
    ("-fmodules-ts -c a.c -o a.o", False),
])
def test_which_compiles_are_cached(args, cached):
    from offlink.cc.fatcache import refusal
    from offlink.cc.plan import plan_compile

    plan = plan_compile(["gcc", *args.split()], ["host"])
    assert plan is not None
    assert (refusal(plan) is None) == cached


def test_prerequisites_of_a_depfile():
    from offlink.cc.depfile import prerequisites

    text = b"a.o: a.c /usr/include/stdio.h \\\n my\\ dir/b.h c$$.h\nb.h:\n"
    assert prerequisites(text) == [b"a.c", b"/usr/include/stdio.h", b"my dir/b.h", b"c$.h"]
    assert prerequisites(b"a.o: a.c b.h\n") == [b"a.c", b"b.h"]


def test_the_files_preprocessed_code_came_from():
    from offlink.cc.depfile import included

    code = (b'# 0 "a.c"\n# 0 "<built-in>"\n# 0 "<command-line>"\n'
            b'# 1 "/usr/include/stdc-predef.h" 1 3 4\n# 1 "a.c"\n# 1 "sys/s.h" 1 3 4\n'
            b'int s;\n# 1 "./inc/u.h" 1 3 4\n# 2 "sys/s.h" 2 3 4\n# 3 "a.c" 2\nint a;\n')
    assert included(code) == [b"/usr/include/stdc-predef.h", b"a.c", b"sys/s.h",
                              b"./inc/u.h"]
    assert included(b'# 0 "a.c"\n# 1 "my\\"q.h" 1\n') is None  # escaped: not read


# A small project's handwritten makefile in the common -MMD -MP style; `split.h`, given with
# -isystem (so -MMD's depfile leaves it out), tests the target macro as offlink.h does.
MAKEFILE = """CFLAGS = -O2 -MMD -MP -isystem sys -Isrc
OUT ?= out
OBJS = $(OUT)/a.o $(OUT)/b.o
all: $(OBJS)
$(OUT)/%.o: src/%.c
\t@mkdir -p $(OUT)
\t$(CC) $(CFLAGS) -c $< -o $@
-include $(OBJS:.o=.d)
"""
SPLIT_SYSTEM_HEADER = """#ifdef __OFFLINK_TARGET__
#define SPLIT 1
#else
#define SPLIT {host}
#endif
"""


def mmd_project(root: Path) -> Path:
    for name, text in {"Makefile": MAKEFILE, "sys/split.h": SPLIT_SYSTEM_HEADER.format(host=2),
                       "src/a.h": "#define AVAL 5\n",
                       "src/a.c": '#include <split.h>\n#include "a.h"\n'
                                  "int a(void) { return AVAL + SPLIT; }\n",
                       "src/b.c": '#include <stdio.h>\n#include "a.h"\n'
                                  "int b(void) { return AVAL * 2; }\n"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def built(root: Path, out: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / out).iterdir())}


def test_a_mmd_makefile_project_is_served_with_gccs_own_depfiles(offlink, project):
    """-MMD -MP (a handwritten makefile's idiom): a warm rebuild after a touch runs no host
    compile, and a miss and a hit give the objects an uncached offlink build gives and the
    depfiles plain gcc writes, byte for byte. A system header testing the target macro is
    not in the depfile, yet its host code is keyed: a change there misses."""
    root = mmd_project(project.parent / "mk")
    cc = f"{offlink} cc {project.parent / 'cc-log'}"
    log = project.parent / "log"

    def make(*args: str, **extra: str) -> list[str]:
        log.unlink(missing_ok=True)
        run(["make", "-s", *args], cwd=root, env=env_for(project, **extra))
        return [line for line in log.read_text().splitlines()
                if " -E " not in f" {line} " and line != "--version"] if log.exists() else []

    make("CC=gcc", "OUT=plain")
    make(f"CC={cc}", "OUT=uncached", OFFLINK_NO_CACHE="1")
    assert len(make(f"CC={cc}")) == 2  # a miss: both host compiles
    plain, uncached = built(root, "plain"), built(root, "uncached")
    depfiles = {n: d.replace(b"uncached/", b"plain/") for n, d in uncached.items()
                if n.endswith(".d")}
    assert depfiles == {n: d for n, d in plain.items() if n.endswith(".d")}
    assert b"split.h" not in plain["a.d"] and b"src/a.h:" in plain["a.d"]  # -MMD -MP's

    def same_as_uncached() -> bool:
        return {n: d.replace(b"out/", b"uncached/") for n, d in built(root, "out").items()} \
            == built(root, "uncached")

    assert same_as_uncached()
    os.utime(root / "src/a.h")
    assert make(f"CC={cc}") == []  # a warm rebuild: both served
    assert same_as_uncached()
    (root / "sys/split.h").write_text(SPLIT_SYSTEM_HEADER.format(host=7))
    make("-B", f"CC={cc}", "OUT=uncached", OFFLINK_NO_CACHE="1")
    host = make("-B", f"CC={cc}")
    assert len(host) == 1 and " src/a.c " in host[0]  # a.c's host code changed: a miss
    assert same_as_uncached()


@pytest.mark.parametrize("deps", [
    "-MMD", "-MMD -MP", "-MMD -MF dep/x.d", "-MMD -MP -MQ $(o).o -MF x.d",
    "-MMD -MT a -MT b -MF x.d", "-MMD -MP -MD"])
def test_a_mmd_depfile_is_gccs_own_on_a_miss_and_a_hit(offlink, project, deps):
    (project / "dep").mkdir()
    (project / "sys").mkdir()
    (project / "sys" / "s.h").write_text('#include "unit.h"\n')
    (project / "unit.c").write_text('#include <s.h>\n#include <stdio.h>\n' + SOURCE)
    args = ["-isystem", "sys", "-I.", *deps.split(), "-c", "unit.c", "-o", "unit.o"]
    depfile = project / ("dep/x.d" if "dep/x.d" in deps else "x.d" if "x.d" in deps
                         else "unit.d")
    run([project.parent / "cc-log", *args], cwd=project)
    plain = depfile.read_bytes()
    assert b"s.h" not in plain
    log = project.parent / "log"
    for hit in (False, True):
        depfile.unlink()
        log.unlink()
        run([offlink, "cc", project.parent / "cc-log", *args], cwd=project,
            env=env_for(project))
        assert depfile.read_bytes() == plain
        host = [line for line in log.read_text().splitlines()
                if " -E " not in f" {line} " and line != "--version"]
        assert len(host) == (0 if hit else 1)


def test_static_and_shared_objects_of_a_source_share_a_target_compile(offlink, project):
    """CMake compiles a library's shared objects with -fPIC, its static ones without; the
    host target compiles -fPIC either way, so one target compile serves both."""
    env = env_for(project, OFFLINK_CC_TARGET_COMPILE="1")
    for pic, out in ((["-fPIC"], "shared.o"), ([], "static.o")):
        run([offlink, "cc", "gcc", "-O2", *pic, "-c", "unit.c", "-o", out], cwd=project,
            env=env)
    targets = [p for p in (project.parent / "cache" / "objects").rglob("*")
               if p.is_file() and Cache.decode(p.read_bytes()).meta.get("kind") is None]
    assert len(targets) == 1


def test_compile_and_link_in_one_step_says_each_warning_once_on_a_hit(offlink, project):
    (project / "unit.c").write_text(SOURCE + "int unused(void) { int x; return 0; }\n"
                                    "int main(void) { return unit_value() != 42; }\n")
    env = env_for(project, OFFLINK_CC_TARGET_COMPILE="1")
    argv = [offlink, "cc", "gcc", "-Wall", "unit.c", "-o", "app"]
    first = run(argv, cwd=project, env=env)
    for path in (project.parent / "cache" / "objects").rglob("*"):  # the link compiles again
        if path.is_file() and path not in cc_entries(project):
            path.unlink()
    again = run(argv, cwd=project, env=env)
    assert first.stderr.count("unused variable") == 1
    assert again.stderr == first.stderr
    assert len(cc_entries(project)) == 1


def test_a_response_file_compile_is_served_without_a_recipe(offlink, project):
    """The plan reads a response file, so no recipe stands for it; the object is cached all
    the same (found after planning), and an edited response file is seen."""
    (project / "args").write_text("-O2 -DUNIT_VALUE=5\n")
    (project / "unit.h").write_text("#ifndef UNIT_VALUE\n#define UNIT_VALUE 42\n#endif\n")
    env = env_for(project)
    log = project.parent / "log"
    argv = [offlink, "cc", project.parent / "cc-log", "@args", "-c", "unit.c", "-o", "unit.o"]
    run(argv, cwd=project, env=env)
    log.unlink()
    run(argv, cwd=project, env=env)
    assert [line for line in log.read_text().splitlines()
            if " -E " not in line and line != "--version"] == []
    (project / "args").write_text("-O2 -DUNIT_VALUE=6\n")
    run(argv, cwd=project, env=env)
    assert "$0x6," in run(["objdump", "-d", project / "unit.o"]).stdout
    recipes = [p for p in (project.parent / "cache" / "objects").rglob("*")
               if p.is_file() and Cache.decode(p.read_bytes()).meta.get("kind") == "cc-recipe"]
    assert recipes == []


def test_the_host_preprocessing_is_the_target_one_without_its_defines():
    from offlink.cc.fatcache import host_capture

    defines = ['-D__OFFLINK_TARGET__="x86_64-pc-linux-gnu"', "-D__OFFLINK_TARGET_HOST__=1"]
    capture = ["gcc", "-O2", "-D__OFFLINK_TARGET_HOST__=1", "-x", "c", *defines, "-E", "a.c",
               "-o", "w/host-code.i"]
    # the user's own options (the prefix) are kept, whatever they define
    assert host_capture(capture, 3, defines, ["-MD", "-MF", "w/host-code.d"]) == [
        "gcc", "-O2", "-D__OFFLINK_TARGET_HOST__=1", "-x", "c", "-E", "a.c", "-o",
        "w/host-code.i", "-MD", "-MF", "w/host-code.d"]


def test_a_compile_whose_target_code_is_cached_writes_gccs_host_object(project):
    """A compile that starts no target compile (the static object of a source whose shared
    one compiled the target code, or OFFLINK_CC_TARGET_COMPILE=0) gives a fat object whose
    host code is gcc's own."""
    env = env_for(project)
    cc = [sys.executable, "-m", "offlink", "cc", "gcc", "-O2", "-c", "unit.c"]
    run([*cc, "-fPIC", "-o", "shared.o"], cwd=project,
        env={**env, "OFFLINK_CC_TARGET_COMPILE": "1"})  # probes gcc, compiles
    run([*cc, "-o", "static.o"], cwd=project, env={**env, "OFFLINK_CC_TARGET_COMPILE": "1"})
    run(["gcc", "-O2", "-c", "unit.c", "-o", "plain.o"], cwd=project)
    host = run(["objcopy", "--remove-section", "gnu.target_lto_x86_64-pc-linux-gnu",
                "static.o", "host.o"], cwd=project)
    assert host.returncode == 0
    assert (project / "host.o").read_bytes() == (project / "plain.o").read_bytes()


# The import budget of the warm path (offlink/cc/warm.py, reached from the command line): a
# warm hit imports only these of offlink's modules, and none of the slow ones below.
WARM_MODULES = {"offlink", "offlink.cli", "offlink.cli.report", "offlink.cli.options",
                "offlink.cli.cc_cmd", "offlink.errors", "offlink.settings", "offlink.digest",
                "offlink.run", "offlink.cc", "offlink.cc.warm", "offlink.cc.depfile",
                "offlink.cc.toolchain_offload", "offlink.driver_args", "offlink.cache",
                "offlink.link", "offlink.link.staging"}
NOT_WARM = ("subprocess", "shutil", "tempfile", "dataclasses", "inspect", "concurrent.futures",
            "typer", "rich", "click", "lief", "construct")
# `python -c IMPORTED SAID_FILE WORDS...`: `offlink WORDS...`, writing to SAID_FILE at exit
# every module it imported, one a line.
IMPORTED = """import atexit, sys
def said(path=sys.argv[1]):
    with open(path, "w") as f:
        print("\\n".join(sorted(sys.modules)), file=f)
atexit.register(said)
sys.argv = ["offlink", *sys.argv[2:]]
from offlink.cli import main
main()
"""


def test_the_warm_hit_keeps_to_its_import_budget(project):
    """A cold `offlink cc` works, leaves nothing in TMPDIR and stores its objects; the warm
    hit after it (an `offlink cc` served by its recipe) imports only WARM_MODULES of
    offlink's own (the cache's among them) and none of NOT_WARM."""
    env = env_for(project, PYTHONPATH=str(Path(__file__).resolve().parent.parent),
                  OFFLINK_CC_TARGET_COMPILE="1")
    said = project.parent / "said"

    def cc(source: str, *args: str) -> set[str]:
        run([sys.executable, "-c", IMPORTED, said, "cc", "gcc", "-O2", *args, "-c", source],
            cwd=project, env=env)
        return set(said.read_text().split())

    cc("unit.c", "-o", "first.o")  # probes gcc and objcopy
    (project / "other.c").write_text("int other_value(void) { return 7; }\n")
    before = len(cc_entries(project))
    cc("other.c", "-fPIC", "-o", "cold.o")
    assert len(cc_entries(project)) == before + 1  # a miss: compiled and stored
    warm = cc("other.c", "-fPIC", "-o", "cold.o")
    assert len(cc_entries(project)) == before + 1  # a hit
    offlinks = {m for m in warm if m.split(".")[0] == "offlink"}
    assert {m for m in offlinks - WARM_MODULES if not m.startswith("offlink.cache.")} == set()
    assert "offlink.cc.warm" in offlinks
    assert not warm & set(NOT_WARM)
    assert "gnu.target_lto_" in run(["readelf", "-S", "-W", project / "cold.o"]).stdout
    cached = [p for p in (project.parent / "cache" / "objects").rglob("*") if p.is_file()
              and (e := Cache.decode(p.read_bytes())) is not None and e.meta
              and "other_value" in str(e.meta)]
    assert cached  # its target object, compiled by this cc
    assert os.listdir(project.parent / "tmp") == []


def test_a_compile_trims_the_cache_once(project, monkeypatch):
    """Trimming lists every entry of the cache: a compile that stores its fat object and its
    target object trims once, not once per entry it stored."""
    from offlink import cli
    from offlink.cache.store import Cache

    trims = []
    real = Cache.trim
    monkeypatch.setattr(Cache, "trim", lambda self: (trims.append(1), real(self)))
    for name, value in env_for(project, OFFLINK_CC_TARGET_COMPILE="1").items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(project)
    with pytest.raises(SystemExit) as done:
        cli.main(["cc", "gcc", "-O2", "-c", "unit.c", "-o", "unit.o"])
    assert done.value.code in (0, None)
    assert len(cc_entries(project)) == 1  # the fat object and the target object were stored
    assert len(trims) == 1


def test_the_compiler_gets_sigpipe_at_its_default(project):
    """Python ignores SIGPIPE and an ignored signal stays ignored across exec: the tools
    offlink cc starts (the preprocessing, the host compile) get it back, as subprocess gives
    it and as a plain compile has it."""
    import signal
    import sys

    log = project.parent / "sigign"
    cc = project.parent / "cc-sig"
    cc.write_text(f'#!/bin/sh\ngrep SigIgn /proc/$$/status >> {log}\nexec gcc "$@"\n')
    cc.chmod(0o755)
    env = env_for(project, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    run([sys.executable, "-m", "offlink", "cc", cc, "-O2", "-c", "unit.c", "-o", "unit.o"],
        cwd=project, env=env)
    masks = [int(line.split()[1], 16) for line in log.read_text().splitlines()]
    assert len(masks) >= 2  # the target preprocessing and the host compile
    for mask in masks:
        assert not mask & (1 << (signal.SIGPIPE - 1)), hex(mask)


def test_the_command_a_driver_would_run():
    from offlink.cache.native import driver_command

    gcc = ("Using built-in specs.\nTarget: x86_64-linux-gnu\nCOLLECT_GCC_OPTIONS='-march=native'\n"
           ' /usr/lib/gcc/x86_64-linux-gnu/12/cc1 -quiet /dev/null "-march=znver3" -mmmx '
           '--param "l1-cache-size=32" "-mtune=znver3" -quiet -o /tmp/ccdk28Cg.s\n'
           " as --64 -o null.o /tmp/ccdk28Cg.s\n")
    assert driver_command(gcc) == "\0".join([
        "/usr/lib/gcc/x86_64-linux-gnu/12/cc1", "-quiet", "/dev/null", "-march=znver3",
        "-mmmx", "--param", "l1-cache-size=32", "-mtune=znver3", "-quiet", "-o", "<output>"])
    clang = ('clang version 19.1.7\nInstalledDir: /usr/lib/llvm-19/bin\n (in-process)\n'
             ' "/usr/lib/llvm-19/bin/clang" "-cc1" "-target-cpu" "znver4" "-target-feature"'
             ' "+avx" "-o" "null.o" "-x" "c" "/dev/null"\n')
    assert driver_command(clang) == "\0".join([
        "/usr/lib/llvm-19/bin/clang", "-cc1", "-target-cpu", "znver4", "-target-feature",
        "+avx", "-o", "<output>", "-x", "c", "/dev/null"])
    assert driver_command("gcc: error: unrecognized option\n") is None


def test_native_options():
    from offlink.cache.native import native_options

    assert native_options(["gcc", "-O2", "-march=native", "-mtune=generic", "-mcpu=native+nosve",
                           "-mtune=native", "-march=x86-64-v3", "-c", "a.c"]) == [
        "-march=native", "-mcpu=native+nosve", "-mtune=native"]


def test_a_march_native_compile_is_keyed_by_what_native_is_here(offlink, project):
    """-march=native is served: keyed by the driver's expansion (`-march=znver3 -mavx2 ...
    --param l1-cache-size=...`), remembered by compiler and CPU so a warm compile runs no
    driver; a hit is the object a compile gives; another CPU's expansion misses."""
    log = project.parent / "log"

    def probes() -> int:
        return sum("-###" in line.split() for line in log.read_text().splitlines())

    compile_(offlink, project, "-march=native", OFFLINK_NO_CACHE="1")
    uncached = outputs(project)
    assert len(compile_(offlink, project, "-march=native")[1]) == 1  # a miss
    assert probes() == 1
    assert compile_(offlink, project, "-march=native")[1] == []  # a hit
    assert probes() == 0  # the expansion was remembered
    assert outputs(project) == uncached
    # another CPU: the expansion remembered here is not this one's
    tools = [p for p in (project.parent / "cache" / "tools").iterdir()]
    here = {p: p.read_bytes() for p in tools}
    for p in tools:
        p.write_bytes(b"0" * 64)  # every memo: the identity probes' too, re-probed on a miss
    assert len(compile_(offlink, project, "-march=native")[1]) == 1
    assert outputs(project) == uncached
    for p, data in here.items():  # this CPU again: a hit
        p.write_bytes(data)
    assert compile_(offlink, project, "-march=native")[1] == []
    for p in tools:  # forgotten: the driver says it again
        p.unlink()
    assert compile_(offlink, project, "-march=native")[1] == []
    assert probes() == 1
    assert outputs(project) == uncached


LUA = Path(__file__).resolve().parent / "real_projects" / "lua"


def test_lua_with_its_own_march_native_is_served_on_a_rebuild(offlink, project):
    """Lua's makefile as shipped compiles with -march=native: a rebuild after `make clean` is
    served for every CU, and the objects are those an uncached build gives."""
    cc = f"CC={offlink} cc {project.parent / 'cc-log'}"
    log = project.parent / "log"
    flags = "MYCFLAGS=-std=c99 -DLUA_USE_LINUX"
    for name in ("uncached", "out"):
        shutil.copytree(LUA, project.parent / name)
    assert "-march=native" in (LUA / "makefile").read_text()

    def make(name: str, *args: str, **extra: str) -> list[str]:
        log.unlink(missing_ok=True)
        run(["make", "-s", "-j2", "-C", project.parent / name, *args, cc, flags],
            env=env_for(project, **extra))
        return host_compiles(log) if log.exists() else []

    def objects(name: str) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted((project.parent / name).glob("*.o"))}

    make("uncached", "o", OFFLINK_NO_CACHE="1")
    compiled = make("out", "o")
    assert len(compiled) == len(objects("uncached")) > 30
    assert all("-march=native" in line.split() for line in compiled)
    make("out", "clean")
    assert make("out", "o") == []  # every CU served
    assert objects("out") == objects("uncached")


def test_another_offlink_code_misses_what_the_old_one_stored(project, tmp_path):
    """Entries and recipes are keyed by offlink's own code, not its version number: a copy of
    the package with one source file changed (a git checkout of another commit, version number
    unchanged) compiles again instead of being served what the old code made."""
    import sys

    from conftest import ROOT

    pkg = tmp_path / "pkg"
    shutil.copytree(ROOT / "offlink", pkg / "offlink",
                    ignore=shutil.ignore_patterns("__pycache__", "lib"))
    wrapper = tmp_path / "offlink-copy"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{pkg}" exec "{sys.executable}" -m offlink "$@"\n')
    wrapper.chmod(0o755)
    assert len(compile_(str(wrapper), project)[1]) == 1
    assert compile_(str(wrapper), project)[1] == []  # the same code: served
    before = outputs(project)
    with open(pkg / "offlink" / "driver_args.py", "a") as f:
        f.write("# another commit\n")
    assert len(compile_(str(wrapper), project)[1]) == 1  # another code: compiled again
    assert outputs(project) == before
    assert compile_(str(wrapper), project)[1] == []
    # one recipe per code, each with its code's identity among the key's parts
    assert len({r["parts"][2] for r in recipes(project)}) == 2
