"""Stage 3, compile: each CU's target code through its target's compiler, in parallel.

One compile per CU per target. A CU's result is its target object and the symbols it offers
(the target decides which: for ELF targets, the external functions and variables defined).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from .. import progress, settings
from .. import run as runner
from ..cache import native
from ..cache.keys import hash_from, hash_parts, key_prefix, normalise, uses_debug_info
from ..cache.store import Cache, Entry
from ..errors import OfflinkError, ToolError
from ..jobs import Children, run_jobs
from ..jobserver import Slots
from ..model import CU, Offer
from ..plugins import CompiledCU, Target


def object_names(i: int, cu: CU, target: Target, workdir: str) -> tuple[str, str]:
    """The target code's file and the target object of the i-th CU in `workdir`."""
    base = os.path.join(workdir, f"{i:04d}-{os.path.basename(cu.payload.source)}")
    return base + target.source_suffix(cu), base + ".o"


def planned(cus: Sequence[CU], target: Target, workdir: str,
            cache: Cache | None) -> list[tuple[str, str, list[str], str]]:
    """Per CU: its code's file, its target object, the compile command ([] when the code is
    the object already) and the object's cache key ("" without a cache or a command).

    Only keys are made here, no entry is read: a relink whose image is in the cache needs
    nothing more from its objects (device.cached_image)."""
    out = []
    cpus: dict[tuple, str] = {}  # native_cpu's, by driver and words: once per link
    for i, cu in enumerate(cus):
        src, obj = object_names(i, cu, target, workdir)
        argv = target.compile_argv(cu, src, obj)
        key = ""
        if cache is not None and argv:
            compiler = cache.tool_identity(target.identity_tool(cu, argv))
            if compiler is None:
                raise ToolError(f"target compile of {cu.label} for {target.name}: target "
                                f"compiler '{argv[0]}' not found")
            # what runs the command, where a target runs it another way (run_compile)
            compiler += target.compile_engine(argv)
            words = native_words(cu, argv)
            if words:  # the object depends on the CPU: a shared cache is keyed by it
                memo = (cu.payload.compiler, *words)
                if memo not in cpus:
                    cpus[memo] = native_cpu(cache, cu.payload.compiler, words)
                compiler += cpus[memo]
            key = object_key(cache, target, cu, argv, {src: "<source>", obj: "<object>",
                                                       workdir: "<tmp>"}, compiler, workdir)
        out.append((src, obj, argv, key))
    return out


# key_prefix's hash objects, by what they hashed: everything in an object's key but the CU's
# code is shared by most CUs of a link, so a CU costs one hash update of its code.
_PREFIXES: dict[tuple, Any] = {}


def object_key(cache: Cache, target: Target, cu: CU, argv: Sequence[str],
               paths: dict[str, str], compiler: str, tmp: str = "") -> str:
    """The key of a CU's target object: the CU's code (Payload.code_id), kind and offered
    list, the target, the compile command with its temporary `paths` named alike (`tmp`, the
    folder they are in) and the `compiler`'s identity; with -g the working directory too
    (debug info records it)."""
    p = cu.payload
    words = tuple(normalise(argv, paths, tmp))
    cwd = os.getcwd() if uses_debug_info(words) else ""
    code = cache.code_identity()
    memo = (code, type(target), target.name, p.code_kind, words, tuple(p.options),
            tuple(p.offered), compiler, cwd)
    h = _PREFIXES.get(memo)
    if h is None:
        h = _PREFIXES[memo] = key_prefix(code, "object", type(target).__qualname__,
                                         target.name, p.code_kind, "\0".join(words),
                                         "\0".join(p.options), "\0".join(p.offered),
                                         compiler, cwd)
    return hash_from(h, p.code_id)


def as_is(cu: CU, target: Target, obj: str, cache: Cache | None) -> CompiledCU:
    """A CU whose code is its target object already (clang's device object without
    -foffload-lto): nothing to compile. With a cache it gets a key all the same, so the image
    can come from the cache, made from the code's SHA-256 (Payload.code_id, which a relink's
    record knows without reading the object: link/relink.py), and its offers are kept in the
    cache under that key: a relink reads no symbol of the object again. Where the target's
    image command only names the objects (image_argv_reads_objects) and its link is given
    them by write_objects (link_image_reads_objects), the object is not even written until
    the image is linked (device.device_link); a cached image needs none."""
    if cache is None:
        with open(obj, "wb") as f:
            f.write(cu.payload.code)
        return CompiledCU(cu, target, obj, target.offers(cu, obj))
    p = cu.payload
    key = cache.key("object as is", type(target).__qualname__, target.name, p.code_kind,
                    "\0".join(p.options), "\0".join(p.offered), p.code_id)
    offers = _kept_offers(cache.get(key))
    if offers is not None and not target.image_argv_reads_objects \
            and target.link_image_reads_objects:
        return CompiledCU(cu, target, obj, offers, key, from_code=True)
    with open(obj, "wb") as f:
        f.write(p.code)
    if offers is None:
        offers = target.offers(cu, obj)
        # written while the host link runs (pipeline): a cold link of many CUs does not wait
        cache.put_later(key, _offers_meta(offers), b"")
    return CompiledCU(cu, target, obj, offers, key)


