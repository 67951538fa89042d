"""The plug-ins' interfaces: Target, Dialect, Registration; the host machines; and the data
that carries a target (a compiled CU, an image), beside the Target it names.

A target says how a CU's code is captured at `offlink cc` time, how it is compiled at link
time (one CU at a time), which symbols the result offers, and how the per-CU results become
one image. The targets live in offlink/toolchains/<toolchain>/; the registry there
(`offlink.toolchains.resolve`) finds one by name or alias. This module imports no
implementation.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from . import run as runner
from .elf import EM_AARCH64, EM_X86_64
from .errors import UsageError

if TYPE_CHECKING:
    from .cache.store import Cache
    from .elf import ElfFile
    from .jobs import Children
    from .model import CU, LinkPlan, Offer

# The host machines offlink supports: the host target's triple and the ELF e_machine.
HOSTS = {"x86_64": ("x86_64-pc-linux-gnu", EM_X86_64),
         "aarch64": ("aarch64-unknown-linux-gnu", EM_AARCH64)}


def _host() -> tuple[str, int]:
    machine = os.uname().machine  # platform.machine(), without importing platform
    if machine not in HOSTS:
        raise UsageError(f"host machine '{machine}' is not supported (x86-64 and AArch64 are)")
    return HOSTS[machine]


def host_triple() -> str:
    return _host()[0]


def host_e_machine() -> int:
    """e_machine of the objects offlink writes for the host link."""
    return _host()[1]


class Target:
    """Base of all targets. `name` is canonical: the section suffix and the table's name."""

    name: str = ""
    image_kind: str = ""  # the table's image kind
    macro: str = ""  # defined to 1 in target code besides __OFFLINK_TARGET__
    image_argv_reads_objects = True  # False: image_argv only names the CUs' object files
    # True: image_argv reads the CUs' offers (CompiledCU.offers), so a relink cannot take the
    # image from the cache before the objects' entries are read (link/device.cached_image).
    image_argv_reads_offers = False
    # False: link_image reads no CU's object file (it takes CompiledCU.data, and writes the
    # files itself where it runs a command that reads them), so the device link of an image
    # not in the cache writes no cached object into the work folder.
    link_image_reads_objects = True
    # Whether a distributed compile engine used as the target launcher (distcc, icecream,
    # sccache) can send this target's per-CU compile to another machine or a shared cache:
    # True for a self-contained compile of preprocessed C/C++ with a plain `CC -c FILE.i`;
    # False (with the reason) for compiles an engine only runs locally.
    distributable: bool = False
    not_distributable_because: str = "its compile is not a plain preprocessed C/C++ compile"

    def defines(self) -> list[str]:
        return [f'-D__OFFLINK_TARGET__="{self.name}"', f"-D{self.macro}=1"]

    def with_variant(self, variant: str) -> Target:
        """This target with what follows ':' in its name (nvptx64-nvidia-cuda:sm_90)."""
        raise UsageError(f"target {self.name} takes no ':' options (got '{variant}')")

    # -- offlink cc ----------------------------------------------------------------------
    def capture_argv(self, compiler: str, preprocess_args: list[str], language: str,
                     source: str, output: str) -> list[str]:
        """The command that writes this CU's target code (e.g. preprocessed source)."""
        raise NotImplementedError

    def code_kind(self, language: str) -> str:
        """The payload's kind of code for a source in `language` ('c' or 'c++')."""
        return language

    def payload_options(self, options: list[str]) -> list[str]:
        """What the payload keeps for the link-time compile, from the host compile's options."""
        return options

    # -- offlink link --------------------------------------------------------------------
    def for_inputs(self, cus: list[CU], plan: LinkPlan | None = None) -> Target:
        """This target set up for these CUs (e.g. the union of their architectures) and the
        link line of `plan` (clang's OpenMP targets: its optimisation level); no plan outside
        a link (`offlink cc` filling the cache)."""
        return self

    def compile_argv(self, cu: CU, source: str, output: str) -> list[str]:
        """The link-time compile of one CU's captured code; [] when the code is the target
        object already (nothing is run)."""
        raise NotImplementedError

    def after_compile_argv(self, cu: CU, obj_path: str) -> list[list[str]]:
        """The commands the step after a compile_argv command runs on its object (in offers),
        for --dry-run to show: GCC's nvptx-as after lto1, clang's rename of llvm-lto2's
        output. None by default."""
        return []

    def run_compile(self, children: Children, argv: list[str], what: str) -> str:
        """Run one compile_argv command; returns what the compiler said. A target may do the
        same work another way (openmp: in a worker that keeps LLVM loaded)."""
        return children.run(argv, what)

    def compile_engine(self, argv: list[str]) -> str:
        """What run_compile runs `argv` with when not as the command itself, as it keys the
        CU's object (the identity of a library, say); "" for the command."""
        return ""

    def end_compiles(self) -> None:
        """The link's compiles for this target are over: what run_compile keeps going ends."""

    def identity_tool(self, cu: CU, argv: list[str]) -> str:
        """The tool whose identity (cache.tool_identity) keys the CU's compile `argv`: its
        first word by default."""
        return argv[0]

    def source_suffix(self, cu: CU) -> str:
        return ".i"

    def offers(self, cu: CU, obj_path: str) -> tuple[Offer, ...]:
        """The CU's entries, read from its target object, before a cache stores it: also the
        step after the compile, where a target finishes the object (GCC's: nvptx-as after
        lto1; clang's -foffload-lto: llvm-lto2's output renamed)."""
        raise NotImplementedError

    def image_argv(self, plan: LinkPlan, compiled: list[CompiledCU], output: str) -> list[str]:
        raise NotImplementedError

    def narrowed_image(self, plan: LinkPlan, compiled: list[CompiledCU], output: str,
                       offered: frozenset[str]) -> tuple[list[str], dict[str, bytes]]:
        """The image link of a narrowed link (`--offload-symbol`), which keeps only what the
        `offered` names reach, and the files it reads besides the objects (path -> content).
        By default image_argv's: the image is linked whole and only the table is narrowed."""
        return self.image_argv(plan, compiled, output), {}

    def prepare_image(self, plan: LinkPlan, compiled: list[CompiledCU], workdir: str,
                      cache: Cache | None) -> None:
        """Work the image link needs before its command is made (none by default; clang's
        nvptx64 OpenMP target compiles the device runtime's part, cached)."""

    def image_reads(self, plan: LinkPlan) -> list[str]:
        """Files the image link reads besides the objects whose content is in the image (a
        CPU image's static archives): the image's cache key covers their content. None by
        default (a library named by -l is keyed by its name, as the command has it)."""
        return []

    def prepare_argvs(self, plan: LinkPlan, compiled: list[CompiledCU],
                      workdir: str) -> list[list[str]]:
        """The commands prepare_image runs when nothing is cached, for --dry-run (none by
        default; GCC's ptxas check reads the compiled PTX, which --dry-run does not make)."""
        return []

    def link_image(self, argv: list[str], output: str, compiled: list[CompiledCU]) -> None:
        """Run the image link `argv` (image_argv's or narrowed_image's), which writes
        `output`. A target may write the same bytes another way: GCC's nvptx-none takes the
        part its libraries add from an earlier link (toolchains/gcc/nvptx.py)."""
        runner.run(argv, f"device link for target {self.name}")

    def run_linker_job(self, words: list[str], compiled: list[CompiledCU]) -> bool:
        """Run the job `words` a clang driver would run for this target's image link (its
        kept expansion), another way that writes the same image: True when it did, False to
        run the job as it is (the default)."""
        return False

    def exports(self, image: bytes, path: str) -> set[str]:
        """Names the image defines, to check every offered name can be found at run time."""
        raise NotImplementedError

    def why_not_exported(self, image: bytes, path: str, name: str,
                         compiled: list[CompiledCU]) -> tuple[str, bool]:
        """Why the image does not export an offered name ("" when unknown), and whether it is
        because the program gives it hidden or internal visibility (then it is not offered,
        unless a CU names it in its explicit list)."""
        return "", False

    def host_link_args(self, plan: LinkPlan) -> list[str]:
        """Words the host link needs added at its end (none by default)."""
        return []

    def host_link_drops(self, word: str) -> bool:
        """Whether the host link must go without this word of the link line (none by
        default)."""
        return False

    # The runtime registration module (offlink/toolchains/registrations.py) the images need, if any.
    registration: str = ""

    # Why a static executable cannot use this target's image, or "" when it can.
    static_link_problem: str = ""

    def host_addresses(self, elf: ElfFile, image: Image) -> dict[str, tuple[int, int, str]]:
        """Rows whose host side is not simply the host symbol of the same name: key ->
        (address, size, kind) in the linked binary. Empty by default: rows by symbol name."""
        return {}


