"""One error hierarchy: everything offlink reports to a user is an OfflinkError."""

from __future__ import annotations


class OfflinkError(Exception):
    """A failure explained in one line; the CLI prints it as `offlink: error: ...`."""

    exit_code = 1


class UsageError(OfflinkError):
    """A command line offlink cannot act on."""

    exit_code = 2


class FormatError(OfflinkError):
    """Input that is not what it claims to be: not ELF, truncated, a corrupt payload."""


class TableError(FormatError):
    """A corrupt or unsupported `.openmp_target` table; `code` is the spec's error code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class ToolError(OfflinkError):
    """A tool offlink runs (compiler, linker) is missing or failed."""

    def __init__(self, message: str, exit_code: int = 1, output: str = ""):
        super().__init__(message)
        self.exit_code = exit_code or 1
        self.output = output


class LinkError(OfflinkError):
    """The offload link cannot be completed (duplicate names, kinds that disagree, ...)."""
