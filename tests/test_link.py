"""offlink cc and link on small real programs: plain links, archives, -r, determinism."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run

LIB = """\
int lib_value = 5;
int lib_twice(int x) { return 2 * x; }
const char *lib_side(void) {
#ifdef __OFFLINK_TARGET__
  return __OFFLINK_TARGET__;
#else
  return "host";
#endif
}
"""
UNUSED = "int unused_member(void) { return 9; }\n"
MAIN = """\
#include <stdio.h>
#include <offlink.h>
const char *lib_side(void);
int lib_twice(int);
int main(void) {
  const char *(*side)(void) = offlink_translate(OFFLINK_TABLE, (const void *)lib_side);
  printf("%s %s %d\\n", lib_side(), side(), lib_twice(21));
  return 0;
}
"""


def config(offlink: str, what: str) -> list[str]:
    return run([offlink, "config", what]).stdout.split()


def build_objects(offlink: str, d: Path, cflags=("-O2",)) -> None:
    (d / "lib.c").write_text(LIB)
    (d / "unused.c").write_text(UNUSED)
    (d / "main.c").write_text(MAIN)
    for name in ("lib", "unused", "main"):
        run([offlink, "cc", "gcc", *cflags, *config(offlink, "--cflags"), "-c", f"{name}.c",
             "-o", f"{name}.o"], cwd=d)


def symbols(offlink: str, binary: Path) -> set[str]:
    info = json.loads(run([offlink, "inspect", "--json", binary]).stdout)
    return {s["name"] for s in info["table"]["symbols"]}


def test_plain_link_without_target_code_is_byte_identical(offlink, tmp_path):
    (tmp_path / "p.c").write_text("int main(void) { return 0; }\n")
    run(["gcc", "-c", "p.c", "-o", "p.o"], cwd=tmp_path)
    run(["gcc", "p.o", "-o", "plain"], cwd=tmp_path)
    run([offlink, "link", "gcc", "p.o", "-o", "through"], cwd=tmp_path)
    assert (tmp_path / "plain").read_bytes() == (tmp_path / "through").read_bytes()


def test_fat_objects_link_with_a_plain_linker(offlink, tmp_path):
    build_objects(offlink, tmp_path)
    run(["gcc", "main.o", "lib.o", *config(offlink, "--libs"), "-o", "hostonly"], cwd=tmp_path)
    out = run([tmp_path / "hostonly"]).stdout
    assert out == "host host 42\n"  # no table: translate returns the host function
    sections = run(["readelf", "-S", "-W", tmp_path / "hostonly"]).stdout
    assert "gnu.target_lto" not in sections and ".openmp_target" not in sections


def test_cc_output_is_the_host_object_plus_the_payload(offlink, tmp_path):
    (tmp_path / "lib.c").write_text(LIB)
    run(["gcc", "-O2", "-c", "lib.c", "-o", "plain.o"], cwd=tmp_path)
    run([offlink, "cc", "gcc", "-O2", "-c", "lib.c", "-o", "fat.o"], cwd=tmp_path)
    run(["objcopy", "--remove-section", "gnu.target_lto_x86_64-pc-linux-gnu", "fat.o",
         "stripped.o"], cwd=tmp_path)
    run(["objcopy", "plain.o", "plain2.o"], cwd=tmp_path)  # same writer on both sides
    assert (tmp_path / "stripped.o").read_bytes() == (tmp_path / "plain2.o").read_bytes()
    flags = run(["readelf", "-S", "-W", tmp_path / "fat.o"]).stdout
    line = next(ln for ln in flags.splitlines() if "gnu.target_lto_" in ln)
    assert " E " in line  # SHF_EXCLUDE: a host link leaves it out


def test_cc_depfile_is_as_the_compiler_writes_it(offlink, tmp_path):
    (tmp_path / "lib.c").write_text('#include "lib.h"\n' + LIB)
    (tmp_path / "lib.h").write_text("/* header */\n")
    run([offlink, "cc", "gcc", "-MMD", "-c", "lib.c", "-o", "lib.o"], cwd=tmp_path)
    assert (tmp_path / "lib.d").read_text().split() == ["lib.o:", "lib.c", "lib.h"]


def test_archive_members_used_by_the_link_only(offlink, tmp_path):
    build_objects(offlink, tmp_path)
    run(["ar", "rcs", "libfat.a", "lib.o", "unused.o"], cwd=tmp_path)
    libs = config(offlink, "--libs")
    run([offlink, "link", "gcc", "main.o", "-L.", "-lfat", *libs, "-o", "viaL"], cwd=tmp_path)
    run([offlink, "link", "gcc", "main.o", "libfat.a", *libs, "-o", "direct"], cwd=tmp_path)
    for prog in ("viaL", "direct"):
        assert run([tmp_path / prog]).stdout == "host x86_64-pc-linux-gnu 42\n"
        names = symbols(offlink, tmp_path / prog)
        assert "lib_twice" in names and "unused_member" not in names
    run([offlink, "link", "gcc", "main.o", "-Wl,--whole-archive", "libfat.a",
         "-Wl,--no-whole-archive", *libs, "-o", "whole"], cwd=tmp_path)
    assert "unused_member" in symbols(offlink, tmp_path / "whole")
    info = json.loads(run([offlink, "inspect", "--json", tmp_path / "libfat.a"]).stdout)
    assert [c["source"] for c in info["cus"]] == ["lib.c", "unused.c"]


def test_relocatable_link_keeps_target_code(offlink, tmp_path):
    build_objects(offlink, tmp_path)
    run([offlink, "link", "gcc", "-r", "lib.o", "unused.o", "-o", "both.o"], cwd=tmp_path)
    info = json.loads(run([offlink, "inspect", "--json", tmp_path / "both.o"]).stdout)
    assert [c["source"] for c in info["cus"]] == ["lib.c", "unused.c"]
    run([offlink, "link", "gcc", "main.o", "both.o", *config(offlink, "--libs"), "-o", "prog"],
        cwd=tmp_path)
    assert run([tmp_path / "prog"]).stdout == "host x86_64-pc-linux-gnu 42\n"
    assert {"lib_twice", "unused_member"} <= symbols(offlink, tmp_path / "prog")


def test_meson_style_cc_delegates_links(offlink, tmp_path):
    build_objects(offlink, tmp_path)
    run([offlink, "cc", "gcc", "main.o", "lib.o", *config(offlink, "--libs"), "-o", "prog"],
        cwd=tmp_path)
    assert run([tmp_path / "prog"]).stdout == "host x86_64-pc-linux-gnu 42\n"
    assert run([offlink, "cc", "gcc", "--version"]).stdout.startswith("gcc")


def test_response_file_and_dry_run(offlink, tmp_path):
    build_objects(offlink, tmp_path)
    libs = " ".join(config(offlink, "--libs"))
    (tmp_path / "link.rsp").write_text(f"main.o lib.o {libs} -o prog\n")
    dry = run([offlink, "link", "--dry-run", "gcc", "@link.rsp"], cwd=tmp_path).stdout
    assert "-fPIC -c" in dry and "-Wl,-Bsymbolic" in dry and "offlink-table.o" in dry
    assert not (tmp_path / "prog").exists()
    run([offlink, "link", "gcc", "@link.rsp"], cwd=tmp_path)
    assert run([tmp_path / "prog"]).stdout == "host x86_64-pc-linux-gnu 42\n"


def test_save_temps_and_verbose(offlink, tmp_path):
    build_objects(offlink, tmp_path)
    proc = run([offlink, "link", "--save-temps", "--verbose", "gcc", "main.o", "lib.o",
                *config(offlink, "--libs"), "-o", "prog"], cwd=tmp_path)
    kept = Path(proc.stderr.split("temporary files kept in ")[1].split()[0])
    assert (kept / "offlink-table.o").is_file()
    assert "-Wl,-Bsymbolic" in proc.stderr  # --verbose shows the device link


def test_deterministic_also_in_different_folders(offlink, tmp_path):
    outputs = []
    for name in ("first", "second/deeper"):
        d = tmp_path / name
        d.mkdir(parents=True)
        build_objects(offlink, d)
        run([offlink, "link", "gcc", "main.o", "lib.o", *config(offlink, "--libs"), "-o",
             "prog"], cwd=d)
        outputs.append((d / "prog").read_bytes())
    run([offlink, "link", "gcc", "main.o", "lib.o", *config(offlink, "--libs"), "-o", "again"],
        cwd=tmp_path / "first")
    assert outputs[0] == outputs[1] == (tmp_path / "first" / "again").read_bytes()


def test_fill_changes_nothing_outside_the_section(offlink, tmp_path):
    build_objects(offlink, tmp_path)
    proc = run([offlink, "link", "--save-temps", "gcc", "main.o", "lib.o",
                *config(offlink, "--libs"), "-o", "prog"], cwd=tmp_path)
    kept = Path(proc.stderr.split("temporary files kept in ")[1].split()[0])
    # Relink the same host link by hand: the placeholder as reserved, before any fill.
    host = run(["gcc", "main.o", "lib.o", *config(offlink, "--libs"), kept / "offlink-table.o",
                "-o", "unfilled"], cwd=tmp_path)
    del host
    before = (tmp_path / "unfilled").read_bytes()
    after = (tmp_path / "prog").read_bytes()
    assert len(before) == len(after)
    section = next(ln for ln in run(["readelf", "-S", "-W", tmp_path / "prog"]).stdout
                   .splitlines() if ".openmp_target" in ln).split()
    offset, size = int(section[4], 16), int(section[5], 16)
    assert before[:offset] == after[:offset] and before[offset + size:] == after[offset + size:]
    assert before[offset:offset + size] != after[offset:offset + size]


def test_fill_and_verify_read_only_headers_symbols_and_the_section(offlink, tmp_path):
    """What fill and verify read of the linked binary does not grow with its size: a binary
    with 64 MiB more after its last section is opened, searched and its table read within a
    few MiB of memory (before: the whole file was read in)."""
    import tracemalloc

    from offlink.elf import ElfFile
    from offlink.link.fill import host_symbols

    build_objects(offlink, tmp_path)
    run([offlink, "link", "gcc", "main.o", "lib.o", *config(offlink, "--libs"), "-o", "prog"],
        cwd=tmp_path)
    prog = tmp_path / "prog"
    table = ElfFile.open(prog).content(ElfFile.open(prog).section(".openmp_target")).tobytes()
    os.truncate(prog, prog.stat().st_size + (64 << 20))  # a hole: no disk, no page cache
    tracemalloc.start()
    try:
        elf = ElfFile.open(prog)
        section = elf.section(".openmp_target")
        assert bytes(elf.content(section)) == table
        assert "lib_twice" in host_symbols(elf)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"{peak} bytes allocated to read a table of {len(table)}"


def test_relink_from_the_cache_writes_no_objects(offlink, tmp_path):
    """A relink with nothing changed finds every object and the image in the cache and copies
    no object into its work folder; after a change, the device link gets every object."""
    build_objects(offlink, tmp_path)
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
    link = [offlink, "link", "--save-temps", "gcc", "main.o", "lib.o",
            *config(offlink, "--libs")]

    def kept_objects(proc) -> list[str]:
        kept = Path(proc.stderr.split("temporary files kept in ")[1].split()[0])
        return sorted(p.name for p in kept.rglob("*.o") if p.name != "offlink-table.o")

    first = run([*link, "-o", "first"], cwd=tmp_path, env=env)
    assert len(kept_objects(first)) == 2  # compiled
    again = run([*link, "-o", "again"], cwd=tmp_path, env=env)
    assert kept_objects(again) == []
    assert (tmp_path / "again").read_bytes() == (tmp_path / "first").read_bytes()
    (tmp_path / "lib.c").write_text(LIB.replace("2 * x", "3 * x"))
    run([offlink, "cc", "gcc", "-O2", *config(offlink, "--cflags"), "-c", "lib.c", "-o",
         "lib.o"], cwd=tmp_path)
    changed = run([*link, "-o", "changed"], cwd=tmp_path, env=env)
    assert len(kept_objects(changed)) == 2  # one compiled, one from the cache for the link
    assert run([tmp_path / "changed"]).stdout == "host x86_64-pc-linux-gnu 63\n"


def test_jobs_option_and_env(offlink, tmp_path):
    build_objects(offlink, tmp_path)
    env = {**os.environ, "OFFLINK_JOBS": "1"}
    run([offlink, "link", "--jobs", "2", "gcc", "main.o", "lib.o", *config(offlink, "--libs"),
         "-o", "prog"], cwd=tmp_path, env=env)
    assert run([tmp_path / "prog"]).stdout == "host x86_64-pc-linux-gnu 42\n"


def test_output_mode_is_the_plain_links(offlink, tmp_path):
    build_objects(offlink, tmp_path)
    libs = config(offlink, "--libs")
    run(["gcc", "main.o", "lib.o", *libs, "-o", "plain"], cwd=tmp_path)
    run([offlink, "link", "gcc", "main.o", "lib.o", *libs, "-o", "fat"], cwd=tmp_path)
    assert (tmp_path / "fat").stat().st_mode == (tmp_path / "plain").stat().st_mode


def test_cc_response_file_with_depfile_and_output(offlink, tmp_path):
    (tmp_path / "lib.c").write_text('#include "lib.h"\n' + LIB)
    (tmp_path / "lib.h").write_text("/* header */\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "cc.rsp").write_text("-MMD -o out/lib.o\n")
    run([offlink, "cc", "gcc", "-c", "lib.c", "@cc.rsp"], cwd=tmp_path)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["lib.d", "lib.o"]
    assert (tmp_path / "out" / "lib.d").read_text().split() == ["out/lib.o:", "lib.c", "lib.h"]
    sections = run(["readelf", "-S", "-W", tmp_path / "out" / "lib.o"]).stdout
    assert "gnu.target_lto_" in sections


def test_plain_link_of_32_bit_objects_passes_through(offlink, tmp_path):
    (tmp_path / "s.s").write_text(".globl _start\n_start:\n  hlt\n")
    run(["as", "--32", "s.s", "-o", "s.o"], cwd=tmp_path)
    flags = ["-m32", "-nostdlib", "-no-pie", "-static"]
    run(["gcc", *flags, "s.o", "-o", "plain"], cwd=tmp_path)
    run([offlink, "link", "gcc", *flags, "s.o", "-o", "through"], cwd=tmp_path)
    assert (tmp_path / "plain").read_bytes() == (tmp_path / "through").read_bytes()


def test_deep_verify_with_lief(offlink, tmp_path):
    build_objects(offlink, tmp_path)
    libs = config(offlink, "--libs")
    for extra in ([], ["-s"], ["-shared"]):
        objs = ["lib.o"] if extra == ["-shared"] else ["main.o", "lib.o"]
        run([offlink, "link", "--verify-deep", "gcc", *extra, *objs, *libs, "-o", "prog"],
            cwd=tmp_path)
    env = {**os.environ, "OFFLINK_VERIFY": "deep"}
    run([offlink, "link", "gcc", "main.o", "lib.o", *libs, "-o", "prog"], cwd=tmp_path, env=env)
    assert run([tmp_path / "prog"]).stdout == "host x86_64-pc-linux-gnu 42\n"


def test_deep_verify_catches_a_table_that_does_not_match(offlink, tmp_path):
    import pytest

    from offlink.elf import ElfFile
    from offlink.errors import LinkError
    from offlink.formats.table import RowSpec
    from offlink.link.deep_verify import deep_verify
    from offlink.link.fill import Filled

    build_objects(offlink, tmp_path)
    run([offlink, "link", "gcc", "main.o", "lib.o", *config(offlink, "--libs"), "-o", "prog"],
        cwd=tmp_path)
    prog = str(tmp_path / "prog")
    elf = ElfFile.open(prog)
    sec = elf.section(".openmp_target")
    twice = next(s for s in elf.symbols() if s.name == "lib_twice")
    good = Filled(bytes(elf.content(sec)), [RowSpec("lib_twice", twice.st_value - sec.sh_addr,
                                                    1, "function")], [], sec.sh_addr,
                  sec.sh_offset)
    deep_verify(prog, good)
    for bad, what in (
            (good._replace(rows=[RowSpec("lib_twice", 8, 1, "function")]),
             "'lib_twice' is at"),
            (good._replace(table=good.table[:-1] + b"\1"), "does not hold"),
            (good._replace(section_addr=good.section_addr + 64), "expected")):
        with pytest.raises(LinkError, match=what):
            deep_verify(prog, bad)


def test_archive_of_slim_lto_members(offlink, tmp_path):
    # -flto objects keep their symbols in GCC's LTO symbol table, not in the ELF one: member
    # selection must read that table, or lib.o's target code is silently left out.
    build_objects(offlink, tmp_path, cflags=("-O2", "-flto"))
    run(["ar", "rcs", "libfat.a", "lib.o", "unused.o"], cwd=tmp_path)
    run([offlink, "link", "gcc", "-flto", "main.o", "libfat.a", *config(offlink, "--libs"),
         "-o", "prog"], cwd=tmp_path)
    assert run([tmp_path / "prog"]).stdout == "host x86_64-pc-linux-gnu 42\n"
    names = symbols(offlink, tmp_path / "prog")
    assert "lib_side" in names and "unused_member" not in names


def test_host_relinks_are_bounded_and_signal_handlers_restored(offlink, tmp_path, monkeypatch):
    """A registration whose order never settles ends in one error, not an endless relink;
    the handlers offlink sets for the link are the caller's again afterwards."""
    import signal

    import pytest

    from offlink.errors import LinkError
    from offlink.link import host, pipeline
    from offlink.toolchains import registrations

    build_objects(offlink, tmp_path)
    monkeypatch.chdir(tmp_path)
    links = []
    real_host_link = host.run_host_link

    def host_link(argv):
        links.append(argv)
        if len(links) > 10:
            raise AssertionError("the host link is repeated without bound")
        real_host_link(argv)

    class NeverSettles:
        option = "a registration"

        def build(self):
            pass

        def host_argv(self, host, extra_at):
            return host

        def check(self, path):
            return False

    monkeypatch.setattr(host, "run_host_link", host_link)
    monkeypatch.setattr(registrations, "host_steps", lambda *args: [NeverSettles()])
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    libs = config(offlink, "--libs")
    with pytest.raises(LinkError, match="did not settle in 3 links"):
        pipeline.link(["gcc", "main.o", "lib.o", *libs, "-o", "prog"], pipeline.LinkOptions())
    assert len(links) == 3
    assert {s: signal.getsignal(s) for s in before} == before
    assert not (tmp_path / "prog").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def _install_across_file_systems(tmp_path, monkeypatch, unnamed: bool):
    import errno

    from offlink.link import staging

    real_rename = os.rename

    def rename(src, dst):  # as if TMPDIR were on another file system than the output
        if str(src).endswith("staged-prog"):
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        real_rename(src, dst)

    monkeypatch.setattr(staging.os, "rename", rename)
    if unnamed:  # the O_TMPFILE is linked into place: no named file on the way
        def no_named_file(*args, **kwargs):
            raise AssertionError("fell back to a named temporary file")

        import tempfile

        monkeypatch.setattr(tempfile, "mkstemp", no_named_file)
    else:  # no way to name an O_TMPFILE: the named, locked fallback
        real_isdir = os.path.isdir
        monkeypatch.setattr(staging.os.path, "isdir",
                            lambda p: False if p == "/proc/self/fd" else real_isdir(p))
    out = tmp_path / "out"
    out.mkdir()
    (out / "prog").write_text("previous output")
    staged = tmp_path / "staged-prog"
    staged.write_bytes(b"\x7fELF new output" * 1000)
    staged.chmod(0o751)
    slot = staging.OutputSlot(str(out / "prog"))
    assert slot.unnamed == unnamed
    # Before the install the previous output is whole and nothing else is in its folder.
    assert [p.name for p in out.iterdir()] == ["prog"]
    assert (out / "prog").read_text() == "previous output"
    slot.install(str(staged))
    slot.close()
    assert (out / "prog").read_bytes() == staged.read_bytes()
    assert (out / "prog").stat().st_mode & 0o777 == 0o751
    assert [p.name for p in out.iterdir()] == ["prog"]


