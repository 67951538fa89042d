"""Binary size of real projects built plainly, through offlink (every external name offered),
and through offlink with a narrowed link (`--offload-symbol` / `--offload-symbol-list`).

    python benchmarks/narrow/bench.py [--runs 3] [--offlink PATH] [--baseline OLD]
                                      [--out benchmarks/narrow/RESULTS.md]

- Lua 5.4.6 (tests/real_projects/lua): its makefile, plainly and with CC="offlink cc gcc"; then
  `lua` is linked again from the same lua.o and liblua.a by `offlink link` as the makefile links
  it, as it is, with `--offload-symbol 'lua_*' --offload-symbol 'luaL_*'` (the C API and the
  auxiliary library, which opens the standard libraries) and with `lua_*` alone (the core).
  Each relink is timed --runs times (the target objects come from the cache).
- zlib 1.3.1 (tests/real_projects/zlib): its CMake build of libz.so (Ninja), plainly, with
  offlink's two launchers, and with the linker launcher `offlink;link;--offload-symbol-list=F`
  where F lists `deflate*` and `inflate*`.

For each binary: its size as linked and stripped (`strip`, which keeps .openmp_target), the
size of .openmp_target, of the host image in it, the image's code (`size`: text) and the rows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PROJECTS = ROOT / "tests" / "real_projects"
LUA_API = ["--offload-symbol", "lua_*", "--offload-symbol", "luaL_*"]
LUA_CORE = ["--offload-symbol", "lua_*"]  # no auxiliary library, so no standard libraries
ZLIB_LIST = "# zlib's compression API only\ndeflate*\ninflate*\n"


def run(argv, cwd=None, env=None) -> str:
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(map(str, argv))}\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def timed(argv, cwd, env) -> tuple[float, float]:
    """Wall and CPU (user+sys of the command and its children) seconds."""
    before = os.times()
    start = time.perf_counter()
    run(argv, cwd, env)
    wall = time.perf_counter() - start
    after = os.times()
    return wall, (after.children_user - before.children_user
                  + after.children_system - before.children_system)


def measure(offlink: str, binary: Path, work: Path) -> dict:
    stripped = work / (binary.name + ".stripped")
    run(["strip", "-o", stripped, binary])
    out = {"size": binary.stat().st_size, "stripped": stripped.stat().st_size}
    stripped.unlink()
    sections = run(["readelf", "-SW", binary])
    if ".openmp_target" not in sections:
        return out
    info = json.loads(run([offlink, "inspect", "--json", binary]))
    image = work / (binary.name + ".image")
    run([offlink, "extract", binary, "--target", "host", "--output", image])
    text = int(run(["size", "-A", image]).split(".text")[1].split()[0])
    out.update(table=info["table"]["size"], image=image.stat().st_size, image_text=text,
               rows=len(info["table"]["symbols"]))
    image.unlink()
    return out


def lua(offlink: str, baseline: str, work: Path, env: dict, runs: int) -> tuple[dict, dict]:
    sizes, times = {}, {}
    builds = {"plain": [], "offlink, make's link": [f"CC={offlink} cc gcc"]}
    if baseline:
        builds["baseline offlink, make's link"] = [f"CC={baseline} cc gcc"]
    for name, cc in builds.items():
        src = work / f"lua-{len(sizes)}"
        shutil.copytree(PROJECTS / "lua", src)
        run(["make", "-s", "-j2", "-C", src, *cc, "MYCFLAGS=-std=c99 -DLUA_USE_LINUX",
             "MYLIBS=-ldl"], env=env)
        sizes[name] = measure(offlink, src / "lua", work)
    src = work / "lua-1"
    for name, options in (("offlink", []), ("offlink, narrowed: lua_*, luaL_*", LUA_API),
                          ("offlink, narrowed: lua_*", LUA_CORE)):
        argv = [offlink, "link", *options, "gcc", "-Wl,-E", "-o", f"lua-{len(options)}",
                "lua.o", "liblua.a", "-lm", "-ldl"]
        times[name] = [timed(argv, src, env) for _ in range(runs)]
        sizes[name] = measure(offlink, src / f"lua-{len(options)}", work)
    return sizes, times


def zlib(offlink: str, baseline: str, work: Path, env: dict) -> dict:
    src = work / "zlib-src"
    shutil.copytree(PROJECTS / "zlib", src)
    listing = work / "zlib-offered.txt"
    listing.write_text(ZLIB_LIST)
    launch = [f"-DCMAKE_C_COMPILER_LAUNCHER={offlink};cc"]
    variants = {"plain": [], "offlink": [*launch, f"-DCMAKE_C_LINKER_LAUNCHER={offlink};link"],
                "offlink, narrowed": [*launch, f"-DCMAKE_C_LINKER_LAUNCHER={offlink};link;"
                                      f"--offload-symbol-list={listing}"]}
    if baseline:
        variants["baseline offlink"] = [f"-DCMAKE_C_COMPILER_LAUNCHER={baseline};cc",
                                        f"-DCMAKE_C_LINKER_LAUNCHER={baseline};link"]
    sizes = {}
    for name, options in variants.items():
        build = work / f"zlib-{len(sizes)}"
        run(["cmake", "-S", src, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
             *options], env=env)
        run(["cmake", "--build", build, "-j2", "--target", "zlib"], env=env)
        sizes[name] = measure(offlink, build / "libz.so.1.3.1", work)
    return sizes


def table(title: str, sizes: dict, times: dict | None = None) -> list[str]:
    plain = next(iter(sizes.values()))
    lines = [f"### {title}", "",
             "| build | file (B) | / plain | stripped (B) | / plain | .openmp_target (B) | "
             "image (B) | image .text (B) | rows |" + (" relinks wall/CPU (s) |" if times else ""),
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---|" if times else "")]
    for name, s in sizes.items():
        row = (f"| {name} | {s['size']} | {s['size'] / plain['size']:.2f}x | {s['stripped']} | "
               f"{s['stripped'] / plain['stripped']:.2f}x | {s.get('table', '-')} | "
               f"{s.get('image', '-')} | {s.get('image_text', '-')} | {s.get('rows', '-')} |")
        if times:
            t = times.get(name)
            row += (" " + ", ".join(f"{w:.2f}/{c:.2f}" for w, c in t) + " |" if t else " |")
        lines.append(row)
    return [*lines, ""]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--offlink", default=shutil.which("offlink") or
                    str(Path(sys.executable).parent / "offlink"))
    ap.add_argument("--baseline", default="", help="an earlier offlink command, whose default "
                    "builds are added (e.g. the one before -ffunction-sections)")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    args = ap.parse_args()
    args.offlink = os.path.abspath(args.offlink) if os.sep in args.offlink else args.offlink
    work = Path(tempfile.mkdtemp(prefix="narrow-bench-"))
    try:
        env = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
        env.update(OFFLINK_PROGRESS="0", OFFLINK_CACHE_DIR=str(work / "cache"))
        load = os.getloadavg()[0]
        lua_sizes, lua_times = lua(args.offlink, args.baseline, work, env, args.runs)
        zlib_sizes = zlib(args.offlink, args.baseline, work, env)
        lines = [
            "# Binary size: every external name offered, or a narrowed link",
            "",
            f"Command: `python benchmarks/narrow/bench.py --runs {args.runs}"
            f"{' --baseline BASELINE' if args.baseline else ''}`",
            "",
            f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} CPUs, "
            f"load average {load:.2f} at the start. Relinks: {args.runs} links in a row with "
            f"the target objects in the cache (from `offlink cc`); the first narrowed one "
            f"links its image, the later ones (and the default ones: make's link made that "
            f"image) take it from the cache; CPU = user+sys of the link and its processes.",
            "",
            *table("Lua 5.4.6: `lua`", lua_sizes, lua_times),
            *table("zlib 1.3.1: `libz.so.1.3.1` (narrowed: `deflate*`, `inflate*`)",
                   zlib_sizes),
        ]
        text = "\n".join(lines)
        print(text)
        Path(args.out).write_text(text)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
