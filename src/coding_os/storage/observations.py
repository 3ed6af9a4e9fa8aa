"""What the hooks observed, one row per observation, each tagged with its session.

Conformance: tests/storage/test_observations.py.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Observation", "ObservationStore"]


@dataclass
class Observation:
    """One thing a hook observed, tagged with its session."""

    oid: str  # unique per observation: re-ingesting the spool never duplicates
    session: str
    agent: str
    panel: str
    ts: str
    event: str
    tool: str | None = None
    text: str | None = None
    data: dict[str, object] = field(default_factory=dict)


class ObservationStore(abc.ABC):
    """The observations table; an observation with a text is a search document too
    (storage/brain.py)."""

    @abc.abstractmethod
    def add_observations(self, rows: Sequence[Observation]) -> int:
        """Insert observations not yet stored (by oid), and the search document of each new one
        with a text, in one transaction; return how many rows were new.

        Raises:
            StorageError: the database cannot be written.
        """

    @abc.abstractmethod
    def observations(self, session: str | None = None, limit: int | None = None) -> list[Observation]:
        """Observations in the order they happened, optionally of one session.

        Raises:
            StorageError: the database cannot be read.
        """
