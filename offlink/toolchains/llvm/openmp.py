"""clang's OpenMP offload targets (`openmp-<triple>`, from objects made by clang -fopenmp
-fopenmp-targets=<triple>): each CU's device code compiled on its own, then linked into the
image clang's link would make, registered with libomptarget (toolchains/llvm/omptarget.py).

x86_64-pc-linux-gnu: clang writes each CU's device code as an ELF object (as bitcode with
-foffload-lto), the image is a shared object linked as clang-linker-wrapper links it
(`-shared -Wl,-Bsymbolic -Wl,--no-undefined ... -lomp`); libomptarget's x86_64 plugin loads it.

A CU carried as bitcode (-foffload-lto) is compiled on its own by `llvm-lto2 run`, with the
symbol resolutions clang-linker-wrapper gives its whole-program LTO (`lto_resolutions`): a
hidden symbol that no other CU names, that is not an entry and is defined by this CU alone is
internalized, so LTO inlines it into the kernels and drops it, as clang's link does. Which
names other CUs use is read from every CU's bitcode symbol table (formats/bitcode.py), and the
resolutions are words of the compile command: a CU whose symbols' uses change is compiled
again (its cache key changes). The command is what the cache keys and --dry-run shows; it is
run by a worker that loads LLVM's libLTO once per link and makes the same object
(toolchains/llvm/liblto.py), or by llvm-lto2 itself where that worker cannot.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections import Counter

from ... import run as runner
from ...driver_args import expand_response_files, linker_options, words
from ...elf import AR_MAGIC, ET_DYN, STB_GLOBAL, THIN_AR_MAGIC, ElfFile, elf_type
from ...errors import FormatError, LinkError, ToolError, UsageError
from ...formats.bitcode import FB_COMMON, FB_MAY_OMIT, FB_UNDEFINED, symbols
from ...model import Offer
from ...plugins import Target
from .dialect import entries_of_kind, is_offload_driver_word, linked_entries_of_kind
from .liblto import Worker, identity, library, parse_lto2
from .llvm_release import of_link


def llvm_lib_dir(compiler: str) -> str:
    """The LLVM install's lib folder beside a clang (libomp, libomptarget live there)."""
    path = runner.which(compiler)
    if path is None:
        raise ToolError(f"clang '{compiler}' not found (it made the offload objects)")
    return os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(path))), "lib")


def row_size(entry) -> int:
    """The table's size of a row: a variable's size, 1 for kernels and indirect functions
    (whose entry size is that of the device's pointer cell)."""
    return entry.size if entry.kind in ("variable", "link-variable") else 1


def c_identifier(name: str) -> bool:
    """Whether `name` is a C identifier (what a __start_/__stop_ symbol can name: a section
    so named stays visible in a device LTO); not re: its import is start-up time of every
    clang link."""
    return (name[:1].isascii() and (name[:1].isalpha() or name[:1] == "_")
            and all(c.isascii() and (c.isalnum() or c == "_") for c in name))


def lto_resolutions(modules: list, pinned: set[str]) -> list[list[tuple[str, str]]]:
    """Per bitcode module (a list of formats.bitcode.Symbol), (name, llvm-lto2 resolution)
    for each of its symbols, to compile each module on its own as clang-linker-wrapper's LTO
    of all of them treats it (linkBitcodeFiles): a definition prevails (p) and is final in
    the image (l) unless default-visible or common; it stays visible (x) when the image or
    another module may need it: its section gets __start/__stop symbols (a C identifier:
    omp_offloading_entries), it is neither hidden nor omittable, it is `pinned` (an offload
    entry, a name a non-bitcode CU uses), another module names it, or another module defines
    it too (the image link then picks one, as it does without -foffload-lto, where the wrapper
    lets the first prevail). The rest is internalized: LTO may inline it and drop it."""
    defined: Counter[str] = Counter()
    keep = set(pinned)
    for m in modules:
        for s in m:
            if s.flags & FB_UNDEFINED:
                keep.add(s.name)
            else:
                defined[s.name] += 1
    keep.update(n for n, k in defined.items() if k > 1)
    out = []
    for m in modules:
        res = []
        for name, flags, section in m:
            if flags & FB_UNDEFINED:
                res.append((name, ""))
                continue
            visibility = flags & 3  # default, hidden, protected
            r = "pl" if visibility and not flags & FB_COMMON else "p"
            if (name in keep or (visibility != 1 and not flags & FB_MAY_OMIT)
                    or (section and c_identifier(section))):
                r += "x"
            res.append((name, r))
        out.append(res)
    return out


