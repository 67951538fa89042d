"""The link cache's entries on disk: checksums, trust, size (least recently used goes first).

Entries live in `OFFLINK_CACHE_DIR/objects` (default `$XDG_CACHE_HOME/offlink`, beside the
runtime library's `runtime/`), one file each, under a key the caller makes (keys.py): a header
with a SHA-256 of the rest, then JSON metadata, then the bytes. Written under a fresh temporary
name (O_EXCL|O_NOFOLLOW) and renamed, so links sharing the cache never see half an entry; a
corrupt entry is dropped and rebuilt. The SHA-256 catches damage, not forgery: folders are made
0700 and a cache folder others can write to is refused, unless OFFLINK_CACHE_SHARED=1 says its
writers are trusted. The total size is kept under `OFFLINK_CACHE_SIZE` (default 1G) by removing
the least recently used entries (a hit refreshes an entry's mtime); the total a scan found is
noted in `size`, so links that store little need not scan every entry (Store.trim). Small
values remembered by a file's stamp (identity.py's) live in `tools/`. `--no-cache` or
`OFFLINK_NO_CACHE=1` turn the cache off.

The link's `Cache` is a Store and a ToolIdentity (identity.py): its keys carry offlink's code
identity, and the tools' identities are remembered in its folder.
"""

from __future__ import annotations

import os
import struct
import sys
import threading
import time
from collections import namedtuple
from collections.abc import Callable

from .. import run as runner
from .. import settings
from ..digest import sha256
from ..errors import UsageError
from .compact_json import json_value
from .identity import ToolIdentity
from .keys import key as entry_key

MAGIC = b"OFLKCE\0\1"
_HEADER = struct.Struct("<8sIQ32s")  # magic, metadata size, data size, sha256(metadata+data)
DEFAULT_SIZE = 1 << 30
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_STALE_TEMP = 3600  # seconds after which a temporary file is taken as a crashed writer's
_RESCAN = 600.0  # seconds after which trim counts the entries again (Store.trim)


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
    if settings.text("OFFLINK_CACHE_DIR"):
        return settings.text("OFFLINK_CACHE_DIR")
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "offlink")


def shared() -> bool:
    """OFFLINK_CACHE_SHARED=1: the cache is shared with other users (README, "The cache")."""
    return settings.flag("OFFLINK_CACHE_SHARED")


def make_dirs(path: str) -> None:
    """Create `path` and its missing parents: mode 0700, or as the umask allows for a shared
    cache (whose folders then inherit a setgid bit of the folder above)."""
    mode = 0o777 if shared() else 0o700
    missing = []
    while path and not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, mode)
        except FileExistsError:
            if not os.path.isdir(folder):
                raise


def trusted_root(root: str) -> str:
    """`root`, created if missing, once it is known that nobody but this user can plant
    entries there; a shared cache (OFFLINK_CACHE_SHARED=1) trusts whoever can write to it.

    Raises UsageError for a private cache folder that belongs to another user or that others
    may write to; OSError when it cannot be created.
    """
    make_dirs(root)
    if shared():
        return root
    st = os.stat(root)
    why = None
    if st.st_uid != os.geteuid():
        why = "belongs to another user"
    elif st.st_mode & 0o022:
        why = "is writable by other users"
    if why:
        raise UsageError(f"cache folder {root} {why}: its entries end up in the programs you "
                         f"link; choose another OFFLINK_CACHE_DIR, or set OFFLINK_CACHE_SHARED=1 "
                         f"if everyone who can write there is trusted")
    return root


# An entry's metadata (a dict) and bytes. collections' named tuple, not typing's: offlink cc's
# warm hit imports this module and no typing (benchmarks/health/RESULTS.md).
Entry = namedtuple("Entry", "meta data")


