"""The link cache: per-CU target objects (with their offers) and per-target images, by content.

An object's key covers all the target compile depends on: the CU's code, kind and offered
list, the target, the compile command with its temporary paths taken out, the compiler's
identity (resolved path, size, mtime and its `--version` output, probed once per link) and
offlink's own version and cache format. With -g the working directory is in it too (debug
info records it). An image's key covers its objects' keys, the image link command, the
linker's identity and the working directory. A relink with nothing changed runs neither a
compile nor the device link.

Entries live in `OFFLINK_CACHE_DIR/objects` (default `$XDG_CACHE_HOME/offlink`, beside the
runtime library's `runtime/`), one file each: a header with a SHA-256 of the rest, then JSON
metadata, then the bytes. Written under a temporary name and renamed, so links sharing the
cache never see half an entry; a corrupt entry is dropped and rebuilt. The total size is kept
under `OFFLINK_CACHE_SIZE` (default 1G) by removing the least recently used entries (a hit
refreshes an entry's mtime). `--no-cache` or `OFFLINK_NO_CACHE=1` turn the cache off.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import __version__
from .. import run as runner
from ..errors import UsageError

if TYPE_CHECKING:
    from ..targets import Target
    from .compile import Offer
    from .extract import CU

FORMAT = 1
MAGIC = b"OFLKCE\0\1"
_HEADER = struct.Struct("<8sIQ32s")  # magic, metadata size, data size, sha256(metadata+data)
DEFAULT_SIZE = 1 << 30
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_STALE_TEMP = 3600  # seconds after which a temporary file is taken as a crashed writer's


def parse_size(text: str) -> int:
    """`500M`, `2G`, `1048576` (K, M, G, T; an optional trailing B or iB)."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1:] if t[-1:] in _UNITS else ""
    number = t[: len(t) - len(unit)]
    try:
        value = float(number)
    except ValueError:
        raise UsageError(f"OFFLINK_CACHE_SIZE: '{text}' is not a size (like 500M or 2G)") \
            from None
    if value < 0:
        raise UsageError(f"OFFLINK_CACHE_SIZE: '{text}' is negative")
    return int(value * _UNITS[unit])


def default_dir() -> str:
    if os.environ.get("OFFLINK_CACHE_DIR"):
        return os.environ["OFFLINK_CACHE_DIR"]
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "offlink")


