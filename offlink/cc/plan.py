"""`offlink cc`: compile one CU into a fat object (host object + gnu.target_lto_<target> sections).

`plan_compile` is a pure function of the command line; `run_compile` does the work: it
preprocesses each source for each target (with __OFFLINK_TARGET__ defined) while the host
compile runs, then adds one payload section per target to the host object and moves it into
place, so the output is either the complete fat object or untouched.
"""

from __future__ import annotations

import os
import sys

from .. import run as runner
from .. import settings
from ..driver_args import (
    Word,
    expand_response_files,
    expand_with_origins,
    is_clang,
    language_of,
    respelled,
    words,
)
from ..errors import ToolError, UsageError
from ..link.plan import check_driver
from ..plugins import Target
from ..toolchains import resolve
from . import fatcache as objcache
from .fatcache import Job
from .toolchain_offload import offload_word

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from ..cache.store import Cache
    from ..formats.payload import Payload
    from ..link.staging import OutputSlot
    from .fatcache import Started

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


# Plain classes, not dataclasses: every `offlink cc` builds these, and creating a dataclass
# costs ~0.5-0.7 ms of start-up each.
class Source:
    __slots__ = ("path", "language", "output")

    def __init__(self, path: str, language: str, output: str):
        self.path = path
        self.language = language  # 'c' or 'c++'
        self.output = output  # the object the host compile writes


class CompilePlan:
    __slots__ = ("compiler", "argv", "expanded", "sources", "targets", "preprocess_args",
                 "target_options", "offered", "output_given", "origins")

    def __init__(self, compiler: str, argv: list[str], expanded: list[str],
                 sources: list[Source], targets: list[Target], preprocess_args: list[str],
                 target_options: list[str], offered: tuple[str, ...], output_given: bool,
                 origins: list[int]):
        self.compiler = compiler
        self.argv = argv  # the host compile, exactly as given
        self.expanded = expanded  # its arguments with response files expanded (their meaning)
        self.sources = sources
        self.targets = targets
        self.preprocess_args = preprocess_args  # for `-E` (no -o, -c, inputs, dependency flags)
        self.target_options = target_options  # stored in the payload for the link-time compile
        self.offered = offered
        self.output_given = output_given  # -o was given (then there is exactly one source)
        self.origins = origins  # for each word of `expanded`, the index in argv[1:] it came from


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


class OneStepPlan:
    """`COMPILER a.c b.c -o app` (compile and link in one step) as offlink does it: each
    source compiled to a fat object, then `offlink link` of the same command with the
    objects in the sources' places."""

    __slots__ = ("compiles", "link", "sources")

    def __init__(self, compiles: list[list[str]], link: list[str],
                 sources: dict[str, str] | None = None):
        self.compiles = compiles  # `COMPILER ... -c SOURCE -o OBJECT`, one per source
        self.link = link
        self.sources = sources or {}  # OBJECT -> its SOURCE, as given


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
    """Whether gcc writes files named after the object with these options (fatcache.py)."""
    return any(o in objcache.AUX_OPTIONS or o.startswith(objcache.AUX_PREFIXES) for o in opts)


def aux_names(output: str) -> list[str]:
    """gcc's options that name the auxiliary files as a compile with `-c -o OUTPUT` names them
    (the output's folder and name less its suffix), for a host compile that writes its object
    elsewhere (the work folder): the object is byte for byte the same, and the files land
    where the build expects them. clang has no -dumpbase; its compile keeps the old names."""
    folder, name = os.path.split(output)
    return ["-dumpdir", folder + "/" if folder else "", "-dumpbase", os.path.splitext(name)[0]]