def cu_resolutions(cus) -> dict[int, list[tuple[str, str]]]:
    """lto_resolutions of a link's bitcode CUs, by id(cu); none when a CU's symbols cannot
    be read here (then every CU is compiled whole, nothing internalized)."""
    modules, bitcode = [], []
    pinned: set[str] = set()
    for cu in cus:
        pinned.update(cu.payload.offered)
        if cu.payload.code_kind == "llvm-bc":
            try:
                syms = symbols(cu.payload.code, cu.label)
            except FormatError:  # LLVM judges it when the CU is compiled (whole)
                syms = None
            if syms is None:
                return {}
            modules.append(syms)
            bitcode.append(cu)
        else:  # a CU compiled without -foffload-lto: what it defines or names stays visible
            pinned.update(s.name for s in ElfFile(cu.payload.code, cu.label).symbols()
                          if s.is_global and s.name)
    return {id(cu): res for cu, res in zip(bitcode, lto_resolutions(modules, pinned))}


def link_opt_level(args) -> int:
    """The optimisation level clang 19's driver gives clang-linker-wrapper (`--opt-level=ON`,
    for the device LTO and the image link) from a link line (its words after the driver): the
    last -O word's, -O0..-O3 as they are, -O4 and -Ofast 3, -Os and -Oz 2, -Og and -O 1; 2
    (the wrapper's default) without one. A higher number is 3, as clang's compiles take it.
    The value of a separate-argument option (`-Xlinker -O1`, `-Xoffload-linker -O1`: the
    device linker's, `-mllvm`, `-o`) is no -O word."""
    level = 2
    for w in words(expand_response_files(list(args)), clang=True):
        if w.option.startswith(("-O", "--optimize=")):
            value = w.option[2:] if w.option.startswith("-O") else \
                w.option[len("--optimize="):]
            named = {"": 1, "g": 1, "s": 2, "z": 2, "fast": 3}
            if value in named:
                level = named[value]
            elif value.isdigit():
                level = min(int(value), 3)
    return level


def is_llvm_option(word: str) -> bool:
    """`-mllvm` (its value the next word) or clang's `-mllvm=OPTION` (the same option)."""
    return word == "-mllvm" or word.startswith("-mllvm=")


def llvm_options(args) -> list[str]:
    """The values of a link line's `-mllvm OPTION` (or `-mllvm=OPTION`) words, in order:
    clang 19 gives them to clang-linker-wrapper, which sets them in its own LLVM for the
    device LTO and code generation."""
    return [w.value or w.option[len("-mllvm="):]
            for w in words(expand_response_files(list(args)), clang=True)
            if is_llvm_option(w.option)]


def refuse_nvptx_words(args) -> None:
    """One clear error for the link line's words clang 19 gives an NVIDIA image's device link
    that offlink's NVIDIA link does not take: `-mllvm OPTION` (the wrapper's device LTO) and
    `-Xcuda-ptxas WORD` (the wrapper's `--ptxas-arg`), for OpenMP's sm_NN images and clang
    CUDA's alike. Dropping them silently would give other device code than clang's link."""
    for w in words(expand_response_files(list(args)), clang=True):
        if is_llvm_option(w.option) or w.option == "-Xcuda-ptxas":
            said = f"{w.option} {w.value}" if w.value else w.option
            raise UsageError(f"{said}: clang 19 gives it to the NVIDIA device "
                             f"link (clang-linker-wrapper), which offlink's per-CU NVIDIA "
                             f"builds do not take yet; leave it off the link line")


# Architectures LLVM's Triple parses (its first component), for device_linker_words: a word
# whose part before '=' starts with one is read as `<triple>=<word>`.
_LLVM_ARCHS = frozenset({
    "i386", "i486", "i586", "i686", "i786", "i886", "i986", "x86", "x86_64", "amd64",
    "x86_64h", "aarch64", "arm64", "aarch64_be", "arm64_32", "aarch64_32", "arm", "armeb",
    "thumb", "thumbeb", "nvptx", "nvptx64", "amdgcn", "r600", "riscv32", "riscv64", "ppc",
    "ppcle", "ppc64", "ppc64le", "powerpc", "powerpcle", "powerpc64", "powerpc64le", "s390x",
    "systemz", "mips", "mipsel", "mips64", "mips64el", "sparc", "sparcv9", "sparcel",
    "wasm32", "wasm64", "spirv", "spirv32", "spirv64", "loongarch32", "loongarch64",
    "hexagon", "bpf", "bpfel", "bpfeb", "ve", "m68k", "msp430", "xcore", "avr", "lanai",
    "amdil", "amdil64", "hsail", "hsail64", "spir", "spir64", "kalimba", "csky", "arc",
    "le32", "le64", "renderscript32", "renderscript64", "tce", "tcele", "xtensa"})
