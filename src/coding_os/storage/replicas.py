"""Replicated session files (DESIGN.md §8): each host pushes its sessions' files line by line,
so another host can read them; one host owns the lines of a session id.

Conformance: tests/storage/test_replicas.py.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass

from coding_os.storage.lifecycle import StorageError

__all__ = ["REPLICA_STREAMS", "ReplicaSource", "ReplicaStore", "valid_replica_lines"]

# The streams a session's files are stored as.
REPLICA_STREAMS = ("transcript", "events", "native")


@dataclass
class ReplicaSource:
    """One replicated file of a session: its stream, where it lives, how much is stored.

    `(session, stream)` is owned by one host: lines of the same session id from another host are
    refused, never mixed.
    """

    session: str  # the index id (cos id, or the native id of a Claude/Codex session)
    stream: str  # one of REPLICA_STREAMS
    host: str
    agent: str  # the session's agent: a cos agent name, "claude", "codex"
    path: str  # the file on its host
    project_key: str | None  # state.hosts.project_key of the project
    root: str | None  # the project root on that host
    lines: int = 0  # the highest seq stored with every seq below it (lines replicated so far)
    updated: str = ""


def valid_replica_lines(lines: Sequence[tuple[int, bytes]]) -> None:
    """Check lines given to `ReplicaStore.add_replica_lines`: seq from 1, bytes without a newline.

    Raises:
        StorageError: a seq below 1, or a line that is not bytes or holds a newline.
    """
    for seq, line in lines:
        if not isinstance(seq, int) or seq < 1:
            raise StorageError(f"replicated line number {seq!r}: lines are numbered from 1")
        if not isinstance(line, bytes) or b"\n" in line:
            raise StorageError(f"replicated line {seq}: must be bytes without a newline")


class ReplicaStore(abc.ABC):
    """Replicated files: their lines by seq, and one source row per (session, stream)."""

    @abc.abstractmethod
    def add_replica_lines(self, source: ReplicaSource, lines: Sequence[tuple[int, bytes]]) -> int:
        """Store the lines `(seq, bytes without the newline)` not stored yet and upsert the
        source (its `lines` becomes the highest seq stored with every seq below it; its other
        fields are taken from `source`), in one transaction; return how many lines were new.
        A line already stored under its seq is kept as it is.

        Raises:
            StorageError: the session already has lines of another host (the same session id
                from two hosts never mixes), a seq below 1 or a line holding a newline, or the
                database cannot be written.
        """

    @abc.abstractmethod
    def replica_source(self, session: str, stream: str) -> ReplicaSource | None:
        """The replicated file of `session` in `stream`, or None.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def replica_sources(self, session: str) -> list[ReplicaSource]:
        """Every replicated file of `session`, by stream name.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def replica_lines(self, session: str, stream: str, after: int = 0,
                      limit: int | None = None) -> list[tuple[int, bytes]]:
        """Stored lines of a replicated file numbered above `after`, by seq, at most `limit`.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def remove_replica(self, session: str, stream: str) -> int:
        """Forget a replicated file (its lines and its source row), in one transaction; return
        how many lines were removed.

        Raises:
            StorageError: the database cannot be written.
        """
