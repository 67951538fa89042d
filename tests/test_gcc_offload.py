"""GCC's own offload objects (gcc -fopenmp -foffload=nvptx-none -c) linked by offlink.

The sample samples/gcc_openmp is built once and linked twice: by offlink and by GCC itself.
Both must print the expected output (host fallback: no GPU here), and offlink's table must
hold what GCC's positional host tables hold, by name. The image is checked with ptxas.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
from conftest import ROOT, copy_sample, make_sample, need_tool, needs_tool, run

from offlink.elf import SHT_SYMTAB, STT_FILE, STT_FUNC, STT_OBJECT, ElfFile
from offlink.errors import LinkError
from offlink.table import Table
from offlink.toolchains.gcc import dialect as gcc

ACCEL = gcc.accel_compiler("12")
HAVE_GCC_OFFLOAD = shutil.which(ACCEL) is not None and shutil.which("nvptx-none-ld") is not None
NO_GCC_OFFLOAD = (f"{ACCEL} or nvptx-none-ld missing (apt-get install gcc-12-offload-nvptx "
                  f"nvptx-tools; .ci/run installs them)")
needs_gcc_offload = needs_tool(not HAVE_GCC_OFFLOAD, NO_GCC_OFFLOAD)
PTXAS = shutil.which("ptxas") or shutil.which("/usr/local/cuda/bin/ptxas")
NVLINK = shutil.which("nvlink") or shutil.which("/usr/local/cuda/bin/nvlink")
needs_ptxas = needs_tool(PTXAS is None, "ptxas (CUDA) not installed")
CFLAGS = ["-O2", "-fopenmp", "-foffload=nvptx-none"]
# offlink's link of them: -foffload=nvptx-none, as GCC's link needs where gcc-12-offload-amdgcn
# is installed too (without it, GCC builds an image for every installed offload compiler).
GCC_LINK = ["gcc", "-fopenmp", "-foffload=nvptx-none",
            "-foffload-options=-misa=sm_80"]  # GCC 12's default sm_30: CUDA 12+'s ptxas refuses it


@pytest.fixture(scope="module")
def sample(offlink, tmp_path_factory) -> Path:
    """samples/gcc_openmp built, linked by offlink and by GCC, and both run."""
    need_tool(HAVE_GCC_OFFLOAD, NO_GCC_OFFLOAD)
    s = copy_sample("gcc_openmp", tmp_path_factory.mktemp("gcc"))
    make_sample(offlink, s, "run", "gcc-run")
    return s


def table_of(offlink: str, binary: Path) -> dict:
    return json.loads(run([offlink, "inspect", "--json", binary]).stdout)["table"]


def names_at(binary: Path) -> dict[int, str]:
    """Address -> the function or variable symbol there (statics included)."""
    return {s.st_value: s.name for s in ElfFile.open(binary).symbols()
            if s.defined and s.st_type in (STT_FUNC, STT_OBJECT)}


@needs_gcc_offload
def test_offlink_and_gcc_links_print_the_same(sample):
    expected = (sample / "expected.txt").read_text()
    assert (sample / "build" / "output.txt").read_text() == expected
    assert (sample / "build" / "output.gcc.txt").read_text() == expected
    assert "host fallback" in expected  # no GPU here: libgomp runs the regions on the host


@needs_gcc_offload
def test_table_holds_what_gcc_host_tables_hold(offlink, sample):
    prog, prog_gcc = sample / "build" / "gcc_openmp", sample / "build" / "gcc_openmp.gcc"
    elf = ElfFile.open(prog_gcc)
    at_gcc = names_at(prog_gcc)
    gcc_funcs = Counter(at_gcc[a] for a, _ in gcc.table_slots(elf, gcc.FUNCS_SECTION, 8))
    gcc_vars = Counter((at_gcc[a], s & ~gcc.LINK_FLAG, bool(s & gcc.LINK_FLAG))
                       for a, s in gcc.table_slots(elf, gcc.VARS_SECTION, 16))
    at = names_at(prog)
    rows = Table.open(prog).symbols
    funcs = Counter(at[r.address] for r in rows if r.kind == "function")
    variables = Counter((at[r.address], r.size, r.kind == "link-variable")
                        for r in rows if r.kind != "function")
    assert funcs == gcc_funcs and len(funcs) == 5
    assert variables == gcc_vars
    assert variables[("squares", 256, True)] == 1 and variables[("calls", 4, False)] == 2
    table = table_of(offlink, prog)
    assert [(t["name"], t["kind"]) for t in table["targets"]] == [("nvptx-none", "nvptx-none")]
    # Rows are keyed by the device's names; a region's key is its kernel's name.
    keys = {s["name"] for s in table["symbols"]}
    assert {"scale", "squares$linkptr", "main$_omp_fn$0", "stats_sum$_omp_fn$0"} <= keys


@needs_gcc_offload
def test_statics_of_the_same_name_get_distinct_keys(offlink, sample, tmp_path):
    prog = sample / "build" / "gcc_openmp"
    rows = {s.name: s for s in Table.open(prog).symbols if s.name.startswith("calls")}
    assert len(rows) == 2 and "calls" not in rows
    saxpy = next(r for n, r in rows.items() if n.startswith("calls$saxpy_c$"))
    stats = next(r for n, r in rows.items() if n.startswith("calls$stats_c$"))
    assert saxpy.address != stats.address
    at = names_at(prog)
    assert at[saxpy.address] == at[stats.address] == "calls"
    # The static that follows STT_FILE saxpy.c is saxpy.c's.
    file, owner = "", {}
    for s in ElfFile.open(prog).symbols():
        file = s.name if s.st_type == STT_FILE else file
        if s.name == "calls":
            owner[s.st_value] = file
    assert owner[saxpy.address] == "saxpy.c" and owner[stats.address] == "stats.c"
    # The device side is renamed to match: the image defines both keys, and no plain `calls`.
    image = tmp_path / "image.ptx"
    run([offlink, "extract", prog, "--target", "nvptx-none", "--output", image])
    defined = gcc.ptx_definitions(image.read_bytes())
    assert set(rows) <= defined and "calls" not in defined


@needs_gcc_offload
@needs_ptxas
def test_image_compiles_for_sm_80_and_defines_every_key(offlink, sample, tmp_path):
    """The image is PTX files separated by NULs (as mkoffload embeds them): ptxas compiles each
    for sm_80, nvlink links them as the CUDA driver would, and every key is in the result."""
    prog = sample / "build" / "gcc_openmp"
    image = tmp_path / "image"
    run([offlink, "extract", prog, "--target", "nvptx-none", "--output", image])
    cubins = []
    for i, part in enumerate(p for p in image.read_bytes().split(b"\0") if p.strip()):
        (tmp_path / f"{i}.ptx").write_bytes(part)
        run([PTXAS, "-arch=sm_80", "-c", f"{i}.ptx", "-o", f"{i}.cubin"], cwd=tmp_path)
        cubins.append(f"{i}.cubin")
    assert len(cubins) > 3  # the three CUs, then libgomp, libc and libgcc pieces
    need_tool(NVLINK, "nvlink (CUDA) not installed")
    run([NVLINK, "-arch=sm_80", *cubins, "-o", "image.cubin"], cwd=tmp_path)
    linked = {s.name for s in ElfFile.open(tmp_path / "image.cubin").symbols() if s.defined}
    assert {s.name for s in Table.open(prog).symbols} <= linked


@needs_gcc_offload
def test_relink_parses_each_object_once_and_reads_no_ptx(sample, tmp_path, monkeypatch):
    """A relink with nothing changed reads each object's symbol table once (extract, the
    host tables and the pairing share it) and finds the cached image without re-reading and
    re-pairing any CU's PTX."""
    from offlink import elf as elf_module
    from offlink.link.pipeline import LinkOptions, link
    from offlink.toolchains.gcc.nvptx import GccNvptxTarget

    build = sample / "build"
    objs = [str(build / f"{n}.o") for n in ("main", "saxpy", "stats")]
    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(tmp_path / "cache"))
    # no record of the inputs: extract reads them
    monkeypatch.setattr("offlink.cache.freshness.SETTLED", 1e9)
    argv = [*GCC_LINK, *objs, "-o", str(tmp_path / "prog")]
    assert link(argv, LinkOptions()) == 0  # fills the cache

    real = elf_module.SYMBOL_ENTRY

    class Counting:  # counts parses of each symbol table (each starts at offset 0)
        size = real.size

        def __init__(self):
            self.parses: Counter = Counter()

        def unpack_from(self, buf, offset=0):
            if offset == 0:
                self.parses[bytes(buf)] += 1
            return real.unpack_from(buf, offset)

        def iter_unpack(self, buf):  # a whole table at once (elf.ElfFile._read_symbols)
            self.parses[bytes(buf)] += 1
            return real.iter_unpack(buf)

        def __getattr__(self, name):  # pack: elf.data_object writes symbols too
            return getattr(real, name)

    def no_ptx(*args):
        raise AssertionError("a CU's PTX was read again")

    symtabs = []
    for o in objs:
        e = ElfFile.open(o)
        symtabs.append(bytes(e.content(next(s for s in e.sections if s.sh_type == SHT_SYMTAB))))
    counting = Counting()
    monkeypatch.setattr(elf_module, "SYMBOL_ENTRY", counting)
    monkeypatch.setattr(GccNvptxTarget, "_pair", no_ptx)
    assert link(argv, LinkOptions()) == 0
    assert [counting.parses[t] for t in symtabs] == [1, 1, 1]
    assert run([tmp_path / "prog"]).stdout == (sample / "expected.txt").read_text()


