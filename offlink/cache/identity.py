"""What keys the cache besides the inputs: the identity of a tool, of a file and of offlink's
own code, each probed once per process and remembered across links by the files' stamps.

A tool's identity is its resolved path, a SHA-256 of its content and its `--version` output;
a file's, a SHA-256 of its content; offlink's code identity, a SHA-256 of its source files
(so an entry an older offlink made is never served to a newer one, whatever the version
number says: an upgrade, or a git checkout of another commit, starts from a cold cache).
Each is remembered by the file's stamp (keys.file_stamp) in the cache's `tools/` folder
(Store.remembered), once the file has settled (freshness.settled), so a relink neither
hashes nor runs the tool.
"""

from __future__ import annotations

import os
import threading
import time

from .. import __version__
from .. import run as runner
from ..digest import sha256
from .freshness import settled
from .keys import file_stamp, hash_parts

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # offlink/
_SOURCE_SUFFIXES = (".py", ".c", ".h", ".in", ".json")
_CODE: str | None = None  # code_identity, once per process

# Identities being probed by probe_early: tool -> (thread, cache folder, [identity] once done).
_EARLY: dict[str, tuple[threading.Thread, str, list[str | None]]] = {}


class ToolIdentity:
    """The identities part of the link's Cache (store.py), which gives it its `root` folder
    and the values remembered there (`remembered`, `remember`)."""

    root: str

    def __init__(self) -> None:
        self._identities: dict[str, str | None] = {}
        self._identity_lock = threading.Lock()

    def remembered(self, stamp: str) -> str | None:
        raise NotImplementedError

    def remember(self, stamp: str, value: str) -> None:
        raise NotImplementedError

    def tool_identity(self, tool: str) -> str | None:
        """The identity of a tool (its resolved path, a SHA-256 of its content and its
        `--version` output); None if not found. Probed once per tool per link, and
        remembered across links by the file's stamp."""
        with self._identity_lock:
            if tool in self._identities:
                return self._identities[tool]
        early = _EARLY.get(tool)  # left there: other threads may ask too (join_early ends it)
        if early is not None and early[1] == self.root:
            early[0].join()  # probed beside the link's first stages (probe_early)
            if early[2]:
                with self._identity_lock:
                    self._identities[tool] = early[2][0]
                return early[2][0]
        return self._probe(tool)

    def _probe(self, tool: str) -> str | None:
        with self._identity_lock:
            if tool in self._identities:
                return self._identities[tool]
        found = runner.which(tool)
        ident = None
        if found is not None:
            real, st, stamp = _tool_stamp(found)
            ident = self.remembered(stamp)
            if ident is None:
                ident = hash_parts(real, content_hash(real), runner.version(found))
                if settled(st):
                    self.remember(stamp, ident)
        with self._identity_lock:
            self._identities[tool] = ident
        return ident

    def knows_tool(self, tool: str) -> bool:
        """Whether tool_identity(tool) is known without running the tool (found before, or
        remembered by its stamp). A tool this cache does not know keys no entry in it yet:
        what a link would look up under its identity can start before the probe ends."""
        with self._identity_lock:
            if tool in self._identities:
                return True
        found = runner.which(tool)
        if found is None:
            return True  # nothing to probe: tool_identity says None at once
        try:
            return self.remembered(_tool_stamp(found)[2]) is not None
        except OSError:
            return True

    def probe_early(self, tool: str) -> None:
        """Start working out tool_identity(tool) in a thread, so a link whose first stages
        do not need it does not wait for the tool's `--version` later. The first
        tool_identity(tool) of any Cache of the same folder takes the answer."""
        box: list[str | None] = []  # empty if the probe failed: tool_identity probes again
        thread = threading.Thread(target=lambda: box.append(self._probe(tool)), daemon=True)
        _EARLY[tool] = (thread, self.root, box)
        thread.start()

    def file_identity(self, path: str) -> str:
        """A SHA-256 of a file's content, remembered across links by its stamp (as
        tool_identity's), so a relink with the file unchanged does not read it again."""
        try:
            st = os.stat(path)
        except OSError as e:
            return f"unreadable: {e.strerror}"
        stamp = hash_parts("file", os.path.realpath(path), file_stamp(st))
        ident = self.remembered(stamp)
        if ident is None:
            ident = content_hash(path)
            if settled(st) and len(ident) == 64:
                self.remember(stamp, ident)
        return ident

    def code_identity(self) -> str:
        """A SHA-256 of offlink's own source files (the package's .py, .c, .h, .in and .json):
        once per process, and across processes remembered by the files' stamps, so only the
        first run of a new offlink reads them."""
        global _CODE
        if _CODE is not None:
            return _CODE
        files = _package_files(PACKAGE)
        stamp = hash_parts("offlink code", PACKAGE,
                           *(f"{rel}\0{file_stamp(st)}" for rel, st in files))
        ident = self.remembered(stamp)
        if ident is None:
            contents: list[str | bytes] = []
            for rel, _ in files:
                with open(os.path.join(PACKAGE, rel), "rb") as f:
                    contents += [rel, f.read()]
            ident = hash_parts("offlink code", __version__, *contents)
            now = time.time_ns()
            if all(settled(st, now) for _, st in files):
                self.remember(stamp, ident)
        _CODE = ident
        return ident


def join_early() -> None:
    """Wait for the probes probe_early started (none is left running)."""
    while _EARLY:
        _EARLY.popitem()[1][0].join()


def content_hash(path: str) -> str:
    """A SHA-256 of the file's content, or why it cannot be read."""
    h = sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        return h.hexdigest()
    except OSError as e:
        return f"unreadable: {e.strerror}"


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


def _tool_stamp(found: str) -> tuple[str, os.stat_result, str]:
    """A tool's resolved path, its stat and the stamp its identity is remembered by (the
    path it was found at, the resolved one, file_stamp). Raises OSError."""
    real = os.path.realpath(found)
    st = os.stat(real)
    return real, st, hash_parts(found, real, file_stamp(st))
