"""What each session did, summarised once: when it ended, or when it was found orphaned.

Conformance: tests/storage/test_summaries.py.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field

__all__ = ["SessionSummary", "SummaryStore"]


@dataclass
class SessionSummary:
    """What a session did, written when it ends or when it is found orphaned."""

    session: str
    agent: str
    panel: str
    reason: str  # "end:<SessionEnd reason>", "orphan", "reaped"
    native_id: str | None = None
    started: str | None = None
    ended: str | None = None
    prompts: int = 0
    tool_calls: int = 0
    errors: int = 0
    files: list[str] = field(default_factory=list)
    last_prompt: str | None = None
    created: str = ""


class SummaryStore(abc.ABC):
    """The session summaries: at most one per session, the first writer's."""

    @abc.abstractmethod
    def summary(self, session_id: str) -> SessionSummary | None:
        """The summary of a session, or None when it has none.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def write_summary(self, summary: SessionSummary) -> bool:
        """Store the summary unless the session already has one; True when it was stored.

        Raises:
            StorageError: the database cannot be written.
        """
