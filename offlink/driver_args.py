"""What a GCC-style driver command line means: which words take a value, which are inputs.

Pure functions over argv, shared by `offlink cc` and `offlink link` planning.
"""

from __future__ import annotations

import os

from .errors import UsageError

# Options whose value is the next word when not attached (gcc's "Separate" options).
SEPARATE = {
    "-o", "-x", "-D", "-U", "-I", "-include", "-imacros", "-isystem", "-iquote", "-idirafter",
    "-iprefix", "-iwithprefix", "-iwithprefixbefore", "-isysroot", "-imultilib", "-MF", "-MT",
    "-MQ", "-L", "-l", "-T", "-u", "-e", "-z", "-Xlinker", "-Xpreprocessor", "-Xassembler",
    "-aux-info", "--param", "-A", "-B", "-G", "-dumpbase", "-dumpdir", "-dumpbase-ext",
    "--sysroot", "-specs", "-wrapper", "-plugin", "-Xclang", "-target", "-arch",
    "-rpath",  # clang (Separate<["-"], "rpath">): the value is a folder, not an input
    "-mllvm",  # clang: the value is an LLVM option (-mllvm -openmp-opt-... is no -o)
    "-Xoffload-linker",  # clang: a word for the device link (-Xoffload-linker -lm is no -l)
    "-Xopenmp-target",  # clang: a word for the OpenMP device compile (-Xopenmp-target -lm)
}
# clang's `-Xoffload-linker-<triple> WORD` and `-Xopenmp-target=<triple> WORD`
# (JoinedAndSeparate): the next word is their value too.
SEPARATE_PREFIXES = ("-Xoffload-linker-", "-Xopenmp-target=")
# clang 19's driver options whose value is the next word (Separate, JoinedOrSeparate, and
# MultiArg in CLANG_VALUES), read from clang-19 itself: each option name in libclang-cpp.so.19
# given alone as `clang-19 -### NAME` that says "argument to 'NAME' is missing". GCC's
# table (SEPARATE) differs: -aux-info, -dumpbase, -wrapper, -plugin are no clang options.
CLANG_SEPARATE = frozenset({
    "--CLASSPATH", "--analyzer-output", "--assert", "--bootclasspath", "--classpath",
    "--config", "--define-macro", "--dyld-prefix", "--encoding", "--extdirs", "--for-linker",
    "--force-link", "--include-directory", "--include-directory-after", "--include-prefix",
    "--include-with-prefix", "--include-with-prefix-after", "--include-with-prefix-before",
    "--language", "--library-directory", "--mhwdiv", "--no-system-header-prefix", "--output",
    "--output-class-directory", "--param", "--prefix", "--print-file-name",
    "--print-prog-name", "--resource", "--rtlib", "--std", "--stdlib", "--sysroot",
    "--system-header-prefix", "--undefine-macro", "--vfsoverlay", "-A", "-B", "-D", "-F", "-G",
    "-I", "-L", "-MF", "-MJ", "-MQ", "-MT", "-T", "-U", "-V", "-Xanalyzer", "-Xarch_device",
    "-Xarch_host", "-Xassembler", "-Xclang", "-Xcuda-fatbinary", "-Xcuda-ptxas", "-Xlinker",
    "-Xmicrosoft-visualc-tools-root", "-Xmicrosoft-visualc-tools-version",
    "-Xmicrosoft-windows-sdk-root", "-Xmicrosoft-windows-sdk-version",
    "-Xmicrosoft-windows-sys-root", "-Xopenmp-target", "-Xpreprocessor", "-Zlinker-input",
    "-alias_list", "-allowable_client", "-arch", "-arch_only", "-arcmt-migrate-report-output",
    "-b", "-bundle_loader", "-ccc-arcmt-migrate", "-ccc-gcc-name", "-ccc-install-dir",
    "-ccc-objcmt-migrate", "-client_name", "-compatibility_version", "-current_version",
    "-cxx-isystem", "-darwin-target-variant", "-darwin-target-variant-triple",
    "-dependency-dot", "-dependency-file", "-dsym-dir", "-dumpdir", "-dylib_file",
    "-dylinker_install_name", "-e", "-exported_symbols_list", "-fdebug-compilation-dir",
    "-fexperimental-openacc-macro-override", "-filelist", "-fmodule-implementation-of",
    "-fmodules-user-build-path", "-fnew-alignment", "-force_load", "-framework",
    "-ftrapv-handler", "-gen-cdb-fragment-path", "-hlsl-entry", "-iapinotes-modules",
    "-idirafter", "-iframework", "-iframeworkwithsysroot", "-imacros", "-image_base",
    "-imultilib", "-include", "-include-pch", "-init", "-install_name",
    "-interface-stub-version=", "-iprefix", "-iquote", "-isysroot", "-isystem",
    "-isystem-after", "-ivfsoverlay", "-iwithprefix", "-iwithprefixbefore", "-iwithsysroot",
    "-l", "-lazy_framework", "-lazy_library", "-meabi", "-mllvm", "-mmlir",
    "-module-dependency-dir", "-mthread-model", "-multiply_defined",
    "-multiply_defined_unused", "-o", "-object-file-name", "-pagezero_size",
    "-read_only_relocs", "-reexport_framework", "-reexport_library", "-resource-dir", "-rpath",
    "-sectalign", "-sectcreate", "-sectobjectsymbols", "-sectorder", "-seg1addr",
    "-seg_addr_table", "-seg_addr_table_filename", "-segaddr", "-segcreate", "-segprot",
    "-segs_read_only_addr", "-segs_read_write_addr", "-serialize-diagnostics", "-specs",
    "-stdlib++-isystem", "-sub_library", "-sub_umbrella", "-target", "-u", "-umbrella",
    "-undefined", "-unexported_symbols_list", "-vfsoverlay", "-weak_framework",
    "-weak_library", "-weak_reference_mismatches", "-working-directory", "-x", "-z"})
