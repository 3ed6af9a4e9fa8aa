"""The sha1 and sha256 of bytes, in hex, without loading OpenSSL for the little a short process
hashes.

`import hashlib` loads OpenSSL's library and reads its configuration: about 3 ms, a tenth of a
whole `cos rewind` (benchmarks/checkpoints.py) and more than hashing its few files and its
manifest takes. The interpreter's own implementations (`_sha1`, and `_sha256` or `_sha2`) load at
once but hash 6 to 12 times slower. So the first SMALL_TOTAL bytes a process hashes go through
them, and the rest through hashlib, loaded then (at once when something else loaded it already).
The digests are the same either way.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["SMALL_TOTAL", "sha1_hex", "sha256_hex"]

SMALL_TOTAL = 512 << 10  # about what the built-in ones hash in the time OpenSSL takes to load

_small = 0  # bytes this process hashed with the built-in implementations


def sha1_hex(*parts: bytes) -> str:
    """The sha1 of `parts` one after the other, in hex."""
    return _digest("sha1", parts)


def sha256_hex(*parts: bytes) -> str:
    """The sha256 of `parts` one after the other, in hex."""
    return _digest("sha256", parts)


def _digest(name: str, parts: tuple[bytes, ...]) -> str:
    global _small
    size = sum(map(len, parts))
    new = None
    if _small + size <= SMALL_TOTAL and "_hashlib" not in sys.modules:
        new = _built_in(name)
    if new is None:
        import hashlib

        new = getattr(hashlib, name)
    else:
        _small += size
    state = new()
    for part in parts:
        state.update(part)
    return str(state.hexdigest())


def _built_in(name: str) -> Any:
    """The interpreter's own constructor of `name`, or None when it was built without it."""
    for module in (("_sha1",) if name == "sha1" else ("_sha256", "_sha2")):  # 3.11; 3.12+
        try:
            return getattr(__import__(module), name)
        except (ImportError, AttributeError):
            continue
    return None
