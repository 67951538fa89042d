"""Link times of synthetic projects: cold link, relink after one CU changed, relink with
nothing changed, and the plain host link, with offlink's per-stage times (--timings).

    python benchmarks/link/bench.py [--cus 40] [--symbols 20] [--runs 5] [--big 1000]
                                    [--offlink PATH] [--out benchmarks/link/RESULTS.md]

The project comes from gen.py; its fat objects are built first (not timed). Each measure is
the median of --runs runs (the plain link and the nothing-changed relink interleaved). A cold
link uses an empty cache; "one CU changed" rewrites one CU with a new constant, recompiles it
with `offlink cc` (not timed) and relinks with the warm cache. --big N also links an N-CU
project (cold once, under a 256-descriptor limit, and relinked with nothing changed), with
the peak memory of the link. The scaling row is the cold link with --jobs 1 against
--jobs <CPU count>.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gen  # noqa: E402

STAGES = ("plan", "extract", "compile", "device", "reserve", "host", "fill", "verify")
FD_LIMIT = 256


def cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def timed(argv, cwd, env, fd_limit: int = 0) -> tuple[float, dict, int]:
    """Wall seconds, the --timings stages (ms) and the peak RSS (KiB) of one command."""

    def limit():
        if fd_limit:
            resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, preexec_fn=limit if fd_limit else None)
    err = proc.stderr.read().decode(errors="replace")
    _pid, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        shown = " ".join(map(str, argv[:6])) + (" ..." if len(argv) > 6 else "")
        raise SystemExit(f"failed ({proc.returncode}): {shown}\n{err[-4000:]}")
    return elapsed, stages(err), usage.ru_maxrss


def stages(stderr: str) -> dict:
    out: dict = {}
    for line in stderr.splitlines():
        if line.startswith("offlink: timing (ms):"):
            words = line.split(":", 2)[2].split()
            for name, value in zip(words[::2], words[1::2]):
                out[name.split("[")[0]] = out.get(name.split("[")[0], 0.0) + float(value)
    return out


def median_stages(runs: list[dict]) -> dict:
    keys = {k for r in runs for k in r}
    return {k: statistics.median(r.get(k, 0.0) for r in runs) for k in keys}


class Project:
    def __init__(self, root: Path, offlink: str, cus: int, symbols: int):
        self.root, self.offlink, self.cus = root, offlink, cus
        gen.generate(root, cus, symbols)
        self.env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")}
        # The runtime library is built into its own cache dir; each link names its own.
        self.env.update(OFFLINK_PROGRESS="0", OFFLINK_CACHE_DIR=str(root / "cache-runtime"))
        subprocess.run(["make", "-s", f"-j{cpus()}", "-C", root, f"OFFLINK={offlink}",
                        "objects"], env=self.env, check=True)
        libs = subprocess.run([offlink, "config", "--libs"], env=self.env, check=True,
                              capture_output=True, text=True).stdout.split()
        self.cflags = subprocess.run([offlink, "config", "--cflags"], env=self.env, check=True,
                                     capture_output=True, text=True).stdout.split()
        self.args = ["gcc", *(f"cu{i:04d}.o" for i in range(cus)), "main.o", *libs, "-lm"]
        self.rev = 0

    def link(self, cache: str, *flags: str, fd_limit: int = 0):
        env = {**self.env, "OFFLINK_CACHE_DIR": str(self.root / cache)}
        return timed([self.offlink, "link", "--timings", *flags, *self.args, "-o", "app"],
                     self.root, env, fd_limit)

    def plain(self):
        return timed([*self.args, "-o", "plain"], self.root, self.env)

    def change_one(self) -> None:
        self.rev += 1
        cu = min(7, self.cus - 1)
        gen.revise(self.root, cu, self.rev)
        subprocess.run([self.offlink, "cc", "gcc", "-O2", *self.cflags, "-c",
                        f"cu{cu:04d}.c", "-o", f"cu{cu:04d}.o"], cwd=self.root, env=self.env,
                       check=True)

    def fresh_cache(self, name: str) -> str:
        shutil.rmtree(self.root / name, ignore_errors=True)
        return name


def measure(p: Project, runs: int) -> dict:
    res: dict = {}
    cold = [p.link(p.fresh_cache(f"cache-cold{i}")) for i in range(runs)]
    res["cold"] = cold
    p.link("cache-warm")  # prime
    plain, same = [], []
    for _ in range(runs):
        plain.append(p.plain())
        same.append(p.link("cache-warm"))
    res["plain"], res["nothing changed"] = plain, same
    one = []
    for _ in range(runs):
        p.change_one()
        one.append(p.link("cache-warm"))
    res["one CU changed"] = one
    return res


def row(name: str, results: list) -> tuple[str, float]:
    wall = statistics.median(r[0] for r in results) * 1000
    st = median_stages([r[1] for r in results])
    cells = " | ".join(f"{st[s]:.0f}" if s in st else "" for s in STAGES)
    return f"| {name} | {wall:.0f} | {cells} |", wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cus", type=int, default=40)
    ap.add_argument("--symbols", type=int, default=20)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--big", type=int, default=0, help="also an N-CU project (e.g. 1000)")
    ap.add_argument("--big-symbols", type=int, default=2)
    ap.add_argument("--offlink", default=shutil.which("offlink") or
                    str(Path(sys.executable).parent / "offlink"))
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    args = ap.parse_args()
    load = os.getloadavg()[0]
    lines = [
        "# Link benchmark", "",
        f"Command: `python benchmarks/link/bench.py --cus {args.cus} --symbols {args.symbols} "
        f"--runs {args.runs}" + (f" --big {args.big}" if args.big else "") + "`", "",
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {cpus()} CPUs, "
        f"Python {platform.python_version()}, load average {load:.2f} at the start. "
        f"Wall times and offlink's --timings stages in ms, medians of {args.runs} runs.", "",
    ]
    with tempfile.TemporaryDirectory(prefix="offlink-bench-") as tmp:
        p = Project(Path(tmp) / "p", args.offlink, args.cus, args.symbols)
        res = measure(p, args.runs)
        lines += [f"## {args.cus + 1} CUs (gen.py --cus {args.cus} --symbols {args.symbols}, "
                  f"plus main)", "",
                  "| link | wall | " + " | ".join(STAGES) + " |",
                  "|---|---:|" + "---:|" * len(STAGES)]
        walls = {}
        for name in ("cold", "one CU changed", "nothing changed", "plain"):
            text, walls[name] = row(name if name != "plain" else "plain host link (gcc)",
                                    res[name])
            lines.append(text)
        one_ratio = walls["one CU changed"] / walls["cold"]
        extra = walls["nothing changed"] - walls["plain"]
        serial = [p.link(p.fresh_cache(f"cache-j1-{i}"), "--jobs", "1")
                  for i in range(max(1, args.runs // 2))]
        parallel = [p.link(p.fresh_cache(f"cache-jn-{i}"), "--jobs", str(cpus()))
                    for i in range(max(1, args.runs // 2))]
        t1 = statistics.median(r[0] for r in serial)
        tn = statistics.median(r[0] for r in parallel)
        lines += ["", "Goals:", "",
                  f"- relink after one CU changed / cold link: {one_ratio:.2f} "
                  f"(goal <= 0.35: {'met' if one_ratio <= 0.35 else 'NOT met'})",
                  f"- relink with nothing changed - plain host link: {extra:.0f} ms "
                  f"(goal <= 150 ms: {'met' if extra <= 150 else 'NOT met'})",
                  f"- cold link, --jobs 1: {t1 * 1000:.0f} ms; --jobs {cpus()}: "
                  f"{tn * 1000:.0f} ms (speed-up {t1 / tn:.2f} on {cpus()} CPUs)"]
        if args.big:
            shutil.rmtree(Path(tmp) / "p", ignore_errors=True)
            b = Project(Path(tmp) / "big", args.offlink, args.big, args.big_symbols)
            cold = b.link(b.fresh_cache("cache-big"), fd_limit=FD_LIMIT)
            plain, same = [], []
            for _ in range(max(1, args.runs // 2)):
                plain.append(b.plain())
                same.append(b.link("cache-big", fd_limit=FD_LIMIT))
            lines += ["", f"## {args.big + 1} CUs (gen.py --cus {args.big} --symbols "
                      f"{args.big_symbols}, plus main), under a {FD_LIMIT}-descriptor limit", "",
                      "| link | wall | " + " | ".join(STAGES) + " | peak RSS (MiB) |",
                      "|---|---:|" + "---:|" * (len(STAGES) + 1)]
            for name, results in (("cold", [cold]), ("nothing changed", same),
                                  ("plain host link (gcc)", plain)):
                text, _ = row(name, results)
                rss = max(r[2] for r in results) / 1024
                lines.append(f"{text} {rss:.0f} |")
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
