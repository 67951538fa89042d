"""LLVM 21+'s OpenMP device runtime, `libompdevice.a`, found as clang's own GPU link finds it, and
the device link that clang-linker-wrapper runs with it.

From LLVM 21 on, clang's link line gives clang-linker-wrapper `--device-linker=<triple>=
-lompdevice` for an NVIDIA or AMD GPU (not with `--no-offloadlib`), and the wrapper links each
image by `clang --target=<triple> -march=/-mcpu=<arch> [-flto] <the CUs> -Xlinker -lompdevice
[-Xlinker <-Xoffload-linker word>]... [<-O, -g, --cuda-path= words of the link line>]`
(clang/tools/clang-linker-wrapper, LLVM 22.1.8). That clang's linker job searches `-l` in the
folders its toolchain gives it, in this order (clang/lib/Driver/ToolChains/Cuda.cpp,
AMDGPU.cpp, ToolChain.cpp):
- nvptx64 (clang-nvlink-wrapper): `LIBRARY_PATH`'s folders, the toolchain's file paths, the
  `-Xoffload-linker -L` folders, then the install's `lib`;
- amdgcn (ld.lld): the toolchain's file paths, then the `-Xoffload-linker -L` folders;
the toolchain's file paths being those of `<install>/lib/<triple>`, `<resource dir>/lib/
<triple>` and `<resource dir>/lib/<os>/<arch>` that exist. An LLVM install puts the runtime in
`<install>/lib/<triple>/libompdevice.a` (openmp/device/CMakeLists.txt), with the same bitcode
beside it as `libomptarget-<nvptx|amdgpu>.bc`, which a compile without -foffload-lto links
into each CU (`--libomptarget-<nvptx|amdgpu>-bc-path=`). The host link's `-L` folders are not
searched: clang's driver does not give them to the device link.
"""

from __future__ import annotations

import os
import shlex

from ... import run as runner
from ...driver_args import expand_response_files, words
from ...elf import archive_members
from ...errors import LinkError
from .openmp import device_linker_words, link_opt_level, llvm_lib_dir

LIBRARY = "libompdevice.a"
_NAMES = {"nvptx64-nvidia-cuda": "nvptx", "amdgcn-amd-amdhsa": "amdgpu"}
_OS_ARCH = {"nvptx64-nvidia-cuda": ("cuda", "nvptx64"), "amdgcn-amd-amdhsa": ("amdhsa", "amdgcn")}


def _linker_dirs(linker_words: list[str]) -> list[tuple[str, ...]]:
    """The -L words among an image link's -Xoffload-linker words (`-LDIR`, `-L DIR`,
    `--library-path=DIR`, `--library-path DIR`), in order: (folder, its words...) each."""
    out: list[tuple[str, ...]] = []
    i = 0
    while i < len(linker_words):
        w = linker_words[i]
        if w in ("-L", "--library-path") and i + 1 < len(linker_words):
            out.append((linker_words[i + 1], w, linker_words[i + 1]))
            i += 1
        elif w.startswith("--library-path="):
            out.append((w[len("--library-path="):], w))
        elif w.startswith("-L") and len(w) > 2:
            out.append((w[2:], w))
        i += 1
    return out


def linker_dir_words(linker_words: list[str]) -> set[str]:
    """The words of linker_words that name -L folders."""
    return {w for d in _linker_dirs(linker_words) for w in d[1:]}


def _file_paths(compiler: str, triple: str) -> list[str]:
    """The toolchain's file paths that exist (ToolChain::getFilePaths): <install>/lib/<triple>,
    <resource dir>/lib/<triple>, <resource dir>/lib/<os>/<arch>."""
    lib = llvm_lib_dir(compiler)
    resources = os.path.join(lib, "clang")
    found = [os.path.join(lib, triple)]
    if os.path.isdir(resources):
        for version in sorted(os.listdir(resources)):  # one per install
            found.append(os.path.join(resources, version, "lib", triple))
            found.append(os.path.join(resources, version, "lib", *_OS_ARCH[triple]))
    return [d for d in found if os.path.isdir(d)]


def search_dirs(compiler: str, triple: str, args: list[str],
                environ: dict[str, str] | None = None) -> list[str]:
    """The folders clang's device link of `triple` searches for -lompdevice, in its order,
    for a link line with `args` (its words after the driver)."""
    env = os.environ if environ is None else environ
    linker = [d[0] for d in _linker_dirs(device_linker_words(args, triple))]
    if triple.startswith("nvptx"):
        library_path = [d or "." for d in env.get("LIBRARY_PATH", "").split(":")] \
            if env.get("LIBRARY_PATH") else []
        return [*library_path, *_file_paths(compiler, triple), *linker,
                llvm_lib_dir(compiler)]
    return [*_file_paths(compiler, triple), *linker]


def wanted(args: list[str]) -> bool:
    """Whether the link line gives the image the device runtime (not `--no-offloadlib`)."""
    return not any(w.option == "--no-offloadlib"
                   for w in words(expand_response_files(list(args)), clang=True))


