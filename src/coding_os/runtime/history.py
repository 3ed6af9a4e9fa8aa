"""What is read of a session the engine ran (DESIGN.md §6, §7): its stored events after a seq,
and its token use per turn (from its finished tasks, else from its agent's own log)."""

from __future__ import annotations

import os

from coding_os.errors import InvalidId, InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from coding_os.sessions.export import ReplicaLog
    from coding_os.state.tiers import Tiers

__all__ = ["events_after", "tokens"]


def events_after(tiers: Tiers, session: str, since: int = 0, limit: int | None = None
                 ) -> dict[str, Any]:
    """The stored events of `session` after seq `since`: `events` (the first `limit` of them,
    when given), `last_seq`, and `engine` (False, with no events, for a session without an
    events log: one the agent ran on its own).

    Raises:
        InvalidInput: `since` is not an integer >= 0, or beyond the last seq.
        InvalidId: a malformed session id.
    """
    from itertools import islice

    from coding_os.runtime.events import events_path, last_seq, replay

    path = events_path(tiers, session)
    if not os.path.exists(path):
        return {"engine": False, "events": [], "last_seq": 0}
    end = last_seq(path)
    if isinstance(since, int) and not isinstance(since, bool) and since > end:
        raise InvalidInput(f"seq {since} is beyond the end of {session}'s events (its last "
                           f"seq is {end})")
    events = list(islice(replay(path, since), limit))  # the read ends, its file closed, here
    return {"engine": True, "events": events,
            "last_seq": events[-1]["seq"] if events else max(end, since)}


def tokens(tiers: Tiers, row: Mapping[str, Any],
           replica: Callable[[str | None], ReplicaLog | None]) -> dict[str, Any]:
    """Token use per turn of the session of `row` (its index row): `source` ("engine": the
    usage its finished tasks reported; "claude", "codex" or "gemini": its native log; None:
    neither holds any) and `turns` (sessions/usage.py). `replica(stream)` is another host's copy of the
    session's log (None: its `native` or `transcript`; "events": its events log), None when the
    file is here.

    Raises:
        NotFound: its log cannot be read.
    """
    from coding_os.runtime.events import events_path, read_since
    from coding_os.sessions.export import log_path
    from coding_os.runtime.usage import engine_turns
    from coding_os.sessions.usage import native_turns

    try:
        path: str | None = events_path(tiers, str(row["id"]))
    except InvalidId:  # a native session imported under its agent's id: no events log
        path = None
    kind, source = str(row.get("kind")), row.get("source_path")
    events = None
    if path is not None and not os.path.exists(path) and kind == "cos":
        events = replica("events")  # another host's, if replicated
    if path is not None and (events is not None or os.path.exists(path)):
        with log_path(path, events) as log:
            turns = engine_turns(read_since(log, 0).events)
        if turns:
            return {"session": row["id"], "source": "engine", "turns": turns}
    if kind in ("claude", "codex", "gemini") and isinstance(source, str) and source:
        with log_path(source, replica(None)) as native:
            turns = native_turns(native, kind)
        if turns:
            return {"session": row["id"], "source": kind, "turns": turns}
    return {"session": row["id"], "source": None, "turns": []}
