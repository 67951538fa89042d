"""clang-nvlink-wrapper's device link (clang 21+, NVIDIA), with its device-runtime part kept in
the cache: a relink runs nvlink alone.

The wrapper (clang/tools/clang-nvlink-wrapper, LLVM 22) does three things. It reads the symbols
of every input (the CUs' cubins) and takes from the `-l` archives (libompdevice.a) the bitcode
members that define what the cubins leave undefined; it runs one LTO of those members, whose
symbol resolutions come from the names the cubins carry (a name any cubin has is kept visible),
and `ptxas` on its output; then `nvlink` over that cubin and a `.cubin` copy of each input, with
its own words (`-arch`, `-L`, ...). `--dry-run` does the first and prints the `ptxas` and
`nvlink` commands instead of running them; with `--save-temps` its files are kept in the
working directory, named by their stems.

So the runtime's cubin depends on the wrapper, its words, the archives' content, `ptxas`, and the
symbol tables of the inputs in order (names, binding, section; not the code). A link whose part
is not in the cache runs the wrapper as it is, and beside the host link (Cache.do_later) asks
the wrapper's `--dry-run --save-temps` for the same link, runs its `ptxas` line and keeps the
runtime's cubin with the `nvlink` line's words under those. A later link whose CUs changed code
but not their symbols (the edit, compile, link loop) runs that `nvlink` line alone: LLVM 22's
wrapper and nvlink run that way give the same image, byte for byte (benchmarks/clang/
RESULTS.md, and tests). Reading 31 inputs of 200 KB and its LTO cost the wrapper ~70-90 ms of a
~120 ms device link. A job of another shape (another input, an option word with a space, which
the wrapper prints unquoted, more than one ptxas line) is run as it is, every time.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ... import run as runner
from ...elf import ELF_MAGIC, ET_REL, SHT_SYMTAB, SYMBOL_ENTRY, ElfFile
from ...errors import FormatError

if TYPE_CHECKING:
    from ...cache.store import Cache
    from ...plugins import CompiledCU

RT = "\0runtime\0"  # the runtime's cubin in a kept nvlink command
OUT = "\0output\0"  # the image
INPUTS = "\0inputs\0"  # the objects' cubins, in order
# The wrapper's options whose value is the next word (NVLinkOpts.td, LLVM 22), and the
# spellings of its output and library options other than -o, -L and -l (not taken here: the
# library search is modelled on those three)
_VALUED = frozenset(("-arch", "--arch", "-L", "-l", "-mllvm", "--feature", "-feature"))
_OTHER_SPELLINGS = ("--output-file", "--library", "-library")


def run(cache: Cache, words: list[str], compiled: Sequence[CompiledCU], what: str) -> bool:
    """Run the wrapper's job `words` for the image of `compiled` through the kept runtime part;
    False (nothing run) where the job is not one this module can run, or its part is not in the
    cache yet: the wrapper then runs as it is, and its part is made beside the host link."""
    objects = [c.object_path for c in compiled]
    shape = _shape(words, objects)
    ptxas = _program("ptxas", shape[0]) if shape is not None else None
    if shape is None or ptxas is None:
        return False
    options, output = shape
    if not (cache.knows_tool(words[0]) and cache.knows_tool(ptxas)):
        # (a tool the cache does not know keys nothing in it: its `--version` runs later too)
        cache.do_later(lambda: remember(cache, words[0], ptxas, options, objects, output))
        return False
    key = _key(cache, words[0], ptxas, options, objects)
    if key is None:
        return False
    entry = cache.get(key, count=False)  # not the image "from cache"
    nvlink = _program("nvlink", options)
    kept = entry.meta.get("nvlink") if entry is not None else None
    if entry is None or nvlink is None or not isinstance(kept, list) \
            or not all(isinstance(w, str) for w in kept):
        cache.do_later(lambda: remember(cache, words[0], ptxas, options, objects, output, key))
        return False
    folder = _folder(output, "nvlink-wrapper")
    runtime = os.path.join(folder, "runtime.cubin")
    if entry.data:
        with open(runtime, "wb") as f:
            f.write(entry.data)
    runner.run([nvlink, *_filled(kept, runtime, output, _cubins(objects, folder))], what)
    return True


def _folder(output: str, name: str) -> str:
    folder = os.path.join(os.path.dirname(output), name)
    os.makedirs(folder, exist_ok=True)
    return folder


def _shape(words: list[str], objects: list[str]) -> tuple[list[str], str] | None:
    """The wrapper's options (its words less `-o OUT` and the objects, which are its only
    inputs, once each, in order) and the image's path; None for another job."""
    if os.path.basename(words[0]) != "clang-nvlink-wrapper" or not objects:
        return None
    options: list[str] = []
    output = ""
    inputs: list[str] = []
    wanted = set(objects)
    i = 1
    while i < len(words):
        w = words[i]
        if w == "-o" and i + 1 < len(words):
            output = words[i + 1]
            i += 2
            continue
        if w in wanted:
            inputs.append(w)
        elif w in ("--dry-run", "--save-temps", "-v", "--verbose") or w.startswith("@") \
                or w.startswith(_OTHER_SPELLINGS) \
                or any(c.isspace() for c in w):  # (the wrapper prints its commands unquoted)
            return None
        elif w in _VALUED and i + 1 < len(words):
            options += [w, words[i + 1]]
            i += 1
        elif not w.startswith("-"):
            return None  # an input of its own (a user's cubin or archive)
        else:
            options.append(w)
        i += 1
    return (options, output) if output and inputs == objects else None


