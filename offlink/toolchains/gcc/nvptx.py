"""The `nvptx-none` target: GCC's own offload objects, compiled one CU at a time.

Input is what `gcc -fopenmp -foffload=nvptx-none -c` writes (offlink/toolchains/gcc/dialect.py reads
it). Each CU goes alone through GCC's accel compiler (`<triple>-accel-nvptx-none-gcc-<major>
-xlto ... -c`, which gives PTX text with its FUNC_MAP/VAR_MAP lines): its lto1 and nvptx-as
are run directly, with the words the driver shows under `-###` (asked once per link), and the
driver itself only where it would run anything else. The per-CU outputs, with
their statics renamed to their qualified keys, are linked by nvptx-none-ld with GCC's device
libgomp, libc and libgcc into one image: PTX files separated by NULs, as mkoffload embeds.
The host link gets `-foffload=disable`, so GCC does not also run its own offload link.

The target keeps one piece of state for a link: the paired entries of every CU, recorded when
the image is linked and used when the host addresses are read from the linked binary.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
import tempfile
from typing import TYPE_CHECKING

from ... import run as runner
from ...cache.keys import file_stamp, key_prefix
from ...elf import ElfFile
from ...errors import ToolError, UsageError
from ...model import Offer
from ...plugins import Target, write_objects
from . import dialect as gcc

if TYPE_CHECKING:
    from ...cache.store import Cache

NAME = gcc.TARGET
MKOFFLOAD_LIBS = ["-lgomp", "-lgcc", "-lc", "-lgcc"]
# GCC 13+: lto1 writes the CU's `omp requires` mask (4 bytes) to the file this names, and is
# fatal without it (lto-cgraph.cc, input_offload_tables); mkoffload sets it per link.
REQUIRES_FILE = "GCC_OFFLOAD_OMP_REQUIRES_FILE"
# The mask, kept at the end of the CU's object (a PTX comment), so that a cached object
# carries it: the registration reads every CU's from the image (gomp.py, cu_masks).
REQUIRES_LINE = "// offlink: omp_requires {:#x}\n"
_REQUIRES_LINE = re.compile(rb"// offlink: omp_requires (0x[0-9a-f]+)\n")
# GCC 14+: the host libraries of a link that have device versions, which the driver hands
# mkoffload as `-l_GCC_NAME` and mkoffload links as `-lNAME` (gcc.cc; nvptx/mkoffload.cc):
# those the link line names and those g++ and gfortran add (GCC 14's g++: -lm; 15+: -lstdc++
# -lm; gfortran: -lgfortran -lm), checked under -save-temps in each release.
GCC_LIBRARIES = {"14": ("gfortran", "m"), "15": ("gfortran", "m", "stdc++"),
                 "16": ("gfortran", "m", "stdc++")}


def device_libraries(plan, release: str) -> list[str]:
    """The `-lNAME` words GCC `release`'s offload link adds to its device link (GCC_LIBRARIES),
    in the order its driver passes them: the link line's, then those its driver adds."""
    libs = GCC_LIBRARIES.get(release, ())
    if not libs or plan is None:
        return []
    args = list(plan.base_args)
    out = [a for a in args if a.startswith("-l") and a[2:] in libs]
    name = os.path.basename(plan.driver)
    if not any(a in ("-nostdlib", "-nodefaultlibs") for a in args):
        if "g++" in name:
            out += [f"-l{n}" for n in ("stdc++", "m") if n in libs]
        elif "gfortran" in name:
            out += ["-lgfortran", "-lm"]
    return list(dict.fromkeys(out))


def mkoffload_library(word: str) -> str:
    """A CU's recorded option as mkoffload passes it to the device link: GCC 14+'s driver
    records a `-lNAME` of the compile line as `-l_GCC_NAME`, which mkoffload links as `-lNAME`
    (nvptx/mkoffload.cc, gcn/mkoffload.cc); any other word as it is."""
    return "-l" + word[len("-l_GCC_"):] if word.startswith("-l_GCC_") else word


def release(cu) -> int:
    """The GCC release of a CU (its accel compiler's), 12 where it does not say."""
    found = gcc.release_of(cu)
    return int(found) if found else 12


def cu_masks(image: bytes, count: int) -> list[int | None]:
    """The `omp requires` mask of each of the first `count` PTX files of an image (one per
    CU, in link order), None for a file without one (GCC 12's)."""
    parts = image.split(b"\0", count)[:count]
    out: list[int | None] = []
    for part in parts:
        m = _REQUIRES_LINE.search(part)
        out.append(int(m.group(1), 16) if m else None)
    return out