def run_compile(plan: CompilePlan, target_compile: bool = True,
                host_said_by_source: dict[str, str] | None = None,
                started: Started | None = None,
                recipe: tuple[list[str], list[str], tuple[str, ...]] | None = None) -> int:
    """Preprocess for every target beside the host compile, write each fat object, then
    compile its target code into the link cache (`_target_compile`) unless told not to.

    `host_said_by_source` gets what each source's host compile said, for a link in this
    process to leave out of its target warnings. With one -o output the host compile writes
    into the work folder, and the fat object replaces the output whole, so a failure leaves
    the previous output as it was and a killed compile nothing beside it (link/staging.py).
    With the object cache on (fatcache.py), the preprocessing is waited for first: its code
    is the key, and a hit installs the cached fat object without a host compile. `started`:
    what objcache.warm began from a recipe and did not finish (a miss); `recipe`: the
    arguments of objcache.recipe_key, for the first compile of a command line to write one.
    """
    from ..link.staging import OutputSlot, WorkFolder

    single = plan.output_given
    if started is not None and [j.target for j in started.jobs] != [t.name for t in plan.targets]:
        objcache.close(started)  # a recipe that is not this plan's: begin again
        started = None
    if started is None:
        _check_outputs(plan)
        slot = OutputSlot(plan.sources[0].output) if single else None
        work = WorkFolder(keep=False, kind="cc")
        jobs: list[objcache.Job] = []
    else:
        slot, work, jobs = started.slot, started.work, started.jobs
    tmp = work.path
    staged = os.path.join(tmp, "host.o") if single else ""
    begun = started
    try:
        cache, key = (started.cache, started.key) if started is not None else (None, None)
        if started is None and single:
            cache = objcache.open_cache(plan)
        if started is None and cache is not None:
            src = plan.sources[0]
            depfile = os.path.join(tmp, "deps.d")
            deps, host_depfile = objcache.dependency_options(plan, depfile)
            _start_preprocessing(plan, tmp, jobs, deps)
            if any(job.deps for job in jobs):
                assert slot is not None
                parts = objcache.static_parts(plan, cache)
                begun = objcache.Started(work, slot, jobs, cache,
                                         host_argv=_host_preprocessing(plan, jobs, deps,
                                                                       depfile, host_depfile))
                from ..cache.native import native_options

                native = native_options(plan.expanded)
                objcache.serve(begun, plan.argv, src.path, parts, depfile, host_depfile,
                               native)
                if begun.hit:
                    if host_said_by_source is not None:
                        host_said_by_source[src.path] = begun.host_said
                    return 0
                key = begun.key
                if recipe is not None:
                    objcache.write_recipe(cache, *recipe, plan, parts, begun, host_depfile,
                                          native)
        if not jobs:
            _start_preprocessing(plan, tmp, jobs)
        host_said = ""
        log = os.path.join(tmp, "host.out")
        if single:
            try:
                host_said = _host_compile(host_argv(plan, staged), log)
            except ToolError as e:
                raise ToolError(f"host compile failed (exit status {e.exit_code}): "
                                f"{runner.show(plan.argv)}", e.exit_code, e.output) from None
        said = _wait(jobs)
        if not single:
            host_said = _host_compile(plan.argv, log)
        show_target_warnings(said, host_said)
        if host_said_by_source is not None:
            for src in plan.sources:
                host_said_by_source[src.path] = host_said
        for si, src in enumerate(plan.sources):
            fat = _fat_object(plan, si, src, tmp, staged)
            if cache is not None and key is not None:
                objcache.store(cache, key, fat, host_said)
            _install(fat, slot, src.output)
        if target_compile:
            _target_compile(plan, tmp, host_said, cache)
        elif cache is not None:
            cache.trim()
    finally:
        for job in jobs:  # after a failure: no preprocessor outlives its folder
            job.kill()
        if begun is not None and begun.host_job is not None:
            begun.host_job.kill()
        if slot is not None:
            slot.close()
        work.close()
    return 0


def _check_outputs(plan: CompilePlan) -> None:
    """Refuse, before any work, an output that is a folder or the source itself."""
    for src in plan.sources:
        problem = objcache.output_problem(src.path, src.output)
        if problem is not None:
            raise UsageError(problem)


