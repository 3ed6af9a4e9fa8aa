"""One session of the index found by what a user types (DESIGN.md §4.2, §4.3): its id or native
id checked, then looked up as `cos resume ID` looks it up (an import of what changed on a miss,
then the cos transcripts read directly); and what is done to one found: shown (where it was
forked from), named, removed (its transcript to the trash, sessions/retention.py).
"""

from __future__ import annotations

from coding_os.errors import InvalidId, InvalidInput, NotFound

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from coding_os.sessions.index import RefreshReport
    from coding_os.sessions.resume import Found
    from coding_os.state.tiers import Tiers
    from coding_os.storage.base import IndexRow, Storage

    Refresh = Callable[[], RefreshReport | None]

__all__ = ["validate_lookup", "check_name", "find", "session_id", "show", "shown", "fork_of", "rename",
           "remove", "link_fork"]

_AGENT_NAMES = {"claude": "Claude Code", "codex": "Codex"}


def validate_lookup(key: str) -> str:
    """A session id or native id as typed: one line, no path parts.

    Raises:
        InvalidId: it is empty, has whitespace or control characters, `/`, `\\` or `..`.
    """
    if (not key or len(key) > 200 or ".." in key or "/" in key or "\\" in key
            or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in key)):
        raise InvalidId(f"not a session id: {key!r}")
    return key


def check_name(name: str) -> str:
    """`name` when it can name a session (one line, at most 200 characters, never a session
    id; `/` may be inside it, but no `\\`, no leading `/` and no `..` segment).

    Raises:
        InvalidInput: it cannot.
    """
    from coding_os.sessions.transcript import validate_title

    try:
        return validate_title(name)
    except InvalidInput as exc:  # the rules are those of titles; the message speaks of names
        raise InvalidInput(str(exc).replace("title", "name", 1)) from None


def find(storage: Storage, key: str, refresh: Refresh) -> IndexRow:
    """The indexed session `key` names (its id or native id, the id as a table shows it, a
    start of either: sessions/resume.py `by_short_id`); a miss imports what changed
    (`refresh`) and looks again.

    Raises:
        NotFound: no session has this id or native id.
        Ambiguous: `key` is a short id several sessions match.
    """
    from coding_os.sessions.resume import by_short_id

    row = storage.index_row(key)
    if row is None:
        refresh()
        row = storage.index_row(key) or by_short_id(storage, key)
    if row is None:
        raise NotFound(f"no session {key}")
    return row


def session_id(key: str, find_id: Callable[[str], str]) -> str:
    """The cos id of the session `key` names: `key` itself when it is a cos id (a session the
    index may not list, as one /clear ended), else what `find_id` (`find` in the index) says.

    Raises:
        InvalidId: `key` is malformed.
        NotFound, Ambiguous: as `find`.
    """
    from coding_os.state.identity import is_session_id

    validate_lookup(key)
    return key if is_session_id(key) else find_id(key)


def show(storage: Storage, tiers: Tiers, key: str, refresh: Refresh
         ) -> tuple[Found, dict[str, object]]:
    """The session `key` names, found as `cos resume ID` finds it (sessions/resume.py
    `find_by_id`), and where it was forked from (`fork_of`).

    Raises:
        NotFound: no such session, even after importing what changed and reading the
            transcripts.
    """
    from coding_os.sessions.resume import find_by_id

    found = find_by_id(storage, tiers, key, refresh)
    if found is None:
        raise NotFound(f"no session {key}")
    return found, fork_of(storage, found.row)


def shown(found: tuple[Found, dict[str, object]], repairs: list[str]) -> dict[str, object]:
    """What `cos sessions show` prints of a session `show` found: its row, where it was forked
    from, `path` (how it was found) and `repaired` (the database's `repairs`, then what the
    lookup added to the index)."""
    from dataclasses import asdict

    session, fork = found
    return {**asdict(session.row), **fork, "path": session.path,
            "repaired": [*repairs, *session.rebuilt]}


def fork_of(storage: Storage, row: IndexRow) -> dict[str, object]:
    """Where the session was forked from, as the hooks or a rewind filed it: the cos session
    (`forked_from`) and the point (`fork_point`: the checkpoint and the agent's own point)."""
    from coding_os import jsonwire

    record = storage.session(row.id)
    if record is None and row.native_id:
        record = storage.session_by_native(row.agent, row.native_id)
    if record is None or record.fork_point is None:
        return {"fork_point": None}
    try:
        point = jsonwire.loads(record.fork_point)
    except ValueError:
        point = None
    return {"fork_point": point, "forked_from": record.forked_from or row.forked_from}


def rename(storage: Storage, key: str, name: str, refresh: Refresh) -> dict[str, object]:
    """Give the session `key` names the name `name` (checked by `check_name`); its row.

    Raises:
        NotFound: no such session.
    """
    from dataclasses import asdict

    row = find(storage, key, refresh)
    storage.set_name(row.id, name)
    row.name = name
    return asdict(row)


def remove(storage: Storage, tiers: Tiers, key: str, refresh: Refresh) -> dict[str, object]:
    """Remove the cos-native session `key` names: its transcript goes to the trash
    (`retention.trash_session`: deleted with its trash day), its row leaves the index. Native
    logs (Claude Code, Codex) belong to their tool and are never deleted by cos.

    Raises:
        InvalidInput: the session is not cos-native.
        NotFound: no such session.
        StateIOError: the transcript cannot be moved.
    """
    from coding_os.sessions.retention import trash_session

    row = find(storage, key, refresh)
    if row.kind != "cos":
        tool = _AGENT_NAMES.get(row.kind, row.kind)
        raise InvalidInput(f"{row.id} is a {tool} session: its log belongs to {tool} and "
                           "cos never deletes it")
    trashed = trash_session(tiers, row.id)
    storage.remove_index_row(row.id)
    return {"id": row.id, "removed": True, "trash": trashed}


def link_fork(storage: Storage, native_id: str, forked_from: str, refresh: Refresh) -> bool:
    """File the session `native_id` (a log written since the last import: `refresh` imports
    it) in the index as forked from `forked_from`; whether it was found to file.

    Raises:
        StorageError, StateIOError: as `refresh` and the storage.
    """
    refresh()
    new = storage.index_row(native_id)
    if new is None:
        return False
    new.forked_from = forked_from
    storage.upsert_index_rows([new])
    return True
