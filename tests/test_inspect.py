"""`offlink inspect` and `extract`: golden text, JSON against the committed schema."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from conftest import ROOT, copy_sample, make_sample, need_tool, needs_tool, run
from test_clang import CLANG

from offlink.toolchains.gcc.dialect import accel_compiler

HAVE_CLANG = shutil.which(CLANG) is not None and \
    Path("/usr/lib/llvm-19/lib/libomptarget.so").exists()
NO_CLANG = "clang-19 or libomptarget missing (apt-get install clang-19 libomp-19-dev)"
HAVE_GCC_OFFLOAD = shutil.which(accel_compiler("12")) is not None and \
    shutil.which("nvptx-none-ld") is not None
NO_GCC_OFFLOAD = "GCC's nvptx offload compiler missing (apt-get install gcc-12-offload-nvptx " \
    "nvptx-tools)"

PAYLOAD = "gnu.target_lto_x86_64-pc-linux-gnu"
SCHEMA = json.loads((ROOT / "offlink" / "cli" / "inspect.schema.json").read_text())


@pytest.fixture(scope="module")
def built(offlink, tmp_path_factory) -> Path:
    sample = copy_sample("multi_cu", tmp_path_factory.mktemp("inspect"))
    make_sample(offlink, sample, "run")
    return sample / "build"


@pytest.fixture(scope="module")
def gcc_built(offlink, tmp_path_factory) -> Path:
    """samples/gcc_openmp (gcc -fopenmp -foffload=nvptx-none objects) linked by offlink."""
    need_tool(HAVE_GCC_OFFLOAD, NO_GCC_OFFLOAD)
    sample = copy_sample("gcc_openmp", tmp_path_factory.mktemp("inspect-gcc"))
    make_sample(offlink, sample, "build/gcc_openmp")
    return sample / "build"


@pytest.fixture(scope="module")
def clang_built(offlink, tmp_path_factory) -> Path:
    """samples/clang_openmp (clang-19 -fopenmp-targets=x86_64 objects) linked by offlink."""
    need_tool(HAVE_CLANG, NO_CLANG)
    sample = copy_sample("clang_openmp", tmp_path_factory.mktemp("inspect-clang"))
    make_sample(offlink, sample, "all")
    return sample / "build"


def inspect_json(offlink, *args) -> dict:
    return json.loads(run([offlink, "inspect", "--json", *args]).stdout)


def test_json_matches_schema_for_module_object_and_archive(offlink, built):
    run(["ar", "rcs", built / "libops.a", built / "ops.o", built / "vec.o"])
    for path in (built / "multi_cu", built / "ops.o", built / "libops.a"):
        info = json.loads(run([offlink, "inspect", "--json", path]).stdout)
        jsonschema.validate(info, SCHEMA)
        assert (info["schema"], info["schema_version"]) == (SCHEMA["$id"], 3)
    info = json.loads(run([offlink, "inspect", "--json", built / "ops.o"]).stdout)
    assert info["kind"] == "object" and info["cus"][0]["source"] == "ops.c"
    assert info["cus"][0]["member"] is None
    lib = inspect_json(offlink, built / "libops.a")
    assert [cu["member"] for cu in lib["cus"]] == ["ops.o", "vec.o"]
    # The schema is published: `--schema` prints the committed file, whose $id names the version.
    assert json.loads(run([offlink, "inspect", "--schema"]).stdout) == SCHEMA
    assert SCHEMA["$id"].endswith(":3") and SCHEMA["properties"]["schema_version"]["const"] == 3


def test_json_matches_schema_for_gcc_and_clang_binaries(offlink, gcc_built, clang_built):
    for path in (gcc_built / "gcc_openmp", gcc_built / "main.o", clang_built / "clang_openmp",
                 clang_built / "clang_openmp_cxx", clang_built / "shapes.o"):
        jsonschema.validate(inspect_json(offlink, path), SCHEMA)


def test_images_say_where_they_lie_in_the_file(offlink, built, gcc_built):
    from offlink import Table

    for prog in (built / "multi_cu", gcc_built / "gcc_openmp"):
        data = prog.read_bytes()
        table = inspect_json(offlink, prog)["table"]
        start = table["file_offset"]
        assert data[start:start + 8] == b"OFFLINK\0"
        for t, image in zip(table["targets"], Table.open(prog).targets):
            assert data[t["file_offset"]:t["file_offset"] + t["image_size"]] == image.image


def test_nvptx_images_name_their_ptx_isa(offlink, gcc_built):
    (target,) = inspect_json(offlink, gcc_built / "gcc_openmp")["table"]["targets"]
    assert target["kind"] == "nvptx-none" and "sm_80" in target["archs"]  # -misa=sm_80
    text = run([offlink, "inspect", gcc_built / "gcc_openmp"]).stdout
    assert re.search(r"nvptx-none .* bytes at file offset 0x[0-9a-f]+  .*sm_80", text)


@needs_tool(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
            "no CUDA toolkit (nvcc)")
def test_cuda_archs_of_cubins_and_fatbins(tmp_path):
    from offlink.cli.inspect_cmd import image_archs
    from offlink.toolchains.cuda_toolkit import toolkit

    tools = toolkit()
    (tmp_path / "k.cu").write_text("__global__ void k(int *p) { *p = 1; }\n")
    cubins = {}
    for sm in (80, 90):
        cubins[sm] = tmp_path / f"k{sm}.cubin"
        run([tools.nvcc, f"-arch=sm_{sm}", "-rdc=true", "--cubin", tmp_path / "k.cu", "-o",
             cubins[sm]])
        assert image_archs("cubin", cubins[sm].read_bytes()) == [f"sm_{sm}"]
    run([tools.nvcc, "-arch=sm_80", "-rdc=true", "--ptx", tmp_path / "k.cu", "-o",
         tmp_path / "k.ptx"])
    assert image_archs("ptx", (tmp_path / "k.ptx").read_bytes()) == ["sm_80"]
    run([tools.fatbinary, "-64", f"--create={tmp_path / 'k.fatbin'}",
         f"--image3=kind=elf,sm=80,file={cubins[80]}", f"--image3=kind=elf,sm=90,file={cubins[90]}",
         f"--image3=kind=ptx,sm=80,file={tmp_path / 'k.ptx'}"])
    assert image_archs("fatbin", (tmp_path / "k.fatbin").read_bytes()) == \
        ["sm_80", "sm_90", "compute_80"]
    assert image_archs("shared-object", cubins[80].read_bytes()) == []


def test_text_output_golden(offlink, built):
    text = run([offlink, "inspect", built / "multi_cu"]).stdout
    # Addresses and sizes depend on the toolchain; the shape and the names do not.
    text = re.sub(r"0x[0-9a-f]+", "ADDR", text)
    text = re.sub(r"\d+ bytes", "N bytes", text)
    text = text.replace(str(built), "BUILD")
    assert text == (ROOT / "tests" / "golden" / "inspect-multi_cu.txt").read_text()


OPS_ROWS = ("op_add", "op_mul", "op_sub", "ops_calls", "ops_side")  # samples/multi_cu/ops.c
VEC_ROWS = ("hits", "scale", "vec_calls", "weighted_sum", "weights")  # vec.c


def row_cus(offlink, binary) -> dict[str, str | None]:
    info = inspect_json(offlink, binary)
    jsonschema.validate(info, SCHEMA)
    return {s["name"]: s.get("cu") for s in info["table"]["symbols"]}


def cu_groups(text: str) -> dict[str, list[str]]:
    """The text output's rows under each CU line (`    build/ops.o:`)."""
    groups: dict[str, list[str]] = {}
    for line in text.split("  symbols:\n", 1)[1].splitlines():
        if line.startswith("      "):
            groups[list(groups)[-1]].append(line.split()[0])
        elif line.startswith("    ") and line.endswith(":"):
            groups[line.strip()[:-1]] = []
    return groups


