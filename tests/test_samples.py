"""The samples are real programs: built with offlink, run, their output compared."""

from __future__ import annotations

import json

import pytest
from conftest import copy_sample, make_sample, run

# Link variants of DESIGN.md, each on the multi-CU sample: (CFLAGS, LDFLAGS).
VARIANTS = {
    "default": ("-O2", ""),
    "pie": ("-O2 -fPIE", "-pie"),
    "no-pie": ("-O2 -fno-PIE", "-no-pie"),
    "strip": ("-O2", "-s"),
    "gc-sections": ("-O2 -ffunction-sections -fdata-sections", "-Wl,--gc-sections"),
    "host-lto": ("-O2 -flto", "-flto"),
    "debug": ("-O0 -g", ""),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_multi_cu_runs_its_target_code(offlink, tmp_path, variant):
    cflags, ldflags = VARIANTS[variant]
    sample = copy_sample("multi_cu", tmp_path)
    make_sample(offlink, sample, "run", CFLAGS=cflags, LDFLAGS=ldflags)
    info = json.loads(run([offlink, "inspect", "--json", sample / "build" / "multi_cu"]).stdout)
    names = {s["name"]: s for s in info["table"]["symbols"]}
    assert {"op_add", "op_sub", "op_mul", "ops_side", "scale", "weights", "hits"} <= set(names)
    assert names["weights"]["kind"] == "variable" and names["weights"]["size"] == 32
    assert names["op_mul"]["kind"] == "function" and names["op_mul"]["size"] == 1
    assert "calls" not in names  # statics are never offered
    assert [t["name"] for t in info["table"]["targets"]] == ["x86_64-pc-linux-gnu"]


def test_strip_leaves_no_symbol_table(offlink, tmp_path):
    sample = copy_sample("multi_cu", tmp_path)
    make_sample(offlink, sample, "run", LDFLAGS="-s")
    sections = run(["readelf", "-S", "-W", sample / "build" / "multi_cu"]).stdout
    assert ".symtab" not in sections and ".openmp_target" in sections


def test_cxx_sample(offlink, tmp_path):
    sample = copy_sample("cxx", tmp_path)
    make_sample(offlink, sample, "run")
    info = json.loads(run([offlink, "inspect", "--json", sample / "build" / "cxx"]).stdout)
    names = {s["name"] for s in info["table"]["symbols"]}
    # Mangled names are the keys: a namespace function, a template instance, a static member.
    assert {"_ZN4geom4areaEdd", "_ZN4geom5twiceIiEET_S1_", "_ZN4geom7Counter5countE"} <= names


def test_executable_and_shared_library_each_have_a_table(offlink, tmp_path):
    sample = copy_sample("exe_dso", tmp_path)
    make_sample(offlink, sample, "run")
    exe = json.loads(run([offlink, "inspect", "--json", sample / "build" / "app"]).stdout)
    lib = json.loads(run([offlink, "inspect", "--json", sample / "build" / "libshape.so"]).stdout)
    exe_names = {s["name"] for s in exe["table"]["symbols"]}
    lib_names = {s["name"] for s in lib["table"]["symbols"]}
    assert "app_where" in exe_names and "shape_area" not in exe_names
    assert {"shape_area", "shape_version", "shape_where"} <= lib_names
