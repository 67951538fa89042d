"""`offlink inspect` in the terms of the toolchain that made a binary's offload code: --symbol
for GCC's and clang's objects linked by offlink (samples/users_openmp), addresses read as hex
as nm and /proc/PID/maps print them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import SAMPLES, need_tool, run

from offlink.cli.inspect_cmd import parse_address
from offlink.errors import UsageError

SAMPLE = SAMPLES / "users_openmp"
SOURCES = ("main", "util", "vecops", "stats")
GCC = ["gcc", "-O2", "-fopenmp", "-foffload=nvptx-none",
       "-foffload-options=nvptx-none=-misa=sm_80"]
CLANG = ["clang-19", "-O2", "-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu"]


@pytest.mark.parametrize("address, base, want", [
    ("555555555149", "555555554000", (0x555555555149, 0x555555554000)),
    ("0x555555555149", "555555554000-555555575000 r--p 00000000 fe:01 1 /x",
     (0x555555555149, 0x555555554000)),
    ("1149", None, (0x1149, None)),  # nm's st_value, bare
    ("0000000000001149", None, (0x1149, None)),  # nm pads to 16 digits
    ("+0x1149", None, (0x1149, None)),
    ("555555554000+1149", None, (0x555555555149, 0x555555554000)),
    ("7f1234abc000", "7f1234a00000", (0x7F1234ABC000, 0x7F1234A00000)),
])
def test_addresses_are_hex_as_maps_and_nm_print_them(address, base, want):
    assert parse_address(address, base) == want


@pytest.mark.parametrize("address, base, why", [
    ("1", "93824992231424", "--load-base 93824992231424 is ambiguous: read as hex (as "
                            "/proc/PID/maps and nm print it) it is past user space; if it is "
                            "decimal, give it as 0x555555554000"),
    ("1", "4096", "--load-base 4096 is ambiguous"),
    ("1", "555555554001", "--load-base 555555554001 is not a page boundary"),
    ("12g", None, "--address takes a number: hex"),
    ("93824992235849", None, "--address 93824992235849 is ambiguous"),
])
def test_ambiguous_or_wrong_numbers_are_refused(address, base, why):
    with pytest.raises(UsageError) as e:
        parse_address(address, base)
    assert str(e.value).startswith(why), str(e.value)


def link_sample(offlink: str, compiler: list[str], tmp_path: Path) -> Path:
    for name in SOURCES:
        run([*compiler, "-c", SAMPLE / f"{name}.c", "-o", tmp_path / f"{name}.o"])
    run([offlink, "link", *compiler, *(tmp_path / f"{n}.o" for n in SOURCES), "-o",
         tmp_path / "app"])
    return tmp_path / "app"


def need_gcc_offload() -> None:
    need_tool(shutil.which("x86_64-linux-gnu-accel-nvptx-none-gcc-12"),
              "gcc-12-offload-nvptx is not installed")


def need_clang() -> None:
    need_tool(shutil.which("clang-19"), "clang-19 is not installed")


@pytest.fixture(scope="module")
def gcc_app(offlink, tmp_path_factory) -> Path:
    need_gcc_offload()
    return link_sample(offlink, GCC, tmp_path_factory.mktemp("gcc"))


@pytest.fixture(scope="module")
def clang_app(offlink, tmp_path_factory) -> Path:
    need_clang()
    return link_sample(offlink, CLANG, tmp_path_factory.mktemp("clang"))


def symbol(offlink: str, app: Path, name: str):
    return run([offlink, "inspect", app, "--symbol", name], check=False)


def test_gcc_declare_target_function_is_found_in_the_nvptx_image(offlink, gcc_app):
    proc = symbol(offlink, gcc_app, "scale")  # on the device: exit 0, though no row
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("'scale' is in the nvptx-none image (a `declare target` "
                                  "function or variable GCC compiled for the device), but GCC's "
                                  "offload tables list only target regions' kernels")
    proc = symbol(offlink, gcc_app, "main")  # host code only
    assert proc.returncode == 1 and "'main' is not in the device image" in proc.stdout
    proc = symbol(offlink, gcc_app, "bias")  # a declare target variable: a row
    assert proc.returncode == 0 and proc.stdout.startswith("bias: variable at 0x")


def test_clang_function_pointer_suggests_declare_target_indirect(offlink, clang_app):
    proc = symbol(offlink, clang_app, "scale")  # on the device: exit 0, though no row
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("'scale' is in the openmp-x86_64-pc-linux-gnu image but has "
                                  "no row: clang lists a function only when it is `declare "
                                  "target indirect`"), proc.stdout
    assert "#pragma omp begin declare target indirect" in proc.stdout
    assert symbol(offlink, clang_app, "bias").returncode == 0


# -- binaries the toolchains linked themselves ----------------------------------------------

def own_link(compiler: list[str], tmp_path: Path, *extra: str) -> Path:
    objs = []
    for name in SOURCES:
        obj = tmp_path / f"{name}.o"
        if not obj.exists():
            run([*compiler, "-c", SAMPLE / f"{name}.c", "-o", obj])
        objs.append(obj)
    out = tmp_path / f"app{''.join(extra).replace('-', '_')}"
    run([*compiler, *extra, *objs, "-o", out])
    return out


def inspect_json(offlink: str, path: Path, *args: str) -> dict:
    import json

    import jsonschema

    from offlink.cli.inspect_cmd import SCHEMA_ID

    info = json.loads(run([offlink, "inspect", "--json", path, *args]).stdout)
    schema = json.loads((Path(__file__).parent.parent / "offlink" / "cli" / "inspect.schema.json")
                        .read_text())
    jsonschema.validate(info, schema)
    assert info["schema"] == SCHEMA_ID and info["kind"] == "module"
    return info


def loaded_words(elf, section) -> list[int]:
    """pyelftools' own reading of a section's 8-byte words as the loader leaves them (the
    dynamic R_X86_64_RELATIVE relocations of a PIE applied)."""
    import struct

    data = section.data()
    words = {section["sh_addr"] + i: struct.unpack_from("<Q", data, i)[0]
             for i in range(0, len(data), 8)}
    rela = elf.get_section_by_name(".rela.dyn")
    for r in (rela.iter_relocations() if rela is not None else ()):
        if r["r_info_type"] == 8 and r["r_offset"] in words:  # R_X86_64_RELATIVE
            words[r["r_offset"]] = r["r_addend"]
    return [words[a] for a in sorted(words)]


def symbols_at(elf) -> dict[int, str]:
    at: dict[int, str] = {}
    for s in elf.get_section_by_name(".symtab").iter_symbols():
        if s["st_info"]["type"] in ("STT_FUNC", "STT_OBJECT") and s["st_shndx"] != "SHN_UNDEF":
            at.setdefault(s["st_value"], s.name)
    return at


@pytest.mark.parametrize("pie", ["-pie", "-no-pie"])
def test_gccs_own_link_entries_match_its_host_tables(offlink, tmp_path, pie):
    """The entries are GCC's .gnu.offload_funcs / .gnu.offload_vars as pyelftools reads them,
    in order, each named as the accel compiler names the host function (`.` -> `$`), and the
    mkoffload image holds each name's definition."""
    need_gcc_offload()
    from elftools.elf.elffile import ELFFile

    app = own_link(GCC, tmp_path, pie)
    (gcc,) = inspect_json(offlink, app)["offload"]
    assert gcc["toolchain"] == "gcc" and gcc["registration"] == "GOMP_offload_register_ver"
    assert gcc["notes"] == []
    with open(app, "rb") as f:
        elf = ELFFile(f)
        funcs = loaded_words(elf, elf.get_section_by_name(".gnu.offload_funcs"))
        var_words = loaded_words(elf, elf.get_section_by_name(".gnu.offload_vars"))
        names = symbols_at(elf)
    variables = list(zip(var_words[::2], var_words[1::2]))
    entries = gcc["entries"]
    assert [e["address"] for e in entries] == funcs + [a for a, _ in variables]
    assert [e["kind"] for e in entries] == ["function"] * len(funcs) + ["variable"] * len(variables)
    assert [e["size"] for e in entries[len(funcs):]] == [s for _, s in variables]
    for e in entries:
        host = names[e["address"]]
        assert e["name"] == host.replace(".", "$") and e["host_name"] in (None, host)
    assert {e["name"] for e in entries} >= {"bias", "vec_scale$_omp_fn$0", "stats_sum$_omp_fn$0"}
    (image,) = gcc["images"]
    assert (image["triple"], image["kind"], image["producer"]) == ("nvptx-none", "ptx",
                                                                    "gcc-mkoffload")
    assert "sm_80" in image["archs"]
    out = tmp_path / "x"
    run([offlink, "extract", "--all", "-o", f"{out}/", app])
    (ptx,) = out.iterdir()
    text = ptx.read_text()
    for e in entries:  # mkoffload's wrapper kernels and the accel compiler's variables
        assert (f".entry {e['name']} (" if e["kind"] == "function"
                else f"DEF: {e['name']}\n") in text, e