@needs_gcc_offload
def test_relink_from_the_cache_is_byte_identical(offlink, sample, tmp_path):
    """The image from the cache: the pairing still comes from the CUs' offers (their object
    entries), so every row is there, as in the first link."""
    build = sample / "build"
    objs = [str(build / f"{n}.o") for n in ("main", "saxpy", "stats")]
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache"), "OFFLINK_PROGRESS": "0"}
    for name in ("first", "again"):
        proc = run([offlink, "link", "--timings", *GCC_LINK, *objs, "-o",
                    tmp_path / name], env=env)
    assert "3 CUs, 0 compiled, 3 from cache; image from cache" in proc.stderr
    assert (tmp_path / "again").read_bytes() == (tmp_path / "first").read_bytes()


@needs_gcc_offload
@needs_ptxas
def test_relink_after_one_change_reuses_the_libraries_part_and_asks_ptxas_nothing(
        sample, tmp_path, monkeypatch):
    """After one CU changed, nvptx-none-ld does not run: the image is the objects, a NUL after
    each, then what the libraries added in the earlier link (from the cache), byte for byte
    the program a link without the cache gives; ptxas is not asked again about a preamble
    it accepted. The first link gets the libraries' part from a link of the objects' symbol
    lines alone, byte for byte too."""
    from offlink import run as runner
    from offlink.link.pipeline import LinkOptions, link
    from offlink.toolchains.gcc import nvptx as gcc_nvptx

    for name in ("saxpy.c", "common.h"):
        shutil.copy(sample / name, tmp_path)
    run(["gcc", *CFLAGS, "-c", "saxpy.c", "-o", "saxpy.o"], cwd=tmp_path)
    objs = [str(sample / "build" / "main.o"), str(tmp_path / "saxpy.o"),
            str(sample / "build" / "stats.o")]
    ran: list[str] = []
    real_run = runner.run
    monkeypatch.setattr(runner, "run", lambda argv, *a, **k: ran.append(
        os.path.basename(argv[0])) or real_run(argv, *a, **k))
    asked: list[str] = []
    refusal = gcc_nvptx._ptxas_refusal.__wrapped__  # without the per-process memo
    monkeypatch.setattr(gcc_nvptx, "_ptxas_refusal", lambda p: asked.append(p) or refusal(p))
    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(tmp_path / "cache"))
    exported: list[int] = []
    real_exports = gcc_nvptx.GccNvptxTarget.exports

    def exports(self, image: bytes, path: str) -> set[str]:  # link_image's names: the same
        found = real_exports(self, image, path)
        assert found == gcc.ptx_definitions(image)
        exported.append(len(found))
        return found

    monkeypatch.setattr(gcc_nvptx.GccNvptxTarget, "exports", exports)

    def linked(name: str) -> bytes:
        ran.clear()
        asked.clear()
        assert link([*GCC_LINK, "-foffload-options=-lm", *objs, "-o",
                     str(tmp_path / name)], LinkOptions()) == 0
        return (tmp_path / name).read_bytes()

    def without_cache(name: str) -> bytes:  # nvptx-none-ld over every object
        monkeypatch.setenv("OFFLINK_NO_CACHE", "1")
        data = linked(name)
        monkeypatch.delenv("OFFLINK_NO_CACHE")
        assert ran.count("nvptx-none-ld") == 1
        return data

    first = linked("first")
    assert ran.count("nvptx-none-ld") == 1 and len(asked) == 1  # the symbol lines' link
    assert without_cache("first-plain") == first
    with open(tmp_path / "saxpy.c", "a") as f:
        f.write("int saxpy_edited = 1;\n")
    run(["gcc", *CFLAGS, "-c", "saxpy.c", "-o", "saxpy.o"], cwd=tmp_path)
    again = linked("again")
    assert "as" in ran and "nvptx-none-ld" not in ran and asked == []  # saxpy compiled
    assert without_cache("again-plain") == again
    assert len(exported) == 4 and exported[0] > 40  # libgomp and libc define some too


@needs_gcc_offload
@pytest.mark.parametrize("fallback", [False, True])
def test_image_link_after_one_change_writes_no_cached_object(sample, tmp_path, monkeypatch,
                                                             fallback):
    """The image of a relink after one CU changed is linked without writing the cached
    objects into the work folder (nvptx-none's link_image joins their bytes); where it falls
    back to running nvptx-none-ld, it writes them itself. Either way byte for byte the
    program a link without the cache gives."""
    from offlink import run as runner
    from offlink.link.pipeline import LinkOptions, link
    from offlink.toolchains.gcc import nvptx as gcc_nvptx

    for name in ("saxpy.c", "common.h"):
        shutil.copy(sample / name, tmp_path)
    objs = [str(sample / "build" / "main.o"), str(tmp_path / "saxpy.o"),
            str(sample / "build" / "stats.o")]
    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # where the link's work folder goes
    ran: list[str] = []
    real_run = runner.run
    monkeypatch.setattr(runner, "run", lambda argv, *a, **k: ran.append(
        os.path.basename(argv[0])) or real_run(argv, *a, **k))

    def linked(name: str, keep: bool = False) -> bytes:
        ran.clear()
        argv = [*GCC_LINK, *objs, "-o", str(tmp_path / name)]
        assert link(argv, LinkOptions(save_temps=keep)) == 0
        return (tmp_path / name).read_bytes()

    run(["gcc", *CFLAGS, "-c", "saxpy.c", "-o", "saxpy.o"], cwd=tmp_path)
    linked("first")
    with open(tmp_path / "saxpy.c", "a") as f:
        f.write("int saxpy_edited = 2;\n")
    run(["gcc", *CFLAGS, "-c", "saxpy.c", "-o", "saxpy.o"], cwd=tmp_path)
    if fallback:  # a command link_image does not put together itself: nvptx-none-ld runs
        monkeypatch.setattr(gcc_nvptx, "_image_objects", lambda argv, compiled: None)
    again = linked("again", keep=True)
    assert ("nvptx-none-ld" in ran) == fallback
    [kept] = (tmp_path / "tmp").iterdir()
    objects = sorted(p.name for p in (kept / gcc_nvptx.NAME).glob("*.o")
                     if not p.name.endswith(".host.o"))
    assert objects == (["0000-main.c.o", "0001-saxpy.c.o", "0002-stats.c.o"] if fallback
                       else ["0001-saxpy.c.o"])  # the changed CU's, compiled here
    shutil.rmtree(kept)
    monkeypatch.setenv("OFFLINK_NO_CACHE", "1")
    assert linked("again-plain") == again


