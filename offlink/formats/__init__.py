"""The binary formats offlink reads and writes, one module each (declarations.py: construct's
declarations of them, the reference).

The section prefixes that the dialects need to tell an object's CUs apart live here.
"""

PAYLOAD_SECTION_PREFIX = "gnu.target_lto_"
# GCC's own offload objects (gcc -fopenmp -foffload=...): read by offlink/toolchains/gcc/dialect.py.
GCC_OFFLOAD_SECTION_PREFIX = ".gnu.offload_lto_"


class Frozen:
    """A value class without dataclasses (benchmarks/formats/RESULTS.md says why): equal and
    hashed by `_values()`, its fields set once by `__init__` (object.__setattr__) and never
    again. model.CU and payload.Payload are such classes."""

    __slots__ = ()

    def _values(self) -> tuple:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError(f"cannot assign to field '{name}'")  # frozen

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field '{name}'")