def test_output_installed_from_another_file_system_through_o_tmpfile(tmp_path, monkeypatch):
    _install_across_file_systems(tmp_path, monkeypatch, unnamed=True)


def test_output_installed_from_another_file_system_without_o_tmpfile(tmp_path, monkeypatch):
    _install_across_file_systems(tmp_path, monkeypatch, unnamed=False)


def test_staged_file_of_a_dead_link_is_swept_by_the_next_link_of_that_output(tmp_path):
    """Where no O_TMPFILE can be used, a killed link may leave `.prog.offlink-*`; the next
    slot for the same output removes it, but never one that a running link holds locked."""
    import fcntl

    from offlink.link import staging

    dead = tmp_path / ".prog.offlink-dead1234"
    dead.write_text("half a binary")
    alive = tmp_path / ".prog.offlink-alive567"
    alive.write_text("being written")
    other = tmp_path / ".other.offlink-dead999"
    other.write_text("another output's")
    with open(alive, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        pid = os.fork()
        if pid == 0:  # another process: flock locks are per open file, not per process
            try:
                staging.OutputSlot(str(tmp_path / "prog")).close()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    assert not dead.exists()
    assert alive.exists() and other.exists()


def test_cc_compiles_and_links_in_one_step_with_the_target_code(offlink, tmp_path):
    """`offlink cc gcc a.c b.c -o app` (autoconf's and many makefiles' way): each source is
    compiled to a fat object, so the program has its table and runs its target code."""
    (tmp_path / "lib.c").write_text(LIB)
    (tmp_path / "main.c").write_text(MAIN)
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    run([offlink, "cc", "gcc", "-O2", "-MMD", *config(offlink, "--cflags"), "main.c", "lib.c",
         *config(offlink, "--libs"), "-o", "prog"], cwd=tmp_path, env=env)
    assert run([tmp_path / "prog"]).stdout == "host x86_64-pc-linux-gnu 42\n"
    assert {"lib_twice", "lib_side"} <= symbols(offlink, tmp_path / "prog")
    assert (tmp_path / "prog.d").read_text().startswith("prog:")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib.c", "main.c", "prog", "prog.d",
                                                          "tmpdir"]
    assert list(tmp.iterdir()) == []


