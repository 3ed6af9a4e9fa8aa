"""What every storage backend is before any concern: a database opened (and migrated) as a
context manager and closed, its one error type, and the text it can store.

Conformance: tests/storage/test_lifecycle.py.
"""

from __future__ import annotations

import abc

from coding_os.errors import StateIOError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Self

__all__ = ["Lifecycle", "StorageError", "check_schema_version", "storable_text"]


class StorageError(StateIOError):
    """The database could not be opened, migrated, read or written."""


def storable_text(value: str | None) -> str | None:
    """`value` with lone surrogates (which UTF-8 cannot encode; JSON's "\\ud800" makes them)
    replaced by U+FFFD, so one odd character never makes a batch fail again and again."""
    if value is None or value.isascii():
        return value
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


class Lifecycle(abc.ABC):
    """The database itself: its schema version, its migrations, its connection. A context
    manager: `with open_storage(...) as storage:` closes it on the way out."""

    # Whether several hosts can share this database (PostgreSQL), or it is one host's (SQLite).
    shared: bool = False
    # Which database this is (its path, or its URL without the password): what a host keeps
    # about one database (e.g. the replication marks) is not taken for another.
    location: str = ""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abc.abstractmethod
    def migrate(self) -> int:
        """Apply pending migrations, each in its own transaction; return the schema version.

        Raises:
            StorageError: a migration failed; the schema stays at the last applied version.
        """

    @abc.abstractmethod
    def schema_version(self) -> int:
        """The number of migrations applied.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection; every later call raises StorageError."""
