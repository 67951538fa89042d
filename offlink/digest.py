"""SHA-256 for offlink's keys and checksums, from OpenSSL or from Python's own module.

hashlib's sha256 is OpenSSL's: fast (~1.7 GB/s here), but loading libcrypto costs a process
~3 ms. Python's own SHA-256 module gives the same digests at ~0.3 GB/s and costs nothing to
import. An `offlink cc` hashes a few hundred KB (its CU's code and the entries it stores), so
it asks for Python's own (`without_openssl`); every other command, a link hashing thousands
of entries, gets OpenSSL's, imported on first use.
"""

from __future__ import annotations

_sha256 = None


def sha256(data: bytes | memoryview = b""):
    """A SHA-256 hash object of `data`, as hashlib.sha256(data) makes it."""
    global _sha256
    if _sha256 is None:
        from hashlib import sha256 as openssl

        _sha256 = openssl
    return _sha256(data)


def without_openssl() -> None:
    """Hash with Python's own SHA-256 from now on, where the interpreter has it (CPython's
    `_sha2` from 3.12, `_sha256` before); else as before."""
    global _sha256
    own = _own()
    if own is not None:
        _sha256 = own


def sha256_small(data: bytes):
    """sha256(data) for a few KB: Python's own SHA-256 while OpenSSL's is not loaded yet, so
    a link's first small hashes (a tool's stamp, before clang's `-###` starts) do not wait
    for libcrypto's load (~3-8 ms); the same digest either way."""
    if _sha256 is None:
        own = _own()
        if own is not None:
            return own(data)
    return sha256(data)


def _own():
    """Python's own SHA-256 (CPython's `_sha2` from 3.12, `_sha256` before), or None."""
    try:
        from _sha2 import sha256 as own  # type: ignore[import-not-found]
    except ImportError:
        try:
            from _sha256 import sha256 as own  # type: ignore[import-not-found,no-redef]
        except ImportError:
            return None
    return own