def _key(cache: Cache, wrapper: str, ptxas: str, options: list[str],
         objects: list[str]) -> str | None:
    """The runtime part's key: the wrapper and ptxas, the wrapper's options, the content of the
    archives its `-l` words find and of any file its words name, and each input's symbol
    table; None where one cannot be read (the wrapper then runs, and says why)."""
    tools = [cache.tool_identity(wrapper), cache.tool_identity(ptxas)]
    if None in tools:
        return None
    files = []
    for path in [*_libraries(options), *(w for w in options if os.path.isfile(w))]:
        if path is None:
            return None
        try:
            with open(path, "rb") as f:
                files.append(f"{path}\0{hashlib.sha256(f.read()).hexdigest()}")
        except OSError:
            return None
    h = hashlib.sha256()
    for path in objects:
        try:
            with open(path, "rb") as f:
                data = f.read()
            digest = symbol_digest(data, path)
        except (OSError, FormatError):
            return None
        if digest is None:
            return None
        h.update(digest)
    return cache.key("nvlink-wrapper runtime", *tools, "\0".join(options), *files,
                     h.hexdigest())


def symbol_digest(data: bytes, path: str) -> bytes | None:
    """What the wrapper reads of an input: its symbols' names, binding, type, visibility and
    section (not their values or sizes: a CU's code may change under the same symbols), as a
    digest; None for an input that is not an ELF relocatable."""
    if not data.startswith(ELF_MAGIC):
        return None
    elf = ElfFile(data, path)
    if elf.e_type != ET_REL:
        return None
    h = hashlib.sha256()
    h.update(bytes(elf.content(elf.sections[elf.e_shstrndx])))  # the section symbols' names
    for s in elf.sections:
        if s.sh_type == SHT_SYMTAB:
            table = bytes(elf.content(s))
            if len(table) % SYMBOL_ENTRY.size:
                return None
            # each Elf64_Sym's first 8 bytes (st_name, st_info, st_other, st_shndx) of 24
            h.update(array("Q", table)[0::3].tobytes())
            h.update(bytes(elf.content(elf.sections[s.sh_link])))
    return h.digest()


def _libraries(options: list[str]) -> list[str | None]:
    """The archive each `-l` word finds in the `-L` folders, as the wrapper searches them
    (`lib<name>.a`; `-l:<file>`), None for one it does not find. `options` are _shape's: an
    option of _VALUED is followed by its value (an `-mllvm -L...` names no folder)."""
    dirs = []
    names = []
    i = 0
    while i < len(options):
        w = options[i]
        pair = w in _VALUED and i + 1 < len(options)
        value = options[i + 1] if pair else w[2:] if w[:2] in ("-L", "-l") else ""
        if w[:2] == "-L" and value:
            dirs.append(value)
        elif w[:2] == "-l" and value:
            names.append(value)
        i += 2 if pair else 1
    found: list[str | None] = []
    for name in names:
        base = name[1:] if name.startswith(":") else f"lib{name}.a"
        found.append(next((os.path.join(d, base) for d in dirs
                           if os.path.exists(os.path.join(d, base))), None))
    return found