def test_rows_grouped_by_the_cu_that_offered_them(offlink, built):
    """The link records each row's CU as the link line named it (.offlink.origins): text
    groups the rows under a line per CU, JSON rows carry `cu`, --cu keeps one CU's rows."""
    three = {"build/main.o": ["main"], "build/ops.o": list(OPS_ROWS),
             "build/vec.o": list(VEC_ROWS)}
    assert cu_groups(run([offlink, "inspect", built / "multi_cu"]).stdout) == three
    assert row_cus(offlink, built / "multi_cu") == {n: cu for cu, ns in three.items()
                                                     for n in ns}
    only = inspect_json(offlink, built / "multi_cu", "--cu", "*/vec.o")["table"]["symbols"]
    assert [s["name"] for s in only] == list(VEC_ROWS)
    out = run([offlink, "inspect", built / "multi_cu", "--symbol", "op_mul"]).stdout
    assert "op_mul: function at 0x" in out and "offered by build/ops.o;" in out


def test_archive_members_are_cus_and_links_are_byte_identical(offlink, built, tmp_path):
    for name in ("main.o", "ops.o", "vec.o"):
        shutil.copy(built / name, tmp_path / name)
    run(["ar", "rcs", "libops.a", "ops.o", "vec.o"], cwd=tmp_path)
    libs = run([offlink, "config", "--libs"]).stdout.split()
    for out in ("prog", "again"):
        run([offlink, "link", "gcc", "main.o", "libops.a", *libs, "-o", out], cwd=tmp_path)
    assert (tmp_path / "prog").read_bytes() == (tmp_path / "again").read_bytes()
    assert cu_groups(run([offlink, "inspect", tmp_path / "prog"]).stdout) == {
        "libops.a(ops.o)": list(OPS_ROWS), "libops.a(vec.o)": list(VEC_ROWS),
        "main.o": ["main"]}
    only = inspect_json(offlink, tmp_path / "prog", "--cu", "libops.a(*")["table"]["symbols"]
    assert sorted(s["name"] for s in only) == sorted(OPS_ROWS + VEC_ROWS)
    # Not loaded (no SHF_ALLOC), and kept by strip: inspect still groups a stripped binary.
    sections = run(["readelf", "-SW", tmp_path / "prog"]).stdout
    assert re.search(r"\.offlink\.origins +PROGBITS +0+ [0-9a-f]+ [0-9a-f]+ 00 +0 +0 +1$",
                     sections, re.M), sections
    run(["strip", "--strip-all", tmp_path / "prog", "-o", tmp_path / "stripped"])
    assert row_cus(offlink, tmp_path / "stripped")["main"] == "main.o"


