"""`offlink extract`: write target images out of linked binaries, fat objects and archives.

What a file holds, as `llvm-objdump --offloading` and `clang-offload-packager` users expect:
- a binary linked by offlink: one image per target of its `.openmp_target` table;
- an object made by `offlink cc`: each CU's target code (preprocessed source, bitcode, an
  object), one per `gnu.target_lto_<target>` record;
- GCC's `-foffload=nvptx-none` object: its `.gnu.offload_lto_*` sections as an object of their
  own, what GCC's accel compiler reads (`-xlto`);
- clang's objects and binaries: every image of their `.llvm.offloading` OffloadBinaries;
- an archive: the same for each member, named with the member.
Everything is read and selected before anything is written; the files are written whole.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial

from .. import run as runner
from ..elf import ET_DYN, ET_EXEC, ET_REL, ElfFile, elf_files, elf_type
from ..errors import FormatError, UsageError
from ..formats import GCC_OFFLOAD_SECTION_PREFIX, PAYLOAD_SECTION_PREFIX
from ..formats.fatbin import FATBIN_ELF, fatbin_entries
from ..formats.offload_binary import SECTION as LLVM_SECTION
from ..formats.offload_binary import parse_binaries
from ..formats.payload import parse_records
from ..formats.table import PTX_TEXT_KINDS
from ..formats.table import SECTION as TABLE_SECTION
from ..link.staging import WorkFolder, write_all
from ..table import Table
from ..toolchains import binaries, resolve

# Image kinds (the table's, OffloadBinary's) and payload code kinds -> a file name suffix.
SUFFIXES = {"shared-object": ".so", "cubin": ".cubin", "fatbin": ".fatbin",
            **{kind: ".ptx" for kind in PTX_TEXT_KINDS}, "bc": ".bc", "llvm-bc": ".bc",
            "object": ".o", "c": ".i", "c++": ".ii", "cuda": ".cu.ii"}
_ELF_SUFFIXES = {ET_REL: ".o", ET_EXEC: ".elf", ET_DYN: ".so"}


@dataclass(frozen=True)
class Image:
    """One image found in an input, with what a selection and a file name need."""

    file: str  # the input as named on the command line
    member: str  # the archive member, or ""
    target: str  # offlink's target name (`openmp-<triple>` for clang's OpenMP images)
    triple: str
    archs: tuple[str, ...]  # those its producer recorded (none when it did not say)
    suffix: str
    source: bytes | Callable[[], bytes]  # the image, or how to make it (when selected)

    @property
    def data(self) -> bytes:
        return self.source() if callable(self.source) else self.source

    @property
    def origin(self) -> str:
        return f"{self.file}({self.member})" if self.member else self.file


# -- reading ---------------------------------------------------------------------------------

def images_of(path: str) -> list[Image]:
    """Every image in one input, in file order (archive members in archive order)."""
    return [img for member, elf in elf_files(path) for img in _images_of_elf(elf, path, member)]


def _images_of_elf(elf: ElfFile, path: str, member: str) -> list[Image]:
    out: list[Image] = []
    names = [s.name for s in elf.sections]
    if elf.e_type != ET_REL and TABLE_SECTION in names:
        out += _table_images(elf, path, member)
    if elf.e_type == ET_REL:
        for section in elf.sections:
            if section.name.startswith(PAYLOAD_SECTION_PREFIX):
                out += _payload_images(elf, section, path, member)
        if any(n.startswith(GCC_OFFLOAD_SECTION_PREFIX) for n in names):
            out.append(_gcc_image(elf, path, member))
    for section in elf.sections:
        if section.name == LLVM_SECTION:
            out += _offload_binary_images(elf, section, path, member)
    if elf.e_type != ET_REL and TABLE_SECTION not in names:
        out += _toolchain_images(elf, path, member)
    return out


def _toolchain_images(elf: ElfFile, path: str, member: str) -> list[Image]:
    """The images of GCC's own link (mkoffload's PTX, one text per CU, NUL-separated, as
    offlink's nvptx-none image; its amdgcn code object), as `inspect` reads them, and of
    nvcc's (.nv_fatbin); clang's are its OffloadBinaries."""
    out = []
    for o in binaries.read(elf):
        for img in o.images:
            target = binaries.module(o.toolchain).extract_target(img)
            if target is None:
                continue
            suffix = SUFFIXES.get(img.kind, ".bin")
            if img.kind == "elf":
                suffix = _ELF_SUFFIXES.get(elf_type(img.data[:18]) or 0, ".elf")
            out.append(Image(path, member, target, img.triple, img.archs, suffix, img.data))
    return out


def _table_images(elf: ElfFile, path: str, member: str) -> list[Image]:
    """The table's images, each checksum verified."""
    section = elf.section(TABLE_SECTION)
    assert section is not None
    table = Table(bytes(elf.content(section)), section.sh_addr, elf.name)
    out = []
    for t in table.targets:
        image = table.target(t.name).image  # checks the image's checksum
        triple = t.name.removeprefix("openmp-")
        out.append(Image(path, member, t.name, triple, _image_archs(t.kind, image, elf.name),
                         SUFFIXES.get(t.kind, ".bin"), image))
    return out


