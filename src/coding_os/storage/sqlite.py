"""The embedded default backend: one SQLite file in WAL mode, `.coding-os/coding-os.db`."""

from __future__ import annotations

import fcntl
import json
import operator
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from coding_os.errors import StateIOError
from coding_os import durable
from coding_os.clock import utc_now
from coding_os.storage.base import (
    INDEX_COLUMNS,
    IndexRow,
    Observation,
    ReplicaSource,
    SessionRecord,
    SearchDoc,
    SearchHit,
    SessionSummary,
    SourceMark,
    Storage,
    StorageError,
    Task,
    TaskMove,
    WorkLogEntry,
    check_schema_version,
    task_text,
    index_query,
    published_jobs,
    storable_text,
    valid_replica_lines,
)
from coding_os.storage.migrations.sqlite import MIGRATIONS

__all__ = ["SQLiteStorage"]

BUSY_TIMEOUT_S = 30.0
_SESSION_COLUMNS = ("id", "agent", "panel", "native_id", "project", "cwd", "source",
                    "forked_from", "cleared_from", "started", "last_active", "status",
                    "fork_point", "host")
_KEPT_UNLESS_GIVEN = ("fork_point", "host")
_REPLICA_COLUMNS = ("session", "stream", "host", "agent", "path", "project_key", "root", "lines",
                    "updated")


def _private_file(path: str) -> None:
    """Make the database file 0600 before SQLite opens it (which gives its -wal and -shm the
    same mode); one that cannot be (read-only, another user's) is left to SQLite to report."""
    if path == ":memory:":
        return
    try:
        os.close(durable.open_private(path, os.O_RDONLY))
    except OSError:
        pass