@needs_gcc_offload
def test_relink_from_the_cache_takes_the_images_offers_whole_links_only(sample, tmp_path,
                                                                        monkeypatch):
    """An image from the cache comes with the offers its entry keeps, so a relink does not
    search the image for its definitions again; a narrowed link's image has the same key
    (nvptx-none links it whole) but its kept offers are not the whole link's."""
    from offlink.link.pipeline import LinkOptions, link
    from offlink.toolchains.gcc import nvptx as gcc_nvptx

    objs = [str(sample / "build" / f"{n}.o") for n in ("main", "saxpy", "stats")]
    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(tmp_path / "cache"))

    def rows(name: str, **options) -> set[str]:
        assert link([*GCC_LINK, *objs, "-o", str(tmp_path / name)],
                    LinkOptions(**options)) == 0
        return {s.name for s in Table.open(tmp_path / name).symbols}

    narrowed = rows("narrowed", offload_symbols=["scale"])
    assert narrowed == {"scale"}
    whole = rows("whole")  # the image from the cache, its offers searched for once more
    assert whole > narrowed
    searched: list[int] = []
    real = gcc_nvptx.GccNvptxTarget.exports
    monkeypatch.setattr(gcc_nvptx.GccNvptxTarget, "exports",
                        lambda self, *a: searched.append(1) or real(self, *a))
    assert rows("again") == whole and searched == []
    assert (tmp_path / "again").read_bytes() == (tmp_path / "whole").read_bytes()
    assert rows("narrowed-again", offload_symbols=["scale"]) == narrowed and searched


@needs_gcc_offload
def test_relink_with_nothing_changed_reads_no_gcc_object(sample, tmp_path, monkeypatch, capfd):
    """GCC's CUs are in the relink's record of its inputs: a relink whose inputs have their
    stamps reads none of them (extract), and a CU that must be compiled again (its object gone
    from the cache) reads its object then, refused unless it has the recorded code; an input
    rewritten is read again, alone."""
    from offlink.cache.store import Cache
    from offlink.link import extract
    from offlink.link.pipeline import LinkOptions, link

    for name in ("saxpy.c", "common.h"):
        shutil.copy(sample / name, tmp_path)
    run(["gcc", *CFLAGS, "-c", "saxpy.c", "-o", "saxpy.o"], cwd=tmp_path)
    objs = [str(sample / "build" / "main.o"), str(tmp_path / "saxpy.o"),
            str(sample / "build" / "stats.o")]
    cache = tmp_path / "cache"
    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(cache))
    monkeypatch.setenv("OFFLINK_PROGRESS", "0")
    monkeypatch.setattr("offlink.cache.freshness.SETTLED", 0.0)  # stamps trusted at once

    def linked(name: str) -> tuple[bytes, str]:
        capfd.readouterr()
        assert link([*GCC_LINK, *objs, "-o", str(tmp_path / name)],
                    LinkOptions(timings=True)) == 0
        return (tmp_path / name).read_bytes(), capfd.readouterr().err

    first = linked("first")[0]  # makes the cache folder
    assert linked("first")[0] == first  # records its inputs
    reads: list[str] = []
    real_read = extract._read
    monkeypatch.setattr(extract, "_read", lambda p: reads.append(p) or real_read(p))
    again, said = linked("again")
    assert reads == [] and again == first
    assert "3 CUs, 0 compiled, 3 from cache; image from cache" in said
    for p in (cache / "objects").rglob("*"):  # every entry but the record of the inputs
        if p.is_file() and "paths" not in Cache.decode(p.read_bytes()).meta:
            p.unlink()
    compiled, said = linked("compiled")
    assert "3 CUs, 3 compiled, 0 from cache" in said and compiled == first
    assert sorted(reads) == sorted(objs)  # each compiled CU's code, read when needed
    reads.clear()
    with open(tmp_path / "saxpy.c", "a") as f:
        f.write("int saxpy_edited = 3;\n")
    run(["gcc", *CFLAGS, "-c", "saxpy.c", "-o", "saxpy.o"], cwd=tmp_path)
    changed, said = linked("changed")
    # The record is kept per file: only the rewritten object is read again.
    assert "3 CUs, 1 compiled, 2 from cache" in said and reads == [str(tmp_path / "saxpy.o")]
    monkeypatch.setenv("OFFLINK_NO_CACHE", "1")
    assert linked("changed-plain")[0] == changed


def test_a_gcc_cus_recorded_code_is_refused_when_the_object_changed(sample, tmp_path):
    """The recorded CU's object, read again where it is compiled, must be the one recorded."""
    from offlink.errors import FormatError
    from offlink.formats.payload import Payload, Stored
    from offlink.link.relink import _DeferredBytes

    data = (sample / "build" / "saxpy.o").read_bytes()
    code_id = Payload("", "", "", "", (), data).code_id
    ok = _DeferredBytes(code_id, lambda: Stored(data, False, None, "x.o"), "x.o")
    assert ok.stored().data == data
    bad = _DeferredBytes(code_id, lambda: Stored(data + b"\0", False, None, "x.o"), "x.o")
    with pytest.raises(FormatError, match="x.o: changed while being linked"):
        bad.stored()


def test_the_image_is_put_together_only_from_a_command_it_understands():
    from offlink.toolchains.gcc.nvptx import _image_objects, symbol_lines

    cus = [type("C", (), {"object_path": p})() for p in ("a.o", "b.o")]
    ld = ["nvptx-none-ld", "-o", "img", "-L/acc/mgomp", "-L/acc"]
    assert _image_objects([*ld, "a.o", "b.o", "-lm", "-lgomp"], cus) == (5, 2)
    assert _image_objects([*ld, "b.o", "a.o", "-lgomp"], cus) is None  # another order
    assert _image_objects([*ld, "a.o", "b.o", "-v", "-lgomp"], cus) is None
    assert _image_objects([*ld, "a.o", "b.o", "-l", "m"], cus) is None
    assert _image_objects([*ld, "a.o", "x.o", "b.o"], cus) is None
    ptx = (b"// BEGIN GLOBAL VAR DEF: at_start\n.x\n// BEGIN GLOBAL FUNCTION DECL: f\n"
           b"// BEGIN FUNCTION DEF: local\n// BEGIN GLOBAL VAR DEF: g")
    assert symbol_lines(ptx) == (b"\n// BEGIN GLOBAL FUNCTION DECL: f"
                                 b"\n// BEGIN GLOBAL VAR DEF: g")


def test_archive_members_the_link_uses_only(offlink, sample, tmp_path):
    build = sample / "build"
    shutil.copy(ROOT / "tests" / "gcc_offload" / "unused.c", tmp_path)
    run(["gcc", *CFLAGS, "-c", "unused.c", "-o", "unused.o"], cwd=tmp_path)
    run(["ar", "rcs", "libstats.a", build / "stats.o", "unused.o"], cwd=tmp_path)
    run([offlink, "link", *GCC_LINK, build / "main.o", build / "saxpy.o", "-L.",
         "-lstats", "-o", "prog"], cwd=tmp_path)
    assert run([tmp_path / "prog"]).stdout == (sample / "expected.txt").read_text()
    keys = {s["name"] for s in table_of(offlink, tmp_path / "prog")["symbols"]}
    assert "stats_sum$_omp_fn$0" in keys and any(k.startswith("calls$stats_c$") for k in keys)
    assert not any(k.startswith(("unused", "calls$unused")) for k in keys)


@needs_gcc_offload
def test_inspect_shows_a_gcc_offload_object_as_a_cu(offlink, sample):
    """One CU per target a link without -foffload= builds from it: nvptx-none, and
    amdgcn-amdhsa where gcc-12-offload-amdgcn is installed (GCC's link builds both)."""
    from offlink.toolchains.gcc import dialect as gcc

    info = json.loads(run([offlink, "inspect", "--json", sample / "build" / "stats.o"]).stdout)
    cu, *others = info["cus"]
    assert (cu["target"], cu["source"], cu["code_kind"]) == ("nvptx-none", "stats.c", "object")
    assert "-fopenmp" in cu["options"] and "accel-nvptx-none" in cu["compiler"]
    gcn = shutil.which(gcc.accel_compiler("12", "amdgcn-amdhsa")) is not None
    assert [(o["target"], o["source"]) for o in others] == \
        ([("amdgcn-amdhsa", "stats.c")] if gcn else [])


