"""typing.NamedTuple's class syntax without importing typing.

`import typing` (with the re and enum it imports) cost every `offlink cc` ~7-10 ms of its
~55-70 ms of Python, and making a class with typing.NamedTuple another ~0.3 ms each (it turns
every field's annotation into a ForwardRef). The modules a compile imports declare their named
tuples with this `NamedTuple` instead: to a type checker it is typing's own; at run time
a class statement with it makes the same collections.namedtuple class typing makes (fields in
annotation order, defaults, methods, docstring), the annotations kept as the strings they are.
The same modules write `TYPE_CHECKING = False` rather than importing it from typing.
"""

from __future__ import annotations

from collections import namedtuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    # as typing's: the user may not redefine these, and these are not copied over
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields",
                             "_field_defaults", "_make", "_replace", "_asdict", "_source"})
    _SPECIAL = frozenset({"__module__", "__name__", "__annotations__"})

    class _NamedTupleMeta(type):
        def __new__(cls, typename, bases, ns):
            if ns.get("_root", False):  # the class NamedTuple itself
                return super().__new__(cls, typename, bases, ns)
            if bases != (NamedTuple,):
                raise TypeError("can only inherit from a NamedTuple type")
            fields = list(ns.get("__annotations__", {}))
            defaults = []
            for name in fields:
                if name in ns:
                    defaults.append(ns[name])
                elif defaults:
                    raise TypeError(f"Non-default namedtuple field {name} cannot follow "
                                    f"default field{'s' if len(defaults) > 1 else ''}")
            made = namedtuple(typename, fields, defaults=defaults, module=ns["__module__"])
            made.__annotations__ = made.__new__.__annotations__ = dict(ns.get(
                "__annotations__", {}))
            for key, value in ns.items():
                if key in _PROHIBITED:
                    raise AttributeError(f"Cannot overwrite NamedTuple attribute {key}")
                if key not in _SPECIAL and key not in fields:
                    setattr(made, key, value)
            return made

    class NamedTuple(metaclass=_NamedTupleMeta):
        _root = True