class SQLiteStorage(Storage):
    """Storage on a SQLite file. Migrations run on open, serialised by a lock file."""

    def __init__(self, path: str, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        """Open (and migrate) the database at `path`; wait at most `busy_timeout_s` for a lock.

        Raises:
            StorageError: it cannot be opened or migrated, or a newer coding-os migrated it.
        """
        self.path = self.location = path
        self.busy_timeout_s = busy_timeout_s
        try:
            durable.ensure_dir(os.path.dirname(path))
            _private_file(path)
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

    # Lifecycle (storage/lifecycle.py): the schema and its migrations

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

    def close(self) -> None:
        self._conn.close()

    # SessionStore (storage/sessions.py)

    def upsert_session(self, record: SessionRecord) -> None:
        values = [storable_text(v) if isinstance(v, str) else v
                  for v in (getattr(record, c) for c in _SESSION_COLUMNS)]
        # A fork point, once filed, stays: a later upsert that does not know it keeps it.
        updates = ", ".join(f"{c} = coalesce(excluded.{c}, sessions.{c})"
                            if c in _KEPT_UNLESS_GIVEN else f"{c} = excluded.{c}"
                            for c in _SESSION_COLUMNS[1:])
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

    # ObservationStore (storage/observations.py)

    def add_observations(self, rows: Sequence[Observation]) -> int:
        with self._transaction() as conn:
            last = conn.execute("SELECT coalesce(max(seq), 0) FROM observations").fetchone()[0]
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
            added = conn.total_changes - before
            if added:
                first_doc = _next_doc(conn)
                conn.execute(
                    "INSERT OR IGNORE INTO search_docs (kind, ref, session, ts, text) "
                    "SELECT 'observation', oid, session, ts, text FROM observations "
                    "WHERE seq > ? AND text IS NOT NULL AND text <> '' ORDER BY seq", (last,))
                _index_docs_from(conn, first_doc)
            return added

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

    # SummaryStore (storage/summaries.py)

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

    # IndexStore (storage/index.py)

    def upsert_index_rows(self, rows: Sequence[IndexRow]) -> int:
        if not rows:
            return 0
        columns = [c for c in INDEX_COLUMNS if c != "name"]
        updates = ", ".join("host = coalesce(excluded.host, session_index.host)" if c == "host"
                            else f"{c} = excluded.{c}" for c in columns if c != "id")
        insert = (f"INSERT INTO session_index ({', '.join(columns)}, name) "
                  f"VALUES ({', '.join('?' * len(columns))}, "
                  "(SELECT name FROM session_names WHERE id = ?)) "
                  f"ON CONFLICT (id) DO UPDATE SET {updates} "
                  "WHERE session_index.host IS NULL OR excluded.host IS NULL "
                  "OR session_index.host = excluded.host")
        fields = operator.attrgetter(*columns)
        # ASCII text is storable as it is (the common case, without a call).
        values = [[storable_text(v) if isinstance(v, str) and not v.isascii() else v
                   for v in fields(row)] for row in rows]
        with self._transaction() as conn:
            ids = [storable_text(row.id) for row in rows]
            if self._deletes_nothing(conn, rows, ids):
                # The DELETE of each row would remove none: the inserts alone, in one call.
                known = self._known_ids(conn, ids)
                conn.executemany(insert, [[*row_values, row_id]
                                          for row_values, row_id in zip(values, ids)])
                return len(set(ids) - known)
            added = 0
            for row, row_values, row_id in zip(rows, values, ids):
                if row.native_id is not None:
                    conn.execute("DELETE FROM session_index WHERE agent = ? AND native_id = ? "
                                 "AND id <> ? AND kind <> 'cos' "
                                 "AND (host IS NULL OR ? IS NULL OR host = ?)",
                                 (row.agent, storable_text(row.native_id), row_id,
                                  row.host, row.host))
                known_row = conn.execute("SELECT 1 FROM session_index WHERE id = ?",
                                         (row_id,)).fetchone()
                conn.execute(insert, [*row_values, row_id])
                added += known_row is None
        return added

    @staticmethod
    def _deletes_nothing(conn: sqlite3.Connection, rows: Sequence[IndexRow],
                         ids: Sequence[str | None]) -> bool:
        """Whether no row's DELETE of another row of its native session (in `upsert_index_rows`,
        row by row) could remove a row: no two of `rows` name one native session under two ids,
        and no row already indexed names one of theirs under another id."""
        owner: dict[tuple[str, str | None], str | None] = {}
        for row, row_id in zip(rows, ids):
            if row.native_id is None:
                continue
            key = (row.agent, storable_text(row.native_id))
            if owner.setdefault(key, row_id) != row_id:
                return False
        natives = sorted({native for _, native in owner if native is not None})
        for start in range(0, len(natives), 500):
            chunk = natives[start:start + 500]
            for row_id, agent, native_id in conn.execute(
                    "SELECT id, agent, native_id FROM session_index WHERE native_id IN "
                    f"({', '.join('?' * len(chunk))})", chunk):
                if (agent, native_id) in owner and owner[(agent, native_id)] != row_id:
                    return False
        return True

    @staticmethod
    def _known_ids(conn: sqlite3.Connection, ids: Sequence[str | None]) -> set[str | None]:
        """Those of `ids` the index holds."""
        keys = sorted({key for key in ids if key is not None})
        known: set[str | None] = set()
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            known.update(row_id for (row_id,) in conn.execute(
                f"SELECT id FROM session_index WHERE id IN ({', '.join('?' * len(chunk))})",
                chunk))
        return known

    def index_rows(self, *, agent: str | None = None, search: str | None = None,
                   cwd_under: Sequence[str] | None = None, kind: str | None = None,
                   limit: int | None = None, branch: str | None = None,
                   hosts: Sequence[str] | None = None,
                   local_host: str | None = None) -> list[IndexRow]:
        built = index_query(INDEX_COLUMNS, placeholder="?", text=storable_text, agent=agent,
                            search=search, cwd_under=cwd_under, kind=kind, limit=limit,
                            branch=branch, hosts=hosts, local_host=local_host)
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

    def clear_index(self, host: str | None = None, *, keep_unowned: bool = False) -> None:
        with self._transaction() as conn:
            if host is None:
                conn.execute("DELETE FROM session_index")
            else:
                conn.execute("DELETE FROM session_index WHERE host = ?"
                             + ("" if keep_unowned else " OR host IS NULL"), (host,))

    def rehost_index(self, host: str) -> int:
        with self._transaction() as conn:
            return max(conn.execute("UPDATE session_index SET host = ? WHERE host <> ?",
                                    (host, host)).rowcount, 0)

    def index_hosts(self, ids: Sequence[str]) -> dict[str, str | None]:
        found: dict[str, str | None] = {}
        keys = [storable_text(i) for i in ids]
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            for row_id, host in self._query(
                    "SELECT id, host FROM session_index WHERE id IN "
                    f"({', '.join('?' * len(chunk))})", chunk):
                found[str(row_id)] = host if isinstance(host, str) else None
        return found

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

    # BrainStore (storage/brain.py)

    def create_task(self, title: str, body: str, status: str, owner: str | None,
                    session: str | None, attributed_by: str | None, ts: str) -> Task:
        with self._transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO tasks (title, body, status, owner, created, updated, created_by, "
                "attributed_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (storable_text(title), storable_text(body), status, owner, ts, ts, session,
                 attributed_by))
            n = cursor.lastrowid
            assert n is not None
            conn.execute("INSERT INTO task_moves (task, from_status, to_status, owner, session, "
                         "attributed_by, ts) VALUES (?, NULL, ?, ?, ?, ?, ?)",
                         (n, status, owner, session, attributed_by, ts))
            self._put_doc(conn, SearchDoc("task", f"TASK-{n}", session, ts,
                                          task_text(title, body)))
        task = self.task(n)
        assert task is not None
        return task

    def _put_doc(self, conn: sqlite3.Connection, doc: SearchDoc, source: str | None = None) -> bool:
        """Insert or replace the document (kind, ref), keeping the full-text index in step."""
        old = conn.execute("SELECT id, text FROM search_docs WHERE kind = ? AND ref = ?",
                           (doc.kind, storable_text(doc.ref))).fetchone()
        values = (storable_text(doc.session), doc.ts, storable_text(doc.text),
                  storable_text(source))
        if old is None:
            cursor = conn.execute(
                "INSERT INTO search_docs (session, ts, text, source, kind, ref) "
                "VALUES (?, ?, ?, ?, ?, ?)", (*values, doc.kind, storable_text(doc.ref)))
            doc_id = cursor.lastrowid
        else:  # replaced in place: the document keeps its id (its place in the results)
            doc_id = old[0]
            conn.execute("INSERT INTO search_fts (search_fts, rowid, text) "
                         "VALUES ('delete', ?, ?)", old)
            conn.execute("UPDATE search_docs SET session = ?, ts = ?, text = ?, source = ? "
                         "WHERE id = ?", (*values, doc_id))
        conn.execute("INSERT INTO search_fts (rowid, text) VALUES (?, ?)",
                     (doc_id, storable_text(doc.text)))
        return old is None

    def task(self, n: int) -> Task | None:
        rows = self._query(f"SELECT {_TASK_COLUMNS} FROM tasks WHERE n = ?", (n,))
        return Task(*rows[0]) if rows else None  # type: ignore[arg-type]

    def tasks(self, status: str | None = None, owner: str | None = None, after: int = 0,
              limit: int = 50) -> list[Task]:
        sql = f"SELECT {_TASK_COLUMNS} FROM tasks WHERE n > ?"
        params: list[object] = [after]
        if status:
            sql += " AND status = ?"
            params.append(status)
        if owner:
            sql += " AND owner = ?"
            params.append(owner)
        params.append(limit)
        return [Task(*row) for row in self._query(sql + " ORDER BY n LIMIT ?",  # type: ignore[arg-type]
                                                  params)]

    def move_task(self, n: int, status: str, owner: str | None, session: str | None,
                  attributed_by: str | None, ts: str, note: str | None = None,
                  expect_status: str | None = None,
                  expect_owner: str | None = None) -> Task | None:
        with self._transaction() as conn:
            row = conn.execute("SELECT status, owner FROM tasks WHERE n = ?", (n,)).fetchone()
            if row is None:
                return None
            if expect_status is not None and (row[0], row[1]) != (expect_status, expect_owner):
                return None
            conn.execute("UPDATE tasks SET status = ?, owner = ?, updated = max(updated, ?) "
                         "WHERE n = ?", (status, owner, ts, n))
            conn.execute("INSERT INTO task_moves (task, from_status, to_status, owner, session, "
                         "attributed_by, ts, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (n, row[0], status, owner, session, attributed_by, ts,
                          storable_text(note)))
        return self.task(n)

    def task_moves(self, n: int) -> list[TaskMove]:
        rows = self._query("SELECT seq, task, from_status, to_status, owner, session, "
                           "attributed_by, ts, note FROM task_moves WHERE task = ? ORDER BY seq",
                           (n,))
        return [TaskMove(*row) for row in rows]  # type: ignore[arg-type]

    def append_work_log(self, session: str | None, attributed_by: str | None, task: int | None,
                        text: str, ts: str) -> WorkLogEntry:
        with self._transaction() as conn:
            cursor = conn.execute("INSERT INTO work_log (session, attributed_by, task, text, ts) "
                                  "VALUES (?, ?, ?, ?, ?)",
                                  (session, attributed_by, task, storable_text(text), ts))
            seq = cursor.lastrowid
            assert seq is not None
            self._put_doc(conn, SearchDoc("work_log", str(seq), session, ts, text))
        return WorkLogEntry(seq, session, attributed_by, task, storable_text(text) or "", ts)

    def work_log(self, session: str | None = None, task: int | None = None,
                 before: int | None = None, limit: int = 50) -> list[WorkLogEntry]:
        sql = "SELECT seq, session, attributed_by, task, text, ts FROM work_log WHERE 1 = 1"
        params: list[object] = []
        for column, value in (("session", session), ("task", task)):
            if value is not None:
                sql += f" AND {column} = ?"
                params.append(value)
        if before is not None:
            sql += " AND seq < ?"
            params.append(before)
        params.append(limit)
        return [WorkLogEntry(*row) for row in  # type: ignore[arg-type]
                self._query(sql + " ORDER BY seq DESC LIMIT ?", params)]

    def search(self, terms: Sequence[str], kinds: Sequence[str] | None = None,
               sessions: Sequence[str] | None = None, before: int | None = None,
               limit: int = 20) -> list[SearchHit]:
        if not terms:
            return []
        # Each term a quoted FTS5 string: whatever the user typed is a word to find, never
        # query syntax.
        match = " ".join('"' + t.replace('"', '""') + '"' for t in terms)
        sql = ("SELECT d.id, d.kind, d.ref, d.session, d.ts, d.text FROM search_fts "
               "JOIN search_docs d ON d.id = search_fts.rowid WHERE search_fts MATCH ?")
        params: list[object] = [storable_text(match)]
        if kinds:
            sql += f" AND d.kind IN ({', '.join('?' * len(kinds))})"
            params.extend(kinds)
        if sessions:
            sql += f" AND d.session IN ({', '.join('?' * len(sessions))})"
            params.extend(storable_text(s) for s in sessions)
        if before is not None:
            sql += " AND search_fts.rowid < ?"
            params.append(before)
        params.append(limit)
        rows = self._query(sql + " ORDER BY search_fts.rowid DESC LIMIT ?", params)
        return [SearchHit(*row) for row in rows]  # type: ignore[arg-type]

    def source_marks(self) -> dict[str, SourceMark]:
        rows = self._query("SELECT source, inode, read_to, tail FROM search_sources")
        return {str(row[0]): SourceMark(*row) for row in rows}  # type: ignore[arg-type]

    def add_source_docs(self, mark: SourceMark, docs: Sequence[SearchDoc],
                        restart: bool = False) -> int:
        source = storable_text(mark.source)
        added = 0
        with self._transaction() as conn:
            if restart:
                _drop_source_docs(conn, source)
            for doc in docs:
                added += self._put_doc(conn, doc, source)
            conn.execute("INSERT INTO search_sources (source, inode, read_to, tail) "
                         "VALUES (?, ?, ?, ?) ON CONFLICT (source) DO UPDATE SET "
                         "inode = excluded.inode, read_to = excluded.read_to, "
                         "tail = excluded.tail", (source, mark.inode, mark.read_to, mark.tail))
        return added

    def remove_source(self, source: str) -> int:
        key = storable_text(source)
        with self._transaction() as conn:
            removed = _drop_source_docs(conn, key)
            conn.execute("DELETE FROM search_sources WHERE source = ?", (key,))
        return removed

    # ReplicaStore (storage/replicas.py)

    def add_replica_lines(self, source: ReplicaSource, lines: Sequence[tuple[int, bytes]]) -> int:
        valid_replica_lines(lines)
        session, stream = storable_text(source.session), storable_text(source.stream)
        with self._transaction() as conn:
            owner = conn.execute("SELECT host FROM replica_sources WHERE session = ? AND host <> ? "
                                 "LIMIT 1", (session, source.host)).fetchone()
            if owner is not None:
                raise StorageError(f"session {source.session} is replicated from host "
                                   f"{owner[0]}, not {source.host}: its lines are kept apart")
            row = conn.execute("SELECT lines FROM replica_sources WHERE session = ? AND "
                               "stream = ?", (session, stream)).fetchone()
            before = conn.total_changes
            conn.executemany("INSERT OR IGNORE INTO replica_lines (session, stream, seq, line) "
                             "VALUES (?, ?, ?, ?)",
                             [(session, stream, seq, line) for seq, line in lines])
            added = conn.total_changes - before
            contiguous = int(row[0]) if row else 0
            for seq in sorted({seq for seq, _ in lines}):
                if seq == contiguous + 1:
                    contiguous = seq
            for (seq,) in conn.execute("SELECT seq FROM replica_lines WHERE session = ? AND "
                                       "stream = ? AND seq > ? ORDER BY seq",
                                       (session, stream, contiguous)):
                if seq != contiguous + 1:
                    break
                contiguous = seq
            conn.execute(
                f"INSERT INTO replica_sources ({', '.join(_REPLICA_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(_REPLICA_COLUMNS))}) "
                "ON CONFLICT (session, stream) DO UPDATE SET agent = excluded.agent, "
                "path = excluded.path, project_key = excluded.project_key, "
                "root = excluded.root, lines = excluded.lines, updated = excluded.updated",
                (session, stream, source.host, storable_text(source.agent),
                 storable_text(source.path), storable_text(source.project_key),
                 storable_text(source.root), contiguous, utc_now()))
            return added

    def replica_source(self, session: str, stream: str) -> ReplicaSource | None:
        rows = self._query(f"SELECT {', '.join(_REPLICA_COLUMNS)} FROM replica_sources "
                           "WHERE session = ? AND stream = ?",
                           (storable_text(session), storable_text(stream)))
        return ReplicaSource(*rows[0]) if rows else None  # type: ignore[arg-type]

    def replica_sources(self, session: str) -> list[ReplicaSource]:
        rows = self._query(f"SELECT {', '.join(_REPLICA_COLUMNS)} FROM replica_sources "
                           "WHERE session = ? ORDER BY stream", (storable_text(session),))
        return [ReplicaSource(*row) for row in rows]  # type: ignore[arg-type]

    def replica_lines(self, session: str, stream: str, after: int = 0,
                      limit: int | None = None) -> list[tuple[int, bytes]]:
        sql = ("SELECT seq, line FROM replica_lines WHERE session = ? AND stream = ? "
               "AND seq > ? ORDER BY seq")
        params: list[object] = [storable_text(session), storable_text(stream), after]
        if limit is not None and limit >= 0:
            sql += " LIMIT ?"
            params.append(limit)
        return [(int(seq), bytes(line))  # type: ignore[call-overload]
                for seq, line in self._query(sql, params)]

    def remove_replica(self, session: str, stream: str) -> int:
        key = (storable_text(session), storable_text(stream))
        with self._transaction() as conn:
            removed = conn.execute("DELETE FROM replica_lines WHERE session = ? AND stream = ?",
                                   key).rowcount
            conn.execute("DELETE FROM replica_sources WHERE session = ? AND stream = ?", key)
        return max(removed, 0)

    # HostStore (storage/hosts.py)

    def move_session(self, session: str, from_host: str, to_host: str) -> bool:
        key = storable_text(session)
        with self._transaction() as conn:
            row = conn.execute("SELECT native_id FROM session_index WHERE id = ? AND host = ?",
                               (key, from_host)).fetchone()
            if row is None:
                return False
            conn.execute("UPDATE session_index SET host = ? WHERE id = ? AND host = ?",
                         (to_host, key, from_host))
            names = [key] + ([row[0]] if row[0] and row[0] != key else [])
            conn.execute("UPDATE replica_sources SET host = ? WHERE host = ? AND session IN "
                         f"({', '.join('?' * len(names))})", (to_host, from_host, *names))
            return True

    def set_project_host(self, project_key: str, host: str, root: str) -> None:
        with self._transaction() as conn:
            conn.execute("INSERT INTO project_hosts (project_key, host, root, updated) "
                         "VALUES (?, ?, ?, ?) ON CONFLICT (project_key, host) DO UPDATE SET "
                         "root = excluded.root, updated = excluded.updated",
                         (storable_text(project_key), host, storable_text(root), utc_now()))

    def project_hosts(self, project_key: str) -> dict[str, str]:
        rows = self._query("SELECT host, root FROM project_hosts WHERE project_key = ? "
                           "ORDER BY host", (storable_text(project_key),))
        return {str(host): str(root) for host, root in rows}

    # JobStore (storage/jobs.py)

    def publish_jobs(self, host: str, rows: Sequence[Mapping[str, object]]) -> None:
        jobs = published_jobs(rows)
        with self._transaction() as conn:
            conn.execute("DELETE FROM host_jobs WHERE host = ?", (host,))
            conn.executemany("INSERT OR REPLACE INTO host_jobs (host, id, job) VALUES (?, ?, ?)",
                             [(host, storable_text(job_id), storable_text(job))
                              for job_id, job in jobs])

    def host_jobs(self, host: str | None = None) -> list[tuple[str, dict[str, object]]]:
        sql = "SELECT host, job FROM host_jobs"
        params: tuple[object, ...] = ()
        if host is not None:
            sql += " WHERE host = ?"
            params = (host,)
        return [(str(h), json.loads(str(job)))
                for h, job in self._query(sql + " ORDER BY host, id", params)]


_TASK_COLUMNS = "n, title, body, status, owner, created, updated, created_by, attributed_by"


def _drop_source_docs(conn: sqlite3.Connection, source: str | None) -> int:
    """Delete the documents read from `source`, from the full-text index too."""
    old = conn.execute("SELECT id, text FROM search_docs WHERE source = ?", (source,)).fetchall()
    for row in old:
        conn.execute("INSERT INTO search_fts (search_fts, rowid, text) VALUES ('delete', ?, ?)",
                     row)
    conn.execute("DELETE FROM search_docs WHERE source = ?", (source,))
    return len(old)


def _next_doc(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(id), 0) + 1 FROM search_docs").fetchone()[0])


def _index_docs_from(conn: sqlite3.Connection, first: int) -> None:
    """Add the documents numbered `first` and above to the full-text index."""
    conn.execute("INSERT INTO search_fts (rowid, text) SELECT id, text FROM search_docs "
                 "WHERE id >= ?", (first,))


def _index_row(row: Sequence[object]) -> IndexRow:
    return IndexRow(**dict(zip(INDEX_COLUMNS, row)))  # type: ignore[arg-type]
