"""What a GCC-style driver command line means: which words take a value, which are inputs.

Pure functions over argv, shared by `offlink cc` and `offlink link` planning.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import UsageError

# Options whose value is the next word when not attached (gcc's "Separate" options).
SEPARATE = {
    "-o", "-x", "-D", "-U", "-I", "-include", "-imacros", "-isystem", "-iquote", "-idirafter",
    "-iprefix", "-iwithprefix", "-iwithprefixbefore", "-isysroot", "-imultilib", "-MF", "-MT",
    "-MQ", "-L", "-l", "-T", "-u", "-e", "-z", "-Xlinker", "-Xpreprocessor", "-Xassembler",
    "-aux-info", "--param", "-A", "-B", "-G", "-dumpbase", "-dumpdir", "-dumpbase-ext",
    "--sysroot", "-specs", "-wrapper", "-plugin", "-Xclang", "-target", "-arch",
    "-rpath",  # clang (Separate<["-"], "rpath">): the value is a folder, not an input
}
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
    if depth > 10:
        raise UsageError("response files nested too deeply")
    import shlex

    out: list[str] = []
    for word in argv:
        if word.startswith("@") and len(word) > 1 and os.path.isfile(word[1:]):
            with open(word[1:], encoding="utf-8", errors="surrogateescape") as f:
                out.extend(expand_response_files(shlex.split(f.read()), depth + 1))
        else:
            out.append(word)
    return out


@dataclass(frozen=True)
class Word:
    """One option or input of a command line: `value` is the option's argument if any."""

    index: int  # position of the (first) word in argv
    count: int  # how many words it spans (2 for "-o out")
    option: str  # "" for an input
    value: str


def words(argv: list[str]) -> list[Word]:
    """Split a driver command line (without the driver word) into options and inputs."""
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
        elif w in SEPARATE:
            if i + 1 >= len(argv):
                raise UsageError(f"missing argument to '{w}'")
            out.append(Word(i, 2, w, argv[i + 1]))
            i += 1
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
