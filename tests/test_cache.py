"""The link cache and target launchers: byte-identical cached links, one compile after one
change of forty, corrupt entries rebuilt, links sharing a cache at once, eviction, keys."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import run

from offlink.link.cache import Cache, parse_size

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
    return sorted(p for p in (cache / "objects").rglob("*") if p.is_file())


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
        os.utime(cache._path(key), (1000 + i, 1000 + i))
    stale = Path(cache._path(keys[0]) + ".tmp-1-2")
    stale.write_bytes(b"half")
    os.utime(stale, (0, 0))
    assert cache.get(keys[1]) is not None  # a hit makes it the most recently used
    cache.trim()
    kept = [k for k in keys if os.path.exists(cache._path(k))]
    assert kept == [keys[1], keys[3], keys[4]]
    assert not stale.exists()


class FakeTarget:
    name = "x86_64-pc-linux-gnu"


class FakePayload:
    def __init__(self, code=b"int f(void){return 1;}", options=("-O2",), offered=()):
        self.code, self.options, self.offered, self.code_kind = code, options, offered, "c"


class FakeCU:
    def __init__(self, **kw):
        self.payload = FakePayload(**kw)


def test_object_key_covers_what_the_compile_depends_on(tmp_path):
    cache = Cache(str(tmp_path))

    def key(cu=None, argv=("gcc", "-O2", "-c", "/t1/a.i", "-o", "/t1/a.o"), tmp="/t1",
            compiler="gcc-id"):
        paths = {f"{tmp}/a.i": "<source>", f"{tmp}/a.o": "<object>", tmp: "<tmp>"}
        return cache.object_key(FakeTarget(), cu or FakeCU(), list(argv), paths, compiler)

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


def test_compiler_version_is_probed_once_across_links(tmp_path):
    log = tmp_path / "probes"
    tool = tmp_path / "mycc"
    tool.write_text(f"#!/bin/sh\necho probe >> {log}\necho mycc 1.0\n")
    tool.chmod(0o755)
    idents = {Cache(str(tmp_path / "c")).tool_identity(str(tool)) for _ in range(3)}
    assert len(idents) == 1 and None not in idents
    assert log.read_text().count("probe") == 1  # later links reuse the stored identity


def test_normalise_replaces_temporary_paths_in_and_as_words():
    from offlink.link.cache import normalise

    paths = {"/w/t/0001-a.c.o": "<object k1>", "/w/t/img": "<image>", "/w/t": "<tmp>"}
    argv = ["ld", "-o", "/w/t/img", "/w/t/0001-a.c.o", "--image3=file=/w/t/0001-a.c.o",
            "-L/usr/lib", "-Wl,-Map=/w/t/map"]
    assert normalise(argv, paths, "/w/t") == normalise(argv, paths) == [
        "ld", "-o", "<image>", "<object k1>", "--image3=file=<object k1>", "-L/usr/lib",
        "-Wl,-Map=<tmp>/map"]
