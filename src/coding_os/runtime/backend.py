"""What the engine asks of a backend (DESIGN.md §6): the real Claude Code, Codex, a Python agent
runtime or a command, each driven through the same few calls.

The engine owns the session and its one active task; a backend owns the agent's process (or
coroutine) and turns what it says into the events of §7. The engine numbers the events and
stores them before anyone sees them; a backend never writes the events log itself.

A backend yields `BackendEvent`s of the §7 types `agent_message`, `agent_message_delta`,
`tool_call`, `tool_result`, `approval_request`, `error` and `native` as they happen, and
`task_complete` (with `usage`) or `turn_aborted` (with `reason`) when the turn it was given ends
(wire.BACKEND_EVENT_TYPES; the fields of each are runtime/wire.py's).
The engine adds the task ids and emits `session_configured` and `task_started` itself. When the
backend's process ends, `events()` ends: during a task, the engine records `turn_aborted` with
`backend_exit` and an `error`, and the session stays resumable through its native id.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from coding_os.runtime.wire import BackendEventType

__all__ = ["BackendConfig", "BackendEvent", "Backend", "queued_events"]


@dataclass(frozen=True)
class BackendConfig:
    """How to start a backend's session.

    `native_id` resumes that native session (with `fork`, under a new native id); a new or
    forked session takes `new_native_id` where the agent accepts an id it is given (Claude
    Code's `--session-id`), so the engine can file it before the agent's first hook fires;
    `options` holds what only one backend reads (`exec`: `command`; `python`: `target`,
    `module:attr`). `env` is the agent process's whole environment (None: cos's own).
    `history` is the conversation so far, for an agent cos keeps the record of (`python`):
    `{"role": "user" | "assistant", "text": …}` in order, from the session's cos transcript.
    `checkpoint(tool, input)` takes the engine's `tool` checkpoint and returns once it is taken,
    for a backend that lets its agent's writes happen itself (`acp`: before a file it writes,
    a terminal, an allow); None where the engine takes none.
    """

    cwd: str
    native_id: str | None = None
    fork: bool = False
    new_native_id: str | None = None
    model: str | None = None
    permission_mode: str | None = None
    env: Mapping[str, str] | None = None
    options: Mapping[str, object] = field(default_factory=dict)
    history: tuple[Mapping[str, str], ...] = ()
    checkpoint: Callable[[str | None, object], Awaitable[None]] | None = None


@dataclass(frozen=True)
class BackendEvent:
    """One thing the agent did, as a §7 event type and its fields (no seq, no task id). The
    engine checks both: a Python agent may build one with any type."""

    type: BackendEventType
    fields: Mapping[str, object] = field(default_factory=dict)


class Backend(Protocol):
    """A running native session. Calls come from one event loop, one at a time."""

    agent: str
    # Whether the agent fires cos's hooks itself (Claude Code does, with the hooks installed):
    # for one that does not, the engine takes the automatic checkpoints (runtime/core.py).
    runs_hooks: bool

    async def start(self, config: BackendConfig) -> str | None:
        """Start (or resume, or fork) the native session; its native id when known.

        Raises:
            BackendError: the agent's program is missing or ended at once.
        """
        ...

    async def submit(self, text: str) -> None:
        """Give the agent a user input; a turn begins (the engine has ended any other)."""
        ...

    async def interrupt(self) -> None:
        """Stop the running turn; it ends with `turn_aborted` (`interrupted`)."""
        ...

    async def answer(self, request: str | int, allow: bool) -> None:
        """Answer the `approval_request` named `request`; the tool runs only when allowed."""
        ...

    def events(self) -> AsyncIterator[BackendEvent]:
        """What the agent does, in order, until its process ends."""
        ...

    async def close(self) -> None:
        """End the native session's process (the native session itself stays resumable)."""
        ...


async def queued_events(queue: asyncio.Queue[BackendEvent | None]) -> AsyncIterator[BackendEvent]:
    """The events a backend puts on `queue`, in order, until it puts None (its `close`)."""
    while True:
        event = await queue.get()
        if event is None:
            return
        yield event
