"""Where a link's temporary files live, so that even a killed link (SIGKILL) leaves nothing
that looks like output, and nothing the next link does not sweep away.

- The work folder (`offlink-link-*`, `offlink-cc-*` in TMPDIR) is locked (flock on the folder)
  while its link or compile runs; the next link that finds an unlocked one (its owner is gone)
  removes it, and so does the next compile where TMPDIR is small (in a shared /tmp with
  thousands of entries one compile in SWEEP_ODDS looks).
- The host linker writes into the work folder, never beside the output. The finished file
  reaches the output folder by rename (same file system) or as an unnamed O_TMPFILE given its
  name only when complete; where the file system has no O_TMPFILE, a `.NAME.offlink-*` file
  locked while written, which the next link of the same output removes if its owner is gone.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Sequence

from ..errors import LinkError

# The work folder is made, named and removed here, TMPDIR found as tempfile finds it, and
# tempfile and shutil are imported where used: `offlink cc`'s warm hit uses this module, and
# its import budget (tests/test_cc_cache.py) holds neither.
WORK_PREFIXES = {"link": "offlink-link-", "cc": "offlink-cc-",  # `offlink link`, `offlink cc`
                 "extract": "offlink-extract-"}
KEPT_PREFIX = "offlink-temps-"  # --save-temps: kept on purpose, never swept
# A folder whose entries take at most this many bytes (st_size: about 36 bytes an entry on
# ext4, 20 on tmpfs) is small: every compile sweeps it.
SMALL_FOLDER = 32 * 1024
SWEEP_ODDS = 16  # where TMPDIR is not small, one compile in this many sweeps it


def temp_folder() -> str:
    """Where temporary files go, as tempfile.gettempdir() decides: $TMPDIR, $TEMP or $TMP,
    else /tmp, /var/tmp or /usr/tmp, the first that is a folder this process may write in,
    else the working folder."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        folder = os.environ.get(name)
        if folder and os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
            return os.path.abspath(folder)
    for folder in ("/tmp", "/var/tmp", "/usr/tmp"):
        if os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
            return folder
    return os.getcwd()


def random_name(prefix: str) -> str:
    return prefix + os.urandom(6).hex()


def new_folder(parent: str, prefix: str) -> str:
    """A new folder `parent/prefix*`, mode 0700 (as tempfile.mkdtemp makes it)."""
    for _ in range(100):
        path = os.path.join(parent, random_name(prefix))
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), parent)


