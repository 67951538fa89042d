"""offlink.records.NamedTuple makes the class typing.NamedTuple makes, without typing."""

from __future__ import annotations

import subprocess
import sys
import typing

import pytest

from offlink.records import NamedTuple


class Ours(NamedTuple):
    """A row."""

    name: str
    size: int = 1
    strong: bool = False

    @property
    def label(self) -> str:
        return f"{self.name}/{self.size}"


class Typings(typing.NamedTuple):
    """A row."""

    name: str
    size: int = 1
    strong: bool = False

    @property
    def label(self) -> str:
        return f"{self.name}/{self.size}"


def test_the_class_behaves_as_typings():
    for cls in (Ours, Typings):
        row = cls("f", 3)
        assert row == ("f", 3, False) and tuple(row) == ("f", 3, False)
        assert row._replace(strong=True).strong is True
        assert row.label == "f/3"
        assert cls._fields == ("name", "size", "strong")
        assert cls._field_defaults == {"size": 1, "strong": False}
        assert row._asdict() == {"name": "f", "size": 3, "strong": False}
        assert cls._make(["g", 2, True]).size == 2
        assert cls.__doc__ == "A row."
        assert cls.__qualname__ == cls.__name__ and cls.__module__ == __name__
        assert issubclass(cls, tuple)
        with pytest.raises(TypeError):
            cls()
    assert repr(Ours("f")) == repr(Typings("f")).replace("Typings", "Ours")
    assert hash(Ours("f")) == hash(Typings("f"))
    assert list(Ours.__annotations__) == list(Typings.__annotations__)


def test_what_typing_refuses_it_refuses():
    with pytest.raises(TypeError, match="cannot follow default"):
        class Bad(NamedTuple):
            a: int = 0
            b: int
    with pytest.raises(AttributeError, match="Cannot overwrite"):
        class Worse(NamedTuple):
            a: int

            def _replace(self):
                pass


def test_importing_it_imports_no_typing():
    code = "import sys, offlink.records, offlink.model; print('typing' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_pythons_own_sha256_gives_openssls_digests():
    """digest.without_openssl (every `offlink cc`): the same keys and checksums."""
    import hashlib

    from offlink import digest

    data = bytes(range(256)) * 1000
    before = digest._sha256
    try:
        digest.without_openssl()
        own = digest.sha256(data)
        assert own.hexdigest() == hashlib.sha256(data).hexdigest()
        copy = own.copy()
        copy.update(b"more")
        assert copy.digest() == hashlib.sha256(data + b"more").digest()
        assert digest.sha256().hexdigest() == hashlib.sha256().hexdigest()
    finally:
        digest._sha256 = before
