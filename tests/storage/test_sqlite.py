"""storage/sqlite.py: what the embedded backend adds to the specs every backend passes (the
conformance files beside this one): its file, WAL mode, its migrations and its query plans."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from coding_os.storage.base import StorageError
from coding_os.storage.migrations.sqlite import MIGRATIONS
from coding_os.storage.sqlite import SQLiteStorage


def test_sqlite_database_is_in_wal_mode_and_private(tmp_path: Path) -> None:
    path = tmp_path / "s" / "coding-os.db"
    SQLiteStorage(str(path)).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        names = [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY version")]
    assert names == [name for name, _ in MIGRATIONS]
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_database_from_a_newer_coding_os_is_refused(tmp_path: Path) -> None:
    from coding_os.storage.base import StorageError

    path = tmp_path / "coding-os.db"
    SQLiteStorage(str(path)).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    with pytest.raises(StorageError, match="newer than this coding-os"):
        SQLiteStorage(str(path))


def test_a_failing_migration_leaves_the_schema_at_the_last_applied_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coding_os.storage import sqlite as sqlite_module

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


def test_sqlite_lists_a_page_of_the_index_without_sorting_the_whole_table(tmp_path: Path) -> None:
    storage = SQLiteStorage(str(tmp_path / "coding-os.db"))
    try:
        plan = " ".join(str(row[-1]) for row in storage._query(
            "EXPLAIN QUERY PLAN SELECT id FROM session_index "
            "ORDER BY last_active DESC, id DESC LIMIT 50"))
    finally:
        storage.close()
    assert "session_index_last_active" in plan and "TEMP B-TREE" not in plan

