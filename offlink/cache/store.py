"""The link cache: per-CU target objects (with their offers) and per-target images, by content.

An object's key covers all the target compile depends on: the CU's code (a SHA-256 of its
record's stored, compressed bytes, so a hit needs no inflation: Payload.code_id), kind and
offered list, the target, the compile command with its temporary paths taken out, the compiler's
identity (resolved path, content hash and `--version` output, probed once per link and
remembered by the file's device, inode, size, mtime and ctime) and offlink's own code (its
source files' content: `code_identity`, remembered the same way; a version number does not
change with every commit of a checkout) and cache format. With -g the working directory is in it
too (debug info records it); with `-march=native` and the like, what they stand for on this CPU
(compile.native_cpu). An image's key covers its objects' keys, the image link command (and the
files it reads besides the objects, by content: a narrowed link's version script), the linker's
identity and the working directory. A relink with nothing changed runs neither a compile nor the
device link, and reads no object entry where the target's image command needs none
(`cached_image`: the image's entry keeps the merged offers); link/relink.py spares it reading
its inputs too.

Entries live in `OFFLINK_CACHE_DIR/objects` (default `$XDG_CACHE_HOME/offlink`, beside the
runtime library's `runtime/`), one file each: a header with a SHA-256 of the rest, then JSON
metadata, then the bytes. Written under a fresh temporary name (O_EXCL|O_NOFOLLOW) and
renamed, so links sharing the cache never see half an entry; a corrupt entry is dropped and
rebuilt. The SHA-256 catches damage, not forgery: folders are made 0700 and a cache folder
others can write to is refused, unless OFFLINK_CACHE_SHARED=1 says its writers are trusted.
The total size is kept under `OFFLINK_CACHE_SIZE` (default 1G) by removing the least recently
used entries (a hit refreshes an entry's mtime); the total a scan found is noted in `size`, so
links that store little need not scan every entry (Cache.trim). `--no-cache` or
`OFFLINK_NO_CACHE=1` turn the cache off.
"""

from __future__ import annotations

import os
import struct
import sys
import time
from _thread import allocate_lock, start_new_thread  # threading's, without importing it
from collections.abc import Callable, Sequence

from .. import __version__, settings
from .. import run as runner
from ..digest import sha256
from ..errors import UsageError
from typing import NamedTuple
from .compact_json import json_text, json_value
from .keys import file_stamp, hash_from, hash_parts, key_prefix, normalise, uses_debug_info
from .keys import key as entry_key

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import Any

MAGIC = b"OFLKCE\0\1"
_HEADER = struct.Struct("<8sIQ32s")  # magic, metadata size, data size, sha256(metadata+data)
DEFAULT_SIZE = 1 << 30
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_STALE_TEMP = 3600  # seconds after which a temporary file is taken as a crashed writer's
_SETTLED = 2.0  # seconds since a tool's last change after which its stat stamp is trusted
_RESCAN = 600.0  # seconds after which trim counts the entries again (Cache.trim)


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


PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # offlink/
_SOURCE_SUFFIXES = (".py", ".c", ".h", ".in", ".json")
_CODE: str | None = None  # code_identity, once per process


def _package_files(root: str, rel: str = "") -> list[tuple[str, os.stat_result]]:
    """The source files under `root` (not __pycache__), sorted by their path below it, each
    with its stat."""
    out = []
    with os.scandir(os.path.join(root, rel)) as it:
        entries = sorted(it, key=lambda e: e.name)
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            if e.name != "__pycache__":
                out += _package_files(root, f"{rel}{e.name}/")
        elif e.name.endswith(_SOURCE_SUFFIXES):
            out.append((rel + e.name, e.stat()))
    return out


def _content_hash(path: str) -> str:
    h = sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        return h.hexdigest()
    except OSError as e:
        return f"unreadable: {e.strerror}"


class Entry(NamedTuple):
    """An entry's metadata and bytes (not a dataclass: `offlink cc`'s warm path reads entries,
    and importing dataclasses would cost it ~8 ms)."""

    meta: dict
    data: bytes