# clang's options that take more than one next word (Darwin's MultiArg options).
CLANG_VALUES = {"-sectalign": 3, "-sectcreate": 3, "-sectorder": 3, "-segcreate": 3,
                "-segprot": 3, "-sectobjectsymbols": 2, "-segaddr": 2}
# clang's JoinedAndSeparate options: `-Xarch_<arch> WORD`, `-Xoffload-linker[-<triple>] WORD`,
# `-Xopenmp-target=<triple> WORD`: the next word is their value however they end.
CLANG_SEPARATE_PREFIXES = ("-Xarch_", "-Xoffload-linker", "-Xopenmp-target=")
# The subset whose attached forms start with the option (-DX, -I/dir, -lm, -L/dir, -ofile).
ATTACHED = ("-MF", "-MT", "-MQ", "-o", "-D", "-U", "-I", "-L", "-l", "-x", "-B", "-A", "-T",
            "-u", "-e", "-z", "-G")

C_SUFFIXES = {".c"}
CXX_SUFFIXES = {".cc", ".cp", ".cxx", ".cpp", ".CPP", ".c++", ".C"}
PREPROCESSED = {".i": "c", ".ii": "c++"}
SOURCE_SUFFIXES = C_SUFFIXES | CXX_SUFFIXES | set(PREPROCESSED)
X_LANGS = {"c": "c", "c++": "c++", "cpp-output": "c", "c++-cpp-output": "c++"}


def expand_response_files(argv: list[str], depth: int = 0) -> list[str]:
    """Expand `@file` words as gcc does (a missing file stays a literal word)."""
    return expand_with_origins(argv, depth)[0]


def expand_with_origins(argv: list[str], depth: int = 0) -> tuple[list[str], list[int]]:
    """`@file` words expanded as gcc reads them (libiberty's expandargv), and for each word
    the index in `argv` of the word it came from, so a command can pass an `@file` on as
    written where it keeps all of it (its meaning is the compiler's, not offlink's)."""
    if depth > 10:
        raise UsageError("response files nested too deeply")
    out: list[str] = []
    origins: list[int] = []
    for i, word in enumerate(argv):
        if word.startswith("@") and len(word) > 1 and os.path.isfile(word[1:]):
            with open(word[1:], encoding="utf-8", errors="surrogateescape") as f:
                inner = expand_with_origins(split_response_file(f.read()), depth + 1)[0]
            out.extend(inner)
            origins.extend([i] * len(inner))
        else:
            out.append(word)
            origins.append(i)
    return out, origins


