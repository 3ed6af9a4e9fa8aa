"""Token use per turn of a session the engine runs, read from its events (DESIGN.md §6, §7):
the `usage` each `task_complete` reported, priced at the model its latest `session_configured`
named. Each turn's figures are sessions/usage.py's (`task_turn`), as a native session's are.
"""

from __future__ import annotations

from coding_os.runtime import wire
from coding_os.sessions.usage import task_turn

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

__all__ = ["engine_turns"]


def engine_turns(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tokens per turn from the `usage` of an engine session's `task_complete` events, one turn
    per task that reported any (1, 2, ...): as sessions.usage.task_turn gives them."""
    turns: list[dict[str, Any]] = []
    agent: object = None
    model: object = None
    for event in events:
        msg = event.get("msg")
        if not isinstance(msg, dict):
            continue
        if msg.get("type") == wire.SESSION_CONFIGURED:
            agent, model = msg.get("agent"), msg.get("model")
            continue
        usage = msg.get("usage")
        if msg.get("type") != wire.TASK_COMPLETE or not isinstance(usage, dict):
            continue
        turn = task_turn(len(turns) + 1, msg.get("task"), event.get("seq"), usage, agent, model)
        if turn is not None:
            turns.append(turn)
    return turns