def test_compile_and_link_in_one_step_names_sources_not_temporary_objects(offlink, tmp_path):
    """`offlink cc gcc a.c b.c -o app` links objects in a temporary folder: the rows are
    recorded under the sources as given, so two builds are byte-identical."""
    sample = ROOT / "samples" / "multi_cu"
    for name in ("main.c", "ops.c", "vec.c", "sample.h"):
        shutil.copy(sample / name, tmp_path / name)
    flags = [*run([offlink, "config", "--cflags"]).stdout.split(), "main.c", "ops.c", "vec.c",
             *run([offlink, "config", "--libs"]).stdout.split()]
    for out in ("prog", "again"):
        run([offlink, "cc", "gcc", "-O2", *flags, "-o", out], cwd=tmp_path)
    assert (tmp_path / "prog").read_bytes() == (tmp_path / "again").read_bytes()
    assert cu_groups(run([offlink, "inspect", tmp_path / "prog"]).stdout) == {
        "main.c": ["main"], "ops.c": list(OPS_ROWS), "vec.c": list(VEC_ROWS)}


def test_symbol_left_out_by_narrowing_says_so(offlink, built, tmp_path):
    libs = run([offlink, "config", "--libs"]).stdout.split()
    objs = [str(built / n) for n in ("main.o", "ops.o", "vec.o")]
    run([offlink, "link", "--offload-symbol", "op_a*", "gcc", *objs, *libs, "-o",
         tmp_path / "narrow"])
    ops = os.path.relpath(built / "ops.o", tmp_path)  # relative to the output's folder
    assert row_cus(offlink, tmp_path / "narrow") == {"op_add": ops}
    proc = run([offlink, "inspect", tmp_path / "narrow", "--symbol", "op_sub"], check=False)
    out = proc.stdout
    assert proc.returncode == 1  # not offered: as grep, a status, no error line
    assert out == (f"'op_sub' is offered by {ops} but was left out by "
                   f"--offload-symbol narrowing at link time, so it has no row; translate "
                   f"returns the host pointer\n")


@pytest.mark.parametrize("content", [
    b"garbage", b"offlink.origins 2\n{}", b"offlink.origins 1\n[[[[" * 1000,
    b'offlink.origins 1\n{"cus": ["a.o"], "rows": [["x", 7]]}'])  # an index out of range