# clang's getOpenMPTriple: a GPU named by its architecture alone is its usual triple.
_GPU_TRIPLES = {"nvptx": "nvptx-nvidia-cuda", "nvptx64": "nvptx64-nvidia-cuda",
                "amdgcn": "amdgcn-amd-amdhsa"}


def _llvm_arch(triple: str) -> str:
    """The architecture LLVM's Triple reads from a triple's first component ('' if none)."""
    arch = triple.split("-", 1)[0]
    if arch in _LLVM_ARCHS:
        return arch

    return arch if re.fullmatch(r"(armv|thumbv|aarch64v|arm64v)[0-9a-z.]+(eb)?", arch) else ""


def device_linker_words(args, triple: str) -> list[str]:
    """The words clang 19 adds to the image link of `triple` from a link line's
    `-Xoffload-linker WORD` and `-Xoffload-linker-<triple> WORD`, in order. The driver gives
    them to clang-linker-wrapper as `--device-linker=WORD` and `--device-linker=<triple>=WORD`
    (a GPU named by its architecture alone, `-Xoffload-linker-nvptx64`, gets its usual triple);
    the wrapper splits each at its first '=': a part before it that is no triple (LLVM knows
    no architecture in it: `-lm`, `--defsym=a=1`) makes the whole word every image's, a
    triple with an empty rest gives the triple itself, else the rest goes to the image whose
    triple is exactly that one."""
    given = []
    for w in words(expand_response_files(list(args)), clang=True):
        if w.option.startswith("-Xoffload-linker"):
            named = w.option[len("-Xoffload-linker-"):]
            if not named:
                given.append(w.value)
            else:
                parts = named.split("-")
                if parts[0] in _GPU_TRIPLES and len(parts) < 3:
                    named = _GPU_TRIPLES[parts[0]]
                given.append(f"{named}={w.value}")
    out = []
    for word in given:
        head, _, value = word.partition("=")
        if not _llvm_arch(head):
            out.append(word)
        elif not value:
            out.append(head)
        elif head == triple:
            out.append(value)
    return out


# GNU ld options whose value is the next argument (`-Wl,-soname,libx.so`: libx.so is no
# input), for host_library_words' reading of the link line's linker words.
_LD_SEPARATE = frozenset({
    "-o", "-m", "-e", "-u", "-y", "-z", "-T", "-h", "-soname", "-dynamic-linker", "-Map",
    "-F", "-f", "-a", "-R", "--just-symbols", "--entry", "--undefined", "--script",
    "--version-script", "--dynamic-list", "--defsym", "--wrap", "-plugin",
    "-plugin-opt", "--plugin", "--plugin-opt", "-Ttext", "-Tdata", "-Tbss", "--section-start",
    "--out-implib", "--image-base", "--exclude-libs"})


def _ld_args(args) -> tuple[list[str], list[str]]:
    """A driver link line's words as the linker gets them, in order (-lNAME, files, the items
    of -Wl,/-Xlinker, clang's `-rpath DIR`), and the driver's own -L folders, which clang's
    driver puts before them all."""
    ld: list[str] = []
    dirs: list[str] = []
    for w in words(expand_response_files(list(args)), clang=True):
        if w.option == "":
            ld.append(w.value)
        elif w.option == "-l":
            ld.append("-l" + w.value)
        elif w.option == "-L":
            dirs.append(w.value)
        elif w.option == "-rpath":
            ld += ["-rpath", w.value]
        elif w.option.startswith("-Wl,") or w.option == "-Xlinker":
            ld += linker_options(w)
    return ld, dirs


def _is_library_file(path: str) -> bool:
    """A file LLVM's identify_magic calls an archive or an ELF shared object (e_type ET_DYN)."""
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:  # missing, a folder: not a library (the wrapper skips it too)
        return False
    if head.startswith((AR_MAGIC, THIN_AR_MAGIC)):
        return True
    return elf_type(head) == ET_DYN