class GccNvptxTarget(Target):
    name = NAME
    registration = "gomp"  # libgomp's (gomp.py)
    image_kind = "nvptx-none"
    macro = "__OFFLINK_TARGET_NVPTX_NONE__"
    image_argv_reads_objects = False  # a CU's pairing comes from its offers (_restored)
    image_argv_reads_offers = True
    link_image_reads_objects = False  # it joins the objects' bytes; _run writes the files
    distributable = False
    not_distributable_because = ("its compile is GCC's accel compiler reading LTO bytecode "
                                 "(-xlto), which distcc and sccache run locally")

    def __init__(self) -> None:
        self._links: dict[str, list[tuple[str, str, list[gcc.Entry]]]] = {}
        self._found: set[str] = set()  # compilers found on PATH in this link
        self._argvs: dict[str, list[str]] = {}  # output -> the image link image_argv made
        self._cache: Cache | None = None  # the link's cache, given to prepare_image
        self._exports: dict[str, tuple[bytes, set[str]]] = {}  # link_image's images
        self._objects: dict[str, bytes] = {}  # path -> object, of those compiled (offers)
        self._fat_lto = False  # a CU is -ffat-lto-objects (for_inputs)

    # -- offlink cc ----------------------------------------------------------------------
    def capture_argv(self, compiler, preprocess_args, language, source, output):
        raise UsageError(f"target {NAME} takes GCC's own offload objects: compile with "
                         f"`gcc -fopenmp -foffload={NAME} -c` (no offlink cc needed) and link "
                         f"them with offlink link")

    # -- offlink link --------------------------------------------------------------------
    def source_suffix(self, cu):
        return ".host.o"  # the host object itself: the accel compiler reads its LTO sections

    def compile_argv(self, cu, source, output):
        p = cu.payload
        compiler = p.compiler
        if os.sep not in compiler and compiler not in self._found:
            if runner.which(compiler) is not None:
                self._found.add(compiler)
            else:
                major = compiler.rsplit("-", 1)[-1]
                package = f"gcc-{major}-offload-nvptx" if major.isdigit() else \
                    "gcc-offload-nvptx"
                raise ToolError(f"target compile of {cu.label} for {NAME}: GCC's accel "
                                f"compiler '{compiler}' not found (install {package} and "
                                f"nvptx-tools)")
        driver = compile_driver(cu)
        # GCC 13+'s lto1 writes the CU's `requires` mask where REQUIRES_FILE says (through
        # env: the compiles of a link run in parallel, each with its own file)
        env = ["env", f"{REQUIRES_FILE}={output}.omp_requires"] if release(cu) >= 13 else []
        steps = accel_steps(tuple(driver))
        if steps is None:
            return [*env, *driver, "-c", source, "-o", output]
        # lto1 itself, without the driver between: it writes the PTX beside the object, and
        # offers() assembles it (the driver's second step).
        return [*env, *(source if w == STEP_IN else output + ".s" if w == STEP_ASM else w
                        for w in steps[0])]

    def run_compile(self, children, argv, what):
        return run_compile(children, argv, what)

    def identity_tool(self, cu, argv):
        # The driver names lto1 and nvptx-as and comes in the same package as lto1; hashing
        # lto1 (19 MB) instead would be slow on a link whose cache has not seen it yet.
        return cu.payload.compiler

    def after_compile_argv(self, cu, obj_path):
        if accel_steps(tuple(compile_driver(cu))) is None:
            return []  # compile_argv runs the driver, which assembles too
        return [assemble_argv(cu, obj_path + ".s", obj_path)]  # offers() runs it

    def offers(self, cu, obj_path):
        """The CU's entries, keyed by name. This is also the step after the compile: the
        object's statics are renamed to their keys in place, before a compile cache stores
        the object, so a cached object and its offers always agree (ptxas checks the ISA
        in prepare_image, for cached objects too)."""
        if os.path.exists(obj_path + ".s"):  # lto1 ran alone (compile_argv): assemble
            assemble(cu, obj_path + ".s", obj_path)
        if release(cu) >= 13:
            keep_mask(cu, obj_path)
        entries, ptx = self._pair(cu, obj_path)
        renames = {e.device_name: e.key for e in entries if e.key != e.device_name}
        if renames:
            renamed = gcc.rename(ptx, renames)
            if renamed != ptx:
                with open(obj_path, "w", encoding="utf-8", errors="surrogateescape") as f:
                    f.write(renamed)
                ptx = renamed
        # The object as the cache will store it, for prepare_image and link_image (which
        # would otherwise read every file compiled in this link again).
        self._objects[obj_path] = ptx.encode("utf-8", "surrogateescape")
        return tuple(Offer(e.key, e.kind, e.host.size, e.host.strong) for e in entries)

    def image_argv(self, plan, compiled, output):
        cus: list[tuple[str, str, list[gcc.Entry]]] = []
        link_opts: list[str] = []
        for c in compiled:
            for o in c.cu.payload.options:
                o = mkoffload_library(o)
                if o.startswith(("-l", "-L")) and o not in link_opts:
                    link_opts.append(o)
            # From the offers (cached ones too): a relink reads no CU's PTX to find its image.
            entries = _restored(c)
            if entries is None:
                write_objects([c])  # a cached object is read only here
            if entries is None and os.path.exists(c.object_path):  # not under --dry-run
                entries = self._pair(c.cu, c.object_path)[0]
            if entries is not None:
                cus.append((c.cu.label, c.cu.payload.source, entries))
        if compiled:
            link_opts += [o for o in device_libraries(plan, str(release(compiled[0].cu)))
                          if o not in link_opts]
        self._links[output] = cus
        lib = _library_dir(tuple(compile_driver(compiled[0].cu))) if compiled else ""
        # OpenMP's libraries come from the -mgomp multilib first; OpenACC's from the folder
        # alone (mkoffload's collect2 line for each).
        acc = bool(compiled) and gcc.is_openacc(compiled[0].cu.payload.options)
        dirs = ([] if acc else [f"-L{os.path.join(lib, 'mgomp')}"]) + [f"-L{lib}"] if lib \
            else []
        argv = ["nvptx-none-ld", "-o", output, *dirs, *(c.object_path for c in compiled),
                *link_opts, *MKOFFLOAD_LIBS]
        self._argvs[output] = argv
        return argv

    def prepare_image(self, plan, compiled, workdir, cache):
        """Whether ptxas accepts every CU's ISA and PTX version, once per preamble (the
        cache remembers what a ptxas accepted, so a relink runs none)."""
        self._cache = cache
        preambles: dict[bytes, str] = {}
        for c in compiled:
            m = _PREAMBLE.search(self._object(c))
            if m is not None:
                preambles.setdefault(m.group(0), c.cu.label)
        for preamble, label in preambles.items():
            check_ptx(label, preamble.decode("utf-8", "replace"), cache)

    def link_image(self, argv, output, compiled):
        """nvptx-none-ld's image, with the part its libraries add taken from the cache when
        an earlier link had the same one (a relink after one CU changed, usually).

        nvptx-none-ld writes each object as it is, each followed by a NUL, then the library
        members the objects need (nvptx-ld.cc): which members, and in which order, follows
        from the `// BEGIN GLOBAL` lines of the objects alone, in order (what they define and
        declare). So the libraries' part is that of a link of one file holding just those
        lines (`symbol_lines`), kept in the cache by those lines, the libraries and the
        linker; the image is the objects, NUL after each, then that part. Reading the
        libraries (~3.5 MB of archives) was most of the link's time. A cached object is
        taken from its CompiledCU, not read from its file."""
        cache = self._cache
        objects = _image_objects(argv, compiled) if self._argvs.get(output) == argv else None
        if cache is None or objects is None:
            return self._run(argv, output, compiled)
        data = [self._object(c) for c in compiled]
        if any(b"\0" in d or d.startswith(b"!<arch>\n") for d in data):
            return self._run(argv, output, compiled)  # as nvptx-none-ld sees them
        stub = b"".join(symbol_lines(d) for d in data) + b"\n"
        key = _libraries_key(cache, argv, objects, stub)
        hits = cache.hits
        entry = cache.get(key) if key is not None else None
        cache.hits = hits  # not the image's entry ("image from cache")
        defines = entry.meta.get("defines") if entry is not None else None
        if entry is not None and isinstance(defines, list):
            part = entry.data
        else:
            part = _libraries_part(argv, objects, output, stub)
            if part is None:
                return self._run(argv, output, compiled)  # reports its error
            defines = sorted(gcc.ptx_definitions(part, after_nul=True))
            if key is not None:
                cache.put(key, {"target": NAME, "defines": defines}, part)
        own = b"".join(d + b"\0" for d in data)
        image = own + part
        with open(output, "wb") as f:
            f.write(image)
        # What the image defines, for exports: the libraries' part's names come with it.
        self._exports[output] = (image, gcc.ptx_definitions(own) | set(map(str, defines)))

    def _object(self, compiled) -> bytes:
        """A compiled CU's object: the cache's bytes, those offers() left, or its file."""
        if compiled.data is not None:
            return compiled.data
        found = self._objects.get(compiled.object_path)
        return found if found is not None else _read_bytes(compiled.object_path)

    def _run(self, argv, output, compiled) -> None:
        """The image link run as its command, which reads every object's file."""
        write_objects(compiled)
        try:
            super().link_image(argv, output, compiled)
        except ToolError as e:
            said = explain(e, argv, [(c.cu.label, self._object(c)) for c in compiled],
                           GCC_LIBRARIES.get(getattr(self, "release", "12"), ()))
            if said is None:
                raise
            raise said from None

    def exports(self, image, path):
        made = self._exports.pop(path, None)  # link_image's, for the image it wrote
        if made is not None and made[0] == image:
            return made[1]
        return gcc.ptx_definitions(image)

    def for_inputs(self, cus, plan=None):
        self.release = str(release(cus[0])) if cus else "12"  # one per link (dialect.select)
        # GCC 12's mkoffload builds an image for OpenMP or for OpenACC, never both: the merged
        # options of a program with both say neither ("either '-fopenacc' or '-fopenmp' must
        # be set"), and its compile of each differs (-mgomp and its multilib for OpenMP only).
        kinds: dict[bool, str] = {}
        for cu in cus:
            kinds.setdefault(gcc.is_openacc(cu.payload.options), cu.label)
        if len(kinds) > 1:
            raise UsageError(f"{kinds[True]} is OpenACC (-fopenacc) and {kinds[False]} OpenMP "
                             f"(-fopenmp): GCC {self.release}'s offload link builds an image "
                             f"for one of them per program (its mkoffload: \"either "
                             f"'-fopenacc' or '-fopenmp' must be set\"), and so does offlink")
        # -ffat-lto-objects CUs linked without -flto: GCC's linker plugin still links their
        # GIMPLE (statics become `x.lto_priv.N`, the host tables are rewritten), unless the
        # link says -fno-lto; offlink read the tables of their code, so that is what is linked.
        self._fat_lto = any(getattr(cu, "fat_lto", False) for cu in cus)  # GccCU's
        return self

    def host_link_args(self, plan) -> list[str]:
        # GCC would otherwise run mkoffload and its own offload link of every CU again.
        driver = os.path.basename(plan.driver)
        if "clang" in driver or driver == "ld" or driver.startswith("ld."):
            return []
        fat = ["-fno-lto"] if self._fat_lto and not plan.lto else []
        return ["-foffload=disable", *fat]

    def host_addresses(self, elf, image):
        placed = gcc.place(elf, self._links.get(image.path, []))
        return {key: (p.address, p.size, p.kind) for key, p in placed.items()}

    def link_entries(self, image_path: str) -> list[tuple[str, str, list[gcc.Entry]]]:
        """(label, source, paired entries) of every CU of the image linked at `image_path`,
        in link order (toolchains/gcc/gomp.py names the host table's slots with them)."""
        return self._links.get(image_path, [])

    def _pair(self, cu, obj_path: str) -> tuple[list[gcc.Entry], str]:
        with open(obj_path, encoding="utf-8", errors="surrogateescape") as f:
            ptx = f.read()
        hosts, functions = _host_side(cu)
        entries = gcc.pair(list(hosts), ptx, _tag(cu), cu.label, set(functions))
        return entries, ptx


