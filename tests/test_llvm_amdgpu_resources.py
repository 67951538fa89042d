"""Unit tests of toolchains/llvm/amdgpu_resources.py: what LLVM 20+'s AMDGPU assembly and
objects say of each function's and kernel's resources, read as the per-CU link's check reads
them (tests/test_clang22_gpu.py runs the check on clang-22's objects)."""

from __future__ import annotations

import struct

import pytest

from offlink.elf import ElfFile
from offlink.toolchains.llvm.amdgpu_resources import (
    SHN_ABS,
    function_info,
    kernels,
    problem,
)

# As llvm-lto2 --filetype=asm of LLVM 22 writes them for a CU (no kernel; heavy calls
# helper in the same CU and `outside`, another CU's, whose values the module assumes).
ASM = """
\t.set helper.num_vgpr, 40
\t.set helper.num_agpr, 0
\t.set helper.numbered_sgpr, 34
\t.set helper.private_seg_size, 16
\t.set heavy.num_vgpr, max(128, helper.num_vgpr, amdgpu.max_num_vgpr)
\t.set heavy.num_agpr, max(0, helper.num_agpr)
\t.set heavy.numbered_sgpr, max(33, helper.numbered_sgpr)
\t.set heavy.private_seg_size, 412+(max(helper.private_seg_size))
\t.set heavy.uses_vcc, or(0, 1)
\t.set amdgpu.max_num_vgpr, 64
"""


def test_function_values_are_the_set_expressions_evaluated():
    info = function_info(ASM)
    assert info["helper"] == {"num_vgpr": 40, "num_agpr": 0, "numbered_sgpr": 34,
                              "private_seg_size": 16}
    assert info["heavy"] == {"num_vgpr": 128, "num_agpr": 0, "numbered_sgpr": 34,
                             "private_seg_size": 428}


def test_an_expression_naming_what_the_file_does_not_set_is_an_error():
    with pytest.raises(ValueError):
        function_info("\t.set f.num_vgpr, max(2, elsewhere.num_vgpr)\n")


def _object(symbols: list[tuple[str, int, int]]) -> ElfFile:
    """A minimal ELF64 relocatable object with these (name, value, st_shndx) symbols."""
    strtab = b"\0" + b"".join(n.encode() + b"\0" for n, _, _ in symbols)
    syms = bytes(24)
    pos = 1
    for name, value, shndx in symbols:
        syms += struct.pack("<IBBHQQ", pos, 0x11, 0, shndx, value, 0)
        pos += len(name) + 1
    shstr = b"\0.strtab\0.symtab\0"
    body = strtab + syms + shstr
    off_str, off_sym, off_shstr = 64, 64 + len(strtab), 64 + len(strtab) + len(syms)
    shoff = 64 + len(body)
    header = struct.pack("<4sBBBBB7xHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 0, 1, 224, 1, 0,
                         0, shoff, 0, 64, 0, 0, 64, 4, 3)
    sections = bytes(64)
    sections += struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, off_str, len(strtab), 0, 0, 1, 0)
    sections += struct.pack("<IIQQQQIIQQ", 9, 2, 0, 0, off_sym, len(syms), 1, 1, 8, 24)
    sections += struct.pack("<IIQQQQIIQQ", 17, 3, 0, 0, off_shstr, len(shstr), 0, 0, 1, 0)
    return ElfFile(header + body + sections, "k.o")


def test_a_kernels_values_are_its_objects_resource_symbols():
    elf = _object([("k", 0, 2), ("k.kd", 0, 2), ("k.num_vgpr", 77, SHN_ABS),
                   ("k.numbered_sgpr", 100, SHN_ABS), ("k.private_seg_size", 0, SHN_ABS),
                   ("other.num_vgpr", 5, SHN_ABS)])
    assert kernels(elf) == {"k": {"num_vgpr": 77, "numbered_sgpr": 100,
                                  "private_seg_size": 0}}


def test_the_refusal_names_kernel_callee_and_the_first_lacking_measure():
    have = {"num_vgpr": 77, "num_agpr": 0, "numbered_sgpr": 100, "private_seg_size": 0}
    need = {"num_vgpr": 40, "num_agpr": 0, "numbered_sgpr": 34, "private_seg_size": 16}
    said = problem("k", "a.c (a.o)", "helper", "b.c (b.o)", have, need)
    assert said.startswith("kernel k (a.c (a.o)) calls helper (b.c (b.o)), which needs 16 "
                           "bytes of scratch; compiled on its own the kernel was given 0")
    assert problem("k", "a", "f", "b", have, {**need, "private_seg_size": 0}) == ""
    assert "resource needs offlink cannot read" in problem("k", "a", "f", "b", have, {})