def host_library_words(args) -> list[str]:
    """What clang-linker-wrapper 19 copies from the host link into a CPU image's link (its
    `!Triple.isGPU()` case), in its order, as driver words: the driver's -L folders, then in
    the link line's order every -lNAME (static archives too), the files that are archives or
    shared objects (objects are not: their device code is in), -rpath folders and
    --whole-archive/--no-whole-archive (of the linker words: -L, --library-path=, -l NAME,
    -rpath, -rpath=, --rpath). The rest of the host link (-Bstatic, --as-needed, groups,
    -static) is not copied, as the wrapper copies none of it."""
    ld, dirs = _ld_args(args)
    out = ["-L" + d for d in dirs]
    i = 0
    while i < len(ld):
        a = ld[i]
        value = ld[i + 1] if i + 1 < len(ld) else None
        if a in ("-L", "--library-path", "-l", "--library", "-rpath", "--rpath") and value:
            head = {"--library-path": "-L", "--library": "-l", "--rpath": "-rpath"}.get(a, a)
            out += [f"-Wl,-rpath,{value}"] if head == "-rpath" else [head + value]
            i += 2
            continue
        if a.startswith(("-rpath=", "--rpath=")):
            out.append("-Wl,-rpath," + a.split("=", 1)[1])
        elif a.startswith("--library-path="):
            out.append("-L" + a.split("=", 1)[1])
        elif a.startswith(("-L", "-l")) and len(a) > 2:
            out.append(a)
        elif a in ("--whole-archive", "-whole-archive"):
            out.append("-Wl,--whole-archive")
        elif a in ("--no-whole-archive", "-no-whole-archive"):
            out.append("-Wl,--no-whole-archive")
        elif a in _LD_SEPARATE:
            i += 1  # the option's value is no input
        elif not a.startswith("-") and _is_library_file(a):
            out.append(a)
        i += 1
    return out


def image_archives(words: list[str]) -> list[str]:
    """The static archives a CPU image's link reads from host_library_words' `words`: the
    files that are archives, and each -lNAME that the words' -L folders resolve to lib
    NAME.a (no libNAME.so beside it, the image link being dynamic) or -l:FILE to an archive.
    Shared libraries are not linked in; the system's folders are not searched."""
    dirs = [w[2:] for w in words if w.startswith("-L")]
    out = []
    for w in words:
        if w.startswith("-l"):
            name = w[2:]
            names = [name[1:]] if name.startswith(":") else [f"lib{name}.so", f"lib{name}.a"]
            found = next((os.path.join(d, n) for d in dirs for n in names
                          if os.path.isfile(os.path.join(d, n))), None)
            if found is not None and not found.endswith(".so") and _is_archive(found):
                out.append(found)
        elif not w.startswith("-") and _is_archive(w):
            out.append(w)
    return out


