"""cos as the session store of the OpenAI Agents SDK (DESIGN.md §8): `CosSession`.

`CosSession(session_id, project=PATH)` implements the SDK's `Session` protocol (`get_items`,
`add_items`, `pop_item`, `clear_session`, all async) over a cos-native session of agent
`openai-agents`, so what an agent built on the SDK remembers is listed by `cos sessions`,
exported, searched and forked like any session. The SDK (`pip install 'coding-os[openai-agents]'`)
is not imported here: the protocol is structural.

How the items are kept. Each item added is one transcript entry carrying the item unchanged in
its field `item`: a user or assistant message is a `user` / `assistant` entry (its text in
`text`, so export and search show it), a `function_call` a `tool_call`, a
`function_call_output` a `tool_result`, and anything else an `event` named `sdk_item`. The
items of the session are the `item`s of the transcript's visible entries (rewinds applied), in
order. `pop_item` appends a `rewind` to the entry before the last item; `clear_session` a
`rewind` to the entry before the first; nothing is deleted from the transcript.

Which cos session. `session_id` is either a cos session id of agent `openai-agents` (what
`cos sessions` lists, or a fork of one) or any other string, kept as the session's `native_id`:
the first `add_items` creates the cos session, and later `CosSession`s of the same id (in any
process) find it through a pointer file under `<state_dir>/openai-agents/sdk-sessions/`, or, if
that is gone, by the `native_id` of the agent's transcripts. Until then the session is empty.

Concurrency. Every change (add, pop, clear) holds an exclusive lock on the session's lock file,
so the items of one `add_items` stay together and a pop removes the item it read; each entry is
written by `transcript.append` (durable, locked). Reads take no lock.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from contextlib import contextmanager

from coding_os import durable, jsonwire
from coding_os.errors import InvalidInput, NotFound
from coding_os.sessions import transcript
from coding_os.state.caller import Caller
from coding_os.state.identity import agent_of_session, is_session_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path
    from typing import Any

    from agents.memory import SessionSettings

    from coding_os.state.tiers import Tiers

__all__ = ["AGENT", "ITEM_EVENT", "CosSession"]

AGENT = "openai-agents"
ITEM_EVENT = "sdk_item"  # the `event` name of an item that is no message, call or output
_POINTERS = "sdk-sessions"
_LOCKS = ".sdk-locks"


class CosSession:
    """The OpenAI Agents SDK `Session` protocol over a cos-native session (agent
    `openai-agents`) of the project at `project` (default: the current directory).

    `env` (default `os.environ`) is the environment cos reads its settings from
    (`COS_DATABASE_URL`, `COS_STATE_DIR`, …); `durability` is the transcript's ("turn": an
    assistant entry is fsynced; "event": every entry; "none"); `session_settings` is the SDK's
    `SessionSettings` (its `limit` is `get_items`' default).

    Raises (from the constructor):
        InvalidInput: `session_id` is empty or a cos session id of another agent; a bad
            durability.
        Misroute, ForeignState, StateIOError: the project's state dir cannot be used.
    """

    def __init__(self, session_id: str, project: str | Path | None = None, *,
                 env: Mapping[str, str] | None = None, durability: str = "turn",
                 session_settings: SessionSettings | None = None) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise InvalidInput("an OpenAI Agents session id must be a non-empty string")
        if is_session_id(session_id) and agent_of_session(session_id) != AGENT:
            raise InvalidInput(f"{session_id} is a session of agent "
                               f"{agent_of_session(session_id)}, not {AGENT}")
        transcript.check_durability(durability)
        self.session_id = session_id
        self.session_settings = session_settings
        self.durability = durability
        caller = Caller(env, os.fspath(project) if project is not None else None)
        self._tiers: Tiers = caller.tiers
        self._project = caller.resolution.project_root
        self._worktree = caller.resolution.worktree or self._project
        self._cos_id: str | None = session_id if is_session_id(session_id) else None

    # -- the protocol ---------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The session's items in the order they were added; with `limit` (default: the
        `session_settings`' limit), only the latest `limit` of them (0: none; a negative limit:
        all, as the SDK's SQLiteSession)."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        return await asyncio.to_thread(self.items, limit)

    async def add_items(self, items: list[Any]) -> None:
        """Append `items` (JSON objects), together and in order.

        Raises:
            InvalidInput: an item is not a JSON object (nothing is added).
        """
        await asyncio.to_thread(self.add, items)

    async def pop_item(self) -> Any | None:
        """Remove and return the latest item; None when the session has none."""
        return await asyncio.to_thread(self.pop)

    async def clear_session(self) -> None:
        """Remove every item (the transcript keeps them, hidden by a rewind)."""
        await asyncio.to_thread(self.clear)

    # -- the same, synchronous ------------------------------------------------------------------

    @property
    def cos_session(self) -> str | None:
        """The cos session id these items are stored in; None before the first item."""
        if self._cos_id is None:
            self._cos_id = self._find()
        return self._cos_id

    def items(self, limit: int | None = None) -> list[Any]:
        """`get_items`, synchronous.

        Raises:
            InvalidInput: `limit` is not an integer.
        """
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise InvalidInput(f"limit must be an integer or None, not {limit!r:.40}")
        if limit == 0:
            return []
        found = [item for _, item in self._visible_items()]
        return found[-limit:] if limit is not None and limit > 0 else found

    def add(self, items: list[Any]) -> None:
        """`add_items`, synchronous."""
        if isinstance(items, (str, bytes, dict)) or not hasattr(items, "__iter__"):
            raise InvalidInput(f"add_items takes a list of items, not {type(items).__name__}")
        entries = [_entry_of(item) for item in items]
        if not entries:
            return
        with self._changing(create=True) as session:
            assert session is not None
            turn = self._last_turn(session)
            for entry_type, fields in entries:
                if entry_type == "user":
                    turn += 1
                if "turn" in fields:
                    fields["turn"] = turn
                transcript.append(self._tiers, session, entry_type, fields,
                                  durability=self.durability)

    def pop(self) -> Any | None:
        """`pop_item`, synchronous."""
        with self._changing(create=False) as session:
            found = self._visible_items() if session is not None else []
            if session is None or not found:
                return None
            seq, item = found[-1]
            transcript.append(self._tiers, session, "rewind", {"to_seq": seq - 1},
                              durability=self.durability)
            return item

    def clear(self) -> None:
        """`clear_session`, synchronous."""
        with self._changing(create=False) as session:
            found = self._visible_items() if session is not None else []
            if session is not None and found:
                transcript.append(self._tiers, session, "rewind", {"to_seq": found[0][0] - 1},
                                  durability=self.durability)

    # -- where the session is -------------------------------------------------------------------

    def _agent_dir(self) -> str:
        return os.path.join(self._tiers.state_dir, AGENT)

    def _pointer(self) -> str:
        digest = hashlib.sha256(self.session_id.encode("utf-8", "surrogatepass")).hexdigest()
        return os.path.join(self._agent_dir(), _POINTERS, digest[:40])

    def _find(self) -> str | None:
        """The cos session holding this SDK session's items, or None when there is none."""
        data = durable.read_small(self._pointer(), 4096)
        if data is not None:
            session = data.decode("ascii", "replace").strip()
            if is_session_id(session) and os.path.exists(
                    transcript.transcript_path(self._tiers, session)):
                return session
        return self._scan()

    def _scan(self) -> str | None:
        """The oldest transcript of the agent whose native_id is this session id."""
        return transcript.native_sessions(self._tiers, AGENT).get(self.session_id)

    def _create(self) -> str:
        """Make the cos session (under the creation lock, unless another process made it)."""
        from coding_os.git.repo import branch

        with self._lock("sdk-" + os.path.basename(self._pointer())):
            found = self._find()
            if found is not None and os.path.exists(
                    transcript.transcript_path(self._tiers, found)):
                return found
            named = self.session_id if is_session_id(self.session_id) else None
            session = transcript.create(
                self._tiers, AGENT, session=named,
                native_id=None if named else self.session_id, project=self._project,
                worktree=self._worktree,
                branch=branch(self._worktree) if self._worktree else None,
                durability=self.durability)
            if named is None:
                durable.ensure_dir(os.path.dirname(self._pointer()))
                durable.atomic_write(self._pointer(), (session + "\n").encode("ascii"))
            return session

    @contextmanager
    def _lock(self, name: str) -> Iterator[None]:
        """Hold the exclusive lock `<state_dir>/openai-agents/.sdk-locks/<name>.lock`."""
        folder = durable.ensure_dir(os.path.join(self._agent_dir(), _LOCKS))
        path = os.path.join(folder, name + ".lock")
        with durable.exclusive_lock(path):
            yield

    @contextmanager
    def _changing(self, *, create: bool) -> Iterator[str | None]:
        """Hold the lock of the cos session for a change; yields it (made first when `create`
        and it has no transcript yet), or None when there is none to change."""
        session = self.cos_session
        exists = session is not None and os.path.exists(
            transcript.transcript_path(self._tiers, session))
        if not exists:
            if not create:
                yield None
                return
            session = self._cos_id = self._create()
        assert session is not None
        with self._lock(session):
            yield session

    # -- reading --------------------------------------------------------------------------------

    def _visible_items(self) -> list[tuple[int, Any]]:
        """(seq, item) of every item of the conversation as it stands."""
        session = self.cos_session
        if session is None:
            return []
        try:
            read = transcript.read(transcript.transcript_path(self._tiers, session))
        except NotFound:
            return []
        return [(entry["seq"], entry["item"]) for entry in read.visible()
                if "item" in entry and entry["type"] in _ITEM_TYPES
                and (entry["type"] != "event" or entry["name"] == ITEM_EVENT)]

    def _last_turn(self, session: str) -> int:
        """The turn of the latest entry that has one (0: none yet)."""
        path = transcript.transcript_path(self._tiers, session)
        for entry in reversed(transcript.tail(path, 64).entries):
            turn = entry.get("turn")
            if isinstance(turn, int) and not isinstance(turn, bool) and turn >= 0:
                return turn
        return 0


_ITEM_TYPES = ("user", "assistant", "tool_call", "tool_result", "event")


def _entry_of(item: object) -> tuple[str, dict[str, Any]]:
    """The transcript entry (type, fields) that keeps `item`.

    Raises:
        InvalidInput: `item` is not a JSON object.
    """
    problem = jsonwire.object_problem(item)
    if problem is not None:
        raise InvalidInput(f"an OpenAI Agents item {problem}")
    assert isinstance(item, dict)
    kind = item.get("type")
    role = item.get("role")
    if kind in (None, "message") and role in ("user", "assistant"):
        text = _text_of(item.get("content"))
        if text is not None:
            return str(role), {"turn": 0, "text": text, "item": item}
    call_id = item.get("call_id")
    if isinstance(call_id, str):
        if kind == "function_call" and isinstance(item.get("name"), str):
            return "tool_call", {"turn": 0, "tool": item["name"],
                                 "input": item.get("arguments"), "call_id": call_id,
                                 "item": item}
        if kind == "function_call_output":
            return "tool_result", {"turn": 0, "call_id": call_id, "ok": True,
                                   "output": item.get("output"), "item": item}
    return "event", {"name": ITEM_EVENT, "item": item}


def _text_of(content: object) -> str | None:
    """The text of a message's content: a string, or the `text` of its text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [part["text"] for part in content
                 if isinstance(part, dict) and isinstance(part.get("text"), str)]
        return "\n".join(texts)
    return None