# nvptx-none-ld's process_refs_defs: a line after a newline, its rest says whether it defines or
# declares a function or variable, and which (the name runs to the end of the line).
_GLOBAL_LINE = re.compile(rb"\n// BEGIN GLOBAL [^\n]*")


def symbol_lines(ptx: bytes) -> bytes:
    """The lines of an object nvptx-none-ld reads for its symbols, each with the newline
    before it, in order."""
    return b"".join(_GLOBAL_LINE.findall(ptx))


def run_compile(children, argv: list[str], what: str) -> str:
    """Run a compile command, one that starts `env REQUIRES_FILE=PATH` (GCC 13+: shown so,
    and keyed so, as a shell would run it) as the command after those words in offlink's
    environment with REQUIRES_FILE added: the same run without /usr/bin/env's process
    before each CU's lto1 (benchmarks/gcc_offload/RESULTS.md)."""
    if len(argv) > 2 and argv[0] == "env" and argv[1].startswith(REQUIRES_FILE + "="):
        return children.run(argv[2:], what,
                            env={**os.environ, REQUIRES_FILE: argv[1].partition("=")[2]})
    return children.run(argv, what)


def written_mask(cu, obj_path: str, target: str = NAME) -> int:
    """The CU's `requires` mask, which lto1 wrote beside its object (REQUIRES_FILE); an error
    naming the CU and the target where lto1 wrote none."""
    try:
        with open(obj_path + ".omp_requires", "rb") as f:
            raw = f.read()
    except OSError:
        raw = b""
    if len(raw) != 4:
        raise ToolError(f"target compile of {cu.label} for {target}: the accel compiler wrote "
                        f"no `omp requires` mask ({REQUIRES_FILE})")
    return int.from_bytes(raw, "little")