def test_work_folder_taken_by_another_sweep_before_its_lock(tmp_path, monkeypatch):
    """Parallel compiles and links sweep each other's TMPDIR: a folder swept between its
    making and its lock is replaced by a new one, never an error (seen under make -j2)."""
    from offlink.link import staging

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    real_new_folder = staging.new_folder
    made = []

    def new_folder(parent, prefix):
        path = real_new_folder(parent, prefix)
        made.append(path)
        if len(made) == 1:
            staging.remove_tree(path)  # what another offlink's sweep does to an unlocked folder
        return path

    monkeypatch.setattr(staging, "new_folder", new_folder)
    work = staging.WorkFolder(keep=False, kind="cc")
    assert len(made) == 2 and work.path == made[1] and os.path.isdir(work.path)
    assert os.path.dirname(work.path) == str(tmp_path)
    assert os.path.basename(work.path).startswith("offlink-cc-")
    assert os.stat(work.path).st_mode & 0o777 == 0o700
    # Locked while in use: a sweep (here by another process) leaves it alone.
    pid = os.fork()
    if pid == 0:
        try:
            staging.WorkFolder(keep=False).close()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert os.path.isdir(work.path)
    (Path(work.path) / "sub").mkdir()
    (Path(work.path) / "sub" / "f").write_text("x")
    os.symlink(tmp_path, Path(work.path) / "sub" / "link")  # removed, never followed
    work.close()
    assert os.listdir(tmp_path) == []


