"""`offlink cc`'s warm path: a compile served from the object cache by its recipe, before (and
usually instead of) planning it.

fatcache.py describes the cache, its key and the recipe, and writes both; this module reads
them. It is the one start-up-bound path of offlink (a warm compile must cost little more than
its preprocessing), so it imports none of the planning (plan.py, the targets, driver_args) and
starts its tools itself; tests/test_cc_cache.py fixes what a warm hit imports.
"""

from __future__ import annotations

import os
import signal
import stat
import sys

from .. import run as runner
from .. import settings
from ..cache.keys import hash_parts
from ..cache.native import native_expansion
from ..cache.store import Cache
from ..digest import sha256
from ..errors import UsageError
from ..link.staging import OutputSlot, WorkFolder
from .depfile import marked

HOST_CODE = "host-code"  # the host preprocessing's files in the work folder: .i, .d, .err
# Environment variables in the key: the language of what the compiler says, and which
# compiler pieces it runs (the preprocessed code covers the include paths).
KEYED_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "GCC_EXEC_PREFIX", "COMPILER_PATH")
# Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec: a tool
# gets them back at their defaults, as from subprocess (restore_signals) and a plain build.
RESTORED_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)


def say(argv: list[str], verbose: bool, prefix: str = "") -> None:
    """--verbose's line for a command offlink runs."""
    if verbose:
        print(f"offlink: {prefix}{runner.show(argv)}", file=sys.stderr, flush=True)


class Job:
    """One preprocessing, started with os.posix_spawnp; what it says goes to the file `err`.
    `deps`: it writes the depfile the object cache reads; `source` and `target` name it in an
    error."""

    def __init__(self, argv: list[str], err: str, deps: bool, source: str, target: str):
        self.argv = argv
        self.err = err
        self.deps = deps
        self.source = source
        self.target = target
        self.pid = 0
        self.returncode: int | None = None

    def start(self) -> None:
        """Start it (OSError where the tool cannot be started)."""
        actions = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 2, self.err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                    0o600)]
        self.pid = os.posix_spawnp(self.argv[0], self.argv, os.environ, file_actions=actions,
                                   setsigdef=RESTORED_SIGNALS)

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
                 host_argv: list[str] | None = None, verbose: bool = False):
        self.work = work
        self.slot = slot
        self.jobs = jobs
        self.cache = cache
        self.key = key
        self.hit = hit
        self.host_argv = host_argv
        self.verbose = verbose
        self.host_job: Job | None = None
        self.marked: bool | None = None
        self.host_said = ""  # on a hit: what the host compile said
        self.from_recipe = False

    def start_host(self, source: str) -> None:
        """Start the host preprocessing (what it says is not shown: the host compile says
        it, or the cache repeats what that said)."""
        assert self.host_argv is not None
        job = Job(self.host_argv, os.path.join(self.work.path, f"{HOST_CODE}.err"), False,
                  source, "host")
        say(job.argv, self.verbose)
        job.start()
        self.host_job = job


def close(started: Started) -> None:
    """Stop what is left of a started compile and remove its work folder."""
    for job in started.jobs:  # after a failure: no preprocessor outlives its folder
        job.kill()
    if started.host_job is not None:
        started.host_job.kill()
    started.slot.close()
    started.work.close()


# -- the key and the lookup ----------------------------------------------------------------
def key(cache: Cache, parts: list[str], compiler: str, codes: list[bytes],
        host_code: bytes | None, native: list[str]) -> str | None:
    """The fat object's key from fatcache.static_parts, each target's preprocessed code (in
    the plan's order of targets) and, where a file names a target macro, the host's own (else
    the host's code is the target's but for those macros), and what the `native` options
    (cache/native.py's native_options) stand for on this machine; None when not to be cached."""
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
                      *(f"{name}={os.environ.get(name, '')}" for name in KEYED_ENV),
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
    for job in jobs:  # one source: compile.py's `{si}-{target}.i`
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
    data, host_said = found
    fat = os.path.join(tmp, "0-fat.o")
    mask = os.umask(0)
    os.umask(mask)
    fd = os.open(fat, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 & ~mask)
    with open(fd, "wb") as f:
        f.write(data)
    say(command, started.verbose, "from cache: ")
    if host_depfile is not None:  # the host's own when it was run (it may list other files)
        with open(os.path.join(tmp, f"{HOST_CODE}.d") if mark else depfile, "rb") as f:
            text = f.read()
        with open(host_depfile, "wb") as f:
            f.write(text)
    started.slot.install(fat)
    if host_said:
        sys.stderr.write(host_said)
        sys.stderr.flush()
    show_target_warnings([job.said() for job in jobs], host_said)
    started.hit = True
    started.host_said = host_said


def show_target_warnings(said: list[str], host_said: str) -> None:
    """Warnings of the target side (e.g. a #warning under #ifdef __OFFLINK_TARGET__), once:
    lines the host compile said already, or another target said, are left out."""
    if not any(said):
        return
    from ..link.compile import unsaid  # the link's own rule, for the rare compile that warns

    seen = set(host_said.splitlines())
    for text in said:
        sys.stderr.write(unsaid(text, seen))
    sys.stderr.flush()


# -- the recipe ----------------------------------------------------------------------------
def recipe_key(cache: Cache, argv: list[str], targets: list[str],
               offered: tuple[str, ...]) -> str:
    """What the plan of `offlink cc ARGV` is a function of (no response file among ARGV):
    `targets` as given (--offload-target), else $OFFLINK_TARGETS decides; and offlink's own
    code, which reads ARGV."""
    return cache.key("offlink cc recipe", os.getcwd(), os.uname().machine,
                     os.environ.get("PATH", ""), "\0".join(argv), "\0".join(targets),
                     "" if targets else settings.text("OFFLINK_TARGETS"), "\0".join(offered))


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


def warm(argv: list[str], targets: list[str], offered: tuple[str, ...],
         verbose: bool = False) -> Started | None:
    """`offlink cc ARGV` from its recipe, before (and usually instead of) planning it: None
    when there is no recipe (or the cache is off); else what `serve` made of it."""
    if any(w.startswith("@") for w in argv):
        return None
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
    slot = OutputSlot(r["output"])
    work = WorkFolder(keep=False, kind="cc")
    jobs: list[Job] = []
    started = Started(work, slot, jobs, cache,
                      host_argv=[w.replace("\0", work.path) for w in r["host_capture"]],
                      verbose=verbose)
    started.from_recipe = True
    try:
        for i, capture in enumerate(r["captures"]):
            job = Job([w.replace("\0", work.path) for w in capture],
                      os.path.join(work.path, f"0-{r['labels'][i]}.err"), i == r["deps_job"],
                      r["source"], r["labels"][i])
            say(job.argv, verbose)
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


def output_problem(source: str, output: str) -> str | None:
    """What is wrong with writing `output` from `source`, before any work: an output that is a
    folder or the source itself (the host compile writes a staged file, so the compiler's own
    check would not see it); None when nothing is. The plan's check and `warm` both ask."""
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
