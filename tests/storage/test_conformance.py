"""One behaviour suite every storage backend must pass (SQLite now; PostgreSQL next)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from coding_os.storage.base import Observation, SessionRecord, SessionSummary, Storage
from coding_os.storage.migrations.sqlite import MIGRATIONS
from coding_os.storage.sqlite import SQLiteStorage

BACKENDS: dict[str, Callable[[Path], Storage]] = {
    "sqlite": lambda tmp: SQLiteStorage(str(tmp / "state" / "coding-os.db")),
}


@pytest.fixture(params=sorted(BACKENDS))
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    backend = BACKENDS[request.param](tmp_path)
    yield backend
    backend.close()


def session(sid: str, **fields: object) -> SessionRecord:
    base: dict[str, object] = dict(id=sid, agent="claude", panel="p1", native_id="n-" + sid,
                                   started="2026-11-29T10:00:00.000Z",
                                   last_active="2026-11-29T10:00:00.000Z")
    base.update(fields)
    return SessionRecord(**base)  # type: ignore[arg-type]


def obs(oid: str, sid: str, event: str = "PostToolUse", **fields: object) -> Observation:
    return Observation(oid=oid, session=sid, agent="claude", panel="p1",
                       ts="2026-11-29T10:00:01.000Z", event=event, **fields)  # type: ignore[arg-type]


def test_a_fresh_database_is_migrated_to_the_latest_version(storage: Storage) -> None:
    assert storage.schema_version() == len(MIGRATIONS)
    assert storage.migrate() == len(MIGRATIONS)  # idempotent


def test_sessions_upsert_and_lookup_by_id_and_native_id(storage: Storage) -> None:
    storage.upsert_session(session("ses-claude-20261129-100000-aaaa"))
    storage.upsert_session(session("ses-claude-20261129-100000-aaaa", status="ended"))
    found = storage.session("ses-claude-20261129-100000-aaaa")
    assert found is not None and found.status == "ended"
    by_native = storage.session_by_native("claude", "n-ses-claude-20261129-100000-aaaa")
    assert by_native is not None and by_native.id == found.id
    assert storage.session_by_native("codex", "n-ses-claude-20261129-100000-aaaa") is None
    assert storage.session("ses-claude-20261129-100000-ffff") is None


def test_touch_moves_last_activity_forward_only(storage: Storage) -> None:
    sid = "ses-claude-20261129-100000-aaaa"
    storage.upsert_session(session(sid))
    storage.touch_session(sid, "2026-11-29T12:00:00.000Z")
    storage.touch_session(sid, "2026-11-29T11:00:00.000Z", status="ended")
    found = storage.session(sid)
    assert found is not None
    assert (found.last_active, found.status) == ("2026-11-29T12:00:00.000Z", "ended")


def test_sessions_are_listed_most_recent_first(storage: Storage) -> None:
    storage.upsert_session(session("ses-claude-20261129-100000-aaaa", last_active="2026-11-29T10:00:00Z"))
    storage.upsert_session(session("ses-codex-20261129-100000-bbbb", agent="codex",
                                   last_active="2026-11-29T11:00:00Z"))
    assert [s.id for s in storage.sessions()] == ["ses-codex-20261129-100000-bbbb",
                                                   "ses-claude-20261129-100000-aaaa"]
    assert [s.id for s in storage.sessions("claude")] == ["ses-claude-20261129-100000-aaaa"]


def test_observations_are_stored_once_per_oid_with_the_spool_offset(storage: Storage) -> None:
    rows = [obs("o1", "s1", tool="Bash", data={"ok": True}), obs("o2", "s1"), obs("o3", "s2")]
    assert storage.add_observations(rows, spool_offset=300) == 3
    assert storage.add_observations(rows[:2], spool_offset=400) == 0
    assert storage.spool_offset() == 400
    assert [o.oid for o in storage.observations()] == ["o1", "o2", "o3"]
    first = storage.observations(session="s1")[0]
    assert (first.tool, first.data) == ("Bash", {"ok": True})


def test_a_summary_is_written_once_and_the_first_writer_wins(storage: Storage) -> None:
    first = SessionSummary(session="s1", agent="claude", panel="p1", reason="orphan", prompts=2,
                           files=["a.py"])
    assert storage.write_summary(first) is True
    assert storage.write_summary(SessionSummary(session="s1", agent="claude", panel="p1",
                                                reason="end:other")) is False
    stored = storage.summary("s1")
    assert stored is not None and (stored.reason, stored.prompts, stored.files) == ("orphan", 2, ["a.py"])
    assert storage.summary("s2") is None


def test_sqlite_database_is_in_wal_mode_and_private(tmp_path: Path) -> None:
    path = tmp_path / "s" / "coding-os.db"
    SQLiteStorage(str(path)).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        names = [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY version")]
    assert names == [name for name, _ in MIGRATIONS]
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_failing_migration_leaves_the_schema_at_the_last_applied_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coding_os.storage import sqlite as sqlite_module
    from coding_os.storage.base import StorageError

    path = tmp_path / "coding-os.db"
    SQLiteStorage(str(path)).close()
    broken = MIGRATIONS + [("0002_broken", "CREATE TABLE extra (x INTEGER); CREATE TABLE sessions (y)")]
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", broken)
    with pytest.raises(StorageError, match="migrating"):
        SQLiteStorage(str(path))
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "extra" not in tables  # the half-applied migration was rolled back whole