def test_work_folder_sweeps_every_kind_in_one_listing(tmp_path, monkeypatch):
    """What killed links and compiles of every kind left in TMPDIR is swept by the next work
    folder, listing TMPDIR once (a shared /tmp may hold thousands of entries; it was listed
    once per kind); others' entries and kept --save-temps folders stay."""
    from offlink.link import staging

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    left = [tmp_path / f"{prefix}dead" for prefix in staging.WORK_PREFIXES.values()]
    for path in left:
        path.mkdir()
        (path / "file").write_text("left")
    (tmp_path / f"{staging.KEPT_PREFIX}kept").mkdir()
    (tmp_path / "someone-else").mkdir()
    listed = []
    real_listdir = os.listdir

    def listdir(path="."):
        listed.append(path)
        return real_listdir(path)

    monkeypatch.setattr(staging.os, "listdir", listdir)
    work = staging.WorkFolder(keep=False)
    assert listed == [str(tmp_path)]
    assert not any(path.exists() for path in left)
    work.close()
    assert sorted(real_listdir(tmp_path)) == [f"{staging.KEPT_PREFIX}kept", "someone-else"]


def test_compiles_sweep_a_large_tmpdir_now_and_then_links_always(tmp_path, monkeypatch):
    """Listing a shared /tmp of thousands of entries cost every `offlink cc` ~3 ms: a compile
    sweeps TMPDIR where it is small, else one time in SWEEP_ODDS; a link always does, so what
    a killed compile left goes at the next link at the latest."""
    from offlink.link import staging

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    dead = tmp_path / "offlink-cc-dead"
    dead.mkdir()
    listed = []
    real_listdir = os.listdir
    monkeypatch.setattr(staging.os, "listdir",
                        lambda path=".": (listed.append(path), real_listdir(path))[1])
    staging.WorkFolder(keep=False, kind="cc").close()  # small: swept
    assert listed == [str(tmp_path)] and not dead.exists()
    dead.mkdir()
    monkeypatch.setattr(staging, "SMALL_FOLDER", 0)  # as if TMPDIR held thousands of entries
    draws = iter([b"\x10", b"\xff", b"\x0f"])  # os.urandom(1): sweep when below 256 / 16
    real_urandom = os.urandom
    monkeypatch.setattr(staging.os, "urandom",
                        lambda n: next(draws) if n == 1 else real_urandom(n))
    listed.clear()
    staging.WorkFolder(keep=False, kind="cc").close()
    staging.WorkFolder(keep=False, kind="cc").close()
    assert listed == [] and dead.exists()
    staging.WorkFolder(keep=False, kind="cc").close()  # its one time in 16
    assert listed == [str(tmp_path)] and not dead.exists()
    dead.mkdir()
    listed.clear()
    staging.WorkFolder(keep=False, kind="link").close()
    assert listed == [str(tmp_path)] and not dead.exists()
    assert os.listdir(tmp_path) == []


