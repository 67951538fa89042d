"""clang's OpenMP offload target for NVIDIA GPUs (`openmp-nvptx64-nvidia-cuda`, from objects
made by clang -fopenmp --offload-arch=sm_NN): each CU's cubin, the device runtime's part they
call, nvlink; the image is one cubin, registered with libomptarget (toolchains/llvm/omptarget.py).

What clang 19 does (its -v and --save-temps show it): each CU's device code is compiled when the
CU is compiled, with the device runtime (libomptarget-nvptx-sm_NN.bc) linked in as builtin
bitcode, to PTX and by `ptxas -c` to a relocatable cubin, which the object carries. The link
(clang-linker-wrapper) LTO-compiles the part of the device runtime those cubins still call
(libomptarget.devicertl.a's member for the architecture, bitcode: the functions OpenMPOpt
introduced after the builtin link, such as `__kmpc_get_hardware_thread_id_in_block`), ptxas
makes it a cubin, and nvlink links it with every CU's cubin into the image.

offlink does the same, stage by stage: a CU's cubin is used as it is (nothing to compile); the
device runtime's part is compiled by `llvm-lto2 run` with the symbol resolutions the wrapper
computes (every runtime symbol prevails; kept visible when a cubin names it or when it is
neither hidden nor omittable; the rest internalized and dropped), then `ptxas -c`. That cubin
depends only on the runtime's bitcode and on which of its names the CUs use, so it is compiled
once and cached by those; a relink after one CU changed (or none) does not compile it again.
A CU carried as bitcode (`-foffload-lto`) is compiled on its own by `llvm-lto2 run` with the
resolutions clang-linker-wrapper gives the whole program (openmp.lto_resolutions: a hidden
function no other CU names is internalized, inlined and dropped) and the device runtime's
bitcode as this CU's internalized copy (OpenMPOpt sees it, as in clang's link), then
`ptxas -c`. Where a function another CU calls sits in a CU that calls the runtime, that copy
would be wrong (calls_runtime_across_cus), and every CU calls the image's one runtime (the
runtime's part) instead. No whole-program device LTO (README: "Where per-CU compilation
differs from clang's link").

Tools: llvm-lto2 beside the clang that made the objects; ptxas and nvlink of the CUDA that the
link line's `--cuda-path=` names, else $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, or the one of
the ptxas on PATH (a -foffload-lto CU compiled by clang, which does not see the link line,
skips the first; toolchains/cuda_toolkit.py finds them).
"""

from __future__ import annotations

import hashlib
import os
import shlex
from typing import TYPE_CHECKING

from ... import run as runner
from ...driver_args import linker_options
from ...driver_args import words as parsed
from ...elf import ElfFile, archive_members
from ...errors import LinkError, ToolError, UsageError
from ...formats.bitcode import FB_COMMON, FB_EXECUTABLE, FB_UNDEFINED, FB_USED, symbols
from ...formats.cubin import cubin_names, cubin_symbols
from ...formats.offload_binary import SECTION, parse_binaries
from ...model import Offer
from ..cuda_toolkit import cuda_bin, cuda_home
from . import device_runtime as ompdevice
from . import nvlink_wrapper
from .llvm_release import of_link
from .openmp import (
    OpenMPTarget,
    _lto2,
    cu_resolutions,
    device_linker_words,
    link_opt_level,
    llvm_lib_dir,
    lto_level_words,
    refuse_nvptx_words,
)

if TYPE_CHECKING:
    from ...cache.store import Cache

TRIPLE = "nvptx64-nvidia-cuda"
DEVICE_RUNTIME = "libomptarget.devicertl.a"  # what clang's link passes (-lomptarget.devicertl)


def cu_arch(cu) -> str:
    """The architecture a CU's image was compiled for (its `-march=` option)."""
    return next((o[len("-march="):] for o in cu.payload.options if o.startswith("-march=")), "")


def llvm_tool(compiler: str, tool: str) -> str:
    """An LLVM tool of the clang that made the objects (llvm-lto2 beside clang-19)."""
    path = os.path.join(os.path.dirname(llvm_lib_dir(compiler)), "bin", tool)
    if not os.access(path, os.X_OK):
        raise ToolError(f"target openmp-{TRIPLE}: '{path}' not found (it comes with "
                        f"{compiler}'s LLVM: apt-get install llvm-{_major(compiler)})")
    return path