def keep_mask(cu, obj_path: str) -> None:
    """The CU's `requires` mask appended to its object (REQUIRES_LINE)."""
    mask = written_mask(cu, obj_path)
    with open(obj_path, "a", encoding="ascii") as f:
        f.write(REQUIRES_LINE.format(mask))


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _image_objects(argv: list[str], compiled) -> tuple[int, int] | None:
    """(index, count) of the objects in the image link `argv`, when every other word after
    `-o OUT` is `-L<dir>` or `-l<name>` and the objects are the CUs', in order: then
    link_image may put the image together itself. None otherwise."""
    paths = [c.object_path for c in compiled]
    if not paths or argv[1:2] != ["-o"] or paths[0] not in argv:
        return None
    start = argv.index(paths[0])
    if argv[start:start + len(paths)] != paths:
        return None
    others = argv[3:start] + argv[start + len(paths):]
    if not all(len(w) > 2 and w[:2] in ("-L", "-l") for w in others):
        return None
    return start, len(paths)


def _libraries_key(cache: Cache, argv: list[str], objects: tuple[int, int],
                   stub: bytes) -> str | None:
    """The cache key of the libraries' part: the objects' symbol lines, the linker, the
    options (library folders and names) and the archives they find (by stat stamp, as
    nvptx-none-ld finds them: `lib<name>.a` in the first folder that has it). None when the
    linker or an archive is not found (the link reports it)."""
    linker = cache.tool_identity(argv[0])
    if linker is None:
        return None
    start, count = objects
    options = argv[3:start] + argv[start + count:]
    dirs = [w[2:] for w in options if w.startswith("-L")]
    h = key_prefix(cache.code_identity(), "nvptx-none-ld libraries", linker,
                   "\0".join(options), hashlib.sha256(stub).digest())
    for name in dict.fromkeys(w[2:] for w in options if w.startswith("-l")):
        for d in dirs:
            try:
                st = os.stat(f"{d}/lib{name}.a")
            except OSError:
                continue
            h.update(f"\0{d}/lib{name}.a\0{file_stamp(st)}".encode())
            break
        else:
            return None
    return h.hexdigest()


