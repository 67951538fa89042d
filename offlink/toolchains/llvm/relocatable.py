"""`offlink link --relocatable-as-toolchain clang-21+ ... -r` as clang 21+'s own `-r` link
(clang-linker-wrapper's relocatable mode, LLVM's
clang/tools/clang-linker-wrapper/ClangLinkerWrapper.cpp): the CUs' device code linked into one
image (per-CU compiles and the cache, as a final link's), the image and its libomptarget
registration put in the object, and the entries made private to it. Not offlink's default: it
seals the object's device code (a CU outside it can no longer call its `declare target`
functions), where offlink's own `-r` keeps every CU for the final link (docs/llvm.md).

The registration is `llvm-offload-wrapper-N --kind=openmp` of the image in an OffloadBinary (the
module wrapOpenMPBinaries writes: a constructor of priority 101 calling `__tgt_register_lib`
over `__start_`/`__stop_llvm_offload_entries`), compiled by the link's clang (-fPIC, as the
wrapper compiles it), its `.llvm.offloading` renamed `.llvm.offloading.relocatable` (where
the relocatable wrapper puts the image, so no later link reads it as a device input). After
the host `ld -r`, `llvm-objcopy-N` does what relocateOffloadSection does: `.llvm.offloading`
removed, `llvm_offload_entries` renamed `llvm_offload_entries_<hash>` and its
`__start_`/`__stop_` symbols with it, the hash the low 64 bits of the MD5 of the `-r` output,
in hex (so the output is deterministic for the same inputs).

Only where clang's own `-r` would do it and the result is checked here: the link's driver is
clang 21+, every LLVM CU is an OpenMP CU of clang 21+ (llvm_offload_entries rows) for one CPU
target (x86_64: the one run here). Otherwise the CUs are kept apart for the final link, as
before (dialect.relocatable_argv).
"""

from __future__ import annotations

import hashlib
import os

from ... import run as runner
from ...formats.offload_binary import OffloadImage, build_binary
from ...model import CU
from .llvm_release import entry_generation, release

ENTRIES = "llvm_offload_entries"
SECTION = ".llvm.offloading"
TARGETS = ("openmp-x86_64-",)  # the targets whose -r link is as clang's (checked by running)


def linked_at_relocatable(cus: list, argv: list[str]) -> list:
    """The LLVM CUs a `-r` link with this line links as clang 21+'s own `-r` does (see the
    module's text), or none (they are then kept apart for the final link)."""
    mine = [cu for cu in cus if type(cu) is CU and cu.payload.target.startswith(("openmp-",
                                                                               "cuda-"))]
    major = release(argv[0]) if argv and "clang" in os.path.basename(argv[0]) else None
    if not mine or major is None or major < 21:
        return []
    if len({cu.payload.target for cu in mine}) != 1 \
            or not mine[0].payload.target.startswith(TARGETS) \
            or any(entry_generation(release(cu.payload.compiler)) != 3 for cu in mine):
        return []
    return mine


def tool(driver: str, name: str) -> str:
    """`name` of the driver's LLVM release (llvm-objcopy-22 for clang-22)."""
    major = release(driver)
    return f"{name}-{major}"


def registration_object(driver: str, image: bytes, triple: str, workdir: str) -> str:
    """The relocatable wrapper's object for one OpenMP image of `triple` (module text)."""
    binary = os.path.join(workdir, "relocatable-image.bin")
    wrapped = build_binary([OffloadImage("elf", "openmp", 0, {"triple": triple, "arch": ""},
                                         image)])
    with open(binary, "wb") as f:
        f.write(wrapped)
    bitcode = os.path.join(workdir, "relocatable-wrapper.bc")
    obj = os.path.join(workdir, "relocatable-wrapper.o")
    runner.run([tool(driver, "llvm-offload-wrapper"), "--kind=openmp",
                f"--triple={host_triple(driver)}", "-o", bitcode, binary],
               "the relocatable link's registration")
    runner.run([driver, "-c", "-fPIC", bitcode, "-o", obj],
               "the relocatable link's registration compile")
    runner.run([tool(driver, "llvm-objcopy"), f"--rename-section={SECTION}={SECTION}"
                ".relocatable", obj], "the relocatable link's registration")
    return obj


def host_triple(driver: str) -> str:
    """The triple the driver compiles host code for (`-dumpmachine`)."""
    return runner.run([driver, "-dumpmachine"], "the host triple").stdout.strip()


def suffix(path: str) -> str:
    """relocateOffloadSection's suffix for the output at `path`: `_` and the low 64 bits of
    its MD5 (little-endian, as llvm::MD5Result::low reads them) in lower-case hex."""
    with open(path, "rb") as f:
        digest = hashlib.md5(f.read()).digest()
    return f"_{int.from_bytes(digest[:8], 'little'):x}"


def relocatable_link(argv_for, images: list, output: str, workdir: str) -> None:
    """The `-r` link into `output` (`argv_for(added)`: its command line, the link as given
    with the offload driver words dropped, writing `output`, with `added`), with the
    registration of `images` (one, of one CPU target), then the entries made private (module
    text)."""
    (image,) = images
    triple = image.target.name.split("-", 1)[1]
    argv = argv_for([])
    obj = registration_object(argv[0], image.data, triple, workdir)
    argv = argv_for([obj])
    runner.run(argv, "the relocatable link")
    tail = suffix(output)
    runner.run([tool(argv[0], "llvm-objcopy"), output, "--remove-section", SECTION,
                "--rename-section", f"{ENTRIES}={ENTRIES}{tail}",
                "--redefine-sym", f"__start_{ENTRIES}=__start_{ENTRIES}{tail}",
                "--redefine-sym", f"__stop_{ENTRIES}=__stop_{ENTRIES}{tail}"],
               "the relocatable link's entries renaming")
