"""The session index (DESIGN.md §4.2): one listed row per session of any agent, with the names
users set, and the host each row is of.

Conformance: tests/storage/test_index.py.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["INDEX_COLUMNS", "IndexRow", "IndexStore", "index_query", "like_pattern"]


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


INDEX_COLUMNS = ("id", "native_id", "agent", "kind", "title", "name", "project", "worktree",
                 "cwd", "branch", "created", "last_active", "messages", "tokens", "forked_from",
                 "parent", "status", "source_path", "first_prompt", "last_prompt", "host")


def like_pattern(text: str) -> str:
    """`%text%` for a LIKE with ESCAPE '\\': the wildcards in `text` match themselves."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def index_query(columns: Sequence[str], *, placeholder: str,
                text: Callable[[str], str | None], agent: str | None = None,
                search: str | None = None, cwd_under: Sequence[str] | None = None,
                kind: str | None = None, limit: int | None = None,
                branch: str | None = None, hosts: Sequence[str] | None = None,
                local_host: str | None = None) -> tuple[str, list[object]] | None:
    """The listing query of `IndexStore.index_rows` for a dialect (its `placeholder`, and `text`
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


class IndexStore(abc.ABC):
    """The session index: a cache of every agent's sessions, rebuilt from their logs, keyed by
    id; the names users set are kept apart and survive a rebuild."""

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

        Raises:
            StorageError: the database cannot be written; no row of the batch is stored.
        """

    @abc.abstractmethod
    def index_hosts(self, ids: Sequence[str]) -> dict[str, str | None]:
        """The host of each stored index row among `ids` (None for a row without a host).

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def rehost_index(self, host: str) -> int:
        """Give `host` every index row of another host name, in one transaction; return how many
        rows changed. For a database of one host (SQLite), whose other names are this host's
        earlier ones (COS_HOST set or changed, a new hostname); never on a shared database.

        Raises:
            StorageError: the database cannot be written.
        """

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
        """The row whose id or native id is `id_or_native` (the most recent), or None.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def remove_index_row(self, session_id: str) -> bool:
        """Forget one row (and its name); True when there was one.

        Raises:
            StorageError: the database cannot be written.
        """

    @abc.abstractmethod
    def clear_index(self, host: str | None = None, *, keep_unowned: bool = False) -> None:
        """Empty the index (user-set names are kept, for the rows a rebuild brings back); with
        `host`, only that host's rows and those without a host, or only that host's rows when
        `keep_unowned` (on a shared database a row without a host may be another host's).

        Raises:
            StorageError: the database cannot be written.
        """

    @abc.abstractmethod
    def index_count(self) -> int:
        """How many rows the index holds.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def set_name(self, session_id: str, name: str | None) -> bool:
        """Set (or with None clear) the user-set name of an indexed session; True when found.

        Raises:
            StorageError: the database cannot be written.
        """