def _libraries_part(argv: list[str], objects: tuple[int, int], output: str,
                    stub: bytes) -> bytes | None:
    """What nvptx-none-ld adds after the objects, from a link of `stub` (the objects'
    symbol lines) in their place; None if that link fails (the real one then reports it)."""
    start, count = objects
    stub_path, part_path = output + ".symbols", output + ".libraries"
    with open(stub_path, "wb") as f:
        f.write(stub)
    try:
        runner.run([argv[0], "-o", part_path, *argv[3:start], stub_path, *argv[start + count:]],
            f"device link for target {NAME}: its libraries")
        out = _read_bytes(part_path)
    except (ToolError, OSError):
        return None
    finally:
        for p in (stub_path, part_path):
            if os.path.exists(p):
                os.unlink(p)
    return out[len(stub) + 1:] if out.startswith(stub + b"\0") else None


def _host_side(cu) -> tuple[tuple[gcc.HostEntry, ...], frozenset[str]]:
    """The CU's host table entries and external functions: read at extract for a GccCU."""
    if isinstance(cu, gcc.GccCU) and cu.host_entries is not None:
        return cu.host_entries, cu.global_functions

    host = ElfFile(cu.payload.code, cu.origin)
    return tuple(gcc.host_tables(host)), frozenset(gcc.global_functions(host))


