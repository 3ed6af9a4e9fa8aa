"""Storage backends behind one interface (storage.base.Storage)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from coding_os.storage.base import Storage, StorageError

__all__ = ["open_storage", "Storage", "StorageError"]


def open_storage(database_path: str, busy_timeout_s: float | None = None,
                 env: Mapping[str, str] | None = None) -> Storage:
    """The project's database: SQLite at `database_path` unless COS_DATABASE_URL selects another
    (`sqlite:///path`, or `postgresql://…` / `postgres://…` for a shared PostgreSQL).

    `busy_timeout_s` bounds how long SQLite waits for another writer's lock (hooks pass a short
    one: their data waits in the spool instead).

    Raises:
        StorageError: the database cannot be opened or migrated.
    """
    url = (os.environ if env is None else env).get("COS_DATABASE_URL")
    if url and url.startswith(("postgresql://", "postgres://")):
        try:
            from coding_os.storage.postgres import PostgresStorage
        except ModuleNotFoundError as exc:
            if (exc.name or "").partition(".")[0] != "psycopg":
                raise
            raise StorageError("COS_DATABASE_URL selects PostgreSQL, but psycopg is not "
                               "installed: pip install 'coding-os[postgres]'") from None
        return PostgresStorage(url)

    from coding_os.storage.sqlite import SQLiteStorage

    options = {} if busy_timeout_s is None else {"busy_timeout_s": busy_timeout_s}
    if not url:
        return SQLiteStorage(database_path, **options)
    if url.startswith("sqlite:///"):
        return SQLiteStorage(url[len("sqlite://"):], **options)
    raise StorageError(
        f"COS_DATABASE_URL {url.split('@')[-1]!r}: use sqlite:///path or postgresql://…"
    )
