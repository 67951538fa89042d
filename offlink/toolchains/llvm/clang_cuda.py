"""clang's CUDA objects (`cuda-nvptx64-nvidia-cuda`, from `clang -x cuda --offload-arch=sm_NN
--offload-new-driver -fgpu-rdc -c`): each CU's cubin, nvlink, a fatbin; the CUDA runtime
registers it (toolchains/llvm/cudart.py).

What clang 19 does (-Wl,--wrapper-verbose): each CU's device code is compiled with the CU to a
relocatable cubin that the object carries (kind `cuda`, with `cuda_offloading_entries` rows on
the host side); the link runs `nvlink -arch sm_NN` over them (no device runtime: CUDA's
device code needs none) and `fatbinary -64 --create F --image=profile=sm_NN,file=IMAGE`,
which CUDA 13's fatbinary spells `--image3=kind=elf,sm=NN,file=IMAGE` (clang 19's own CUDA
link fails there with CUDA 13: "Unknown option '-image'"). offlink runs the same steps: the
cubins are used as they are, a relink with nothing changed runs nothing. A CU carried as
bitcode (-foffload-lto) is compiled on its own (`clang --target=nvptx64-nvidia-cuda -c`) at
the link line's level (openmp.link_opt_level: clang's driver gives the wrapper the same
`--opt-level=ON` for CUDA as for OpenMP), where clang's link would run device LTO over all
of them.
"""

from __future__ import annotations

import shlex

from ...errors import LinkError
from ...formats.cubin import cubin_symbols
from ...model import Offer
from ...plugins import Target
from ..cuda_toolkit import cuda_bin, cuda_home
from ..offlink.cuda import image_symbols
from .dialect import is_offload_driver_word, linked_entries_of_kind
from .llvm_release import entry_generation, release
from .openmp import device_linker_words, link_opt_level, llvm_lib_dir, refuse_nvptx_words
from .openmp_nvptx import check_entries, cu_arch, nvlink_words

TRIPLE = "nvptx64-nvidia-cuda"


def row_kind(size: int) -> str:
    """A `cuda_offloading_entries` row's kind: size 0 is a kernel (flags say extern/constant,
    not OpenMP's link/indirect)."""
    return "function" if size == 0 else "variable"


class ClangCudaTarget(Target):
    image_kind = "fatbin"
    macro = "__OFFLINK_TARGET_CUDA__"
    registration = "cudart"
    static_link_problem = ""

    def __init__(self, name: str, arch: str = "sm_80", compiler: str = "clang"):
        self.name = name
        self.triple = name.removeprefix("cuda-")
        self.arch = arch
        self.compiler = compiler
        self.opt_level = 2  # the link line's (link_opt_level), as clang's link uses it

    def for_inputs(self, cus, plan=None):
        if self.triple != TRIPLE:
            raise LinkError(f"target {self.name}: offlink links clang's CUDA objects for "
                            f"{TRIPLE} only")
        archs = sorted({cu_arch(cu) for cu in cus})
        if len(archs) != 1 or not archs[0]:
            raise LinkError(f"target {self.name}: the CUs were compiled for "
                            f"{', '.join(a or 'no architecture' for a in archs)}; offlink "
                            f"links one --offload-arch per link so far")

        newer = sorted({cu.payload.compiler for cu in cus
                        if entry_generation(release(cu.payload.compiler)) > 1})
        if newer:  # cudart.py walks clang 19's 32-byte rows
            raise LinkError(f"target {self.name}: CUDA objects of {', '.join(newer)} (56-byte "
                            f"offload entries); offlink registers clang 17-19's CUDA objects "
                            f"only so far")
        if plan is not None:  # as the OpenMP NVIDIA link: the same wrapper takes them
            refuse_nvptx_words(plan.argv[1:])
        t = ClangCudaTarget(self.name, archs[0], cus[0].payload.compiler if cus else "clang")
        t.opt_level = link_opt_level(plan.argv[1:]) if plan is not None else 2
        return t

    def source_suffix(self, cu):
        return ".bc" if cu.payload.code_kind == "llvm-bc" else ".cubin"

    def compile_argv(self, cu, source, output):
        p = cu.payload
        if p.code_kind == "object":
            return []  # clang compiled it to a cubin already
        return [p.compiler, f"--target={TRIPLE}", f"-march={self.arch}", f"-O{self.opt_level}",
                "-c", f"--cuda-path={cuda_home()}", "-Wno-unused-command-line-argument", "-x", "ir",
                source, "-o", output]

    def offers(self, cu, obj_path):
        with open(obj_path, "rb") as f:
            found = cubin_symbols(f.read(), obj_path)
        out = []
        # An object made by `ld -r` carries every CU's host rows with each CU's image: each
        # image offers the rows it defines (check_entries: every row is defined by one).
        for name in sorted(set(cu.payload.offered) & set(found)):
            sym = found[name]
            out.append(Offer(name, sym.kind, sym.size, sym.strong))
        return tuple(out)

    def prepare_image(self, plan, compiled, workdir, cache):
        check_entries(self.name, self.arch, compiled)

    def image_argv(self, plan, compiled, output):
        """nvlink and fatbinary as clang's link runs them (fatbinary in CUDA 13's words), the
        link line's -Xoffload-linker words for nvptx64 given to nvlink (nvlink_words)."""
        nvlink = cuda_bin("nvlink", plan.argv)
        fatbinary = cuda_bin("fatbinary", plan.argv)
        script = []
        cubins = []
        for c in compiled:
            script.append(shlex.join(["ln", "-sf", c.object_path, c.object_path + ".cubin"]))
            cubins.append(c.object_path + ".cubin")
        cubin = f"{output}.{self.arch}.img"
        script.append(shlex.join([nvlink, "-o", cubin, "-arch", self.arch, "-L",
                                  llvm_lib_dir(self.compiler), *cubins,
                                  *nvlink_words(device_linker_words(plan.argv[1:], TRIPLE),
                                                self.name)]))
        sm = self.arch.split("_", 1)[1]
        script.append(shlex.join([fatbinary, "-64", "--create", output,
                                  f"--image3=kind=elf,sm={sm},file={cubin}"]))
        return ["sh", "-ec", "\n".join(script)]

    def exports(self, image, path):
        per_arch = image_symbols(image, path)
        return set.intersection(*(set(s) for _, s in per_arch)) if per_arch else set()

    def host_link_drops(self, word: str) -> bool:
        return is_offload_driver_word(word)

    def host_addresses(self, elf, image):
        """Each row's host address from the linked `cuda_offloading_entries`: the rows the CUDA
        runtime is given (a kernel's address is its host stub's)."""
        out = {}
        for address, e in linked_entries_of_kind(elf, "cuda"):
            if e.name in image.offers:
                out[e.name] = (address, e.size or 1, row_kind(e.size))
        return out