def _hash(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(struct.pack("<Q", len(data)))
        h.update(data)
    return h.hexdigest()


def _uses_debug_info(argv: Sequence[str]) -> bool:
    return any(a.startswith("-g") and a not in ("-g0", "-gno-record-gcc-switches")
               for a in argv)


def normalise(argv: Sequence[str], paths: dict[str, str], tmp: str = "") -> list[str]:
    """`argv` with each temporary path replaced by a fixed name.

    A word that is one of the paths is looked up; only a word holding the temporary
    folder `tmp` inside it (`-o<path>`, `file=<path>`) is searched for every path, longest
    first, so a device link of 1000 objects stays linear.
    """
    ordered: list[tuple[str, str]] | None = None
    out = []
    for word in argv:
        if word in paths:
            out.append(paths[word])
            continue
        if not tmp or tmp in word:
            if ordered is None:
                ordered = sorted(paths.items(), key=lambda kv: -len(kv[0]))
            for path, name in ordered:
                word = word.replace(path, name)
        out.append(word)
    return out


@dataclass(frozen=True)
class Entry:
    meta: dict
    data: bytes


class Cache:
    def __init__(self, root: str, limit: int = DEFAULT_SIZE):
        self.root = root
        self.dir = os.path.join(root, "objects")
        self.limit = limit
        self.stored = 0
        self.hits = 0
        self._identities: dict[str, str | None] = {}
        self._lock = threading.Lock()

    @classmethod
    def open(cls, enabled: bool = True) -> Cache | None:
        """The cache the environment asks for, or None when it is turned off."""
        if not enabled or os.environ.get("OFFLINK_NO_CACHE", "") not in ("", "0"):
            return None
        size = os.environ.get("OFFLINK_CACHE_SIZE", "")
        limit = parse_size(size) if size else DEFAULT_SIZE
        if limit == 0:
            return None
        return cls(default_dir(), limit)

    # -- keys ----------------------------------------------------------------------------
    def tool_identity(self, tool: str) -> str | None:
        """Resolved path, size, mtime and `--version` output of a tool; None if not found.

        Probed once per tool per link (a few ms for gcc).
        """
        with self._lock:
            if tool in self._identities:
                return self._identities[tool]
        found = runner.which(tool)
        ident = None
        if found is not None:
            real = os.path.realpath(found)
            st = os.stat(real)
            stamp = _hash(found, real, str(st.st_size), str(st.st_mtime_ns))
            ident = self._known_tool(stamp)
            if ident is None:
                ident = _hash(real, str(st.st_size), str(st.st_mtime_ns), _version(found))
                self._remember_tool(stamp, ident)
        with self._lock:
            self._identities[tool] = ident
        return ident

    def _known_tool(self, stamp: str) -> str | None:
        """A tool identity probed by an earlier link: the same file, size and mtime have the
        same `--version`, so relinks skip the probe (a few ms a compiler)."""
        try:
            with open(os.path.join(self.root, "tools", stamp), encoding="ascii") as f:
                ident = f.read()
        except (OSError, ValueError):
            return None
        return ident if len(ident) == 64 and all(c in "0123456789abcdef" for c in ident) \
            else None

    def _remember_tool(self, stamp: str, ident: str) -> None:
        _write_atomic(os.path.join(self.root, "tools", stamp), ident.encode("ascii"))

    def object_key(self, target: Target, cu: CU, argv: Sequence[str], paths: dict[str, str],
                   compiler: str, tmp: str = "") -> str:
        p = cu.payload
        cwd = os.getcwd() if _uses_debug_info(argv) else ""
        return _hash("object", str(FORMAT), __version__, type(target).__qualname__,
                     target.name, p.code_kind, "\0".join(normalise(argv, paths, tmp)),
                     "\0".join(p.options), "\0".join(p.offered), compiler, cwd, p.code)

    def image_key(self, target: Target, argv: Sequence[str], paths: dict[str, str],
                  linker: str, tmp: str = "") -> str:
        return _hash("image", str(FORMAT), __version__, type(target).__qualname__, target.name,
                     "\0".join(normalise(argv, paths, tmp)), linker, os.getcwd())

    # -- entries -------------------------------------------------------------------------
    def _path(self, key: str) -> str:
        return os.path.join(self.dir, key[:2], key)

    def get(self, key: str) -> Entry | None:
        """The entry, or None when missing or corrupt (a corrupt one is removed)."""
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                blob = f.read()
        except OSError:
            return None
        entry = self._decode(blob)
        if entry is None:
            if runner.VERBOSE:
                print(f"offlink: cache entry {path} is corrupt; rebuilding it", file=sys.stderr)
            _unlink(path)
            return None
        try:
            os.utime(path)  # least recently used goes first
        except OSError:
            pass
        with self._lock:
            self.hits += 1
        return entry

    @staticmethod
    def _decode(blob: bytes) -> Entry | None:
        if len(blob) < _HEADER.size:
            return None
        magic, meta_size, data_size, digest = _HEADER.unpack_from(blob)
        body = memoryview(blob)[_HEADER.size:]
        if magic != MAGIC or len(body) != meta_size + data_size:
            return None
        if hashlib.sha256(body).digest() != digest:
            return None
        try:
            meta = json.loads(bytes(body[:meta_size]))
        except ValueError:
            return None
        return Entry(meta, bytes(body[meta_size:]))

    def put(self, key: str, meta: dict, data: bytes) -> None:
        """Store an entry; a cache that cannot be written is skipped, never an error."""
        meta_bytes = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()
        digest = hashlib.sha256(meta_bytes + data).digest()
        blob = _HEADER.pack(MAGIC, len(meta_bytes), len(data), digest) + meta_bytes + data
        if not _write_atomic(self._path(key), blob):
            return
        with self._lock:
            self.stored += len(blob)

    # -- objects and images --------------------------------------------------------------
    def get_object(self, key: str) -> tuple[bytes, tuple[Offer, ...]] | None:
        from .compile import Offer

        entry = self.get(key)
        if entry is None:
            return None
        try:
            offers = tuple(Offer(str(n), str(k), int(s), bool(g))
                           for n, k, s, g in entry.meta["offers"])
        except (KeyError, TypeError, ValueError):
            return None
        return entry.data, offers

    def put_object(self, key: str, data: bytes, offers: Sequence[Offer]) -> None:
        self.put(key, {"offers": [[o.name, o.kind, o.size, o.strong] for o in offers]}, data)

    # -- size ----------------------------------------------------------------------------
    def trim(self) -> None:
        """Remove least recently used entries while the cache is over its limit.

        Run after a link that stored something. Other links may trim at the same time: a
        file already gone is fine, and a reader keeps a file it has open.
        """
        if not self.stored:
            return
        entries = []
        total = 0
        now = time.time()
        try:
            subdirs = list(os.scandir(self.dir))
        except OSError:
            return
        for sub in subdirs:
            if not sub.is_dir(follow_symlinks=False):
                continue
            try:
                files = list(os.scandir(sub.path))
            except OSError:
                continue
            for f in files:
                try:
                    st = f.stat(follow_symlinks=False)
                except OSError:
                    continue
                if ".tmp-" in f.name:
                    if now - st.st_mtime > _STALE_TEMP:
                        _unlink(f.path)
                    continue
                entries.append((st.st_mtime, f.path, st.st_size))
                total += st.st_size
        if total <= self.limit:
            return
        goal = self.limit * 9 // 10  # some room, so the next links do not trim again
        for _mtime, path, size in sorted(entries):
            if total <= goal:
                break
            if _unlink(path):
                total -= size


def _version(tool: str) -> bytes:
    import subprocess

    try:
        probe = subprocess.run([tool, "--version"], stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=60)
        return f"{probe.returncode}\0".encode() + probe.stdout + probe.stderr
    except (OSError, subprocess.SubprocessError) as e:
        return f"no --version: {type(e).__name__}".encode()


def _write_atomic(path: str, data: bytes) -> bool:
    """Write under a temporary name and rename, so a reader never sees half a file; False
    when the cache cannot be written (skipped, never an error)."""
    tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return True
    except OSError as e:
        if runner.VERBOSE:
            print(f"offlink: cannot write the cache ({e.strerror}: {tmp})", file=sys.stderr)
        _unlink(tmp)
        return False


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


def device_link(plan, target: Target, compiled, workdir: str, cache: Cache | None):
    """Stage 4 through the cache: the image of these objects, linked only when not cached."""
    from . import device

    if cache is None or not compiled or not all(c.key for c in compiled):
        return device.device_link(plan, target, compiled, workdir)
    out = device.image_path(target, workdir)
    argv = target.image_argv(plan, compiled, out)
    linker = cache.tool_identity(argv[0])
    if linker is None:
        return device.device_link(plan, target, compiled, workdir)  # it reports the tool
    paths = {c.object_path: f"<object {c.key}>" for c in compiled}
    paths.update({out: "<image>", workdir: "<tmp>"})
    key = cache.image_key(target, argv, paths, linker, workdir)
    entry = cache.get(key)
    if entry is None:
        image = device.device_link(plan, target, compiled, workdir, argv)
        cache.put(key, {"target": target.name}, image.data)
        return image
    with open(out, "wb") as f:
        f.write(entry.data)
    offers, owners = device.image_offers(target, compiled, entry.data, out)
    if runner.VERBOSE:
        print(f"offlink: from cache: {runner.show(argv)}", file=sys.stderr, flush=True)
    return device.Image(target, out, entry.data, offers, owners)
