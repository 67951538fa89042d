"""The link cache and target launchers: byte-identical cached links, one compile after one
change of forty, corrupt entries rebuilt, links sharing a cache at once, eviction, keys."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import needs_tool, run

from offlink.cache import identity
from offlink.cache import native as native_module
from offlink.cache import store as cache_module
from offlink.cache.store import Cache, parse_size
from offlink.formats.declarations import PayloadBody
from offlink.link.compile import object_key

N = 40
CALLS = """\
#!/bin/sh
# A target launcher that records each call, then runs the command.
echo "$*" >> '{log}'
[ "$1" = "--" ] && shift  # an argument of the launcher itself (--target-launcher 'x --')
exec "$@"
"""


def unit(i: int, rev: int = 0) -> str:
    return (f"int unit{i}_value = {i + rev};\n"
            f"int unit{i}(int x) {{ return x * {i + 1} + unit{i}_value; }}\n")


MAIN = """\
#include <stdio.h>
#include <offlink.h>
int unit17(int);
int main(void) {
  int (*t)(int) = offlink_translate(OFFLINK_TABLE, (const void *)unit17);
  printf("%d %d %s\\n", unit17(2), t(2), OFFLINK_TABLE ? "table" : "none");
  return 0;
}
"""


@pytest.fixture(scope="module")
def forty(offlink, tmp_path_factory) -> Path:
    """N one-function CUs and a main, made by one `offlink cc` call."""
    d = tmp_path_factory.mktemp("forty")
    names = []
    for i in range(N):
        (d / f"unit{i}.c").write_text(unit(i))
        names.append(f"unit{i}.c")
    (d / "main.c").write_text(MAIN)
    cflags = run([offlink, "config", "--cflags"]).stdout.split()
    run([offlink, "cc", "gcc", "-O2", *cflags, "-c", "main.c", *names], cwd=d)
    return d


def inputs(d: Path, offlink: str) -> list[str]:
    libs = run([offlink, "config", "--libs"]).stdout.split()
    return [str(d / "main.o"), *(str(d / f"unit{i}.o") for i in range(N)), *libs]


def env_for(cache: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
    env.update(OFFLINK_CACHE_DIR=str(cache), OFFLINK_PROGRESS="0", **extra)
    return env


def recorder(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "calls"
    script = tmp_path / "record.sh"
    script.write_text(CALLS.format(log=log))
    script.chmod(0o755)
    return script, log


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def entries(cache: Path) -> list[Path]:
    """The cache's objects and images; not the relink records (`records`), which a link writes
    only once its inputs have settled (link/relink.py), so whether one is there depends on how
    long ago the test's objects were written."""
    return [p for p in _files(cache) if not _is_record(p)]


def records(cache: Path) -> list[Path]:
    return [p for p in _files(cache) if _is_record(p)]


def _files(cache: Path) -> list[Path]:
    return sorted(p for p in (cache / "objects").rglob("*") if p.is_file())


def _is_record(path: Path) -> bool:
    from offlink.cache.store import Cache

    entry = Cache.decode(path.read_bytes())
    return entry is not None and "paths" in entry.meta


def test_cached_link_is_byte_identical_to_an_uncached_one(offlink, forty, tmp_path):
    cache = tmp_path / "cache"
    args = inputs(forty, offlink)
    outputs = []
    for name, flags in (("uncached", ["--no-cache"]), ("cold", []), ("warm", [])):
        run([offlink, "link", *flags, "gcc", *args, "-o", tmp_path / name], env=env_for(cache))
        outputs.append((tmp_path / name).read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]
    assert run([tmp_path / "warm"]).stdout == "53 53 table\n"


def test_relink_after_one_change_of_forty_compiles_one(offlink, forty, tmp_path):
    cache = tmp_path / "cache"
    script, log = recorder(tmp_path)
    env = env_for(cache, OFFLINK_TARGET_LAUNCHER=str(script))
    args = inputs(forty, offlink)

    def link() -> str:
        proc = run([offlink, "link", "--timings", "gcc", *args, "-o", tmp_path / "prog"],
                   env=env)
        return next(ln for ln in proc.stderr.splitlines() if " CUs, " in ln)

    assert link().endswith(f"{N + 1} CUs, {N + 1} compiled, 0 from cache; image linked")
    assert len(calls(log)) == N + 1
    assert link().endswith(f"{N + 1} CUs, 0 compiled, {N + 1} from cache; image from cache")
    assert len(calls(log)) == N + 1

    (forty / "unit17.c").write_text(unit(17, rev=100))
    try:
        run([offlink, "cc", "gcc", "-O2", "-c", "unit17.c"], cwd=forty)
        stats = link()
        assert stats.endswith(f"{N + 1} CUs, 1 compiled, {N} from cache; image linked")
        assert len(calls(log)) == N + 2 and "unit17.c" in calls(log)[-1]
        assert run([tmp_path / "prog"]).stdout == "153 153 table\n"
    finally:
        (forty / "unit17.c").write_text(unit(17))
        run([offlink, "cc", "gcc", "-O2", "-c", "unit17.c"], cwd=forty)


