"""clang's OpenMP offload target for NVIDIA GPUs (`openmp-nvptx64-nvidia-cuda`, from objects
made by clang -fopenmp --offload-arch=sm_NN): each CU's cubin, the device runtime's part they
call, nvlink; the image is one cubin, registered with libomptarget (registrations/omptarget.py).

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
A CU carried as bitcode (`-foffload-lto`) is compiled on its own as clang compiles a CU
without -foffload-lto (the device runtime linked in as builtin bitcode, then ptxas -c): no
whole-program device LTO (README: "Where per-CU compilation differs from clang's link").

Tools: llvm-lto2 beside the clang that made the objects; ptxas and nvlink of the CUDA that the
link line's `--cuda-path=` names, else $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, or the one of
the ptxas on PATH (a -foffload-lto CU's compile, which does not see the link line, skips the
first).
"""

from __future__ import annotations

import os
import shlex

from .._records import TYPE_CHECKING
from ..errors import FormatError, LinkError, ToolError
from .openmp import OpenMPTarget, llvm_lib_dir, lto_level_words

if TYPE_CHECKING:
    from ..link.cache import Cache

TRIPLE = "nvptx64-nvidia-cuda"
DEVICE_RUNTIME = "libomptarget.devicertl.a"  # what clang's link passes (-lomptarget.devicertl)


def cu_arch(cu) -> str:
    """The architecture a CU's image was compiled for (its `-march=` option)."""
    return next((o[len("-march="):] for o in cu.payload.options if o.startswith("-march=")), "")