def test_damaged_origins_are_one_warning_line(offlink, built, tmp_path, content):
    (tmp_path / "bad").write_bytes(content)
    run(["objcopy", "--update-section", f".offlink.origins={tmp_path / 'bad'}",
         built / "multi_cu", tmp_path / "prog"])
    proc = run([offlink, "inspect", tmp_path / "prog"])
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(
        f"offlink: warning: {tmp_path / 'prog'}: .offlink.origins: "), proc.stderr
    assert "rows shown without their CUs" in proc.stderr and "Traceback" not in proc.stderr
    assert "\n      main " not in proc.stdout and "\n    main " in proc.stdout  # ungrouped
    assert set(row_cus(offlink, tmp_path / "prog").values()) == {None}
    assert "main: function" in run([offlink, "inspect", tmp_path / "prog", "--symbol",
                                    "main"]).stdout


def test_origins_round_trip_and_every_truncation_is_a_format_error():
    from offlink.errors import FormatError
    from offlink.formats.origins import decode, encode

    rows = {"b": "libx.a(m.o)", "a": "a.o", "\u00e9t\u00e9": "a.o"}
    blob = encode(rows, {"z": "a.o"}, ["a.o", "unused.o", "libx.a(m.o)"])
    assert blob == encode(dict(reversed(rows.items())), {"z": "a.o"},
                          ["a.o", "unused.o", "libx.a(m.o)"])  # deterministic
    got = decode(blob, "f")
    assert (got.rows, got.left_out, got.cus) == (rows, {"z": "a.o"}, ("a.o", "libx.a(m.o)"))
    for end in range(len(blob)):
        with pytest.raises(FormatError, match=r"^f: \.offlink\.origins: "):
            decode(blob[:end], "f")


def test_origins_are_the_json_text_json_dumps_writes():
    """encode writes its JSON itself (json's import is start-up time of every link): the same
    text as json.dumps(compact, ensure_ascii=False), for names and CUs that need escapes."""
    import json

    from offlink.formats.origins import MAGIC, VERSION, encode

    rows = {'q"uote': "dir\\a.o", "tab\tnew\nline": "\x01ctl.o", "\u00e9t\u00e9": "\U0001f600.o",
            "plain": "libx.a(m.o)", "\x7f\u2028": "b.o"}
    left = {"\x1f": "b.o", "": "a.o"}
    order = ["a.o", "b.o", "dir\\a.o", "\x01ctl.o"]
    blob = encode(rows, left, order)
    named = set(rows.values()) | set(left.values())
    cus = [c for c in dict.fromkeys(order) if c in named] + sorted(named - set(order))
    index = {c: i for i, c in enumerate(cus)}
    body = {"cus": cus, "rows": [[n, index[rows[n]]] for n in sorted(rows)],
            "left_out": [[n, index[left[n]]] for n in sorted(left)]}
    expected = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    assert blob == MAGIC + f"{VERSION}\n".encode() + expected.encode()


def test_binary_without_origins_shows_rows_as_before(offlink, built, tmp_path):
    run(["objcopy", "-R", ".offlink.origins", built / "multi_cu", tmp_path / "old"])
    proc = run([offlink, "inspect", tmp_path / "old"])
    assert proc.stderr == "" and "build/" not in proc.stdout and "\n    main " in proc.stdout
    proc = run([offlink, "inspect", tmp_path / "old", "--cu", "*"], check=False)
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1 and "--cu" in proc.stderr


def test_extract_writes_the_image(offlink, built, tmp_path):
    out = tmp_path / "image.so"
    run([offlink, "extract", built / "multi_cu", "--target", "host", "--output", out])
    dyn = run(["readelf", "--dyn-syms", "-W", out]).stdout
    assert " op_mul" in dyn and out.read_bytes()[:4] == b"\x7fELF"
    proc = run([offlink, "extract", built / "multi_cu", "--target", "nvptx64-nvidia-cuda",
                "--output", tmp_path / "x"], check=False)
    assert proc.returncode != 0 and "no target 'nvptx64-nvidia-cuda'" in proc.stderr
    assert not (tmp_path / "x").exists()


def test_module_without_table(offlink, tmp_path):
    (tmp_path / "p.c").write_text("int main(void) { return 0; }\n")
    run(["gcc", tmp_path / "p.c", "-o", tmp_path / "p"])
    proc = run([offlink, "inspect", tmp_path / "p"], check=False)
    assert proc.returncode != 0
    assert proc.stderr.strip() == (f"offlink: error: {tmp_path / 'p'}: no .openmp_target "
                                   "section (not linked with offlink, or no target code in its "
                                   "inputs)")