def test_corrupt_entries_are_detected_and_rebuilt(offlink, forty, tmp_path):
    cache = tmp_path / "cache"
    args = inputs(forty, offlink)
    run([offlink, "link", "gcc", *args, "-o", tmp_path / "first"], env=env_for(cache))
    stored = entries(cache)
    assert len(stored) == N + 2  # every CU's object and the image
    for i, path in enumerate(stored):
        data = bytearray(path.read_bytes())
        if i % 2:
            data[len(data) // 2] ^= 0x40  # a flipped bit
        else:
            del data[len(data) // 3:]  # a truncated write
        path.write_bytes(bytes(data))
    proc = run([offlink, "link", "--verbose", "gcc", *args, "-o", tmp_path / "second"],
               env=env_for(cache))
    assert proc.stderr.count("is corrupt; rebuilding it") == N + 2
    assert (tmp_path / "first").read_bytes() == (tmp_path / "second").read_bytes()
    proc = run([offlink, "link", "--timings", "gcc", *args, "-o", tmp_path / "third"],
               env=env_for(cache))
    assert f"0 compiled, {N + 1} from cache; image from cache" in proc.stderr


def test_two_links_share_a_cache_at_once(offlink, forty, tmp_path):
    cache = tmp_path / "cache"
    args = inputs(forty, offlink)
    procs = [subprocess.Popen([offlink, "link", "--jobs", "1", "gcc", *args, "-o",
                               tmp_path / f"prog{i}"], env=env_for(cache),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    for p in procs:
        _out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert (tmp_path / "prog0").read_bytes() == (tmp_path / "prog1").read_bytes()
    assert not [p for p in (cache / "objects").rglob("*.tmp-*")]
    assert len(entries(cache)) == N + 2


def test_no_cache_option_and_env(offlink, forty, tmp_path):
    cache = tmp_path / "cache"
    args = [str(forty / "main.o"), str(forty / "unit17.o")]
    args += run([offlink, "config", "--libs"]).stdout.split()
    run([offlink, "link", "--no-cache", "gcc", *args, "-o", tmp_path / "a"], env=env_for(cache))
    run([offlink, "link", "gcc", *args, "-o", tmp_path / "b"],
        env=env_for(cache, OFFLINK_NO_CACHE="1"))
    assert not (cache / "objects").exists()


def test_target_launcher_option_and_env(offlink, forty, tmp_path):
    script, log = recorder(tmp_path)
    args = inputs(forty, offlink)
    env = env_for(tmp_path / "cache", OFFLINK_NO_CACHE="1")
    run([offlink, "link", "--target-launcher", f"{script} --", "gcc", *args, "-o",
         tmp_path / "prog"], env=env)
    recorded = calls(log)
    assert len(recorded) == N + 1
    assert all(c.startswith("-- gcc ") and " -c " in c and "-x" not in c.split() for c in recorded)
    assert run([tmp_path / "prog"]).stdout == "53 53 table\n"
    run([offlink, "link", "gcc", *args, "-o", tmp_path / "prog2"],
        env={**env, "OFFLINK_TARGET_LAUNCHER": str(script)})
    assert len(calls(log)) == 2 * (N + 1)
    proc = run([offlink, "link", "--target-launcher", "no-such-launcher", "gcc", *args, "-o",
                tmp_path / "prog3"], env=env, check=False)
    assert proc.returncode != 0
    assert "target launcher 'no-such-launcher' not found" in proc.stderr.splitlines()[-1]


def runtime_library(offlink, env: dict) -> Path:
    (lib,) = [w for w in run([offlink, "config", "--libs"], env=env).stdout.split()
              if w.endswith(".a")]
    return Path(lib)


def test_corrupt_runtime_library_is_rebuilt(offlink, forty, tmp_path):
    env = {**env_for(tmp_path / "cache"), "OFFLINK_BUILD_RUNTIME": "1"}
    lib = runtime_library(offlink, env)
    good = lib.read_bytes()
    seal = Path(f"{lib}.sha256")
    damages = [lambda: lib.write_bytes(good[:100] + bytes([good[100] ^ 1]) + good[101:]),
               lambda: lib.write_bytes(good[: len(good) // 2]),
               lambda: seal.unlink()]  # a library without its seal is not trusted either
    for damage in damages:
        damage()
        assert runtime_library(offlink, env) == lib
        assert lib.read_bytes() == good
        assert seal.read_text() == f"{len(good)} {hashlib.sha256(good).hexdigest()}\n"
    args = [str(forty / "main.o"), str(forty / "unit17.o"), str(lib), "-ldl", "-lpthread"]
    run([offlink, "link", "--no-cache", "gcc", *args, "-o", tmp_path / "prog"], env=env)
    assert run([tmp_path / "prog"]).stdout == "53 53 table\n"


def modes(root: Path) -> tuple[set[int], set[int]]:
    """The permission bits of the folders (root included) and of the files under `root`."""
    folders, files = {root.stat().st_mode & 0o7777}, set()
    for p in root.rglob("*"):
        (folders if p.is_dir() else files).add(p.stat().st_mode & 0o7777)
    return folders, files


def fill_cache(root: Path, monkeypatch) -> None:
    """An entry, a remembered tool identity and the runtime library, made in `root`."""
    from offlink.runtime.build import runtime_library

    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(root))
    monkeypatch.setenv("OFFLINK_BUILD_RUNTIME", "1")  # the build on demand, not the prebuilt
    monkeypatch.setattr("offlink.cache.freshness.SETTLED", -1.0)
    cache = Cache.open()
    assert cache is not None
    cache.put("ab" + "0" * 62, {}, b"entry")
    assert cache.tool_identity("gcc")
    runtime_library()


def test_private_cache_folders_are_0700_and_files_0600(tmp_path, monkeypatch):
    monkeypatch.delenv("OFFLINK_CACHE_SHARED", raising=False)
    old = os.umask(0o022)
    try:
        fill_cache(tmp_path / "home" / ".cache" / "offlink", monkeypatch)
    finally:
        os.umask(old)
    folders, files = modes(tmp_path / "home")
    assert folders == {0o700}
    root = tmp_path / "home" / ".cache" / "offlink"
    assert {p.stat().st_mode & 0o777 for p in root.rglob("*") if p.is_file()
            and not p.name.endswith(".a")} == {0o600}


def test_shared_cache_follows_the_umask(tmp_path, monkeypatch):
    monkeypatch.setenv("OFFLINK_CACHE_SHARED", "1")
    old = os.umask(0o002)
    try:
        fill_cache(tmp_path / "team", monkeypatch)
    finally:
        os.umask(old)
    folders, files = modes(tmp_path / "team")
    assert folders == {0o775} and files == {0o664}


def test_cache_folder_others_can_write_is_refused(offlink, forty, tmp_path):
    shared = tmp_path / "open"
    shared.mkdir()
    shared.chmod(0o777)
    libs = run([offlink, "config", "--libs"]).stdout.split()
    link = [offlink, "link", "gcc", forty / "main.o", forty / "unit17.o", *libs,
            "-o", tmp_path / "prog"]
    why = (f"offlink: error: cache folder {shared} is writable by other users: its entries end "
           f"up in the programs you link; choose another OFFLINK_CACHE_DIR, or set "
           f"OFFLINK_CACHE_SHARED=1 if everyone who can write there is trusted\n")
    # The runtime library built on demand (the prebuilt one never touches the cache).
    for argv in ([offlink, "config", "--libs"], link):
        proc = run(argv, env=env_for(shared, OFFLINK_BUILD_RUNTIME="1"), check=False)
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", why), argv
    assert not (tmp_path / "prog").exists() and not list(shared.iterdir())
    # the user says its writers are trusted
    env = env_for(shared, OFFLINK_CACHE_SHARED="1", OFFLINK_BUILD_RUNTIME="1")
    run([offlink, "config", "--libs"], env=env)
    run(link, env=env)
    assert (shared / "objects").is_dir() and (shared / "runtime").is_dir()


def test_cache_folder_of_another_user_is_refused(tmp_path, monkeypatch):
    from offlink.errors import UsageError

    monkeypatch.delenv("OFFLINK_CACHE_SHARED", raising=False)
    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(os, "geteuid", lambda: tmp_path.stat().st_uid + 1)
    with pytest.raises(UsageError, match=f"cache folder {tmp_path} belongs to another user"):
        Cache.open()
    monkeypatch.setenv("OFFLINK_CACHE_SHARED", "1")
    assert Cache.open() is not None


def test_temporary_files_never_follow_a_planted_name(tmp_path, monkeypatch):
    import threading

    cache = Cache(str(tmp_path / "c"))
    key = "cd" + "0" * 62
    path = cache.path(key)
    os.makedirs(os.path.dirname(path))
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    monkeypatch.setattr(cache_module, "_temp_path", lambda p: p + ".tmp-planted",
                        raising=False)
    for planted in (f"{path}.tmp-{os.getpid()}-{threading.get_ident()}",  # once predictable
                    f"{path}.tmp-planted"):
        os.symlink(victim, planted)
    cache.put(key, {}, b"entry")
    assert victim.read_bytes() == b"precious"
    assert cache.get(key) is None  # the write was given up, not sent elsewhere
    monkeypatch.undo()
    cache.put(key, {}, b"entry")  # a fresh name is never a planted one
    assert cache.get(key).data == b"entry" and victim.read_bytes() == b"precious"


# -- units ---------------------------------------------------------------------------------

def test_parse_size():
    assert parse_size("1048576") == 1 << 20
    assert parse_size("500M") == 500 << 20
    assert parse_size("2G") == parse_size("2GiB") == parse_size("2gb") == 2 << 30
    assert parse_size("1.5K") == 1536
    for bad in ("", "lots", "-1G"):
        with pytest.raises(Exception, match="OFFLINK_CACHE_SIZE"):
            parse_size(bad)


def test_size_limit_evicts_least_recently_used(tmp_path):
    cache = Cache(str(tmp_path), limit=4000)  # entries are ~1050 bytes
    keys = [f"{i:02x}" + "0" * 62 for i in range(5)]
    for i, key in enumerate(keys):
        cache.put(key, {}, bytes(1000))
        os.utime(cache.path(key), (1000 + i, 1000 + i))
    stale = Path(cache.path(keys[0]) + ".tmp-1-2")
    stale.write_bytes(b"half")
    os.utime(stale, (0, 0))
    assert cache.get(keys[1]) is not None  # a hit makes it the most recently used
    cache.trim()
    kept = [k for k in keys if os.path.exists(cache.path(k))]
    assert kept == [keys[1], keys[3], keys[4]]
    assert not stale.exists()


class FakeTarget:
    name = "x86_64-pc-linux-gnu"


def FakePayload(code=b"int f(void){return 1;}", options=("-O2",), offered=()):
    """A payload as the link reads it from a fat object (keyed by its stored bytes)."""
    from offlink.formats.payload import Payload, build_record, parse_records

    record = build_record(Payload(FakeTarget.name, "c", "a.c", "gcc", options, code, offered))
    return parse_records(record, "a.o", lazy=True)[0]


class FakeCU:
    def __init__(self, **kw):
        self.payload = FakePayload(**kw)


def test_object_key_covers_what_the_compile_depends_on(tmp_path):
    cache = Cache(str(tmp_path))

    def key(cu=None, argv=("gcc", "-O2", "-c", "/t1/a.i", "-o", "/t1/a.o"), tmp="/t1",
            compiler="gcc-id"):
        paths = {f"{tmp}/a.i": "<source>", f"{tmp}/a.o": "<object>", tmp: "<tmp>"}
        return object_key(cache, FakeTarget(), cu or FakeCU(), list(argv), paths, compiler)

    base = key()
    assert key(argv=("gcc", "-O2", "-c", "/t2/a.i", "-o", "/t2/a.o"), tmp="/t2") == base
    assert key(cu=FakeCU(code=b"int f(void){return 2;}")) != base
    assert key(cu=FakeCU(options=("-O3",))) != base
    assert key(cu=FakeCU(offered=("f",))) != base
    assert key(argv=("gcc", "-O3", "-c", "/t1/a.i", "-o", "/t1/a.o")) != base
    assert key(compiler="gcc-other") != base
    debug = ("gcc", "-g", "-c", "/t1/a.i", "-o", "/t1/a.o")
    here = key(argv=debug)
    os.chdir(tmp_path)  # debug info records the working directory
    try:
        assert key(argv=debug) != here
    finally:
        os.chdir(Path(__file__).parent)


def test_compiler_identity_follows_the_compiler(tmp_path):
    tool = tmp_path / "mycc"
    tool.write_text("#!/bin/sh\necho mycc 1.0\n")
    tool.chmod(0o755)
    first = Cache(str(tmp_path)).tool_identity(str(tool))
    assert first and first == Cache(str(tmp_path)).tool_identity(str(tool))
    tool.write_text("#!/bin/sh\necho mycc 2.0\n")
    assert Cache(str(tmp_path)).tool_identity(str(tool)) != first
    assert Cache(str(tmp_path)).tool_identity(str(tmp_path / "missing")) is None


def test_small_hashes_are_the_same_as_large_ones():
    """keys.hash_parts of a few KB (a tool's stamp) and its incremental hasher give the
    same digests as hashlib's SHA-256 of the parts' framing."""
    from offlink.cache.keys import hash_parts, hasher

    for parts in [("a", b"b"), ("",), (), (b"x" * 20000, "y"), ("\u00e9" * 9000,)]:
        assert hash_parts(*parts) == hasher(*parts).hexdigest() == \
            hashlib.sha256(b"".join(len(p).to_bytes(8, "little") + p for p in
                                    (q.encode() if isinstance(q, str) else q
                                     for q in parts))).hexdigest()


def test_entries_put_later_are_written_with_their_keys_made_then(tmp_path):
    """cache.put_later: a key given as a function is made when write_later writes the entry
    (a cold link makes the keys that wait for a driver's --version while its host link runs);
    None keeps nothing, and a key that fails loses its entry alone."""
    cache = Cache(str(tmp_path / "c"))
    made = []

    def later_key() -> str:
        made.append("key")
        return cache.key("test", "later")

    def failing() -> str:
        raise OSError("gone")

    cache.put_later(later_key, {"n": 1}, b"one")
    cache.put_later(failing, {"n": 2}, b"two")
    cache.put_later(lambda: None, {"n": 3}, b"three")
    cache.put_later(cache.key("test", "now"), {"n": 4}, b"four")
    assert made == []  # nothing made before write_later
    cache.write_later().join()
    assert made == ["key"]
    assert cache.get(cache.key("test", "later")).data == b"one"
    assert cache.get(cache.key("test", "now")).data == b"four"
    assert len(list((tmp_path / "c" / "objects").rglob("*"))) - \
        len([p for p in (tmp_path / "c" / "objects").rglob("*") if p.is_dir()]) == 2


def test_work_done_later_runs_after_the_entries_and_a_failure_is_dropped(tmp_path):
    """cache.do_later: work that puts entries of its own (the NVIDIA runtime part the next
    relink takes, toolchains/llvm/nvlink_wrapper.py) runs in write_later's thread, after
    put_later's entries; work that raises is dropped and the rest still runs."""
    cache = Cache(str(tmp_path / "c"))
    order = []

    def first() -> None:
        order.append("first")
        raise OSError("gone")

    def second() -> None:
        order.append("second")
        cache.put(cache.key("test", "worked"), {}, b"made")

    cache.put_later(lambda: order.append("entry") or None, {}, b"")
    cache.do_later(first)
    cache.do_later(second)
    assert order == []
    cache.write_later().join()
    assert order == ["entry", "first", "second"]
    assert cache.get(cache.key("test", "worked")).data == b"made"
    cache.write_later().join()  # each piece of work runs once
    assert order == ["entry", "first", "second"]


def test_compiler_version_is_probed_once_across_links(tmp_path, monkeypatch):
    # as if the tool were installed long ago
    monkeypatch.setattr("offlink.cache.freshness.SETTLED", -1.0)
    log = tmp_path / "probes"
    tool = tmp_path / "mycc"
    tool.write_text(f"#!/bin/sh\necho probe >> {log}\necho mycc 1.0\n")
    tool.chmod(0o755)
    idents = {Cache(str(tmp_path / "c")).tool_identity(str(tool)) for _ in range(3)}
    assert len(idents) == 1 and None not in idents
    assert log.read_text().count("probe") == 1  # later links reuse the stored identity


def same_size_rewrite(tool: Path, text: str, st: os.stat_result) -> None:
    """Rewrite `tool` in place with `text` (same size) and put its old mtime back."""
    assert len(text) == st.st_size
    tool.write_text(text)
    os.utime(tool, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = tool.stat()
    assert (now.st_ino, now.st_size, now.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)


def test_same_size_rewrite_within_one_tick_is_noticed(tmp_path):
    # Same size, same mtime, same --version: only the content tells the two builds apart.
    tool = tmp_path / "mycc"
    tool.write_text("#!/bin/sh\necho mycc 1.0\n# build A\n")
    tool.chmod(0o755)
    st = tool.stat()
    first = Cache(str(tmp_path / "c")).tool_identity(str(tool))
    same_size_rewrite(tool, "#!/bin/sh\necho mycc 1.0\n# build B\n", st)
    assert Cache(str(tmp_path / "c")).tool_identity(str(tool)) != first
    # A tool changed this recently is not remembered: its stamp could repeat with other bytes.
    assert not (tmp_path / "c" / "tools").exists()


def test_remembered_tool_changed_in_place_or_replaced_is_noticed(tmp_path, monkeypatch):
    monkeypatch.setattr("offlink.cache.freshness.SETTLED", -1.0)  # remember every probe
    tool = tmp_path / "mycc"
    tool.write_text("#!/bin/sh\necho mycc 1.0\n# build A\n")
    tool.chmod(0o755)
    st = tool.stat()
    first = Cache(str(tmp_path / "c")).tool_identity(str(tool))
    assert len(os.listdir(tmp_path / "c" / "tools")) == 1
    # In place: ctime moves on (wait for the clock to tick past the first write).
    for _ in range(500):
        same_size_rewrite(tool, "#!/bin/sh\necho mycc 1.0\n# build B\n", st)
        if tool.stat().st_ctime_ns != st.st_ctime_ns:
            break
        time.sleep(0.005)
    second = Cache(str(tmp_path / "c")).tool_identity(str(tool))
    assert second not in (first, None)
    # Replaced by another file of the same size and mtime: the inode differs.
    new = tmp_path / "mycc.new"
    new.write_text("#!/bin/sh\necho mycc 1.0\n# build C\n")
    new.chmod(0o755)
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(new, tool)
    assert Cache(str(tmp_path / "c")).tool_identity(str(tool)) not in (first, second, None)


def test_runtime_library_key_follows_a_same_size_rewrite_of_the_compiler(tmp_path):
    from offlink.runtime.build import _key

    cc = tmp_path / "mycc"
    cc.write_text("#!/bin/sh\nexec gcc \"$@\" # A\n")
    cc.chmod(0o755)
    st = cc.stat()
    first = _key([str(cc)], "ar")
    for _ in range(500):  # until the clock ticks past the first write: ctime then differs
        same_size_rewrite(cc, "#!/bin/sh\nexec gcc \"$@\" # B\n", st)
        if cc.stat().st_ctime_ns != st.st_ctime_ns:
            break
        time.sleep(0.005)
    assert _key([str(cc)], "ar") != first


def test_normalise_replaces_temporary_paths_in_and_as_words():
    from offlink.cache.keys import normalise

    paths = {"/w/t/0001-a.c.o": "<object k1>", "/w/t/img": "<image>", "/w/t": "<tmp>"}
    argv = ["ld", "-o", "/w/t/img", "/w/t/0001-a.c.o", "--image3=file=/w/t/0001-a.c.o",
            "-L/usr/lib", "-Wl,-Map=/w/t/map"]
    assert normalise(argv, paths, "/w/t") == normalise(argv, paths) == [
        "ld", "-o", "<image>", "<object k1>", "--image3=file=<object k1>", "-L/usr/lib",
        "-Wl,-Map=<tmp>/map"]


def cc_one_by_one(offlink, d: Path, env: dict, count: int) -> list[str]:
    """`count` CUs and a main, each by its own `offlink cc` (as make runs them)."""
    objs = []
    for i in range(count):
        (d / f"unit{i}.c").write_text(unit(i))
        run([offlink, "cc", "gcc", "-O2", "-fPIC", "-c", f"unit{i}.c", "-o", f"unit{i}.o"], cwd=d,
            env=env)
        objs.append(str(d / f"unit{i}.o"))
    (d / "main.c").write_text(MAIN)
    cflags = run([offlink, "config", "--cflags"]).stdout.split()
    run([offlink, "cc", "gcc", "-O2", *cflags, "-c", "main.c", "-o", "main.o"], cwd=d, env=env)
    return [str(d / "main.o"), *objs, *run([offlink, "config", "--libs"]).stdout.split()]


def test_cc_compiles_target_code_into_the_cache_so_the_link_compiles_none(offlink, tmp_path):
    cache = tmp_path / "cache"
    script, log = recorder(tmp_path)
    env = env_for(cache, OFFLINK_TARGET_LAUNCHER=str(script))
    d = tmp_path / "src"
    d.mkdir()
    args = cc_one_by_one(offlink, d, env, 18)
    assert len(calls(log)) == 19  # one target compile per `offlink cc`
    proc = run([offlink, "link", "--timings", "gcc", *args, "-o", tmp_path / "prog"], env=env)
    assert "19 CUs, 0 compiled, 19 from cache; image linked" in proc.stderr
    assert len(calls(log)) == 19
    # The same link with an empty cache compiles every CU and writes the same bytes.
    proc = run([offlink, "link", "--timings", "gcc", *args, "-o", tmp_path / "fresh"],
               env=env_for(tmp_path / "empty"))
    assert "19 CUs, 19 compiled, 0 from cache" in proc.stderr
    assert (tmp_path / "prog").read_bytes() == (tmp_path / "fresh").read_bytes()
    assert run([tmp_path / "prog"]).stdout == "53 53 table\n"


def test_cc_target_compile_opt_out_and_no_cache(offlink, tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    for name, extra in (("off", {"OFFLINK_CC_TARGET_COMPILE": "0"}),
                        ("nocache", {"OFFLINK_NO_CACHE": "1"})):
        cache = tmp_path / name
        args = cc_one_by_one(offlink, d, env_for(cache, **extra), 2)
        # no target object; with the cache on, offlink cc's own (fatcache.py) only
        kinds = {Cache.decode(p.read_bytes()).meta.get("kind") for p in _files(cache)}
        assert kinds == ({"cc-object", "cc-recipe"} if name == "off" else set())
        proc = run([offlink, "link", "--timings", "gcc", "-shared", *args[1:3], "-o",
                    tmp_path / name / "lib.so"], env=env_for(cache))
        assert "2 CUs, 2 compiled, 0 from cache" in proc.stderr


def test_cc_leaves_a_refused_cache_folder_to_the_link(offlink, tmp_path):
    shared = tmp_path / "open"
    shared.mkdir()
    shared.chmod(0o777)
    (tmp_path / "a.c").write_text("int a(int x) { return x; }\n")
    proc = run([offlink, "cc", "gcc", "-fPIC", "-c", "a.c", "-o", "a.o"], cwd=tmp_path,
               env=env_for(shared))
    assert proc.stderr == "" and (tmp_path / "a.o").exists() and not list(shared.iterdir())
    proc = run([offlink, "link", "gcc", "-shared", "a.o", "-o", "liba.so"], cwd=tmp_path,
               env=env_for(shared), check=False)
    assert proc.returncode == 2 and "is writable by other users" in proc.stderr


def test_cc_leaves_a_failing_target_compile_to_the_link(offlink, tmp_path):
    cache = tmp_path / "cache"
    env = env_for(cache)
    (tmp_path / "bad.c").write_text("#ifdef __OFFLINK_TARGET__\n"
                                    "int bad(void) { return undeclared_thing; }\n#endif\n"
                                    "int good(int x) { return x; }\n")
    proc = run([offlink, "cc", "gcc", "-c", "bad.c", "-o", "bad.o"], cwd=tmp_path, env=env)
    assert proc.stderr == ""  # the host compile is right: nothing to report here
    assert (tmp_path / "bad.o").exists()
    (tmp_path / "main.c").write_text("int good(int); int main(void) { return good(0); }\n")
    run([offlink, "cc", "gcc", "-c", "main.c", "-o", "main.o"], cwd=tmp_path, env=env)
    proc = run([offlink, "link", "gcc", "main.o", "bad.o", "-o", "prog"], cwd=tmp_path, env=env,
               check=False)
    assert proc.returncode != 0
    assert "undeclared_thing" in proc.stderr
    assert "offlink: error: target compile of bad.c (bad.o)" in proc.stderr
    assert not (tmp_path / "prog").exists()


def test_relink_with_every_cu_cached_inflates_no_payload(offlink, forty, tmp_path, monkeypatch):
    from offlink.formats import payload
    from offlink.link.pipeline import LinkOptions, link

    cache = tmp_path / "cache"
    args = inputs(forty, offlink)
    run([offlink, "link", "gcc", *args, "-o", tmp_path / "cold"], env=env_for(cache))
    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(cache))
    monkeypatch.setenv("OFFLINK_PROGRESS", "0")
    monkeypatch.delenv("MAKEFLAGS", raising=False)

    def no_inflation(*_args):
        raise AssertionError("a payload was inflated")

    monkeypatch.setattr(payload, "_code", no_inflation)
    assert link(["gcc", *args, "-o", str(tmp_path / "warm")], LinkOptions()) == 0
    assert (tmp_path / "warm").read_bytes() == (tmp_path / "cold").read_bytes()


def test_lazy_payload_keeps_the_bounds_checks_and_a_stable_key():
    import zlib

    from offlink.errors import FormatError
    from offlink.formats import payload as pl

    code = b"int f(void) { return 1; }\n" * 50
    record = pl.build_record(pl.Payload("t", "c", "a.c", "gcc", (), code))
    lazy = pl.parse_records(record, "a.o", lazy=True)[0]
    key = lazy.code_id
    assert lazy.code == code == pl.parse_records(record, "a.o")[0].code
    assert lazy.code_id == key  # reading the code does not change the key
    assert pl.Payload("t", "c", "a.c", "gcc", (), code).code_id != key  # keyed by stored bytes
    # A record whose code inflates past its declared size: refused when the code is read.
    stored = zlib.compress(bytes(1 << 20))
    body = PayloadBody.build(dict(target="t", code_kind="c", source="a.c", compiler="gcc",
                                  options=[], offered=[], code=stored))
    body += bytes(-len(body) % 8)
    head = pl.HEADER_STRUCT.pack(pl.MAGIC, 2, pl.FLAG_ZLIB, zlib.crc32(body), len(body), 4096)
    forged = pl.parse_records(head + body, "b.o: section x", lazy=True)[0]
    with pytest.raises(FormatError, match="b.o: section x: corrupt payload .the code "
                                          "inflates to more than the 4096 bytes"):
        assert forged.code is None  # not reached


# -- a relink with nothing changed (link/relink.py, device.cached_image) ----------------------

def in_process(monkeypatch, cache: Path, settled: float | None = 0.0):
    """offlink link run in this process, with the cache at `cache`; `settled`: the seconds
    after which a file's stamp is trusted (0: at once, so a test need not wait)."""
    from offlink.link.pipeline import LinkOptions, link

    monkeypatch.setenv("OFFLINK_CACHE_DIR", str(cache))
    monkeypatch.setenv("OFFLINK_PROGRESS", "0")
    monkeypatch.delenv("MAKEFLAGS", raising=False)
    if settled is not None:
        monkeypatch.setattr("offlink.cache.freshness.SETTLED", settled)
    return lambda argv, **kw: link([str(a) for a in argv], LinkOptions(**kw))


def copy_forty(forty: Path, d: Path) -> None:
    d.mkdir()
    for p in forty.iterdir():
        if p.suffix == ".o":
            (d / p.name).write_bytes(p.read_bytes())


def test_relink_with_nothing_changed_opens_no_input_and_reads_no_object_entry(
        offlink, forty, tmp_path, monkeypatch, capfd):
    from offlink.cache import store as cache_mod
    from offlink.link import extract

    cache = tmp_path / "cache"
    cache.mkdir()
    link = in_process(monkeypatch, cache)
    args = inputs(forty, offlink)
    assert link(["gcc", *args, "-o", tmp_path / "first"]) == 0  # records its inputs
    assert link(["gcc", *args, "-o", tmp_path / "second"]) == 0

    def no_read(path):
        raise AssertionError(f"{path} was read")

    monkeypatch.setattr(extract, "_read", no_read)
    real_get = cache_mod.Cache.get
    got = []
    monkeypatch.setattr(cache_mod.Cache, "get", lambda self, key: got.append(key) or
                        real_get(self, key))
    capfd.readouterr()
    assert link(["gcc", *args, "-o", tmp_path / "third"], timings=True) == 0
    assert f"{N + 1} CUs, 0 compiled, {N + 1} from cache; image from cache" in \
        capfd.readouterr().err
    assert len(got) == 2  # the record of the inputs and the image: no object entry
    assert (tmp_path / "third").read_bytes() == (tmp_path / "first").read_bytes()


def test_relink_over_its_output_stats_each_input_once(offlink, forty, tmp_path, monkeypatch):
    """The output's check (is it one of the inputs?) and the record's stamps share one stat
    per input: 1000 inputs cost ~2 ms a stat pass."""
    cache = tmp_path / "cache"
    cache.mkdir()
    link = in_process(monkeypatch, cache)
    args = inputs(forty, offlink)
    assert link(["gcc", *args, "-o", tmp_path / "prog"]) == 0  # records its inputs
    assert link(["gcc", *args, "-o", tmp_path / "prog"]) == 0
    real_stat = os.stat
    seen: list[str] = []

    def counting_stat(path, *a, **kw):
        if str(path).endswith(".o"):
            seen.append(str(path))
        return real_stat(path, *a, **kw)

    monkeypatch.setattr(os, "stat", counting_stat)
    assert link(["gcc", *args, "-o", tmp_path / "prog"]) == 0  # from the record
    objects = [a for a in args if a.endswith(".o")]
    assert sorted(seen) == sorted(objects)


def test_relink_from_the_image_entry_refreshes_old_object_entries(offlink, forty, tmp_path,
                                                                   monkeypatch):
    """The objects a relink took from the image's entry stay recently used (the eviction
    order): refreshed when the first is older than _REFRESH, left alone when it is not."""
    cache = tmp_path / "cache"
    cache.mkdir()
    link = in_process(monkeypatch, cache)
    args = inputs(forty, offlink)
    assert link(["gcc", *args, "-o", tmp_path / "prog"]) == 0
    assert link(["gcc", *args, "-o", tmp_path / "prog"]) == 0
    objects = [p for p in (cache / "objects").rglob("*") if p.is_file()
               and set(Cache.decode(p.read_bytes()).meta) == {"offers"}]  # not the image's
    assert len(objects) == N + 1
    for p in objects:
        os.utime(p, (1000, 1000))
    assert link(["gcc", *args, "-o", tmp_path / "prog"]) == 0
    assert all(p.stat().st_mtime > time.time() - 60 for p in objects)
    for p in objects:
        os.utime(p, (time.time() - 60,) * 2)
    assert link(["gcc", *args, "-o", tmp_path / "prog"]) == 0
    assert all(p.stat().st_mtime < time.time() - 30 for p in objects)


def same_size_versions(d: Path, offlink: str) -> tuple[bytes, bytes]:
    """unit17.o as built, and built from other code (a changed constant), padded with zero
    bytes past the ELF contents (which ld and offlink ignore) to the same size."""
    old = (d / "unit17.o").read_bytes()
    src = d / "unit17-new.c"
    src.write_text(unit(17, rev=1))  # 18 in place of 17: the same number of digits
    run([offlink, "cc", "gcc", "-O2", "-c", src.name, "-o", "unit17-new.o"], cwd=d)
    new = (d / "unit17-new.o").read_bytes()
    size = max(len(old), len(new))
    return old + bytes(size - len(old)), new + bytes(size - len(new))


def test_relink_sees_a_same_size_rewrite_that_puts_the_old_mtime_back(
        offlink, forty, tmp_path, monkeypatch, capfd):
    """`touch -d`, `cp -p`, `tar x` restore an mtime; the ctime in the stamp still moves."""
    d = tmp_path / "objs"
    copy_forty(forty, d)
    old, new = same_size_versions(d, offlink)
    target = d / "unit17.o"
    target.write_bytes(old)
    cache = tmp_path / "cache"
    cache.mkdir()
    link = in_process(monkeypatch, cache)
    args = [str(d / Path(a).name) if a.startswith(str(forty)) else a
            for a in inputs(forty, offlink)]
    assert link(["gcc", *args, "-o", tmp_path / "prog"]) == 0
    assert run([tmp_path / "prog"]).stdout == "53 53 table\n"
    st = target.stat()
    time.sleep(0.05)  # past the file system's timestamp tick
    with open(target, "r+b") as f:  # in place: the same inode
        f.write(new)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = target.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == \
        (st.st_ino, st.st_size, st.st_mtime_ns)
    capfd.readouterr()
    assert link(["gcc", *args, "-o", tmp_path / "prog"], timings=True) == 0
    assert f"{N + 1} CUs, 1 compiled, {N} from cache" in capfd.readouterr().err
    assert run([tmp_path / "prog"]).stdout == "54 54 table\n"


def test_no_record_of_files_changed_moments_ago(offlink, forty, tmp_path, monkeypatch):
    """A file changed within the timestamp tick could change again and keep its stamp:
    until it has settled the relink reads it again; the files that had settled it takes from
    the record (here the runtime library, written long before)."""
    from offlink.link import extract

    d = tmp_path / "objs"
    copy_forty(forty, d)  # written just now
    cache = tmp_path / "cache"
    cache.mkdir()
    link = in_process(monkeypatch, cache, settled=None)  # the real 2 seconds
    args = [str(d / Path(a).name) if a.startswith(str(forty)) else a
            for a in inputs(forty, offlink)]
    assert link(["gcc", *args, "-o", tmp_path / "prog"]) == 0
    assert len(entries(cache)) == N + 2 and len(records(cache)) == 1  # objects, image, record
    reads = []
    real = extract._read
    monkeypatch.setattr(extract, "_read", lambda p: reads.append(p) or real(p))
    assert link(["gcc", *args, "-o", tmp_path / "prog"]) == 0
    assert len(reads) == N + 1 and all(Path(p).parent == d for p in reads)  # the objects


def test_a_relink_after_one_object_changed_reads_that_one_alone(offlink, forty, tmp_path,
                                                                monkeypatch, capfd):
    """Edit, compile, link: the object just compiled has not settled when the link reads it,
    so the record keeps it without a stamp and the next link reads it again, and it alone;
    the other objects come from the record, link after link."""
    from offlink.link import extract, relink

    d = tmp_path / "objs"
    copy_forty(forty, d)
    cache = tmp_path / "cache"
    cache.mkdir()
    link = in_process(monkeypatch, cache, settled=None)
    changed = d / "unit3.o"
    # every file settled but the one changed moments ago (ctime cannot be set back)
    monkeypatch.setattr(relink, "settled", lambda st, now=None: st.st_ino != changed.stat().st_ino)
    args = [str(d / Path(a).name) if a.startswith(str(forty)) else a
            for a in inputs(forty, offlink)]
    assert link(["gcc", *args, "-o", tmp_path / "prog"]) == 0
    reads = []
    real = extract._read
    monkeypatch.setattr(extract, "_read", lambda p: reads.append(p) or real(p))
    for _ in range(2):
        reads.clear()
        assert link(["gcc", *args, "-o", tmp_path / "prog"]) == 0
        assert reads == [str(changed)]
    assert run([tmp_path / "prog"]).stdout == "53 53 table\n"


def test_recorded_cu_whose_object_left_the_cache_is_read_again(offlink, forty, tmp_path,
                                                               monkeypatch, capfd):
    cache = tmp_path / "cache"
    cache.mkdir()
    link = in_process(monkeypatch, cache)
    args = inputs(forty, offlink)
    assert link(["gcc", *args, "-o", tmp_path / "first"]) == 0
    assert link(["gcc", *args, "-o", tmp_path / "first"]) == 0  # now from the record
    assert len(records(cache)) == 1
    for p in entries(cache):  # every entry but the record of the inputs
        p.unlink()
    capfd.readouterr()
    assert link(["gcc", *args, "-o", tmp_path / "second"], timings=True) == 0
    assert f"{N + 1} CUs, {N + 1} compiled, 0 from cache" in capfd.readouterr().err
    assert (tmp_path / "second").read_bytes() == (tmp_path / "first").read_bytes()


def test_deferred_code_must_keep_its_recorded_sha256():
    from offlink.errors import FormatError
    from offlink.formats import payload as pl

    record = pl.build_record(pl.Payload("t", "c", "a.c", "gcc", (), b"int f;\n"))
    stored = pl.parse_records(record, "a.o", lazy=True)[0].__dict__["_code"]
    good = pl.Payload("t", "c", "a.c", "gcc", (), pl.Deferred(pl.stored_id(stored),
                                                              lambda: stored, "a.o"))
    assert good.code == b"int f;\n" and good.code_id == pl.stored_id(stored)
    bad = pl.Payload("t", "c", "a.c", "gcc", (), pl.Deferred("0" * 64, lambda: stored, "a.o"))
    assert bad.code_id == "0" * 64
    with pytest.raises(FormatError, match="a.o: changed while being linked; link again"):
        assert bad.code is None  # not reached


def test_relink_sees_a_library_found_elsewhere_on_the_search_path(offlink, forty, tmp_path,
                                                                  monkeypatch, capfd):
    """-lNAME is looked up again: a new archive earlier on the -L path is read, not the one
    the record names."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    d1.mkdir()
    d2.mkdir()
    run(["ar", "rcs", d1 / "libunits.a", forty / "unit17.o"])
    cache = tmp_path / "cache"
    cache.mkdir()
    link = in_process(monkeypatch, cache)
    libs = run([offlink, "config", "--libs"]).stdout.split()
    argv = ["gcc", forty / "main.o", f"-L{d2}", f"-L{d1}", "-lunits", *libs, "-o",
            tmp_path / "prog"]
    from offlink.link import extract

    assert link(argv) == 0
    real = extract._read
    with monkeypatch.context() as m:
        m.setattr(extract, "_read", lambda p: pytest.fail(f"{p} read"))
        assert link(argv) == 0  # from the record
    assert run([tmp_path / "prog"]).stdout == "53 53 table\n"
    assert extract._read is real
    (d2 / "unit17.c").write_text(unit(17, rev=1))
    run([offlink, "cc", "gcc", "-O2", "-c", "unit17.c", "-o", "unit17.o"], cwd=d2)
    run(["ar", "rcs", d2 / "libunits.a", d2 / "unit17.o"])
    capfd.readouterr()
    assert link(argv, timings=True) == 0
    # (offlink cc compiled the new CU into the same cache: a new image of cached objects)
    assert "2 CUs, 0 compiled, 2 from cache; image linked" in capfd.readouterr().err
    assert run([tmp_path / "prog"]).stdout == "54 54 table\n"


def test_trim_scans_only_when_the_noted_total_nears_the_limit_or_is_old(tmp_path, monkeypatch):
    """A link that stored a little adds it to the total the last scan noted: no scan of
    every entry (1000 entries ~8 ms) until that reaches the limit or _RESCAN has passed."""
    from offlink.cache import store as cache_mod

    cache = Cache(str(tmp_path), limit=10000)  # entries are ~1050 bytes
    for i in range(3):
        cache.put(f"{i:02x}" + "0" * 62, {}, bytes(1000))
    scans = []
    real_scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p: scans.append(p) or real_scandir(p))
    cache.trim()  # nothing noted yet: a scan, which notes the total
    assert scans
    total = sum(f.stat().st_size for f in Path(cache.dir).rglob("*") if f.is_file())
    assert (tmp_path / "size").read_text().split()[0] == str(total)

    def store(i: int) -> Cache:
        later = Cache(str(tmp_path), limit=10000)  # the next link
        later.put(f"{i:02x}" + "0" * 62, {}, bytes(1000))
        return later

    scans.clear()
    store(3).trim()
    assert not scans  # 4 entries of ~1050 bytes: well under the limit
    assert int((tmp_path / "size").read_text().split()[0]) == total * 4 // 3
    for i in range(4, 9):
        store(i).trim()
    assert not scans
    store(9).trim()  # the note reaches the limit: a scan, which removes the oldest
    assert scans
    assert len(list(Path(cache.dir).rglob("*" + "0" * 62))) < 10
    scans.clear()
    monkeypatch.setattr(cache_mod, "_RESCAN", 0.0)  # the note is too old to trust
    store(10).trim()
    assert scans


_CLANG_OFFLOAD = ["-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu", "-foffload-lto"]


@needs_tool(shutil.which("clang-19") is None or
            not Path("/usr/lib/llvm-19/lib/libomptarget.so").exists(),
            "clang-19 or libomptarget missing (apt-get install clang-19 libomp-19-dev)")
def test_a_whole_link_after_a_narrowed_one_gets_every_row(offlink, tmp_path):
    """A clang -foffload-lto image is linked whole by a narrowed link too, so both have one
    image key; the whole link from the cache (device.cached_image) must not take the narrowed
    link's offers that the entry kept (it gave the table no row for `g`)."""
    (tmp_path / "k.c").write_text(
        "#include <stdio.h>\n#pragma omp declare target\nint g = 3;\n"
        "int twice(int x) { return 2 * x + g; }\n#pragma omp end declare target\n"
        "int main(void) { int r = 0;\n#pragma omp target map(tofrom: r)\n  r = twice(4);\n"
        "  printf(\"%d\\n\", r); return 0; }\n")
    run(["clang-19", "-O2", *_CLANG_OFFLOAD, "-c", "k.c", "-o", "k.o"], cwd=tmp_path)
    env = {**os.environ, "OFFLINK_CACHE_DIR": str(tmp_path / "cache")}
    link = [offlink, "link", "clang-19", *_CLANG_OFFLOAD, "k.o", "-o", "prog"]

    def rows() -> set[str]:
        table = json.loads(run([offlink, "inspect", "--json", "prog"], cwd=tmp_path).stdout)
        return {s["name"] for s in table["table"]["symbols"]}

    for _ in range(2):
        run([*link[:2], "--offload-symbol", "__omp_offloading_*", *link[2:]], cwd=tmp_path,
            env=env)
    assert "g" not in rows()
    run(link, cwd=tmp_path, env=env)
    assert "g" in rows() and any(r.startswith("__omp_offloading_") for r in rows())


NATIVE_CC = """\
#!/bin/sh
# A driver whose `-###` expands -march=native as the file `cpu` beside it says.
for a; do
  if [ "$a" = "-###" ]; then
    echo probe >> '{log}'; echo " cc1 -march=$(cat '{cpu}') -o x.s" >&2; exit 0
  fi
done
echo mycc 1.0
"""


def test_a_native_target_compile_is_keyed_by_what_native_is_on_this_cpu(tmp_path, monkeypatch):
    """The link's target compile of a CU built with -march=native (the host fallback compiles
    with the CU's options; clang's OpenMP CPU targets give llvm-lto2 --mcpu=native): its key
    holds the driver's expansion, so a cache shared with another CPU misses; remembered, so a
    relink starts no driver; a command without native words keeps its key."""
    from offlink.formats.payload import Payload, build_record, parse_records
    from offlink.link.compile import planned
    from offlink.model import CU
    from offlink.toolchains.offlink.host import HostTarget

    monkeypatch.setattr("offlink.cache.freshness.SETTLED", -1.0)  # remember the compiler's identity
    log, cpu, tool = tmp_path / "probes", tmp_path / "cpu", tmp_path / "mycc"
    tool.write_text(NATIVE_CC.format(log=log, cpu=cpu))
    tool.chmod(0o755)
    log.write_text("")

    def key(*options: str, lto2: bool = False, machine: str = "znver3") -> str:
        cpu.write_text(machine)
        monkeypatch.setattr(native_module, "cpu_identity", lambda: f"cpu {machine}")
        record = build_record(Payload("x86_64-pc-linux-gnu", "c", "a.c", str(tool), options,
                                      b"int f(void){return 1;}", ()))
        cu = CU("a.o", parse_records(record, "a.o", lazy=True)[0])
        target = HostTarget("x86_64-pc-linux-gnu")
        if lto2:  # as OpenMPTarget's llvm-lto2 command, from the payload's -march=native
            monkeypatch.setattr(target, "compile_argv", lambda cu, src, obj: [
                str(tool), "run", "--mcpu=native", src, "-o", obj])
        return planned([cu], target, str(tmp_path / "w"), Cache(str(tmp_path / "c")))[0][3]

    plain = key("-O2")
    assert log.read_text() == ""  # no native words: no probe, the key as before
    cache = Cache(str(tmp_path / "c"))
    argv = [str(tool), "-O2", "-ffunction-sections", "-fdata-sections", "-fPIC", "-c",
            "/w/0000-a.c.i", "-o", "/w/0000-a.c.o"]
    assert plain == object_key(cache, HostTarget("x86_64-pc-linux-gnu"), CU("a.o", parse_records(
        build_record(Payload("x86_64-pc-linux-gnu", "c", "a.c", str(tool), ("-O2",),
                             b"int f(void){return 1;}", ())), "a.o", lazy=True)[0]), argv,
        {"/w/0000-a.c.i": "<source>", "/w/0000-a.c.o": "<object>", "/w": "<tmp>"},
        cache.tool_identity(str(tool)) or "")
    here = key("-O2", "-march=native")
    assert log.read_text().count("probe") == 1
    assert key("-O2", "-march=native") == here  # remembered: a relink starts no driver
    assert log.read_text().count("probe") == 1
    # another machine sharing the cache folder: same command, another expansion
    assert key("-O2", "-march=native", machine="skylake") != here
    # llvm-lto2's --mcpu=native: keyed by the payload's driver's expansion of -march=native
    lto = key("-march=native", lto2=True)
    assert key("-march=native", lto2=True, machine="skylake") != lto
    assert key("-march=native", lto2=True) == lto


def test_a_changed_device_runtime_command_or_offlink_code_misses_the_cache(tmp_path, monkeypatch):
    """The nvptx OpenMP device runtime's cubin (openmp_nvptx.prepare_image) is keyed by the
    commands that make it and by offlink's code identity, not only by what they read: a
    changed command, or another offlink, is served no stale cubin."""
    from offlink.toolchains.llvm.openmp_nvptx import OpenMPNvptxTarget

    cache = Cache(str(tmp_path))
    target = OpenMPNvptxTarget("openmp-nvptx64-nvidia-cuda", "sm_80")

    def key() -> str:
        return target._runtime_key(cache, "runtime, tools, resolutions", "/llvm/llvm-lto2",
                                   "/cuda/ptxas")

    base = key()
    assert key() == base and len(base) == 64
    target.opt_level = 3  # -O3 in both commands
    assert key() != base
    target.opt_level = 2
    assert key() == base
    real = OpenMPNvptxTarget._runtime_argvs
    monkeypatch.setattr(OpenMPNvptxTarget, "_runtime_argvs",
                        lambda self, *a: [[*argv, "--extra"] for argv in real(self, *a)])
    assert key() != base
    monkeypatch.undo()
    assert key() == base
    monkeypatch.setattr(identity, "_CODE", "another offlink")
    assert key() != base


def test_entry_metadata_is_read_as_json_loads_reads_it():
    """Store.decode reads metadata with compact_json.json_value (`offlink cc`'s warm hit imports
    no json): what json.loads gives, or the error it raises, for metadata as Store.put writes
    it and for JSON-like text; anything it does not take goes to json.loads."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from offlink.cache.compact_json import json_value

    def same(text: bytes) -> None:
        try:
            want = ("value", json.loads(text))
        except ValueError as e:
            want = ("error", type(e))
        try:
            got = ("value", json_value(text))
        except ValueError as e:
            got = ("error", type(e))
        assert repr(got) == repr(want), text

    leaf = st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=False)
    tree = st.recursive(leaf, lambda c: st.lists(c) | st.dictionaries(st.text(), c),
                        max_leaves=20)

    @settings(max_examples=300, deadline=None)
    @given(tree)
    def written(value):
        same(json.dumps(value, sort_keys=True, separators=(",", ":")).encode())
        same(json.dumps(value, ensure_ascii=False).encode())

    @settings(max_examples=2000, deadline=None)
    @given(st.text(st.sampled_from(list('{}[],:"\\ubfnrt0123456789-.eEaD /\x00\x7f\u00e9')),
                   max_size=24))
    def jsonish(text):
        same(text.encode())

    written()
    jsonish()


def test_a_warm_entry_is_read_without_json(tmp_path):
    """The compact reader is what Store.decode uses: an entry written and read back in a fresh
    interpreter leaves json unimported."""
    script = (
        "import sys\n"
        "from offlink.cache.store import Store\n"
        f"s = Store({str(tmp_path)!r})\n"
        "s.put('k' * 64, {'said': 'x\\u00e9', 'n': [1, True, None]}, b'data')\n"
        "del sys.modules['json']\n"
        "for m in [m for m in sys.modules if m.startswith('json.')]: del sys.modules[m]\n"
        "e = s.get('k' * 64)\n"
        "assert e.meta == {'said': 'x\\u00e9', 'n': [1, True, None]} and e.data == b'data', e\n"
        "print('json' in sys.modules)\n")
    out = run([sys.executable, "-c", script],
              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert out.stdout.strip() == "False"