@pytest.mark.parametrize("ldflags", [["-no-pie"], ["-Wl,--gc-sections"]])
def test_link_variants(offlink, sample, tmp_path, ldflags):
    """Non-PIE: the host tables hold absolute addresses. --gc-sections drops the host tables:
    rows are found by name, statics by their CU's STT_FILE."""
    objs = [sample / "build" / f"{n}.o" for n in ("main", "saxpy", "stats")]
    run([offlink, "link", *GCC_LINK, *ldflags, *objs, "-o", "prog"], cwd=tmp_path)
    assert run([tmp_path / "prog"]).stdout == (sample / "expected.txt").read_text()
    rows = Table.open(tmp_path / "prog").symbols
    assert len(rows) == 9
    at = names_at(tmp_path / "prog")
    assert all(at[r.address] in (r.name.split("$")[0], "calls") or "_omp_fn" in at[r.address]
               for r in rows)


@needs_gcc_offload
def test_narrowed_link_keeps_the_listed_rows(offlink, sample, tmp_path):
    """`--offload-symbol`: the listed keys' rows only (a pattern matches the device's names);
    the image and the host tables are GCC's as before, so the program runs the same."""
    objs = [sample / "build" / f"{n}.o" for n in ("main", "saxpy", "stats")]
    run([offlink, "link", "--offload-symbol", "scale", "--offload-symbol", "main$_omp_fn$*",
         *GCC_LINK, *objs, "-o", "prog"], cwd=tmp_path)
    assert run([tmp_path / "prog"]).stdout == (sample / "expected.txt").read_text()
    keys = {s["name"] for s in table_of(offlink, tmp_path / "prog")["symbols"]}
    assert "scale" in keys and keys - {"scale"}
    assert all(k == "scale" or k.startswith("main$_omp_fn$") for k in keys)


def test_static_link_of_gcc_offload_objects(offlink, sample, tmp_path):
    # libgomp runs the regions (host fallback); nothing needs dlopen, so -static is fine.
    b = sample / "build"
    out = tmp_path / "static"
    run([offlink, "link", *GCC_LINK, "-static", b / "main.o", b / "saxpy.o",
         b / "stats.o", "-o", out])
    assert run([out]).stdout == (sample / "expected.txt").read_text()
    assert table_of(offlink, out)["targets"][0]["name"] == "nvptx-none"


@needs_gcc_offload
def test_shared_library_of_gcc_offload_objects(offlink, sample, tmp_path):
    """A DSO's host tables hold relocations against its preemptible globals."""
    for name in ("saxpy", "stats"):
        run(["gcc", *CFLAGS, "-fPIC", "-c", sample / f"{name}.c", "-o", f"{name}.o"],
            cwd=tmp_path)
    run([offlink, "link", *GCC_LINK, "-shared", "saxpy.o", "stats.o", "-o", "libss.so"],
        cwd=tmp_path)
    run([offlink, "link", *GCC_LINK, sample / "build" / "main.o", "-L.", "-lss",
         "-Wl,-rpath,$ORIGIN", "-o", "app"], cwd=tmp_path)
    assert run([tmp_path / "app"]).stdout == (sample / "expected.txt").read_text()
    rows = {r.name: r for r in Table.open(tmp_path / "libss.so").symbols}
    scale = next(s for s in ElfFile.open(tmp_path / "libss.so").symbols(dynamic=True)
                 if s.name == "scale")
    assert rows["scale"].address == scale.st_value and len(rows) == 8


@needs_gcc_offload
def test_host_lto_is_refused_with_the_way_out(offlink, sample, tmp_path):
    run(["gcc", *CFLAGS, "-flto", "-c", sample / "stats.c", "-o", "stats.o"], cwd=tmp_path)
    proc = run([offlink, "link", *GCC_LINK, "-flto", "-shared", "stats.o", "-o", "x.so"],
               cwd=tmp_path, check=False)
    assert proc.returncode != 0 and proc.stderr.strip().splitlines()[-1] == (
        "offlink: error: stats.o: a GCC offload object in a host -flto link: GCC writes its host "
        "tables only during that link, and offlink reads them from the objects (compile with "
        "-fno-lto, or with -ffat-lto-objects and link without -flto)")


@needs_gcc_offload
def test_the_way_out_of_host_lto_links_and_runs(offlink, sample, tmp_path):
    """The refusal's way out: objects compiled -flto -ffat-lto-objects, linked without -flto
    (a word that only tunes an LTO link, -flto-partition=one, turns none on), link and run."""
    for name in ("saxpy", "stats"):
        run(["gcc", *CFLAGS, "-fPIC", "-flto", "-ffat-lto-objects", "-c", sample / f"{name}.c",
             "-o", f"{name}.o"], cwd=tmp_path)
    run([offlink, "link", *GCC_LINK, "-flto-partition=one", "-shared", "saxpy.o",
         "stats.o", "-o", "libss.so"], cwd=tmp_path)
    run([offlink, "link", *GCC_LINK, sample / "build" / "main.o", "-L.", "-lss",
         "-Wl,-rpath,$ORIGIN", "-o", "app"], cwd=tmp_path)
    assert run([tmp_path / "app"]).stdout == (sample / "expected.txt").read_text()


@needs_gcc_offload
@needs_ptxas
def test_isa_ptxas_refuses_is_one_clear_line(offlink, sample, tmp_path):
    objs = [sample / "build" / f"{n}.o" for n in ("main", "saxpy", "stats")]
    (tmp_path / "prog").write_text("previous")
    proc = run([offlink, "link", *GCC_LINK, "-foffload-options=-misa=sm_35", *objs,
                "-o", "prog"], cwd=tmp_path, check=False)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("offlink: error: target code of ") and "-misa=sm_35" in last
    assert "-foffload-options=-misa=sm_80" in last
    # offlink's own spelling of the same option reaches the accel compiler the same way.
    proc = run([offlink, "link", "--offload-option", "nvptx-none=-misa=sm_35", "gcc",
                "-fopenmp", "-foffload=nvptx-none", *objs, "-o", "prog"], cwd=tmp_path, check=False)
    assert proc.returncode != 0 and "-misa=sm_35" in proc.stderr.strip().splitlines()[-1]
    dry = run([offlink, "link", "--dry-run", "--offload-option", "-misa=sm_90", "gcc",
               "-fopenmp", "-foffload=nvptx-none", *objs, "-o", "prog"], cwd=tmp_path).stdout
    assert "-misa=sm_90" in dry
    assert (tmp_path / "prog").read_text() == "previous"


@needs_gcc_offload
def test_dry_run_shows_the_accel_compile_and_a_host_link_without_gcc_offload(offlink, sample):
    build = sample / "build"
    out = run([offlink, "link", "--dry-run", *GCC_LINK, "-foffload-options=-lm",
               "main.o", "stats.o", "-o", "p"], cwd=build).stdout.splitlines()
    # The accel compiler's lto1 itself, with the words its driver would give it (accel_steps),
    # then its nvptx-as, which a real link runs after it (offers), per CU.
    lto1 = run([ACCEL, "-print-prog-name=lto1"]).stdout.strip()
    work = '"$OFFLINK_WORK"/nvptx-none/'
    for i, cu in enumerate(("0000-main.c", "0001-stats.c")):
        assert out[2 * i].startswith(f"{lto1} -quiet -m64 -mgomp -misa=sm_80 ")
        assert out[2 * i + 1] == f"{os.path.dirname(lto1)}/as --no-verify -o {work}{cu}.o " \
            f"{work}{cu}.o.s"  # nvptx-as, as the accel compiler's driver names it
    assert "-lm" not in out[0] and " -lm " in out[4]  # a library goes to nvptx-none-ld
    assert out[4].startswith("nvptx-none-ld ")
    assert out[5].startswith("gcc -fopenmp ") and out[5].endswith("-foffload=disable -o p")
    assert '"$OFFLINK_WORK"/offlink-gomp-register.o' in out[5]  # libgomp's registration


