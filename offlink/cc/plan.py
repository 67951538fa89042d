"""`offlink cc`'s plan: what a compile command line means, as pure functions from argv to plans.

`plan_compile` plans one compile to a fat object (host object + gnu.target_lto_<target>
sections), `plan_compile_and_link` a compile-and-link in one step, `host_argv` the host compile
as it writes into the work folder; compile.py runs them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..driver_args import (
    Word,
    expand_response_files,
    expand_with_origins,
    is_clang,
    language_of,
    respelled,
    words,
)
from ..errors import UsageError
from ..link.plan import check_driver
from ..plugins import Target
from ..toolchains import resolve
from .toolchain_offload import offload_word

# Preprocessing-only options: used when preprocessing, dropped from the target compile
# (clang's -include-pch too: `clang -E` writes out what the PCH declares, and a compile of
# the preprocessed code calls it unused).
PREPROCESS_ONLY = {"-D", "-U", "-I", "-include", "-imacros", "-isystem", "-iquote", "-idirafter",
                   "-iprefix", "-iwithprefix", "-iwithprefixbefore", "-nostdinc", "-nostdinc++",
                   "-Xpreprocessor", "-undef", "-H", "-C", "-CC", "-P", "-trigraphs",
                   "-include-pch"}
# Files the host compile writes about itself: dependencies, and clang's compilation database
# entry (-MJ FILE), which a target compile would overwrite with its own command.
DEPENDENCY = {"-M", "-MM", "-MD", "-MMD", "-MF", "-MT", "-MQ", "-MP", "-MG", "-MJ"}
# Options of the host compile that a target compile must not get. The code model is the
# target's to choose (the host target compiles -fPIC), so a library's static and shared
# objects of one source (CMake: -fPIC for the shared one only) share one target compile.
NOT_FOR_TARGET = {"-c", "-o", "-x", "-fPIE", "-fpie", "-fno-PIC", "-fno-pic", "-fno-PIE",
                  "-fno-pie", "-fPIC", "-fpic", "-ffat-lto-objects", "-save-temps", "-static",
                  "-pie", "-shared", "-fsyntax-only"}
# Options after which gcc writes files named after the object (-o) beside it, or names one in
# the object: --coverage's notes (.gcno) and the data path the program writes (.gcda), stack
# usage (.su), split DWARF (.dwo), call graphs (.ci), dumps. Never served from the object
# cache (fatcache.py), and host_argv names these files after the real output.
AUX_OPTIONS = {"-fprofile-arcs", "--coverage", "-ftest-coverage", "-gsplit-dwarf",
               "-fstack-usage"}
AUX_PREFIXES = ("-fdump-", "-fcallgraph-info")


@dataclass
class Source:
    path: str
    language: str  # 'c' or 'c++'
    output: str  # the object the host compile writes


@dataclass
class CompilePlan:
    compiler: str
    argv: list[str]  # the host compile, exactly as given
    expanded: list[str]  # its arguments with response files expanded (their meaning)
    sources: list[Source]
    targets: list[Target]
    preprocess_args: list[str]  # for `-E` (no -o, -c, inputs, dependency flags)
    target_options: list[str]  # stored in the payload for the link-time compile
    offered: tuple[str, ...]
    output_given: bool  # -o was given (then there is exactly one source)
    origins: list[int]  # for each word of `expanded`, the index in argv[1:] it came from


def plan_compile(argv: list[str], targets: list[str], offered: tuple[str, ...] = (),
                 asked: bool = True) -> CompilePlan | None:
    """Plan `COMPILER ARGS...`; None when it is not a compile to objects (pass it through),
    or, unless the targets were `asked` for (--offload-target), when it carries the
    toolchain's own offload code (toolchain_offload.py)."""
    if not argv:
        raise UsageError("cc: missing compiler command (offlink cc [OPTIONS] COMPILER ARGS...)")
    compiler, args = argv[0], argv[1:]
    check_driver(compiler, "cc")
    args, origins = expand_with_origins(args)
    if not asked and offload_word(args) is not None:
        return None
    ws = words(args, clang=is_clang(compiler))  # clang's and gcc's options differ
    opts = {w.option for w in ws}
    if "-c" not in opts or opts & {"-E", "-S", "-M", "-MM", "-fsyntax-only"}:
        return None
    output = next((w.value for w in reversed(ws) if w.option == "-o"), None)
    sources: list[Source] = []
    x_lang: str | None = None
    for w in ws:
        if w.option == "-x":
            x_lang = w.value
        elif w.option == "" and w.value != "-":
            lang = language_of(w.value, x_lang, compiler)
            if lang:
                obj = output or os.path.splitext(os.path.basename(w.value))[0] + ".o"
                sources.append(Source(w.value, lang, obj))
    if not sources:
        return None
    if len(sources) > 1 and output:
        return None  # the compiler itself refuses -o with several sources; let it say so
    pre, tgt = _split_options(args, ws)
    return CompilePlan(compiler, list(argv), args, sources, [resolve(t) for t in targets], pre,
                       tgt, tuple(offered), output is not None, origins)


@dataclass
class OneStepPlan:
    """`COMPILER a.c b.c -o app` (compile and link in one step) as offlink does it: each
    source compiled to a fat object, then `offlink link` of the same command with the
    objects in the sources' places."""

    compiles: list[list[str]]  # `COMPILER ... -c SOURCE -o OBJECT`, one per source
    link: list[str]
    sources: dict[str, str] = field(default_factory=dict)  # OBJECT -> its SOURCE, as given