class Store:
    """The entries in a cache folder: get, put (now, or later in a thread), trim."""

    def __init__(self, root: str, limit: int = DEFAULT_SIZE):
        self.root = root
        self.dir = os.path.join(root, "objects")
        self.limit = limit
        self.stored = 0
        self.hits = 0
        self._lock = threading.Lock()
        # put_later's entries, not written yet, and do_later's work
        self._later: list[tuple[str | Callable[[], str | None], dict, bytes]] = []
        self._work: list[Callable[[], None]] = []

    def path(self, key: str) -> str:
        """The file of the entry `key`."""
        return os.path.join(self.dir, key[:2], key)

    def get(self, key: str, count: bool = True) -> Entry | None:
        """The entry, or None when missing or corrupt (a corrupt one is removed); counted in
        `hits` (the link's "from cache") unless `count` is False."""
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                blob = f.read()
        except OSError:
            return None
        entry = self.decode(blob)
        if entry is None:
            if runner.VERBOSE:
                print(f"offlink: cache entry {path} is corrupt; rebuilding it", file=sys.stderr)
            _unlink(path)
            return None
        try:
            os.utime(path)  # least recently used goes first
        except OSError:
            pass
        if count:
            with self._lock:
                self.hits += 1
        return entry

    @staticmethod
    def decode(blob: bytes) -> Entry | None:
        """An entry file's metadata and bytes; None where it is not an entry or is damaged."""
        if len(blob) < _HEADER.size:
            return None
        magic, meta_size, data_size, digest = _HEADER.unpack_from(blob)
        body = memoryview(blob)[_HEADER.size:]
        if magic != MAGIC or len(body) != meta_size + data_size:
            return None
        if sha256(body).digest() != digest:
            return None
        try:
            meta = json_value(bytes(body[:meta_size]))
        except ValueError:
            return None
        return Entry(meta, bytes(body[meta_size:]))

    def put(self, key: str, meta: dict, data: bytes) -> None:
        """Store an entry; a cache that cannot be written is skipped, never an error."""
        import json  # not on the warm hit's way, which reads entries (compact_json.py)

        meta_bytes = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()
        digest = sha256(meta_bytes + data).digest()
        blob = _HEADER.pack(MAGIC, len(meta_bytes), len(data), digest) + meta_bytes + data
        if not _write_atomic(self.path(key), blob):
            return
        with self._lock:
            self.stored += len(blob)

    def put_later(self, key: str | Callable[[], str | None], meta: dict, data: bytes) -> None:
        """An entry this link will not read again, kept until write_later writes it (the
        pipeline: while the host link runs); one no write_later writes is lost (a miss).
        `key` may be a function making it there (None: not kept): a key that waits for a
        tool's identity, whose `--version` then runs beside the host link, not before it."""
        with self._lock:
            self._later.append((key, meta, data))

    def do_later(self, work: Callable[[], None]) -> None:
        """Work that makes entries of its own (put), done by write_later's thread after the
        entries: what the next link would find in the cache, made beside the host link."""
        with self._lock:
            self._work.append(work)

    def write_later(self) -> threading.Thread:
        """Write put_later's entries and do do_later's work in a thread (put's rules: skipped
        when the cache cannot be written); join() the thread before the link ends."""
        with self._lock:
            entries, self._later = self._later, []
            works, self._work = self._work, []

        def write() -> None:  # an entry not written is a miss next time, never an error
            for key, meta, data in entries:
                try:
                    made = key() if callable(key) else key
                except Exception:
                    continue
                if made is not None:
                    self.put(made, meta, data)
            for work in works:
                try:
                    work()
                except Exception:
                    continue

        return in_thread(write)

    def remembered(self, stamp: str) -> str | None:
        """A SHA-256 remembered by a file's `stamp` (remember), or None."""
        try:
            with open(os.path.join(self.root, "tools", stamp), "rb") as f:
                value = f.read().decode("ascii")
        except (OSError, ValueError):
            return None
        return value if len(value) == 64 and all(c in "0123456789abcdef" for c in value) \
            else None

    def remember(self, stamp: str, value: str) -> None:
        """Remember a SHA-256 (hex) by a file's stamp: the file's identity, or what a tool
        makes of it, for the next links while the file keeps its stamp."""
        _write_atomic(os.path.join(self.root, "tools", stamp), value.encode("ascii"))

    # -- size ----------------------------------------------------------------------------
    def trim(self) -> None:
        """Remove least recently used entries while the cache is over its limit.

        Run after a link that stored something. A scan of every entry notes the total it
        leaves in `size`; a later link adds what it stored to that note and scans only once
        the note says the limit is reached or the scan is _RESCAN seconds old. (Links storing
        at once may each add to the same total, and one addition is lost: the next scan
        counts again.) Other links may trim at the same time: a file already gone is fine,
        and a reader keeps a file it has open.
        """
        if not self.stored:
            return
        now = time.time()
        noted = self._noted_size()
        if noted is not None:
            total, scanned = noted
            if 0 <= now - scanned < _RESCAN and total + self.stored <= self.limit:
                self._note_size(total + self.stored, scanned)
                return
        left = self._scan_and_trim(now)
        if left is not None:
            self._note_size(left, now)

    def _noted_size(self) -> tuple[int, float] | None:
        """(total bytes, when it was scanned) as the last trim noted them, or None."""
        try:
            with open(os.path.join(self.root, "size"), "rb") as f:
                total, scanned = f.read().decode("ascii").split()
            return int(total), float(scanned)
        except (OSError, ValueError):
            return None

    def _note_size(self, total: int, scanned: float) -> None:
        _write_atomic(os.path.join(self.root, "size"), f"{total} {scanned!r}\n".encode())

    def _scan_and_trim(self, now: float) -> int | None:
        """Every entry's size and time: the least recently used removed while over the limit
        (to 90% of it, so the next links do not trim again); the total left, None if the
        folder cannot be listed."""
        entries = []
        total = 0
        try:
            subdirs = list(os.scandir(self.dir))
        except OSError:
            return None
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
            return total
        goal = self.limit * 9 // 10
        for _mtime, path, size in sorted(entries):
            if total <= goal:
                break
            if _unlink(path):
                total -= size
        return total


