"""The binary formats, declared with construct: the fat-object payload and the offload table.

Constants that the link's fast paths need live here, so reading them imports no construct.
"""

PAYLOAD_SECTION_PREFIX = "gnu.target_lto_"
# GCC's own offload objects (gcc -fopenmp -foffload=...): read by offlink/dialects/gcc.py.
GCC_OFFLOAD_SECTION_PREFIX = ".gnu.offload_lto_"
