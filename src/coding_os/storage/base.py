"""The storage interface every backend implements (SQLite now, PostgreSQL next).

Backends are interchangeable: one conformance suite (tests/storage/test_conformance.py) runs the
same behaviour against each. Rows are plain dataclasses; timestamps are ISO-8601 UTC strings.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "Storage", "SessionRecord", "Observation", "SessionSummary", "StorageError", "storable_text",
    "check_schema_version",
]

from coding_os.errors import StateIOError


class StorageError(StateIOError):
    """The database could not be opened, migrated, read or written."""


def storable_text(value: str | None) -> str | None:
    """`value` with lone surrogates (which UTF-8 cannot encode; JSON's "\\ud800" makes them)
    replaced by U+FFFD, so one odd character never makes a batch fail again and again."""
    if value is None:
        return None
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in value)


def check_schema_version(version: int, known: int, where: str) -> None:
    """Refuse a database migrated by a newer coding-os than this one.

    Raises:
        StorageError: `version` is above `known`.
    """
    if version > known:
        raise StorageError(f"database {where} is at schema version {version}, newer than this "
                           f"coding-os knows ({known}); upgrade coding-os")


@dataclass
class SessionRecord:
    """A session as the hooks saw it: who, where, and how it relates to others."""

    id: str
    agent: str
    panel: str
    native_id: str | None = None
    project: str | None = None
    cwd: str | None = None
    source: str | None = None  # the SessionStart source that minted it, or "adopt"
    forked_from: str | None = None
    cleared_from: str | None = None
    started: str = ""
    last_active: str = ""
    status: str = "active"  # active | ended | orphaned | reaped


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


class Storage(abc.ABC):
    """The shared database of one project: sessions, observations, summaries.

    Every method may raise StorageError when the database cannot be used.
    """

    @abc.abstractmethod
    def migrate(self) -> int:
        """Apply pending migrations, each in its own transaction; return the schema version.

        Raises:
            StorageError: a migration failed; the schema stays at the last applied version.
        """

    @abc.abstractmethod
    def schema_version(self) -> int:
        """The number of migrations applied."""

    @abc.abstractmethod
    def upsert_session(self, record: SessionRecord) -> None:
        """Insert the session, or update every field of an existing one."""

    @abc.abstractmethod
    def touch_session(self, session_id: str, last_active: str, status: str | None = None) -> None:
        """Move a session's last activity forward (never back) and optionally its status."""

    @abc.abstractmethod
    def session(self, session_id: str) -> SessionRecord | None:
        """The session with this id, or None."""

    @abc.abstractmethod
    def session_by_native(self, agent: str, native_id: str) -> SessionRecord | None:
        """The most recent session of `agent` linked to the native id, or None."""

    @abc.abstractmethod
    def sessions(self, agent: str | None = None) -> list[SessionRecord]:
        """Sessions, most recently active first."""

    @abc.abstractmethod
    def add_observations(self, rows: Sequence[Observation]) -> int:
        """Insert observations not yet stored (by oid); return how many rows were new."""

    @abc.abstractmethod
    def observations(self, session: str | None = None, limit: int | None = None) -> list[Observation]:
        """Observations in the order they happened, optionally of one session."""

    @abc.abstractmethod
    def summary(self, session_id: str) -> SessionSummary | None:
        """The summary of a session, or None when it has none."""

    @abc.abstractmethod
    def write_summary(self, summary: SessionSummary) -> bool:
        """Store the summary unless the session already has one; True when it was stored."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection."""
