"""libomptarget's registration (omptarget.py) as an x86-64 object written here, not compiled.

omptarget.c_source's text, compiled by the link's clang (`-c -O2 -fPIC`), is always the same
code and the same data but for the number of images and the entries section: so the object is
written as that compile writes it, without starting a compiler (a cold clang link started one,
~42 ms of CPU beside the device links on the way to the host link). Written as clang 19 and 22
compile the text (tests/test_omptarget_object.py compares the two: sections, symbols,
relocations, code):

  .text              register_lib (the constructor: __tgt_register_lib(&desc);
                     atexit(unregister_lib)) and unregister_lib (__tgt_unregister_lib(&desc))
  SECTION            the zero-row dummy, so the entries section and __start_/__stop_ exist
  .data              images[N] (ImageStart, ImageEnd, EntriesBegin, EntriesEnd), then desc
                     (NumDeviceImages, DeviceImages, HostEntriesBegin, HostEntriesEnd)
  .init_array.100    register_lib, priority 100 (omptarget.py says why)
  .eh_frame          the two functions' unwind rows

and the symbols and relocations those need. Deterministic: nothing of the link's folders or
time is in it.
"""

from __future__ import annotations

import struct

from ...elf import (
    ELF_MAGIC,
    EM_X86_64,
    SHF_ALLOC,
    SHT_PROGBITS,
    SHT_RELA,
    SHT_STRTAB,
    SHT_SYMTAB,
    STB_GLOBAL,
    STB_LOCAL,
    STT_FUNC,
    STT_NOTYPE,
    STT_OBJECT,
    STT_SECTION,
    STV_HIDDEN,
)

SHF_WRITE, SHF_EXECINSTR, SHF_INFO_LINK = 0x1, 0x4, 0x40
SHT_INIT_ARRAY, SHT_X86_64_UNWIND = 14, 0x70000001
R_X86_64_64, R_X86_64_PC32, R_X86_64_PLT32 = 1, 2, 4

# register_lib at 0, unregister_lib at 0x20 (clang's code, padded to 16 between them):
#   push %rax; lea desc(%rip),%rdi; call __tgt_register_lib@PLT;
#   lea unregister_lib(%rip),%rdi; pop %rax; jmp atexit@PLT
#   lea desc(%rip),%rdi; jmp __tgt_unregister_lib@PLT
TEXT = bytes.fromhex("50" "488d3d00000000" "e800000000" "488d3d0c000000" "58" "e900000000"
                     "660f1f440000" "488d3d00000000" "e900000000")
REGISTER_SIZE, UNREGISTER_AT, UNREGISTER_SIZE = 0x1A, 0x20, 0xC
# (offset in .text, symbol, type, addend - desc's offset in .data where DESC)
DESC = "desc"
TEXT_RELOCS = ((0x04, DESC, R_X86_64_PC32, -4), (0x09, "__tgt_register_lib", R_X86_64_PLT32, -4),
               (0x16, "atexit", R_X86_64_PLT32, -4), (0x23, DESC, R_X86_64_PC32, -4),
               (0x28, "__tgt_unregister_lib", R_X86_64_PLT32, -4))
# A CIE (code alignment 1, data alignment -8, return address r16, pointers pc-relative) and
# an FDE per function: register_lib's CFA moves to rsp+16 after its push and back after its
# pop; unregister_lib's stays at rsp+8. The FDEs' starts are relocated (offsets 0x20, 0x38).
EH_FRAME = bytes.fromhex("14000000" "00000000" "017a5200" "01781001" "1b0c0708" "90010000"
                         "14000000" "1c000000" "00000000" "1a000000" "00410e10" "540e0800"
                         "14000000" "34000000" "00000000" "0c000000" "00000000" "00000000")
EH_RELOCS = ((0x20, 0), (0x38, UNREGISTER_AT))
OUTSIDE = ("__tgt_register_lib", "atexit", "__tgt_unregister_lib")


