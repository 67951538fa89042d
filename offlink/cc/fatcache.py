"""`offlink cc`'s object cache: whole fat objects, keyed as ccache's preprocessor mode keys them.

A warm compile runs the target preprocessing (which `offlink cc` runs anyway), looks the fat
object up by the key below and, on a hit, runs neither the host compile nor objcopy.

The key: this cache's format and offlink's own code (cache/store.py's `code_identity`), the host
compiler's and objcopy's identity (cache/store.py: resolved path, content hash and `--version`,
remembered by stat stamp), the host command with the -o and depfile names taken out, the working
folder when debug info is asked for, the locale and the compiler's search variables, per target
its name, its options and a SHA-256 of its preprocessed code, and for `-march=native` (-mtune,
-mcpu) what the driver passes its compiler proper for it on this machine (cache/native.py's
`native_expansion`: remembered by compiler and CPU, so a warm compile starts no driver). The host
object is what that code implies when the host's preprocessed code is the same text but for the
target's macros, i.e. when nothing tests them: the source and every file its depfile lists (with
-MMD, which leaves system headers out, every file the code's linemarkers name) are scanned for
`__OFFLINK_TARGET`, and where a file names it (every CU including offlink.h) the host's own
preprocessed code is keyed too: the host preprocessing (the depfile-writing target preprocessing
without the target's defines; started after the scan, or with the target preprocessing when the
recipe says the command line needed it) and a SHA-256 of its output. It also writes the depfile a
hit installs where the host compile writes one (the target's may list other headers). What a scan
cannot see is then only a CU that tests a target macro by a name made by token pasting
(`__OFFLINK_ ## TARGET__`) and names it nowhere: its host code is not keyed and such a CU must not
be served from this cache (OFFLINK_NO_CACHE=1). As in ccache, a compile that writes files beside
the object or reads files the preprocessor does not (coverage, profiles, split DWARF, dumps,
plugins, `.incbin` in any side's code, -MG...) is not cached at all (`refusal`).

Entries sit in the link cache's folder with its trust rules, checksums, atomic writes and size
limit (cache/store.py): the fat object as the data, what the host compile said as metadata.

A warm compile must cost little more than its preprocessing, so warm.py serves it before
offlink's planning is imported (cc/plan.py, the targets, driver_args): a *recipe* entry, keyed by
everything the plan is a function of (the command line, the targets, the working folder,
PATH, offlink's own code), holds what the plan gave: the preprocessing commands (the host's
too, and whether it was needed) and the key's parts but the code. It is written by the first
compile of that command line (and again by warm.py when a file begins or ceases to name a
target macro); a command with a response file (whose content the plan reads) has none. This
module writes the entries and the recipe (the cold side); warm.py reads them and serves a hit.
"""

from __future__ import annotations

import os

from ..cache.keys import uses_debug_info
from ..cache.store import Cache
from ..driver_args import is_clang, words
from ..errors import UsageError
from .plan import AUX_OPTIONS, AUX_PREFIXES, CompilePlan, host_argv
from .warm import Started, recipe_key

FORMAT = 1

# Options after which a compile writes files beside the object (or names them after -o), reads
# files the preprocessor does not list, or says something that differs from run to run
# (plan.py's AUX_OPTIONS: the files gcc names after the object).
_REFUSED = AUX_OPTIONS | {
    "-save-temps", "--save-temps", "-aux-info", "-frecord-gcc-switches", "-MG", "-M",
    "-MM", "-P", "-Q", "-v", "-###", "-dumpbase", "-dumpdir", "-dumpbase-ext", "-specs",
    "-wrapper", "-plugin", "-Xclang", "-mllvm", "-Xassembler", "-Xpreprocessor", "-MJ",
    "-serialize-diagnostics", "-gmodules", "-", "-B"}
_REFUSED_PREFIXES = AUX_PREFIXES + ("-fprofile-", "-fauto-profile", "-fopt-info",
                     "-ftime-report", "-fmem-report", "-ftime-trace", "-time", "-fplugin",
                     "-fcompare-debug", "-fsave-optimization-record", "-foptimization-record",
                     "-fcoverage", "-fsanitize-blacklist", "-fsanitize-ignorelist",
                     "-fmodule", "-fcrash-diagnostics", "-specs=", "--specs", "-save-temps=",
                     "-d", "-fembed-bitcode", "-fdiagnostics-format=", "-fdiagnostics-add-output",
                     "-fdiagnostics-set-output")
# Environment variables that make gcc write a depfile of its own, or compare debug info.
_REFUSED_ENV = ("DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES", "GCC_COMPARE_DEBUG")
_NAMES = {"-o", "-MF", "-MT", "-MQ"}  # options whose value is a name the object does not hold