def cuda_home(plan_argv: list[str] | None = None) -> str:
    """The CUDA installation (a folder with bin/ptxas): the link line's last --cuda-path=,
    else $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, else the one of the ptxas on PATH; one clear
    error when there is none."""
    from ..run import which

    homes = [w.split("=", 1)[1] for w in (plan_argv or []) if w.startswith("--cuda-path=")]
    homes = homes[-1:] + [os.environ[v] for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    for home in [*homes, "/usr/local/cuda"]:
        if os.access(os.path.join(home, "bin", "ptxas"), os.X_OK):
            return home
    found = which("ptxas")
    if found:
        return os.path.dirname(os.path.dirname(os.path.realpath(found)))
    raise ToolError(f"target openmp-{TRIPLE}: CUDA's ptxas was not found (give "
                    f"--cuda-path=DIR on the link line, or set CUDA_HOME)")


def cuda_bin(tool: str, plan_argv: list[str] | None = None) -> str:
    """A CUDA tool (ptxas, nvlink) of cuda_home()."""
    path = os.path.join(cuda_home(plan_argv), "bin", tool)
    if not os.access(path, os.X_OK):
        raise ToolError(f"target openmp-{TRIPLE}: CUDA's {tool} was not found ({path})")
    return path


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


def device_runtime(compiler: str, arch: str) -> bytes:
    """The device runtime's bitcode for `arch`: the image of libomptarget.devicertl.a's member
    for nvptx64/arch (as clang-linker-wrapper picks it: by the member's OffloadBinary)."""
    from ..elf import ElfFile, archive_members
    from ..formats.offload_binary import SECTION, parse_binaries

    path = os.path.join(llvm_lib_dir(compiler), DEVICE_RUNTIME)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ToolError(f"target openmp-{TRIPLE}: the device runtime {path}: {e.strerror} "
                        f"(apt-get install libomp-{_major(compiler)}-dev)") from None
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


def resolutions(symtab: list[tuple[str, str]], used: set[str]) -> list[tuple[str, str]]:
    """(name, llvm-lto2 resolution) per symbol of the device runtime, as the wrapper resolves
    them when it is the only bitcode: a definition prevails (p); it stays visible (x) when a
    cubin names it, or when it prevails and is neither hidden nor omittable; a definition that
    is not default-visible is final in the image (l). The rest is internalized."""
    out = []
    for flags, name in symtab:
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


def check_entries(target: str, arch: str, compiled) -> None:
    """Every host-side offload entry of the CUs is defined by one of their cubins (the device
    link would otherwise make an image the runtime cannot find the row in)."""
    offered = {o.name for c in compiled for o in c.offers}
    for c in compiled:
        missing = sorted(set(c.cu.payload.offered) - offered)
        if missing:
            raise LinkError(f"{c.cu.label}: offload entry '{missing[0]}' is not defined by any "
                            f"CU's {arch} cubin (target {target})")


def cubin_names(data: bytes, where: str) -> set[str]:
    """Every symbol name of a cubin (defined or not): what the wrapper's UsedInRegularObj
    collects from a relocatable device object."""
    import struct

    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2:
        raise FormatError(f"{where}: not a 64-bit cubin")
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
    if e_shentsize != 64 or e_shoff + e_shnum * 64 > len(data):
        raise FormatError(f"{where}: truncated cubin (section headers)")
    names: set[str] = set()
    headers = [struct.unpack_from("<IIQQQQII", data, e_shoff + i * 64) for i in range(e_shnum)]
    for _, sh_type, _, _, off, size, link, _ in headers:
        if sh_type != 2 or not 0 < link < e_shnum:  # SHT_SYMTAB
            continue
        str_off, str_size = headers[link][4], headers[link][5]
        if off + size > len(data) or str_off + str_size > len(data):
            raise FormatError(f"{where}: truncated cubin (symbol table)")
        strtab = data[str_off : str_off + str_size]
        for pos in range(off + 24, off + size - 23, 24):
            st_name, = struct.unpack_from("<I", data, pos)
            if st_name and st_name < len(strtab):
                end = strtab.find(b"\0", st_name)
                names.add(strtab[st_name : end if end >= 0 else None].decode(errors="replace"))
    return names


class OpenMPNvptxTarget(OpenMPTarget):
    image_kind = "cubin"
    image_argv_reads_objects = True  # prepare_image reads the cubins' names

    def __init__(self, name: str, arch: str = "sm_80", compiler: str = "clang"):
        super().__init__(name)
        self.arch = arch
        self.compiler = compiler
        self.runtime_cubin = ""  # the device runtime's cubin, made by prepare_image

    def source_suffix(self, cu):
        return ".bc" if cu.payload.code_kind == "llvm-bc" else ".cubin"

    def compile_argv(self, cu, source, output):
        p = cu.payload
        if p.code_kind == "object":
            return []  # clang compiled it to a cubin already, with the device runtime in it
        # -foffload-lto bitcode: compiled on its own as clang compiles a CU without it.
        bc = os.path.join(llvm_lib_dir(p.compiler), f"libomptarget-nvptx-{self.arch}.bc")
        return [p.compiler, f"--target={TRIPLE}", f"-march={self.arch}", f"-O{self.opt_level}",
                "-c", f"--cuda-path={cuda_home()}", "-Xclang", "-mlink-builtin-bitcode",
                "-Xclang", bc,
                "-Wno-unused-command-line-argument", "-x", "ir", source, "-o", output]

    def offers(self, cu, obj_path):
        """The names the CU's host entries register that its cubin defines (kernels, declare
        target variables, indirect functions' pointer cells)."""
        from ..model import Offer
        from .cuda import cubin_symbols

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
        import hashlib

        check_entries(self.name, self.arch, compiled)

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
        res = resolutions(symtab, used)
        # The link line's level, as clang's link LTO-compiles it and runs ptxas; but not -O0:
        # LLVM 19 cannot compile the runtime unoptimized (clang's own -O0 link stops with
        # "LLVM ERROR: Cannot select: ... AtomicStore"), so at -O0 it is compiled at -O1.
        level = max(self.opt_level, 1)
        ident = "\0".join((cache.tool_identity(lto2) or lto2, cache.tool_identity(ptxas) or ptxas)
                          if cache else (lto2, ptxas))
        key = hashlib.sha256("\0".join(["openmp-nvptx-devicertl", self.arch, f"-O{level}", ident,
                                        hashlib.sha256(runtime).hexdigest(),
                                        *(f"{n},{r}" for n, r in res)]).encode()).hexdigest()
        self.runtime_cubin = os.path.join(workdir, f"devicertl-{self.arch}-{key[:16]}.cubin")
        hit = cache.get(key) if cache else None
        if hit is not None:
            with open(self.runtime_cubin, "wb") as f:
                f.write(hit.data)
            return
        from .. import run as runner

        ptx = os.path.join(workdir, f"devicertl-{self.arch}.s")
        # One resolution per symbol: a response file keeps the command line readable.
        rsp = os.path.join(workdir, f"devicertl-{self.arch}.resolutions")
        with open(rsp, "w", encoding="utf-8") as f:
            f.write("".join(f"-r={shlex.quote(f'{bc},{n},{r}')}\n" for n, r in res))
        argv = [lto2, "run", *lto_level_words(level), f"--mcpu={self.arch}", "--filetype=asm",
                bc, "-o", ptx, f"@{rsp}"]
        what = f"compiling the device runtime for target {self.name} ({self.arch})"
        runner.run(argv, what)
        runner.run([ptxas, "-m64", f"-O{level}", "--gpu-name", self.arch, "--output-file",
                    self.runtime_cubin, ptx + ".0", "-c"], what)
        if cache is not None:
            with open(self.runtime_cubin, "rb") as f:
                cache.put(key, {"target": self.name}, f.read())

    @staticmethod
    def _symtab(lto2: str, bc: str, runtime: bytes, cache: Cache | None):
        import hashlib

        from .. import run as runner

        key = hashlib.sha256(b"llvm-lto2 dump-symtab\0" + runtime).hexdigest()
        hit = cache.get(key) if cache else None
        if hit is not None:
            return parse_symtab(hit.data.decode())
        out = runner.run([lto2, "dump-symtab", bc], "reading the device runtime's symbols")
        if cache is not None:
            cache.put(key, {}, out.stdout)
        return parse_symtab(out.stdout.decode())

    def image_argv(self, plan, compiled, output):
        """nvlink of the device runtime's cubin and every CU's, as clang's link runs it. nvlink
        reads a file as a cubin by its `.cubin` suffix, hence the links to each CU's object."""
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
                                  llvm_lib_dir(self.compiler), *cubins]))
        return ["sh", "-ec", "\n".join(script)]

    def exports(self, image, path):
        from .cuda import cubin_symbols

        return set(cubin_symbols(image, path))