def _offers_meta(offers: Iterable[Offer]) -> dict:
    """An object entry's metadata: the object's offers (read back by _kept_offers)."""
    return {"offers": [[o.name, o.kind, o.size, o.strong] for o in offers]}


def _kept_offers(entry: Entry | None) -> tuple[Offer, ...] | None:
    """The offers kept in an object entry (ours: its SHA-256 checked), None if none."""
    if entry is None:
        return None
    try:
        return tuple(Offer(str(n), str(k), int(s), bool(st))
                     for n, k, s, st in entry.meta["offers"])
    except (KeyError, TypeError, ValueError):
        return None


def native_words(cu: CU, argv: list[str]) -> list[str]:
    """The words of a CU's target compile `argv` that ask for this machine's CPU, as its
    payload's driver takes them (cache.native_options): llvm-lto2's `--mcpu=native`
    (toolchains/llvm/openmp.py) is the payload's `-march=native`. Most commands have none."""
    if not any("native" in w for w in argv):
        return []
    words = native.native_options(argv)
    if "--mcpu=native" in argv:
        words += [w for w in native.native_options(list(cu.payload.options)) if w not in words]
    return words


def native_cpu(cache: Cache, driver: str, words: list[str]) -> str:
    """What the native `words` stand for on this machine, for an object's key: the
    expansion `offlink cc` keys its compiles by (cache.native_expansion: remembered in
    the cache, so a relink starts no driver), else this CPU's own entry."""
    ident = cache.tool_identity(driver)
    expansion = native.native_expansion(cache, driver, ident, words) if ident else None
    if expansion is None:  # the driver does not say: the CPU itself (or the machine) keys it
        expansion = hash_parts("cpu", native.cpu_identity() or os.uname().nodename)
    return f" native {expansion}"


def compile_all(cus: list[CU], target: Target, workdir: str, jobs: int | Slots,
                cache: Cache | None = None, launcher: Sequence[str] = (),
                output: str = "", show_progress: bool = True) -> list[CompiledCU]:
    """Compile every CU for `target`; the first failure (in CU order) is reported.

    `jobs` is a number of parallel compiles or the link's Slots (make's jobserver). With a
    cache, a CU whose key is known is not compiled; `launcher` prefixes each compile command
    (ccache, sccache, distcc, ...). `output` names the link's output in the progress display.
    """
    slots = jobs if isinstance(jobs, Slots) else Slots(jobs)
    results: list[CompiledCU | None] = [None] * len(cus)
    todo = []  # (index, source, object, argv, what, key) of the CUs to compile
    for i, (cu, (src, obj, argv, key)) in enumerate(zip(cus, planned(cus, target, workdir,
                                                                       cache))):
        what = f"target compile of {cu.label} for {target.name}"
        if not argv:  # the CU's code is its target object already: nothing to run
            results[i] = as_is(cu, target, obj, cache)
            continue
        if cache is not None:
            entry = cache.get(key)
            offers = _kept_offers(entry)
            if entry is not None and offers is not None:
                if runner.VERBOSE:
                    print(f"offlink: from cache: {runner.show(argv)}", file=sys.stderr)
                results[i] = CompiledCU(cu, target, obj, offers, key, cached=True,
                                        data=entry.data)
                continue
        todo.append((i, src, obj, argv, what, key))
    children = Children()
    engine = Engine(launcher, target) if launcher else None

    def one(j: int) -> CompiledCU:
        i, src, obj, argv, what, key = todo[j]
        cu = cus[i]
        with open(src, "wb") as f:
            f.write(cu.payload.code)
        if runner.which(argv[0]) is None:
            raise ToolError(f"{what}: target compiler '{argv[0]}' not found")
        if launcher and runner.which(launcher[0]) is None:
            raise ToolError(f"{what}: target launcher '{launcher[0]}' not found")
        start = time.perf_counter()
        if engine is None:
            said = target.run_compile(children, argv, what)
        else:
            said = engine.compile(children, argv, what)
        span = (start, time.perf_counter(), threading.get_ident())
        offers = target.offers(cu, obj)
        if cache is not None:
            with open(obj, "rb") as f:
                cache.put(key, _offers_meta(offers), f.read())
        return CompiledCU(cu, target, obj, offers, key, warnings=said, span=span)

    if todo:
        display = None
        if show_progress:  # not `offlink cc`'s (fill_cache)
            if not progress.wanted():
                pass
            elif progress.siblings():
                progress.announce(output, target.name, len(cus), len(cus) - len(todo))
            else:
                display = progress.CompileProgress(target.name, len(cus),
                                                   len(cus) - len(todo), output)
        try:
            if display is None:
                done = run_jobs(len(todo), one, slots, children=children)
            else:
                with display:
                    done = run_jobs(len(todo), one, slots, children=children,
                                    progress=display)
        finally:
            target.end_compiles()
        for (i, *_), compiled in zip(todo, done):
            results[i] = compiled
        if engine is not None:
            engine.report(len(todo))
    return [r for r in results if r is not None]