def _tag(cu) -> str:
    if isinstance(cu, gcc.GccCU) and cu.tag:  # made at extract, or kept by a relink's record
        return cu.tag
    return gcc.cu_tag(cu.payload.source, cu.payload.code)


def _restored(compiled) -> list[gcc.Entry] | None:
    hosts = _host_side(compiled.cu)[0]
    if not compiled.offers and hosts:
        return None
    return gcc.entries_of(hosts, [o.name for o in compiled.offers], _tag(compiled.cu))


def compile_driver(cu) -> list[str]:
    """The accel compiler's driver command for one CU, up to `-c IN -o OUT`."""
    compile_opts = [o for o in cu.payload.options if not o.startswith(("-l", "-L"))]
    # -mgomp (OpenMP's multilib) for OpenMP only: lto1 refuses it with -fopenacc, and
    # mkoffload leaves it out there. GCC 15+'s mkoffload adds -mfake-exceptions always.
    gomp = [] if gcc.is_openacc(cu.payload.options) else ["-mgomp"]
    if release(cu) >= 15:
        gomp.append("-mfake-exceptions")
    # No -misa: the release's own default ISA, as in GCC's own link (sm_30 for 12-14, sm_52
    # for 15-16), unless the options name one. nvptx-as would run ptxas on each CU's output;
    # offlink checks the ISA once (offers).
    return [cu.payload.compiler, "-xlto", "-m64", *gomp, *compile_opts,
            "-Wa,--no-verify"]


# Stand-ins for the CU's files in the driver's `-###` commands (accel_steps).
STEP_IN = "offlink-step-in.o"
STEP_OUT = "offlink-step-out.o"
STEP_ASM = "offlink-step-out.s"
_DUMP_OPTIONS = ("-dumpdir", "-dumpbase", "-dumpbase-ext")  # names of dump files only


@functools.cache
def accel_steps(driver: tuple[str, ...]) -> tuple[list[str], list[str]] | None:
    """The two commands the accel compiler's driver runs to compile one CU (`driver` is its
    command up to `-c IN -o OUT`): lto1 writing PTX, then nvptx-as turning that into the
    object, with STEP_IN, STEP_ASM and STEP_OUT for the files. None when the driver would run
    anything else or cannot say (then the driver runs, as before).

    Asked once per link and set of options (`-###`: the driver runs nothing), so the driver's
    own start and its option handling are paid once, not per CU; lto1 and
    nvptx-as get the words the driver would give them, less the names of dump files."""
    shown = _shown(driver)
    if shown is None:
        return None
    commands = [_driver_words(line) for line in shown.splitlines() if line.startswith(" ")]
    if len(commands) != 2 or not all(commands):
        return None
    lto1, asm = commands
    if (os.path.basename(lto1[0]) != "lto1" or os.path.basename(asm[0]) != "as"
            or lto1[-2] != "-o" or lto1.count(STEP_IN) != 1 or asm[-1] != lto1[-1]
            or asm[-3:-1] != ["-o", STEP_OUT]):
        return None
    kept = []
    words = iter(lto1[:-1])
    for w in words:
        if w in _DUMP_OPTIONS:
            next(words, None)
        else:
            kept.append(w)
    return [*kept, STEP_ASM], [*asm[:-1], STEP_ASM]


@functools.cache
def _shown(driver: tuple[str, ...]) -> str | None:
    """What the driver shows under `-###` for one CU's compile (it runs nothing), asked once
    per link and set of options; None if it fails."""
    try:
        out = runner.run([*driver, "-c", STEP_IN, "-o", STEP_OUT, "-###"], f"{driver[0]} -###")
    except ToolError:
        return None
    return out.stdout.decode(errors="replace")


def _library_dir(driver: tuple[str, ...]) -> str:
    """accel_libdir without a run of its own where the driver's `-###` (which the CUs'
    compile commands have asked already) says the same: its LIBRARY_PATH is that folder's
    `mgomp` multilib, then the folder, and the folder holds libgomp.a (what
    `-print-file-name=libgomp.a` then finds first)."""
    shown = _shown(driver) or ""
    found = [line[len("LIBRARY_PATH="):] for line in shown.splitlines()
             if line.startswith("LIBRARY_PATH=")]
    dirs = list(dict.fromkeys(d.rstrip("/") for d in (found[-1] if found else "").split(":")
                              if d.rstrip("/")))
    if (len(dirs) == 2 and dirs[0] == os.path.join(dirs[1], "mgomp")
            and os.path.isabs(dirs[1]) and os.path.isfile(os.path.join(dirs[1], "libgomp.a"))):
        return dirs[1]
    return accel_libdir(driver[0])


