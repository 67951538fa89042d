"""offlink: link offload code into host executables and shared libraries."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["Table", "Symbol", "Target", "TableError", "__version__"]


def __getattr__(name: str):
    # Keep `import offlink` (and so the CLI's start-up) free of the table machinery.
    if name in ("Table", "Symbol", "Target"):
        from . import table

        return getattr(table, name)
    if name == "TableError":
        from .errors import TableError

        return TableError
    raise AttributeError(name)