def fill_cache(cus: list[CU], target: Target, workdir: str, cache: Cache,
               launcher: Sequence[str] = ()) -> list[CompiledCU]:
    """Compile into the cache the CUs whose objects it lacks, one at a time (`offlink cc`);
    what was compiled (with what the compiler said), none when a compile failed: that CU is
    left to the link, which reports the failure with the compiler's output, as it would
    have without this step."""
    try:
        compiled = compile_all(cus, target, workdir, 1, cache, launcher, show_progress=False)
        cache.write_later().join()
    except OfflinkError as e:  # a compile that failed, offers the link refuses, ...
        if runner.VERBOSE:
            print(f"offlink: {e.args[0] if e.args else e}; left to the link", file=sys.stderr)
        return []
    return [c for c in compiled if not c.cached]


MANDATORY_ENV = "OFFLINK_TARGET_LAUNCHER_MANDATORY"


class Engine:
    """The target launcher (distcc, icecream, sccache, ccache) as a compile engine that may fail.

    A compile the launcher fails is compiled again locally, without it (a real compile error
    fails there too, with the compiler's own message), and the link ends with one warning line;
    with OFFLINK_TARGET_LAUNCHER_MANDATORY=1 a launcher failure is the link's error instead
    (and distcc is told not to fall back to local compiles itself: DISTCC_FALLBACK=0). What the
    launcher says on compiles that succeed (distcc's "failed to distribute, running locally")
    is summed up in the same one line. Either way the object is the compiler's own output:
    never a wrong image.
    """

    def __init__(self, launcher: Sequence[str], target: Target):
        self.launcher = list(launcher)
        self.target = target
        self.mandatory = settings.flag(MANDATORY_ENV)
        self.failed: list[str] = []  # first output line of each launcher failure
        self.said: list[str] = []  # first output line of each successful compile that spoke
        self._lock = threading.Lock()
        if self.mandatory:
            os.environ.setdefault("DISTCC_FALLBACK", "0")
        if runner.VERBOSE and not target.distributable:
            print(f"offlink: target {target.name}: compiles run through the launcher, but "
                  f"{target.not_distributable_because}", file=sys.stderr)

    def compile(self, children: Children, argv: list[str], what: str) -> str:
        """Compile through the launcher; returns what the compiler said (its warnings), the
        launcher's own lines being kept for the one summary line."""
        name = os.path.basename(self.launcher[0])
        try:
            out = children.run([*self.launcher, *argv], what)
        except ToolError as e:
            first = _first_line(e.output) or str(e)
            if self.mandatory:
                raise ToolError(f"{what} through target launcher '{name}' failed ({first}); "
                                f"{MANDATORY_ENV} is set, so it is not compiled locally",
                                exit_code=e.exit_code, output=e.output) from None
            out = children.run(argv, what)  # locally; a compile error is reported from here
            with self._lock:
                self.failed.append(first)
            return out
        own = [ln for ln in out.splitlines(keepends=True) if ln.lower().startswith(name.lower())]
        if own:
            with self._lock:
                self.said.append(own[0].strip())
        return "".join(ln for ln in out.splitlines(keepends=True) if ln not in own)

    def report(self, total: int) -> None:
        """One warning line for the whole target, if the launcher failed or spoke."""
        name = os.path.basename(self.launcher[0])
        if self.failed:
            print(f"offlink: warning: target launcher '{name}' failed {len(self.failed)} of "
                  f"{total} compiles for {self.target.name} ({self.failed[0]}); they were "
                  f"compiled locally", file=sys.stderr, flush=True)
        elif self.said:
            print(f"offlink: warning: target launcher '{name}' on {len(self.said)} of {total} "
                  f"compiles for {self.target.name}: {self.said[0]}", file=sys.stderr,
                  flush=True)


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def show_warnings(compiled: list[CompiledCU], shown: set[tuple[str, str]],
                  host_said: dict[str, str] | None = None) -> None:
    """What the target compilers said, as GCC and clang show device warnings: after the
    compiles (not into the progress display), in CU order, each CU's diagnostics once (a
    CU built for several targets that says the same thing says it once; `shown` spans the
    link), less the lines its host compile said already where the link knows them
    (`host_said`, by source: `offlink cc gcc a.c b.c -o app` compiles the hosts in-process)."""
    for c in compiled:
        key = (c.cu.payload.source, c.warnings)
        if not c.warnings.strip() or key in shown:
            continue
        shown.add(key)
        text = unsaid(c.warnings, set((host_said or {}).get(c.cu.payload.source, "").splitlines()))
        if text:
            sys.stderr.write(text)
    sys.stderr.flush()


def unsaid(text: str, seen: set[str]) -> str:
    """The lines of a compiler's `text` that are not in `seen` (which gains them), ending in a
    newline; "" when nothing but blank lines is left. A warning the host compile gave is the
    same lines (location, message, the source line and its caret) in the target compile's."""
    lines = [line for line in text.splitlines() if line not in seen]
    seen.update(lines)
    return "\n".join(lines) + "\n" if any(line.strip() for line in lines) else ""
