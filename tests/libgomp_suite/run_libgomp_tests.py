#!/usr/bin/env python3
"""GCC 12's own libgomp test suite, each program built twice from the same objects: linked by
GCC's own offload link and by `offlink link` (no offlink option), both run (host fallback on a
machine without a GPU) with an LD_PRELOAD stand-in for GOMP_offload_register_ver
(tests/gcc_offload/gomp_shim.c), and compared: exit status, stdout, stderr and what each
module registers with libgomp (version, device type, slot counts, kernel names with their
launch dimensions, variables by size, in order).

    tests/libgomp_suite/run_libgomp_tests.py [--subset FILE] [-j N] [--keep DIR] [TESTS...]

TESTS are names such as `libgomp.c/target-1.c`; without them every test of the directories
below (a whole run: about an hour on 2 cores), or those FILE lists. Prints one line per test
and the counts; exits 1 when any test differs. The tests come from tests/libgomp_suite/fetch.sh
(.ci/gcc-12-src; not in this repository).

What the harness reads of a test's DejaGnu lines: dg-do (run by default, as libgomp.exp; a
`link` test is linked both ways, not run), dg-options and dg-additional-options (with a
`{ target ... }` selector where it holds here: TRUE_HERE), dg-additional-sources, and
dg-require-effective-target (a device, CUDA or cuBLAS: excluded, none here). Each directory's
driver and words are libgomp.exp's: -O2 with -fopenmp or -fopenacc, and for OpenACC the host
device's -DACC_DEVICE_TYPE_host=1 -DACC_MEM_SHARED=1 (what runs here).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIM_SOURCE = ROOT / "tests" / "gcc_offload" / "gomp_shim.c"
OACC_HOST = ["-DACC_DEVICE_TYPE_host=1", "-DACC_MEM_SHARED=1"]
# Link words of a directory's .exp (lang_link_flags): libgfortran on the host and the device.
LINK_WORDS = {"libgomp.fortran": ["-lgfortran", "-foffload=-lgfortran"],
              "libgomp.oacc-fortran": ["-lgfortran", "-foffload=-lgfortran"]}
# Where each release's tests run: GCC 12 on this machine, the later ones in the chroot that
# ships them (tests/chroots/make.sh), this script run there by tests/chroots/run.sh.
CHROOT = {12: None, 13: "trixie", 14: "trixie", 15: "sid", 16: "sid"}


def _default_offlink() -> str:
    """OFFLINK, else this checkout's venv's offlink, else the `offlink` on PATH (in a chroot,
    where the host venv's Python is not there, tests/chroots/run.sh puts one on PATH)."""
    venv_python = ROOT / ".venv" / "bin" / "python"
    if os.environ.get("OFFLINK"):
        return os.environ["OFFLINK"]
    if venv_python.exists():  # the link's target (the host's python3.11) exists
        return str(ROOT / ".venv" / "bin" / "offlink")
    return shutil.which("offlink") or "offlink"


OFFLINK = _default_offlink()


def use_release(release: int) -> None:
    """Set the suite's folder and its drivers to GCC `release`'s (gcc-N, g++-N, gfortran-N)."""
    global RELEASE, SUITE, GCC, GXX, GFORTRAN, DIRS
    RELEASE = release
    SUITE = ROOT / ".ci" / f"gcc-{release}-src" / "libgomp" / "testsuite"
    GFORTRAN = shutil.which(f"gfortran-{release}") or f"gfortran-{release}"
    GXX = shutil.which(f"g++-{release}") or f"g++-{release}"
    GCC = shutil.which(f"gcc-{release}") or f"gcc-{release}"
    # directory -> (driver, model words, the file names it runs)
    DIRS = {
        "libgomp.c": (GCC, ["-fopenmp"], (".c",)),
        "libgomp.c-c++-common": (GCC, ["-fopenmp"], (".c",)),
        "libgomp.c++": (GXX, ["-fopenmp"], (".C",)),
        "libgomp.fortran": (GFORTRAN, ["-fopenmp"], (".f90", ".f", ".F90", ".F", ".f95", ".f03")),
        "libgomp.oacc-c": (GCC, ["-fopenacc", *OACC_HOST], (".c",)),
        "libgomp.oacc-c-c++-common": (GCC, ["-fopenacc", *OACC_HOST], (".c",)),
        "libgomp.oacc-c++": (GXX, ["-fopenacc", *OACC_HOST], (".C",)),
        "libgomp.oacc-fortran": (GFORTRAN, ["-fopenacc", *OACC_HOST],
                                 (".f90", ".f", ".F90", ".F", ".f95")),
    }


RELEASE = 12
use_release(12)
OFFLOAD = ["-foffload=nvptx-none"]
GCC_ISA = ["-foffload-options=nvptx-none=-misa=sm_80"]  # CUDA 12+'s ptxas refuses sm_30
NEEDS_DEVICE = re.compile(r"offload_device|openacc_cu|openacc_nvidia|openacc_radeon|"
                          r"offload_target_amdgcn|openacc_lib|gomp_lib|gomp_hip")
_DG = re.compile(r"\{\s*(dg-[\w-]+)\s*(.*?)\}\s*(?:\*/|$)", re.M)
# Effective targets and triplets that hold here, as libgomp.exp's checks find them for an nvptx
# offload compiler on x86_64 with no device (OpenACC then runs on the host device).
TRUE_HERE = {"*-*-*", "x86_64-*-*", "i?86-*-*", "x86_64-*-linux*", "*-*-linux*", "lp64",
             "offload_target_nvptx", "offload_target_any", "openacc_host_selected",
             "vect_simd_clones", "fopenmp", "sse2_runtime", "tls_runtime", "size32plus",
             "sync_int_long", "pthread", "fpic", "lto", "*-*-gnu*", "offloading_enabled"}
if " avx " in open("/proc/cpuinfo").read():
    TRUE_HERE.add("avx_runtime")
RUN_TIMEOUT = 60
ENV = {**os.environ, "GOMP_SPINCOUNT": "1000", "OMP_WAIT_POLICY": "passive"}
# A region outlined from a static function: offlink's key carries its CU (`$<source>$<hash>`),
# GCC's LTO a number (`$lto_priv$N`); both are compared without it (libgomp pairs by position).
_QUALIFIER = re.compile(r"\$(?:[A-Za-z0-9_]+\$[0-9a-f]{8}|lto_priv\$\d+)$")


def find_tests(suite: Path | None = None) -> list[str]:
    """Every test, the directories interleaved (a run cut short has tried each alike)."""
    suite = suite or SUITE
    per_dir = []
    for d, (_, _, suffixes) in DIRS.items():
        per_dir.append([str(p.relative_to(suite)) for p in sorted((suite / d).rglob("*"))
                        if p.is_file() and p.suffix in suffixes])
    out = []
    for i in range(max(map(len, per_dir))):
        out += [names[i] for names in per_dir if i < len(names)]
    return out


def directives(text: str) -> list[tuple[str, str]]:
    """(dg-name, rest of the braces) of every DejaGnu line."""
    return [(m.group(1), m.group(2).strip()) for m in _DG.finditer(text)]


def holds(selector: str, language: str = "") -> bool | None:
    """Whether a `{ target ... }` selector holds here: triplets and effective targets (a
    list: any; `&&`: all; `!` negates the next); None for another kind of selector."""
    words = selector.replace("{", " ").replace("}", " ").split()
    if not words or words[0] != "target":
        return None
    values, negate = [], False
    for w in words[1:]:
        if w == "!":
            negate = True
        elif w in ("&&", "||"):
            continue
        else:
            values.append((w in TRUE_HERE or w == language) != negate)
            negate = False
    return all(values) if "&&" in words else any(values)


def _quoted(rest: str) -> tuple[str, str]:
    """(the first argument, what follows it): "..." or {...} or a bare word."""
    rest = rest.strip()
    if rest.startswith('"'):
        end = rest.find('"', 1)
        return rest[1:end], rest[end + 1:].strip()
    if rest.startswith("{"):
        end = rest.find("}")
        return rest[1:end].strip(), rest[end + 1:].strip()
    word, _, after = rest.partition(" ")
    return word, after.strip()


class Plan:
    def __init__(self, name: str, suite: Path | None = None):
        suite = suite or SUITE
        self.name = name
        self.path = suite / name
        directory = name.split("/", 1)[0]
        self.driver, words, _ = DIRS[directory]
        language = "c++" if self.driver == GXX else "fortran" if self.driver == GFORTRAN \
            else "c"
        self.what = "run"
        options: list[str] | None = None
        extra: list[str] = []
        self.sources = [self.path]
        self.excluded = ""
        self.shouldfail = False
        self.env: dict[str, str] = {}
        for dg, rest in directives(self.path.read_text(errors="replace")):
            arg, selector = _quoted(rest)
            if dg == "dg-do":
                self.what = arg or "run"
                if selector and not holds(selector, language):  # `dg-do run { target .. }`
                    self.excluded = self.excluded or f"dg-do {arg} {selector}: not this target"
            elif dg in ("dg-options", "dg-additional-options") and (
                    not selector or holds(selector, language)):
                if dg == "dg-options":
                    options = arg.split()
                else:
                    extra += arg.split()
            elif dg == "dg-additional-sources":
                self.sources += [self.path.parent / s for s in arg.split()]
            elif dg == "dg-require-effective-target" and NEEDS_DEVICE.search(arg):
                self.excluded = self.excluded or f"needs {arg} (no GPU here)"
            elif dg == "dg-set-target-env-var":  # the environment its run gets
                name_value = rest.split(None, 1)
                if len(name_value) == 2:
                    self.env[name_value[0]] = name_value[1].strip().strip('"')
            elif dg == "dg-shouldfail":
                self.shouldfail = True
        if self.what not in ("run", "link"):
            self.excluded = self.excluded or f"dg-do {self.what}: nothing to link"
        self.options = [*(options if options is not None else ["-O2"]), *words, *extra]


def _run(argv, cwd, env=None, timeout=600) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(e.cmd, -9, e.stdout or b"", b"timed out")


def _first_error(proc: subprocess.CompletedProcess) -> str:
    text = (proc.stderr or b"").decode(errors="replace") + (proc.stdout or b"").decode(
        errors="replace")
    lines = [ln for ln in text.splitlines() if "error" in ln] or text.splitlines() or [""]
    return lines[-1 if lines[-1].startswith("offlink: error") else 0].strip()[:200]


def registered(log: Path) -> list[tuple]:
    """What the shim's log says each module registered (its unregister calls said the same)."""
    if not log.exists():
        return []
    out: list[list] = []
    for ln in (line.split() for line in log.read_text().splitlines()):
        if ln[0] in ("register", "unregister"):
            out.append([ln[0], tuple(ln[1:3] + ln[5:]), [], []])
        elif ln[0] == "func" and out:
            out[-1][2].append((_QUALIFIER.sub("", ln[1]), *ln[3:]))
        elif ln[0] == "var" and out:
            out[-1][3].append(ln[3])
    return [(kind, head, tuple(f), tuple(v)) for kind, head, f, v in out]


def run_test(name: str, shim: str, keep: Path | None = None,
             suite: Path | None = None) -> tuple:
    """(outcome, detail): outcome is "same", "differ" or "excluded"."""
    plan = Plan(name, suite)
    if plan.excluded:
        return "excluded", plan.excluded
    work = Path(tempfile.mkdtemp(prefix="libgomp-"))
    try:
        objects = []
        for i, src in enumerate(plan.sources):
            obj = f"{i}.o"
            proc = _run([plan.driver, *plan.options, *OFFLOAD, "-c", src, "-o", obj,
                         f"-I{src.parent}", "-J.", "-w"] if plan.driver == GFORTRAN else
                        [plan.driver, *plan.options, *OFFLOAD, "-c", src, "-o", obj,
                         f"-I{src.parent}", "-w"], work)
            if proc.returncode != 0:
                return "excluded", f"GCC {RELEASE} does not compile it here: " \
                                   f"{_first_error(proc)}"
            objects.append(obj)
        link = [*plan.options, *OFFLOAD, *objects, *LINK_WORDS.get(name.split("/")[0], []),
                "-lm"]
        # Each program is ./a.out in its own folder: a message naming argv[0] reads the same.
        for d in ("gcc", "offlink"):
            (work / d).mkdir()
        # Both links get an ISA CUDA 12+'s ptxas takes (GCC's default, sm_30 or sm_52, is
        # refused by this machine's), before the test's own words, which win.
        theirs = _run([plan.driver, *GCC_ISA, *link, "-o", "gcc/a.out"], work)
        mine = _run([OFFLINK, "link", plan.driver, *GCC_ISA, *link, "-o", "offlink/a.out"],
                    work)
        if theirs.returncode != 0:
            said = "offlink links it" if mine.returncode == 0 else \
                f"offlink: {_first_error(mine)}"
            return "excluded", f"GCC's own link fails: {_first_error(theirs)} ({said})"
        if mine.returncode != 0:
            error = _first_error(mine)
            if "host -flto link" in error:  # documented: offlink reads the objects' tables
                return "excluded", "offlink refuses a host -flto link of GCC offload " \
                                   "objects (documented; GCC's own link takes it)"
            return "differ", f"offlink's link fails: {error}"
        if plan.what == "link":  # linked both ways; nothing to run
            return "same", "dg-do link: linked both ways"
        results = []
        for d in ("gcc", "offlink"):
            log = work / f"{d}.log"
            proc = _run(["./a.out"], work / d, {**ENV, **plan.env, "LD_PRELOAD": shim,
                                                 "GOMP_SHIM_LOG": str(log)}, RUN_TIMEOUT)
            results.append((proc.returncode, proc.stdout, proc.stderr, registered(log)))
        (rc, out, err, reg), (rc2, out2, err2, reg2) = results
        if (rc, out, err) != (rc2, out2, err2):
            # Threads' timing shows in some outputs: run each build again; a build whose
            # runs differ among themselves, or meet the other's, says nothing about the link.
            runs = {d: [_run(["./a.out"], work / d, {**ENV, **plan.env, "LD_PRELOAD": shim},
                             RUN_TIMEOUT)
                        for _ in range(3)] for d in ("gcc", "offlink")}
            seen = {d: {(p.returncode, p.stdout, p.stderr) for p in runs[d]}
                    for d in runs}
            seen["gcc"].add((rc, out, err))
            seen["offlink"].add((rc2, out2, err2))
            if len(seen["gcc"]) > 1 or seen["gcc"] & seen["offlink"]:
                return "excluded", "its output differs from run to run (threads' timing)"
            return "differ", f"exit {rc} -> {rc2}, or its output differs"
        if reg != reg2:
            return "differ", f"registration: {reg} -> {reg2}"
        ok = (rc != 0) == plan.shouldfail
        return "same", f"exit {rc}" + ("" if ok else " (GCC's build fails too: no GPU?)") + \
            ("" if reg else "; no target code (nothing registered either way)")
    finally:
        if keep is not None:
            shutil.copytree(work, keep / name.replace("/", "__"), dirs_exist_ok=True)
        shutil.rmtree(work, ignore_errors=True)


def build_shim(where: Path) -> str:
    out = where / "gomp_shim.so"
    subprocess.run([GCC, "-O2", "-shared", "-fPIC", str(SHIM_SOURCE), "-o", str(out)],
                   check=True)
    return str(out)


def read_list(path: Path) -> list[str]:
    return [ln.split()[0] for ln in path.read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tests", nargs="*")
    ap.add_argument("--subset", type=Path)
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--release", type=int, default=12, choices=sorted(CHROOT),
                    help="the GCC release whose suite and drivers are used (13-16: run this "
                         "script in its chroot, tests/chroots/run.sh)")
    args = ap.parse_args(argv)
    use_release(args.release)
    if not SUITE.is_dir():
        print(f"offlink: error: no tests in {SUITE} (tests/libgomp_suite/fetch.sh)",
              file=sys.stderr)
        return 2
    names = args.tests or (read_list(args.subset) if args.subset else find_tests())
    counts = {"same": 0, "differ": 0, "excluded": 0}
    with tempfile.TemporaryDirectory() as tmp:
        shim = build_shim(Path(tmp))
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(run_test, n, shim, args.keep) for n in names]
            for name, f in zip(names, futures):
                outcome, detail = f.result()
                counts[outcome] += 1
                print(f"{outcome:8} {name}  {detail}", flush=True)
    print(f"passed both ways (same exit, output, registration): {counts['same']}; "
          f"differ: {counts['differ']}; excluded: {counts['excluded']}; "
          f"of {len(names)}", flush=True)
    return 1 if counts["differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
