"""`offlink inspect` and `extract`: golden text, JSON against the committed schema."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from conftest import ROOT, copy_sample, make_sample, run

PAYLOAD = "gnu.target_lto_x86_64-pc-linux-gnu"
SCHEMA = json.loads((ROOT / "offlink" / "inspect.schema.json").read_text())


@pytest.fixture(scope="module")
def built(offlink, tmp_path_factory) -> Path:
    sample = copy_sample("multi_cu", tmp_path_factory.mktemp("inspect"))
    make_sample(offlink, sample, "run")
    return sample / "build"


def test_json_matches_schema_for_module_object_and_archive(offlink, built):
    run(["ar", "rcs", built / "libops.a", built / "ops.o", built / "vec.o"])
    for path in (built / "multi_cu", built / "ops.o", built / "libops.a"):
        info = json.loads(run([offlink, "inspect", "--json", path]).stdout)
        jsonschema.validate(info, SCHEMA)
    info = json.loads(run([offlink, "inspect", "--json", built / "ops.o"]).stdout)
    assert info["kind"] == "object" and info["cus"][0]["source"] == "ops.c"


def test_text_output_golden(offlink, built):
    text = run([offlink, "inspect", built / "multi_cu"]).stdout
    # Addresses and sizes depend on the toolchain; the shape and the names do not.
    text = re.sub(r"0x[0-9a-f]+", "ADDR", text)
    text = re.sub(r"\d+ bytes", "N bytes", text)
    text = text.replace(str(built), "BUILD")
    assert text == (ROOT / "tests" / "golden" / "inspect-multi_cu.txt").read_text()


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
    out = run([offlink, "inspect", prog, "--symbol", "offlink_translate"]).stdout
    assert "no CU offers it" in out
    out = run([offlink, "inspect", prog, "--symbol", "no_such_thing"]).stdout
    assert "neither in the table nor defined" in out
    proc = run([offlink, "inspect", prog, "--address", "zzz"], check=False)
    assert proc.returncode != 0 and "--address takes a number" in proc.stderr


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
