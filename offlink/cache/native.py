"""-march=native and the like in a cache key: keyed by what the driver makes of them on this
CPU, remembered by compiler and CPU so a warm compile starts no driver."""

from __future__ import annotations

import os

from .. import run as runner
from .keys import hash_parts
from .store import Store


def native_options(argv: list[str]) -> list[str]:
    """The words of a command line that ask for this machine's CPU (`-march=native`,
    `-mtune=native`, `-mcpu=native`, and gcc's `-mcpu=native+ext` forms): the object depends
    on the CPU the compiler runs on."""
    return [w for w in argv if w.startswith(("-march=native", "-mtune=native", "-mcpu=native"))]


def cpu_identity() -> str | None:
    """The first processor's entry in /proc/cpuinfo (vendor, family, model, stepping,
    microcode, cache size, flags) without what changes as it runs (its clock); None where
    there is none. What gcc and clang read to resolve `native` (cpuid) shows there."""
    try:
        fd = os.open("/proc/cpuinfo", os.O_RDONLY)
    except OSError:
        return None
    text = b""
    try:  # the kernel writes it a processor at a time: read the first one only
        while b"\n\n" not in text:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            text += chunk
    except OSError:
        return None
    finally:
        os.close(fd)
    lines = [line for line in text.split(b"\n\n", 1)[0].split(b"\n")
             if not line.lower().startswith((b"cpu mhz", b"bogomips"))]
    return b"\n".join(lines).decode(errors="replace") if any(lines) else None


def driver_command(said: str) -> str | None:
    """The first command a driver's `-###` prints (gcc's cc1, clang's -cc1: the expanded
    `-march=znver3 -mavx2 ... --param l1-cache-size=32`, `-target-cpu znver4 -target-feature
    +avx2 ...`), its words joined by NULs, the output name (gcc's is a temporary file) taken
    out; None when there is none."""
    import shlex  # only where -march=native is asked about: not on the warm hit's way

    for line in said.splitlines():
        if not line.startswith(" ") or line.strip() == "(in-process)":
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            return None
        return "\0".join("<output>" if i and words[i - 1] == "-o" else w
                          for i, w in enumerate(words))
    return None


def native_expansion(cache: Store, compiler: str, compiler_id: str,
                     native: list[str]) -> str | None:
    """A SHA-256 of what `compiler` passes its compiler proper for the `native` options on
    this machine (`driver_command`); None when the driver does not say. Remembered by the
    compiler's identity and `cpu_identity`, so a warm compile starts no driver: the same
    compiler on the same CPU expands `native` alike."""
    cpu = cpu_identity()
    stamp = None if cpu is None else hash_parts("offlink cc native", "1", compiler_id,
                                           "\0".join(native), cpu)
    if stamp is not None:
        known = cache.remembered(stamp)
        if known is not None:
            return known
    if "/" in compiler:  # a path from the working folder (the driver runs in /)
        compiler = os.path.abspath(compiler)
    try:  # in / with the C locale: nothing in the command depends on where it ran
        probe = runner.probe([compiler, *native, "-###", "-c", "-x", "c", os.devnull],
                             cwd="/", env={**os.environ, "LC_ALL": "C"})
    except OSError:
        return None
    if probe.returncode != 0:
        return None
    said = probe.stderr
    command = driver_command(said.decode(errors="replace"))
    if command is None:
        return None
    expansion = hash_parts("native", command)
    if stamp is not None:
        cache.remember(stamp, expansion)
    return expansion
