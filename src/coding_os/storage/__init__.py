"""Storage backends behind one interface (storage.base.Storage)."""

from __future__ import annotations

import os

from coding_os.storage.base import Storage, StorageError

__all__ = ["open_storage", "Storage", "StorageError"]


def open_storage(database_path: str) -> Storage:
    """The project's database: SQLite at `database_path` unless COS_DATABASE_URL selects another.

    Raises:
        StorageError: the database cannot be opened or migrated.
    """
    from coding_os.storage.sqlite import SQLiteStorage

    url = os.environ.get("COS_DATABASE_URL")
    if not url:
        return SQLiteStorage(database_path)
    if url.startswith("sqlite:///"):
        return SQLiteStorage(url[len("sqlite://"):])
    raise StorageError(
        f"COS_DATABASE_URL {url.split('@')[-1]!r}: only the embedded SQLite backend "
        "(sqlite:///path) is available in this version"
    )
