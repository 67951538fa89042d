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

A warm compile must cost little more than its preprocessing, so `warm` serves it before
offlink's planning is imported (cc/plan.py, the targets, driver_args): a *recipe* entry, keyed by
everything the plan is a function of (the command line, the targets, the working folder,
PATH, offlink's own code), holds what the plan gave: the preprocessing commands (the host's
too, and whether it was needed) and the key's parts but the code. It is written by the first
compile of that command line (and again by `warm` when a file begins or ceases to name a
target macro); a command with a response file (whose content the plan reads) has none.
"""

from __future__ import annotations

import os
import sys

from .. import settings
from ..run import spawn

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from ..cache.store import Cache
    from ..link.staging import OutputSlot, WorkFolder
    from .plan import CompilePlan

FORMAT = 1
MARK = b"__OFFLINK_TARGET"  # every target's macros start so (__OFFLINK_TARGET__, ..._HOST__)
HOST_CODE = "host-code"  # the host preprocessing's files in the work folder: .i, .d, .err

# Options after which a compile writes files beside the object (or names them after -o), reads
# files the preprocessor does not list, or says something that differs from run to run.
# Options after which gcc writes files named after the object (-o) beside it, or names one in
# the object: --coverage's notes (.gcno) and the data path the program writes (.gcda), stack
# usage (.su), split DWARF (.dwo), call graphs (.ci), dumps. Never served from this cache, and
# compile.host_argv names these files after the real output.
AUX_OPTIONS = {"-fprofile-arcs", "--coverage", "-ftest-coverage", "-gsplit-dwarf",
               "-fstack-usage"}
AUX_PREFIXES = ("-fdump-", "-fcallgraph-info")
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
# Environment variables in the key: the language of what the compiler says, and which
# compiler pieces it runs (the preprocessed code covers the include paths).
_KEYED_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "GCC_EXEC_PREFIX", "COMPILER_PATH")
_NAMES = {"-o", "-MF", "-MT", "-MQ"}  # options whose value is a name the object does not hold


def refusal(plan: CompilePlan) -> str | None:
    """Why this compile is not served from the object cache; None when it may be."""
    from ..driver_args import is_clang, words

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
    from ..cache.store import Cache
    from ..errors import UsageError

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
    from ..driver_args import is_clang, words
    from .plan import host_argv

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


def included(code: bytes) -> list[bytes] | None:
    """The files preprocessed code's linemarkers name (`# 1 "stdio.h" 1 3 4`: every file the
    preprocessor entered, system headers and what they include among them, which -MMD's
    depfile leaves out); None when a name is escaped (a backslash or a quote in it)."""
    import re

    names = dict.fromkeys(re.findall(rb'\n# [0-9]+ "([^"\n]*)"', code))
    names.pop(b"<built-in>", None)
    names.pop(b"<command-line>", None)
    if any(b"\\" in name for name in names):
        return None
    return list(names)


def marked(source: str, depfile: str, code: bytes | None = None) -> bool | None:
    """Whether the source or a file its depfile lists (or, given the `code` that wrote a -MMD
    depfile, a file that code came from) names a target macro (then the host's code may
    differ from the target's); None when the depfile or the code cannot be read."""
    try:
        with open(depfile, "rb") as f:
            files = prerequisites(f.read())
    except OSError:
        return None
    if files is None:
        return None
    if code is not None:
        entered = included(code)
        if entered is None:
            return None
        files = list(dict.fromkeys([*files, *entered]))  # a header is read once
    return names_target([os.fsencode(source), *files])


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
    from ..cache.keys import uses_debug_info
    from ..driver_args import is_clang, words

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


def key(cache: Cache, parts: list[str], compiler: str, codes: list[bytes],
        host_code: bytes | None, native: list[str]) -> str | None:
    """The fat object's key from `static_parts`, each target's preprocessed code (in
    plan.targets' order) and, where a file names a target macro, the host's own (else the
    host's code is the target's but for those macros), and what the `native` options
    (cache/native.py's native_options) stand for on this machine; None when not to be cached."""
    from ..cache.keys import hash_parts
    from ..cache.native import native_expansion
    from ..digest import sha256

    host = [] if host_code is None else [host_code]
    if any(b".incbin" in code for code in [*codes, *host]):  # the assembler reads a file
        return None
    compiler_id = cache.tool_identity(compiler)
    objcopy_id = cache.tool_identity("objcopy")
    if compiler_id is None or objcopy_id is None:
        return None
    cpu = native_expansion(cache, compiler, compiler_id, native) if native else ""
    if cpu is None:
        return None
    return hash_parts(*parts, compiler_id, objcopy_id, cpu,
                 *(f"{name}={os.environ.get(name, '')}" for name in _KEYED_ENV),
                 *(sha256(code).hexdigest() for code in codes),
                 *(f"host {sha256(code).hexdigest()}" for code in host))

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
    """Keep the fat object at `fat` and what the host compile said; never an error. The
    caller trims the cache once it has stored all it will (the target compile's objects)."""
    try:
        with open(fat, "rb") as f:
            data = f.read()
    except OSError:
        return
    cache.put(key, {"kind": "cc-object", "said": said}, data)


class Job:
    """One target preprocessing, run with os.posix_spawnp (no subprocess import on the warm
    path); what it says goes to a file beside its output. `source` and `target` name it in
    an error."""

    def __init__(self, argv: list[str], err: str, deps: bool, source: str, target: str):
        self.argv = argv
        self.err = err
        self.deps = deps  # it writes the depfile the object cache reads
        self.source = source
        self.target = target
        self.pid = 0
        self.returncode: int | None = None

    def start(self) -> None:
        actions = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 2, self.err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                    0o600)]
        self.pid = spawn(self.argv, actions)

    def wait(self) -> int:
        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def said(self) -> str:
        try:
            with open(self.err, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        if self.pid and self.returncode is None:
            import signal

            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            self.wait()


class Started:
    """A compile the object cache has begun: its work folder, output slot and preprocessing
    jobs, the host preprocessing (`host_argv`, run when a file names a target macro:
    `marked`, None until the files are scanned), the cache and the key (None: not to be
    stored), and whether it was a hit (then the output is in place and said, and nothing is
    left to do)."""

    def __init__(self, work: WorkFolder, slot: OutputSlot, jobs: list[Job],
                 cache: Cache | None = None, key: str | None = None, hit: bool = False,
                 host_argv: list[str] | None = None):
        self.work = work
        self.slot = slot
        self.jobs = jobs
        self.cache = cache
        self.key = key
        self.hit = hit
        self.host_argv = host_argv
        self.host_job: Job | None = None
        self.marked: bool | None = None
        self.host_said = ""  # on a hit: what the host compile said
        self.from_recipe = False

    def start_host(self, source: str) -> None:
        """Start the host preprocessing (what it says is not shown: the host compile says
        it, or the cache repeats what that said)."""
        from .. import run as runner

        assert self.host_argv is not None
        job = Job(self.host_argv, os.path.join(self.work.path, f"{HOST_CODE}.err"), False,
                  source, "host")
        if runner.VERBOSE:
            print(f"offlink: {runner.show(job.argv)}", file=sys.stderr, flush=True)
        job.start()
        self.host_job = job


def _host_code(started: Started, source: str) -> bytes | None:
    """The host's preprocessed code, started now if it is not yet; None when it failed (the
    host compile then says why)."""
    if started.host_argv is None:
        return None
    if started.host_job is None:
        try:
            started.start_host(source)
        except OSError:
            return None
    assert started.host_job is not None
    if started.host_job.wait():
        return None
    try:
        with open(os.path.join(started.work.path, f"{HOST_CODE}.i"), "rb") as f:
            return f.read()
    except OSError:
        return None


def serve(started: Started, command: list[str], source: str, parts: list[str], depfile: str,
          host_depfile: str | None, native: list[str]) -> None:
    """Wait for the preprocessing, then install the cached fat object if there is one
    (`started.hit`); else leave `started.key` for the compile to store under. `native`: the
    command's `native_options`."""
    cache = started.cache
    assert cache is not None
    jobs = started.jobs
    tmp = started.work.path
    for job in jobs:
        job.wait()
    if any(job.returncode for job in jobs):  # the host compile says why, then the failure
        return
    codes = []
    for job in jobs:  # one source: plan.py's `{si}-{target}.i`
        with open(os.path.join(tmp, f"0-{job.target}.i"), "rb") as f:
            codes.append(f.read())
    # -MMD's depfile leaves system headers out (offlink.h may be one): their names come from
    # the code that wrote it
    deps = next(i for i, job in enumerate(jobs) if job.deps)
    mark = started.marked = marked(source, depfile,
                                   codes[deps] if "-MMD" in jobs[deps].argv else None)
    if mark is None:
        return
    host_code = None
    if mark:  # the host's code may differ from the targets': key it too
        host_code = _host_code(started, source)
        if host_code is None:
            return
    started.key = key(cache, parts, command[0], codes, host_code, native)
    found = lookup(cache, started.key) if started.key is not None else None
    if found is None:
        return
    from .. import run as runner

    data, host_said = found
    fat = os.path.join(tmp, "0-fat.o")
    mask = os.umask(0)
    os.umask(mask)
    fd = os.open(fat, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 & ~mask)
    with open(fd, "wb") as f:
        f.write(data)
    if runner.VERBOSE:
        print(f"offlink: from cache: {runner.show(command)}", file=sys.stderr, flush=True)
    if host_depfile is not None:  # the host's own when it was run (it may list other files)
        with open(os.path.join(tmp, f"{HOST_CODE}.d") if mark else depfile, "rb") as f:
            text = f.read()
        with open(host_depfile, "wb") as f:
            f.write(text)
    started.slot.install(fat)
    if host_said:
        sys.stderr.write(host_said)
        sys.stderr.flush()
    said = [job.said() for job in jobs]
    if any(said):
        from .plan import show_target_warnings

        show_target_warnings(said, host_said)
    started.hit = True
    started.host_said = host_said


# -- the warm path: a recipe instead of the plan ---------------------------------------------
def recipe_key(cache: Cache, argv: list[str], targets: list[str],
               offered: tuple[str, ...]) -> str:
    """What the plan of `offlink cc ARGV` is a function of (no response file among ARGV):
    `targets` as given (--offload-target), else $OFFLINK_TARGETS decides; and offlink's own
    code, which reads ARGV."""
    return cache.key("offlink cc recipe", os.getcwd(), os.uname().machine,
                     os.environ.get("PATH", ""), "\0".join(argv), "\0".join(targets),
                     "" if targets else settings.text("OFFLINK_TARGETS"), "\0".join(offered))


def recipe(plan: CompilePlan, parts: list[str], captures: list[list[str]], tmp: str,
           deps_job: int, host_depfile: str | None, host_argv: list[str],
           host_first: bool, native: list[str]) -> dict:
    """What `warm` needs of the plan: the preprocessing commands (the work folder's path
    taken out), which of them writes the depfile, the host preprocessing and whether to
    start it with them (a file named a target macro), and the key's parts but the code."""
    def out(word: str) -> str:
        return word.replace(tmp, "\0")  # no word of a command line holds a NUL

    return {"kind": "cc-recipe", "compiler": plan.compiler, "source": plan.sources[0].path,
            "output": plan.sources[0].output, "deps_job": deps_job,
            "host_depfile": host_depfile, "parts": parts, "native": native,
            "captures": [[out(w) for w in argv] for argv in captures],
            "labels": [t.name for t in plan.targets],
            "host_capture": [out(w) for w in host_argv], "host_first": host_first}


def write_recipe(cache: Cache, argv: list[str], targets: list[str], offered: tuple[str, ...],
                 plan: CompilePlan, parts: list[str], started: Started,
                 host_depfile: str | None, native: list[str]) -> None:
    """Keep the recipe of `offlink cc ARGV` (`recipe_key`'s arguments) for `warm`."""
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


def _read_recipe(cache: Cache, rkey: str) -> dict | None:
    entry = cache.get(rkey)
    meta = entry.meta if entry is not None else None
    if not isinstance(meta, dict) or meta.get("kind") != "cc-recipe":
        return None
    try:
        ok = (all(isinstance(meta[k], str) for k in ("compiler", "source", "output"))
              and isinstance(meta["deps_job"], int)
              and isinstance(meta["host_depfile"], (str, type(None)))
              and all(isinstance(p, str) for p in meta["parts"])
              and all(isinstance(w, str) for w in meta["native"])
              and all(isinstance(w, str) for argv in meta["captures"] for w in argv)
              and all(isinstance(t, str) for t in meta["labels"])
              and all(isinstance(w, str) for w in meta["host_capture"])
              and isinstance(meta["host_first"], bool)
              and len(meta["labels"]) == len(meta["captures"]) > meta["deps_job"] >= 0)
    except (KeyError, TypeError):
        return None
    return meta if ok else None


def warm(argv: list[str], targets: list[str], offered: tuple[str, ...]) -> Started | None:
    """`offlink cc ARGV` from its recipe, before (and usually instead of) planning it: None
    when there is no recipe (or the cache is off); else what `serve` made of it."""
    if any(w.startswith("@") for w in argv):
        return None
    from ..cache.store import Cache
    from ..errors import UsageError

    try:
        cache = Cache.open()
    except UsageError:
        return None
    if cache is None:
        return None
    rkey = recipe_key(cache, argv, targets, offered)
    r = _read_recipe(cache, rkey)
    if r is None or output_problem(r["source"], r["output"]) is not None:
        return None
    from .. import run as runner
    from ..link.staging import OutputSlot, WorkFolder

    slot = OutputSlot(r["output"])
    work = WorkFolder(keep=False, kind="cc")
    jobs: list[Job] = []
    started = Started(work, slot, jobs, cache,
                      host_argv=[w.replace("\0", work.path) for w in r["host_capture"]])
    started.from_recipe = True
    try:
        for i, capture in enumerate(r["captures"]):
            job = Job([w.replace("\0", work.path) for w in capture],
                      os.path.join(work.path, f"0-{r['labels'][i]}.err"), i == r["deps_job"],
                      r["source"], r["labels"][i])
            if runner.VERBOSE:
                print(f"offlink: {runner.show(job.argv)}", file=sys.stderr, flush=True)
            try:
                job.start()
            except OSError:
                close(started)  # the compile path says why
                return None
            jobs.append(job)
        if r["host_first"]:  # the source names a target macro: its host code is keyed too
            try:
                started.start_host(r["source"])
            except OSError:
                close(started)
                return None
        serve(started, argv, r["source"], r["parts"], os.path.join(work.path, "deps.d"),
              r["host_depfile"], r["native"])
    except BaseException:
        close(started)
        raise
    if started.marked is not None and started.marked != r["host_first"]:
        # a file began, or ceased, to name a target macro: start the host's code with the rest
        cache.put(rkey, {**r, "host_first": started.marked}, b"")
    if started.hit:
        close(started)
    return started


def close(started: Started) -> None:
    """Stop what is left of a started compile and remove its work folder."""
    for job in started.jobs:  # after a failure: no preprocessor outlives its folder
        job.kill()
    if started.host_job is not None:
        started.host_job.kill()
    started.slot.close()
    started.work.close()


def output_problem(source: str, output: str) -> str | None:
    """What is wrong with writing `output` from `source`, before any work: an output that is a
    folder or the source itself (the host compile writes a staged file, so the compiler's own
    check would not see it); None when nothing is. plan.py's check and `warm` both ask."""
    import stat

    try:
        out = os.stat(output)
    except OSError:
        return None
    if stat.S_ISDIR(out.st_mode):
        return f"cannot write {output}: it is a directory (-o names the output file)"
    try:
        src = os.stat(source)
    except OSError:
        return None
    if (src.st_dev, src.st_ino) == (out.st_dev, out.st_ino):
        return f"input file '{source}' is the same as output file"
    return None