@needs_gcc_offload
def test_lto1_and_nvptx_as_alone_give_the_drivers_object_byte_for_byte(sample, tmp_path):
    """A CU compiled by lto1 and nvptx-as run directly (the driver's two steps, from its
    `-###`) is the object the accel compiler's driver writes, byte for byte, with -g too."""
    from offlink.toolchains.gcc.nvptx import GccNvptxTarget, accel_steps, compile_driver

    shutil.copy(sample / "saxpy.c", tmp_path)
    shutil.copy(sample / "common.h", tmp_path)
    run(["gcc", "-O1", "-g", *CFLAGS[1:], "-c", "saxpy.c", "-o", "saxpy.o"], cwd=tmp_path)
    target = GccNvptxTarget()
    for name in ("saxpy.o", str(sample / "build" / "stats.o")):
        cu = gcc.gcc_cu(ElfFile.open(tmp_path / name), name, [])
        src = tmp_path / "cu.host.o"
        src.write_bytes(cu.payload.code)
        assert accel_steps(tuple(compile_driver(cu))) is not None
        argv = target.compile_argv(cu, str(src), str(tmp_path / "direct.o"))
        assert os.path.basename(argv[0]) == "lto1"
        run(argv)
        target.offers(cu, str(tmp_path / "direct.o"))  # assembles, then renames statics
        run([*compile_driver(cu), "-c", src, "-o", tmp_path / "driver.o"])
        target.offers(cu, str(tmp_path / "driver.o"))
        assert (tmp_path / "direct.o").read_bytes() == (tmp_path / "driver.o").read_bytes()


@needs_gcc_offload
def test_the_compile_cache_key_hashes_the_driver_not_lto1(sample, tmp_path, monkeypatch):
    """lto1 runs, but the tool whose identity keys a CU's compile is its driver (1 MB, as
    before), not lto1 (19 MB: ~30 ms to hash on a link whose cache has not seen it)."""
    from offlink.cache.store import Cache
    from offlink.link.pipeline import LinkOptions, link

    probed = []
    real = Cache.tool_identity
    monkeypatch.setattr(Cache, "tool_identity",
                        lambda self, tool: probed.append(tool) or real(self, tool))
    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(tmp_path / "cache"))
    objs = [str(sample / "build" / f"{n}.o") for n in ("main", "saxpy", "stats")]
    assert link([*GCC_LINK, *objs, "-o", str(tmp_path / "prog")], LinkOptions()) == 0
    assert ACCEL in probed and not any(os.path.basename(t) == "lto1" for t in probed)


def test_driver_words_read_gccs_quoting():
    from offlink.toolchains.gcc.nvptx import _driver_words

    line = (' /usr/lib/lto1 -quiet "-misa=sm_80" "in put.o" "a\\"b" "x\\\\y" "\\$HOME" '
            '-o /tmp/cc.s')
    assert _driver_words(line) == ["/usr/lib/lto1", "-quiet", "-misa=sm_80", "in put.o", 'a"b',
                                   "x\\y", "$HOME", "-o", "/tmp/cc.s"]


def test_a_driver_that_runs_other_steps_runs_itself(tmp_path, monkeypatch):
    """The driver is run as before when its `-###` shows anything but lto1 then as."""
    from offlink.toolchains.gcc import nvptx as gcc_nvptx
    from offlink.toolchains.gcc.nvptx import STEP_ASM, STEP_IN, STEP_OUT, accel_steps

    def driver(name: str, *lines: str) -> str:
        path = tmp_path / name
        path.write_text("#!/bin/sh\n" + "".join(f"echo '{ln}' >&2\n" for ln in lines))
        path.chmod(0o755)
        return str(path)

    lto1 = (f" /acc/lto1 -quiet -dumpdir ./ -dumpbase x.o -dumpbase-ext .o -O2 {STEP_IN} "
            f"-o /t/cc.s")
    two = driver("two", "Using built-in specs.", lto1,
                 f" /acc/as --no-verify -o {STEP_OUT} /t/cc.s")
    assert accel_steps((two, "-xlto")) == (
        ["/acc/lto1", "-quiet", "-O2", STEP_IN, "-o", STEP_ASM],
        ["/acc/as", "--no-verify", "-o", STEP_OUT, STEP_ASM])
    three = driver("three", lto1, " /acc/as -o /t/cc.o /t/cc.s",
                   f" /acc/ld -o {STEP_OUT} /t/cc.o")
    assert accel_steps((three, "-xlto")) is None
    other = driver("other", lto1.replace("lto1", "cc1"), f" /acc/as -o {STEP_OUT} /t/cc.s")
    assert accel_steps((other, "-xlto")) is None
    monkeypatch.setattr(gcc_nvptx, "accel_steps", lambda driver: None)
    cu = type("CU", (), {"payload": type("P", (), {"compiler": three, "options": ["-O2"]})(),
                         "label": "a.c (a.o)"})()
    assert gcc_nvptx.GccNvptxTarget().compile_argv(cu, "in.o", "out.o") == [
        three, "-xlto", "-m64", "-mgomp", "-O2", "-Wa,--no-verify", "-c", "in.o", "-o",
        "out.o"]  # no -misa: the release's default, unless the options name one


def test_the_library_folder_comes_from_the_drivers_library_path(tmp_path):
    """The folder with libgomp.a whose `mgomp` multilib the image links: from the LIBRARY_PATH
    the driver's `-###` shows (asked for the compiles already) where it is that folder's
    mgomp then the folder; otherwise `-print-file-name=libgomp.a` asks the driver."""
    from offlink.toolchains.gcc.nvptx import _library_dir

    acc = tmp_path / "acc"
    (acc / "mgomp").mkdir(parents=True)
    (acc / "libgomp.a").write_bytes(b"!<arch>\n")

    def driver(name: str, library_path: str) -> str:
        path = tmp_path / name
        path.write_text(f"#!/bin/sh\ncase \"$*\" in *-print-file-name*) echo /asked/libgomp.a;;"
                        f"\n*) echo 'LIBRARY_PATH={library_path}' >&2;; esac\n")
        path.chmod(0o755)
        return str(path)

    assert _library_dir((driver("shown", f"{acc}/mgomp/:{acc}/"), "-xlto")) == str(acc)
    assert _library_dir((driver("other", f"{acc}/mgomp/mptx-3.1/:{acc}/"), "-xlto")) == "/asked"
    (acc / "libgomp.a").unlink()
    assert _library_dir((driver("nolib", f"{acc}/mgomp/:{acc}/"), "-xlto")) == "/asked"


# -- libgomp registration (by default): the image registered as GCC's mkoffload does -------

@pytest.fixture(scope="module")
def gomp_shim(sample) -> Path:
    """An LD_PRELOAD library recording GOMP_offload_(un)register_ver, then calling libgomp's."""
    out = sample / "build" / "gomp_shim.so"
    run(["gcc", "-O2", "-shared", "-fPIC", ROOT / "tests" / "gcc_offload" / "gomp_shim.c",
         "-o", out])
    return out


def registrations(binary: Path, shim: Path, log: Path) -> tuple[str, list[list[str]], bytes]:
    """(the program's output, the shim's log lines as words, the PTX objects registered)."""
    log.unlink(missing_ok=True)
    env = {**os.environ, "LD_PRELOAD": str(shim), "GOMP_SHIM_LOG": str(log)}
    out = run([binary], env=env).stdout
    lines = [ln.split() for ln in log.read_text().splitlines()] if log.exists() else []
    ptx = Path(f"{log}.ptx")
    return out, lines, ptx.read_bytes() if ptx.exists() else b""


def host_symbols(binary: Path) -> dict[int, tuple[str, str]]:
    """Address -> (the CU file, the name) of the function or variable defined there: two
    statics of one name are told apart by the STT_FILE symbol before them."""
    file, out = "", {}
    for s in ElfFile.open(binary).symbols():
        file = s.name if s.st_type == STT_FILE else file
        if s.defined and s.st_type in (STT_FUNC, STT_OBJECT):
            out.setdefault(s.st_value, ("" if s.is_global else file, s.name))
    return out