def find(compiler: str, triple: str, args: list[str], target: str) -> str:
    """The libompdevice.a clang's device link of `triple` would link, or one clear error
    saying where offlink looked and what provides it."""
    dirs = search_dirs(compiler, triple, args)
    for d in dirs:
        path = os.path.join(d, LIBRARY)
        if os.path.isfile(path):
            return path
    flag = f"-Xoffload-linker-{triple} -L<dir>"
    raise LinkError(f"target {target}: {compiler}'s OpenMP device runtime {LIBRARY} is not in "
                    f"{', '.join(dirs) or 'any folder'} (where clang's own device link looks); "
                    f"it comes with an LLVM install's openmp runtimes (lib/{triple}/{LIBRARY}: "
                    f"apt.llvm.org's libomp-N-dev, ROCm, an LLVM build; no Debian package "
                    f"has it): name its folder with {flag}")


def bitcode(path: str) -> tuple[str, bytes]:
    """The runtime's one bitcode member, (its name, its bytes), as the device link reads it."""
    with open(path, "rb") as f:
        data = f.read()
    members = [m for m in archive_members(data, path) if bytes(m.data[:2]) == b"BC"]
    if len(members) != 1:
        raise LinkError(f"{path}: {len(members)} bitcode members; offlink reads the one an LLVM "
                        f"install's {LIBRARY} has")
    return members[0].name, bytes(members[0].data)


def bitcode_file(path: str, triple: str) -> str:
    """The runtime's bitcode file beside the archive (libomptarget-nvptx.bc), which an LLVM
    install has: what a per-CU compile links in, as clang's compile without -foffload-lto
    does. The archive's member where the file is not there or differs is refused."""
    beside = os.path.join(os.path.dirname(path), f"libomptarget-{_NAMES[triple]}.bc")
    _, member = bitcode(path)
    try:
        with open(beside, "rb") as f:
            same = f.read() == member
    except OSError:
        same = False
    if not same:
        raise LinkError(f"{path}: no {os.path.basename(beside)} beside it with the same bitcode "
                        f"(an LLVM install has both); offlink's per-CU compile links that file")
    return beside


def device_compiler_words(args: list[str], triple: str) -> list[str]:
    """The link line's words clang's driver gives the device link of `triple` as
    `--device-compiler=` (Clang.cpp's CompilerOptions, those offlink takes): -O and -g words,
    --cuda-path= (nvptx64), -mcode-object-version= (amdgcn), and -flto=full for
    -foffload-lto."""
    out = []
    lto = False
    for w in words(expand_response_files(list(args)), clang=True):
        o = w.option
        if o.startswith("-O"):
            out.append("-O1" if o == "-O" else o)
        elif o.startswith("-g") and o not in ("-gcc-toolchain",):
            out.append(o)
        elif o.startswith("--cuda-path=") and triple.startswith("nvptx"):
            out.append(o)
        elif o.startswith("-mcode-object-version=") and triple.startswith("amdgcn"):
            out.append(o)
        elif o in ("-foffload-lto", "-foffload-lto=full"):
            lto = True
        elif o in ("-fno-offload-lto",):
            lto = False
    return out + (["-flto=full"] if lto else [])


def nvlink_levels(args: list[str]) -> tuple[int, int]:
    """(LTO level, ptxas level) of clang 21+'s NVIDIA device link: clang-nvlink-wrapper's
    defaults (LTO -O2, ptxas -O3), or the link line's level where the line has both an -O word
    and -foffload-lto (the driver then gives the wrapper `-plugin-opt=ON`)."""
    given = [w for w in device_compiler_words(args, "nvptx64-nvidia-cuda") if w.startswith("-O")]
    if "-flto=full" in device_compiler_words(args, "nvptx64-nvidia-cuda") and given:
        level = link_opt_level(given)
        return level, level
    return 2, 3


def link_argv(compiler: str, triple: str, arch: str, inputs: list[str], output: str,
              args: list[str]) -> list[str]:
    """The device link clang-linker-wrapper runs for one image (its linkDevice: generic::
    clang): `inputs` are the CUs' device objects."""
    arch_word = f"-mcpu={arch}" if triple.startswith("amdgcn") else f"-march={arch}"
    return [compiler, "--no-default-config", "-o", output, f"--target={triple}", arch_word,
            *(["-flto", "-Wl,--no-undefined"] if triple.startswith("amdgcn") else []),
            *inputs, *(["-Xlinker", "-lompdevice"] if wanted(args) else []),
            *(w for word in device_linker_words(args, triple) for w in ("-Xlinker", word)),
            *device_compiler_words(args, triple)]


def ptx_features(compiler: str, arch: str, args: list[str]) -> str:
    """The PTX features (`+ptx88` with CUDA 13) clang's device link gives its LTO
    (`--plugin-opt=-mattr=`, from the CUDA that clang finds), as its driver says (-###)."""
    argv = [compiler, "--target=nvptx64-nvidia-cuda", f"-march={arch}",
            *(w for w in device_compiler_words(args, "nvptx64-nvidia-cuda")
              if w.startswith("--cuda-path=")), "-###", "-Wl,x.o", "-o", "x.img"]
    said = runner.run(argv, "asking clang for the NVIDIA device link's PTX features")
    for line in said.stdout.decode(errors="replace").splitlines():
        for word in shlex.split(line) if "clang-nvlink-wrapper" in line else ():
            if word.startswith("--plugin-opt=-mattr="):
                return word[len("--plugin-opt=-mattr="):]
    return ""
