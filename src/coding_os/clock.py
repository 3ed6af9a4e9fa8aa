"""The one clock format of cos: ISO-8601 UTC with milliseconds, as every record stores it; and
how a time is read back and shown to a person."""

from __future__ import annotations

import time

TYPE_CHECKING = False  # typing itself is not imported: clock is on the hook's path
if TYPE_CHECKING:
    from datetime import datetime

__all__ = ["utc_now", "parse_time", "shown_time"]


def utc_now(now: float | None = None) -> str:
    """An ISO-8601 UTC timestamp with milliseconds, e.g. 2026-11-29T16:20:00.123Z."""
    now = time.time() if now is None else now
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def parse_time(value: object) -> datetime | None:
    """A time as records hold it — an ISO-8601 text (UTC when it names no zone) or Unix
    milliseconds (a job's `startedAt`) — as an aware datetime, or None when it is neither."""
    from datetime import datetime, timezone  # not on the hook's path, which needs only utc_now

    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return datetime.fromtimestamp(value / 1000, timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


def shown_time(value: object) -> str:
    """A time as a person reads it, in UTC to the second: `2026-11-29 16:20:00 UTC` (the value
    itself when it is not a time, "" for none)."""
    from datetime import timezone

    parsed = parse_time(value)
    if parsed is None:
        return "" if value is None else str(value)
    return parsed.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