class Dialect:
    """What an input dialect module (toolchains/<toolchain>/dialect.py) provides, as module
    attributes: the dispatch (toolchains/dialects.py) calls the module, so this class is the
    interface's one description, not a base class."""

    RUNTIME: str = ""  # the OpenMP offload runtime its objects' host code calls, "" for none
    MADE_BY: str = ""  # what makes such objects, for messages ("a GCC offload object ...")
    WHOLE_OBJECT: bool = False  # True: object_cus reads the whole object once, else cus_of

    def cus_of(self, elf: ElfFile, section: object, origin: str) -> list[CU]:
        """The CUs of one of its sections."""
        raise NotImplementedError

    def object_cus(self, elf: ElfFile, origin: str, link_args: list[str],
                   lto: bool = False) -> list[CU]:
        """The CUs of a whole object (WHOLE_OBJECT), with the link line's words."""
        raise NotImplementedError

    # Optional:
    def select(self, cus: list[CU], link_args: list[str]) -> list[CU]:
        """The link's CUs less those of its own this link builds no image from (GCC's, by its
        link words); an error for a target it cannot build."""
        return cus

    def relocatable_argv(self, argv: list[str]) -> list[str]:
        """A `-r` link line without the words that would link its device code then."""
        return argv


class Registration:
    """A runtime's registration of a link's images (toolchains/<toolchain>/<name>.py, named
    by Target.registration and found in the registry's REGISTRATIONS): what the toolchain's
    offload runtime expects at program start, built from this link's images (named by their
    index in the table: link/reserve.py's symbols). The host link stage builds it and adds
    it; a registration that must see the linked binary (`relinks`) also rewrites the host
    link's command and checks the output, which is linked again until it holds."""

    name: str = ""
    # A link option that asks for this registration where no target names it ("" for none;
    # the registry's LINK_OPTIONS), given to the link in LinkOptions.toolchain_options.
    option: str = ""
    relinks: bool = False  # True: host_step, not build, puts it into the host link

    def enabled(self, asked: bool) -> bool:
        """Whether the link makes it (`asked`: its option was given)."""
        return True

    # -- prefetch, beside the device links -------------------------------------------------
    def start(self, plan: LinkPlan, targets: list[Target], indexes: list[int], workdir: str,
              cache: Cache | None) -> None:
        """Start the work `build` will want for the images of `targets` at `indexes` (one
        image per target, in their order), beside the device links. None by default."""

    def object_name(self, workdir: str) -> str | None:
        """The object `build` will return, known before it is built, or None."""
        return None

    def discard(self) -> None:
        """End what `start` began that `build` did not take (a failed link)."""

    # -- the host link -----------------------------------------------------------------------
    def build(self, plan: LinkPlan, images: list[Image], indexes: list[int], workdir: str,
              cache: Cache | None = None) -> str:
        """The object that registers `images` (the table's images at `indexes`) with the
        toolchain's runtime at program start, written in `workdir`: its path."""
        raise NotImplementedError

    def host_step(self, plan: LinkPlan, images: list[Image], workdir: str,
                  cache: Cache | None, asked: bool) -> HostStep | None:
        """A `relinks` registration of this link's images, or None where it has none to make
        (an error where `asked` and it cannot)."""
        return None


