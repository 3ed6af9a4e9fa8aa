"""What a session of the engine runs (DESIGN.md §6): the agent, where, and the backend's own
options. One type for the engine, a background job and `cos bg`'s plain form
(interfaces/entry.py), in a module that imports nothing of the engine."""

from __future__ import annotations

from dataclasses import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["SessionSettings"]


@dataclass(frozen=True)
class SessionSettings:
    """What a session runs: the agent, where, and the backend's own options."""

    agent: str
    cwd: str
    model: str | None = None
    permission_mode: str | None = None
    options: Mapping[str, object] = field(default_factory=dict)