def test_gcc_link_without_the_image_has_no_registration_and_explain_says_so(offlink, tmp_path):
    need_gcc_offload()
    app = own_link(GCC, tmp_path, "-foffload=disable")
    (gcc,) = inspect_json(offlink, app)["offload"]
    assert gcc["registration"] is None and gcc["images"] == []
    assert gcc["notes"][0].startswith("no GOMP_offload_register_ver call")
    said = run([offlink, "inspect", "--explain", app]).stdout
    assert said.startswith("no registration call: no image is handed to the runtime, so every "
                           "target region runs on the host\n  evidence: no "
                           "GOMP_offload_register_ver or GOMP_offload_register in the binary's "
                           "symbol tables\n  fix: link with gcc and the same -foffload= as the "
                           "compiles"), said


def test_clangs_own_link_entries_and_images_match_llvm_objdump(offlink, tmp_path):
    """Entries as pyelftools reads omp_offloading_entries (name pointers relocated), images as
    `llvm-objdump-19 --offloading` lists them; the 19 error `entry 0 has no name` is gone."""
    need_clang()
    need_tool(shutil.which("llvm-objdump-19"), "llvm-19 is not installed")
    import struct

    from elftools.elf.elffile import ELFFile

    app = own_link(CLANG, tmp_path)
    (llvm,) = inspect_json(offlink, app)["offload"]
    assert llvm["toolchain"] == "llvm" and llvm["registration"] == "__tgt_register_lib"
    with open(app, "rb") as f:
        elf = ELFFile(f)
        section = elf.get_section_by_name("omp_offloading_entries")
        words = loaded_words(elf, section)
        raw = section.data()
        want = []
        for i in range(0, len(raw), 32):
            size, flags = struct.unpack_from("<Qi", raw, i + 16)
            name_at = words[i // 8 + 1]
            for s in elf.iter_sections():
                inside = s["sh_addr"] <= name_at < s["sh_addr"] + s["sh_size"]
                if inside and s["sh_type"] != "SHT_NOBITS":
                    data = s.data()[name_at - s["sh_addr"]:]
                    want.append((data[: data.index(b"\0")].decode(), words[i // 8], size))
    got = [(e["name"], e["address"], e["size"] if e["kind"] == "variable" else 0)
           for e in llvm["entries"]]
    assert got == want
    kinds = {e["name"]: e["kind"] for e in llvm["entries"]}
    assert kinds["bias"] == "variable"
    assert sum(k == "function" for k in kinds.values()) == 3
    listed = run(["llvm-objdump-19", "--offloading", app]).stdout
    images = [dict(line.split(None, 1) for line in block.strip().splitlines()[1:]
                   if len(line.split(None, 1)) == 2)
              for block in listed.split("OFFLOADING IMAGE")[1:]]
    assert [(i["triple"], i["kind"], i["producer"]) for i in images] == \
        [(i["triple"], i["kind"], i["producer"]) for i in llvm["images"]]
    text = run([offlink, "inspect", app]).stdout
    assert "clang's offload code (offload entries); runtime libomptarget, registration: " \
        "__tgt_register_lib" in text


def test_clang_explain_names_the_missing_runtime_and_offload_disabled(offlink, tmp_path):
    import os

    need_clang()
    app = own_link(CLANG, tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH",
                                                            "OMP_TARGET_OFFLOAD")}
    said = run([offlink, "inspect", "--explain", app], env=env).stdout
    assert said.startswith("libomptarget.so.19.1 is not on the loader's path"), said
    env["LD_LIBRARY_PATH"] = "/usr/lib/llvm-19/lib"
    said = run([offlink, "inspect", "--explain", app], env=env).stdout
    assert said.startswith("nothing in the file or on this machine says"), said
    env["OMP_TARGET_OFFLOAD"] = "disabled"
    said = run([offlink, "inspect", "--explain", app], env=env).stdout
    assert said.startswith("OMP_TARGET_OFFLOAD=DISABLED is set"), said


def test_nvcc_link_shows_its_fatbin_and_kernels(offlink, tmp_path):
    from offlink.errors import ToolError
    from offlink.toolchains.cuda_toolkit import toolkit

    try:
        nvcc = toolkit().nvcc  # where offlink finds it: CUDA_HOME (.ci/run's wheels), PATH...
    except ToolError:
        nvcc = need_tool(None, "CUDA is not installed")
    (tmp_path / "k.cu").write_text(
        "__global__ void saxpy(float a, float *x, float *y, int n) {\n"
        "  int i = threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }\n"
        "int main() { return saxpy == 0; }\n")
    run([nvcc, "-arch=sm_90", tmp_path / "k.cu", "-o", tmp_path / "k"])
    (cuda,) = inspect_json(offlink, tmp_path / "k")["offload"]
    assert cuda["toolchain"] == "cuda" and cuda["registration"] == "__cudaRegisterFatBinary"
    assert any("sm_90" in i["archs"] for i in cuda["images"])
    (kernel,) = [e for e in cuda["entries"] if e["name"] == "_Z5saxpyfPfS_i"]
    assert kernel["address"] and kernel["demangled"] == "saxpy(float, float*, float*, int)"
    run([offlink, "extract", "--all", "-o", f"{tmp_path / 'x'}/", tmp_path / "k"])
    assert any(p.suffix == ".fatbin" for p in (tmp_path / "x").iterdir())