def remove_tree(path: str) -> None:
    """Remove a folder offlink made and all in it, as far as possible (shutil.rmtree with
    ignore_errors; symbolic links are removed, never followed)."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        entries = []
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                remove_tree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass
    try:
        os.rmdir(path)
    except OSError:
        pass


def write_whole(path: str, data: bytes, mode: int | None = None) -> None:
    """Write a small output (an extracted image, a time trace) beside `path` under a fresh
    name and rename it into place: it is whole or not there. `mode` None: 0666 less the umask,
    as the file a program creates."""
    write_all([(path, data)], mode)


def write_all(files: Sequence[tuple[str, bytes]], mode: int | None = None) -> None:
    """`write_whole` for several outputs at once: every one is written under its fresh name
    before the first is renamed into place, so a failure to write (a full disk) leaves every
    path as it was."""
    if mode is None:
        mask = os.umask(0)
        os.umask(mask)
        mode = 0o666 & ~mask
    temps: list[str] = []
    try:
        for path, data in files:
            import tempfile

            fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.offlink-",
                                       dir=os.path.dirname(os.path.abspath(path)))
            temps.append(tmp)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, mode)
        for (path, _data), tmp in zip(files, temps):
            os.replace(tmp, path)
    except BaseException:
        for tmp in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise


def _unlocked(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _sweep(folder: str, prefix: str | tuple[str, ...], want_dir: bool) -> None:
    """Remove what a killed offlink left in `folder`: `prefix*` entries of this user that no
    running offlink holds locked. Several prefixes are swept in one listing of the folder
    (a shared /tmp may hold thousands of entries)."""
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix)]
    except OSError:
        return
    uid = os.getuid()
    for name in names:
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | (os.O_DIRECTORY if want_dir else 0))
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if st.st_uid != uid or stat.S_ISDIR(st.st_mode) != want_dir or not _unlocked(fd):
                continue
            if want_dir:
                remove_tree(path)
            else:
                os.unlink(path)
        except OSError:
            pass
        finally:
            os.close(fd)


def sweep_due(folder: str, kind: str) -> bool:
    """Whether a work folder of `kind` sweeps `folder` now: a link's and an extract's always;
    a compile's (a build runs many) where the listing is cheap, else one time in SWEEP_ODDS,
    so what killed compiles left goes at the next link, or in time without one."""
    if kind != "cc":
        return True
    try:
        small = os.stat(folder).st_size <= SMALL_FOLDER
    except OSError:
        return True
    return small or os.urandom(1)[0] < 256 // SWEEP_ODDS


class WorkFolder:
    """A link's or compile's temporary folder, locked while it runs."""

    def __init__(self, keep: bool, kind: str = "link", sweep_now: bool = True):
        """`sweep_now` False: what killed offlinks left is swept by `sweep`, later (a link
        sweeps while its host link runs)."""
        self.keep = keep
        self.parent = parent = temp_folder()
        self._sweep = not keep and sweep_due(parent, kind)
        if self._sweep and sweep_now:
            self.sweep()
        while True:
            # Another offlink's sweep may take the folder between its making and the lock
            # (it is not locked yet): then it is gone, and this takes another.
            self.path = new_folder(parent, KEPT_PREFIX if keep else WORK_PREFIXES[kind])
            try:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                continue
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                if os.stat(self.path).st_ino == os.fstat(self._fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(self._fd)

    def sweep(self) -> None:
        """Remove the work folders killed offlinks left beside this one (once; this one is
        locked, as every running offlink's is)."""
        if self._sweep:
            self._sweep = False
            _sweep(self.parent, tuple(WORK_PREFIXES.values()), want_dir=True)

    def close(self) -> None:
        if not self.keep:
            remove_tree(self.path)
        os.close(self._fd)


class OutputSlot:
    """The output's place, claimed before the host link (so an output folder that cannot be
    written is reported before the linker runs) and filled by `install`."""

    def __init__(self, output: str):
        self.output = output
        self.folder = os.path.dirname(os.path.abspath(output))
        self.prefix = f".{os.path.basename(output)}.offlink-"
        self._fd: int | None = None
        self.unnamed = False  # an O_TMPFILE is open (linking it into place may still fail)
        try:
            mode = os.lstat(output).st_mode
        except OSError:
            mode = stat.S_IFREG
        # -o /dev/null, a FIFO: written into, never replaced (ld does the same)
        self.special = not (stat.S_ISREG(mode) or stat.S_ISLNK(mode) or stat.S_ISDIR(mode))
        if self.special:
            return
        _sweep(self.folder, self.prefix, want_dir=False)
        try:
            if not os.path.isdir("/proc/self/fd"):  # no way to name an O_TMPFILE later
                raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))
            self._fd = os.open(self.folder, os.O_TMPFILE | os.O_WRONLY, 0o600)
            self.unnamed = True
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise LinkError(f"cannot write {output}: {e.strerror}") from None
            if not os.access(self.folder, os.W_OK):
                raise LinkError(f"cannot write {output}: {os.strerror(errno.EACCES)}") \
                    from None

    def install(self, staged: str) -> None:
        """Move the finished file `staged` to the output, atomically: the previous output
        stays until the new one replaces it whole."""
        if self.special:
            import shutil

            try:
                with open(staged, "rb") as src, open(self.output, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            except OSError as e:
                raise LinkError(f"cannot write {self.output}: {e.strerror}") from None
            return
        try:
            os.rename(staged, self.output)
            return
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise LinkError(f"cannot write {self.output}: {e.strerror}") from None
        if self._fd is not None:
            try:
                self._copy(staged)
                fcntl.flock(self._fd, fcntl.LOCK_EX)  # a name appears: the sweep must wait
                named = self._link_unnamed()
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.EPERM, errno.ENOENT, errno.EOPNOTSUPP):
                    raise LinkError(f"cannot write {self.output}: {e.strerror}") from None
                # linkat through /proc refused (some kernels and containers): a named file
                self.close()
            else:
                self._replace(named)
                return
        import tempfile

        try:
            fd, named = tempfile.mkstemp(prefix=self.prefix, dir=self.folder)
        except OSError as e:
            raise LinkError(f"cannot write {self.output}: {e.strerror}") from None
        self._fd = fd
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # locked while written: the sweep must wait
            self._copy(staged)
        except OSError as e:
            os.unlink(named)
            raise LinkError(f"cannot write {self.output}: {e.strerror}") from None
        self._replace(named)

    def _copy(self, staged: str) -> None:
        assert self._fd is not None
        with open(staged, "rb") as src:
            size = os.fstat(src.fileno()).st_size
            copied = 0
            while copied < size:
                n = os.sendfile(self._fd, src.fileno(), copied, size - copied)
                if n == 0:
                    raise OSError(errno.EIO, os.strerror(errno.EIO))
                copied += n
            os.fchmod(self._fd, stat.S_IMODE(os.fstat(src.fileno()).st_mode))

    def _replace(self, named: str) -> None:
        try:
            os.replace(named, self.output)
        except OSError as e:
            os.unlink(named)
            raise LinkError(f"cannot write {self.output}: {e.strerror}") from None

    def _link_unnamed(self) -> str:
        """Give the O_TMPFILE a name in the output folder (linkat through /proc)."""
        # A dir fd makes os.link call linkat(AT_SYMLINK_FOLLOW); without one, CPython calls
        # link(2), which links the /proc symlink itself and fails with EXDEV.
        folder = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(100):
                name = random_name(self.prefix)
                try:
                    os.link(f"/proc/self/fd/{self._fd}", name, dst_dir_fd=folder,
                            follow_symlinks=True)
                    return os.path.join(self.folder, name)
                except FileExistsError:
                    continue
        finally:
            os.close(folder)
        raise OSError(errno.EEXIST, os.strerror(errno.EEXIST))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