def _is_archive(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(8) in (b"!<arch>\n", b"!<thin>\n")
    except OSError:
        return False


def lto_level_words(level: int) -> list[str]:
    """llvm-lto2's words for the wrapper's `--opt-level=ON`, which sets both the LTO pipeline's
    and the code generator's level (llvm-lto2's code generator is at 2 unless told)."""
    return [f"-O{level}"] if level == 2 else [f"-O{level}", f"--cg-opt-level={level}"]


def _lto2(compiler: str) -> str:
    """llvm-lto2 of the clang that made the objects, or "" when it is not installed."""
    try:
        lib = llvm_lib_dir(compiler)
    except ToolError:
        return ""
    path = os.path.join(os.path.dirname(lib), "bin", "llvm-lto2")
    return path if os.access(path, os.X_OK) else ""


class OpenMPTarget(Target):
    image_kind = "shared-object"
    # The image link names the objects and reads none: a relink with nothing changed takes
    # the image from the cache by the objects' keys alone (device.cached_image).
    image_argv_reads_objects = False
    macro = "__OFFLINK_TARGET_OPENMP__"
    registration = "omptarget"
    static_link_problem = ("libomptarget loads images with dlopen, which a static executable "
                           "cannot do")

    def __init__(self, name: str):
        self.name = name
        self.triple = name.removeprefix("openmp-")
        self.compiler = "clang"
        self.entry_generation = 1  # the registration's rows (formats/offload_entries.py)
        self.image_runtime_words: list[str] = []  # after -lomp in the image link
        self.lto2 = ""  # llvm-lto2 for the bitcode CUs (for_inputs), "" to compile with clang
        self.resolutions: dict[int, list[tuple[str, str]]] = {}  # by id(cu): cu_resolutions
        self._cus: list = []  # the CUs those ids are of (kept alive)
        self.liblto = ""  # the libLTO that runs llvm-lto2's commands (liblto.py), "" for none
        self.opt_level = 2  # the link line's (link_opt_level), as clang's link uses it
        self.llvm_options: list[str] = []  # the link line's -mllvm values (llvm_options)
        self._worker = None  # its liblto.Worker, started by the first command
        self._lock = threading.Lock()

    def for_inputs(self, cus, plan=None):
        # The objects' clang, else the driver's own (flang objects name none): never PATH's
        # unversioned clang, another release.
        compiler, major, generation = of_link(self.name, cus,
                                              plan.driver if plan is not None else "")
        level = link_opt_level(plan.argv[1:]) if plan is not None else 2
        if not self.triple.startswith(("x86_64-", "aarch64-")):
            raise LinkError(f"target {self.name}: offlink links clang's OpenMP images for "
                            f"CPU targets (x86_64, aarch64), nvptx64-nvidia-cuda and "
                            f"amdgcn-amd-amdhsa only so far")
        t = OpenMPTarget(self.name)
        t.compiler = compiler
        # The objects' rows decide the registration's (a clang-20 object linked by clang-22).
        t.entry_generation = generation
        if major is not None and major >= 20:
            # The image calls libomptarget's API too (omp_get_device_from_uid, LLVM 22's
            # offload/test/api/omp_device_uid.c): the wrapper links the host link's -lomp
            # -lomptarget into it. (19's wrapper does as well; offlink's 19 images keep their
            # bytes and cache keys: their device code calls none of it.)
            t.image_runtime_words = ["-lomptarget"]
        t.opt_level = level
        t.llvm_options = llvm_options(plan.argv[1:]) if plan is not None else []
        if any(cu.payload.code_kind == "llvm-bc" for cu in cus):
            t.lto2 = _lto2(compiler)
            if t.lto2:
                t.resolutions = cu_resolutions(cus)
                t._cus = list(cus)
                t.liblto = library(t.lto2)
        return t

    def source_suffix(self, cu):
        return ".bc" if cu.payload.code_kind == "llvm-bc" else ".dev.o"

    def compile_argv(self, cu, source, output):
        p = cu.payload
        if p.code_kind == "object":
            return []  # clang compiled it already (no device LTO): the code is the object
        res = self.resolutions.get(id(cu))
        if res is not None:  # as clang's LTO, this CU's part of it
            cpu = [f"--mcpu={o[len('-march='):]}" for o in p.options if o.startswith("-march=")]
            return [self.lto2, "run", *lto_level_words(self.opt_level),
                    "--relocation-model=pic", *cpu, source, "-o", output,
                    *(f"-r={source},{n},{r}" for n, r in res), *self.llvm_options]
        mllvm = [w for o in self.llvm_options for w in ("-mllvm", o)]
        return [self.compiler, "-c", f"-O{self.opt_level}", "-fPIC", *p.options, *mllvm, "-x",
                "ir", source, "-o", output]

    def run_compile(self, children, argv, what):
        """llvm-lto2's command done by the libLTO worker (the same object, without starting
        LLVM once per CU); the command itself where the worker does not take it or fails."""
        request = parse_lto2(argv) if self.liblto else None
        if request is not None:
            with self._lock:
                if self._worker is None:
                    self._worker = Worker(self.liblto, os.path.dirname(request["output"]))
            done, said = self._worker.compile(request)
            if done:
                if runner.VERBOSE:
                    print(f"offlink: libLTO: {runner.show(argv)}", file=sys.stderr, flush=True)
                return said
            if runner.VERBOSE:
                print(f"offlink: libLTO did not compile {request['source']} ({said}); running "
                      f"llvm-lto2", file=sys.stderr, flush=True)
        return children.run(argv, what)

    def compile_engine(self, argv):
        """The libLTO worker keys the objects it makes: they are llvm-lto2's code, but C++'s
        internalized inline functions leave their comdat and the functions' order differs."""
        return identity(self.liblto) if self.liblto and parse_lto2(argv) is not None else ""

    def end_compiles(self):
        worker, self._worker = self._worker, None
        if worker is None:
            return
        worker.close()
        if worker.dead != "closed":  # it died: its CUs were compiled by llvm-lto2
            print(f"offlink: warning: target {self.name}: the libLTO worker ({self.liblto}) "
                  f"ended early ({worker.dead}); its CUs were compiled by llvm-lto2 "
                  f"(OFFLINK_LIBLTO=0 skips it)", file=sys.stderr, flush=True)

    def after_compile_argv(self, cu, obj_path):
        if self.resolutions.get(id(cu)) is None:
            return []
        return [["mv", obj_path + ".0", obj_path]]  # offers() renames llvm-lto2's output

    def offers(self, cu, obj_path):
        """The CU's entries, keyed by name. This is also the step after the compile (as for
        GCC's objects): `llvm-lto2 run -o X` writes its one output as X.0, renamed here."""
        if self.resolutions.get(id(cu)) is not None:
            os.replace(obj_path + ".0", obj_path)
        elf = ElfFile.open(obj_path)
        weak = {s.name for s in elf.symbols() if s.defined and s.st_bind != STB_GLOBAL}
        out = {}
        for e in entries_of_kind(elf, "openmp"):
            # Kernels are weak_odr (a template's region may come from many CUs); a variable
            # is as strong as its definition (a weak `x` may be defined by many CUs, one
            # strong definition wins, as LLVM's weak.c test has it).
            strong = e.kind != "function" and (e.symbol or e.name) not in weak
            out[e.name] = Offer(e.name, e.kind, row_size(e), strong)
        return tuple(out[n] for n in sorted(out))

    def image_argv(self, plan, compiled, output):
        """As clang-linker-wrapper links a CPU image: the host link's libraries, archives and
        library folders (host_library_words: static archives too, whose host code the image
        may use), libomp, the C++ driver when the program is C++, and last the link line's
        -Xoffload-linker words for this triple (device_linker_words: the wrapper appends them
        to this driver command)."""
        lib = llvm_lib_dir(self.compiler)
        driver = self.compiler
        if "++" in os.path.basename(plan.driver):
            driver = driver.replace("clang", "clang++", 1)
        return [driver, f"--target={self.triple}", f"-O{self.opt_level}", "-Wl,--no-undefined",
                *(c.object_path for c in compiled), "-Wl,-Bsymbolic", "-shared",
                "-Wl,--hash-style=gnu", "-Wl,--build-id=none",
                *host_library_words(plan.argv[1:]), f"-L{lib}", "-lomp",
                *self.image_runtime_words, "-o", output,
                *device_linker_words(plan.argv[1:], self.triple)]

    def image_reads(self, plan):
        """The static archives the image link reads (image_archives): their content is in the
        image's cache key."""
        return image_archives(host_library_words(plan.argv[1:]))

    def exports(self, image, path):
        return {s.name for s in ElfFile(image, path).symbols(dynamic=True) if s.defined}

    def host_link_args(self, plan):
        return [f"-L{llvm_lib_dir(self.compiler)}", "-lomptarget"]

    def host_link_drops(self, word: str) -> bool:
        """Driver words that would make clang run its own device link and registration, and
        `-mllvm` (with its value): clang 19 gives it to that link (llvm_options); a host-only
        link never takes it, -flto or not (no -mllvm reaches the linker plugin), so it calls
        it unused, an error under -Werror where clang's own link links."""
        return is_offload_driver_word(word) or is_llvm_option(word)

    def host_addresses(self, elf, image):
        """Each row's host address from the linked `omp_offloading_entries`: the very rows
        libomptarget is given (a kernel's address is its region id, not a symbol of its
        name)."""
        out = {}
        missing = []
        for address, e in linked_entries_of_kind(elf, "openmp"):
            if e.name in image.offers:
                out[e.name] = (address, row_size(e), e.kind)
            else:
                missing.append(e.name)
        if missing and not getattr(self, "narrowed", False):
            defined = self.exports(image.data, image.path)
            hand_written = [n for n in missing if n in defined]
            if hand_written:
                # A row the host code writes by hand for a device-only (nohost) definition
                # (LLVM 22's api/omp_indirect_call_table_manual.c): libomptarget finds it in
                # the image; the table has no row, which is said.
                print(f"offlink: warning: target {self.name}: the host code registers "
                      f"{', '.join(hand_written[:3])} with libomptarget, which no CU offers as "
                      f"an entry: the table has no row for it", file=sys.stderr, flush=True)
            missing = [n for n in missing if n not in defined]
        if missing and not getattr(self, "narrowed", False):
            # libomptarget is given rows the image does not define: a lookup by name or
            # address in the table would miss what the program runs.
            raise LinkError(f"target {self.name}: the host code registers "
                            f"{len(missing)} offload entr"
                            f"{'y' if len(missing) == 1 else 'ies'} with libomptarget that "
                            f"the image does not offer ({', '.join(missing[:3])}"
                            f"{', ...' if len(missing) > 3 else ''}); offlink writes no table "
                            f"without them")
        return out