def _image_archs(kind: str, image: bytes, where: str) -> tuple[str, ...]:
    """The GPU architectures of a CUDA fatbin (sm_NN for code, compute_NN for PTX)."""
    if kind != "fatbin":
        return ()
    return tuple(dict.fromkeys(f"{'sm' if e.kind == FATBIN_ELF else 'compute'}_{e.sm}"
                               for e in fatbin_entries(image, where)))


def _payload_images(elf: ElfFile, section, path: str, member: str) -> list[Image]:
    """Each `offlink cc` record's target code, as the target compiler reads it."""
    where = f"{elf.name}: section {section.name}"
    out = []
    for p in parse_records(bytes(elf.content(section)), where):
        if PAYLOAD_SECTION_PREFIX + p.target != section.name:
            raise FormatError(f"{where}: payload is for target {p.target}")
        archs = binaries.module("cuda").payload_archs(p.options)
        out.append(Image(path, member, p.target, p.target, archs,
                         SUFFIXES.get(p.code_kind, ".bin"), p.code))
    return out


def _gcc_image(elf: ElfFile, path: str, member: str) -> Image:
    """GCC's offload LTO sections as an object of their own, what GCC's accel compiler
    compiles (`-xlto`)."""
    target, archs = binaries.module("gcc").object_image(elf)
    return Image(path, member, target, target, archs, ".o", partial(_gcc_sections, elf))


def _gcc_sections(elf: ElfFile) -> bytes:
    """The object with only its `.gnu.offload_lto_*` sections (objcopy keeps them); run only
    for an object whose image is selected."""
    work = WorkFolder(keep=False, kind="extract")
    try:
        whole, only = os.path.join(work.path, "in.o"), os.path.join(work.path, "out.o")
        with open(whole, "wb") as f:
            f.write(elf.data)
        runner.run(["objcopy", "--wildcard", "-j", GCC_OFFLOAD_SECTION_PREFIX + "*", whole,
                    only], f"taking GCC's offload sections out of {elf.name}")
        with open(only, "rb") as f:
            return f.read()
    finally:
        work.close()


def _offload_binary_images(elf: ElfFile, section, path: str, member: str) -> list[Image]:
    """Every image of clang's OffloadBinaries, whatever its kind (OpenMP, CUDA, HIP)."""
    out = []
    for img in parse_binaries(bytes(elf.content(section)), f"{elf.name}: section "
                                                           f"{section.name}"):
        suffix = SUFFIXES.get(img.image_kind, ".bin")
        if img.image_kind == "elf":
            suffix = _ELF_SUFFIXES.get(elf_type(img.image[:18]), ".elf")
        out.append(Image(path, member, f"{img.offload_kind}-{img.triple}", img.triple,
                         (img.arch,) if img.arch else (), suffix, img.image))
    return out


# -- selecting -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Selection:
    """What `--target`, `--triple`, `--arch` and `--all` ask for; each list: any of them."""

    targets: tuple[str, ...] = ()
    triples: tuple[str, ...] = ()
    archs: tuple[str, ...] = ()
    all: bool = False

    def check(self) -> None:
        if self.all and self.targets:
            raise UsageError("--all and --target go alone (--all takes every target; "
                             "--triple and --arch narrow it)")
        if not (self.all or self.targets or self.triples or self.archs):
            raise UsageError("say which images: --target T, --triple T, --arch A or --all")


def canonical(target: str) -> str:
    """offlink's name for a target given by its alias (`host`, `cuda`)."""
    if ":" in target:
        return target
    try:
        return resolve(target).name
    except UsageError:
        return target


def select(images: Sequence[Image], sel: Selection, inputs: Sequence[str]) -> list[Image]:
    """The images the selection names, in input order. Each value given must match an image
    (a typo is an error, never a silently smaller output), and so must the whole."""
    wanted = [canonical(t) for t in sel.targets]
    chosen = [img for img in images
              if (not wanted or img.target in wanted)
              and (not sel.triples or img.triple in sel.triples)
              and (not sel.archs or set(img.archs) & set(sel.archs))]
    where = ", ".join(inputs)
    if not images:
        raise FormatError(f"{where}: no target code (no .openmp_target table, offlink cc "
                          f"payload, GCC offload or .llvm.offloading section)")
    for option, values, have in (
            ("target", wanted, {i.target for i in chosen}),
            ("triple", sel.triples, {i.triple for i in chosen}),
            ("arch", sel.archs, {a for i in chosen for a in i.archs})):
        for value in values:
            if value not in have:
                raise FormatError(f"{where}: no {option} '{value}'{_narrowed(sel, option)} "
                                  f"({_present(images, option)})")
    return chosen