def test_corrupt_table_is_reported(offlink, built, tmp_path):
    prog = tmp_path / "prog"
    data = bytearray((built / "multi_cu").read_bytes())
    section = next(ln for ln in run(["readelf", "-S", "-W", built / "multi_cu"]).stdout
                   .splitlines() if ".openmp_target" in ln).split()
    offset = int(section[4], 16)
    data[offset + 200] ^= 0xFF  # inside the metadata: the checksum catches it
    prog.write_bytes(data)
    proc = run([offlink, "inspect", prog], check=False)
    assert proc.returncode != 0 and "table checksum mismatch" in proc.stderr


def test_explain_a_name_and_an_address(offlink, built):
    prog = built / "multi_cu"
    info = json.loads(run([offlink, "inspect", "--json", prog]).stdout)
    scale = next(s for s in info["table"]["symbols"] if s["name"] == "scale")
    out = run([offlink, "inspect", prog, "--address", hex(scale["address"] + 4)]).stdout
    assert out.splitlines()[0] == f"{scale['address'] + 4:#x} is in 'scale' (+0x4)"
    out = run([offlink, "inspect", prog, "--symbol", "op_mul"]).stdout
    assert out.startswith("op_mul: function at 0x")
    # Defined in the binary, but by no CU's target code (the runtime library's own API).
    proc = run([offlink, "inspect", prog, "--symbol", "offlink_translate"], check=False)
    assert "no CU offers it" in proc.stdout and (proc.returncode, proc.stderr) == (1, "")
    proc = run([offlink, "inspect", prog, "--symbol", "no_such_thing"], check=False)
    assert "neither in the table nor defined" in proc.stdout and proc.returncode == 1
    proc = run([offlink, "inspect", prog, "--address", "zzz"], check=False)
    assert proc.returncode != 0 and "--address takes a number" in proc.stderr


def test_symbol_takes_the_hosts_spelling_of_gcc_rows(offlink, gcc_built):
    """GCC's rows are keyed as the PTX spells them; nm, gdb and backtraces show the host's
    names: run_a._omp_fn.0, a static's own name, a link variable's own name."""
    prog = gcc_built / "gcc_openmp"
    out = run([offlink, "inspect", prog, "--symbol", "main._omp_fn.0"]).stdout
    assert out.startswith("main$_omp_fn$0 (host: main._omp_fn.0): function at 0x"), out
    out = run([offlink, "inspect", prog, "--symbol", "calls"]).stdout.splitlines()
    rows, gcc = out[:2], out[2:]  # the table's rows, then GCC's entries in its terms
    keys = [ln.split(" ")[0] for ln in rows]
    assert keys == sorted(keys) and all(k.startswith("calls$") for k in keys), out
    assert all("(host: calls): variable at" in ln for ln in rows)
    assert sorted(ln.split(" ")[0] for ln in gcc) == keys and all(
        "a `declare target` variable in GCC's host table" in ln for ln in gcc), out
    out = run([offlink, "inspect", prog, "--symbol", "squares"]).stdout
    assert out.startswith("squares$linkptr (host: squares): link-variable at"), out
    # The row's own spelling still works, and the text output shows both.
    assert run([offlink, "inspect", prog, "--symbol", "main$_omp_fn$0"]).stdout == \
        run([offlink, "inspect", prog, "--symbol", "main._omp_fn.0"]).stdout
    rows = {ln.split()[0]: ln for ln in run([offlink, "inspect", prog]).stdout.splitlines()
            if ln.startswith("    ") and "$" in ln}
    assert rows["main$_omp_fn$0"].endswith("host: main._omp_fn.0")
    assert rows["squares$linkptr"].endswith("host: squares")
    host = {s["name"]: s["host_name"] for s in inspect_json(offlink, prog)["table"]["symbols"]}
    assert host["main$_omp_fn$0"] == "main._omp_fn.0" and host["scale"] is None


@pytest.mark.parametrize("pure", [False, True])
def test_table_lookup_takes_the_hosts_spelling(gcc_built, monkeypatch, pure):
    import offlink.table as table_mod
    from offlink import Table

    if pure:
        from offlink._pytable import Core

        monkeypatch.setattr(table_mod, "_Core", Core)
    table = Table.open(gcc_built / "gcc_openmp")
    assert table.backend == ("python" if pure else "c")
    assert table.lookup("main._omp_fn.0") is table.lookup("main$_omp_fn$0") is not None
    assert table.lookup(b"main._omp_fn.0").name == "main$_omp_fn$0"
    assert table.lookup("main.x") is None and table.lookup("scale").name == "scale"


