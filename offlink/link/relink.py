"""Stage 2 for a relink: the CUs of the last link of the same command, when its inputs are as
they were, without opening one of them; when some are not, only those are read again.

The extract stage reads every object and archive a link names (headers, payload records and,
for archive member choice, symbol tables): its time grows with the CUs. A link whose CUs are
all offlink payload records or CUs their dialect records (GCC's offload objects, whose
dialect records what it read besides the payload, and LLVM's, whose CU is its image alone:
`relink_state` in toolchains/gcc/dialect.py and toolchains/llvm/dialect.py) leaves a record
of them in the cache, keyed by what extract depends on (the command as planned, the working
directory, PATH, offlink's code identity) and holding each file's stamp; the next link with
the same key uses it when every file it would read has the same stamp.

The record is kept per file where each file's CUs are its own (extract.extract_files): no
archive member was chosen by the symbols of the others (the usual case: objects, and
--whole-archive). Then a link where some files have another stamp reads those alone, takes
the others' CUs from the record, checks the runtimes of all (the record keeps each used
object's dialects) and records the whole again. Where members were chosen (an archive with
target code, not --whole-archive), which members count depends on every file's symbols: any
file with another stamp reads the whole link again, as before.

A stamp is the file's device, inode, size, and mtime and ctime in nanoseconds (cache.file_stamp):
stricter than make and ld's users expect (make compares mtimes alone). A rewrite of any
size moves ctime, which no user can set: `touch -d`, `cp -p` and `tar x` restore an mtime,
never a ctime, and a file put in place by rename has another inode. Within one timestamp
tick, though, a file can be rewritten and keep its stamp ("racy git"), so a record keeps the
stamps of the files that had settled when they were read (cache/freshness.py) alone: the next
link reads the others again (a record kept per file), or every file (one that is not).
Nothing here trusts a stamp for more than the extract stage: the CUs' codes are keyed by
their SHA-256 as before (Payload.code_id, recorded), and a CU that must be compiled (its
object not in the cache) reads its record (a GCC CU: its object) from the file again,
refused unless it has the recorded SHA-256. A CU whose code is its device object (clang's,
without -foffload-lto) is keyed by that SHA-256 too, and its offers are kept under that key
(compile.as_is): a relink reads neither the object nor its symbols.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import time
from collections.abc import Mapping, Sequence

from ..cache.freshness import settled
from ..cache.keys import file_stamp
from ..cache.store import Cache, default_dir
from ..errors import FormatError, UsageError
from ..formats.payload import Deferred, Payload, Stored
from ..toolchains.dialects import SECTIONS, check_dialects
from .extract import CU, cus_of, extract_files, extract_from, input_paths, object_at
from .plan import LinkPlan


def extract(plan: LinkPlan, offload_options: Sequence[str] = (), enabled: bool = True,
            known: Mapping[str, os.stat_result] | None = None) -> list[CU]:
    """The link's CUs (extract.extract), from the record of the last link when it holds.
    `known`: stats of input files taken just before (pipeline.check_output), not taken again."""
    cache = _cache(enabled)
    if cache is None:
        return extract_from(plan, offload_options)[0]
    key = _key(cache, plan, offload_options)
    paths = [p for _, p in input_paths(plan)]
    link_args = _link_args(plan, offload_options)
    stats = _stats(paths, known)
    now = time.time_ns()
    found = _recorded(cache, key, plan, offload_options, paths, stats, link_args, now)
    if found is not None:
        return found
    before = stats
    cus, where, used = extract_from(plan, offload_options)
    if before is not None and where is not None:
        rows = _rows(cus, where)
        if rows is not None:
            _record(cache, key, paths, before, now, rows, used)
    return cus


def _cache(enabled: bool) -> Cache | None:
    """The link cache, if it is on and its folder is there already (no folder is made here:
    a plain link leaves none)."""
    if not os.path.isdir(default_dir()):
        return None
    try:
        return Cache.open(enabled)
    except UsageError:
        return None  # a folder the link refuses: it says so once it opens the cache itself


def _link_args(plan: LinkPlan, offload_options: Sequence[str]) -> list[str]:
    return [*plan.base_args, *(f"-foffload-options={o}" for o in offload_options)]


def _key(cache: Cache, plan: LinkPlan, offload_options: Sequence[str]) -> str:
    # PATH: a GCC CU's compiler is the accel compiler found on it (toolchains/gcc/dialect.py).
    return cache.key("inputs", os.getcwd(), repr(plan.inputs), "\0".join(plan.lib_dirs),
                     "\0".join(_link_args(plan, offload_options)), str(plan.lto),
                     os.environ.get("PATH", ""))


def _stats(paths: list[str], known: Mapping[str, os.stat_result] | None = None
           ) -> list[os.stat_result] | None:
    try:
        if known:
            return [known.get(p) or os.stat(p) for p in paths]
        return [os.stat(p) for p in paths]
    except OSError:
        return None  # extract reports what is missing


def _recorded(cache: Cache, key: str, plan: LinkPlan, offload_options: Sequence[str],
              paths: list[str], stats: list[os.stat_result] | None, link_args: list[str],
              now: int) -> list[CU] | None:
    """The CUs of the record, where every file has its stamp; where some have another one
    and the record says each file's CUs are its own (`files`), the CUs of the others and
    those of the changed files read again (and recorded in turn)."""
    entry = cache.get(key)
    if entry is None or stats is None:
        return None
    try:
        if entry.meta["paths"] != paths:
            return None
        stamps = [file_stamp(st) for st in stats]
        changed = {i for i, (old, new) in enumerate(zip(entry.meta["stamps"], stamps))
                   if old != new}
        rows = entry.meta["cus"]
        if not changed:
            return _cus(rows, paths, link_args, plan.lto)
        files = entry.meta.get("files")
        if files is None:
            return None  # archive members were chosen: the whole link is read again
        kept = [r for r in rows if r[_FILE] not in changed]
        cus = _cus(kept, paths, link_args, plan.lto)
        used = [(int(i), str(o), str(d)) for i, o, d in files if i not in changed]
    except (KeyError, TypeError, ValueError, IndexError, ImportError):
        return None
    if cus is None:
        return None
    fresh = extract_files(plan, offload_options, changed)
    if fresh is None:
        return None
    new_cus, where, new_used = fresh
    new_rows = _rows(new_cus, where)  # None: a CU its dialect cannot record (not recorded)
    # In link order: by file index, each file's CUs in their own order (a stable sort).
    merged = sorted([*((r[_FILE], r, c) for r, c in zip(kept, cus)),
                     *((w[0], r, c) for w, r, c in zip(where, new_rows or [None] * len(where),
                                                         new_cus))], key=lambda x: x[0])
    used_all = sorted([*used, *new_used], key=lambda u: u[0])
    # before any work, as extract_from: two offload runtimes cannot be linked
    check_dialects((origin, d) for _, origin, d in used_all)
    if new_rows is not None:
        _record(cache, key, paths, stats, now, [r for _, r, _ in merged], used_all)
    return [c for _, _, c in merged]


_FILE = 8  # a row's file index (its provenance's first: `_rows`)


def _cus(rows: list, paths: list[str], link_args: list[str], lto: bool) -> list[CU] | None:
    """The CUs of a record's rows, each one's code read again only where it is needed."""
    # The entry is ours (its SHA-256 checked, its layout fixed by the key's FORMAT): the
    # values are taken as JSON gave them; a file index out of range fails below.
    try:
        cus = []
        for (origin, target, kind, source, compiler, options, offered, code_id, file, place,
             k, dialect) in rows:
            load = _loader(paths[file], place, k, link_args, lto)
            code = Deferred(code_id, load, origin) if not dialect else \
                _DeferredBytes(code_id, load, origin)
            payload = Payload(target, kind, source, compiler, tuple(options), code,
                              tuple(offered))
            cus.append(CU(origin, payload) if not dialect
                       else _dialect(dialect[0]).relink_cu(origin, payload, dialect[1]))
        return cus
    except (KeyError, TypeError, ValueError, IndexError, ImportError):
        return None


_TOOLCHAINS = __package__.rsplit(".", 1)[0] + ".toolchains"


@functools.cache
def _dialect(name: str):
    """The dialect module (offlink/toolchains/NAME/dialect.py) that recorded a CU's own state
    (looked up once per name)."""
    if name not in SECTIONS.values():
        raise ValueError(name)
    return importlib.import_module(f"..toolchains.{name}.dialect", __package__)


class _DeferredBytes(Deferred):
    """A CU's code that is plain bytes (a GCC CU's: the object itself), known by its code_id
    (Payload.code_id of bytes) until it is needed."""

    def stored(self) -> Stored:
        stored = self._load()
        if Payload("", "", "", "", (), stored.data).code_id != self.code_id:
            raise FormatError(f"{self.where}: changed while being linked; link again")
        return stored


def _loader(path: str, place: int, k: int, link_args: list[str], lto: bool):
    def load() -> Stored:
        origin, elf = object_at(path, place)
        found = cus_of(elf, origin, link_args, lto)
        stored = found[k].payload.__dict__.get("_code") if k < len(found) else None
        if isinstance(stored, bytes):
            return Stored(stored, False, None, origin)
        if not isinstance(stored, Stored):
            raise FormatError(f"{origin}: changed while being linked; link again")
        return stored

    return load


def _rows(cus: list[CU], where: list[tuple[int, int, int]]) -> list[list] | None:
    """The record's rows of CUs read from their files, None when one is a CU that cannot
    be recorded (an offlink payload record or a CU its dialect can record: `_state`)."""
    rows = []
    for cu, w in zip(cus, where):
        d = _state(cu)
        if d is None:
            return None
        p = cu.payload
        rows.append([cu.origin, p.target, p.code_kind, p.source, p.compiler, list(p.options),
                     list(p.offered), p.code_id, *w, d])
    return rows


def _record(cache: Cache, key: str, paths: list[str], before: list[os.stat_result], now: int,
            rows: list[list], used: list[tuple[int, str, str]] | None) -> None:
    """Keep the CUs' rows for the next link, if none of the files moved meanwhile. `used`
    (extract.Used): the dialects of the objects used, by file, when each file's CUs are its
    own (no archive member chosen), so a file whose stamp changes is read again alone; a file
    not yet settled is then recorded without a stamp, which no stamp matches: the next link
    reads it again, and takes the others from the record (the edit, compile and link loop:
    the object just compiled is always fresh). None: any change reads the whole link again,
    so every file must have settled."""
    if not rows:
        return
    fresh = [not settled(st, now) for st in before]
    if all(fresh) or (used is None and any(fresh)):
        return
    after = _stats(paths)
    stamps = [file_stamp(st) for st in before]
    if after is None or [file_stamp(st) for st in after] != stamps:
        return
    stamps = [None if f else s for f, s in zip(fresh, stamps)]
    meta: dict = {"paths": paths, "stamps": stamps, "cus": rows}
    if used is not None:
        meta["files"] = [list(u) for u in used]
    cache.put(key, meta, b"")


def _state(cu: CU) -> list | str | None:
    """A CU as its row records what its payload does not say: "" for an offlink payload
    record (its code Stored), [dialect, state] for a dialect's own CU whose code is bytes,
    None for one that cannot be recorded."""
    p = cu.payload
    code = p.__dict__.get("_code") if isinstance(p, Payload) else None
    if type(cu) is CU and isinstance(code, Stored):
        return ""
    if not isinstance(code, bytes):
        return None
    if type(cu) is CU:  # a dialect's plain CU (LLVM's): the one that read it records it
        for name in SECTIONS.values():
            reader = sys.modules.get(f"{_TOOLCHAINS}.{name}.dialect")  # read it: imported
            state = getattr(reader, "relink_state", lambda cu: None)(cu)
            if state is not None:
                return [name, state]
        return None
    # offlink.toolchains.<name>.dialect: the toolchain's folder names the dialect.
    module = type(cu).__module__.split(".")
    name = module[-2] if module[-1] == "dialect" else module[-1]
    state = getattr(_dialect_or_none(name), "relink_state", lambda cu: None)(cu)
    return None if state is None else [name, state]


def _dialect_or_none(name: str):
    try:
        return _dialect(name)
    except (ValueError, ImportError):
        return None