def refusal(plan: CompilePlan) -> str | None:
    """Why this compile is not served from the object cache; None when it may be."""
    if not plan.output_given or len(plan.sources) != 1:
        return "not one source with -o"
    for name in _REFUSED_ENV:
        if os.environ.get(name):
            return f"{name} is set"
    for w in words(plan.expanded, clang=is_clang(plan.compiler)):
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
    try:
        return Cache.open()
    except UsageError:  # a cache folder the link refuses: it says so there
        return None


def dependency_options(plan: CompilePlan, depfile: str) -> tuple[list[str], str | None]:
    """The dependency options for the target preprocessing, writing `depfile`, and the depfile
    the host compile writes (None: none).

    The host compile's own -MD or -MMD, -MT, -MQ and -MP (host_argv spells out the -MF and -MT
    gcc would derive from -o), so `depfile` is byte for byte the host compile's: on a hit it is
    copied to the host's -MF. Without either, `-MD -MF depfile` for the list of files to scan
    (with -MMD that list lacks system headers: `serve` reads them from the code).
    """
    argv = host_argv(plan, "<object>")[1:]
    ws = words(argv, clang=is_clang(plan.compiler))
    if not {"-MD", "-MMD"} & {w.option for w in ws}:
        return ["-MD", "-MF", depfile], None
    out: list[str] = []
    target = None
    for w in ws:
        if w.option == "-MF":
            target = w.value
            out += ["-MF", depfile]
        elif w.option in ("-MD", "-MMD", "-MT", "-MQ", "-MP"):
            out += argv[w.index : w.index + w.count]
    return out, target


def host_capture(capture: list[str], prefix: int, defines: list[str],
                 deps: list[str]) -> list[str]:
    """The host preprocessing: a target's `capture` command (a `-E` whose first `prefix` words
    are the compiler and the host's preprocessing options) without the target's `defines`
    (the user's own options, in the prefix, are kept whatever they say), with dependency
    options `deps`."""
    given = set(defines)
    return [*capture[:prefix], *(w for w in capture[prefix:] if w not in given), *deps]


def static_parts(plan: CompilePlan, cache: Cache) -> list[str]:
    """The parts of the key that the command line (and offlink's own code: a recipe is
    keyed by it too) alone decides (a recipe keeps them)."""
    host = []
    for w in words(plan.expanded, clang=is_clang(plan.compiler)):
        host += [w.option, "<name>"] if w.option in _NAMES else \
            plan.expanded[w.index : w.index + w.count]
    parts = ["offlink cc object", str(FORMAT), cache.code_identity(), "\0".join(host),
             plan.sources[0].language, "\0".join(plan.offered),
             os.getcwd() if uses_debug_info(plan.expanded) else ""]
    for target in plan.targets:
        parts += [type(target).__qualname__, target.name,
                  "\0".join(target.payload_options(plan.target_options))]
    return parts


def store(cache: Cache, key: str, fat: str, said: str) -> None:
    """Keep the fat object at `fat` and what the host compile said; never an error. The
    caller trims the cache once it has stored all it will (the target compile's objects)."""
    try:
        with open(fat, "rb") as f:
            data = f.read()
    except OSError:
        return
    cache.put(key, {"kind": "cc-object", "said": said}, data)


def recipe(plan: CompilePlan, parts: list[str], captures: list[list[str]], tmp: str,
           deps_job: int, host_depfile: str | None, host_preprocessing: list[str],
           host_first: bool, native: list[str]) -> dict:
    """What warm.py needs of the plan: the preprocessing commands (the work folder's path
    taken out), which of them writes the depfile, the host preprocessing and whether to
    start it with them (a file named a target macro), and the key's parts but the code."""
    def out(word: str) -> str:
        return word.replace(tmp, "\0")  # no word of a command line holds a NUL

    return {"kind": "cc-recipe", "compiler": plan.compiler, "source": plan.sources[0].path,
            "output": plan.sources[0].output, "deps_job": deps_job,
            "host_depfile": host_depfile, "parts": parts, "native": native,
            "captures": [[out(w) for w in argv] for argv in captures],
            "labels": [t.name for t in plan.targets],
            "host_capture": [out(w) for w in host_preprocessing], "host_first": host_first}


def write_recipe(cache: Cache, argv: list[str], targets: list[str], offered: tuple[str, ...],
                 plan: CompilePlan, parts: list[str], started: Started,
                 host_depfile: str | None, native: list[str]) -> None:
    """Keep the recipe of `offlink cc ARGV` (`recipe_key`'s arguments) for warm.py."""
    jobs, tmp = started.jobs, started.work.path
    if any(w.startswith("@") for w in argv) or not jobs or len(jobs) != len(plan.targets):
        return
    if started.host_argv is None:
        return
    if any(job.argv[0] != plan.compiler for job in jobs):  # another tool (nvcc): its lookup
        return
    deps_job = next(i for i, job in enumerate(jobs) if job.deps)
    cache.put(recipe_key(cache, argv, targets, offered),
              recipe(plan, parts, [job.argv for job in jobs], tmp, deps_job, host_depfile,
                     started.host_argv, bool(started.marked), native),
              b"")