def registered(binary: Path, shim: Path, log: Path) -> tuple[str, dict]:
    """(the program's output, what GOMP_offload_register_ver got: its header words, and per
    host-table slot, in order, the host symbol there with the name (and dims or size) paired
    with it), checked to be unregistered the same way at exit."""
    out, lines, ptx = registrations(binary, shim, log)
    heads = [i for i, ln in enumerate(lines) if ln[0] in ("register", "unregister")]
    assert [lines[i][0] for i in heads] == ["register", "unregister"], lines
    block, after = lines[heads[0] + 1:heads[1]], lines[heads[1] + 1:]
    assert block == after and lines[heads[0]][1:] == lines[heads[1]][1:]
    at = host_symbols(binary)
    return out, {
        "head": lines[heads[0]][1:],
        "funcs": [(at[int(a)], name, dims) for _, name, a, *dims in
                  (ln for ln in block if ln[0] == "func")],
        "vars": [(at[int(a)], name, int(size)) for _, name, a, size in
                 (ln for ln in block if ln[0] == "var")],
        "ptx": ptx}


def check_registration(offlink: str, prog: Path, shim: Path, expected: str,
                       reference: Path) -> None:
    """offlink's registration against GCC's own (mkoffload's) for the same objects,
    `reference`: the same call, host slots, names and launch dimensions."""
    out, mine = registered(prog, shim, prog.parent / "gomp.log")
    gcc_out, theirs = registered(reference, shim, prog.parent / "gomp-gcc.log")
    assert out == gcc_out == expected  # no GPU here: registered, and still the host fallback
    # GOMP_VERSION, GOMP_DEVICE_NVIDIA_PTX, names for every host slot: as GCC's
    head, ref = mine["head"], theirs["head"]
    assert head[:2] == ref[:2] == ["0x10001", "5"]
    assert head[4:] == ref[4:] == ["funcs", "5/5", "vars", "4/4"]
    # Functions: host slot i holds the same function as in GCC's link, and is paired with the
    # same name and launch dimensions (OpenMP regions: none) as mkoffload pairs it with.
    assert mine["funcs"] == theirs["funcs"]
    assert all(dims == ["0", "0", "0"] for *_, dims in mine["funcs"])
    # Variables: the same host slots in the same order, with the same size and link flag.
    # (Names of statics differ by design: GCC's are lto_priv numbers, offlink's say the CU.)
    assert [(sym, size) for sym, _, size in mine["vars"]] == \
        [(sym, size) for sym, _, size in theirs["vars"]]
    public = [(sym, name) for sym, name, _ in theirs["vars"] if "$lto_priv$" not in name]
    # Each name is the variable of its slot by offlink's table (its key for a static).
    rows = {r["name"]: r for r in table_of(offlink, prog)["symbols"]}
    assert sorted(name for _, name, _ in mine["funcs"] + mine["vars"]) == sorted(rows)
    at = host_symbols(prog)
    for sym, name, size in mine["vars"]:
        link = gcc.LINK_FLAG if rows[name]["kind"] == "link-variable" else 0
        assert at[rows[name]["address"]] == sym and size == rows[name]["size"] | link
    assert {n for _, n in public} <= {name for _, name, _ in mine["vars"]}
    # The PTX objects are the image's files, each with its NUL, byte for byte.
    image = prog.parent / "image.ptx"
    run([offlink, "extract", prog, "--target", "nvptx-none", "--output", image])
    data = image.read_bytes()
    parts = data.split(b"\0")[:-1] if data.endswith(b"\0") else data.split(b"\0")
    assert int(head[3]) == len(parts) > 3 and mine["ptx"] == b"".join(p + b"\0" for p in parts)


@needs_gcc_offload
def test_gomp_register_pairs_name_i_with_host_slot_i(offlink, sample, gomp_shim, tmp_path):
    objs = [sample / "build" / f"{n}.o" for n in ("main", "saxpy", "stats")]
    expected = (sample / "expected.txt").read_text()
    # By default, as GCC's own link does: no offlink option.
    run([offlink, "link", "--verify-deep", *GCC_LINK, *objs, "-o", "prog"],
        cwd=tmp_path)
    check_registration(offlink, tmp_path / "prog", gomp_shim, expected,
                       sample / "build" / "gcc_openmp.gcc")
    # The image is stored once (the registration points into .openmp_target): the program is
    # no bigger than GCC's own link of the same objects, within 15%.
    gcc_size = (sample / "build" / "gcc_openmp.gcc").stat().st_size
    assert (tmp_path / "prog").stat().st_size <= 1.15 * gcc_size
    # --gomp-register (once the way to ask for it) is the same link: byte for byte.
    run([offlink, "link", "--gomp-register", *GCC_LINK, *objs, "-o", "prog2"],
        cwd=tmp_path)
    assert (tmp_path / "prog").read_bytes() == (tmp_path / "prog2").read_bytes()
    # OFFLINK_GOMP_REGISTER=0: nothing is registered and no __OFFLOAD_TABLE__ exists.
    run([offlink, "link", *GCC_LINK, *objs, "-o", "plain"], cwd=tmp_path,
        env={**os.environ, "OFFLINK_GOMP_REGISTER": "0"})
    out, lines, _ = registrations(tmp_path / "plain", gomp_shim, tmp_path / "plain.log")
    assert out == expected and lines == []
    assert "__OFFLOAD_TABLE__" not in {s.name for s in ElfFile.open(tmp_path / "plain").symbols()}


@needs_gcc_offload
def test_gomp_register_without_gcc_crt_files_and_in_a_dso(offlink, sample, gomp_shim, tmp_path):
    """-nostartfiles: offlink adds crtoffloadbegin.o/crtoffloadend.o itself (GCC's specs add
    them to -fopenmp links). A shared library registers its own table."""
    b = sample / "build"
    expected = (sample / "expected.txt").read_text()
    for name in ("saxpy", "stats"):
        run(["gcc", *CFLAGS, "-fPIC", "-c", sample / f"{name}.c", "-o", f"{name}.o"],
            cwd=tmp_path)
    run([offlink, "link", "gcc", "-foffload=nvptx-none", "-foffload-options=-misa=sm_80",
         "-shared", "-nostartfiles", "saxpy.o",
         "stats.o", "-lgomp", "-o", "libss.so"], cwd=tmp_path)
    run([offlink, "link", *GCC_LINK, b / "main.o", "-L.", "-lss",
         "-Wl,-rpath,$ORIGIN", "-o", "app"], cwd=tmp_path)
    out, lines, _ = registrations(tmp_path / "app", gomp_shim, tmp_path / "app.log")
    assert out == expected
    assert [ln[0] for ln in lines if ln[0].endswith("register")] == ["register"] * 2 + \
        ["unregister"] * 2
    registered = lines[1:[ln[0] for ln in lines].index("unregister")]
    for head in (ln for ln in registered if ln[0] == "register"):
        assert len({*head[6].split("/")}) == len({*head[8].split("/")}) == 1  # names == slots
    assert sorted(ln[1] for ln in registered if ln[0] in ("func", "var")) == sorted(
        [r["name"] for r in table_of(offlink, tmp_path / "app")["symbols"]]
        + [r["name"] for r in table_of(offlink, tmp_path / "libss.so")["symbols"]])
    # GCC's own link of the same objects registers the same: per module, in the same order,
    # the same version, device type, slot counts and function names, variables of one size.
    ref = tmp_path / "gcc"
    ref.mkdir()
    gcc_link = GCC_LINK
    run([*gcc_link, "-shared", "../saxpy.o", "../stats.o", "-o", "libss.so"], cwd=ref)
    run([*gcc_link, b / "main.o", "-L.", "-lss", "-Wl,-rpath,$ORIGIN", "-o", "app"], cwd=ref)
    gcc_out, gcc_lines, _ = registrations(ref / "app", gomp_shim, ref / "app.log")
    assert gcc_out == out
    assert _per_module(lines) == _per_module(gcc_lines)


def _per_module(lines: list[list[str]]) -> list[tuple]:
    """The shim's register calls as (version, type, slot counts, function names, variable
    sizes). Not the number of PTX files: offlink's image has one per CU, GCC's one for all."""
    out, block = [], None
    for ln in lines:
        if ln[0] == "register":
            block = [ln[1:3] + ln[5:], [], []]  # ln[3:5]: "ptx", their count
            out.append(block)
        elif ln[0] == "unregister":
            block = None
        elif block is not None:
            (block[1] if ln[0] == "func" else block[2]).append(ln[1] if ln[0] == "func"
                                                               else ln[3])
    return [(tuple(h), tuple(f), tuple(v)) for h, f, v in out]


