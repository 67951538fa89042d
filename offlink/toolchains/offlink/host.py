"""The host target: target code for the host CPU, as a shared object loaded in-process.

A CU's code is captured as preprocessed C or C++ (with __OFFLINK_TARGET__ defined), compiled
at link time with the compiler that made the host object (-fPIC), and the CUs are linked into
one shared object whose own references bind to itself (-Bsymbolic), so the image's globals
are its own even where the executable exports the same names (without it, the image's code
sees the executable's same-named exported globals; -fno-semantic-interposition does not help
for variables).
"""

from __future__ import annotations

import os
import re

from ...elf import (
    ET_DYN,
    STB_GLOBAL,
    STT_FUNC,
    STT_GNU_IFUNC,
    STT_OBJECT,
    STT_TLS,
    STV_HIDDEN,
    STV_INTERNAL,
    ElfFile,
    elf_type,
)
from ...errors import LinkError
from ...model import Offer, find_library
from ...plugins import Target


class HostTarget(Target):
    image_kind = "shared-object"
    # `gcc -c CU.i` (`.ii` for C++): preprocessed code, no `-x` (distcc and sccache take the
    # language from the suffix; with `-x cpp-output` sccache refuses to cache), nothing read
    # but the file itself, so distcc sends it to a distccd and sccache caches it remotely.
    distributable = True
    macro = "__OFFLINK_TARGET_HOST__"
    image_argv_reads_objects = False
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
        # A section per function and variable, so a narrowed image link can drop what the
        # offered names do not reach (narrowed_image); the same object serves both links.
        return [p.compiler, *p.options, "-ffunction-sections", "-fdata-sections", "-fPIC",
                "-c", source, "-o", output]

    def offers(self, cu, obj_path):
        return elf_offers(cu, obj_path)

    def image_argv(self, plan, compiled, output):
        cxx = next((c for c in compiled if c.cu.payload.code_kind == "c++"), None)
        driver = (cxx or compiled[0]).cu.payload.compiler
        libs = []
        objects = cu_files(compiled)  # relocatable objects: extract read CUs from them
        for inp in plan.inputs:
            # System and shared libraries the host program uses, for the image's own
            # references, as the host link names them (-lNAME or a path, as CMake does);
            # the user's static archives are not linked in (their CUs are).
            if inp.kind == "library":
                found = find_library(inp.path, plan, inp.static)
                if found is None or is_shared_library(found):
                    libs.append("-l" + inp.path)
            elif inp.path not in objects and is_shared_library(inp.path):
                libs.append(inp.path)
        dirs = ["-L" + d for d in plan.lib_dirs]
        # Sanitized CUs call their sanitizer's runtime: gcc names the shared runtime in a
        # shared object (the image then uses the one the program has loaded); clang, or gcc
        # where the program has the runtime linked in (-static-libasan), leave it to the
        # executable, so the image keeps those references undefined.
        sanitize = sanitizer_options(compiled)
        clang = "clang" in os.path.basename(driver)
        defs = [] if sanitize and (clang or static_runtime(plan)) else ["-Wl,-z,defs"]
        if not clang and static_runtime(plan):
            sanitize = []  # gcc -shared -fsanitize=... would name the shared runtime too
        # CUs that gcc compiled with -fopenmp or -fopenacc carry GCC's own offload code (gcc
        # writes it for each offload target it is configured with, whatever -foffload says at
        # the compile) and call libgomp: the image is the CPU's, so its link runs no mkoffload
        # and links libgomp, as gcc -fopenmp does.
        used = {o for c in compiled for o in c.cu.payload.options}
        gcc_offload = [] if clang else [o for o in ("-fopenmp", "-fopenacc") if o in used]
        if gcc_offload:
            gcc_offload.append("-foffload=disable")
        return [driver, "-shared", "-fPIC", *sanitize, *gcc_offload, "-Wl,-Bsymbolic", *defs,
                "-Wl,--hash-style=gnu", "-o", output, *(c.object_path for c in compiled),
                *dirs, *libs]

    def narrowed_image(self, plan, compiled, output, offered):
        # The version script makes every other name local, so they are no garbage
        # collection roots; quoted names are taken literally (no glob), C++ ones mangled.
        script = output + ".offered.map"
        names = "".join(f'    "{n}";\n' for n in sorted(offered))
        text = "{\n" + (f"  global:\n{names}" if names else "") + "  local: *;\n};\n"
        return [*self.image_argv(plan, compiled, output), "-Wl,--gc-sections",
                f"-Wl,--version-script={script}"], {script: text.encode()}

    def host_link_args(self, plan):
        # A sanitizer runtime linked into a gcc-linked program (-static-libasan) is not
        # exported (clang exports its own): export it, for the image's references to it.
        if "clang" in os.path.basename(plan.driver):
            return []
        return [f"-Wl,--export-dynamic-symbol={p}" for p in static_runtime(plan)]

    def exports(self, image, path):
        return {s.name for s in ElfFile(image, path).symbols(dynamic=True) if s.defined}

    def why_not_exported(self, image, path, name, compiled):
        # The linker gives a symbol the most hidden visibility any object gives it, also
        # where that object only declares it.
        for c in compiled:
            # A cached object may be in memory only (CompiledCU.data), never written out.
            obj = ElfFile(c.data, c.object_path) if c.data is not None else \
                ElfFile.open(c.object_path)
            for s in obj.symbols():
                if s.name == name and s.is_global and s.st_visibility in NOT_EXPORTED:
                    return (f"{c.cu.label} declares it with "
                            f"{NOT_EXPORTED[s.st_visibility]} visibility"), True
        if not any(s.name == name and s.defined for s in ElfFile(image, path).symbols()):
            return "the image link dropped it", False
        return "it is local to the image", False