def _narrowed(sel: Selection, option: str) -> str:
    others = [f"--{o} {v}" for o, vs in (("target", sel.targets), ("triple", sel.triples),
                                         ("arch", sel.archs)) if o != option for v in vs]
    return f" with {' '.join(others)}" if others else ""


def _present(images: Iterable[Image], option: str) -> str:
    if option == "arch":
        found: dict[str, set[str]] = {}
        for i in images:
            if i.archs:
                found.setdefault(i.target, set()).update(i.archs)
        return "archs: " + "; ".join(f"{t}: {', '.join(sorted(a))}" for t, a in found.items()) \
            if found else "no image records an arch"
    values = dict.fromkeys(i.target if option == "target" else i.triple for i in images)
    return f"{option}s: {', '.join(values)}"


# -- naming and writing ----------------------------------------------------------------------

def file_names(images: Sequence[Image]) -> list[str]:
    """`<input>-<member>-<target>-<archs><suffix>` (member and archs only when there are
    some); names that would repeat are numbered in order (`...-0.o`, `...-1.o`)."""
    names = []
    for img in images:
        parts = [os.path.basename(img.file), img.member.replace(os.sep, "_"), img.target,
                 "-".join(img.archs)]
        names.append("-".join(p for p in parts if p))
    full = [n + img.suffix for n, img in zip(names, images)]
    seen: dict[str, int] = {}
    out = []
    for name, whole, img in zip(names, full, images):
        if full.count(whole) > 1:
            seen[whole] = seen.get(whole, -1) + 1
            whole = f"{name}-{seen[whole]}{img.suffix}"
        out.append(whole)
    return out


def extract(inputs: Sequence[str], sel: Selection, output: str | None) -> list[str]:
    """Write the selected images: to `output` (one), into a folder (`output` ends with '/';
    none given: the current folder), or to stdout (`-`, one). Returns the files written."""
    sel.check()
    images = select([img for path in inputs for img in images_of(path)], sel, inputs)
    if output == "-" or (output is not None and not output.endswith(("/", os.sep))):
        if len(images) > 1:
            listed = ", ".join(f"{i.target} of {i.origin}" for i in images)
            to = "stdout" if output == "-" else output
            raise UsageError(f"{len(images)} images match ({listed}); {to} takes one: name "
                             f"a folder (-o DIR/) or narrow the selection")
        if output == "-":
            sys.stdout.flush()
            sys.stdout.buffer.write(images[0].data)
            return []
        paths = [output]
    else:
        paths = [os.path.join(output or "", n) for n in file_names(images)]
    _check_outputs(paths, inputs, output)
    _write(paths, [img.data for img in images], output)
    return paths


def _check_outputs(paths: Sequence[str], inputs: Sequence[str], output: str | None) -> None:
    """An output that is a folder or one of the inputs (by device and inode) is refused
    before anything is written."""
    ids = {}
    for path in inputs:
        st = os.stat(path)
        ids[(st.st_dev, st.st_ino)] = path
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            hint = f" (to write into it: -o {path}/)" if path == output else ""
            raise UsageError(f"{path}: Is a directory{hint}")
        if (st.st_dev, st.st_ino) in ids:
            raise UsageError(f"input file '{ids[st.st_dev, st.st_ino]}' is the same as output "
                             f"file '{path}'")
    folder = os.path.dirname(paths[0]) if paths and output is not None \
        and not output.endswith(("/", os.sep)) else None
    if folder and not os.path.isdir(folder):  # named here, not as write_all's temporary file
        raise UsageError(f"cannot write {paths[0]}: no folder {folder} (-o {folder}/ makes "
                         f"one and writes every image there)")


def _write(paths: Sequence[str], blobs: Sequence[bytes], output: str | None) -> None:
    """All files whole, or none new: a folder `-o DIR/` made here goes again on a failure."""
    folder = output if output is not None and output.endswith(("/", os.sep)) else None
    made = False
    if folder is not None and not os.path.isdir(folder):
        try:
            os.mkdir(folder)
        except OSError as e:
            raise FormatError(f"cannot make {folder}: {e.strerror}") from None
        made = True
    try:
        write_all(list(zip(paths, blobs)), 0o644)
    except BaseException:
        if made:
            try:
                os.rmdir(folder)  # type: ignore[arg-type]
            except OSError:
                pass  # someone else's file is in it now: the error said is write_all's
        raise
