"""A clang link's linker command, from the driver's own `-###` expansion kept in the cache: the
image and host links of a relink start the linker without starting clang's driver first.

clang's driver, started for a link whose inputs are all objects and libraries, only works out
the linker's command line and runs it, which delays ld by a driver's start
(benchmarks/health/RESULTS.md), and offlink runs two such links (the image's and the host's).
What the driver works out depends on its words, its own release, the environment it reads,
its working directory and the files and folders it finds (crt files, GCC's installation,
library folders), never on the inputs' content (a `.o` is an object by its name):
`clang -###` prints it without running it.

So the expansion is kept in the cache under a key of the driver's identity
(cache.tool_identity: its resolved path, content and `--version`), its words (the link's work
folder, whose name changes from link to link, as a token), the working directory and the
environment variables a driver reads; with it, the stamp (cache.file_stamp) of every file and
folder the driver added to the command, of the folders they are in, of the driver's own folder
(where clang looks for configuration files) and of PATH's folders (where it looks for a linker
after its own). A link whose entry is found and whose stamps are all as they were runs the
linker job itself, and shows the driver's other lines (its warnings) as the driver would.
Anything else asks the driver: an expansion with more than one job (an input the driver would
compile) or none, a driver that fails (it then runs as given, and says why itself), words that
make a driver print rather than link (-v, -###, --help, -print-*), response files (`@file`:
their content is not in the key), no cache, or a driver that is not clang (GCC's drivers run
collect2, which does more than run ld).

An entry is stored only when every file it stamps was last changed more than _SETTLED seconds
before (a file rewritten within one timestamp tick could keep its stamp), as relink.py's.
Installing another GCC adds a folder beside the one the driver chose (its folder's stamp moves);
upgrading one replaces its files (their inodes move); a new configuration file beside the
driver moves that folder's stamp: each asks the driver again.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ... import run as runner
from ...cache.freshness import SETTLED as _SETTLED
from ...cache.keys import file_stamp
from ...cache.store import in_thread
from ...driver_args import is_clang

if TYPE_CHECKING:
    from ...cache.store import Cache

WORK = "\0offlink-work\0"  # the link's work folder in kept words (no word can hold a NUL)
# The environment a clang driver reads when it plans a link (tool and library search, its
# overrides and configuration files), and the loader's path (which libclang-cpp it runs).
_ENV_NAMES = ("PATH", "COMPILER_PATH", "LIBRARY_PATH", "GCC_EXEC_PREFIX", "LD_LIBRARY_PATH",
              "SDKROOT", "XDG_CONFIG_HOME", "HOME")
_ENV_PREFIXES = ("CCC_", "CLANG_", "LLVM_")
# Words after which a driver prints instead of linking, or reads what the key does not hold.
_PRINTING = ("-v", "-###", "--verbose", "--help", "-help", "--version", "-save-temps")
# Lines clang prints before its jobs that are not diagnostics (not shown again).
_HEADER = ("Target: ", "Thread model: ", "InstalledDir: ", "Configuration file: ",
           "Build config: ", "System configuration file directory: ",
           "User configuration file directory: ")


_CONTEXT: tuple[Cache, str] | None = None  # the link under way: its cache and work folder
# The answers the link under way was given by a driver the cache does not know (kept there
# only while the host link runs: put_later), by the words' shape and the environment read.
_ANSWERS: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[list[str] | None, list[str]]] = {}


def use(cache: Cache | None, folder: str = "") -> None:
    """Name the cache and the work folder of the link under way (None: no link, or no cache):
    run_link's links go through their kept expansions only then."""
    global _CONTEXT
    join_early()
    _ANSWERS.clear()
    _CONTEXT = (cache, folder) if cache is not None and folder else None


_EARLY: list = []  # expand_early's (words, thread's cache.store.Done), joined before its link


