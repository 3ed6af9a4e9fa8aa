"""The one clock format of cos: ISO-8601 UTC with milliseconds, as every record stores it."""

from __future__ import annotations

import time

__all__ = ["utc_now"]


def utc_now(now: float | None = None) -> str:
    """An ISO-8601 UTC timestamp with milliseconds, e.g. 2026-11-29T16:20:00.123Z."""
    now = time.time() if now is None else now
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
