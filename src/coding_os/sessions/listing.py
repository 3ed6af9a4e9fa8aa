"""The lists of sessions a caller asks for (DESIGN.md §4.2): `cos sessions` (a scope of the
caller's checkout, its repository or everywhere, over this host's sessions, another's, or every
host's) and the page the resume picker shows.
"""

from __future__ import annotations

from coding_os.errors import InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from coding_os.state.root import Resolution
    from coding_os.storage.base import IndexRow, Storage

__all__ = ["SESSION_SCOPES", "SESSION_FIELDS", "PICKER_FIELDS", "check_query", "scope_dirs",
           "branch_here", "row_dict", "list_rows", "resumable_rows"]

SESSION_SCOPES = ("worktree", "repo", "all")
# The fields of a listed session, in the order they are printed.
SESSION_FIELDS = ("id", "native_id", "agent", "kind", "title", "name", "project", "worktree",
                  "cwd", "branch", "created", "last_active", "messages", "tokens", "forked_from",
                  "parent", "status", "host")
# The fields of a session the picker lists and previews: a listed session's and its prompts.
PICKER_FIELDS = SESSION_FIELDS + ("first_prompt", "last_prompt")


def check_query(scope: str, limit: int | None, host: str | None = None,
                all_hosts: bool = False) -> None:
    """Refuse a listing's bad input before anything is read.

    Raises:
        InvalidInput: an unknown scope, a negative limit, `host` with `all_hosts`, `host` not
            a host name.
    """
    if scope not in SESSION_SCOPES:
        raise InvalidInput(f"scope must be one of {', '.join(SESSION_SCOPES)}, not {scope!r}")
    if limit is not None and limit < 0:
        raise InvalidInput("the limit must be zero or more")
    if host is not None and all_hosts:
        raise InvalidInput("give --host or --all-hosts, not both")
    if host is not None:
        from coding_os.hosts.identity import valid_host

        valid_host(host)


def scope_dirs(resolution: Resolution, checkout: str, scope: str) -> list[str] | None:
    """The directories a session's cwd must be in for `scope`, from the caller's `checkout`
    (None: everywhere): the checkout itself, or its repository's main checkout, project root
    and linked worktrees."""
    from coding_os.state.root import linked_worktree_main

    if scope == "all":
        return None
    if scope == "worktree":
        return [checkout]
    linked = linked_worktree_main(checkout, {})
    main = linked[1] if linked else checkout
    from coding_os.git.repo import linked_worktrees

    return sorted({main, resolution.project_root, *linked_worktrees(main)})


def branch_here(checkout: str) -> str:
    """The branch checked out in `checkout` (`cos sessions --branch`).

    Raises:
        InvalidInput: it is on no branch.
    """
    from coding_os.git.repo import branch

    found = branch(checkout)
    if found is None:
        raise InvalidInput("--branch: this checkout is not on a branch")
    return found


def row_dict(row: IndexRow, fields: tuple[str, ...] = SESSION_FIELDS) -> dict[str, object]:
    """The `fields` of an index row."""
    return {name: getattr(row, name) for name in fields}


def list_rows(storage: Storage, root: str, dirs: list[str] | None, here: str, *,
              host: str | None = None, all_hosts: bool = False, agent: str | None = None,
              search: str | None = None, limit: int | None = None, branch: str | None = None,
              refresh: Callable[[], object] | None = None) -> list[dict[str, object]]:
    """`cos sessions`: the sessions whose cwd is under `dirs` of the checkout at `root` (None:
    anywhere), most recently active first, after `refresh` (an import of what changed) when
    given. Hosts (DESIGN.md §8; `here` this host): this host's sessions (a row indexed before
    hosts were recorded is this host's; on a database of this machine alone, SQLite, every row
    is), or `host`'s, or every host's (`all_hosts`); each row says its `host`.

    Raises:
        StorageError: the storage cannot be read.
    """
    from coding_os.hosts.remote import scope_rows

    if refresh is not None:
        refresh()
    # A database of this machine alone (SQLite) holds this host's sessions only, under
    # whatever name the host had when it wrote them: no filter unless one is asked for.
    wanted = (None if all_hosts or (host is None and not storage.shared)
              else [host or here])
    rows = scope_rows(storage, root, dirs, here, wanted, agent=agent, search=search,
                      limit=limit, branch=branch)
    return [{**row_dict(row), "host": row.host or here} for row in rows]


def resumable_rows(storage: Storage, dirs: list[str] | None, mine: set[str], *,
                   search: str | None = None, branch: str | None = None,
                   limit: int = 50) -> list[dict[str, object]]:
    """One page of the sessions `cos resume` may pick under `dirs`, most recently active first,
    from the index as it stands; rows have the PICKER_FIELDS. The caller's own sessions (`mine`)
    and sidechains are left out; `branch` keeps that branch's sessions. The cost follows the
    page (ORDER BY last_active LIMIT).

    Raises:
        StorageError: the storage cannot be read.
    """
    def keep(row: IndexRow) -> bool:
        return (row.parent is None and row.id not in mine and (row.native_id or "") not in mine
                and (branch is None or row.branch == branch))

    # Rows left out make a page short: ask for more until it is full or the index ends.
    fetch = limit + len(mine)
    while True:
        rows = storage.index_rows(search=search or None, cwd_under=dirs, limit=fetch)
        kept = [row_dict(row, PICKER_FIELDS) for row in rows if keep(row)]
        if len(kept) >= limit or len(rows) < fetch:
            return kept[:limit]
        fetch *= 4