def test_output_that_is_a_fifo_is_written_into_not_replaced(offlink, tmp_path):
    """`-o /dev/null` (configure scripts) or a FIFO: written into, as ld does, never replaced
    by a regular file (which for /dev/null, as root, would break the machine)."""
    import stat
    import threading

    build_objects(offlink, tmp_path)
    run([offlink, "link", "gcc", "main.o", "lib.o", *config(offlink, "--libs"), "-o", "prog"],
        cwd=tmp_path)
    fifo = tmp_path / "fifo"
    for argv in (["link", "gcc", "main.o", "lib.o", *config(offlink, "--libs"), "-o", "fifo"],
                 ["cc", "gcc", "-O2", *config(offlink, "--cflags"), "-c", "lib.c", "-o",
                  "fifo"]):
        os.mkfifo(fifo)
        got: list[bytes] = []
        reader = threading.Thread(target=lambda out=got: out.append(fifo.read_bytes()),
                                  daemon=True)
        reader.start()
        proc = run([offlink, *argv], cwd=tmp_path, check=False)
        if not stat.S_ISFIFO(fifo.stat().st_mode):
            fifo.unlink()
            raise AssertionError(f"{argv[0]}: the FIFO was replaced by a regular file")
        if proc.returncode != 0:
            with open(fifo, "wb"):  # let the reader end
                pass
        reader.join(30)
        assert proc.returncode == 0, proc.stderr
        expected = tmp_path / ("prog" if argv[0] == "link" else "lib.o")
        assert got == [expected.read_bytes()]
        fifo.unlink()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