def expand_early(argv: list[str], stand_ins: list[str], after_others: bool = False) -> None:
    """Start asking the driver for the expansion of a link the link under way (`use`) will
    run later, whose files `stand_ins` (in its work folder) are not written yet: the driver is
    asked in a scratch folder inside the work folder, where empty files stand in for them (it
    checks that its inputs exist, never reads them), and its answer waited for in a thread:
    kept under the key the link will look for, or, from a driver the cache does not know (so
    keys no entry yet), given to the link as it is (its entry kept while the host link runs).
    A cold link then does not wait for `-###` there. Stand-ins that are one run of the link's
    words (an image link's objects) are asked as their first alone, whose word in the answer
    is then the run (a link's driver passes its inputs on in order; one file made, not one
    per object). `after_others`: asked once those started before have their answers (the host
    link's, needed last, does not take a CPU from the image link's on the way)."""
    if _CONTEXT is None or not expandable(argv):
        return
    before = [done for _, done in _EARLY] if after_others else []
    cache, folder = _CONTEXT
    scratch = os.path.join(folder, ".expand")
    moved = [w.replace(folder, scratch) for w in argv]
    asked_words, made, splice = moved, stand_ins, None
    standing = set(stand_ins)
    at = [i for i, w in enumerate(argv) if w in standing]
    if len(at) == len(stand_ins) > 1 and at == list(range(at[0], at[0] + len(at))):
        run = moved[at[0]:at[-1] + 1]
        asked_words = moved[:at[0] + 1] + moved[at[-1] + 1:]
        made, splice = [argv[at[0]]], (run[0], run)

    def stand_in() -> None:
        for path in made:
            path = path.replace(folder, scratch)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "wb").close()

    def start() -> runner.Captured | None:
        if cache.knows_tool(moved[0]):
            return None  # its answer may be kept: linker_job looks first
        try:
            stand_in()
        except OSError:
            return None  # the thread's linker_job tries again, and the link then says why
        return ask(asked_words)

    # Started here, not in the thread, where it would wait for the interpreter's lock.
    first = None if before else start()

    def early() -> None:  # what fails here, the link asks again, and says
        for done in before:
            done.join()
        asked = first if not before else start()
        try:
            linker_job(moved, scratch, cache, quiet=True, before_asking=stand_in, asked=asked,
                       early=True, asked_words=asked_words, splice=splice)
        finally:
            if asked is not None:
                asked.end()  # the cache had it after all, or the thread failed

    _EARLY.append((tuple(_shape(w, folder) for w in argv), in_thread(early)))


def join_early(argv: Sequence[str] | None = None) -> None:
    """Wait for expand_early's threads (those asking for `argv`'s expansion only)."""
    shape = None
    if argv is not None and _CONTEXT is not None:
        shape = tuple(_shape(w, _CONTEXT[1]) for w in argv)
    for item in list(_EARLY):
        if shape is None or item[0] == shape:
            _EARLY.remove(item)
            item[1].join()


def expandable(argv: Sequence[str]) -> bool:
    """Whether a driver command may be run through a kept expansion (a clang driver, no word
    that makes it print or read a response file)."""
    if not is_clang(argv[0]):
        return False
    return not any(w in _PRINTING or w.startswith(("@", "-print", "--print", "-M"))
                   for w in argv[1:])


def run_link(argv: list[str], what: str, *, here: bool = False,
             job: Callable[[list[str]], bool] | None = None) -> None:
    """Run the link `argv` (clang's driver or another), as run.run (here: run.run_here, the
    tool on offlink's own output), through its kept expansion when the link under way (`use`)
    has a cache and there is one (linker_job); `job(words)`, when given, runs the linker job
    itself where it returns True."""
    join_early(argv)
    kept = linker_job(argv, _CONTEXT[1], _CONTEXT[0]) if _CONTEXT is not None else None
    if kept is None:
        _run(argv, what, here)
        return
    words, notes = kept
    for line in notes:
        print(line, file=sys.stderr)
    if job is None or not job(words):
        _run(words, what, here)


