"""The host target: target code for the host CPU, as a shared object loaded in-process.

A CU's code is captured as preprocessed C or C++ (with __OFFLINK_TARGET__ defined), compiled
at link time with the compiler that made the host object (-fPIC), and the CUs are linked into
one shared object whose own references bind to itself (-Bsymbolic), so the image's globals
are its own even where the executable exports the same names (FACTS.md).
"""

from __future__ import annotations

from ..elf import (
    STB_GLOBAL,
    STT_FUNC,
    STT_GNU_IFUNC,
    STT_OBJECT,
    STT_TLS,
    STV_HIDDEN,
    ElfFile,
)
from ..errors import LinkError
from . import Target


class HostTarget(Target):
    image_kind = "shared-object"
    # `gcc -c CU.i` (`.ii` for C++): preprocessed code, no `-x` (distcc and sccache take the
    # language from the suffix; with `-x cpp-output` sccache refuses to cache), nothing read
    # but the file itself, so distcc sends it to a distccd and sccache caches it remotely.
    distributable = True
    macro = "__OFFLINK_TARGET_HOST__"
    static_link_problem = ("its image is a shared object loaded with dlopen, which a static "
                           "executable cannot do")

    def __init__(self, triple: str):
        self.name = triple

    def capture_argv(self, compiler, preprocess_args, language, source, output):
        return [compiler, *preprocess_args, "-x", language, *self.defines(), "-E", source,
                "-o", output]

    def source_suffix(self, cu):
        return ".i" if cu.payload.code_kind == "c" else ".ii"

    def compile_argv(self, cu, source, output):
        p = cu.payload
        assert source.endswith(self.source_suffix(cu))  # the suffix says the language
        return [p.compiler, *p.options, "-fPIC", "-c", source, "-o", output]

    def offers(self, cu, obj_path):
        return elf_offers(cu, obj_path)

    def image_argv(self, plan, compiled, output):
        from ..link.plan import find_library

        cxx = next((c for c in compiled if c.cu.payload.code_kind == "c++"), None)
        driver = (cxx or compiled[0]).cu.payload.compiler
        libs = []
        for inp in plan.inputs:
            # System and shared libraries the host program uses, for the image's own
            # references; the user's static archives are not linked in (their CUs are).
            if inp.kind == "library":
                found = find_library(inp.path, plan, inp.static)
                if found is None or found.endswith(".so"):
                    libs.append("-l" + inp.path)
        dirs = ["-L" + d for d in plan.lib_dirs]
        return [driver, "-shared", "-fPIC", "-Wl,-Bsymbolic", "-Wl,-z,defs",
                "-Wl,--hash-style=gnu", "-o", output, *(c.object_path for c in compiled),
                *dirs, *libs]

    def exports(self, image, path):
        return {s.name for s in ElfFile(image, path).symbols(dynamic=True) if s.defined}


def elf_offers(cu, obj_path: str):
    """External functions and variables an ELF target object defines (default or protected
    visibility, not TLS), narrowed to the CU's explicit list when it has one."""
    from ..link.compile import Offer

    elf = ElfFile.open(obj_path)
    found: dict[str, Offer] = {}
    for s in elf.symbols():
        if not s.defined or not s.is_global or s.st_visibility == STV_HIDDEN or not s.name:
            continue
        if s.st_type in (STT_FUNC, STT_GNU_IFUNC):
            found[s.name] = Offer(s.name, "function", 1, s.st_bind == STB_GLOBAL)
        elif s.st_type == STT_OBJECT:
            found[s.name] = Offer(s.name, "variable", s.st_size, s.st_bind == STB_GLOBAL)
        elif s.st_type == STT_TLS and s.name in cu.payload.offered:
            raise LinkError(f"{cu.label}: '{s.name}' is thread-local and cannot be offered")
    if not cu.payload.offered:
        return tuple(found[n] for n in sorted(found))
    missing = [n for n in cu.payload.offered if n not in found]
    if missing:
        statics = {s.name for s in elf.symbols() if s.defined and not s.is_global}
        name = missing[0]
        if name in statics:
            raise LinkError(f"{cu.label}: '{name}' is static; only external symbols can be "
                            f"offered (give it external linkage or a unique name)")
        raise LinkError(f"{cu.label}: offered symbol '{name}' is not defined in its target code")
    return tuple(found[n] for n in sorted(set(cu.payload.offered)))