def registration_object(image_symbols: list[tuple[str, str]], section: str,
                        writable: bool) -> bytes:
    """The relocatable x86-64 object of omptarget.c_source's text: `image_symbols` each
    image's (start, end) symbols, `section` the entries section, `writable` whether it is
    (its dummy is not const: clang 17-20's rows)."""
    n = len(image_symbols)
    desc_at = 32 * n

    # The sections' indices, in clang's order (`names` and `sections` below list them so).
    TEXT_I, _, ENTRIES, DATA, _, INIT, _, _, EH, _, SYMTAB, STRTAB, SHSTRTAB = range(1, 14)

    # Symbols: the locals (.text's section symbol at 1, .data's at 4: relocations name those
    # places by them), then the globals; each (name, type, other, section, value, size).
    text_sym, data_sym = 1, 4
    locals_ = [("", STT_SECTION, 0, TEXT_I, 0, 0),
               ("register_lib", STT_FUNC, 0, TEXT_I, 0, REGISTER_SIZE),
               ("unregister_lib", STT_FUNC, 0, TEXT_I, UNREGISTER_AT, UNREGISTER_SIZE),
               ("", STT_SECTION, 0, DATA, 0, 0),
               ("images", STT_OBJECT, 0, DATA, 0, desc_at),
               (DESC, STT_OBJECT, 0, DATA, desc_at, 32),
               ("dummy_entry", STT_OBJECT, 0, ENTRIES, 0, 0)]
    start, stop = f"__start_{section}", f"__stop_{section}"
    globals_ = [(name, STT_NOTYPE, 0, 0, 0, 0) for name in OUTSIDE]
    globals_ += [(name, STT_NOTYPE, STV_HIDDEN, 0, 0, 0)
                 for pair in image_symbols for name in pair]
    globals_ += [(start, STT_NOTYPE, STV_HIDDEN, 0, 0, 0), (stop, STT_NOTYPE, STV_HIDDEN, 0, 0, 0)]
    strtab = bytearray(b"\0")
    symtab = bytearray(24)
    index: dict[str, int] = {}
    sym = struct.Struct("<IBBHQQ")
    for k, (name, kind, other, shndx, value, size) in enumerate(locals_ + globals_, 1):
        at = 0
        if name:
            at = len(strtab)
            strtab += name.encode() + b"\0"
            index[name] = k
        bind = STB_LOCAL if k <= len(locals_) else STB_GLOBAL
        symtab += sym.pack(at, (bind << 4) | kind, other, shndx, value, size)

    rela = struct.Struct("<QQq")

    def relocs(rows) -> bytes:
        return b"".join(rela.pack(at, (s << 32) | kind, addend) for at, s, kind, addend in rows)

    text_rela = relocs((at, data_sym, kind, addend + desc_at) if name == DESC
                       else (at, index[name], kind, addend)
                       for at, name, kind, addend in TEXT_RELOCS)
    data = bytearray(desc_at + 32)
    struct.pack_into("<i", data, desc_at, n)
    rows = []
    for k, pair in enumerate(image_symbols):
        rows += [(32 * k + 8 * j, index[name], R_X86_64_64, 0)
                 for j, name in enumerate((*pair, start, stop))]
    rows += [(desc_at + 8, data_sym, R_X86_64_64, 0), (desc_at + 16, index[start], R_X86_64_64, 0),
             (desc_at + 24, index[stop], R_X86_64_64, 0)]
    data_rela = relocs(rows)
    init_rela = relocs([(0, text_sym, R_X86_64_64, 0)])
    eh_rela = relocs((at, text_sym, R_X86_64_PC32, addend) for at, addend in EH_RELOCS)

    names = ["", ".text", ".rela.text", section, ".data", ".rela.data", ".init_array.100",
             ".rela.init_array.100", ".note.GNU-stack", ".eh_frame", ".rela.eh_frame", ".symtab",
             ".strtab", ".shstrtab"]
    shstrtab = bytearray(b"\0")
    name_at = [0]
    for name in names[1:]:
        name_at.append(len(shstrtab))
        shstrtab += name.encode() + b"\0"

    entries_flags = SHF_ALLOC | (SHF_WRITE if writable else 0)
    # (type, flags, content, link, info, align, entsize), by index
    sections = [
        (SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, TEXT, 0, 0, 16, 0),
        (SHT_RELA, SHF_INFO_LINK, text_rela, SYMTAB, TEXT_I, 8, 24),
        (SHT_PROGBITS, entries_flags, b"", 0, 0, 8, 0),
        (SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, bytes(data), 0, 0, 16, 0),
        (SHT_RELA, SHF_INFO_LINK, data_rela, SYMTAB, DATA, 8, 24),
        (SHT_INIT_ARRAY, SHF_ALLOC | SHF_WRITE, bytes(8), 0, 0, 8, 0),
        (SHT_RELA, SHF_INFO_LINK, init_rela, SYMTAB, INIT, 8, 24),
        (SHT_PROGBITS, 0, b"", 0, 0, 1, 0),
        (SHT_X86_64_UNWIND, SHF_ALLOC, EH_FRAME, 0, 0, 8, 0),
        (SHT_RELA, SHF_INFO_LINK, eh_rela, SYMTAB, EH, 8, 24),
        (SHT_SYMTAB, 0, bytes(symtab), STRTAB, len(locals_) + 1, 8, 24),
        (SHT_STRTAB, 0, bytes(strtab), 0, 0, 1, 0),
        (SHT_STRTAB, 0, bytes(shstrtab), 0, 0, 1, 0),
    ]
    out = bytearray(64)
    headers = [bytes(64)]
    shdr = struct.Struct("<IIQQQQIIQQ")
    for k, (kind, flags, content, link, info, align, entsize) in enumerate(sections, 1):
        out += bytes(-len(out) % align)
        headers.append(shdr.pack(name_at[k], kind, flags, 0, len(out), len(content), link, info,
                                 align, entsize))
        out += content
    out += bytes(-len(out) % 8)
    shoff = len(out)
    out += b"".join(headers)
    ident = ELF_MAGIC + bytes([2, 1, 1, 0]) + bytes(8)  # ELF64, LE, version 1, System V
    out[:64] = struct.pack("<16sHHIQQQIHHHHHH", ident, 1, EM_X86_64, 1, 0, 0, shoff, 0, 64, 0,
                           0, shdr.size, len(headers), SHSTRTAB)
    return bytes(out)