def test_clang_rows_show_host_names_and_demangled_names(offlink, clang_built):
    prog = clang_built / "clang_openmp"
    (row,) = [s for s in inspect_json(offlink, prog)["table"]["symbols"]
              if s["kind"] == "indirect-function"]
    assert row["host_name"] == "add_one"
    out = run([offlink, "inspect", prog, "--symbol", "add_one"]).stdout
    assert out.startswith(f"{row['name']} (host: add_one): indirect-function at"), out
    cxx = {s["name"]: s for s in
           inspect_json(offlink, clang_built / "clang_openmp_cxx")["table"]["symbols"]}
    assert cxx["_ZN4geom6Circle4unitE"]["demangled"] == "geom::Circle::unit"
    kernel = next(s for n, s in cxx.items() if "total_area" in n)
    assert "geom::total_area(geom::Circle const*, int)" in kernel["demangled"]
    assert kernel["host_name"] == f".{kernel['name']}.region_id"  # what nm shows there
    obj = inspect_json(offlink, clang_built / "shapes.o")["cus"][0]
    assert obj["demangled"]["_ZN4geom6Circle4unitE"] == "geom::Circle::unit"


def test_rows_filtered_by_name_and_kind(offlink, built, gcc_built, clang_built):
    prog = built / "multi_cu"

    def names(*args, path=prog):
        return [s["name"] for s in inspect_json(offlink, path, *args)["table"]["symbols"]]

    assert names("--name", "op_*") == ["op_add", "op_mul", "op_sub"]
    assert names("--kind", "variable") == ["hits", "scale", "weights"]
    assert names("--kind", "var", "--name", "*s") == ["hits", "weights"]
    assert names("--kind", "function,variable", "--name", "[hs]*") == ["hits", "scale"]
    assert names("--kind", "indirect", path=clang_built / "clang_openmp") == \
        [n for n in names(path=clang_built / "clang_openmp") if "add_one" in n]
    assert names("--kind", "link", path=gcc_built / "gcc_openmp") == ["squares$linkptr"]
    # The host's spelling matches too, and so does a demangled name.
    assert names("--name", "saxpy_run._omp_fn.*", path=gcc_built / "gcc_openmp") == \
        ["saxpy_run$_omp_fn$0", "saxpy_run$_omp_fn$2"]
    assert names("--name", "geom::*", path=clang_built / "clang_openmp_cxx") == \
        ["_ZN4geom6Circle4unitE"]
    assert names("--name", "*geom::total_area(*", path=clang_built / "clang_openmp_cxx") == \
        [n for n in names(path=clang_built / "clang_openmp_cxx") if "total_area" in n]
    text = run([offlink, "inspect", prog, "--name", "op_*"]).stdout
    assert "11 symbol(s), 3 shown" in text
    info = inspect_json(offlink, prog, "--name", "op_*")
    assert info["table"]["symbol_count"] == 11
    jsonschema.validate(info, SCHEMA)
    for argv, why in [(["--kind", "fn"], "--kind takes function, variable, indirect-function, "
                                         "link-variable (or a unique prefix), not 'fn'"),
                      (["--load-base", "0x1000"], "--load-base goes with --address")]:
        proc = run([offlink, "inspect", prog, *argv], check=False)
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"offlink: error: {why}\n")


def test_archive_rows_grouped_by_member_and_filtered(offlink, tmp_path):
    for name, body in [("a", "int a_one(void) { return 1; }\nint a_two(void) { return 2; }\n"),
                       ("b", "int b_one(void) { return 1; }\n")]:
        (tmp_path / f"{name}.c").write_text(body)
        offered = [w for n in ("one", "two") if f"{name}_{n}" in body
                   for w in ("--offload-symbol", f"{name}_{n}")]
        run([offlink, "cc", *offered, "gcc", "-c", f"{name}.c"], cwd=tmp_path)
    run(["ar", "rcs", "libab.a", "a.o", "b.o"], cwd=tmp_path)
    text = run([offlink, "inspect", "libab.a"], cwd=tmp_path).stdout.splitlines()
    assert text[1] == "  a.o:" and text[2].startswith("    libab.a(a.o): a.c for ")
    assert "  b.o:" in text and text[-1] == "      offers:  b_one"
    info = inspect_json(offlink, tmp_path / "libab.a", "--name", "*two")
    assert [(cu["member"], cu["offered"]) for cu in info["cus"]] == [("a.o", ["a_two"])]
    proc = run([offlink, "inspect", tmp_path / "libab.a", "--kind", "function"], check=False)
    assert proc.returncode == 2 and "--kind needs a linked binary" in proc.stderr