def _driver_words(line: str) -> list[str]:
    """The words of one command the driver shows under `-###`: separated by spaces, a word
    with other characters than [A-Za-z0-9_/.-] in double quotes with `"`, `\\` and `$`
    escaped by a backslash (gcc.cc, execute())."""
    words = []
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"|(\S+)', line):
        words.append(re.sub(r"\\(.)", r"\1", m.group(1)) if m.group(2) is None
                     else m.group(2))
    return words


def assemble_argv(cu, asm: str, output: str) -> list[str]:
    """nvptx-as, as the driver runs it after lto1 (accel_steps), without verification:
    offlink checks the ISA with ptxas once per link (check_ptx)."""
    steps = accel_steps(tuple(compile_driver(cu)))
    if steps is None:
        raise ToolError(f"target compile of {cu.label} for {NAME}: '{cu.payload.compiler} "
                        f"-###' no longer names its assembler")
    return [output if w == STEP_OUT else asm if w == STEP_ASM else w for w in steps[1]]


def assemble(cu, asm: str, output: str) -> None:
    runner.run(assemble_argv(cu, asm, output),
               f"target compile of {cu.label} for {NAME}: assembling")


@functools.cache
def accel_libdir(compiler: str) -> str:
    """Where the accel compiler keeps libgomp.a (its `mgomp` multilib is a folder below)."""
    try:
        out = runner.run([compiler, "-print-file-name=libgomp.a"], f"{compiler} -print-file-name")
    except ToolError:
        return ""
    path = out.stdout.decode().strip()
    return os.path.dirname(path) if os.path.isabs(path) else ""


# A PTX file's preamble (nvptx-as verifies it like the rest with ptxas).
_PREAMBLE = re.compile(rb"^\s*\.version\s+\S+\s+\.target\s+(sm_\d+)[^\n]*\s+\.address_size\s+\d+",
                       re.M)


def check_ptx(label: str, preamble: str, cache: Cache | None = None) -> None:
    """Whether the installed ptxas accepts a CU's ISA and PTX version (its `preamble`), as
    nvptx-as would find out when verifying; an ISA it refuses gets an error naming the fix.
    One ptxas run per preamble and link (verifying every CU's PTX in full cost more than
    the accel compile itself; the tests compile whole images with ptxas), none where the
    cache remembers that this ptxas (by its identity) accepted it."""
    ptxas = runner.which("ptxas")
    if ptxas is None:
        return  # nvptx-as would not verify either
    text = " ".join(preamble.split())
    key = _accepted_key(cache, ptxas, text) if cache is not None else None
    if cache is not None and key is not None:
        hits = cache.hits
        found = cache.get(key)
        cache.hits = hits  # not the image's entry ("image from cache")
        if found is not None:
            return
    output = _ptxas_refusal(text)
    if output is None:
        if cache is not None and key is not None:
            cache.put(key, {"ptxas accepts": text}, b"")
        return
    isa = text.split(".target", 1)[1].split()[0]
    if re.search(rf"'{isa}' is not defined|[Uu]nsupported \.target", output):
        raise ToolError(f"target code of {label}: the installed ptxas ({ptxas}) does "
                        f"not accept -misa={isa}; pass a newer ISA, e.g. "
                        f"-foffload-options=-misa=sm_80 on the link line", 1, output)
    raise ToolError(f"target code of {label}: the installed ptxas refuses its preamble "
                    f"({preamble.strip().splitlines()[0]} ...)", 1, output)


def _accepted_key(cache: Cache, ptxas: str, preamble: str) -> str | None:
    """The cache key saying that this ptxas accepts `preamble`: the tool by its identity
    (cache.tool_identity, remembered across links by the file's stat stamp, so a relink
    neither hashes nor runs it), None when it is not found."""
    ident = cache.tool_identity(ptxas)
    if ident is None:
        return None
    return hashlib.sha256(f"ptxas accepts\0{ident}\0{preamble}".encode()).hexdigest()