# Identities being probed by probe_early: tool -> (thread, cache folder, [identity] once done).
_EARLY: dict[str, tuple[Any, str, list]] = {}


class Done:
    """A thread's end, waited for with join() (threading's import, ~1.5 ms, is not needed
    for a thread that starts and ends once)."""

    def __init__(self):
        self._lock = allocate_lock()
        self._lock.acquire()

    def release(self) -> None:
        self._lock.release()

    def join(self) -> None:
        self._lock.acquire()
        self._lock.release()


def in_thread(work) -> Done:
    """Run work() in a thread of its own; what it raises is dropped (each caller's work is
    one a later step does again, and says what fails, when it is not done); its Done."""
    done = Done()

    def run() -> None:
        try:
            work()
        except Exception:
            pass
        finally:
            done.release()

    start_new_thread(run, ())
    return done


def join_early() -> None:
    """Wait for the probes probe_early started (none is left running)."""
    while _EARLY:
        _EARLY.popitem()[1][0].join()


class Cache:
    def __init__(self, root: str, limit: int = DEFAULT_SIZE):
        self.root = root
        self.dir = os.path.join(root, "objects")
        self.limit = limit
        self.stored = 0
        self.hits = 0
        self._identities: dict[str, str | None] = {}
        self._prefixes: dict[tuple, Any] = {}  # hash objects, by what object_key hashed
        self._debug: dict[tuple, bool] = {}  # whether a command records the working directory
        self._lock = allocate_lock()
        # put_later's entries, not written yet
        self._later: list[tuple[str | Callable[[], str | None], dict, bytes]] = []

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

    # -- keys ----------------------------------------------------------------------------
    def tool_identity(self, tool: str) -> str | None:
        """The identity of a tool: its resolved path, a SHA-256 of its content and its
        `--version` output; None if not found.

        Probed once per tool per link (a few ms for gcc), and remembered across links by the
        file's stat stamp (`file_stamp`), so a relink neither hashes nor runs the tool.
        """
        with self._lock:
            if tool in self._identities:
                return self._identities[tool]
        early = _EARLY.get(tool)  # left there: other threads may ask too (join_early ends it)
        if early is not None and early[1] == self.root:
            early[0].join()  # probed beside the link's first stages (probe_early)
            if early[2]:
                with self._lock:
                    self._identities[tool] = early[2][0]
                return early[2][0]
        return self._identity(tool)

    def _identity(self, tool: str) -> str | None:
        with self._lock:
            if tool in self._identities:
                return self._identities[tool]
        found = runner.which(tool)
        ident = None
        if found is not None:
            real, st, stamp = _tool_stamp(found)
            ident = self.known_tool(stamp)
            if ident is None:
                ident = hash_parts(real, _content_hash(real), _version(found))
                # A file changed within one timestamp tick of this probe could later show
                # the same stamp with other content ("racy git"): remember only settled files.
                if time.time() - st.st_ctime > _SETTLED:
                    self.remember_tool(stamp, ident)
        with self._lock:
            self._identities[tool] = ident
        return ident

    def knows_tool(self, tool: str) -> bool:
        """Whether tool_identity(tool) is known without running the tool (found before, or
        remembered by its stamp). A tool this cache does not know keys no entry in it yet:
        what a link would look up under its identity can start before the probe ends."""
        with self._lock:
            if tool in self._identities:
                return True
        found = runner.which(tool)
        if found is None:
            return True  # nothing to probe: tool_identity says None at once
        try:
            return self.known_tool(_tool_stamp(found)[2]) is not None
        except OSError:
            return True

    def probe_early(self, tool: str) -> None:
        """Start working out tool_identity(tool) in a thread, so a link whose first stages
        do not need it does not wait for the tool's `--version` later (~25 ms for clang-22,
        once per cache: the answer is remembered). The first tool_identity(tool) of any
        Cache of the same folder takes the answer."""
        box: list = []  # empty if the probe failed: tool_identity probes again, and says why
        _EARLY[tool] = (in_thread(lambda: box.append(self._identity(tool))), self.root, box)

    def file_identity(self, path: str) -> str:
        """A SHA-256 of a file's content, remembered across links by its stat stamp (as
        tool_identity's), so a relink with the file unchanged does not read it again."""
        try:
            st = os.stat(path)
        except OSError as e:
            return f"unreadable: {e.strerror}"
        stamp = hash_parts("file", os.path.realpath(path), file_stamp(st))
        ident = self.known_tool(stamp)
        if ident is None:
            ident = _content_hash(path)
            if time.time() - st.st_ctime > _SETTLED and len(ident) == 64:
                self.remember_tool(stamp, ident)
        return ident

    def code_identity(self) -> str:
        """A SHA-256 of offlink's own source files (the package's .py, .c, .h, .in and .json),
        so an entry an older offlink made is never served to a newer one, whatever the version
        number says: an upgrade, or a git checkout of another commit, starts from a cold cache.
        Once per process; across processes remembered by the files' stat stamps (~0.3 ms to
        stat them), so only the first run of a new offlink reads them."""
        global _CODE
        if _CODE is not None:
            return _CODE
        files = _package_files(PACKAGE)
        stamp = hash_parts("offlink code", PACKAGE,
                           *(f"{rel}\0{file_stamp(st)}" for rel, st in files))
        ident = self.known_tool(stamp)
        if ident is None:
            contents: list[str | bytes] = []
            for rel, _ in files:
                with open(os.path.join(PACKAGE, rel), "rb") as f:
                    contents += [rel, f.read()]
            ident = hash_parts("offlink code", __version__, *contents)
            now = time.time()
            if all(now - st.st_ctime > _SETTLED for _, st in files):
                self.remember_tool(stamp, ident)
        _CODE = ident
        return ident

    def known_tool(self, stamp: str) -> str | None:
        """A tool identity probed by an earlier link: the same file (device, inode, size,
        mtime and ctime) has the same content and `--version`, so relinks skip the probe."""
        try:
            # bytes decoded, not a text file: that would import encodings.ascii (cc start-up)
            with open(os.path.join(self.root, "tools", stamp), "rb") as f:
                ident = f.read().decode("ascii")
        except (OSError, ValueError):
            return None
        return ident if len(ident) == 64 and all(c in "0123456789abcdef" for c in ident) \
            else None

    def remember_tool(self, stamp: str, ident: str) -> None:
        _write_atomic(os.path.join(self.root, "tools", stamp), ident.encode("ascii"))

    def key(self, kind: str, *parts: str | bytes) -> str:
        """An entry's key (keys.key): its kind and parts, with the cache format and offlink's
        code identity always in it."""
        return entry_key(self.code_identity(), kind, *parts)

    # `target` is a plugins.Target, of which a key takes only its class and name: the cache
    # imports no plug-in module.
    def object_key(self, target: Any, cu: Any, argv: Sequence[str], paths: dict[str, str],
                   compiler: str, tmp: str = "") -> str:
        p = cu.payload
        words = tuple(normalise(argv, paths, tmp))
        # Everything but the code is shared by most CUs of a link: hashed once per distinct
        # command (`_prefixes`), so a CU costs its command's normalising and one hash update.
        # (Reads of the memos need no lock: a dict's get is atomic; a miss is made under it.)
        shared = (type(target), target.name, p.code_kind, words, tuple(p.options),
                  tuple(p.offered), compiler)
        debug = self._debug.get(shared)
        if debug is None:
            debug = uses_debug_info(words)
            with self._lock:
                self._debug[shared] = debug
        # The working directory is in the key only with -g, whose debug info records it.
        cwd = os.getcwd() if debug else ""
        memo = (shared, cwd)
        h = self._prefixes.get(memo)
        if h is None:
            h = key_prefix(self.code_identity(), "object", type(target).__qualname__,
                           target.name, p.code_kind, "\0".join(words), "\0".join(p.options),
                           "\0".join(p.offered), compiler, cwd)
            with self._lock:
                self._prefixes[memo] = h
        return hash_from(h, p.code_id)

    def image_key(self, target: Any, argv: Sequence[str], paths: dict[str, str],
                  linker: str, tmp: str = "") -> str:
        return entry_key(self.code_identity(), "image", type(target).__qualname__, target.name,
                         "\0".join(normalise(argv, paths, tmp)), linker, os.getcwd())

    # -- entries -------------------------------------------------------------------------
    def _path(self, key: str) -> str:
        return os.path.join(self.dir, key[:2], key)

    def get(self, key: str, count: bool = True) -> Entry | None:
        """The entry, or None when missing or corrupt (a corrupt one is removed); counted in
        `hits` (the link's "from cache") unless `count` is False."""
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
        if count:
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
        if sha256(body).digest() != digest:
            return None
        try:
            meta = json_value(bytes(body[:meta_size]))
        except ValueError:
            return None
        return Entry(meta, bytes(body[meta_size:]))

    def put(self, key: str, meta: dict, data: bytes) -> None:
        """Store an entry; a cache that cannot be written is skipped, never an error."""
        meta_bytes = json_text(meta).encode()
        digest = sha256(meta_bytes + data).digest()
        blob = _HEADER.pack(MAGIC, len(meta_bytes), len(data), digest) + meta_bytes + data
        if not _write_atomic(self._path(key), blob):
            return
        with self._lock:
            self.stored += len(blob)

    # -- objects and images --------------------------------------------------------------
    def put_later(self, key: str | Callable[[], str | None], meta: dict, data: bytes) -> None:
        """An entry this link will not read again, kept until write_later writes it (the
        pipeline: while the host link runs); one no write_later writes is lost (a miss).
        `key` may be a function making it there (None: not kept): a key that waits for a
        tool's identity, whose `--version` then runs beside the host link, not before it."""
        with self._lock:
            self._later.append((key, meta, data))

    def write_later(self) -> Done:
        """Write put_later's entries in a thread (put's rules: skipped when the cache cannot
        be written); join() the result before the link ends."""
        with self._lock:
            entries, self._later = self._later, []

        def write() -> None:  # an entry not written is a miss next time, never an error
            for key, meta, data in entries:
                try:
                    key = key() if callable(key) else key
                except Exception:
                    continue
                if key is not None:
                    self.put(key, meta, data)

        return in_thread(write)

    def get_object(self, key: str) -> tuple[bytes, tuple] | None:
        from ..model import Offer

        entry = self.get(key)
        if entry is None:
            return None
        try:
            offers = tuple(Offer(str(n), str(k), int(s), bool(g))
                           for n, k, s, g in entry.meta["offers"])
        except (KeyError, TypeError, ValueError):
            return None
        return entry.data, offers

    def put_object(self, key: str, data: bytes, offers: Sequence) -> None:
        self.put(key, {"offers": [[o.name, o.kind, o.size, o.strong] for o in offers]}, data)

    # -- size ----------------------------------------------------------------------------
    def trim(self) -> None:
        """Remove least recently used entries while the cache is over its limit.

        Run after a link that stored something. A scan of every entry (1000 entries: ~8 ms
        CPU, 10000: ~80) notes the total it leaves in `size`; a later link adds what it
        stored to that note and scans only once the note says the limit is reached or the
        scan is _RESCAN seconds old. (Links storing at once may each add to the same total,
        and one addition is lost: the next scan counts again.) Other links may trim at the
        same time: a file already gone is fine, and a reader keeps a file it has open.
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


def _tool_stamp(found: str) -> tuple[str, os.stat_result, str]:
    """A tool's resolved path, its stat and the stamp its identity is remembered by (the
    path it was found at, the resolved one, file_stamp). Raises OSError."""
    real = os.path.realpath(found)
    st = os.stat(real)
    return real, st, hash_parts(found, real, file_stamp(st))


def _version(tool: str) -> bytes:
    import subprocess

    try:
        probe = subprocess.run([tool, "--version"], stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=60)
        return f"{probe.returncode}\0".encode() + probe.stdout + probe.stderr
    except (OSError, subprocess.SubprocessError) as e:
        return f"no --version: {type(e).__name__}".encode()


def _temp_path(path: str) -> str:
    # secrets.token_hex(8) is os.urandom(8).hex(); importing secrets (base64, hmac) is not free
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