INTERNALS = """\
__attribute__((visibility("internal"))) int helper(int x) { return x + 1; }
__attribute__((visibility("hidden"))) int hid(int x) { return x + 2; }
int api(int x) { return helper(x) * hid(x); }
"""
CALLER = """\
#include <stdio.h>
int api(int);
int main(void) { printf("%d\\n", api(3)); return 0; }
"""


def test_internal_and_hidden_functions_are_not_offered(offlink, tmp_path):
    """Lua marks its internals `internal`: treated as `hidden`, and inspect says why."""
    (tmp_path / "lib.c").write_text(INTERNALS)
    (tmp_path / "main.c").write_text(CALLER)
    for name in ("lib", "main"):
        run([offlink, "cc", "gcc", "-O2", "-c", f"{name}.c"], cwd=tmp_path)
    run([offlink, "link", "gcc", "main.o", "lib.o", "-o", "app"], cwd=tmp_path)
    assert run([tmp_path / "app"]).stdout == "20\n"
    assert symbols(offlink, tmp_path / "app") == {"api", "main"}
    for name, seen in (("helper", "internal"), ("hid", "hidden")):
        proc = run([offlink, "inspect", "app", "--symbol", name], cwd=tmp_path, check=False)
        assert proc.returncode == 1, name  # not offered: a non-zero exit, as grep's
        assert f"with {seen} visibility" in proc.stdout and "offlink cc" not in proc.stdout
    # Named in the CU's explicit list, it is refused with the reason.
    run([offlink, "cc", "--offload-symbol", "helper", "gcc", "-c", "lib.c", "-o", "named.o"],
        cwd=tmp_path)
    proc = run([offlink, "link", "gcc", "main.o", "named.o", "-o", "named"], cwd=tmp_path,
               check=False)
    assert proc.returncode != 0 and not (tmp_path / "named").exists()
    assert proc.stderr.startswith("offlink: error: lib.c") and "internal visibility" in \
        proc.stderr and len(proc.stderr.splitlines()) == 1


