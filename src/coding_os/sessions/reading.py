"""What is read of one session found by a lookup (its index row): its log, exported as Markdown,
JSON or HTML, a page of its turns, its branches, its sidechains (DESIGN.md §4.5, §10). The log is
the row's file, or, for another host's session whose file is not here, its replica (`ReplicaLog`,
hosts/remote.py), read through `export.log_path`; what is shown is redacted as its project says.
"""

from __future__ import annotations

from coding_os.errors import InvalidInput, NotFound

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from coding_os.sessions.export import ReplicaLog

__all__ = ["TURNS_PAGE_MAX", "check_format", "check_page", "log_source", "export", "turns_page",
           "branches", "sidechains"]

TURNS_PAGE_MAX = 500


def check_format(fmt: str) -> None:
    """Refuse an export format other than export.FORMATS.

    Raises:
        InvalidInput: an unknown format.
    """
    from coding_os.sessions.export import FORMATS

    if fmt not in FORMATS:
        raise InvalidInput(f"unknown export format {fmt!r}: expected one of {', '.join(FORMATS)}")


def check_page(offset: object, limit: object) -> None:
    """Refuse a page other than an offset >= 0 and a size of 1 to TURNS_PAGE_MAX.

    Raises:
        InvalidInput: either is not such an integer.
    """
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInput("the offset must be an integer, 0 or more")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= TURNS_PAGE_MAX:
        raise InvalidInput(f"the page size must be 1 to {TURNS_PAGE_MAX}")


def log_source(row: Mapping[str, object], session: str, purpose: str) -> str:
    """The path of the log of the session of `row` (as its host wrote it).

    Raises:
        NotFound: the session has no log (to `purpose`).
    """
    source = row.get("source_path")
    if not isinstance(source, str) or not source:
        raise NotFound(f"session {session} has no log to {purpose}")
    return source


def export(row: Mapping[str, Any], source: str, replica: ReplicaLog | None, fmt: str,
           redacting: bool, branch: int | None = None,
           usage: Mapping[str, Any] | None = None) -> str:
    """The conversation of the session of `row` (its log `source`, or `replica`) rendered as
    `fmt`; a Claude Code session's live chain, or with `branch` the branch of that number.
    With `usage` (its token use per turn, `api.session_tokens`), the HTML page's header says
    the session's facts and token use (export.render).

    Raises:
        InvalidInput: a branch the session does not have.
        StateIOError: a replica's copy cannot be written.
    """
    from coding_os.sessions.export import log_path, read_turns, render

    with log_path(source, replica) as path:
        meta, turns = read_turns(path, str(row.get("kind")), redacting, branch)
    meta.update({key: row[key] for key in ("id", "native_id", "agent", "title", "name", "cwd")
                 if row.get(key) is not None})
    meta["title"] = row.get("name") or row.get("title") or row.get("id")
    header = None
    if usage is not None:
        from coding_os.sessions.usage import totals

        header = {key: row.get(key) for key in ("agent", "project", "branch", "created",
                                                "last_active")}
        header["tokens"] = totals(usage["turns"]) if usage["turns"] else None
    return render(meta, turns, fmt, header)


def turns_page(row: Mapping[str, Any], source: str, replica: ReplicaLog | None, session: str,
               offset: int, limit: int, redacting: bool, branch: int | None = None
               ) -> dict[str, Any]:
    """A page of the conversation of the session of `row` (export.read_page): `turns` from
    `offset`, at most `limit`, with `total`, `next_offset` (None at the end) and `meta`.

    Raises:
        InvalidInput: a bad branch.
        NotFound: an offset past the end.
    """
    from dataclasses import asdict

    from coding_os.sessions.export import log_path, read_page

    with log_path(source, replica) as path:
        page = read_page(path, str(row.get("kind")), offset, limit, redacting, branch)
    if offset and not page.turns:
        raise NotFound(f"session {session} has {page.total} turns: offset {offset} is past "
                       "the end")
    return {"session": row.get("id"), "kind": row.get("kind"), "meta": page.meta,
            "offset": offset, "total": page.total,
            "next_offset": offset + len(page.turns) if page.more else None,
            "turns": [asdict(turn) for turn in page.turns]}


def branches(row: Mapping[str, object], replica: Callable[[], ReplicaLog | None]
             ) -> dict[str, object]:
    """The live chain and the other branches of the session of `row`: `live_leaf`,
    `live_entries`, `branches` and `warnings` (export.branches); a session whose log is not a
    tree has none. `replica()`: another host's copy of its log, asked for only when it has
    one, None when its file is here.

    Raises:
        NotFound: the session's log is gone.
    """
    from coding_os.sessions.export import branches as tree_branches
    from coding_os.sessions.export import log_path

    source = row.get("source_path")
    kind = str(row.get("kind"))
    if not isinstance(source, str) or not source or kind not in ("claude", "codex"):
        return {"live_leaf": None, "live_entries": None, "branches": [], "warnings": []}
    with log_path(source, replica()) as path:
        return tree_branches(path, kind)


def sidechains(row: Mapping[str, Any], source: str, replica: ReplicaLog | None,
               state_dir: str, redacting: bool, branch: int | None = None) -> dict[str, Any]:
    """The subagent conversations of the session of `row`, each with the turn that started
    it (sessions/sidechains.py): a Claude Code session's sidechains, a cos session's (cos
    sessions whose `parent` it is, of the project of `state_dir`); oldest first.

    Raises:
        InvalidInput: a branch it does not have.
    """
    from coding_os.sessions.export import log_path
    from coding_os.sessions.sidechains import claude_sidechains, cos_sidechains

    kind = str(row.get("kind"))
    with log_path(source, replica) as path:
        if kind == "claude":
            found = claude_sidechains(path, branch, redacting)
        elif kind == "cos" and branch is None:
            found = cos_sidechains(state_dir, str(row["id"]), path, redacting)
        else:
            found = []
    return {"session": row["id"], "sidechains": found}
