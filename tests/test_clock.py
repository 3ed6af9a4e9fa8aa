"""The one clock format (clock.py), and how a time is read back and shown to a person."""

from __future__ import annotations

from datetime import datetime, timezone

from coding_os.clock import parse_time, shown_time, utc_now


def test_a_time_is_read_from_iso_text_or_unix_milliseconds_and_shown_in_utc() -> None:
    assert parse_time(utc_now(1_764_000_000.5)) == datetime.fromtimestamp(1_764_000_000.5,
                                                                         timezone.utc)
    assert parse_time(1_764_000_000_500) == parse_time("2025-11-24T16:00:00.500Z")
    assert shown_time("2026-11-29T18:20:00+02:00") == "2026-11-29 16:20:00 UTC"
    assert shown_time("2026-11-29T16:20:00") == "2026-11-29 16:20:00 UTC"  # no zone: UTC
    for not_a_time in ("yesterday", True, [], {}):
        assert parse_time(not_a_time) is None
    assert (shown_time("yesterday"), shown_time(None)) == ("yesterday", "")