def test_a_name_hidden_by_another_cus_declaration(offlink, tmp_path):
    """The linker hides a definition that another CU declares hidden: not offered; offered by
    name, the error says which CU hid it."""
    (tmp_path / "def.c").write_text("int counter = 1;\n")
    (tmp_path / "ref.c").write_text('extern int counter __attribute__((visibility("hidden")));\n'
                                    "int bump(void) { return ++counter; }\n")
    run([offlink, "cc", "gcc", "-c", "def.c"], cwd=tmp_path)
    run([offlink, "cc", "gcc", "-c", "ref.c"], cwd=tmp_path)
    for _ in range(2):  # the second link takes the image from the cache
        run([offlink, "link", "gcc", "-shared", "def.o", "ref.o", "-o", "libx.so"], cwd=tmp_path)
        assert symbols(offlink, tmp_path / "libx.so") == {"bump"}
    proc = run([offlink, "inspect", "libx.so", "--symbol", "counter"], cwd=tmp_path, check=False)
    assert proc.returncode == 1
    assert "in the target code of x86_64-pc-linux-gnu, but not as an exported symbol" in \
        proc.stdout
    run([offlink, "cc", "--offload-symbol", "counter", "gcc", "-c", "def.c", "-o", "named.o"],
        cwd=tmp_path)
    proc = run([offlink, "link", "gcc", "-shared", "named.o", "ref.o", "-o", "libn.so"],
               cwd=tmp_path, check=False)
    assert proc.returncode != 0 and not (tmp_path / "libn.so").exists()
    assert "'counter' offered by def.c (named.o) is not exported by the image: ref.c (ref.o) " \
        "declares it with hidden visibility" in proc.stderr


