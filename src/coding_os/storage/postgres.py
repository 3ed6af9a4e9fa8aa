"""The shared backend: PostgreSQL, selected by `COS_DATABASE_URL=postgresql://…`.

Agents on several machines then share one project's sessions, observations and summaries. Each
project (and each test) can live in its own schema: libpq's `options=-csearch_path=<schema>` in
the URL is honoured, and the schema is created on first open. psycopg is imported here only, so
neither `import coding_os.storage` nor the hook's hot path pays for it.
"""

from __future__ import annotations

import json
import string
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

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
    index_query,
    published_jobs,
    storable_text,
    task_text,
    valid_replica_lines,
)
from coding_os.storage.migrations.postgres import MIGRATIONS

__all__ = ["PostgresStorage", "redact"]

CONNECT_TIMEOUT_S = 5
# pg_advisory_xact_lock(classid, objid): the class is ours ("cos"), the object is the schema.
_MIGRATION_LOCK_CLASS = 0x636F73
# The same, for the replicated lines of one session (its owner host is checked under it).
_REPLICA_LOCK_CLASS = 0x636F72
_SESSION_COLUMNS = ("id", "agent", "panel", "native_id", "project", "cwd", "source",
                    "forked_from", "cleared_from", "started", "last_active", "status",
                    "fork_point", "host")
_KEPT_UNLESS_GIVEN = ("fork_point", "host")
_REPLICA_COLUMNS = ("session", "stream", "host", "agent", "path", "project_key", "root", "lines",
                    "updated")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

_Connection = psycopg.Connection[tuple[Any, ...]]


