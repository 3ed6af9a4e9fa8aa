"""The sessions the hooks saw (presence): who ran them, where, and how they relate.

Conformance: tests/storage/test_sessions.py.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

__all__ = ["SessionRecord", "SessionStore"]


@dataclass
class SessionRecord:
    """A session as the hooks saw it: who, where, and how it relates to others."""

    id: str
    agent: str
    panel: str
    native_id: str | None = None
    project: str | None = None
    cwd: str | None = None
    source: str | None = None  # the SessionStart source that minted it, "adopt", or "engine"
    forked_from: str | None = None
    cleared_from: str | None = None
    started: str = ""
    last_active: str = ""
    status: str = "active"  # active | ended | orphaned | reaped
    # Where a fork began, as JSON (a rewind's: the checkpoint and the agent's point in its log).
    fork_point: str | None = None
    # The host the session ran on (state.hosts.this_host); None in rows from before schema
    # version 6, read as the local host.
    host: str | None = None


class SessionStore(abc.ABC):
    """The sessions table: one row per cos session id."""

    @abc.abstractmethod
    def upsert_session(self, record: SessionRecord) -> None:
        """Insert the session, or update every field of an existing one (a fork point or a
        host it is given as None keeps the stored one).

        Raises:
            StorageError: the database cannot be written.
        """

    @abc.abstractmethod
    def touch_session(self, session_id: str, last_active: str, status: str | None = None) -> None:
        """Move a session's last activity forward (never back) and optionally its status.

        Raises:
            StorageError: the database cannot be written.
        """

    @abc.abstractmethod
    def session(self, session_id: str) -> SessionRecord | None:
        """The session with this id, or None.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def session_by_native(self, agent: str, native_id: str) -> SessionRecord | None:
        """The most recent session of `agent` linked to the native id, or None.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def sessions(self, agent: str | None = None) -> list[SessionRecord]:
        """Sessions, most recently active first.

        Raises:
            StorageError: the database cannot be read.
        """