def test_shared_library_named_by_path_reaches_the_image(offlink, tmp_path):
    """CMake links an in-tree library by its path (`app.o /abs/libz.so.1.3`): the image's
    references to it resolve as they do with `-L. -lNAME`, and the program runs its image."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (tmp_path / "z.c").write_text("int zadd(int a, int b) { return a + b; }\n")
    (tmp_path / "app.c").write_text(
        "#include <stdio.h>\n#include <offlink.h>\nint zadd(int, int);\n"
        "int twice(int x) { return zadd(x, x); }\n"
        "int main(void) {\n"
        "  int (*t)(int) = (int (*)(int))offlink_translate(OFFLINK_TABLE, (void *)twice);\n"
        "  printf(\"%d %d\\n\", t(21), t != twice);\n  return 0;\n}\n")
    run([offlink, "cc", "gcc", "-fPIC", "-c", "z.c"], cwd=tmp_path)
    run([offlink, "link", "gcc", "-shared", "-Wl,-soname,libz1.so.1", "z.o", "-o",
         sub / "libz1.so.1.3"], cwd=tmp_path)
    (sub / "libz1.so.1").symlink_to("libz1.so.1.3")
    run([offlink, "cc", "gcc", *config(offlink, "--cflags"), "-c", "app.c"], cwd=tmp_path)
    for lib in (sub / "libz1.so.1.3", "sub/libz1.so.1.3", "-Lsub -l:libz1.so.1.3"):
        run([offlink, "link", "gcc", "app.o", *str(lib).split(), f"-Wl,-rpath,{sub}",
             *config(offlink, "--libs"), "-o", "app"], cwd=tmp_path)
        assert run([tmp_path / "app"]).stdout == "42 1\n"
        assert symbols(offlink, tmp_path / "app") == {"main", "twice"}


SANITIZED = """\
int buf[4];
int poke(int i) { return buf[i]; }
int shift(int x, int n) { return x << n; }
"""
SANITIZED_MAIN = """\
#include <stdio.h>
#include <stdlib.h>
#include <offlink.h>
int poke(int);
int shift(int, int);
int main(int argc, char **argv) {
  int (*p)(int) = (int (*)(int))offlink_translate(OFFLINK_TABLE, (void *)poke);
  int (*s)(int, int) = (int (*)(int, int))offlink_translate(OFFLINK_TABLE, (void *)shift);
  printf("%d %d\\n", p != poke && s != shift, s(1, 3));
  fflush(stdout);
  return argv[1][0] == 'p' ? p(atoi(argv[2])) : s(1, atoi(argv[2]));
}
"""


ASAN_REPORT = "AddressSanitizer: global-buffer-overflow"
UBSAN_REPORT = "u.c:3:36: runtime error: shift exponent 40"


@pytest.mark.parametrize("compiler,sanitizer,link,bad,report", [
    ("gcc", "address", [], ["p", "4"], ASAN_REPORT),
    ("gcc", "address", ["-static-libasan"], ["p", "4"], ASAN_REPORT),
    ("gcc", "undefined", [], ["s", "40"], UBSAN_REPORT),
    ("gcc", "undefined", ["-static-libubsan"], ["s", "40"], UBSAN_REPORT),
    ("clang", "address", [], ["p", "4"], ASAN_REPORT),
])
def test_sanitized_program_runs_its_image_with_the_sanitizer(offlink, tmp_path, compiler,
                                                             sanitizer, link, bad, report):
    """The image of sanitized CUs is linked with the sanitizer the program runs: an error in
    the image's code (the translated function) is reported by that runtime."""
    (tmp_path / "u.c").write_text(SANITIZED)
    (tmp_path / "main.c").write_text(SANITIZED_MAIN)
    flags = ["-g", f"-fsanitize={sanitizer}", "-fno-sanitize-recover=all"]
    for name in ("u", "main"):
        run([offlink, "cc", compiler, *flags, *config(offlink, "--cflags"), "-c", f"{name}.c"],
            cwd=tmp_path)
    run([offlink, "link", compiler, *flags, *link, "main.o", "u.o", *config(offlink, "--libs"),
         "-o", "app"], cwd=tmp_path)
    assert run([tmp_path / "app", "p", "1"]).stdout == "1 8\n"
    proc = run([tmp_path / "app", *bad], check=False)
    assert proc.returncode != 0 and proc.stdout == "1 8\n" and report in proc.stderr
    if sanitizer == "address":  # poke's frame is the image's (dlopen'ed), far from main's
        pc = [int(ln.split()[1], 16) for ln in proc.stderr.splitlines()
              if ln.strip().startswith(("#0 ", "#1 "))]
        assert abs(pc[0] - pc[1]) > 1 << 32
