"""SHA-256 for offlink's keys and checksums: hashlib's (OpenSSL's)."""

from __future__ import annotations

from hashlib import sha256

# cache/keys.py's name for the hash of its short keys: the same function.
sha256_small = sha256

__all__ = ["sha256", "sha256_small"]
