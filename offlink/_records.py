"""typing's NamedTuple class syntax, and TYPE_CHECKING, without importing typing.

A relink with nothing changed imported typing for nothing else: the import and the ~20
named tuples typing builds, each field's annotation compiled into a ForwardRef, cost it
~4 ms (issue 11). Type checkers see typing's own NamedTuple; at run time a class written
`class Row(NamedTuple): name: str; size: int = 1` (methods, properties and a docstring
allowed) is collections.namedtuple's class with the class body's attributes added, as
typing makes it.
"""

from __future__ import annotations

import collections

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    # What typing.NamedTupleMeta leaves out of the class body, and refuses to override.
    _SPECIAL = frozenset({"__module__", "__name__", "__annotations__", "__qualname__",
                          "__dict__", "__weakref__", "__orig_bases__"})
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields",
                             "_field_defaults", "_make", "_replace", "_asdict", "_source"})

    class _Meta(type):
        def __new__(mcls, name, bases, ns):
            fields = list(ns.get("__annotations__", {}))
            defaults = [ns[f] for f in fields if f in ns]
            if any(f not in ns for f in fields[len(fields) - len(defaults):]):
                raise TypeError(f"{name}: a field without a default follows one with a "
                                f"default")
            cls = collections.namedtuple(name, fields, defaults=defaults,
                                         module=ns["__module__"])
            cls.__qualname__ = ns.get("__qualname__", name)
            for key, value in ns.items():
                if key in _PROHIBITED:
                    raise AttributeError(f"{name}: cannot overwrite NamedTuple attribute {key}")
                if key not in _SPECIAL and key not in fields:
                    setattr(cls, key, value)
            return cls

    def NamedTuple(typename, fields=None, /, **kwargs):  # noqa: N802 - typing's name
        """Base of a named tuple written as a class (typing.NamedTuple's class syntax; the
        call form is not offered)."""
        raise TypeError("offlink's NamedTuple takes the class syntax only")

    _Base = type.__new__(_Meta, "NamedTuple", (), {})
    NamedTuple.__mro_entries__ = lambda bases: (_Base,)
