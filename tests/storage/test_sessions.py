"""storage/sessions.py (SessionStore) on every backend: the sessions the hooks saw. One spec per
operation, each run against SQLite and PostgreSQL."""

from __future__ import annotations

from coding_os.storage.base import Storage
from tests.helpers import each_backend, session_record

pytestmark = each_backend


def test_sessions_upsert_and_lookup_by_id_and_native_id(storage: Storage) -> None:
    storage.upsert_session(session_record("ses-claude-20261129-100000-aaaa"))
    storage.upsert_session(session_record("ses-claude-20261129-100000-aaaa", status="ended"))
    found = storage.session("ses-claude-20261129-100000-aaaa")
    assert found is not None and found.status == "ended"
    by_native = storage.session_by_native("claude", "n-ses-claude-20261129-100000-aaaa")
    assert by_native is not None and by_native.id == found.id
    assert storage.session_by_native("codex", "n-ses-claude-20261129-100000-aaaa") is None
    assert storage.session("ses-claude-20261129-100000-ffff") is None


def test_touch_moves_last_activity_forward_only(storage: Storage) -> None:
    sid = "ses-claude-20261129-100000-aaaa"
    storage.upsert_session(session_record(sid))
    storage.touch_session(sid, "2026-11-29T12:00:00.000Z")
    storage.touch_session(sid, "2026-11-29T11:00:00.000Z", status="ended")
    found = storage.session(sid)
    assert found is not None
    assert (found.last_active, found.status) == ("2026-11-29T12:00:00.000Z", "ended")


def test_a_sessions_fork_point_is_kept_by_a_later_upsert_that_does_not_know_it(
        storage: Storage) -> None:
    point = '{"checkpoint": "cp-20261129-100000-000-abcd", "uuid": "u1"}'
    storage.upsert_session(session_record("s1", forked_from="s0", fork_point=point))
    storage.upsert_session(session_record("s1", forked_from="s0", status="ended"))
    found = storage.session("s1")
    assert found is not None and found.fork_point == point and found.status == "ended"


def test_sessions_are_listed_most_recent_first(storage: Storage) -> None:
    storage.upsert_session(session_record("ses-claude-20261129-100000-aaaa",
                                          last_active="2026-11-29T10:00:00Z"))
    storage.upsert_session(session_record("ses-codex-20261129-100000-bbbb", agent="codex",
                                          last_active="2026-11-29T11:00:00Z"))
    assert [s.id for s in storage.sessions()] == ["ses-codex-20261129-100000-bbbb",
                                                   "ses-claude-20261129-100000-aaaa"]
    assert [s.id for s in storage.sessions("claude")] == ["ses-claude-20261129-100000-aaaa"]


def test_a_session_keeps_its_host_across_an_upsert_that_does_not_know_it(
        storage: Storage) -> None:
    storage.upsert_session(session_record("s1", host="alpha"))
    storage.upsert_session(session_record("s1", status="ended"))
    found = storage.session("s1")
    assert found is not None and (found.host, found.status) == ("alpha", "ended")
    storage.upsert_session(session_record("s2"))
    assert storage.session("s2").host is None  # type: ignore[union-attr]