class Cache(Store, ToolIdentity):
    """The link cache: its entries (Store), under keys that carry offlink's code identity,
    and the identities of the tools and files keyed (ToolIdentity)."""

    def __init__(self, root: str, limit: int = DEFAULT_SIZE):
        Store.__init__(self, root, limit)
        ToolIdentity.__init__(self)

    @classmethod
    def open(cls, enabled: bool = True) -> Cache | None:
        """The cache the environment asks for, or None when it is turned off."""
        if not enabled or settings.flag("OFFLINK_NO_CACHE"):
            return None
        size = settings.text("OFFLINK_CACHE_SIZE")
        limit = parse_size(size) if size else DEFAULT_SIZE
        if limit == 0:
            return None
        root = default_dir()
        try:
            trusted_root(root)
        except OSError:
            pass  # not writable: every store is skipped, as for a full disk
        return cls(root, limit)

    def key(self, kind: str, *parts: str | bytes) -> str:
        """An entry's key (keys.key): its kind and parts, with the cache format and offlink's
        code identity always in it."""
        return entry_key(self.code_identity(), kind, *parts)


def in_thread(work: Callable[[], object]) -> threading.Thread:
    """work() in a thread of its own, started; what it raises is dropped (each caller's work
    is one a later step does again, and says what fails, when it is not done)."""

    def run() -> None:
        try:
            work()
        except Exception:
            pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _temp_path(path: str) -> str:
    return f"{path}.tmp-{os.getpid()}-{os.urandom(8).hex()}"


def write_atomic(path: str, data: bytes) -> None:
    """Write under a fresh temporary name and rename, so a reader never sees half a file.

    The temporary file is created with O_EXCL|O_NOFOLLOW (a name planted there, file or
    symbolic link, makes the write fail rather than go elsewhere), mode 0600, or 0666 less
    the umask in a shared cache. Raises OSError.
    """
    make_dirs(os.path.dirname(path))
    tmp = _temp_path(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o666 if shared() else 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def _write_atomic(path: str, data: bytes) -> bool:
    """write_atomic, or False when the cache cannot be written (skipped, never an error)."""
    try:
        write_atomic(path, data)
        return True
    except OSError as e:
        if runner.VERBOSE:
            print(f"offlink: cannot write the cache ({e.strerror}: {e.filename or path})",
                  file=sys.stderr)
        return False


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