def test_function_rows_have_no_size_and_the_legend_says_why(offlink, built):
    text = run([offlink, "inspect", built / "multi_cu"]).stdout
    assert re.search(r"\n +op_mul +function +0x[0-9a-f]+  size -\n", text)
    assert "  size: a variable's bytes; '-' for a function (its row stores 1" in text
    assert "not an extent" in run([offlink, "inspect", "--help"]).stdout
    out = run([offlink, "inspect", built / "multi_cu", "--symbol", "op_mul"]).stdout
    assert "size" not in out


MAPS_PROGRAM = r"""
#include <stdio.h>
#include <string.h>
int counters[4];
int main(void) {
  char line[512];
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f || !fgets(line, sizeof line, f)) return 1;
  *strchr(line, ' ') = 0;
  printf("%p %s\n", (void *)&counters[2], line);
  return 0;
}
"""


@pytest.mark.parametrize("pie", ["-pie", "-no-pie"])
def test_run_time_address_with_the_load_base_from_proc_maps(offlink, tmp_path, pie):
    """A run-time address and the first line of /proc/PID/maps, as a user has them."""
    (tmp_path / "m.c").write_text(MAPS_PROGRAM)
    run([offlink, "cc", "gcc", "-O2", "-fPIE" if pie == "-pie" else "-fno-PIE", "-c", "m.c"],
        cwd=tmp_path)
    run([offlink, "link", "gcc", pie, "m.o", "-o", "m"], cwd=tmp_path)
    address, maps = run([tmp_path / "m"]).stdout.split()
    base = int(maps.split("-")[0], 16)
    counters = next(s for s in inspect_json(offlink, tmp_path / "m")["table"]["symbols"]
                    if s["name"] == "counters")
    assert int(address, 16) == (base if pie == "-pie" else 0) + counters["address"] + 8
    want = "is in 'counters' (+0x8)"
    for argv in (["--address", address, "--load-base", maps],
                 ["--address", address, "--load-base", hex(base)],
                 # bare hex, as /proc/PID/maps and nm print them
                 ["--address", address[2:], "--load-base", f"{base:x}"],
                 ["--address", f"{base:#x}+{int(address, 16) - base:#x}"]):
        out = run([offlink, "inspect", tmp_path / "m", *argv]).stdout.splitlines()
        assert out[0].endswith(want) and f"load base {base:#x}" in out[0], (argv, out)
    # A backtrace's offset from the load base is st_value: prog(+0x1234).
    offset = counters["address"] + 8
    out = run([offlink, "inspect", tmp_path / "m", "--address", f"+{offset:#x}"]).stdout
    assert out.splitlines()[0] == f"{offset:#x} {want}"
    if pie == "-pie":  # the run-time address alone: outside the file, and it says what to add
        proc = run([offlink, "inspect", tmp_path / "m", "--address", address], check=False)
        out = proc.stdout
        assert proc.returncode == 1 and out.endswith(
            "past the end of the binary's sections: a run-time address needs --load-base\n"), out


# Forks and execs the command from a small Python process, so the peak it reports is the
# command's own: a child forked from the test process would count the test process's memory
# (Linux keeps the pre-exec address space's high-water mark in ru_maxrss), and pytest grows
# past 200 MiB over a whole run.
_PEAK = """import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def measured(argv) -> tuple[subprocess.CompletedProcess, int]:
    """Run a command; its result and its own peak resident memory in bytes."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        peak = os.path.join(d, "peak")
        proc = subprocess.run([sys.executable, "-c", _PEAK, peak, *map(str, argv)],
                              capture_output=True, text=True)
        with open(peak) as f:
            kib = int(f.read())
    return subprocess.CompletedProcess(argv, proc.returncode, proc.stdout, proc.stderr), kib * 1024


