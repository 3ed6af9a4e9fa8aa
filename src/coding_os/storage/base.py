"""The storage interface every backend implements (SQLite, PostgreSQL).

Backends are interchangeable: one conformance suite (tests/storage/test_conformance.py) runs the
same behaviour against each. Rows are plain dataclasses; timestamps are ISO-8601 UTC strings.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Self

__all__ = [
    "Storage", "SessionRecord", "Observation", "SessionSummary", "StorageError", "storable_text",
    "check_schema_version", "IndexRow", "INDEX_COLUMNS", "like_pattern", "index_query",
    "Task", "TaskMove", "WorkLogEntry", "SearchDoc", "SearchHit", "SourceMark", "TASK_STATUSES",
    "SEARCH_KINDS", "task_text", "ReplicaSource", "REPLICA_STREAMS", "valid_replica_lines",
    "published_jobs",
]

from coding_os.errors import StateIOError


class StorageError(StateIOError):
    """The database could not be opened, migrated, read or written."""


def storable_text(value: str | None) -> str | None:
    """`value` with lone surrogates (which UTF-8 cannot encode; JSON's "\\ud800" makes them)
    replaced by U+FFFD, so one odd character never makes a batch fail again and again."""
    if value is None:
        return None
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in value)


def index_query(columns: Sequence[str], *, placeholder: str,
                text: Callable[[str], str | None], agent: str | None = None,
                search: str | None = None, cwd_under: Sequence[str] | None = None,
                kind: str | None = None, limit: int | None = None,
                branch: str | None = None, hosts: Sequence[str] | None = None,
                local_host: str | None = None) -> tuple[str, list[object]] | None:
    """The listing query of `Storage.index_rows` for a dialect (its `placeholder`, and `text`
    making a string storable there); None when `cwd_under` or `hosts` is empty (nothing can
    match)."""
    where: list[str] = []
    params: list[object] = []
    if hosts is not None:
        if not hosts:
            return None
        # A row without a host (indexed before hosts were recorded) is the local host's.
        own = local_host is None or local_host in hosts
        where.append("(host IN (" + ", ".join([placeholder] * len(hosts)) + ")"
                     + (" OR host IS NULL)" if own else ")"))
        params.extend(text(h) for h in hosts)
    for column, value in (("agent", agent), ("kind", kind), ("branch", branch)):
        if value:
            where.append(f"{column} = {placeholder}")
            params.append(text(value))
    if search:
        pattern = text(like_pattern(search.lower()))
        where.append("(" + " OR ".join(
            f"lower(coalesce({c}, '')) LIKE {placeholder} ESCAPE '\\'"
            for c in ("id", "native_id", "title", "name", "project", "cwd")) + ")")
        params.extend([pattern] * 6)
    if cwd_under is not None:
        dirs = [d.rstrip("/") or "/" for d in cwd_under]
        if not dirs:
            return None
        clauses = []
        for directory in dirs:
            inside = directory if directory.endswith("/") else directory + "/"
            clauses.append(f"(cwd = {placeholder} OR substr(cwd, 1, {placeholder}) = "
                           f"{placeholder})")
            params.extend([text(directory), len(inside), text(inside)])
        where.append("(" + " OR ".join(clauses) + ")")
    query = f"SELECT {', '.join(columns)} FROM session_index"
    if where:
        query += " WHERE " + " AND ".join(where)
    query += " ORDER BY last_active DESC, id DESC"
    if limit is not None and limit >= 0:
        query += f" LIMIT {placeholder}"
        params.append(limit)
    return query, params


def check_schema_version(version: int, known: int, where: str) -> None:
    """Refuse a database migrated by a newer coding-os than this one.

    Raises:
        StorageError: `version` is above `known`.
    """
    if version > known:
        raise StorageError(f"database {where} is at schema version {version}, newer than this "
                           f"coding-os knows ({known}); upgrade coding-os")


@dataclass
class SessionRecord:
    """A session as the hooks saw it: who, where, and how it relates to others."""

    id: str
    agent: str
    panel: str
    native_id: str | None = None
    project: str | None = None
    cwd: str | None = None
    source: str | None = None  # the SessionStart source that minted it, "adopt", or "engine"
    forked_from: str | None = None
    cleared_from: str | None = None
    started: str = ""
    last_active: str = ""
    status: str = "active"  # active | ended | orphaned | reaped
    # Where a fork began, as JSON (a rewind's: the checkpoint and the agent's point in its log).
    fork_point: str | None = None
    # The host the session ran on (state.hosts.this_host); None in rows from before schema
    # version 6, read as the local host.
    host: str | None = None


@dataclass
class Observation:
    """One thing a hook observed, tagged with its session."""

    oid: str  # unique per observation: re-ingesting the spool never duplicates
    session: str
    agent: str
    panel: str
    ts: str
    event: str
    tool: str | None = None
    text: str | None = None
    data: dict[str, object] = field(default_factory=dict)


@dataclass
class SessionSummary:
    """What a session did, written when it ends or when it is found orphaned."""

    session: str
    agent: str
    panel: str
    reason: str  # "end:<SessionEnd reason>", "orphan", "reaped"
    native_id: str | None = None
    started: str | None = None
    ended: str | None = None
    prompts: int = 0
    tool_calls: int = 0
    errors: int = 0
    files: list[str] = field(default_factory=list)
    last_prompt: str | None = None
    created: str = ""


@dataclass
class IndexRow:
    """One listed session of the index: cos-native, Claude Code or Codex (DESIGN.md §4.2).

    `id` is the cos session id when there is one (a cos-native session, or a native one the hooks
    linked to a cos id), else the native id. `name` is set by the user only (`set_name`) and
    survives `clear_index`; an upsert never changes it.
    """

    id: str
    agent: str
    kind: str  # cos | claude | codex
    native_id: str | None = None
    title: str | None = None
    name: str | None = None
    project: str | None = None
    worktree: str | None = None
    cwd: str | None = None
    branch: str | None = None
    created: str | None = None
    last_active: str = ""
    messages: int = 0
    tokens: int = 0
    forked_from: str | None = None
    parent: str | None = None
    status: str | None = None
    source_path: str | None = None
    # Previews of the first and last user prompt (PROMPT_PREVIEW_CHARS); None in rows indexed
    # before schema version 3 until the next import or rebuild reads the session again.
    first_prompt: str | None = None
    last_prompt: str | None = None
    # The host whose importer wrote the row (state.hosts.this_host); None in rows indexed
    # before schema version 6, read as the local host.
    host: str | None = None


# Replicated transcript lines (DESIGN.md §8): the streams a session's files are stored as.
REPLICA_STREAMS = ("transcript", "events", "native")


@dataclass
class ReplicaSource:
    """One replicated file of a session: its stream, where it lives, how much is stored.

    `(session, stream)` is owned by one host: lines of the same session id from another host are
    refused, never mixed.
    """

    session: str  # the index id (cos id, or the native id of a Claude/Codex session)
    stream: str  # one of REPLICA_STREAMS
    host: str
    agent: str  # the session's agent: a cos agent name, "claude", "codex"
    path: str  # the file on its host
    project_key: str | None  # state.hosts.project_key of the project
    root: str | None  # the project root on that host
    lines: int = 0  # the highest seq stored with every seq below it (lines replicated so far)
    updated: str = ""


def valid_replica_lines(lines: Sequence[tuple[int, bytes]]) -> None:
    """Check lines given to `Storage.add_replica_lines`: seq from 1, bytes without a newline.

    Raises:
        StorageError: a seq below 1, or a line that is not bytes or holds a newline.
    """
    for seq, line in lines:
        if not isinstance(seq, int) or seq < 1:
            raise StorageError(f"replicated line number {seq!r}: lines are numbered from 1")
        if not isinstance(line, bytes) or b"\n" in line:
            raise StorageError(f"replicated line {seq}: must be bytes without a newline")


def published_jobs(rows: Sequence[Mapping[str, object]]) -> list[tuple[str, str]]:
    """`(id, JSON text)` of each job row given to `Storage.publish_jobs`, in order.

    Raises:
        StorageError: a row without a string "id", or one that is not JSON.
    """
    import json

    out: list[tuple[str, str]] = []
    for row in rows:
        job_id = row.get("id")
        if not isinstance(job_id, str) or not job_id:
            raise StorageError("a published job row needs a string \"id\"")
        try:
            out.append((job_id, json.dumps(dict(row), ensure_ascii=False, sort_keys=True)))
        except (TypeError, ValueError) as exc:
            raise StorageError(f"job {job_id}: cannot be stored as JSON ({exc})") from None
    return out


# The brain (DESIGN.md §8): tasks, their moves, the work log, and the search documents.
TASK_STATUSES = ("todo", "doing", "blocked", "done")
SEARCH_KINDS = ("observation", "work_log", "task", "transcript")


@dataclass
class Task:
    """A task of the project's shared board; its id is `TASK-<n>`."""

    n: int
    title: str
    body: str
    status: str
    owner: str | None
    created: str
    updated: str
    created_by: str | None = None
    attributed_by: str | None = None  # how the creating session was known (see brain.attribution)

    @property
    def id(self) -> str:
        return f"TASK-{self.n}"


def task_text(title: str, body: str) -> str:
    """What the search finds a task by: its title, then its body."""
    return f"{title}\n{body}" if body else title


@dataclass
class TaskMove:
    """One change of a task's status (its creation is the first, from None)."""

    seq: int
    task: int
    from_status: str | None
    to_status: str
    owner: str | None
    session: str | None
    attributed_by: str | None
    ts: str
    note: str | None = None


@dataclass
class WorkLogEntry:
    """One line of the work log: what a session did, optionally for a task."""

    seq: int
    session: str | None
    attributed_by: str | None
    task: int | None
    text: str
    ts: str


@dataclass
class SearchDoc:
    """A text the full-text search finds: `kind` and `ref` name it uniquely."""

    kind: str  # one of SEARCH_KINDS
    ref: str
    session: str | None
    ts: str
    text: str


@dataclass
class SearchHit:
    """One search result; `id` orders results (newest first) and pages them."""

    id: int
    kind: str
    ref: str
    session: str | None
    ts: str
    text: str


@dataclass
class SourceMark:
    """How far a transcript file has been read into the search documents."""

    source: str
    inode: int
    read_to: int
    tail: str


INDEX_COLUMNS = ("id", "native_id", "agent", "kind", "title", "name", "project", "worktree",
                 "cwd", "branch", "created", "last_active", "messages", "tokens", "forked_from",
                 "parent", "status", "source_path", "first_prompt", "last_prompt", "host")


def like_pattern(text: str) -> str:
    """`%text%` for a LIKE with ESCAPE '\\': the wildcards in `text` match themselves."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class Storage(abc.ABC):
    """The shared database of one project: sessions, observations, summaries.

    Every method may raise StorageError when the database cannot be used. A context manager:
    `with open_storage(...) as storage:` closes it on the way out.
    """

    # Whether several hosts can share this database (PostgreSQL), or it is one host's (SQLite).
    shared: bool = False
    # Which database this is (its path, or its URL without the password): what a host keeps
    # about one database (e.g. the replication marks) is not taken for another.
    location: str = ""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abc.abstractmethod
    def migrate(self) -> int:
        """Apply pending migrations, each in its own transaction; return the schema version.

        Raises:
            StorageError: a migration failed; the schema stays at the last applied version.
        """

    @abc.abstractmethod
    def schema_version(self) -> int:
        """The number of migrations applied."""

    @abc.abstractmethod
    def upsert_session(self, record: SessionRecord) -> None:
        """Insert the session, or update every field of an existing one."""

    @abc.abstractmethod
    def touch_session(self, session_id: str, last_active: str, status: str | None = None) -> None:
        """Move a session's last activity forward (never back) and optionally its status."""

    @abc.abstractmethod
    def session(self, session_id: str) -> SessionRecord | None:
        """The session with this id, or None."""

    @abc.abstractmethod
    def session_by_native(self, agent: str, native_id: str) -> SessionRecord | None:
        """The most recent session of `agent` linked to the native id, or None."""

    @abc.abstractmethod
    def sessions(self, agent: str | None = None) -> list[SessionRecord]:
        """Sessions, most recently active first."""

    @abc.abstractmethod
    def add_observations(self, rows: Sequence[Observation]) -> int:
        """Insert observations not yet stored (by oid); return how many rows were new."""

    @abc.abstractmethod
    def observations(self, session: str | None = None, limit: int | None = None) -> list[Observation]:
        """Observations in the order they happened, optionally of one session."""

    @abc.abstractmethod
    def summary(self, session_id: str) -> SessionSummary | None:
        """The summary of a session, or None when it has none."""

    @abc.abstractmethod
    def write_summary(self, summary: SessionSummary) -> bool:
        """Store the summary unless the session already has one; True when it was stored."""

    # the session index (DESIGN.md §4.2)

    @abc.abstractmethod
    def upsert_index_rows(self, rows: Sequence[IndexRow]) -> int:
        """Insert rows, or update every field but `name` of existing ones (by id), in one
        transaction; return how many were new.

        A row with a native id replaces a non-cos row of the same agent and native id filed
        under another id (a native session the hooks linked to a cos id after it was indexed),
        unless that row is another host's. A new row takes the name kept for its id, if any.

        Hosts: a row with a `host` never replaces a stored row of another host (the same id
        indexed on two hosts: the first stays; see `index_hosts` to tell which were kept). A row
        without a host updates whatever row has its id and keeps that row's host.
        """

    @abc.abstractmethod
    def index_hosts(self, ids: Sequence[str]) -> dict[str, str | None]:
        """The host of each stored index row among `ids` (None for a row without a host)."""

    @abc.abstractmethod
    def rehost_index(self, host: str) -> int:
        """Give `host` every index row of another host name, in one transaction; return how many
        rows changed. For a database of one host (SQLite), whose other names are this host's
        earlier ones (COS_HOST set or changed, a new hostname); never on a shared database."""

    @abc.abstractmethod
    def index_rows(self, *, agent: str | None = None, search: str | None = None,
                   cwd_under: Sequence[str] | None = None, kind: str | None = None,
                   limit: int | None = None, branch: str | None = None,
                   hosts: Sequence[str] | None = None,
                   local_host: str | None = None) -> list[IndexRow]:
        """Indexed sessions, most recently active first (then by id, descending), at most `limit`.

        `search` matches id, native id, title, name, project or cwd, case-insensitively, as a
        substring; `cwd_under` keeps sessions whose cwd is one of the directories or inside one.
        `hosts` (None: every host) keeps rows whose host is one of them; a row without a host
        counts as `local_host`'s, and when `local_host` is not given it matches any list.
        The cost follows the page: ORDER BY last_active DESC LIMIT.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def index_row(self, id_or_native: str) -> IndexRow | None:
        """The row whose id or native id is `id_or_native` (the most recent), or None."""

    @abc.abstractmethod
    def remove_index_row(self, session_id: str) -> bool:
        """Forget one row (and its name); True when there was one."""

    @abc.abstractmethod
    def clear_index(self, host: str | None = None, *, keep_unowned: bool = False) -> None:
        """Empty the index (user-set names are kept, for the rows a rebuild brings back); with
        `host`, only that host's rows and those without a host, or only that host's rows when
        `keep_unowned` (on a shared database a row without a host may be another host's)."""

    @abc.abstractmethod
    def index_count(self) -> int:
        """How many rows the index holds."""

    @abc.abstractmethod
    def set_name(self, session_id: str, name: str | None) -> bool:
        """Set (or with None clear) the user-set name of an indexed session; True when found."""

    # the brain: tasks, work log, search

    @abc.abstractmethod
    def create_task(self, title: str, body: str, status: str, owner: str | None,
                    session: str | None, attributed_by: str | None, ts: str) -> Task:
        """Add a task (and its first move, from nothing to `status`) and its search document."""

    @abc.abstractmethod
    def task(self, n: int) -> Task | None:
        """The task TASK-`n`, or None."""

    @abc.abstractmethod
    def tasks(self, status: str | None = None, owner: str | None = None, after: int = 0,
              limit: int = 50) -> list[Task]:
        """Tasks by number, those numbered above `after`, at most `limit`."""

    @abc.abstractmethod
    def move_task(self, n: int, status: str, owner: str | None, session: str | None,
                  attributed_by: str | None, ts: str, note: str | None = None,
                  expect_status: str | None = None,
                  expect_owner: str | None = None) -> Task | None:
        """Set a task's status and owner and record the move, in one transaction; None when
        there is no such task. With `expect_status`, the move happens only while the task is
        in that status and owned by `expect_owner` (compare and set); else None is returned
        too, and the caller re-reads the task to tell why."""

    @abc.abstractmethod
    def task_moves(self, n: int) -> list[TaskMove]:
        """A task's moves, oldest first."""

    @abc.abstractmethod
    def append_work_log(self, session: str | None, attributed_by: str | None, task: int | None,
                        text: str, ts: str) -> WorkLogEntry:
        """Add a work-log line and its search document."""

    @abc.abstractmethod
    def work_log(self, session: str | None = None, task: int | None = None, before: int | None = None,
                 limit: int = 50) -> list[WorkLogEntry]:
        """Work-log lines, newest first, those numbered below `before`, at most `limit`."""

    @abc.abstractmethod
    def search(self, terms: Sequence[str], kinds: Sequence[str] | None = None,
               sessions: Sequence[str] | None = None, before: int | None = None,
               limit: int = 20) -> list[SearchHit]:
        """Documents holding every one of `terms` (whole words, any case), newest first, those
        with an id below `before`, of one of `sessions` when given, at most `limit`. The cost
        follows the page, not the table.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def source_marks(self) -> dict[str, SourceMark]:
        """How far each transcript file has been read into the search documents."""

    @abc.abstractmethod
    def add_source_docs(self, mark: SourceMark, docs: Sequence[SearchDoc],
                        restart: bool = False) -> int:
        """Add a transcript file's newly read documents and move its mark, in one transaction;
        with `restart`, first drop every document read from that file (it was rewritten).
        Returns how many documents were new."""

    @abc.abstractmethod
    def remove_source(self, source: str) -> int:
        """Forget a transcript file that is gone: its documents and its mark, in one
        transaction; return how many documents were removed."""

    # several hosts (DESIGN.md §8): replicated lines, project roots, published jobs

    @abc.abstractmethod
    def add_replica_lines(self, source: ReplicaSource, lines: Sequence[tuple[int, bytes]]) -> int:
        """Store the lines `(seq, bytes without the newline)` not stored yet and upsert the
        source (its `lines` becomes the highest seq stored with every seq below it; its other
        fields are taken from `source`), in one transaction; return how many lines were new.
        A line already stored under its seq is kept as it is.

        Raises:
            StorageError: the session already has lines of another host (the same session id
                from two hosts never mixes), a seq below 1 or a line holding a newline, or the
                database cannot be written.
        """

    @abc.abstractmethod
    def replica_source(self, session: str, stream: str) -> ReplicaSource | None:
        """The replicated file of `session` in `stream`, or None."""

    @abc.abstractmethod
    def replica_sources(self, session: str) -> list[ReplicaSource]:
        """Every replicated file of `session`, by stream name."""

    @abc.abstractmethod
    def replica_lines(self, session: str, stream: str, after: int = 0,
                      limit: int | None = None) -> list[tuple[int, bytes]]:
        """Stored lines of a replicated file numbered above `after`, by seq, at most `limit`."""

    @abc.abstractmethod
    def remove_replica(self, session: str, stream: str) -> int:
        """Forget a replicated file (its lines and its source row), in one transaction; return
        how many lines were removed."""

    @abc.abstractmethod
    def move_session(self, session: str, from_host: str, to_host: str) -> bool:
        """Give `to_host` the session `session` (an index id) while `from_host` owns it, in one
        transaction: its index row's host and the host of its replicated files (those filed
        under its id or its native id) become `to_host`, so that host's replication goes on
        from the lines stored. A compare-and-set on the owner: False, nothing changed, when the
        row is not `from_host`'s (gone, or another host took it first).

        Raises:
            StorageError: the database cannot be written.
        """

    @abc.abstractmethod
    def set_project_host(self, project_key: str, host: str, root: str) -> None:
        """Record where the project `project_key` is checked out on `host`."""

    @abc.abstractmethod
    def project_hosts(self, project_key: str) -> dict[str, str]:
        """The hosts the project is known on, each with its root there."""

    @abc.abstractmethod
    def publish_jobs(self, host: str, rows: Sequence[Mapping[str, object]]) -> None:
        """Replace `host`'s published job rows (each keyed by its "id"), in one transaction.

        Raises:
            StorageError: a row without a string "id", or one that is not JSON.
        """

    @abc.abstractmethod
    def host_jobs(self, host: str | None = None) -> list[tuple[str, dict[str, object]]]:
        """Published job rows `(host, row)`, of one host or of every host, by host then id."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection."""
