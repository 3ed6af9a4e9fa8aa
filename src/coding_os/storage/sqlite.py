"""The embedded default backend: one SQLite file in WAL mode, `.coding-os/coding-os.db`."""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from coding_os.errors import StateIOError
from coding_os.state import durable
from coding_os.state.hookslog import utc_now
from coding_os.storage.base import (
    INDEX_COLUMNS,
    IndexRow,
    Observation,
    SessionRecord,
    SessionSummary,
    Storage,
    StorageError,
    check_schema_version,
    index_query,
    storable_text,
)
from coding_os.storage.migrations.sqlite import MIGRATIONS

__all__ = ["SQLiteStorage"]

BUSY_TIMEOUT_S = 30.0
_SESSION_COLUMNS = ("id", "agent", "panel", "native_id", "project", "cwd", "source",
                    "forked_from", "cleared_from", "started", "last_active", "status")


class SQLiteStorage(Storage):
    """Storage on a SQLite file. Migrations run on open, serialised by a lock file."""

    def __init__(self, path: str, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        """Open (and migrate) the database at `path`; wait at most `busy_timeout_s` for a lock.

        Raises:
            StorageError: it cannot be opened or migrated, or a newer coding-os migrated it.
        """
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        try:
            durable.ensure_dir(os.path.dirname(path))
            self._conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None,
                                         check_same_thread=False)
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            version = self.schema_version()
            check_schema_version(version, len(MIGRATIONS), path)
            if version < len(MIGRATIONS):
                self.migrate()
        except (sqlite3.Error, OSError) as exc:
            raise StorageError(f"cannot open database {path}: {exc}") from None
        except StorageError:
            raise
        except StateIOError as exc:  # the directory could not be created
            raise StorageError(str(exc)) from None
        try:
            os.chmod(path, durable.FILE_MODE)
        except OSError:
            pass

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StorageError(f"database {self.path}: {exc}") from None
        try:
            yield self._conn
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            raise StorageError(f"database {self.path}: {exc}") from None
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def _query(self, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StorageError(f"database {self.path}: {exc}") from None

    def schema_version(self) -> int:
        version = self._query("PRAGMA user_version")[0][0]
        assert isinstance(version, int)
        return version

    def migrate(self) -> int:
        # The first opener switches to WAL and migrates; concurrent first openers wait here
        # rather than racing on the journal mode change.
        lock_fd = os.open(self.path + ".lock", os.O_RDWR | os.O_CREAT, durable.FILE_MODE)
        try:
            # Wait for another migrator at most as long as for any other lock (a hook gives up
            # after its short wait instead of hanging behind a long migration).
            deadline = time.monotonic() + self.busy_timeout_s
            while True:
                try:
                    fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise StorageError(f"migrating {self.path}: another process holds the "
                                           "migration lock") from None
                    time.sleep(0.02)
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                version = self.schema_version()
                for index in range(version, len(MIGRATIONS)):
                    name, sql = MIGRATIONS[index]
                    self._apply(index + 1, name, sql)
            except sqlite3.Error as exc:
                raise StorageError(f"migrating {self.path}: {exc}") from None
            return self.schema_version()
        finally:
            os.close(lock_fd)

    def _apply(self, version: int, name: str, sql: str) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            if int(conn.execute("PRAGMA user_version").fetchone()[0]) >= version:
                conn.execute("ROLLBACK")
                return
            for statement in sql.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations ("
                         "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied TEXT NOT NULL)")
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)",
                         (version, name, utc_now()))
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    # sessions

    def upsert_session(self, record: SessionRecord) -> None:
        values = [storable_text(v) if isinstance(v, str) else v
                  for v in (getattr(record, c) for c in _SESSION_COLUMNS)]
        updates = ", ".join(f"{c} = excluded.{c}" for c in _SESSION_COLUMNS[1:])
        with self._transaction() as conn:
            conn.execute(
                f"INSERT INTO sessions ({', '.join(_SESSION_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(_SESSION_COLUMNS))}) "
                f"ON CONFLICT (id) DO UPDATE SET {updates}",
                values,
            )

    def touch_session(self, session_id: str, last_active: str, status: str | None = None) -> None:
        with self._transaction() as conn:
            conn.execute(
                "UPDATE sessions SET last_active = max(last_active, ?), "
                "status = coalesce(?, status) WHERE id = ?",
                (last_active, status, session_id),
            )

    def session(self, session_id: str) -> SessionRecord | None:
        rows = self._query(f"SELECT {', '.join(_SESSION_COLUMNS)} FROM sessions WHERE id = ?",
                           (session_id,))
        return SessionRecord(*rows[0]) if rows else None  # type: ignore[arg-type]

    def session_by_native(self, agent: str, native_id: str) -> SessionRecord | None:
        rows = self._query(
            f"SELECT {', '.join(_SESSION_COLUMNS)} FROM sessions "
            "WHERE agent = ? AND native_id = ? ORDER BY last_active DESC LIMIT 1",
            (agent, native_id),
        )
        return SessionRecord(*rows[0]) if rows else None  # type: ignore[arg-type]

    def sessions(self, agent: str | None = None) -> list[SessionRecord]:
        sql = f"SELECT {', '.join(_SESSION_COLUMNS)} FROM sessions"
        params: tuple[object, ...] = ()
        if agent:
            sql += " WHERE agent = ?"
            params = (agent,)
        rows = self._query(sql + " ORDER BY last_active DESC, id DESC", params)
        return [SessionRecord(*row) for row in rows]  # type: ignore[arg-type]

    # observations

    def add_observations(self, rows: Sequence[Observation]) -> int:
        with self._transaction() as conn:
            before = conn.total_changes
            conn.executemany(
                "INSERT OR IGNORE INTO observations "
                "(oid, session, agent, panel, ts, event, tool, text, data) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [tuple(storable_text(v) for v in (o.oid, o.session, o.agent, o.panel, o.ts,
                                                  o.event, o.tool, o.text,
                                                  json.dumps(o.data, ensure_ascii=False)))
                 for o in rows],
            )
            return conn.total_changes - before

    def observations(self, session: str | None = None, limit: int | None = None) -> list[Observation]:
        sql = "SELECT oid, session, agent, panel, ts, event, tool, text, data FROM observations"
        params: list[object] = []
        if session:
            sql += " WHERE session = ?"
            params.append(session)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [
            Observation(oid=str(oid), session=str(sid), agent=str(agent), panel=str(panel),
                        ts=str(ts), event=str(event),
                        tool=tool if isinstance(tool, str) else None,
                        text=text if isinstance(text, str) else None,
                        data=json.loads(str(data)))
            for oid, sid, agent, panel, ts, event, tool, text, data in self._query(sql, params)
        ]

    # summaries

    def summary(self, session_id: str) -> SessionSummary | None:
        rows = self._query(
            "SELECT session, agent, panel, reason, native_id, started, ended, prompts, "
            "tool_calls, errors, files, last_prompt, created FROM session_summaries "
            "WHERE session = ?",
            (session_id,),
        )
        if not rows:
            return None
        row = list(rows[0])
        row[10] = json.loads(row[10])  # type: ignore[arg-type]
        return SessionSummary(*row)  # type: ignore[arg-type]

    def write_summary(self, summary: SessionSummary) -> bool:
        with self._transaction() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO session_summaries (session, agent, panel, reason, "
                "native_id, started, ended, prompts, tool_calls, errors, files, last_prompt, "
                "created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (summary.session, summary.agent, summary.panel, summary.reason,
                 summary.native_id, summary.started, summary.ended, summary.prompts,
                 summary.tool_calls, summary.errors, json.dumps(summary.files),
                 storable_text(summary.last_prompt), summary.created or utc_now()),
            )
            return cursor.rowcount == 1

    # the session index

    def upsert_index_rows(self, rows: Sequence[IndexRow]) -> int:
        if not rows:
            return 0
        columns = [c for c in INDEX_COLUMNS if c != "name"]
        updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c != "id")
        insert = (f"INSERT INTO session_index ({', '.join(columns)}, name) "
                  f"VALUES ({', '.join('?' * len(columns))}, "
                  "(SELECT name FROM session_names WHERE id = ?)) "
                  f"ON CONFLICT (id) DO UPDATE SET {updates}")
        added = 0
        with self._transaction() as conn:
            for row in rows:
                if row.native_id is not None:
                    conn.execute("DELETE FROM session_index WHERE agent = ? AND native_id = ? "
                                 "AND id <> ? AND kind <> 'cos'",
                                 (row.agent, storable_text(row.native_id), storable_text(row.id)))
                known = conn.execute("SELECT 1 FROM session_index WHERE id = ?",
                                     (storable_text(row.id),)).fetchone()
                values = [storable_text(v) if isinstance(v, str) else v
                          for v in (getattr(row, c) for c in columns)]
                conn.execute(insert, [*values, storable_text(row.id)])
                added += known is None
        return added

    def index_rows(self, *, agent: str | None = None, search: str | None = None,
                   cwd_under: Sequence[str] | None = None, kind: str | None = None,
                   limit: int | None = None, branch: str | None = None) -> list[IndexRow]:
        built = index_query(INDEX_COLUMNS, placeholder="?", text=storable_text, agent=agent,
                            search=search, cwd_under=cwd_under, kind=kind, limit=limit,
                            branch=branch)
        if built is None:
            return []
        query, params = built
        return [_index_row(row) for row in self._query(query, params)]

    def index_row(self, id_or_native: str) -> IndexRow | None:
        key = storable_text(id_or_native)
        rows = self._query(
            f"SELECT {', '.join(INDEX_COLUMNS)} FROM session_index WHERE id = ? "
            "UNION ALL "
            f"SELECT {', '.join(INDEX_COLUMNS)} FROM session_index WHERE native_id = ? "
            "ORDER BY last_active DESC LIMIT 2", (key, key))
        exact = [row for row in rows if row[0] == key]
        return _index_row((exact or rows)[0]) if rows else None

    def remove_index_row(self, session_id: str) -> bool:
        with self._transaction() as conn:
            conn.execute("DELETE FROM session_names WHERE id = ?", (storable_text(session_id),))
            cursor = conn.execute("DELETE FROM session_index WHERE id = ?",
                                  (storable_text(session_id),))
            return cursor.rowcount > 0

    def clear_index(self) -> None:
        with self._transaction() as conn:
            conn.execute("DELETE FROM session_index")

    def index_count(self) -> int:
        count = self._query("SELECT count(*) FROM session_index")[0][0]
        assert isinstance(count, int)
        return count

    def set_name(self, session_id: str, name: str | None) -> bool:
        key = storable_text(session_id)
        with self._transaction() as conn:
            cursor = conn.execute("UPDATE session_index SET name = ? WHERE id = ?",
                                  (storable_text(name), key))
            if cursor.rowcount == 0:
                return False
            if name is None:
                conn.execute("DELETE FROM session_names WHERE id = ?", (key,))
            else:
                conn.execute("INSERT INTO session_names (id, name) VALUES (?, ?) "
                             "ON CONFLICT (id) DO UPDATE SET name = excluded.name",
                             (key, storable_text(name)))
            return True

    def close(self) -> None:
        self._conn.close()


def _index_row(row: Sequence[object]) -> IndexRow:
    return IndexRow(**dict(zip(INDEX_COLUMNS, row)))  # type: ignore[arg-type]