class HostStep:
    """What a `relinks` registration (Registration.host_step) does in the host link."""

    option: str = ""  # what it is, in messages

    def build(self) -> None:
        """Write its object(s) before the first host link."""
        raise NotImplementedError

    def host_argv(self, host: list[str], extra_at: int) -> list[str]:
        """The host link's command with it added (`extra_at`: where offlink's own inputs
        start)."""
        raise NotImplementedError

    def check(self, path: str) -> bool:
        """Whether the linked binary `path` is as it was registered; False: rewritten for
        it, and the host link runs again."""
        raise NotImplementedError


class DriverJobs:
    """What the registry's DRIVER_JOBS module provides, as module attributes: a driver's link
    run through its kept `-###` expansion (the driver not started), and those expansions
    asked early, beside the stages before the link that runs them."""

    def use(self, cache: Cache | None, folder: str = "") -> None:
        """The cache and work folder of the link under way (None: the link is over)."""

    def expand_early(self, argv: list[str], stand_ins: list[str],
                     after_others: bool = False) -> None:
        """Start asking for the expansion of a link run later, whose files `stand_ins` are
        not written yet (after those started before, with `after_others`)."""

    def join_early(self, argv: list[str] | None = None) -> None:
        """Wait for expand_early's work (for `argv`'s expansion only, when given)."""

    def run_link(self, argv: list[str], what: str, *, here: bool = False,
                 job: Callable[[list[str]], bool] | None = None) -> None:
        """Run the link `argv`, through its kept expansion where there is one (whose job
        `job`, when given, may run itself: Target.run_linker_job)."""


# -- stage 3, compile ------------------------------------------------------------------------

class CompiledCU(NamedTuple):
    cu: CU
    target: Target
    object_path: str
    offers: tuple[Offer, ...]
    key: str = ""  # the cache key ("" without a cache)
    cached: bool = False  # the object came from the cache
    # A cached object's bytes: written to object_path only when something reads the file (the
    # device link of an image not in the cache, write_objects), so a relink with nothing
    # changed writes no object into the work folder.
    data: bytes | None = None
    warnings: str = ""  # what the target compiler said (shown by show_warnings)
    span: tuple[float, float, int] = (0.0, 0.0, 0)  # compile start, end (perf_counter), thread
    # The object is the CU's code itself (clang's device object without -foffload-lto), not
    # written yet: write_objects writes it when something reads the file, as `data`.
    from_code: bool = False


def write_objects(compiled: Sequence[CompiledCU]) -> None:
    """Write the cached objects that are not in the work folder yet (CompiledCU.data), and
    the CUs' codes that are their objects (CompiledCU.from_code)."""
    for c in compiled:
        if (c.data is not None or c.from_code) and not os.path.exists(c.object_path):
            with open(c.object_path, "wb") as f:
                f.write(c.data if c.data is not None else c.cu.payload.code)


# -- stage 4, device link --------------------------------------------------------------------

class Image(NamedTuple):
    target: Target
    path: str
    data: bytes
    offers: dict[str, Offer]  # by name, over all CUs
    owners: dict[str, str]  # name -> the CU that offers it (for messages)