def _run(argv: list[str], what: str, here: bool) -> None:
    if here:
        runner.run_here(argv, what)
    else:
        runner.run(argv, what)


def linker_job(argv: Sequence[str], folder: str, cache: Cache | None, quiet: bool = False,
               before_asking=None, asked: runner.Captured | None = None, early: bool = False,
               asked_words: Sequence[str] | None = None,
               splice: tuple[str, list[str]] | None = None
               ) -> tuple[list[str], list[str]] | None:
    """The one job clang's driver would run for the link `argv` and the other lines it would
    print, from the cache when the files and folders the expansion names are as they were
    (else the driver is asked with `-###` and the answer kept); None when the driver must run
    itself (see the module's words). `before_asking` is called before the driver is; `asked`
    is its `-###` started already (ask), taken when the cache has no answer. `early`
    (expand_early): from a driver the cache does not know, the answer is given to this link's
    own linker_job of the same words and kept in the cache while the host link runs.
    `asked_words`: the words the driver is asked with, where `splice` (word, run) says the
    answer's one `word` stands for `run` (expand_early's; no answer without that one word)."""
    if cache is None or not expandable(argv):
        return None
    shape = [_shape(w, folder) for w in argv]
    env = [f"{k}={v}" for k, v in sorted(os.environ.items())
           if k in _ENV_NAMES or k.startswith(_ENV_PREFIXES)]
    answered = _ANSWERS.pop((tuple(shape), tuple(env)), None)
    if answered is not None:  # expand_early's, for this link
        kept, notes = answered
        if kept is None:
            return None
        if not quiet:
            _said(argv, "printed by -### beside the earlier stages")
        return [_place(w, folder) for w in kept], notes

    def key() -> str | None:
        ident = cache.tool_identity(argv[0])
        return None if ident is None else cache.key(
            "driver job", ident, os.getcwd(), "\0".join(env), str(len(shape)), *shape)

    # Early, a driver the cache does not know has no expansion in it: its answer's key (which
    # waits for the driver's `--version`) is made while the host link runs.
    known = not early or cache.knows_tool(argv[0])
    found_key = None
    if known:
        found_key = key()
        if found_key is None:
            return None
        entry = cache.get(found_key, count=False)  # not an object or image "from cache"
        if entry is not None and _unchanged(entry.meta.get("watch")):
            job, notes = entry.meta.get("job"), entry.meta.get("notes")
            if job is None:
                return None
            if isinstance(job, list) and isinstance(notes, list) and job:
                if not quiet:
                    _said(argv, "kept in the cache")
                return [_place(w, folder) for w in job], notes
    if before_asking is not None and asked is None:
        before_asking()
    found = expand(asked_words or argv, asked)
    if found is None:
        return None
    job, notes, header = found
    if job is not None and splice is not None:
        word, run = splice
        if job.count(word) != 1:
            return None  # not the answer for the whole run: the link asks for its own
        at = job.index(word)
        job = [*job[:at], *run, *job[at + 1:]]
    given = _given(argv)
    watch = _watched(job, given, header)
    stamps = [[p, _stamp(p)] for p in watch]
    now = time.time()
    kept = None if job is None else [_shape(w, folder) for w in job]
    if not known:
        _ANSWERS[tuple(shape), tuple(env)] = (kept, notes)
    if all(_settled(p, now) for p in watch):
        meta = {"job": kept, "notes": notes, "watch": stamps}
        if found_key is not None:
            cache.put(found_key, meta, b"")
        else:
            cache.put_later(key, meta, b"")
    if job is None:
        return None
    if not quiet:
        _said(argv, "printed by -###")
    return job, notes


def _said(argv: Sequence[str], how: str) -> None:
    if runner.VERBOSE:
        print(f"offlink: the linker job of {runner.show(argv)}, {how}:", file=sys.stderr,
              flush=True)


