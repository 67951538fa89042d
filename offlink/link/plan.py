"""Stage 1, plan: what a link command line means, as a pure function argv -> LinkPlan."""

from __future__ import annotations

import os

from ..driver_args import expand_with_origins, is_clang, linker_options, respelled, words
from ..errors import UsageError
from ..model import Input, LinkPlan
from ..model import find_library as find_library  # re-exported: it lived here before model.py

STRIP_ALL = {"-s", "--strip-all"}
# Words that name a link input, never the compiler driver (`offlink link a.o b.o -o app`).
INPUT_SUFFIXES = (".o", ".obj", ".lo", ".a", ".so", ".c", ".i", ".ii", ".cc", ".cp", ".cxx",
                  ".cpp", ".c++", ".C", ".s", ".S")
DRIVER_EXAMPLES = "gcc, g++, clang, cc"
# clang's options whose next word is for the device side only, never the host link's.
DEVICE_WORDS = ("-Xoffload-linker", "-Xopenmp-target")


def plan_link(argv: list[str]) -> LinkPlan:
    """Read a driver link command (`gcc ARGS...`); response files are read (as gcc reads
    them) to plan, and passed on as written where the link keeps all their words."""
    if not argv:
        raise UsageError("link: missing linker command (offlink link [OPTIONS] LINKER ARGS...)")
    driver = argv[0]
    check_driver(driver, "link")
    args, origins = expand_with_origins(argv[1:])
    ws = words(args, clang=is_clang(driver))  # clang's and gcc's options differ
    parts: list[tuple[int, int, list[str]]] = []  # what each word becomes in the host link
    output = "a.out"
    pie: bool | None = None
    strip = False
    lto = False
    base: list[str] = []
    on = _Modes()  # the modes in force at each word, and what the words so far said
    inputs, lib_dirs = on.inputs, on.lib_dirs
    for w in ws:
        spelled = args[w.index : w.index + w.count]
        keep = True
        opt = w.option
        if opt == "":
            on.add("file", w.value)
        elif opt == "-o":
            output = w.value
            keep = False
        elif opt == "-l":
            on.add("library", w.value)
        elif opt == "-L":
            lib_dirs.append(w.value)
        elif opt == "-shared":
            on.mode = "shared"
        elif opt in ("-r", "-relocatable"):
            on.mode = "relocatable"
        elif opt == "-static":
            on.static = True
        elif opt == "-static-pie":
            on.static, pie = True, True
        elif opt == "-pie":
            pie = True
        elif opt == "-no-pie":
            pie = False
        elif opt == "-s":
            strip, keep = True, False
        elif opt.startswith(DEVICE_WORDS):
            # A word for the device side (-Xoffload-linker: the targets read it from argv;
            # -Xopenmp-target: clang 19's link gives it to nothing); the host link without
            # clang's offload words would find it unused.
            keep = False
        elif (opt == "-flto" or opt.startswith("-flto=")) and opt != "-flto=none":
            # (not -flto-partition=, -flto-compression-level=, clang's -flto-jobs=...: they
            # tune an LTO link and turn none on)
            lto = True
        elif opt in ("-fno-lto", "-flto=none"):
            lto = False
        elif opt.startswith("-Wl,") or opt == "-Xlinker":
            items = linker_options(w)
            kept, st, linker_output = _linker_items(items)
            strip = strip or st
            output = linker_output or output
            for item in items:
                on.linker_item(item)
            if kept != items:
                keep = False
                if kept:
                    spelled = ["-Wl," + ",".join(kept)] if opt.startswith("-Wl,") else \
                        ["-Xlinker", kept[0]]
                    base += spelled
                    parts.append((w.index, w.count, spelled))
                else:
                    parts.append((w.index, w.count, []))
        if keep:
            base += spelled
            parts.append((w.index, w.count, spelled))
        elif opt in ("-o", "-s") or opt.startswith(DEVICE_WORDS):
            parts.append((w.index, w.count, []))
    if on.static:  # gcc applies -static to the whole line, also to -l words before it
        inputs = [i._replace(static=True) for i in inputs]
    return LinkPlan(driver, list(argv), output, on.mode, on.static, pie, strip, lto, inputs,
                    lib_dirs, base, respelled(argv[1:], args, origins, parts))


class _Modes:
    """What plan_link has read so far of the words that set modes (the output's kind,
    -static, the archive modes in force for the inputs after them) and of the inputs."""

    def __init__(self) -> None:
        self.mode = "executable"
        self.static = False
        self.whole = False  # --whole-archive
        self.bstatic = False  # -Bstatic
        self.group = 0  # the --start-group in force, 0 for none
        self.groups = 0
        self.inputs: list[Input] = []
        self.lib_dirs: list[str] = []

    def add(self, kind: str, path: str) -> None:
        self.inputs.append(Input(kind, path, self.whole, self.bstatic or self.static,
                                 self.group))

    def linker_item(self, item: str) -> None:
        """One option given to the linker itself (-Wl,ITEM or -Xlinker ITEM)."""
        if item in ("--whole-archive", "-whole-archive"):
            self.whole = True
        elif item in ("--no-whole-archive", "-no-whole-archive"):
            self.whole = False
        elif item in ("-Bstatic", "-dn", "-non_shared", "-static"):
            self.bstatic = True
        elif item in ("-Bdynamic", "-dy", "-call_shared"):
            self.bstatic = False
        elif item in ("--start-group", "-("):
            self.groups += 1
            self.group = self.groups
        elif item in ("--end-group", "-)"):
            self.group = 0
        elif item in ("-r", "--relocatable", "-i"):
            self.mode = "relocatable"
        elif item == "-shared" or item == "-Bshareable":
            self.mode = "shared"
        elif item.startswith("-L") and len(item) > 2:
            self.lib_dirs.append(item[2:])
        elif item.startswith("-l") and len(item) > 2:
            self.add("library", item[2:])


def check_driver(driver: str, command: str) -> None:
    """Refuse a first word that is an option or an input file: the compiler word was left out
    (which would run the first object as the linker and fail far from the cause)."""
    base = os.path.basename(driver)
    if driver.startswith("-") or base.endswith(INPUT_SUFFIXES) or ".so." in base:
        raise UsageError(f"{command}: the first word after `offlink {command}` (and its own "
                         f"options) must be the compiler driver ({DRIVER_EXAMPLES}...), not "
                         f"'{driver}'; e.g. offlink {command} gcc ...")


def _linker_items(items: list[str]) -> tuple[list[str], bool, str | None]:
    """The linker options offlink leaves in place, whether one asked to strip, and an output
    named to the linker itself (-Wl,-o,FILE or -Wl,--output=FILE: offlink writes it)."""
    kept: list[str] = []
    strip = False
    output = None
    i = 0
    while i < len(items):
        item = items[i]
        if item in STRIP_ALL:
            strip = True
        elif item in ("-o", "--output") and i + 1 < len(items):
            output = items[i + 1]
            i += 1
        elif item.startswith("--output="):
            output = item[len("--output="):]
        else:
            kept.append(item)
        i += 1
    return kept, strip, output
