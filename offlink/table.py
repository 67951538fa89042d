"""`from offlink import Table`: read a module's offload table by name and by host address.

Backed by the C core (offlink._ctable, the same table.c as the runtime library) when it is
built, else by the pure-Python core; `OFFLINK_PURE_PYTHON=1` forces the latter. Both give the
same answers (tests/test_differential.py).
"""

from __future__ import annotations

import os
import warnings
from array import array
from collections.abc import Iterable
from typing import NamedTuple

from . import _pytable, settings
from .elf import ElfFile
from .errors import FormatError, TableError
from .formats.table import IMAGE_KIND_NAMES, SECTION, SYMBOL_KIND_NAMES

try:
    from ._ctable import Core as _CCore  # type: ignore[import-not-found]
except ImportError:  # the extension is optional: an install where no C compiler worked
    _CCore = None


def _load_core():
    if settings.flag("OFFLINK_PURE_PYTHON"):
        return _pytable.Core
    if _CCore is None:
        # Said on first use instead of being silently slower; OFFLINK_PURE_PYTHON=1 asks for
        # this core quietly.
        warnings.warn(
            "the C table core (offlink._ctable) is not built in this install; using the "
            "pure-Python core (same answers, slower). Reinstall offlink where a C compiler "
            "works to build it.",
            RuntimeWarning,
            stacklevel=3,
        )
        return _pytable.Core
    return _CCore


_Core = None


def _core():
    global _Core
    if _Core is None:
        _Core = _load_core()
    return _Core


def backend() -> str:
    """Which core is loaded: 'c' or 'python'."""
    return _core().backend


class Symbol(NamedTuple):
    name: str
    address: int  # as in the file's symbol table (st_value), or relative to `base`
    size: int
    kind: str
    host_offset: int  # relative to the table


def _make_symbol(name: bytes, address: int, size: int, kind: int, host_offset: int) -> Symbol:
    return Symbol(name.decode(), address, size, SYMBOL_KIND_NAMES[kind], host_offset)


class Target(NamedTuple):
    name: str
    kind: str
    image: bytes
    offset: int = 0  # of the image from the table's start (inspect adds the file offset)


class Table:
    """A validated offload table. `address` is the table's own address (sh_addr in a file)."""

    def __init__(self, buf, address: int = 0, path: str | None = None):
        try:
            self._core = _core()(buf)
        except ValueError as e:
            code, message = e.args if len(e.args) == 2 else ("corrupt", str(e))
            where = f"{path}: " if path else ""
            raise TableError(code, f"{where}{SECTION}: {message}") from None
        self._buf = buf
        self.address = address
        self.path = path
        # The per-call path goes straight into the core (no Python frame of ours), which then
        # hands back one cached Symbol per row: see find() and lookup() below.
        self._core.bind(address, _make_symbol)
        self.find = self._core.find_symbol  # type: ignore[method-assign]
        self.lookup = self._core.lookup_symbol  # type: ignore[method-assign]

    @classmethod
    def from_bytes(cls, buf, address: int = 0) -> Table:
        return cls(buf, address)

    @classmethod
    def open(cls, path: str | os.PathLike) -> Table:
        elf = ElfFile.open(path)
        section = elf.section(SECTION)
        if section is None:
            raise FormatError(f"{os.fspath(path)}: no {SECTION} section (not linked with offlink)")
        data = bytes(elf.content(section))
        return cls(data, section.sh_addr, os.fspath(path))

    @property
    def backend(self) -> str:
        return self._core.backend

    @property
    def total_size(self) -> int:
        return self._core.total_size

    def __len__(self) -> int:
        return self._core.n_symbols

    def _symbol(self, row: int) -> Symbol:
        name, host_offset, size, kind = self._core.symbol(row)
        return Symbol(name.decode(), self.address + host_offset, size, SYMBOL_KIND_NAMES[kind],
                      host_offset)

    @property
    def symbols(self) -> list[Symbol]:
        return [self._symbol(i) for i in range(self._core.n_symbols)]

    def rows(self) -> list[tuple[str, int, int, str]]:
        """Every row as (name, address, size, kind), in row order: what `symbols` holds,
        without an object per row (a link's verify reads thousands)."""
        base, kinds, symbol = self.address, SYMBOL_KIND_NAMES, self._core.symbol
        out = []
        for i in range(self._core.n_symbols):
            name, host_offset, size, kind = symbol(i)
            out.append((name.decode(), base + host_offset, size, kinds[kind]))
        return out

    @property
    def targets(self) -> list[Target]:
        out = []
        for i in range(self._core.n_targets):
            name, kind, off, size, _crc = self._core.target(i)
            image = bytes(self._buf[off : off + size])
            out.append(Target(name.decode(), IMAGE_KIND_NAMES[kind], image, off))
        return out

    def damaged_targets(self) -> list[str]:
        """The targets whose image fails its checksum. Opening a table checks the metadata
        only; the runtime checks an image when it loads it, inspect checks them all."""
        damaged = []
        for i in range(self._core.n_targets):
            try:
                self._core.check_image(i)
            except ValueError:
                damaged.append(self._core.target(i)[0].decode())
        return damaged

    def target(self, name: str) -> Target:
        """One target's image, its checksum verified."""
        names = [self._core.target(i)[0].decode() for i in range(self._core.n_targets)]
        if name in names:
            i = names.index(name)
            try:
                self._core.check_image(i)
            except ValueError as e:
                raise TableError(e.args[0], f"{SECTION}: target {name}: {e.args[-1]}") from None
            _name, kind, off, size, _crc = self._core.target(i)
            return Target(name, IMAGE_KIND_NAMES[kind], bytes(self._buf[off : off + size]), off)
        known = ", ".join(names) or "none"
        raise FormatError(f"no target '{name}' in the table (targets: {known})")

    # lookup and find are replaced per instance by the core's bound methods (in __init__);
    # these definitions document them and behave the same.

    def lookup(self, name: str) -> Symbol | None:
        """The row named `name`, or None. A name with '.' also finds a row spelled as GCC's
        PTX spells it, with '$' (the host's `run_a._omp_fn.0` is the row `run_a$_omp_fn$0`)."""
        return self._core.lookup_symbol(name)

    def find(self, address: int) -> Symbol | None:
        """The row whose [address, address + size) contains `address`, or None."""
        return self._core.find_symbol(address)

    def find_rows(self, addresses) -> array:
        """Batch form: a buffer of uint64 addresses in, array('q') of row numbers (-1: miss).
        Addresses are taken modulo 2^64 relative to the table's address."""
        return self._core.find_many(addresses, self.address)

    def lookup_many(self, names: Iterable[str]) -> list[Symbol | None]:
        return [self.lookup(n) for n in names]

    def symbol_at(self, row: int) -> Symbol:
        return self._symbol(row)
