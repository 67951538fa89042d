"""The host image's link command (toolchains/offlink/host.py image_argv): what it reads."""

from __future__ import annotations

import subprocess

from offlink.formats.payload import Payload
from offlink.link.plan import plan_link
from offlink.model import CU
from offlink.plugins import CompiledCU
from offlink.toolchains.offlink import host
from offlink.toolchains.offlink.host import HostTarget

TRIPLE = "x86_64-pc-linux-gnu"


def compiled_cu(origin: str, obj: str) -> CompiledCU:
    payload = Payload(TRIPLE, "c", "a.c", "gcc", (), b"int f(void) { return 1; }\n")
    return CompiledCU(CU(origin, payload), HostTarget(TRIPLE), obj, ())


def test_the_cus_objects_are_not_opened_a_shared_library_still_found(tmp_path, monkeypatch):
    """A link input named by path goes into the image link when it is a shared library, also
    under another name; the files the CUs came from are relocatable objects (extract reads CUs
    from nothing else) and are not opened again to ask (1000 opens cost a relink ~10 ms)."""
    (tmp_path / "z.c").write_text("int z(void) { return 2; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", tmp_path / "z.c", "-o", tmp_path / "z.bin"],
                   check=True)
    for name in ("a.o", "b.o"):
        (tmp_path / name).write_bytes(b"\x7fELF")
    monkeypatch.chdir(tmp_path)
    asked: list[str] = []
    real = host.is_shared_library

    def spy(path: str) -> bool:
        asked.append(path)
        return real(path)

    monkeypatch.setattr(host, "is_shared_library", spy)
    plan = plan_link(["gcc", "a.o", "b.o", "z.bin", "-o", "app"])
    argv = HostTarget(TRIPLE).image_argv(
        plan, [compiled_cu("a.o", "w/0.o"), compiled_cu("b.o#1", "w/1.o")], "w/image")
    assert "z.bin" in argv and "a.o" not in argv and "b.o" not in argv
    assert asked == ["z.bin"]