@functools.cache
def _ptxas_refusal(preamble: str) -> str | None:
    """ptxas's complaint about a PTX file with just this preamble; None if it is accepted or
    there is no ptxas (then nvptx-as would not verify either)."""
    ptxas = runner.which("ptxas")
    if ptxas is None:
        return None
    isa = preamble.split(".target", 1)[1].split()[0]
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(preamble.replace(" .", "\n.") + "\n")
        f.flush()
        proc = subprocess.run([ptxas, "--gpu-name", isa, "-c", "-o", os.devnull, f.name],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return None if proc.returncode == 0 else proc.stdout.decode(errors="replace")

# -- device-link errors --------------------------------------------------------------------
#
# nvptx-none-ld's failures said in one line: the symbol, the CUs that need it, and the way out.
#
# nvptx-none-ld prints `unresolved symbol NAME` for each symbol no object or library defines
# (nvptx-ld.cc). A CU needs NAME where its PTX declares it (`// BEGIN GLOBAL ... DECL: NAME`,
# the lines nvptx-none-ld reads); GCC's device libraries that define it (`... DEF: NAME` in the
# archive) name the fix: `-foffload-options=nvptx-none=-lm` as GCC's own link takes it. The whole
# command and the linker's own lines come only under --verbose.

# Device libraries a program may need that GCC's offload link does not add by itself
# (mkoffload links -lgomp -lgcc -lc -lgcc), in the order a fix names them.
OPTIONAL_LIBRARIES = ("m", "atomic", "gfortran")
_UNRESOLVED = re.compile(r"^unresolved symbol (\S+)", re.M)
SHOWN = 3  # symbols named in the line; the rest counted


def explain(error: ToolError, argv: list[str], objects: list[tuple[str, bytes]],
            linked: tuple[str, ...] = ()) -> ToolError | None:
    """The one-line error for a failed device link `argv` whose objects are `objects` (label,
    PTX), or None where nvptx-none-ld said no unresolved symbol (the error stays as it is).
    `linked`: the libraries the release's driver links on the device when the link line
    names them (GCC_LIBRARIES: then `-lm` is the fix, as for the host)."""
    def users(name: str) -> list[str]:
        decl = re.compile(rb"\n// BEGIN GLOBAL (?:FUNCTION|VAR) DECL: " + re.escape(
            name.encode()) + rb"\n")
        return [label for label, ptx in objects if decl.search(ptx)]

    missing = list(dict.fromkeys(_UNRESOLVED.findall(error.output)))
    return missing_symbols(NAME, "unresolved symbol", missing, users,
                           lambda lib, name: _defines(argv, lib, name), error, argv, linked)


def missing_symbols(target: str, said: str, missing: list[str], users, defines,
                    error: ToolError, argv: list[str],
                    linked: tuple[str, ...] = ()) -> ToolError | None:
    """The one line for a device link of `target` that left `missing` undefined (`said`: the
    linker's own words for it): the first SHOWN names, the CUs `users(name)` names, the optional
    GCC device library that `defines(lib, name)` and the option that adds it; the command and
    the linker's lines only under --verbose. None where nothing is missing."""
    if not missing:
        return None
    parts = []
    fixes: list[str] = []
    for name in missing[:SHOWN]:
        who = users(name)
        libs = [lib for lib in OPTIONAL_LIBRARIES if defines(lib, name)]
        fixes += [lib for lib in libs if lib not in fixes]
        where = f"needed by {', '.join(who)}" if who else "needed by a device library"
        parts.append(f"{name} ({where}{f'; in lib{libs[0]}' if libs else ''})")
    more = f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
    fix = (": link with " + " ".join(f"-l{lib}" if lib in linked else
                                     f"-foffload-options={target}=-l{lib}" for lib in fixes)
           if fixes else ": no GCC device library defines it (is it a host-only function "
           "called in a target region?)")
    command = f" [{runner.show(argv)}]" if runner.VERBOSE else ""
    plural = "s" if len(missing) > 1 else ""
    return ToolError(f"device link for target {target}: {said}{plural} "
                     f"{', '.join(parts)}{more}{fix}{command}", error.exit_code,
                     error.output if runner.VERBOSE else "")


def _defines(argv: list[str], lib: str, name: str) -> bool:
    """Whether lib<lib>.a, in the first -L folder of the device link that has it, defines
    `name`."""
    for d in (w[2:] for w in argv if w.startswith("-L")):
        path = os.path.join(d, f"lib{lib}.a")
        if os.path.isfile(path):
            with open(path, "rb") as f:
                data = f.read()
            return re.search(rb"// BEGIN GLOBAL (?:FUNCTION|VAR) DEF: " + re.escape(
                name.encode()) + rb"\n", data) is not None
    return False