@needs_gcc_offload
def test_gomp_register_relinks_when_the_table_order_differs(sample, gomp_shim, tmp_path,
                                                            monkeypatch, offlink):
    """Names go in the order of the linked host table: a registration written in another
    order is written again from the binary and the host link runs once more."""
    from offlink.link import host, pipeline
    from offlink.toolchains.gcc import gomp as gomp_register

    made = gomp_register.Registration.for_link.__func__  # type: ignore[attr-defined]

    def reversed_order(cls, *args):
        reg = made(cls, *args)
        reg.order = {k: v[::-1] for k, v in reg.order.items()}
        return reg

    links = []
    real_link = host.run_host_link
    monkeypatch.setattr(gomp_register.Registration, "for_link", classmethod(reversed_order))
    monkeypatch.setattr(host, "run_host_link", lambda argv: links.append(real_link(argv)))
    monkeypatch.chdir(tmp_path)
    objs = [str(sample / "build" / f"{n}.o") for n in ("main", "saxpy", "stats")]
    assert pipeline.link([*GCC_LINK, *objs, "-o", "prog"],
                         pipeline.LinkOptions(toolchain_options={"--gomp-register": True},
                                              cache=False)) == 0
    assert len(links) == 2
    check_registration(offlink, tmp_path / "prog", gomp_shim,
                       (sample / "expected.txt").read_text(), sample / "build" / "gcc_openmp.gcc")


NAMES_READER = r"""#include <stdio.h>
struct fn { const char *name; unsigned short dim[3]; };
#define HIDDEN __attribute__ ((__visibility__ ("hidden")))
extern const char *const __offlink_gomp_var_names[2] HIDDEN;
extern const struct fn __offlink_gomp_fn_names[2] HIDDEN;
extern const char __offlink_gomp_ind_func_table[] HIDDEN;
int main (void) {
  for (int i = 0; i < 2; i++)
    printf ("var %s\n", __offlink_gomp_var_names[i]);
  for (int i = 0; i < 2; i++)
    printf ("fn %s %u %u %u\n", __offlink_gomp_fn_names[i].name, __offlink_gomp_fn_names[i].dim[0],
            __offlink_gomp_fn_names[i].dim[1], __offlink_gomp_fn_names[i].dim[2]);
  printf ("%s", __offlink_gomp_ind_func_table);
  return 0;
}
"""


@needs_tool(shutil.which("gcc") is None, "gcc not installed")
@pytest.mark.parametrize("pie", ["-pie", "-no-pie"])
def test_gomp_names_object_links_and_reads_back_in_a_program(tmp_path, pie):
    """The names object offlink writes itself (elf.data_object): the system linker takes it,
    its pointers are relocated (R_X86_64_64 against its strings; a PIE's R_X86_64_RELATIVE),
    and a program reads the names and launch dimensions back as libgomp would."""
    from offlink.plugins import host_e_machine
    from offlink.toolchains.gcc import gomp as g

    image = (b"// BEGIN PREAMBLE\n.version 7.0\n.target sm_80\n.address_size 64\n"
             b"// BEGIN GLOBAL FUNCTION DECL: f\n.visible .func f;\n\0")
    dims = gcc.func_dims('//:FUNC_MAP "k$cu0_c$1ff1aaeb", 0x1, 0x20, 0x10000\n')
    obj = tmp_path / "names.o"
    obj.write_bytes(g.names_object(host_e_machine(), image, ["k$cu0_c$1ff1aaeb", "main._omp_fn.0"],
                                   ["s$cu0_c$1ff1aaeb", 'quote"d'], dims, "14", 0, ("f",)))
    (tmp_path / "r.c").write_text(NAMES_READER)
    run(["gcc", "-O2", "-fPIE" if pie == "-pie" else "-fno-PIE", pie, "-Wl,--fatal-warnings",
         tmp_path / "r.c", obj, "-o", tmp_path / "r"])
    out = run([tmp_path / "r"]).stdout
    assert out.startswith("var s$cu0_c$1ff1aaeb\nvar quote\"d\nfn k$cu0_c$1ff1aaeb 1 32 0\n"
                          "fn main._omp_fn.0 0 0 0\n")
    assert out.endswith("$offload_ind_func_table[] = {f};\n"), out
    assert g.names_object(host_e_machine(), image, ["a"], [], {}) == \
        g.names_object(host_e_machine(), image, ["a"], [], {})


def test_gomp_register_c_source_is_exact_and_gcc_12s_layout():
    from offlink.toolchains.gcc import gomp as g

    image = b'.version 7.0\n//:FUNC_MAP "k$1", 0x1, 0x20\n\t"q?\\\x01\n\0second\0'
    text = g.c_source(2, image, ["k$1"], ["v"])
    assert g.ptx_parts(image) == [image[:image.index(b"\0")], b"second"]
    assert "GOMP_offload_register_ver (0x10001, __OFFLOAD_TABLE__, 5/*NVIDIA_PTX*/, " \
           "&target_data)" in text
    assert "  __offlink_gomp_var_names, 1,\n  __offlink_gomp_fn_names, 1\n};" in text
    # The PTX files are the table's image 2, each with its NUL, found at start: no copy of
    # the image; the names are the names object's: the text changes with neither the files'
    # sizes nor the names (a CU's statics are named with a hash of its source).
    assert "ptx_objs[2];" in text and "const char *p = __offlink_image_2;" in text
    assert "q?" not in text and "second" not in text and "k$1" not in text
    longer = image.replace(b"second", b"second, longer")
    assert g.c_source(2, longer, ["k$2"], ["w"]) == text
    assert g.c_source(2, longer, ["k$2"], ["w", "x"]) != text
    with pytest.raises(LinkError, match="cannot name"):
        g.names_object(62, b"", ["a\0b"], [], {})
    with pytest.raises(LinkError, match="NUL"):
        g.c_source(0, b"no nul", [], [])
    assert g.driver_adds_crt("gcc", ["-fopenmp", "x.o"])
    assert not g.driver_adds_crt("gcc", ["-fopenmp", "-fno-openmp", "x.o"])
    assert not g.driver_adds_crt("gcc", ["-fopenmp", "-nostartfiles"])
    assert not g.driver_adds_crt("clang", ["-fopenmp"])


# -- the dialect's pieces, without a toolchain -------------------------------------------------

def host(name: str, kind: str = "variable", size: int = 4, link: bool = False,
         local: bool = False) -> gcc.HostEntry:
    return gcc.HostEntry(kind, name, size if kind == "variable" else 1, link, local, not local)


@needs_gcc_offload
def test_the_options_of_cus_compiled_alike_are_read_once(sample):
    """The CUs of a program compiled with the same flags have the same `.opts` section: it is
    read once per link, not once per CU (and no `.comment`: the release is the LTO
    bytecode's)."""
    from offlink.toolchains.gcc.dialect import _major_of, _options_of

    _options_of.cache_clear()
    _major_of.cache_clear()
    cus = [gcc.gcc_cu(ElfFile.open(sample / "build" / f"{n}.o"), n, [])
           for n in ("saxpy", "stats")]
    assert cus[0].payload.options == cus[1].payload.options
    assert _options_of.cache_info().hits == 1 and _major_of.cache_info().misses == 0