def ask(argv: Sequence[str]) -> runner.Captured | None:
    """clang's `-###` for `argv`, started (expand takes its answer); None if it cannot start."""
    try:
        return runner.Captured([argv[0], "-###", *argv[1:]])
    except OSError:
        return None


def expand(argv: Sequence[str], asked: runner.Captured | None = None
           ) -> tuple[list[str] | None, list[str], list[str]] | None:
    """clang's `-###` answer for `argv` (from `asked`, when started already): its one job
    (None when it has another number, or a response file), its diagnostics' lines and its
    header lines; None when the driver fails."""
    proc = asked if asked is not None else ask(argv)
    if proc is None:
        return None
    status, said = proc.wait()
    if status != 0:
        return None
    lines = said.decode(errors="surrogateescape").splitlines()
    jobs, notes, header = [], [], []
    for line in lines:
        if line.startswith(' "'):
            jobs.append(parse_job(line))
        elif line.startswith(_HEADER) or (not jobs and not notes and " version " in line):
            header.append(line)
        elif line.strip():
            notes.append(line)
    if len(jobs) != 1 or not jobs[0] or any(w.startswith("@") for w in jobs[0]):
        return None, notes, header
    return jobs[0], notes, header


def parse_job(line: str) -> list[str]:
    """The words of a job line of `-###` (llvm::sys::printArg: each in double quotes, `"`, `\\`
    and `$` after a backslash)."""
    words = []
    i, n = 0, len(line)
    while i < n:
        if line[i] != '"':
            i += 1
            continue
        i += 1
        word = []
        while i < n and line[i] != '"':
            if line[i] == "\\" and i + 1 < n:
                i += 1
            word.append(line[i])
            i += 1
        i += 1
        words.append("".join(word))
    return words


def _shape(word: str, folder: str) -> str:
    return word.replace(folder, WORK) if folder else word


def _place(word: str, folder: str) -> str:
    return word.replace(WORK, folder) if folder else word


def _given(argv: Sequence[str]) -> set[str]:
    """The words the command gave (and the pieces of its -Wl, words): paths among them are
    its own inputs, not what the driver found, and are not stamped."""
    given = set(argv)
    for w in argv:
        if w.startswith("-Wl,"):
            given.update(w[4:].split(","))
    return given


def _watched(job: list[str] | None, given: set[str], header: list[str]) -> list[str]:
    """The files and folders the driver added to the job, the folders they are in, the
    driver's own folder (InstalledDir: configuration files) and the folders of PATH."""
    # The folders clang searches for the linker after its own (PATH's, COMPILER_PATH's): an
    # `ld` put there would be the driver's choice next time.
    searched = {p for var in ("PATH", "COMPILER_PATH")
                for p in os.environ.get(var, "").split(os.pathsep) if p.startswith("/")}
    paths = set()
    for line in header:
        if line.startswith(("InstalledDir: ", "Configuration file: ")):
            paths.add(line.split(": ", 1)[1])
    for w in job or ():
        if w in given or WORK in w:
            continue
        if w.startswith("-L"):
            w = w[2:]
        elif "=" in w and not w.startswith("/"):
            w = w.split("=", 1)[1]
        if w.startswith("/"):
            paths.add(w)
    out = set(searched)  # the folders themselves (not the folders they are in)
    for p in paths:  # as written (the kernel resolves `..` after symlinks) and its folder
        out.add(p)
        out.add(os.path.dirname(os.path.normpath(p)))
    return sorted(out)


def _stamp(path: str) -> str:
    try:
        return file_stamp(os.stat(path))
    except OSError:
        return "missing"


def _settled(path: str, now: float) -> bool:
    try:
        return now - os.stat(path).st_ctime > _SETTLED
    except OSError:
        return True


def _unchanged(watch) -> bool:
    if not isinstance(watch, list):
        return False
    for item in watch:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            return False
        if _stamp(item[0]) != item[1]:
            return False
    return True
