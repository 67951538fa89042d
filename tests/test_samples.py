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
