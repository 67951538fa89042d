"""Every binary format offlink reads or writes, declared with construct: the reference.

The link, `offlink cc` and the runtime's Python read and write these formats with `struct`
(table.py, payload.py, offload_binary.py, offload_entries.py), without importing construct
(benchmarks/formats/RESULTS.md says why); tests/test_format_declarations.py holds each of
those fast paths to the declaration here, field by field and byte for byte, and
tests/test_ctable.py holds the C table core (offlink/runtime/table.h) to it.
"""

from __future__ import annotations

from construct import (
    Array,
    Const,
    Enum,
    GreedyBytes,
    Int16ul,
    Int32sl,
    Int32ul,
    Int64sl,
    Int64ul,
    Padding,
    PascalString,
    Prefixed,
    PrefixedArray,
    Struct,
)

from . import offload_binary, payload, table

# -- the `.openmp_target` table, version 1 (formats/table.md) -------------------------------

TableHeader = Struct(
    "magic" / Const(table.MAGIC),
    "version" / Int16ul,
    "header_size" / Int16ul,
    "flags" / Int32ul,
    "total_size" / Int64ul,
    "meta_size" / Int64ul,
    "meta_crc32" / Int32ul,  # of the metadata [0, meta_size) with this field zero
    "n_targets" / Int32ul,
    "n_symbols" / Int32ul,
    "strings_size" / Int32ul,
    "targets_off" / Int64ul,
    "symbols_off" / Int64ul,
    "index_off" / Int64ul,
    "strings_off" / Int64ul,
    Padding(16),
)

TableTargetEntry = Struct(
    "name_off" / Int32ul,
    "name_len" / Int32ul,
    "kind" / Enum(Int16ul, **table.IMAGE_KINDS),
    "flags" / Int16ul,
    "image_crc32" / Int32ul,
    "image_off" / Int64ul,
    "image_size" / Int64ul,
    Padding(8),
)

TableSymbolRow = Struct(
    "name_off" / Int32ul,
    "name_len" / Int32ul,
    "host_offset" / Int64sl,
    "size" / Int64ul,
    "kind" / Enum(Int16ul, **table.SYMBOL_KINDS),
    "flags" / Int16ul,
    Padding(4),
)

# The address index (formats/table.md, "Address index"): internal nodes of INDEX_FANOUT keys,
# then leaf blocks of INDEX_FANOUT keys and as many (row, span) entries.
TableIndexNode = Array(table.INDEX_FANOUT, Int32sl)

TableIndexLeaf = Struct(
    "key" / Array(table.INDEX_FANOUT, Int32sl),
    "entry" / Array(table.INDEX_FANOUT, Struct("row" / Int32ul, "span" / Int32ul)),
)


def TableAddressIndex(n: int) -> Struct:  # noqa: N802 - a construct factory, named like one
    """The index of n rows: internal nodes from the root layer down, then the leaf blocks."""
    layers = table.index_layers(n)
    return Struct("node" / Array(sum(layers[1:]), TableIndexNode),
                  "leaf" / Array(layers[0], TableIndexLeaf))


# -- the fat object's payload record, version 2 (formats/payload.md) ------------------------

PayloadHeaderV1 = Struct(
    "magic" / Const(payload.MAGIC),
    "version" / Int16ul,
    "flags" / Int16ul,  # bit 0: code is zlib-compressed
    "body_crc32" / Int32ul,
    "body_size" / Int64ul,
)

# Version 2 added the code's size once inflated.
PayloadHeader = Struct(*PayloadHeaderV1.subcons, "code_size" / Int64ul)

PayloadBody = Struct(
    "target" / PascalString(Int16ul, "utf8"),
    "code_kind" / Enum(Int16ul, **payload.CODE_KINDS),
    "source" / PascalString(Int16ul, "utf8"),
    "compiler" / PascalString(Int16ul, "utf8"),
    "options" / PrefixedArray(Int16ul, PascalString(Int32ul, "utf8")),
    "offered" / PrefixedArray(Int32ul, PascalString(Int16ul, "utf8")),
    "code" / Prefixed(Int64ul, GreedyBytes),
)

# -- LLVM's OffloadBinary, versions 1-3 (llvm/Object/OffloadBinary.h; formats/offload-binary.md)

# Version 1's header; versions 2 and 3 read the fifth field as the number of entries, and 3
# adds the InflatedSize (OffloadBinaryHeaderV3).
OffloadBinaryHeader = Struct("magic" / Const(offload_binary.MAGIC), "version" / Int32ul,
                             "size" / Int64ul, "entry_offset" / Int64ul, "entry_size" / Int64ul)

OffloadBinaryHeaderV3 = Struct("magic" / Const(offload_binary.MAGIC), "version" / Int32ul,
                               "size" / Int64ul, "entry_offset" / Int64ul,
                               "entries_count" / Int64ul, "inflated_size" / Int64ul)

OffloadBinaryEntry = Struct("image_kind" / Int16ul, "offload_kind" / Int16ul, "flags" / Int32ul,
                            "string_offset" / Int64ul, "num_strings" / Int64ul,
                            "image_offset" / Int64ul, "image_size" / Int64ul)

OffloadBinaryString = Struct("key_offset" / Int64ul, "value_offset" / Int64ul)

# Versions 2 and 3: the value's size added.
OffloadBinaryStringV2 = Struct("key_offset" / Int64ul, "value_offset" / Int64ul,
                               "value_size" / Int64ul)

# -- LLVM's offload entry rows (llvm/Frontend/Offloading/Utility.h; seed 001) ---------------

# Generation 1 (clang 17-19): `__tgt_offload_entry`.
OffloadEntryV1 = Struct("addr" / Int64ul, "name" / Int64ul, "size" / Int64ul, "flags" / Int32sl,
                        "reserved" / Int32sl)

# Generations 2 and 3 (clang 20; clang 21+).
OffloadEntryV2 = Struct("reserved" / Int64ul, "version" / Int16ul, "kind" / Int16ul,
                        "flags" / Int32ul, "addr" / Int64ul, "name" / Int64ul, "size" / Int64ul,
                        "data" / Int64ul, "aux_addr" / Int64ul)
