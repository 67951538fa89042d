"""clang's OpenMP offload target for AMD GPUs (`openmp-amdgcn-amd-amdhsa`, from objects made by
clang -fopenmp --offload-arch=gfx90a): each CU's bitcode compiled on its own with the device
runtime, ld.lld; the image is an HSA code object, registered with libomptarget
(toolchains/llvm/omptarget.py).

What clang 19 does (its -v and clang-linker-wrapper's --save-temps show it): a CU's device code
is LLVM bitcode in the object (AMDGPU offloading is LTO by default). The link runs one LTO of
every CU's bitcode and the device runtime (libomptarget.devicertl.a's member for
amdgcn/gfx90a: libomptarget-amdgpu-gfx90a.bc's bytes) at the link line's level, writes one
object and links it by `clang --target=amdgcn-amd-amdhsa -mcpu=gfx90a -Wl,--no-undefined`,
that is `ld.lld --no-undefined -shared --no-undefined X.o -plugin-opt=mcpu=gfx90a -o image`.

offlink compiles each CU on its own by `llvm-lto2 run` with the device runtime's bitcode: the
CU's symbols resolved as the wrapper resolves them for the whole program (openmp.
lto_resolutions: what another CU names stays visible), the runtime's as the wrapper resolves
them (runtime_resolutions: hidden and omittable definitions internalized, so each CU has its
own copy, inlined into its kernels; the device environment the plugin finds by name stays
visible, weak, in each). Each CU's object is cached by the command (the resolutions are its
words) and the runtime's bytes: a relink after one CU changed compiles that CU, then ld.lld
links the objects as clang's link does. With one CU this is clang's LTO exactly and the image
is clang's byte for byte; with several it is not (no whole-program device LTO: a function one
CU calls in another is not inlined, each CU keeps its own copy of the runtime's code), while
the kernels, their descriptors and the variables are the same (docs/llvm.md).
"""

from __future__ import annotations

import hashlib
import os

from ... import run as runner
from ...elf import STB_GLOBAL, STT_FUNC, ElfFile
from ...errors import LinkError, UsageError
from ...formats.bitcode import FB_COMMON, FB_MAY_OMIT, FB_UNDEFINED, symbols
from ...model import Offer
from . import amdgpu_resources
from . import device_runtime as ompdevice
from .llvm_release import of_link
from .openmp import (
    OpenMPTarget,
    c_identifier,
    cu_resolutions,
    device_linker_words,
    link_opt_level,
    llvm_lib_dir,
    lto_level_words,
    refuse_nvptx_words,
)
from .openmp_nvptx import calls_runtime_across_cus, cu_arch, llvm_tool, read_runtime

TRIPLE = "amdgcn-amd-amdhsa"


def runtime_resolutions(symtab, cu_defines: set[str]) -> list[tuple[str, str]]:
    """(name, llvm-lto2 resolution) per symbol of the device runtime's bitcode (a list of
    formats.bitcode.Symbol) in one CU's compile, as clang-linker-wrapper resolves it after the
    CUs (linkBitcodeFiles): a name the CU defines prevails there (the `__omp_rtl_*` settings
    it was compiled with), the runtime's is dropped; a definition prevails, is final (l)
    unless default-visible or common, and stays visible (x) when neither hidden nor omittable
    or in a section with a C-identifier name. The rest is internalized."""
    out = []
    for name, flags, section in symtab:
        if flags & FB_UNDEFINED or name in cu_defines:
            out.append((name, ""))
            continue
        visibility = flags & 3
        r = "pl" if visibility and not flags & FB_COMMON else "p"
        if (visibility != 1 and not flags & FB_MAY_OMIT) or \
                (section and c_identifier(section)):
            r += "x"
        out.append((name, r))
    return out