def _start_preprocessing(plan: CompilePlan, tmp: str, jobs: list[Job],
                         deps: list[str] | None = None) -> None:
    """Start each source's preprocessing for each target. `deps` (dependency options) go to
    the first one the host compiler runs with the host's preprocessing options, whose code is
    then the host's but for the target macros (fatcache.py)."""
    for si, src in enumerate(plan.sources):
        for target in plan.targets:
            out = os.path.join(tmp, f"{si}-{target.name}.i")
            argv = target.capture_argv(plan.compiler, plan.preprocess_args, src.language,
                                       src.path, out)
            given = bool(deps) and not any(j.deps for j in jobs) and "-E" in argv and \
                argv[: 1 + len(plan.preprocess_args)] == [plan.compiler, *plan.preprocess_args]
            if given:
                argv = [*argv, *(deps or ())]
            if runner.VERBOSE:
                print(f"offlink: {runner.show(argv)}", file=sys.stderr, flush=True)
            job = Job(argv, os.path.join(tmp, f"{si}-{target.name}.err"), given, src.path,
                      target.name)
            try:
                job.start()
            except (FileNotFoundError, PermissionError):
                raise ToolError(f"compiler '{argv[0]}' not found") from None
            jobs.append(job)


def _host_preprocessing(plan: CompilePlan, jobs: list[Job], deps: list[str], depfile: str,
                        host_depfile: str | None) -> list[str]:
    """The host's own preprocessing, for the object cache where a file names a target macro:
    the target preprocessing that writes the depfile without that target's defines, writing
    objcache.HOST_CODE's .i (and, where the host compile writes a depfile, its .d: the host's
    list of files, which a hit writes)."""
    from .fatcache import HOST_CODE, host_capture

    job = next(j for j in jobs if j.deps)
    target = next(t for t in plan.targets if t.name == job.target)
    src = plan.sources[0]
    tmp = os.path.dirname(depfile)
    argv = target.capture_argv(plan.compiler, plan.preprocess_args, src.language, src.path,
                               os.path.join(tmp, f"{HOST_CODE}.i"))
    host_deps = [] if host_depfile is None else \
        [os.path.join(tmp, f"{HOST_CODE}.d") if w == depfile else w for w in deps]
    return host_capture(argv, 1 + len(plan.preprocess_args), target.defines(), host_deps)


def _host_compile(argv: list[str], log: str) -> str:
    """The host compile; what it says is shown and returned (to leave the target side's
    identical warnings out)."""
    said = _spawn(argv, "host compile", log)
    if said:
        sys.stderr.write(said)
        sys.stderr.flush()
    return said


