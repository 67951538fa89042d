"""offlink's own runtime (`offlink cc` objects, offlink.h) in `offlink inspect`'s terms: its
table's rows are what `offlink_translate` resolves, by name, in each image."""

from __future__ import annotations

RUNTIME = "offlink"  # offlink's runtime: it finds the table itself
TITLE = "offlink's runtime"  # how inspect names its view

ENTRY_TERMS = {"function": "a row of offlink's table (a function offered by its CU)",
               "variable": "a row of offlink's table (a variable offered by its CU)"}


def claims(target: str) -> bool:
    return False  # offlink's own targets: whatever no toolchain claims


def device_only(name: str, where: list[str], exported: bool) -> str:
    how = ("exported, but no CU offers it, so translate returns the host pointer" if exported
           else "not exported (static, hidden or internal), so no CU offers it and translate "
                "returns the host pointer")
    return f"'{name}' is in the images {', '.join(where)}: {how}"