def _program(name: str, options: list[str]) -> str | None:
    """Where the wrapper finds `name` (its findProgram): in `<--cuda-path>/bin` (`/bin`
    without one), else on PATH."""
    cuda = next((w[len("--cuda-path="):] for w in reversed(options)
                 if w.startswith("--cuda-path=")), "")
    here = os.path.join(cuda + "/bin", name)
    return here if runner.which(here) and not os.path.isdir(here) else runner.which(name)


def _cubins(objects: list[str], folder: str) -> list[str]:
    """A `.cubin` name for each object (nvlink takes a cubin by its suffix): a link to it."""
    out = []
    for k, path in enumerate(objects):
        link = os.path.join(folder, f"{k:04d}.cubin")
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(os.path.abspath(path), link)
        out.append(link)
    return out


def _filled(kept: list[str], runtime: str, output: str, cubins: list[str]) -> list[str]:
    out = []
    for w in kept:
        if w == RT:
            out.append(runtime)
        elif w == OUT:
            out.append(output)
        elif w == INPUTS:
            out += cubins
        else:
            out.append(w)
    return out


def remember(cache: Cache, wrapper: str, ptxas: str, options: list[str], objects: list[str],
             output: str, key: str | None = None) -> None:
    """Keep the runtime part of the wrapper's link of `objects` under its key: the runtime's
    cubin (the wrapper's LTO, as its `--dry-run --save-temps` leaves it, through its `ptxas`
    line) and its `nvlink` line's words. Nothing is kept for a link of another shape."""
    key = key or _key(cache, wrapper, ptxas, options, objects)
    if key is None:
        return
    folder = _folder(output, "nvlink-wrapper-kept")
    stem = "runtime"
    asked = [wrapper, *options, "-o", stem, *(os.path.abspath(o) for o in objects),
             "--dry-run", "--save-temps"]
    said = runner.run(asked, "the device runtime's part of the device link", cwd=folder)
    found = dry_run_jobs(said.stdout.decode(errors="replace"), stem, objects)
    if found is None:
        return
    assemble, kept = found
    data = b""
    if assemble:
        runner.run([ptxas, *assemble], "the device runtime's part of the device link",
                   cwd=folder)
        with open(os.path.join(folder, f"{stem}.cubin"), "rb") as f:
            data = f.read()
    cache.put(key, {"nvlink": kept}, data)


def dry_run_jobs(said: str, stem: str, objects: list[str]
                 ) -> tuple[list[str], list[str]] | None:
    """From what `clang-nvlink-wrapper -o STEM OBJECTS... --dry-run --save-temps` printed: the
    words of its `ptxas` line ([] when its LTO made nothing) and its `nvlink` line's words with
    the runtime's cubin, the image and the objects' copies as RT, OUT and INPUTS; None for
    lines of another shape."""
    jobs = [_job(line) for line in said.splitlines() if line.startswith(' "')]
    lines = [j[1:] for j in jobs if os.path.basename(j[0]) == "ptxas"]
    links = [j for j in jobs if os.path.basename(j[0]) == "nvlink"]
    if len(links) != 1 or len(lines) > 1 or len(jobs) != len(lines) + 1:
        return None
    if lines and (lines[0][-2:] != ["-o", f"{stem}.cubin"] or lines[0][:3] != [
            "-m64", "-c", f"{stem}.s"]):
        return None
    # nvlink's inputs: the runtime's cubin (if the LTO made one), then each object's copy,
    # named by its stem; every other word is the wrapper's, kept as it is (`-o`'s: the image)
    copies = [f"{os.path.splitext(os.path.basename(o))[0]}.cubin" for o in objects]
    link = links[0]
    at = [i for i, w in enumerate(link) if w.endswith(".cubin")]
    if not at or [link[i] for i in at] != ([f"{stem}.cubin"] if lines else []) + copies \
            or at != list(range(at[0], at[0] + len(at))) or len(set(copies)) != len(copies) \
            or link.count("-o") != 1 or link.index("-o") + 1 in at:
        return None
    kept = []
    for i, w in enumerate(link[1:], 1):
        if i == at[-1]:
            kept.append(INPUTS)
        elif i in at:
            if w == f"{stem}.cubin":
                kept.append(RT)
        elif link[i - 1] == "-o":
            kept.append(OUT)
        else:
            kept.append(w)
    return (lines[0] if lines else []), kept


def _job(line: str) -> list[str]:
    """A command the wrapper prints (`"prog" word word...`, words unquoted)."""
    prog, _, rest = line.strip().partition('" ')
    return [prog.lstrip('"'), *rest.split()]
