"""The read models of several hosts (DESIGN.md §8): what this host reads of the sessions other
hosts wrote, from the shared storage, never from a file its row names.

- `replica_log`: another host's session log (or its engine events) as that host replicated it,
  read only, nothing written here and the session left to its host (unlike `restore_elsewhere`,
  which materialises it and takes it: `cos resume`);
- `scope_rows`: the index rows of a listing scope over every host wanted, each host's scope its
  own checkout of the repository (`dirs_elsewhere`, `in_dirs`);
- `restore_elsewhere`: the restore report of another host's session, materialised here.
"""

from __future__ import annotations

import os

from coding_os.errors import NotFound

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import TypeVar

    from coding_os.sessions.export import ReplicaLog
    from coding_os.sessions.resume import Found, RestoreReport, ResumeScope
    from coding_os.state.tiers import Tiers
    from coding_os.storage.base import IndexRow, Storage

    _T = TypeVar("_T")

__all__ = ["replica_log", "dirs_elsewhere", "in_dirs", "scope_rows", "restore_elsewhere"]


def replica_log(row: Mapping[str, object], here: Callable[[], str],
                index: Callable[[Callable[[Storage], tuple[bool, ReplicaLog | None]]],
                                tuple[bool, ReplicaLog | None]],
                subagents: bool = False, stream: str | None = None) -> ReplicaLog | None:
    """The log of another host's session (`row`, as a lookup gives it; `here()` this host's
    name, asked only for a row of some host) read from the shared storage `index` opens, its paths as its host wrote them; with
    `subagents`, a Claude Code session's subagent transcripts too. With `stream` ("events": a
    cos session's engine events log), that file instead, None when it is not replicated. None
    when the session is this host's, or the storage is this host's own (SQLite).

    Raises:
        NotFound: nothing of its log is replicated (the host has not synced it).
        StorageError: the storage cannot be used or went away mid-read.
        InvalidInput: as `here()` (COS_HOST is not a valid host name).
    """
    host, source = row.get("host"), row.get("source_path")
    # Another host's row is data (DESIGN.md §8): its log is read from what that host
    # replicated, never from a file of this host its `source_path` happens to name.
    if host is None or host == here() or not isinstance(source, str):
        return None
    from coding_os.hosts.materialize import read_replica
    from coding_os.hosts.replicate import SUBAGENT
    from coding_os.sessions.export import ReplicaLog

    kind = str(row.get("kind"))
    wanted = stream or ("transcript" if kind == "cos" else "native")  # the row's log

    def work(storage: Storage) -> tuple[bool, ReplicaLog | None]:
        if not storage.shared:
            return False, None
        for key in dict.fromkeys(str(k) for k in (row.get("id"), row.get("native_id")) if k):
            sources = storage.replica_sources(key)
            found = next((s for s in sources if s.stream == wanted and s.lines > 0), None)
            if found is None:
                continue
            log = ReplicaLog(os.path.basename(found.path), kind, read_replica(storage, found))
            if subagents and kind == "claude":
                log.subagents = {s.stream[len(SUBAGENT):]: read_replica(storage, s)
                                 for s in sources
                                 if s.stream.startswith(SUBAGENT) and s.lines > 0}
            return True, log
        return True, None

    shared, replica = index(work)
    if shared and replica is None and stream is None:
        raise NotFound(f"{row.get('id')} is a session of host {host} with nothing replicated "
                       f"and its file is not here: run `cos sync` on {host}")
    return replica


def dirs_elsewhere(storage: Storage, root: str, dirs: list[str] | None, here: str,
                   wanted: list[str] | None) -> dict[str, list[str]]:
    """The scope's directories (of this host's checkout at `root`) as each other host wanted
    has them in its checkout of this repository; empty when no other host is wanted or the
    scope is every project.

    Raises:
        StorageError: the storage cannot be read.
    """
    if dirs is None or wanted == [here]:
        return {}
    from coding_os.hosts.identity import host_roots
    from coding_os.hosts.materialize import map_path

    mapped: dict[str, list[str]] = {here: dirs}
    for other, where in host_roots(storage, root).items():
        if other != here and (wanted is None or other in wanted):
            mapped[other] = [str(map_path(d, root, where)) for d in dirs]
    return mapped


def in_dirs(row: IndexRow, dirs: list[str] | None) -> bool:
    """Whether the session of `row` ran in one of `dirs` (None: everywhere)."""
    if dirs is None:
        return True
    where = row.cwd or ""
    return any(where == d or where.startswith(d.rstrip("/") + "/") for d in dirs)


def scope_rows(storage: Storage, root: str, dirs: list[str] | None, here: str,
               wanted: list[str] | None, *, agent: str | None = None,
               search: str | None = None, limit: int | None = None,
               branch: str | None = None) -> list[IndexRow]:
    """The index rows of the sessions of hosts `wanted` (None: every host) that ran in the
    scope `dirs` of this host's checkout at `root` (None: anywhere), most recently active
    first: another host's session is in the scope when it ran in the same place of that
    host's checkout of this repository.

    Raises:
        StorageError: the storage cannot be read.
    """
    elsewhere = dirs_elsewhere(storage, root, dirs, here, wanted) if storage.shared else {}
    if not elsewhere:
        return storage.index_rows(agent=agent, search=search, cwd_under=dirs, limit=limit,
                                  branch=branch, hosts=wanted, local_host=here)
    # The directories differ by host: every host's own filter, then the page.
    under = sorted({*(dirs or []), *(d for ds in elsewhere.values() for d in ds)})
    rows = [row for row in storage.index_rows(
        agent=agent, search=search, cwd_under=under, branch=branch, hosts=wanted,
        local_host=here) if in_dirs(row, elsewhere.get(row.host or here, dirs))]
    return rows[:limit] if limit is not None else rows


def restore_elsewhere(storage: Storage, scope: ResumeScope, tiers: Tiers, found: Found, *,
                      host: str, root: str, claude_dir: str, codex_dir: str,
                      gemini_dir: str, write: bool = True) -> RestoreReport | None:
    """The restore report of `found` when it is another host's session (this host is `host`)
    in a shared storage, materialised in this host's checkout at `root` (`write` false: what
    would be written; see materialize.restore_report_elsewhere); None for this host's own.

    Raises:
        CrossProject, InvalidInput, NotFound, StorageError, Conflict, StateIOError: as
            materialize.restore_report_elsewhere.
    """
    if not storage.shared or found.row.host is None or found.row.host == host:
        return None
    from coding_os.hosts.identity import project_keys
    from coding_os.hosts.materialize import restore_report_elsewhere

    return restore_report_elsewhere(storage, found, scope, tiers, local_host=host,
                                    local_root=root, local_keys=lambda: project_keys(root),
                                    claude_dir=claude_dir, codex_dir=codex_dir,
                                    gemini_dir=gemini_dir, write=write)
