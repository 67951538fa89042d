"""SHA-256 for offlink's keys and checksums: hashlib's (OpenSSL's), imported on first use, so
that a link without target code, which hashes nothing, does not load OpenSSL
(benchmarks/cc_build/RESULTS.md says what the load costs)."""

from __future__ import annotations


def sha256(data: bytes | memoryview = b""):
    """hashlib.sha256(data)."""
    import hashlib

    return hashlib.sha256(data)


# cache/keys.py's name for the hash of its short keys: the same function.
sha256_small = sha256