TWO_STEPS = ("compile each source with `offlink cc COMPILER -c SOURCE -o OBJECT`, then link "
             "the objects with `offlink link COMPILER OBJECTS... -o OUTPUT`")


def plan_compile_and_link(argv: list[str], obj_dir: str) -> OneStepPlan | None:
    """Plan a compile-and-link command; None when no input is a C or C++ source (a link of
    objects: pass it to `offlink link` as it is). The objects go into `obj_dir`."""
    compiler, args = argv[0], expand_response_files(argv[1:])
    ws = words(args, clang=is_clang(compiler))
    opts = {w.option for w in ws}
    output = next((w.value for w in reversed(ws) if w.option == "-o"), "a.out")
    common: list[str] = []  # the options of every compile, as spelled
    link = [compiler]
    sources: list[tuple[str, str | None]] = []  # (source, the -x in force for it)
    x_lang: str | None = None
    for w in ws:
        spelled = args[w.index : w.index + w.count]
        if w.option == "-x":
            x_lang = None if w.value == "none" else w.value
            link += spelled
            continue
        if w.option == "" and w.value == "-" and language_of("-", x_lang, compiler):
            raise UsageError(f"cc: a source read from stdin cannot be compiled and linked in "
                             f"one step with target code; {TWO_STEPS}")
        if w.option == "" and language_of(w.value, x_lang, compiler):
            obj = os.path.join(obj_dir, f"{len(sources)}-"
                                        f"{os.path.splitext(os.path.basename(w.value))[0]}.o")
            sources.append((w.value, x_lang))
            # An object where a -x language is in force would be read as that language.
            link += ["-x", "none", obj, "-x", x_lang] if x_lang else [obj]
            continue
        link += spelled
        if w.option not in ("", "--", "-o", "-l"):
            common += spelled
    if not sources:
        return None
    deps = []
    if opts & {"-MD", "-MMD"}:  # gcc names the depfile and its target after the link output
        if "-MF" not in opts:
            deps += ["-MF", os.path.splitext(output)[0] + ".d"]
        if not opts & {"-MT", "-MQ"}:
            deps += ["-MT", output]
    compiles = []
    objects = {}
    for i, (src, lang) in enumerate(sources):
        obj = os.path.join(obj_dir, f"{i}-{os.path.splitext(os.path.basename(src))[0]}.o")
        compiles.append([compiler, *common, *deps, "-c", *(["-x", lang] if lang else []), src,
                         "-o", obj])
        objects[obj] = src
    return OneStepPlan(compiles, link, objects)


def _split_options(args: list[str], ws: list[Word]) -> tuple[list[str], list[str]]:
    """Options for preprocessing and for the target compile, spelled as the user wrote them."""
    pre: list[str] = []
    tgt: list[str] = []
    for w in ws:
        if w.option in ("", "--"):
            continue
        spelled = args[w.index : w.index + w.count]
        if w.option in DEPENDENCY or w.option in ("-c", "-o"):
            continue
        if w.option.startswith("-Wp,"):
            pre += spelled
            continue
        if w.option != "-x":
            pre += spelled
        if w.option in PREPROCESS_ONLY or w.option in NOT_FOR_TARGET:
            continue
        if w.option.startswith(("-flto", "-fno-lto", "-Wl,")):
            continue
        tgt += spelled
    return pre, tgt


def host_argv(plan: CompilePlan, staged: str) -> list[str]:
    """The host compile writing to `staged` instead of the -o file, depfile unchanged.

    gcc names the depfile and its target after -o; both are spelled out so that moving the
    object into place afterwards gives exactly what the plain compile gives. Response files
    are passed as written (the compiler reads them), unless one holds the -o.
    """
    out = plan.sources[0].output
    ws = words(plan.expanded, clang=is_clang(plan.compiler))
    opts = {w.option for w in ws}
    parts = []
    for w in ws:
        spelled = plan.expanded[w.index : w.index + w.count]
        parts.append((w.index, w.count, ["-o", staged] if w.option == "-o" else spelled))
    argv = [plan.compiler, *respelled(plan.argv[1:], plan.expanded, plan.origins, parts)]
    if opts & {"-MD", "-MMD"} and "-MF" not in opts:
        argv += ["-MF", os.path.splitext(out)[0] + ".d"]
    if opts & {"-MD", "-MMD", "-M", "-MM"} and not opts & {"-MT", "-MQ"}:
        argv += ["-MT", out]
    if writes_aux_files(opts) and not opts & {"-dumpdir", "-dumpbase", "-dumpbase-ext"} \
            and "clang" not in os.path.basename(plan.compiler):
        argv += aux_names(out)
    return argv


def writes_aux_files(opts: set[str]) -> bool:
    """Whether gcc writes files named after the object with these options."""
    return any(o in AUX_OPTIONS or o.startswith(AUX_PREFIXES) for o in opts)


def aux_names(output: str) -> list[str]:
    """gcc's options that name the auxiliary files as a compile with `-c -o OUTPUT` names them
    (the output's folder and name less its suffix), for a host compile that writes its object
    elsewhere (the work folder): the object is byte for byte the same, and the files land
    where the build expects them. clang has no -dumpbase; its compile keeps the old names."""
    folder, name = os.path.split(output)
    return ["-dumpdir", folder + "/" if folder else "", "-dumpbase", os.path.splitext(name)[0]]