def _major(compiler: str) -> str:
    tail = os.path.basename(compiler).rsplit("-", 1)
    return tail[1] if len(tail) == 2 and tail[1].isdigit() else "N"


def read_runtime(path: str, compiler: str) -> bytes:
    """A file of the device runtime (libomp-N-dev's); one clear error where it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ToolError(f"target openmp-{TRIPLE}: the device runtime {path}: {e.strerror} "
                        f"(apt-get install libomp-{_major(compiler)}-dev)") from None


def device_runtime(compiler: str, arch: str) -> bytes:
    """The device runtime's bitcode for `arch`: the image of libomptarget.devicertl.a's member
    for nvptx64/arch (as clang-linker-wrapper picks it: by the member's OffloadBinary)."""
    path = os.path.join(llvm_lib_dir(compiler), DEVICE_RUNTIME)
    data = read_runtime(path, compiler)
    members = list(archive_members(data, path))
    # Its own member first (devicertl-nvptx-sm_80.o), then every member.
    members.sort(key=lambda m: not m.name.endswith(f"-{arch}.o"))
    for m in members:
        elf = ElfFile(bytes(m.data), f"{path}({m.name})")
        section = elf.section(SECTION)
        if section is None:
            continue
        for img in parse_binaries(bytes(elf.content(section)), f"{path}({m.name})"):
            if img.triple == TRIPLE and img.arch == arch and img.image[:2] == b"BC":
                return img.image
    raise LinkError(f"target openmp-{TRIPLE}: {path} has no device runtime for {arch}")


# -- the device runtime's resolutions (clang-linker-wrapper's linkBitcodeFiles) ----------------

def parse_symtab(text: str) -> list[tuple[str, str]]:
    """(flags, name) of every symbol `llvm-lto2 dump-symtab` lists: flags are visibility (D,
    H, P), then U (undefined), C (common), W (weak), I (indirect), O (can be omitted from the
    symbol table), T (TLS), X (executable), '-' where not."""
    out = []
    for line in text.splitlines():
        if len(line) > 9 and line[8] == " " and line[0] in "DHP" and line[1] in "U-":
            out.append((line[:8], line[9:]))
    return out


def resolutions(symtab: list[tuple[str, str]], used: set[str],
                first: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """(name, llvm-lto2 resolution) per symbol of the device runtime, as the wrapper resolves
    them when it is the only bitcode: a definition prevails (p); it stays visible (x) when a
    cubin names it, or when it prevails and is neither hidden nor omittable; a definition that
    is not default-visible is final in the image (l). The rest is internalized. A name in
    `first` is defined by a -foffload-lto CU, which comes first in the wrapper's LTO: the CU's
    definition prevails (the `__omp_rtl_*` settings it was compiled with), the runtime's
    is dropped."""
    out = []
    for flags, name in symtab:
        if name in first:
            out.append((name, ""))
            continue
        defined = flags[1] != "U"
        res = ""
        if defined:
            res += "p"
        if flags[0] != "D" and defined and flags[2] != "C":
            res += "l"
        if name in used or (defined and flags[0] != "H" and flags[5] != "O"):
            res += "x"
        out.append((name, res))
    return out


def nvlink_words(words: list[str], target: str) -> list[str]:
    """nvlink's words for an NVIDIA image's `-Xoffload-linker` words (device_linker_words):
    clang's link gives them to `clang --target=nvptx64-nvidia-cuda`, whose clang-nvlink-wrapper
    searches -L/-l for archives and gives nvlink the linker words (-Wl,X, -Xlinker X) and the
    files; other driver words (-O3, -g) change its own device LTO, which offlink does not run,
    and are refused."""
    out = []
    try:
        ws = parsed(words)
    except UsageError as e:
        raise UsageError(f"-Xoffload-linker for target {target}: {e}") from None
    for w in ws:
        if w.option in ("-L", "-l"):
            out += [w.option, w.value]  # nvlink's separate spelling (its -lto is an option)
        elif w.option.startswith("-Wl,") or w.option == "-Xlinker":
            out += linker_options(w)
        elif w.option == "":
            out.append(w.value)
        else:
            raise UsageError(f"-Xoffload-linker word '{words[w.index]}' for target {target}: "
                             f"offlink gives nvlink -L, -l, -Wl,/-Xlinker words and files "
                             f"only (clang's driver would read this one for its device LTO)")
    return out


def runtime_resolutions(symtab, cu_defines: set[str]) -> list[tuple[str, str]]:
    """(name, llvm-lto2 resolution) per symbol of the device runtime's bitcode (a list of
    formats.bitcode.Symbol) when it is compiled with one CU, as clang's compile links it into
    a CU as builtin bitcode (-mlink-builtin-bitcode): the CU's own definition of a name wins
    (the `__omp_rtl_*` settings the CU was compiled with); the runtime's definitions prevail
    and are internalized (this CU's copy), except those in llvm.used (the device environment
    and memory pool the plugin finds by name), which stay visible, weak, in every CU."""
    out = []
    for name, flags, _ in symtab:
        if flags & FB_UNDEFINED or name in cu_defines:
            out.append((name, ""))
            continue
        r = "pl" if flags & 3 and not flags & FB_COMMON else "p"
        out.append((name, r + "x" if flags & FB_USED else r))
    return out


# What clang's code for a kernel calls in the device runtime: its entry and exit, which only
# a kernel calls, and the thread's index (a hardware register, no runtime state).
KERNEL_ONLY_CALLS = frozenset({"__kmpc_target_init", "__kmpc_target_deinit",
                               "__kmpc_get_hardware_thread_id_in_block"})


def calls_runtime_across_cus(modules, runtime) -> bool:
    """Whether a function one bitcode CU defines and another CU may call (kept visible by
    its resolutions; not a kernel) sits in a CU that calls the device runtime. modules:
    (formats.bitcode.Symbol list, lto_resolutions) per CU; runtime: the runtime's symbols.

    Compiled with its own copy of the runtime (internalized, as clang's compile links it
    into a CU), such a function would see only its CU's copy of the runtime's state, which
    a kernel of another CU never sets up, and OpenMPOpt, finding no kernel of its CU that
    reaches it, folds its runtime calls away: LLVM 19 compiles `int tid(void) { return
    omp_get_thread_num(); }` called from another CU's kernel to `exit` (clang's own
    compile without -foffload-lto does the same). clang's LTO link has one runtime for the
    whole program; then so must the CUs here: each CU calls the image's one copy.

    Bitcode symbol tables have no call graph, so a CU's runtime calls count for each of its
    functions, except those of every kernel (KERNEL_ONLY_CALLS)."""
    provided = {s.name for s in runtime if not s.flags & FB_UNDEFINED} - KERNEL_ONLY_CALLS
    for syms, res in modules:
        kept = {n for n, r in res if "x" in r}
        exported = any(s.flags & FB_EXECUTABLE and not s.flags & FB_UNDEFINED
                       and s.name in kept and not s.name.startswith("__omp_offloading_")
                       for s in syms)
        if exported and any(s.flags & FB_UNDEFINED and s.name in provided for s in syms):
            return True
    return False


def check_entries(target: str, arch: str, compiled) -> None:
    """Every host-side offload entry of the CUs is defined by one of their cubins (the device
    link would otherwise make an image the runtime cannot find the row in)."""
    offered = {o.name for c in compiled for o in c.offers}
    for c in compiled:
        missing = sorted(set(c.cu.payload.offered) - offered)
        if missing:
            raise LinkError(f"{c.cu.label}: offload entry '{missing[0]}' is not defined by any "
                            f"CU's {arch} cubin (target {target})")


class OpenMPNvptxTarget(OpenMPTarget):
    image_kind = "cubin"
    # clang 17-20: prepare_image reads the cubins' names; clang 21+ (for_inputs) names them only
    image_argv_reads_objects = True

    def __init__(self, name: str, arch: str = "sm_80", compiler: str = "clang"):
        super().__init__(name)
        self.arch = arch
        self.compiler = compiler
        self.runtime_cubin = ""  # the device runtime's cubin, made by prepare_image
        # -foffload-lto CUs (setup_lto): llvm-lto2, the runtime's bitcode, ptxas, and by
        # id(cu) the CU's and the runtime's resolutions
        self.runtime_bc = ""
        self.ptxas = ""
        self.lto_identity = ""
        self.resolutions: dict = {}
        self.shared_runtime = False  # every CU calls the image's one runtime (setup_lto)
        self.lto_defines: frozenset[str] = frozenset()  # what those CUs define of the runtime
        # clang 21+: the libompdevice.a clang's device link takes ("-" for --no-offloadlib,
        # "" for clang 17-20's libomptarget.devicertl.a), the link line's words, and the PTX
        # features clang's device link gives its LTO (-mattr, from the CUDA it finds)
        self.runtime_archive = ""
        self.link_args: list[str] = []
        self.ptx_features = ""
        self.ptxas_level = 0  # clang 21+'s ptxas level (nvlink_levels), 0: opt_level
        self._cache: Cache | None = None  # the link's, for clang 21+'s runtime part

    def for_inputs(self, cus, plan=None):
        compiler, major, generation = of_link(self.name, cus,
                                              plan.driver if plan is not None else "")
        archs = sorted({cu_arch(cu) for cu in cus})
        if len(archs) != 1 or not archs[0]:
            raise LinkError(f"target {self.name}: the CUs were compiled for "
                            f"{', '.join(a or 'no architecture' for a in archs)}; offlink "
                            f"links one --offload-arch per link so far")
        if plan is not None:
            refuse_nvptx_words(plan.argv[1:])
        nvptx = OpenMPNvptxTarget(self.name, archs[0], compiler)
        nvptx.entry_generation = generation
        if major is not None and major >= 21:
            # libompdevice.a, linked into the image by clang's own device link (device_runtime)
            args = plan.argv[1:] if plan is not None else []
            nvptx.link_args = args
            nvptx.runtime_archive = ompdevice.find(compiler, TRIPLE, args, self.name) \
                if ompdevice.wanted(args) else "-"
            # clang's own device link reads the cubins: its command only names them, so a
            # cold link asks the driver for it beside the compiles (stages.prefetch_image_link)
            # and a relink writes no cubin the cached image does not need
            nvptx.image_argv_reads_objects = False
        nvptx.opt_level = link_opt_level(plan.argv[1:]) if plan is not None else 2
        if nvptx.runtime_archive:
            nvptx.opt_level, nvptx.ptxas_level = ompdevice.nvlink_levels(nvptx.link_args)
        nvptx.setup_lto(cus, plan)
        return nvptx

    def setup_lto(self, cus, plan) -> None:
        """The -foffload-lto CUs' LTO: llvm-lto2, ptxas, the device runtime's bitcode and each
        bitcode CU's resolutions (the CU's and the runtime's); nothing (each CU compiled whole
        by clang) without llvm-lto2, at -O0, or when a CU's symbols cannot be read here."""
        if self.opt_level == 0 or not any(cu.payload.code_kind == "llvm-bc" for cu in cus):
            return  # (-O0: LLVM 19 cannot compile the device runtime unoptimized)
        lto2 = _lto2(self.compiler)
        if not lto2:
            return
        bc = self._runtime_bc()
        runtime = read_runtime(bc, self.compiler)
        rt_symbols = symbols(runtime, bc)
        resolutions = cu_resolutions(cus)
        if rt_symbols is None or not resolutions:
            return
        self.lto2, self.runtime_bc = lto2, bc
        self.ptxas = cuda_bin("ptxas", plan.argv if plan is not None else None)
        st = os.stat(os.path.realpath(self.ptxas))
        # What the command's words do not say: the runtime's bitcode and ptxas (offers runs it)
        self.lto_identity = "\0".join(("openmp-nvptx-lto", hashlib.sha256(runtime).hexdigest(),
                                       os.path.realpath(self.ptxas), str(st.st_size),
                                       str(st.st_mtime_ns)))
        modules = {id(cu): symbols(cu.payload.code, cu.label) or [] for cu in cus
                   if id(cu) in resolutions}
        provided = {s.name for s in rt_symbols if not s.flags & FB_UNDEFINED}
        self.shared_runtime = calls_runtime_across_cus(
            [(modules[i], res) for i, res in resolutions.items()], rt_symbols)
        for cu in cus:
            res = resolutions.get(id(cu))
            if res is None:
                continue
            defined = {n for n, r in res if "p" in r}
            # (one the CU internalizes, the runtime's part must define for itself)
            self.lto_defines |= {n for n, r in res if "x" in r} & defined & provided
            self.resolutions[id(cu)] = (res, [] if self.shared_runtime else
                                        runtime_resolutions(rt_symbols, defined))
        self._cus = list(cus)

    def _runtime_bc(self) -> str:
        """The device runtime's bitcode a CU's compile links in: clang 21+'s beside its
        libompdevice.a (libomptarget-nvptx.bc), clang 17-20's libomptarget-nvptx-<arch>.bc."""
        if self.runtime_archive == "-":
            raise LinkError(f"target {self.name}: --no-offloadlib with -foffload-lto objects: "
                            f"offlink compiles each CU with the device runtime; leave it off")
        if self.runtime_archive:
            if not self.ptx_features:
                self.ptx_features = ompdevice.ptx_features(self.compiler, self.arch,
                                                           self.link_args)
            return ompdevice.bitcode_file(self.runtime_archive, TRIPLE)
        return os.path.join(llvm_lib_dir(self.compiler), f"libomptarget-nvptx-{self.arch}.bc")

    def source_suffix(self, cu):
        return ".bc" if cu.payload.code_kind == "llvm-bc" else ".cubin"

    def compile_argv(self, cu, source, output):
        p = cu.payload
        if p.code_kind == "object":
            return []  # clang compiled it to a cubin already, with the device runtime in it
        both = self.resolutions.get(id(cu))
        if both is not None:  # as clang's LTO, this CU's part of it, with the device runtime
            res, rt = both    # (none: the runtime's part of the image, shared_runtime)
            mattr = [f"--mattr={self.ptx_features}"] if self.ptx_features else []
            return [self.lto2, "run", *lto_level_words(self.opt_level), f"--mcpu={self.arch}",
                    *mattr, "--filetype=asm", source, *([self.runtime_bc] if rt else []),
                    "-o", output,
                    *(f"-r={source},{n},{r}" for n, r in res),
                    *(f"-r={self.runtime_bc},{n},{r}" for n, r in rt)]
        # -foffload-lto bitcode: compiled on its own as clang compiles a CU without it.
        bc = self._runtime_bc() if self.runtime_archive else \
            os.path.join(llvm_lib_dir(p.compiler), f"libomptarget-nvptx-{self.arch}.bc")
        return [p.compiler, f"--target={TRIPLE}", f"-march={self.arch}", f"-O{self.opt_level}",
                "-c", f"--cuda-path={cuda_home()}", "-Xclang", "-mlink-builtin-bitcode",
                "-Xclang", bc,
                "-Wno-unused-command-line-argument", "-x", "ir", source, "-o", output]

    def compile_engine(self, argv):
        return self.lto_identity if argv and argv[0] == self.lto2 else ""

    def after_compile_argv(self, cu, obj_path):
        if self.resolutions.get(id(cu)) is None:
            return []
        # llvm-lto2 writes its PTX as X.0; ptxas makes the relocatable cubin (offers runs it)
        return [[self.ptxas, "-m64", f"-O{self.ptxas_level or self.opt_level}", "--gpu-name",
                 self.arch,
                 "--output-file", obj_path, obj_path + ".0", "-c"]]

    def offers(self, cu, obj_path):
        """The names the CU's host entries register that its cubin defines (kernels, declare
        target variables, indirect functions' pointer cells). This is also the step after a
        -foffload-lto CU's llvm-lto2: ptxas (after_compile_argv)."""
        for argv in self.after_compile_argv(cu, obj_path):
            runner.run(argv, f"assembling {cu.label}'s PTX for target {self.name}")
            os.remove(obj_path + ".0")

        with open(obj_path, "rb") as f:
            found = cubin_symbols(f.read(), obj_path)
        out = []
        # An object made by `ld -r` carries every CU's host rows with each CU's image: each
        # image offers the rows it defines (check_entries: every row is defined by one).
        for name in sorted(set(cu.payload.offered) & set(found)):
            sym = found[name]
            # Kernels are weak (a template's region may come from many CUs).
            out.append(Offer(name, sym.kind, sym.size, sym.kind != "function"))
        return tuple(out)

    def prepare_image(self, plan, compiled, workdir: str, cache: Cache | None) -> None:
        """The device runtime's part these cubins call, compiled (or taken from the cache)
        into `runtime_cubin` in the work folder."""
        check_entries(self.name, self.arch, compiled)
        if self.runtime_archive:
            # clang 21+: clang's own device link takes what it needs of libompdevice.a; its
            # part is kept in the cache by run_linker_job
            self._cache = cache
            return

        used: set[str] = set()
        for c in compiled:
            data = c.data
            if data is None:
                with open(c.object_path, "rb") as f:
                    data = f.read()
            used |= cubin_names(data, c.object_path)
        lto2 = llvm_tool(self.compiler, "llvm-lto2")
        ptxas = cuda_bin("ptxas", plan.argv)
        runtime = device_runtime(self.compiler, self.arch)
        bc = os.path.join(workdir, f"devicertl-{self.arch}.bc")
        with open(bc, "wb") as f:
            f.write(runtime)
        symtab = self._symtab(lto2, bc, runtime, cache)
        res = resolutions(symtab, used, self.lto_defines)
        level = max(self.opt_level, 1)  # the level _runtime_argvs compiles it at
        ident = "\0".join((cache.tool_identity(lto2) or lto2, cache.tool_identity(ptxas) or ptxas)
                          if cache else (lto2, ptxas))
        key = hashlib.sha256("\0".join(["openmp-nvptx-devicertl", self.arch, f"-O{level}", ident,
                                        hashlib.sha256(runtime).hexdigest(),
                                        *(f"{n},{r}" for n, r in res)]).encode()).hexdigest()
        self.runtime_cubin = os.path.join(workdir, f"devicertl-{self.arch}-{key[:16]}.cubin")
        if cache is not None:
            key = self._runtime_key(cache, key, lto2, ptxas)
        hit = cache.get(key) if cache else None
        if hit is not None:
            with open(self.runtime_cubin, "wb") as f:
                f.write(hit.data)
            return

        # One resolution per symbol: a response file keeps the command line readable.
        rsp = os.path.join(workdir, f"devicertl-{self.arch}.resolutions")
        with open(rsp, "w", encoding="utf-8") as f:
            f.write("".join(f"-r={shlex.quote(f'{bc},{n},{r}')}\n" for n, r in res))
        what = f"compiling the device runtime for target {self.name} ({self.arch})"
        for argv in self._runtime_argvs(lto2, ptxas, workdir, self.runtime_cubin):
            runner.run(argv, what)
        if cache is not None:
            with open(self.runtime_cubin, "rb") as f:
                cache.put(key, {"target": self.name}, f.read())

    def _runtime_key(self, cache: Cache, names: str, lto2: str, ptxas: str) -> str:
        """The runtime cubin's cache key: `names` (the runtime's bytes, the tools, the level and
        the resolutions: also the cubin's file name) and the commands that make it, with the
        work folder and the cubin's name taken out; cache.key adds offlink's code identity."""
        argvs = self._runtime_argvs(lto2, ptxas, "<tmp>", "<cubin>")
        return cache.key("openmp-nvptx-devicertl", names, *("\0".join(a) for a in argvs))

    def _runtime_argvs(self, lto2: str, ptxas: str, workdir: str, cubin: str) -> list[list[str]]:
        """llvm-lto2 and ptxas over the device runtime's bitcode in `workdir`, with its
        resolutions' response file there, making `cubin` (prepare_image's last two commands).
        The link line's level, as clang's link LTO-compiles it and runs ptxas; but not -O0:
        LLVM 19 cannot compile the runtime unoptimized (clang's own -O0 link stops with "LLVM
        ERROR: Cannot select: ... AtomicStore"), so at -O0 it is compiled at -O1."""
        level = max(self.opt_level, 1)
        bc = os.path.join(workdir, f"devicertl-{self.arch}.bc")
        ptx = os.path.join(workdir, f"devicertl-{self.arch}.s")
        rsp = os.path.join(workdir, f"devicertl-{self.arch}.resolutions")
        return [[lto2, "run", *lto_level_words(level), f"--mcpu={self.arch}", "--filetype=asm",
                 bc, "-o", ptx, f"@{rsp}"],
                [ptxas, "-m64", f"-O{level}", "--gpu-name", self.arch, "--output-file", cubin,
                 ptx + ".0", "-c"]]

    def prepare_argvs(self, plan, compiled, workdir):
        """What prepare_image runs when the cache has not the runtime's cubin (its name
        without the key of the names the cubins use, as image_argv shows it then)."""
        if self.runtime_archive:
            return []
        lto2 = llvm_tool(self.compiler, "llvm-lto2")
        bc = os.path.join(workdir, f"devicertl-{self.arch}.bc")
        return [[lto2, "dump-symtab", bc],
                *self._runtime_argvs(lto2, cuda_bin("ptxas", plan.argv), workdir,
                                     os.path.join(workdir, f"devicertl-{self.arch}.cubin"))]

    @staticmethod
    def _symtab(lto2: str, bc: str, runtime: bytes, cache: Cache | None):
        key = hashlib.sha256(b"llvm-lto2 dump-symtab\0" + runtime).hexdigest()
        hit = cache.get(key) if cache else None
        if hit is not None:
            return parse_symtab(hit.data.decode())
        out = runner.run([lto2, "dump-symtab", bc], "reading the device runtime's symbols")
        if cache is not None:
            cache.put(key, {}, out.stdout)
        return parse_symtab(out.stdout.decode())

    def run_linker_job(self, words, compiled):
        """clang 21+: clang-nvlink-wrapper's job with its device-runtime part from the cache
        (nvlink_wrapper), where the link has a cache."""
        if not self.runtime_archive or self._cache is None:
            return False
        return nvlink_wrapper.run(self._cache, words, compiled, f"device link for target "
                                                                f"{self.name}")

    def image_argv(self, plan, compiled, output):
        """nvlink of the device runtime's cubin and every CU's, as clang's link runs it. nvlink
        reads a file as a cubin by its `.cubin` suffix, hence the links to each CU's object.
        clang 21+: clang's own device link (device_runtime.link_argv), whose
        clang-nvlink-wrapper takes the part of libompdevice.a the cubins call and runs nvlink."""
        if self.runtime_archive:
            return ompdevice.link_argv(self.compiler, TRIPLE, self.arch,
                                       [c.object_path for c in compiled], output,
                                       self.link_args)
        nvlink = cuda_bin("nvlink", plan.argv)
        script = []
        # (--dry-run makes no runtime cubin: it shows the name a real run would give it)
        cubins = [self.runtime_cubin or os.path.join(os.path.dirname(output),
                                                     f"devicertl-{self.arch}.cubin")]
        for c in compiled:
            if c.object_path.endswith(".cubin"):
                cubins.append(c.object_path)
                continue
            script.append(shlex.join(["ln", "-sf", c.object_path, c.object_path + ".cubin"]))
            cubins.append(c.object_path + ".cubin")
        # clang-nvlink-wrapper's words (nvlink records them in the image)
        script.append(shlex.join([nvlink, "-o", output, "-arch", self.arch, "-L",
                                  llvm_lib_dir(self.compiler), *cubins,
                                  *nvlink_words(device_linker_words(plan.argv[1:], TRIPLE),
                                                self.name)]))
        return ["sh", "-ec", "\n".join(script)]

    def image_reads(self, plan):
        """None: clang-linker-wrapper gives a GPU image none of the host link's libraries;
        clang 21+'s device link reads libompdevice.a, whose content keys the image."""
        return [self.runtime_archive] if self.runtime_archive not in ("", "-") else []

    def exports(self, image, path):
        return set(cubin_symbols(image, path))