class PostgresStorage(Storage):
    """Storage in a PostgreSQL database. Migrations run on open, serialised by an advisory lock.

    Raises:
        StorageError: the server cannot be reached, refuses the login, or the schema cannot be
            created or migrated. The message names the URL without its password.
    """

    shared = True

    def __init__(self, url: str) -> None:
        self.url = self.location = redact(url)
        self._lock = threading.RLock()
        defaults: dict[str, str | int] = {"connect_timeout": CONNECT_TIMEOUT_S,
                                          "application_name": "coding-os"}
        try:
            params = conninfo_to_dict(url)
            self._conninfo = make_conninfo(
                url, **{key: value for key, value in defaults.items() if key not in params})
        except psycopg.Error as exc:
            raise StorageError(f"cannot open database {self.url}: {_one_line(exc)}") from None
        self._password = str(params.get("password") or "")
        self.schema = search_path_schema(str(params.get("options") or ""))
        self._conn = self._connect()
        try:
            version = self.schema_version()
            check_schema_version(version, len(MIGRATIONS), self.url)
            if version < len(MIGRATIONS):
                self.migrate()
        except BaseException:
            self._conn.close()
            raise

    def _connect(self) -> _Connection:
        try:
            return psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise StorageError(f"cannot open database {self.url}: {self._message(exc)}") from None

    def _message(self, exc: BaseException) -> str:
        message = _one_line(exc)
        return message.replace(self._password, "***") if self._password else message

    @contextmanager
    def _using(self, doing: str = "database") -> Iterator[_Connection]:
        """The connection, for one caller at a time; a connection lost since is reopened."""
        with self._lock:
            if self._conn.broken:
                self._conn.close()
                self._conn = self._connect()
            try:
                yield self._conn
            except psycopg.Error as exc:
                raise StorageError(f"{doing} {self.url}: {self._message(exc)}") from None

    @contextmanager
    def _transaction(self) -> Iterator[_Connection]:
        with self._using() as conn, conn.transaction():
            yield conn

    def _query(self, query: str, params: Sequence[object] = (),
               prepare: bool | None = None) -> list[tuple[Any, ...]]:
        with self._using() as conn:
            return conn.execute(query, params, prepare=prepare).fetchall()

    # Lifecycle (storage/lifecycle.py): the schema and its migrations

    def _migrations_table(self) -> sql.Identifier:
        if self.schema is None:
            return sql.Identifier("schema_migrations")
        return sql.Identifier(self.schema, "schema_migrations")

    def _version(self, conn: _Connection) -> int:
        table = self._migrations_table()
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL",
                           (table.as_string(conn),)).fetchone()
        if not row or not row[0]:
            return 0
        row = conn.execute(sql.SQL("SELECT coalesce(max(version), 0) FROM {}").format(table)
                           ).fetchone()
        return int(row[0]) if row else 0

    def schema_version(self) -> int:
        with self._using() as conn:
            return self._version(conn)

    def migrate(self) -> int:
        with self._using("migrating") as conn:
            for index in range(self._version(conn), len(MIGRATIONS)):
                name, statements = MIGRATIONS[index]
                self._apply(conn, index + 1, name, statements)
            return self._version(conn)

    def _apply(self, conn: _Connection, version: int, name: str, statements: str) -> None:
        # One transaction: the lock (held to its end), the schema, the migration, its bookkeeping.
        # Concurrent first openers queue on the lock and then find the version already applied.
        table = self._migrations_table()
        with conn.transaction():
            conn.execute(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK_CLASS}, hashtext(%s))",
                         (self.schema or "",))
            if self.schema is not None and not conn.execute(
                    "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)).fetchone():
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))
            conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (version INTEGER PRIMARY KEY, "
                                 "name TEXT NOT NULL, applied TEXT NOT NULL)").format(table))
            if self._version(conn) >= version:
                return
            conn.execute(statements)
            conn.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(table),
                         (version, name, utc_now()))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # SessionStore (storage/sessions.py)

    def upsert_session(self, record: SessionRecord) -> None:
        values = [_text(getattr(record, c)) for c in _SESSION_COLUMNS]
        # A fork point, once filed, stays: a later upsert that does not know it keeps it.
        updates = ", ".join(f"{c} = coalesce(excluded.{c}, sessions.{c})"
                            if c in _KEPT_UNLESS_GIVEN else f"{c} = excluded.{c}"
                            for c in _SESSION_COLUMNS[1:])
        with self._transaction() as conn:
            conn.execute(
                f"INSERT INTO sessions ({', '.join(_SESSION_COLUMNS)}) "
                f"VALUES ({', '.join(['%s'] * len(_SESSION_COLUMNS))}) "
                f"ON CONFLICT (id) DO UPDATE SET {updates}",
                values,
            )

    def touch_session(self, session_id: str, last_active: str, status: str | None = None) -> None:
        with self._transaction() as conn:
            conn.execute(
                "UPDATE sessions SET last_active = greatest(last_active, %s), "
                "status = coalesce(%s, status) WHERE id = %s",
                (_text(last_active), _text(status), _text(session_id)),
            )

    def session(self, session_id: str) -> SessionRecord | None:
        rows = self._query(f"SELECT {', '.join(_SESSION_COLUMNS)} FROM sessions WHERE id = %s",
                           (_text(session_id),))
        return SessionRecord(*rows[0]) if rows else None

    def session_by_native(self, agent: str, native_id: str) -> SessionRecord | None:
        rows = self._query(
            f"SELECT {', '.join(_SESSION_COLUMNS)} FROM sessions "
            "WHERE agent = %s AND native_id = %s ORDER BY last_active DESC LIMIT 1",
            (_text(agent), _text(native_id)),
        )
        return SessionRecord(*rows[0]) if rows else None

    def sessions(self, agent: str | None = None) -> list[SessionRecord]:
        query = f"SELECT {', '.join(_SESSION_COLUMNS)} FROM sessions"
        params: tuple[object, ...] = ()
        if agent:
            query += " WHERE agent = %s"
            params = (_text(agent),)
        rows = self._query(query + " ORDER BY last_active DESC, id DESC", params)
        return [SessionRecord(*row) for row in rows]

    # ObservationStore (storage/observations.py)

    def add_observations(self, rows: Sequence[Observation]) -> int:
        if not rows:
            return 0
        with self._transaction() as conn, conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO observations "
                "(oid, session, agent, panel, ts, event, tool, text, data) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (oid) DO NOTHING",
                [tuple(_text(v) for v in (o.oid, o.session, o.agent, o.panel, o.ts,
                                          o.event, o.tool, o.text,
                                          json.dumps(o.data, ensure_ascii=False)))
                 for o in rows],
            )
            added = max(cursor.rowcount, 0)  # summed over the batch
            if added:
                # By oid, not by seq: concurrent batches may commit out of seq order.
                cursor.execute(
                    "INSERT INTO search_docs (kind, ref, session, ts, text) "
                    "SELECT 'observation', oid, session, ts, text FROM observations "
                    "WHERE oid = ANY(%s) AND text IS NOT NULL AND text <> '' ORDER BY seq "
                    "ON CONFLICT (kind, ref) DO NOTHING",
                    ([_text(o.oid) for o in rows],))
            return added

    def observations(self, session: str | None = None, limit: int | None = None) -> list[Observation]:
        query = "SELECT oid, session, agent, panel, ts, event, tool, text, data FROM observations"
        params: list[object] = []
        if session:
            query += " WHERE session = %s"
            params.append(_text(session))
        query += " ORDER BY seq"
        if limit is not None and limit >= 0:  # SQLite reads a negative LIMIT as none
            query += " LIMIT %s"
            params.append(limit)
        return [
            Observation(oid=oid, session=sid, agent=agent, panel=panel, ts=ts, event=event,
                        tool=tool, text=text, data=json.loads(data))
            for oid, sid, agent, panel, ts, event, tool, text, data in self._query(query, params)
        ]

    # SummaryStore (storage/summaries.py)

    def summary(self, session_id: str) -> SessionSummary | None:
        rows = self._query(
            "SELECT session, agent, panel, reason, native_id, started, ended, prompts, "
            "tool_calls, errors, files, last_prompt, created FROM session_summaries "
            "WHERE session = %s",
            (_text(session_id),),
        )
        if not rows:
            return None
        row = list(rows[0])
        row[10] = json.loads(row[10])
        return SessionSummary(*row)

    def write_summary(self, summary: SessionSummary) -> bool:
        with self._transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO session_summaries (session, agent, panel, reason, "
                "native_id, started, ended, prompts, tool_calls, errors, files, last_prompt, "
                "created) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (session) DO NOTHING",
                (_text(summary.session), _text(summary.agent), _text(summary.panel),
                 _text(summary.reason), _text(summary.native_id), _text(summary.started),
                 _text(summary.ended), summary.prompts, summary.tool_calls, summary.errors,
                 _text(json.dumps(summary.files)), _text(summary.last_prompt),
                 _text(summary.created or utc_now())),
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
                  f"VALUES ({', '.join(['%s'] * len(columns))}, "
                  "(SELECT name FROM session_names WHERE id = %s)) "
                  f"ON CONFLICT (id) DO UPDATE SET {updates} "
                  "WHERE session_index.host IS NULL OR excluded.host IS NULL "
                  "OR session_index.host = excluded.host "
                  "RETURNING (xmax = 0)")  # true for a row inserted, false for one updated
        added = 0
        with self._transaction() as conn:
            for row in rows:
                if row.native_id is not None:
                    conn.execute("DELETE FROM session_index WHERE agent = %s AND native_id = %s "
                                 "AND id <> %s AND kind <> 'cos' "
                                 "AND (host IS NULL OR %s::text IS NULL OR host = %s)",
                                 (_text(row.agent), _text(row.native_id), _text(row.id),
                                  _text(row.host), _text(row.host)))
                values = [_text(v) if isinstance(v, str) else v
                          for v in (getattr(row, c) for c in columns)]
                inserted = conn.execute(insert, [*values, _text(row.id)]).fetchone()
                added += bool(inserted and inserted[0])
        return added

    def index_rows(self, *, agent: str | None = None, search: str | None = None,
                   cwd_under: Sequence[str] | None = None, kind: str | None = None,
                   limit: int | None = None, branch: str | None = None,
                   hosts: Sequence[str] | None = None,
                   local_host: str | None = None) -> list[IndexRow]:
        built = index_query(INDEX_COLUMNS, placeholder="%s", text=_text, agent=agent,
                            search=search, cwd_under=cwd_under, kind=kind, limit=limit,
                            branch=branch, hosts=hosts, local_host=local_host)
        if built is None:
            return []
        query, params = built
        return [_index_row(row) for row in self._query(query, params)]

    def index_row(self, id_or_native: str) -> IndexRow | None:
        key = _text(id_or_native)
        rows = self._query(
            f"(SELECT {', '.join(INDEX_COLUMNS)} FROM session_index WHERE id = %s) "
            "UNION ALL "
            f"(SELECT {', '.join(INDEX_COLUMNS)} FROM session_index WHERE native_id = %s) "
            "ORDER BY last_active DESC LIMIT 2", (key, key))
        exact = [row for row in rows if row[0] == key]
        return _index_row((exact or rows)[0]) if rows else None

    def remove_index_row(self, session_id: str) -> bool:
        with self._transaction() as conn:
            conn.execute("DELETE FROM session_names WHERE id = %s", (_text(session_id),))
            cursor = conn.execute("DELETE FROM session_index WHERE id = %s", (_text(session_id),))
            return cursor.rowcount > 0

    def clear_index(self, host: str | None = None, *, keep_unowned: bool = False) -> None:
        with self._transaction() as conn:
            if host is None:
                conn.execute("DELETE FROM session_index")
            else:
                conn.execute("DELETE FROM session_index WHERE host = %s"
                             + ("" if keep_unowned else " OR host IS NULL"), (_text(host),))

    def rehost_index(self, host: str) -> int:
        with self._transaction() as conn:
            return max(conn.execute("UPDATE session_index SET host = %s WHERE host <> %s",
                                    (_text(host), _text(host))).rowcount, 0)

    def index_hosts(self, ids: Sequence[str]) -> dict[str, str | None]:
        if not ids:
            return {}
        rows = self._query("SELECT id, host FROM session_index WHERE id = ANY(%s)",
                           ([_text(i) for i in ids],))
        return {row_id: host for row_id, host in rows}

    def index_count(self) -> int:
        return int(self._query("SELECT count(*) FROM session_index")[0][0])

    def set_name(self, session_id: str, name: str | None) -> bool:
        key = _text(session_id)
        with self._transaction() as conn:
            cursor = conn.execute("UPDATE session_index SET name = %s WHERE id = %s",
                                  (_text(name), key))
            if cursor.rowcount == 0:
                return False
            if name is None:
                conn.execute("DELETE FROM session_names WHERE id = %s", (key,))
            else:
                conn.execute("INSERT INTO session_names (id, name) VALUES (%s, %s) "
                             "ON CONFLICT (id) DO UPDATE SET name = excluded.name",
                             (key, _text(name)))
            return True

    # BrainStore (storage/brain.py)

    def create_task(self, title: str, body: str, status: str, owner: str | None,
                    session: str | None, attributed_by: str | None, ts: str) -> Task:
        with self._transaction() as conn:
            row = conn.execute(
                "INSERT INTO tasks (title, body, status, owner, created, updated, created_by, "
                "attributed_by) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING n",
                (_text(title), _text(body), status, _text(owner), ts, ts, _text(session),
                 attributed_by)).fetchone()
            assert row is not None
            n = int(row[0])
            conn.execute("INSERT INTO task_moves (task, from_status, to_status, owner, session, "
                         "attributed_by, ts) VALUES (%s, NULL, %s, %s, %s, %s, %s)",
                         (n, status, _text(owner), _text(session), attributed_by, ts))
            _put_doc(conn, SearchDoc("task", f"TASK-{n}", session, ts, task_text(title, body)))
        task = self.task(n)
        assert task is not None
        return task

    def task(self, n: int) -> Task | None:
        rows = self._query(f"SELECT {_TASK_COLUMNS} FROM tasks WHERE n = %s", (n,))
        return Task(*rows[0]) if rows else None

    def tasks(self, status: str | None = None, owner: str | None = None, after: int = 0,
              limit: int = 50) -> list[Task]:
        query = f"SELECT {_TASK_COLUMNS} FROM tasks WHERE n > %s"
        params: list[object] = [after]
        if status:
            query += " AND status = %s"
            params.append(status)
        if owner:
            query += " AND owner = %s"
            params.append(_text(owner))
        params.append(limit)
        return [Task(*row) for row in self._query(query + " ORDER BY n LIMIT %s", params)]

    def move_task(self, n: int, status: str, owner: str | None, session: str | None,
                  attributed_by: str | None, ts: str, note: str | None = None,
                  expect_status: str | None = None,
                  expect_owner: str | None = None) -> Task | None:
        with self._transaction() as conn:
            row = conn.execute("SELECT status, owner FROM tasks WHERE n = %s FOR UPDATE",
                               (n,)).fetchone()
            if row is None:
                return None
            if expect_status is not None and (row[0], row[1]) != (expect_status,
                                                                  _text(expect_owner)):
                return None
            conn.execute("UPDATE tasks SET status = %s, owner = %s, "
                         "updated = greatest(updated, %s) WHERE n = %s",
                         (status, _text(owner), ts, n))
            conn.execute("INSERT INTO task_moves (task, from_status, to_status, owner, session, "
                         "attributed_by, ts, note) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                         (n, row[0], status, _text(owner), _text(session), attributed_by, ts,
                          _text(note)))
        return self.task(n)

    def task_moves(self, n: int) -> list[TaskMove]:
        rows = self._query("SELECT seq, task, from_status, to_status, owner, session, "
                           "attributed_by, ts, note FROM task_moves WHERE task = %s "
                           "ORDER BY seq", (n,))
        return [TaskMove(*row) for row in rows]

    def append_work_log(self, session: str | None, attributed_by: str | None, task: int | None,
                        text: str, ts: str) -> WorkLogEntry:
        with self._transaction() as conn:
            row = conn.execute("INSERT INTO work_log (session, attributed_by, task, text, ts) "
                               "VALUES (%s, %s, %s, %s, %s) RETURNING seq",
                               (_text(session), attributed_by, task, _text(text), ts)).fetchone()
            assert row is not None
            seq = int(row[0])
            _put_doc(conn, SearchDoc("work_log", str(seq), session, ts, text))
        return WorkLogEntry(seq, session, attributed_by, task, _text(text) or "", ts)

    def work_log(self, session: str | None = None, task: int | None = None,
                 before: int | None = None, limit: int = 50) -> list[WorkLogEntry]:
        query = "SELECT seq, session, attributed_by, task, text, ts FROM work_log WHERE TRUE"
        params: list[object] = []
        for column, value in (("session", session), ("task", task)):
            if value is not None:
                query += f" AND {column} = %s"
                params.append(_text(value) if isinstance(value, str) else value)
        if before is not None:
            query += " AND seq < %s"
            params.append(before)
        params.append(limit)
        return [WorkLogEntry(*row) for row in
                self._query(query + " ORDER BY seq DESC LIMIT %s", params)]

    def search(self, terms: Sequence[str], kinds: Sequence[str] | None = None,
               sessions: Sequence[str] | None = None, before: int | None = None,
               limit: int = 20) -> list[SearchHit]:
        if not terms:
            return []
        # Each term a phrase of quoted lexemes: whatever the user typed is words to find,
        # never tsquery syntax.
        query_text = " & ".join(
            "(" + " <-> ".join("'" + part.replace("\\", "\\\\").replace("'", "''") + "'"
                               for part in term.split()) + ")"
            for term in terms if term.split())
        query = ("SELECT id, kind, ref, session, ts, text FROM search_docs "
                 "WHERE tsv @@ to_tsquery('simple', %s)")
        params: list[object] = [_text(query_text)]
        if kinds:
            query += " AND kind = ANY(%s)"
            params.append(list(kinds))
        if sessions:
            query += " AND session = ANY(%s)"
            params.append([_text(s) for s in sessions])
        if before is not None:
            query += " AND id < %s"
            params.append(before)
        params.append(limit)
        # Never a prepared (generic) plan: the best plan depends on how common the words are
        # (the GIN index for a rare word, the newest ids first for a common one).
        return [SearchHit(*row) for row in
                self._query(query + " ORDER BY id DESC LIMIT %s", params, prepare=False)]

    def source_marks(self) -> dict[str, SourceMark]:
        rows = self._query("SELECT source, inode, read_to, tail FROM search_sources")
        return {row[0]: SourceMark(*row) for row in rows}

    def add_source_docs(self, mark: SourceMark, docs: Sequence[SearchDoc],
                        restart: bool = False) -> int:
        source = _text(mark.source)
        added = 0
        with self._transaction() as conn:
            if restart:
                conn.execute("DELETE FROM search_docs WHERE source = %s", (source,))
            for doc in docs:
                added += _put_doc(conn, doc, source)
            conn.execute("INSERT INTO search_sources (source, inode, read_to, tail) "
                         "VALUES (%s, %s, %s, %s) ON CONFLICT (source) DO UPDATE SET "
                         "inode = excluded.inode, read_to = excluded.read_to, "
                         "tail = excluded.tail", (source, mark.inode, mark.read_to, mark.tail))
        return added

    def remove_source(self, source: str) -> int:
        key = _text(source)
        with self._transaction() as conn:
            removed = conn.execute("DELETE FROM search_docs WHERE source = %s", (key,)).rowcount
            conn.execute("DELETE FROM search_sources WHERE source = %s", (key,))
        return max(removed, 0)

    # ReplicaStore (storage/replicas.py)

    def add_replica_lines(self, source: ReplicaSource, lines: Sequence[tuple[int, bytes]]) -> int:
        valid_replica_lines(lines)
        session, stream, host = _text(source.session), _text(source.stream), _text(source.host)
        with self._transaction() as conn:
            # One writer per session at a time: the owner check and the insert are one step.
            conn.execute(f"SELECT pg_advisory_xact_lock({_REPLICA_LOCK_CLASS}, hashtext(%s))",
                         (session,))
            owner = conn.execute("SELECT host FROM replica_sources WHERE session = %s "
                                 "AND host <> %s LIMIT 1", (session, host)).fetchone()
            if owner is not None:
                raise StorageError(f"session {source.session} is replicated from host "
                                   f"{owner[0]}, not {source.host}: its lines are kept apart")
            row = conn.execute("SELECT lines FROM replica_sources WHERE session = %s AND "
                               "stream = %s", (session, stream)).fetchone()
            added = 0
            if lines:
                added = max(conn.execute(
                    "INSERT INTO replica_lines (session, stream, seq, line) "
                    "SELECT %s, %s, seq, line FROM unnest(%b::bigint[], %b::bytea[]) "
                    "AS t (seq, line) ON CONFLICT (session, stream, seq) DO NOTHING",
                    (session, stream, [seq for seq, _ in lines],
                     [line for _, line in lines])).rowcount, 0)
            contiguous = int(row[0]) if row else 0
            for seq in sorted({seq for seq, _ in lines}):
                if seq == contiguous + 1:
                    contiguous = seq
            for (seq,) in conn.execute("SELECT seq FROM replica_lines WHERE session = %s AND "
                                       "stream = %s AND seq > %s ORDER BY seq",
                                       (session, stream, contiguous)):
                if seq != contiguous + 1:
                    break
                contiguous = int(seq)
            conn.execute(
                f"INSERT INTO replica_sources ({', '.join(_REPLICA_COLUMNS)}) "
                f"VALUES ({', '.join(['%s'] * len(_REPLICA_COLUMNS))}) "
                "ON CONFLICT (session, stream) DO UPDATE SET agent = excluded.agent, "
                "path = excluded.path, project_key = excluded.project_key, "
                "root = excluded.root, lines = excluded.lines, updated = excluded.updated",
                (session, stream, host, _text(source.agent), _text(source.path),
                 _text(source.project_key), _text(source.root), contiguous, utc_now()))
            return added

    def replica_source(self, session: str, stream: str) -> ReplicaSource | None:
        rows = self._query(f"SELECT {', '.join(_REPLICA_COLUMNS)} FROM replica_sources "
                           "WHERE session = %s AND stream = %s", (_text(session), _text(stream)))
        return ReplicaSource(*rows[0]) if rows else None

    def replica_sources(self, session: str) -> list[ReplicaSource]:
        rows = self._query(f"SELECT {', '.join(_REPLICA_COLUMNS)} FROM replica_sources "
                           "WHERE session = %s ORDER BY stream", (_text(session),))
        return [ReplicaSource(*row) for row in rows]

    def replica_lines(self, session: str, stream: str, after: int = 0,
                      limit: int | None = None) -> list[tuple[int, bytes]]:
        query = ("SELECT seq, line FROM replica_lines WHERE session = %s AND stream = %s "
                 "AND seq > %s ORDER BY seq")
        params: list[object] = [_text(session), _text(stream), after]
        if limit is not None and limit >= 0:
            query += " LIMIT %s"
            params.append(limit)
        return [(int(seq), bytes(line)) for seq, line in self._query(query, params)]

    def remove_replica(self, session: str, stream: str) -> int:
        key = (_text(session), _text(stream))
        with self._transaction() as conn:
            removed = conn.execute("DELETE FROM replica_lines WHERE session = %s AND "
                                   "stream = %s", key).rowcount
            conn.execute("DELETE FROM replica_sources WHERE session = %s AND stream = %s", key)
        return max(removed, 0)

    # HostStore (storage/hosts.py)

    def move_session(self, session: str, from_host: str, to_host: str) -> bool:
        key = _text(session)
        with self._transaction() as conn:
            # The row lock makes it a compare-and-set: a second mover waits, then finds the
            # row no longer `from_host`'s.
            row = conn.execute("UPDATE session_index SET host = %s WHERE id = %s AND host = %s "
                               "RETURNING native_id", (_text(to_host), key, _text(from_host))
                               ).fetchone()
            if row is None:
                return False
            names = [key] + ([row[0]] if row[0] and row[0] != key else [])
            for name in names:  # the replication lock of add_replica_lines, per session
                conn.execute(f"SELECT pg_advisory_xact_lock({_REPLICA_LOCK_CLASS}, "
                             "hashtext(%s))", (name,))
            conn.execute("UPDATE replica_sources SET host = %s WHERE host = %s AND "
                         "session = ANY(%s)", (_text(to_host), _text(from_host), names))
            return True

    def set_project_host(self, project_key: str, host: str, root: str) -> None:
        with self._transaction() as conn:
            conn.execute("INSERT INTO project_hosts (project_key, host, root, updated) "
                         "VALUES (%s, %s, %s, %s) ON CONFLICT (project_key, host) DO UPDATE "
                         "SET root = excluded.root, updated = excluded.updated",
                         (_text(project_key), _text(host), _text(root), utc_now()))

    def project_hosts(self, project_key: str) -> dict[str, str]:
        rows = self._query("SELECT host, root FROM project_hosts WHERE project_key = %s "
                           "ORDER BY host", (_text(project_key),))
        return {host: root for host, root in rows}

    # JobStore (storage/jobs.py)

    def publish_jobs(self, host: str, rows: Sequence[Mapping[str, object]]) -> None:
        jobs = published_jobs(rows)
        with self._transaction() as conn:
            conn.execute("DELETE FROM host_jobs WHERE host = %s", (_text(host),))
            for job_id, job in jobs:
                conn.execute("INSERT INTO host_jobs (host, id, job) VALUES (%s, %s, %s) "
                             "ON CONFLICT (host, id) DO UPDATE SET job = excluded.job",
                             (_text(host), _text(job_id), _text(job)))

    def host_jobs(self, host: str | None = None) -> list[tuple[str, dict[str, object]]]:
        query = "SELECT host, job FROM host_jobs"
        params: tuple[object, ...] = ()
        if host is not None:
            query += " WHERE host = %s"
            params = (_text(host),)
        return [(h, json.loads(job)) for h, job in self._query(query + " ORDER BY host, id",
                                                                 params)]