# gcc's options that link a sanitizer's runtime into the program, and that runtime's names.
STATIC_SANITIZERS = {"-static-libasan": ("__asan_*", "__lsan_*", "__sanitizer_*"),
                     "-static-libubsan": ("__ubsan_*", "__sanitizer_*"),
                     "-static-liblsan": ("__lsan_*", "__sanitizer_*"),
                     "-static-libtsan": ("__tsan_*", "__sanitizer_*")}


def static_runtime(plan) -> list[str]:
    """Names of the sanitizer runtimes the host link puts into the program itself."""
    if not any(a.startswith("-fsanitize=") for a in plan.base_args):
        return []
    out: list[str] = []
    for a in plan.base_args:
        out += [p for p in STATIC_SANITIZERS.get(a, ()) if p not in out]
    return out


def sanitizer_options(compiled) -> list[str]:
    """The CUs' -fsanitize= and -fno-sanitize= options, in order, each once."""
    out: list[str] = []
    for c in compiled:
        for o in c.cu.payload.options:
            if o.startswith(("-fsanitize=", "-fno-sanitize=")) and o not in out:
                out.append(o)
    return out


def cu_files(compiled) -> set[str]:
    """The files the CUs were read from as objects (not archive members): each a relocatable
    ELF object (extract reads CUs from nothing else), so none is a shared library, and the
    image link need not open them again to ask (1000 opens at 1000 CUs)."""
    out = set()
    for c in compiled:
        origin = c.cu.origin
        out.add(origin)
        head, sep, number = origin.rpartition("#")  # "a.o#1": a file with several records
        if sep and number.isdigit():
            out.add(head)
    return out


def is_shared_library(path: str) -> bool:
    """A link input named by path that is a shared library: named like one (libz.so.1.3, or
    a linker script named .so), or an ELF shared object under another name."""
    if re.search(r"\.so(\.[0-9]+)*$", path):
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return False
    return elf_type(head) == ET_DYN


# Visibilities that keep a symbol inside its module: the image does not export it, so it
# cannot be found by name at run time (Lua marks its internals `internal`, others `hidden`).
NOT_EXPORTED = {STV_HIDDEN: "hidden", STV_INTERNAL: "internal"}


def elf_offers(cu, obj_path: str):
    """External functions and variables an ELF target object defines (default or protected
    visibility, not TLS), narrowed to the CU's explicit list when it has one."""
    elf = ElfFile.open(obj_path)
    found: dict[str, Offer] = {}
    for s in elf.symbols():
        if not s.defined or not s.is_global or s.st_visibility in NOT_EXPORTED or not s.name:
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
        name = missing[0]
        sym = next((s for s in elf.symbols() if s.defined and s.name == name), None)
        if sym is not None and not sym.is_global:
            raise LinkError(f"{cu.label}: '{name}' is static; only external symbols can be "
                            f"offered (give it external linkage or a unique name)")
        if sym is not None and sym.st_visibility in NOT_EXPORTED:
            raise LinkError(f"{cu.label}: '{name}' has {NOT_EXPORTED[sym.st_visibility]} "
                            f"visibility, so the image cannot export it; only default or "
                            f"protected symbols can be offered")
        raise LinkError(f"{cu.label}: offered symbol '{name}' is not defined in its target code")
    return tuple(found[n] for n in sorted(set(cu.payload.offered)))
