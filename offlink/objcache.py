"""`offlink cc`'s object cache: whole fat objects, keyed as ccache's preprocessor mode keys them.

A warm compile runs the target preprocessing (which `offlink cc` runs anyway), looks the fat
object up by the key below and, on a hit, runs neither the host compile nor objcopy.

The key: this cache's format and offlink's version, the host compiler's and objcopy's identity
(link/cache.py: resolved path, content hash and `--version`, remembered by stat stamp), the
host command with the -o and depfile names taken out, the working folder when debug info is
asked for, the locale and the compiler's search variables, and per target its name, its
options and a SHA-256 of its preprocessed code. The host object is what that code implies only
when the host's preprocessed code is the same text, i.e. when nothing tests the target's
macros: the source and every file its depfile lists are scanned for `__OFFLINK_TARGET`, and a
CU whose files name it is compiled the usual way (so is every CU including offlink.h). What a
scan cannot see: a macro name made by token pasting (`__OFFLINK_ ## TARGET__`) inside `#if`;
such a CU must not be served from this cache (OFFLINK_NO_CACHE=1). As in ccache, a compile
that writes files beside the object or reads files the preprocessor does not (coverage,
profiles, split DWARF, dumps, plugins, `.incbin`, -MMD...) is not cached at all (`refusal`).

Entries sit in the link cache's folder with its trust rules, checksums, atomic writes and size
limit (link/cache.py): the fat object as the data, what the host compile said as metadata.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .compile import CompilePlan
    from .link.cache import Cache

FORMAT = 1
MARK = b"__OFFLINK_TARGET"  # every target's macros start so (__OFFLINK_TARGET__, ..._HOST__)

# Options after which a compile writes files beside the object (or names them after -o), reads
# files the preprocessor does not list, or says something that differs from run to run.
_REFUSED = {"-fprofile-arcs", "--coverage", "-ftest-coverage", "-gsplit-dwarf", "-save-temps",
            "--save-temps", "-fstack-usage", "-aux-info", "-frecord-gcc-switches", "-MMD",
            "-MG", "-M", "-MM", "-P", "-Q", "-v", "-###", "-dumpbase", "-dumpdir",
            "-dumpbase-ext", "-specs", "-wrapper", "-plugin", "-Xclang", "-mllvm",
            "-Xassembler", "-Xpreprocessor", "-MJ", "-serialize-diagnostics",
            "-march=native", "-mtune=native", "-mcpu=native", "-gmodules", "-", "-B"}
_REFUSED_PREFIXES = ("-fprofile-", "-fauto-profile", "-fdump-", "-fcallgraph-info", "-fopt-info",
                     "-ftime-report", "-fmem-report", "-ftime-trace", "-time", "-fplugin",
                     "-fcompare-debug", "-fsave-optimization-record", "-foptimization-record",
                     "-fcoverage", "-fsanitize-blacklist", "-fsanitize-ignorelist",
                     "-fmodules", "-fcrash-diagnostics", "-specs=", "--specs", "-save-temps=",
                     "-d", "-fembed-bitcode")
# Environment variables that make gcc write a depfile of its own, or compare debug info.
_REFUSED_ENV = ("DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES", "GCC_COMPARE_DEBUG")
# Environment variables in the key: the language of what the compiler says, and which
# compiler pieces it runs (the preprocessed code covers the include paths).
_KEYED_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "GCC_EXEC_PREFIX", "COMPILER_PATH")
_NAMES = {"-o", "-MF", "-MT", "-MQ"}  # options whose value is a name the object does not hold


def refusal(plan: CompilePlan) -> str | None:
    """Why this compile is not served from the object cache; None when it may be."""
    from .gccargs import words

    if not plan.output_given or len(plan.sources) != 1:
        return "not one source with -o"
    for name in _REFUSED_ENV:
        if os.environ.get(name):
            return f"{name} is set"
    for w in words(plan.expanded):
        opt = w.option
        if opt in ("", "--"):
            if opt == "--" or w.value == "-":
                return "a source read from stdin"
            continue
        if opt in _REFUSED or opt.startswith(_REFUSED_PREFIXES):
            return f"{opt} is given"
        if opt.startswith(("-Wa,", "-Wp,")):  # listings (-Wa,-adhln=F), depfiles (-Wp,-MD,F)
            subs = opt.split(",")[1:]
            if any(s.startswith(("-a", "--MD", "-M", "--listing", "-o")) for s in subs):
                return f"{opt} is given"
    return None


def open_cache(plan: CompilePlan) -> Cache | None:
    """The cache for this compile, or None when it is off or the compile is not cacheable."""
    if refusal(plan) is not None:
        return None
    from .errors import UsageError
    from .link.cache import Cache

    try:
        return Cache.open()
    except UsageError:  # a cache folder the link refuses: it says so there
        return None


def dependency_options(plan: CompilePlan, depfile: str) -> tuple[list[str], str | None]:
    """The dependency options for the target preprocessing, writing `depfile`, and the depfile
    the host compile writes (None: none).

    The host compile's own -MD, -MT, -MQ and -MP (host_argv spells out the -MF and -MT gcc
    would derive from -o), so `depfile` is byte for byte the host compile's: on a hit it is
    copied to the host's -MF. Without -MD, `-MD -MF depfile` for the list of files to scan.
    """
    from .compile import host_argv
    from .gccargs import words

    argv = host_argv(plan, "<object>")[1:]
    ws = words(argv)
    if "-MD" not in {w.option for w in ws}:
        return ["-MD", "-MF", depfile], None
    out: list[str] = []
    target = None
    for w in ws:
        if w.option == "-MF":
            target = w.value
            out += ["-MF", depfile]
        elif w.option in ("-MD", "-MT", "-MQ", "-MP"):
            out += argv[w.index : w.index + w.count]
    return out, target


def prerequisites(text: bytes) -> list[bytes] | None:
    """The files a depfile's first rule lists (gcc's quoting: `\\ `, `\\#`, `$$`); None when it
    cannot be read."""
    text = text.replace(b"\\\n", b" ")
    first = text.split(b"\n", 1)[0]
    if b"\\" in first or b"$" in first:
        tokens = _tokens(first)
    else:
        tokens = first.split()
    for i, tok in enumerate(tokens):
        if tok.endswith(b":"):
            return tokens[i + 1 :]
    return None


def _tokens(line: bytes) -> list[bytes]:
    tokens: list[bytes] = []
    cur = bytearray()
    i = 0
    while i < len(line):
        c = line[i : i + 1]
        nxt = line[i + 1 : i + 2]
        if c == b"\\" and nxt in (b" ", b"#", b"\\"):
            cur += nxt
            i += 2
            continue
        if c == b"$" and nxt == b"$":
            cur += b"$"
            i += 2
            continue
        if c in (b" ", b"\t"):
            if cur:
                tokens.append(bytes(cur))
                cur.clear()
        else:
            cur += c
        i += 1
    if cur:
        tokens.append(bytes(cur))
    return tokens


def names_target(paths: list[bytes]) -> bool:
    """Whether any of these files names a target macro (or cannot be read: then as if so)."""
    for path in paths:
        try:
            with open(path, "rb") as f:
                if MARK in f.read():
                    return True
        except OSError:
            return True
    return False


def key(cache: Cache, plan: CompilePlan, codes: list[bytes], depfile: str) -> str | None:
    """The fat object's key from each target's preprocessed code (in plan.targets' order);
    None when the host object may differ from what that code implies."""
    import hashlib

    from . import __version__
    from .gccargs import words
    from .link.cache import _hash, _uses_debug_info

    try:
        with open(depfile, "rb") as f:
            files = prerequisites(f.read())
    except OSError:
        return None
    if files is None or names_target([os.fsencode(plan.sources[0].path), *files]):
        return None
    if any(b".incbin" in code for code in codes):  # the assembler reads a file (ccache too)
        return None
    compiler = cache.tool_identity(plan.compiler)
    objcopy = cache.tool_identity("objcopy")
    if compiler is None or objcopy is None:
        return None
    host = []
    for w in words(plan.expanded):
        host += [w.option, "<name>"] if w.option in _NAMES else \
            plan.expanded[w.index : w.index + w.count]
    parts = ["offlink cc object", str(FORMAT), __version__, compiler, objcopy,
             "\0".join(host), plan.sources[0].language, "\0".join(plan.offered),
             os.getcwd() if _uses_debug_info(plan.expanded) else "",
             *(f"{name}={os.environ.get(name, '')}" for name in _KEYED_ENV)]
    for target, code in zip(plan.targets, codes):
        parts += [type(target).__qualname__, target.name,
                  "\0".join(target.payload_options(plan.target_options)),
                  hashlib.sha256(code).hexdigest()]
    return _hash(*parts)


def lookup(cache: Cache, key: str) -> tuple[bytes, str] | None:
    """(the fat object, what its host compile said), or None."""
    entry = cache.get(key)
    if entry is None:
        return None
    said = entry.meta.get("said") if isinstance(entry.meta, dict) else None
    if not isinstance(said, str) or entry.meta.get("kind") != "cc-object":
        return None
    return entry.data, said


def store(cache: Cache, key: str, fat: str, said: str) -> None:
    """Keep the fat object at `fat` and what the host compile said; never an error."""
    try:
        with open(fat, "rb") as f:
            data = f.read()
    except OSError:
        return
    cache.put(key, {"kind": "cc-object", "said": said}, data)
    cache.trim()