_TASK_COLUMNS = "n, title, body, status, owner, created, updated, created_by, attributed_by"


def _put_doc(conn: _Connection, doc: SearchDoc, source: str | None = None) -> bool:
    """Insert or replace the document (kind, ref); True when it is new."""
    row = conn.execute(
        "INSERT INTO search_docs (kind, ref, session, ts, text, source) "
        "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (kind, ref) DO UPDATE SET "
        "session = excluded.session, ts = excluded.ts, text = excluded.text, "
        "source = excluded.source RETURNING (xmax = 0)",
        (doc.kind, _text(doc.ref), _text(doc.session), doc.ts, _text(doc.text),
         _text(source))).fetchone()
    return bool(row and row[0])


def redact(url: str) -> str:
    """The URL as it may be shown: `postgresql://user@host:port/dbname`, never the password."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error:
        scheme, sep, rest = url.partition("://")
        if not sep:
            return "postgresql (unreadable connection string)"
        netloc, slash, path = rest.split("?", 1)[0].partition("/")
        userinfo, at, hostport = netloc.rpartition("@")
        return f"{scheme}://{userinfo.split(':', 1)[0]}{at}{hostport}{slash}{path}"
    user = params.get("user")
    port = params.get("port")
    return (f"postgresql://{f'{user}@' if user else ''}{params.get('host') or ''}"
            f"{f':{port}' if port else ''}/{params.get('dbname') or ''}")


def search_path_schema(options: str) -> str | None:
    """The first schema of a `search_path` set in libpq `options` (`-csearch_path=a,b`), if any."""
    tokens: list[str] = []
    current: list[str] = []
    escaped = False
    for char in options:  # whitespace separates arguments unless escaped with a backslash
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char.isspace():
            if current:
                tokens.append("".join(current))
                current = []
        else:
            current.append(char)
    if current:
        tokens.append("".join(current))
    value: str | None = None
    for index, token in enumerate(tokens):
        if token == "-c":
            setting = tokens[index + 1] if index + 1 < len(tokens) else ""
        elif token.startswith("-c"):
            setting = token[2:]
        elif token.startswith("--"):
            setting = token[2:]
        else:
            continue
        key, sep, rest = setting.partition("=")
        if sep and key.strip().replace("-", "_").lower() == "search_path":
            value = rest  # the last setting wins, as in the server
    if value is None:
        return None
    value = value.strip()
    if value.startswith('"'):
        name, index = [], 1
        while index < len(value):
            if value[index] == '"':
                if value[index + 1:index + 2] != '"':
                    break
                index += 1
            name.append(value[index])
            index += 1
        schema = "".join(name)
    else:
        schema = value.split(",", 1)[0].strip().translate(_ASCII_LOWER)
    return schema if schema and schema != "$user" else None


def _index_row(row: Sequence[Any]) -> IndexRow:
    return IndexRow(**dict(zip(INDEX_COLUMNS, row)))


def _one_line(exc: BaseException) -> str:
    """psycopg's message on one line (libpq adds hints and caret lines on lines of their own)."""
    lines = [line.strip() for line in str(exc).splitlines()]
    return "; ".join(line for line in lines if line.strip("^ ")) or type(exc).__name__


def _text(value: str | None) -> str | None:
    """A string PostgreSQL accepts: lone surrogates (storable_text) and NUL, which TEXT cannot
    hold, become U+FFFD."""
    value = storable_text(value)
    return None if value is None else value.replace("\x00", "\ufffd")