def test_pairing_is_by_name_within_a_cu_not_by_position():
    # nvptx-as moves definitions, and their MAP lines with them: GCC's own link pairs this
    # CU's `squares` with `calls` (seen with -save-temps); offlink pairs by name.
    entries = [host("squares", size=256, link=True), host("calls", local=True),
               host("run._omp_fn.1", "function"), host("work._omp_fn.0", "function")]
    ptx = ('//:VAR_MAP "calls"\n//:FUNC_MAP "work$_omp_fn$0"\n//:FUNC_MAP "run$_omp_fn$1"\n'
           '//:VAR_MAP "squares$linkptr"\n')
    paired = gcc.pair(entries, ptx, "s_c$1", "s.c (s.o)", {"run"})
    assert [(e.host.host_name, e.device_name, e.key, e.kind) for e in paired] == [
        ("squares", "squares$linkptr", "squares$linkptr", "link-variable"),
        ("calls", "calls", "calls$s_c$1", "variable"),
        ("run._omp_fn.1", "run$_omp_fn$1", "run$_omp_fn$1", "function"),  # external parent
        ("work._omp_fn.0", "work$_omp_fn$0", "work$_omp_fn$0$s_c$1", "function"),  # static
    ]
    renamed = gcc.rename(ptx, {e.device_name: e.key for e in paired})
    # Pairing again after the rename (a cached object) gives the same entries.
    assert gcc.pair(entries, renamed, "s_c$1", "s.c (s.o)", {"run"}) == paired


def test_statics_the_compiler_made_are_paired_by_position():
    """gfortran's constant arrays are statics named by a uid, counted apart on the host and in
    the offload stream (libgomp.fortran/target-has-device-addr-1.f90: `A.8.6` on the host,
    `A$6$20` in the PTX): the ones left over are paired by position, as GCC's link pairs."""
    entries = [host("A.8.6", size=160, local=True), host("A.3.10", size=160, local=True),
               host("scale", size=4)]
    ptx = '//:VAR_MAP "A$6$20"\n//:VAR_MAP "A$1$19"\n//:VAR_MAP "scale"\n'
    paired = gcc.pair(entries, ptx, "t_f90$1", "t.f90 (t.o)", set())
    assert [(e.host.host_name, e.device_name, e.key) for e in paired] == [
        ("A.8.6", "A$6$20", "A$6$20$t_f90$1"), ("A.3.10", "A$1$19", "A$1$19$t_f90$1"),
        ("scale", "scale", "scale")]
    renamed = gcc.rename(ptx, {e.device_name: e.key for e in paired})
    assert gcc.pair(entries, renamed, "t_f90$1", "t.f90 (t.o)", set()) == paired
    # Not for an external variable: its name is its own.
    with pytest.raises(LinkError, match="host table entry 'v' has no 'v'"):
        gcc.pair([host("v")], '//:VAR_MAP "A$1$19"\n', "t", "a.c (a.o)", set())


def test_pairing_errors_name_the_cu():
    with pytest.raises(LinkError, match=r"a.c \(a.o\): the host table lists 1 variables and "
                                        r"the target code 0 VAR_MAP"):
        gcc.pair([host("v")], "", "t", "a.c (a.o)", set())
    with pytest.raises(LinkError, match="host table entry 'v' has no 'v' in the target code"):
        gcc.pair([host("v")], '//:VAR_MAP "w"\n', "t", "a.c (a.o)", set())


def test_rename_touches_whole_identifiers_only():
    ptx = ("//:VAR_MAP \"s\"\n.global .align 4 .u32 s[1];\n\tld.global.u32 %r1, [s+4];\n"
           "\tmov.u32 %s, 1;\n\tld.global.u32 %r2, [s$1];\n\tadd.s32 %r3, %r1, %r2;\n")
    out = gcc.rename(ptx, {"s": "s$a_c$1"})
    assert out == ptx.replace('"s"', '"s$a_c$1"').replace(" s[1]", " s$a_c$1[1]").replace(
        "[s+4]", "[s$a_c$1+4]")


def test_offload_options_follow_gcc_syntax():
    values = ["-misa=sm_80 -mptx=7.0", "nvptx-none=-O3", "amdgcn-amdhsa=-march=gfx90a",
              "amdgcn-amdhsa,nvptx-none=-lm"]
    assert gcc.offload_options(values, "nvptx-none") == ["-misa=sm_80", "-mptx=7.0", "-O3", "-lm"]


@needs_gcc_offload
def test_an_unchanged_source_compiled_again_hits_the_cu_cache(offlink, sample, tmp_path):
    """GCC names its LTO sections with a random unit id on every compile (no -frandom-seed):
    offlink keys a CU by its object with those ids renumbered, so `make clean; make` hits."""
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
    said = []
    for build in ("one", "two"):
        (tmp_path / build).mkdir()
        for name in ("main", "saxpy", "stats"):
            run(["gcc", *CFLAGS, "-c", sample / f"{name}.c", "-o", f"{name}.o"],
                cwd=tmp_path / build)
        said.append(run([offlink, "link", "--verbose", *GCC_LINK, "main.o", "saxpy.o",
                         "stats.o", "-o", "prog"], cwd=tmp_path / build, env=env).stderr)
        assert run([tmp_path / build / "prog"]).stdout == (sample / "expected.txt").read_text()
    one, two = (ElfFile.open(tmp_path / b / "stats.o") for b in ("one", "two"))
    assert one.data != two.data  # the compiles differ (the section names' ids) ...
    assert gcc.stable_code(one) == gcc.stable_code(two)  # ... only so
    # (20 compiles of one source gave ids of 15 and 16 digits: objects of two sizes, one code)
    assert "nvptx-none: 3 CUs, 3 compiled, 0 from cache" in said[0]
    assert "nvptx-none: 3 CUs, 0 compiled, 3 from cache" in said[1]
    assert (tmp_path / "one" / "prog").stat().st_size == (tmp_path / "two" / "prog").stat().st_size


def _as_release(path: Path, major: int, out: Path) -> None:
    """A GCC 12 object made to look like GCC `major`'s: its `struct lto_section` major and its
    .comment changed, as that GCC writes them."""
    data = bytearray(path.read_bytes())
    elf = ElfFile(bytes(data), path.name)
    assert gcc.lto_version(elf) == (12, 0)
    lto = next(s for s in elf.sections if s.name.startswith(".gnu.offload_lto_.lto."))
    data[lto.sh_offset:lto.sh_offset + 2] = major.to_bytes(2, "little")
    comment = next(s for s in elf.sections if s.name == ".comment")
    old = bytes(data[comment.sh_offset:comment.sh_offset + comment.sh_size])
    new = old.replace(b" 12.2.0", f" {major}.2.0".encode())
    assert len(new) == len(old) and new != old
    data[comment.sh_offset:comment.sh_offset + comment.sh_size] = new
    out.write_bytes(bytes(data))


@needs_gcc_offload
@pytest.mark.parametrize("major", [11, 17])
def test_an_object_of_a_gcc_release_offlink_does_not_link_is_refused_in_one_line(
        offlink, sample, tmp_path, major):
    """GCC 11 writes no `requires` and registers as no release offlink knows, GCC 17 is not
    out: an object made by either is refused before any work, naming it and the releases
    offlink links (each one's registration layout checked against its own link)."""
    _as_release(sample / "build" / "stats.o", major, tmp_path / "stats.o")
    proc = run([offlink, "link", *GCC_LINK, sample / "build" / "main.o",
                sample / "build" / "saxpy.o", "stats.o", "-o", "prog"], cwd=tmp_path,
               check=False)
    assert proc.returncode != 0 and proc.stderr.splitlines() == [
        f"offlink: error: stats.o: a GCC {major} offload object (LTO bytecode {major}.0); "
        f"offlink links those of GCC 12, 13, 14, 15, 16: compile it with one of them, or "
        f"link it with GCC {major}'s own link"]
    assert not (tmp_path / "prog").exists()


@needs_gcc_offload
def test_objects_of_two_gcc_releases_are_refused_in_one_line_naming_both(offlink, sample,
                                                                         tmp_path):
    _as_release(sample / "build" / "stats.o", 14, tmp_path / "stats.o")
    proc = run([offlink, "link", *GCC_LINK, sample / "build" / "main.o", "stats.o", "-o",
                "prog"], cwd=tmp_path, check=False)
    assert proc.returncode != 0 and proc.stderr.splitlines() == [
        f"offlink: error: main.c ({sample / 'build' / 'main.o'}) is a GCC 12 offload object "
        f"and stats.c (stats.o) a GCC 14 one: one link takes one GCC release's objects (lto1 "
        f"reads its own bytecode only, libgomp one registration layout); compile them all with "
        f"one GCC"]
    assert not (tmp_path / "prog").exists()