class OpenMPAmdgpuTarget(OpenMPTarget):
    image_kind = "shared-object"  # an HSA code object is an ELF shared object for amdgcn
    image_argv_reads_objects = False

    def __init__(self, name: str, arch: str = "gfx90a", compiler: str = "clang"):
        super().__init__(name)
        self.arch = arch
        self.compiler = compiler
        self.runtime_bc = ""  # the device runtime's bitcode (LLVM's lib folder)
        self.runtime_sha = ""
        self.amd_resolutions: dict = {}  # by id(cu): (the CU's, the runtime's)
        self.runtime_archive = ""  # clang 21+: libompdevice.a (device_runtime), else ""
        self.link_args: list[str] = []  # clang 21+: the link line's words after the driver

    def for_inputs(self, cus, plan=None):
        compiler, major, generation = of_link(self.name, cus,
                                              plan.driver if plan is not None else "")
        archs = sorted({cu_arch(cu) for cu in cus})
        if len(archs) != 1 or not archs[0] or ":" in archs[0]:
            raise LinkError(f"target {self.name}: the CUs were compiled for "
                            f"{', '.join(a or 'no architecture' for a in archs)}; offlink "
                            f"links one --offload-arch per link, without target features "
                            f"(xnack, sramecc) so far")
        if any(cu.payload.code_kind != "llvm-bc" for cu in cus):
            raise LinkError(f"target {self.name}: offlink links AMD GPU CUs carried as "
                            f"bitcode (clang's default) only")
        if plan is not None:
            refuse_nvptx_words(plan.argv[1:])
            said = device_linker_words(plan.argv[1:], TRIPLE)
            if major is not None and major >= 21:
                # (-L folders: where clang 21+'s device link finds libompdevice.a)
                said = [w for w in said if w not in ompdevice.linker_dir_words(said)]
            if said:
                raise UsageError(f"-Xoffload-linker words for target {self.name}: offlink's "
                                 f"AMD GPU image link does not take them yet; leave them off")
        t = OpenMPAmdgpuTarget(self.name, archs[0], compiler)
        t.entry_generation = generation
        t.opt_level = link_opt_level(plan.argv[1:]) if plan is not None else 2
        if t.opt_level == 0:
            # (LLVM 19's llvm-lto2 crashes compiling the runtime unoptimized; clang's own -O0
            # link of the same objects fails too)
            raise LinkError(f"target {self.name}: LLVM 19 cannot compile the AMD GPU device "
                            f"runtime at -O0 (clang's own link fails too); link at -O1 or above")
        t.lto2 = llvm_tool(compiler, "llvm-lto2")
        if major is not None and major >= 21:
            # libompdevice.a's bitcode, found as clang's device link finds it (device_runtime):
            # each CU's compile links in the file an LLVM install has beside it
            args = plan.argv[1:] if plan is not None else []
            if not ompdevice.wanted(args):
                raise LinkError(f"target {t.name}: --no-offloadlib: offlink compiles each AMD "
                                f"GPU CU with the device runtime; leave it off")
            t.runtime_archive = ompdevice.find(compiler, TRIPLE, args, t.name)
            t.link_args = args
            t.runtime_bc = ompdevice.bitcode_file(t.runtime_archive, TRIPLE)
        else:
            # libomptarget-amdgpu-<arch>.bc: the same bytes as libomptarget.devicertl.a's
            # member for amdgcn/<arch>, which clang's link extracts (tests/test_clang_amdgpu.py)
            t.runtime_bc = os.path.join(llvm_lib_dir(compiler),
                                        f"libomptarget-amdgpu-{t.arch}.bc")
        runtime = read_runtime(t.runtime_bc, compiler)
        t.runtime_sha = hashlib.sha256(runtime).hexdigest()
        rt_symbols = symbols(runtime, "device runtime")
        resolutions = cu_resolutions(cus)
        if rt_symbols is None or not resolutions:
            raise LinkError(f"target {self.name}: the CUs' or the device runtime's bitcode "
                            f"symbols cannot be read here")
        modules = [(symbols(cu.payload.code, cu.label) or [], resolutions[id(cu)]) for cu in cus]
        if calls_runtime_across_cus(modules, rt_symbols):
            # (each CU's copy of the runtime: such a function would see one no kernel of its
            # CU set up; nvptx64 links one shared copy instead, not done for AMD GPUs yet)
            raise LinkError(f"target {self.name}: a CU defines a function other CUs may call "
                            f"that calls the device runtime; offlink's per-CU AMD GPU link "
                            f"gives each CU its own copy of the runtime and does not link such "
                            f"programs yet")
        # clang 21+'s device LTO runs in ld.lld (-shared), which marks a reference final in
        # the image (l) where the name's definition is not default-visible
        final = set()
        if t.runtime_archive:
            final = {sym.name for syms, _ in modules for sym in syms
                     if not sym.flags & FB_UNDEFINED and sym.flags & 3}
            final |= {sym.name for sym in rt_symbols if not sym.flags & FB_UNDEFINED
                      and sym.flags & 3}
        for cu in cus:
            res = [(n, "l" if not r and n in final else r) for n, r in resolutions[id(cu)]]
            defined = {n for n, r in res if "p" in r}
            t.amd_resolutions[id(cu)] = (res, runtime_resolutions(rt_symbols, defined))
        t._cus = list(cus)
        return t

    def source_suffix(self, cu):
        return ".bc"

    def compile_argv(self, cu, source, output):
        """As clang's LTO, this CU's part of it, with the device runtime."""
        res, rt = self.amd_resolutions[id(cu)]
        # (clang 21+: ld.lld's LTO of a -shared link codegens so)
        lld = ["--relocation-model=pic", "--function-sections", "--data-sections",
               "--addrsig"] if self.runtime_archive else []
        return [self.lto2, "run", *lto_level_words(self.opt_level), f"--mcpu={self.arch}", *lld,
                source, self.runtime_bc, "-o", output,
                *(f"-r={source},{n},{r}" for n, r in res),
                *(f"-r={self.runtime_bc},{n},{r}" for n, r in rt)]

    def run_compile(self, children, argv, what):
        return children.run(argv, what)

    def compile_engine(self, argv):
        return "\0openmp-amdgpu-devicertl\0" + self.runtime_sha  # the runtime's bytes

    def end_compiles(self):
        pass

    def after_compile_argv(self, cu, obj_path):
        return [["mv", obj_path + ".0", obj_path]]  # offers() renames llvm-lto2's output

    def offers(self, cu, obj_path):
        """The names the CU's host entries register that its object defines (kernels,
        declare target variables)."""
        os.replace(obj_path + ".0", obj_path)
        found = {s.name: s for s in ElfFile.open(obj_path).symbols() if s.defined and s.name}
        out = []
        for name in sorted(set(cu.payload.offered) & set(found)):
            s = found[name]
            kind = "function" if s.st_type == STT_FUNC else "variable"
            # Kernels are weak (a template's region may come from many CUs).
            out.append(Offer(name, kind, 1 if kind == "function" else s.st_size,
                             kind != "function" and s.st_bind == STB_GLOBAL))
        missing = sorted(set(cu.payload.offered) - set(found))
        if missing:
            raise LinkError(f"{cu.label}: offload entry '{missing[0]}' is not defined by its "
                            f"{self.arch} object (target {self.name})")
        return tuple(out)

    def image_argv(self, plan, compiled, output):
        """ld.lld as clang's link runs it (through `clang --target=amdgcn-amd-amdhsa`); clang
        21+'s device link as the wrapper runs it (device_runtime.link_argv: ld.lld with
        -lompdevice, of which it takes nothing: each CU has the runtime's code it calls)."""
        if self.runtime_archive:
            return ompdevice.link_argv(self.compiler, TRIPLE, self.arch,
                                       [c.object_path for c in compiled], output,
                                       self.link_args)
        lld = os.path.join(os.path.dirname(llvm_lib_dir(self.compiler)), "bin", "ld.lld")
        return [lld, "--no-undefined", "-shared", "--no-undefined",
                *(c.object_path for c in compiled), f"-plugin-opt=mcpu={self.arch}", "-o",
                output]

    def link_image(self, argv, output, compiled):
        """The image link, then (clang 21+) the check that each kernel was compiled with the
        resources of what it calls in other CUs (amdgpu_resources): one line naming kernel
        and callee where not."""
        runner.run(argv, f"device link for target {self.name}")
        if not self.runtime_archive:
            return  # (clang 19's objects carry no resource symbols to compare)
        objects = {c.cu.label: ElfFile.open(c.object_path) for c in compiled}
        have = {k: v for elf in objects.values() for k, v in amdgpu_resources.kernels(elf).items()}
        by_label = {c.cu.label: c for c in compiled}
        needs: dict[str, dict] = {}
        for kernel, kernel_cu, callee, callee_cu in amdgpu_resources.cross_cu_calls(
                objects, set(have)):
            if callee_cu not in needs:
                needs[callee_cu] = self._function_info(by_label[callee_cu], output)
            say = amdgpu_resources.problem(kernel, kernel_cu, callee, callee_cu, have[kernel],
                                           needs[callee_cu].get(callee, {}))
            if say:
                raise LinkError(f"target {self.name}: {say}")

    def _function_info(self, compiled, image: str) -> dict[str, dict[str, int]]:
        """The resource values of a CU's functions: its compile again, to assembly."""
        base = f"{image}.{os.path.basename(compiled.object_path)}"
        with open(base + ".bc", "wb") as f:
            f.write(compiled.cu.payload.code)
        argv = self.compile_argv(compiled.cu, base + ".bc", base + ".s")
        runner.run([*argv, "--filetype=asm"], f"reading what {compiled.cu.label}'s functions "
                                              f"need (target {self.name})")
        with open(base + ".s.0", encoding="utf-8", errors="replace") as f:
            try:
                return amdgpu_resources.function_info(f.read())
            except (ValueError, IndexError):
                return {}

    def image_reads(self, plan):
        return [self.runtime_archive] if self.runtime_archive else []

    def exports(self, image, path):
        return {s.name for s in ElfFile(image, path).symbols(dynamic=True) if s.defined}
