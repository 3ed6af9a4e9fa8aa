"""storage/summaries.py (SummaryStore) on every backend: what each session did, written once.
One spec per operation, each run against SQLite and PostgreSQL."""

from __future__ import annotations

from coding_os.storage.base import SessionSummary, Storage
from tests.helpers import each_backend

pytestmark = each_backend


def test_a_summary_is_written_once_and_the_first_writer_wins(storage: Storage) -> None:
    first = SessionSummary(session="s1", agent="claude", panel="p1", reason="orphan", prompts=2,
                           files=["a.py"])
    assert storage.write_summary(first) is True
    assert storage.write_summary(SessionSummary(session="s1", agent="claude", panel="p1",
                                                reason="end:other")) is False
    stored = storage.summary("s1")
    assert stored is not None and (stored.reason, stored.prompts, stored.files) == ("orphan", 2, ["a.py"])
    assert storage.summary("s2") is None