def split_response_file(text: str) -> list[str]:
    """The words of a response file as gcc splits them (libiberty's buildargv): blanks
    separate, quotes group, and a backslash takes the next character literally, inside
    quotes too (so `'a\\b'` is `ab`, where a shell would keep the backslash)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t\n\v\f\r":
            i += 1
        if i >= n:
            break
        arg: list[str] = []
        squote = dquote = bsquote = False
        while i < n:
            c = text[i]
            if c in " \t\n\v\f\r" and not (squote or dquote or bsquote):
                break
            if bsquote:
                bsquote = False
                arg.append(c)
            elif c == "\\":
                bsquote = True
            elif squote:
                if c == "'":
                    squote = False
                else:
                    arg.append(c)
            elif dquote:
                if c == '"':
                    dquote = False
                else:
                    arg.append(c)
            elif c == "'":
                squote = True
            elif c == '"':
                dquote = True
            else:
                arg.append(c)
            i += 1
        out.append("".join(arg))
    return out


def respelled(argv: list[str], expanded: list[str], origins: list[int],
              parts: list[tuple[int, int, list[str]]]) -> list[str]:
    """A command rebuilt from `parts` (index in `expanded`, how many words, what they become):
    an `@file` of `argv` whose words all come out unchanged is passed on as written (the
    compiler reads it as it always does), one with a word dropped or changed is expanded."""
    count: dict[int, int] = {}
    for origin in origins:
        count[origin] = count.get(origin, 0) + 1
    files = {o for i, o in enumerate(origins) if count[o] > 1 or expanded[i] != argv[o]}
    changed: set[int] = set()
    for index, n, spelled in parts:
        from_ = {origins[j] for j in range(index, index + n)}
        if spelled != expanded[index : index + n] or len(from_) > 1:
            changed |= from_
    out: list[str] = []
    emitted: set[int] = set()
    for index, n, spelled in parts:
        origin = origins[index] if n else -1
        if origin in files and origin not in changed:
            if origin not in emitted:
                emitted.add(origin)
                out.append(argv[origin])
            continue
        out += spelled
    return out


class Word:
    """One option or input of a command line: `value` is the option's argument if any."""

    __slots__ = ("index", "count", "option", "value")

    def __init__(self, index: int, count: int, option: str, value: str):
        self.index = index  # position of the (first) word in argv
        self.count = count  # how many words it spans (2 for "-o out")
        self.option = option  # "" for an input
        self.value = value

    def __repr__(self) -> str:
        return f"Word({self.index}, {self.count}, {self.option!r}, {self.value!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Word):
            return NotImplemented
        return (self.index, self.count, self.option, self.value) == \
            (other.index, other.count, other.option, other.value)

    def __hash__(self) -> int:
        return hash((self.index, self.count, self.option, self.value))


def is_clang(driver: str) -> bool:
    """Whether a driver word names clang (clang-19, clang++, /usr/bin/clang...)."""
    return "clang" in os.path.basename(driver)


def words(argv: list[str], clang: bool = False) -> list[Word]:
    """Split a driver command line (without the driver word) into options and inputs, with
    GCC's table of options that take the next word, or clang 19's for a clang driver."""
    separate, prefixes = (CLANG_SEPARATE, CLANG_SEPARATE_PREFIXES) if clang else \
        (SEPARATE, SEPARATE_PREFIXES)
    out = []
    i = 0
    after_dashdash = False
    while i < len(argv):
        w = argv[i]
        if after_dashdash or w == "-" or not w.startswith("-"):
            out.append(Word(i, 1, "", w))
        elif w == "--":
            after_dashdash = True
            out.append(Word(i, 1, "--", ""))
        elif w in separate or w.startswith(prefixes):
            n = CLANG_VALUES.get(w, 1) if clang else 1
            if i + n >= len(argv):
                raise UsageError(f"missing argument to '{w}'")
            out.append(Word(i, 1 + n, w, " ".join(argv[i + 1 : i + 1 + n])))
            i += n
        else:
            for opt in ATTACHED:
                if w.startswith(opt) and len(w) > len(opt) and not _longer_option(w):
                    out.append(Word(i, 1, opt, w[len(opt):]))
                    break
            else:
                out.append(Word(i, 1, w, ""))
        i += 1
    return out


def _longer_option(w: str) -> bool:
    """Options that merely start like an attached one (-Dfoo is -D, -static is not -s...)."""
    return w.startswith(("-include", "-imacros", "-isystem", "-iquote", "-idirafter",
                         "-iprefix", "-iwithprefix", "-isysroot", "-imultilib", "-undef",
                         "-UNDEF", "-Xlinker", "-Xpreprocessor", "-Xassembler", "-L-",
                         "-lto", "-export", "-e2", "-u2", "-time", "-Tbss", "-Tdata",
                         "-Ttext", "-T-", "-zero", "-x-", "-Bstatic", "-Bdynamic",
                         "-Bsymbolic", "-o-"))


def language_of(path: str, x_lang: str | None, compiler: str) -> str | None:
    """'c', 'c++' or None (not a source offlink compiles for a target)."""
    if x_lang and x_lang != "none":
        return X_LANGS.get(x_lang)
    suffix = os.path.splitext(path)[1]
    if suffix in PREPROCESSED:
        return PREPROCESSED[suffix]
    if suffix in CXX_SUFFIXES:
        return "c++"
    if suffix in C_SUFFIXES:
        # g++ and clang++ compile .c files as C++.
        return "c++" if "++" in os.path.basename(compiler) else "c"
    return None


def linker_options(word: Word) -> list[str]:
    """The linker options a -Wl,/-Xlinker word carries."""
    if word.option.startswith("-Wl,"):
        return word.option[4:].split(",")
    if word.option == "-Xlinker":
        return [word.value]
    return []