def fat_object(offlink, d: Path) -> Path:
    (d / "a.c").write_text("int twice(int x) { return 2 * x; }\n")
    run([offlink, "cc", "gcc", "-c", "a.c", "-o", "a.o"], cwd=d)
    return d / "a.o"


def with_payload(obj: Path, record: bytes, out: Path) -> Path:
    """`obj` with its payload section replaced by `record`."""
    blob = out.with_suffix(".payload")
    blob.write_bytes(record)
    run(["objcopy", "--update-section", f"{PAYLOAD}={blob}", obj, out])
    return out


def test_payload_that_inflates_past_its_bound_is_corrupt(offlink, tmp_path):
    from test_formats import forged_record, zero_bomb

    fat = fat_object(offlink, tmp_path)
    bomb = zero_bomb(1024)  # 1 MiB in the object, 1 GiB of zeros once inflated
    declared = with_payload(fat, forged_record(bomb, 4096), tmp_path / "declared.o")
    v1 = with_payload(fat, forged_record(bomb, None), tmp_path / "v1.o")
    for obj, argv, why, most in [
        (declared, ["inspect"], "more than the 4096 bytes its header declares", 200 << 20),
        (declared, ["link", "gcc"], "more than the 4096 bytes its header declares", 200 << 20),
        (v1, ["inspect"], "more than the 268435456-byte limit", 800 << 20),  # no declared size
    ]:
        proc, peak = measured([offlink, *argv, obj, "-o", tmp_path / "prog"]
                              if argv[0] == "link" else [offlink, *argv, obj])
        assert (proc.returncode, proc.stdout) == (1, "")
        assert proc.stderr == (f"offlink: error: {obj}: section {PAYLOAD}: corrupt payload "
                               f"(the code inflates to {why})\n")
        assert peak < most, f"{argv[0]} {obj.name}: {peak >> 20} MiB"
    assert not (tmp_path / "prog").exists()


def test_section_name_table_out_of_range_is_corrupt(offlink, tmp_path):
    fat = fat_object(offlink, tmp_path)
    data = bytearray(fat.read_bytes())
    (shnum,) = struct.unpack_from("<H", data, 60)
    text = next(int(ln.split("[")[1].split("]")[0]) for ln in
                run(["readelf", "-S", "-W", fat]).stdout.splitlines() if " .text " in ln)
    for index, why in [(shnum, f"section name table index {shnum}, but {shnum} sections"),
                       (0xFEFF, f"section name table index {0xFEFF}, but {shnum} sections"),
                       (text, f"section name table {text} is not a string table")]:
        struct.pack_into("<H", data, 62, index)  # e_shstrndx
        bad = tmp_path / "bad.o"
        bad.write_bytes(data)
        for argv in (["inspect", bad], ["inspect", "--json", bad],
                     ["link", "gcc", bad, "-o", tmp_path / "prog"]):
            proc = run([offlink, *argv], check=False)
            assert (proc.returncode, proc.stdout) == (1, ""), argv
            assert proc.stderr == f"offlink: error: {bad}: corrupt ELF ({why})\n"
    assert not (tmp_path / "prog").exists()


def test_damaged_image_is_named(offlink, built, tmp_path):
    from offlink import Table

    prog = built / "multi_cu"
    data = bytearray(prog.read_bytes())
    (target,) = Table.open(prog).targets
    start = data.find(target.image)
    assert start > 0 and data.find(target.image, start + 1) < 0
    data[start + len(target.image) // 2] ^= 0x01  # one bit: the table's own checksum still holds
    bad = tmp_path / "prog"
    bad.write_bytes(data)
    line = (f"offlink: error: {bad}: .openmp_target: the image of target {target.name} is "
            f"damaged (image checksum mismatch)\n")
    for argv in (["inspect", bad], ["inspect", "--json", bad],
                 ["inspect", bad, "--symbol", "op_mul"]):
        proc = run([offlink, *argv], check=False)
        assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", line), argv


def test_every_damaged_image_is_named():
    from offlink.formats import table as tf
    from offlink.table import Table

    images = [tf.ImageSpec(name, "shared-object", name.encode() * 50) for name in "abc"]
    blob = bytearray(tf.build_table(images, [tf.RowSpec("f", 0x100, 1, "function")]))
    assert Table(bytes(blob)).damaged_targets() == []
    for name in "ac":
        blob[blob.rfind(name.encode() * 50) + 7] ^= 0x20
    assert Table(bytes(blob)).damaged_targets() == ["a", "c"]