def _spawn(argv: list[str], what: str, log: str) -> str:
    """Run a tool as runner.run does (stdin inherited, stdout and stderr together, a missing
    tool or a failure one ToolError naming `what` and carrying the output), what it said
    going through the file `log`: with run.spawn, as objcache.Job runs the preprocessing,
    so that `offlink cc` imports no subprocess (~5 ms of every one)."""
    if runner.VERBOSE:
        print(f"offlink: {runner.show(argv)}", file=sys.stderr, flush=True)
    actions = [(os.POSIX_SPAWN_OPEN, 1, log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
               (os.POSIX_SPAWN_DUP2, 1, 2)]
    pid = runner.spawn_tool(argv, actions, what)
    try:
        _, status = os.waitpid(pid, 0)
    except BaseException:  # Ctrl-C: no compiler outlives its work folder
        import signal

        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        os.waitpid(pid, 0)
        raise
    code = os.waitstatus_to_exitcode(status)
    with open(log, "rb") as f:
        said = f.read().decode(errors="replace")
    if code != 0:
        raise ToolError(f"{what} failed (exit status {code}): {runner.show(argv)}",
                        exit_code=code if code > 0 else 128 - code, output=said)
    return said


def _wait(jobs: list[Job]) -> list[str]:
    """Wait for the target preprocessing; what each said (its warnings)."""
    failed = None
    said = []
    for job in jobs:
        code = job.wait()
        text = job.said()
        if code != 0 and failed is None:
            failed = ToolError(f"preprocessing {job.source} for target {job.target} failed: "
                               f"{runner.show(job.argv)}", code, text)
        said.append(text)
    if failed:
        raise failed
    return said


def show_target_warnings(said: list[str], host_said: str) -> None:
    """Warnings of the target side (e.g. a #warning under #ifdef __OFFLINK_TARGET__), once:
    lines the host compile said already, or another target said, are left out."""
    if not any(said):
        return
    from ..link.compile import unsaid

    seen = set(host_said.splitlines())
    for text in said:
        sys.stderr.write(unsaid(text, seen))
    sys.stderr.flush()


def _fat_object(plan: CompilePlan, si: int, src: Source, tmp: str, host_obj: str) -> str:
    """The host object with the payload sections added, in the work folder: its path."""
    from ..formats.payload import build_record

    args = []
    for target in plan.targets:
        payload = _payload(plan, si, src, target, tmp)
        blob = os.path.join(tmp, f"{si}-{target.name}.payload")
        with open(blob, "wb") as f:
            f.write(build_record(payload))
        name = payload.section_name
        args += ["--add-section", f"{name}={blob}",
                 "--set-section-flags", f"{name}=exclude,readonly,contents"]
    host_obj = host_obj or src.output
    fat = os.path.join(tmp, f"{si}-fat.o")
    _spawn(["objcopy", *args, host_obj, fat], f"adding target code to {src.output}",
           os.path.join(tmp, f"{si}-objcopy.out"))
    os.chmod(fat, 0o666 & ~_umask())
    return fat


def _install(fat: str, slot: OutputSlot | None, output: str) -> None:
    """Move the fat object to the output, replacing it whole."""
    if slot is None:  # several sources: each object compiled in place, replaced whole
        from ..link.staging import OutputSlot

        slot = OutputSlot(output)
    try:
        slot.install(fat)
    finally:
        slot.close()


def _payload(plan: CompilePlan, si: int, src: Source, target: Target, tmp: str) -> Payload:
    """The payload of source `si` for `target`, from its preprocessed code in `tmp`."""
    from ..formats.payload import Payload

    with open(os.path.join(tmp, f"{si}-{target.name}.i"), "rb") as f:
        code = f.read()
    return Payload(target.name, target.code_kind(src.language), src.path, plan.compiler,
                   tuple(target.payload_options(plan.target_options)), code, plan.offered)


def _target_compile(plan: CompilePlan, tmp: str, host_said: str = "",
                    cache: Cache | None = None) -> None:
    """Compile each new fat object's target code now and leave it in the link cache.

    The link looks its CUs up by the same key (cache/store.py), so after a build system's
    parallel compile phase it finds them all there and compiles none; the fat object keeps
    its payload, so a link without this cache compiles as before. This runs in the cc
    process, after the fat object is in place, one compile at a time: the build system
    already runs as many cc processes as its -j allows. A failure here is not this
    compile's to report (the host object is right and the link gives the same error with
    the compiler's output), so it is left to the link; --verbose says so. What a target
    compiler says is shown here, as a device compile's warnings are, less what the host
    compile said already (the link shows no cached CU's warnings again).
    OFFLINK_CC_TARGET_COMPILE=0, OFFLINK_NO_CACHE=1 or OFFLINK_CACHE_SIZE=0 turn it off.
    `cache`: the object cache's, where it stored the fat object (one opening, one trim of
    the cache folder, which lists every entry, per compile).
    """
    if not settings.flag("OFFLINK_CC_TARGET_COMPILE"):
        if cache is not None:
            cache.trim()
        return
    from ..formats.payload import parse_records
    from ..link.compile import fill_cache
    from ..model import CU

    if cache is None:
        from ..cache.store import Cache

        try:
            cache = Cache.open()
        except UsageError:  # a cache folder the link refuses too: it says so there
            return
        if cache is None:
            return
    # cc has no --target-launcher: the environment decides (pipeline.target_launcher)
    launcher: list[str] = []
    if settings.text("OFFLINK_TARGET_LAUNCHER"):
        import shlex

        launcher = shlex.split(settings.text("OFFLINK_TARGET_LAUNCHER"))
    said: list[str] = []
    for si, src in enumerate(plan.sources):
        for target in plan.targets:
            # The record as the link reads it, so the key is the one the link computes.
            with open(os.path.join(tmp, f"{si}-{target.name}.payload"), "rb") as f:
                payload = parse_records(f.read(), src.output, lazy=True)[0]
            cu = CU(src.output, payload)
            folder = os.path.join(tmp, f"{si}-{target.name}-target")
            os.mkdir(folder)
            compiled = fill_cache([cu], target.for_inputs([cu]), folder, cache, launcher)
            said.extend(c.warnings for c in compiled)
    show_target_warnings(said, host_said)
    cache.trim()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
