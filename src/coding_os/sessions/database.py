"""The project's database as the session index uses it (DESIGN.md §4.2): the index is a cache,
so a corrupt SQLite file is set aside and rebuilt from the logs — never fatal — and a lookup can
say what it repaired. Light on imports: `cos resume` runs through here on every call.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from coding_os.adapters import log_dir
from coding_os.state.tiers import Tiers

TYPE_CHECKING = False  # typing is not imported at run time (benchmarks/resume_continue.py)
if TYPE_CHECKING:
    from typing import TypeVar

    from coding_os.storage.base import Storage

    _T = TypeVar("_T")

__all__ = ["gemini_dir", "native_dirs", "with_index", "with_repairs"]

_CORRUPT_MARKERS = ("file is not a database", "malformed", "disk image")


def native_dirs(env: Mapping[str, str]) -> tuple[str, str]:
    """Where Claude Code and Codex keep their logs for a caller with environment `env`
    (adapters.LOG_DIRS; Gemini CLI's: `gemini_dir`)."""
    return log_dir("claude", env), log_dir("codex", env)


def gemini_dir(env: Mapping[str, str]) -> str:
    """Where Gemini CLI keeps its logs for a caller with environment `env`."""
    return log_dir("gemini", env)


def _corrupt(exc: Exception, env: Mapping[str, str]) -> bool:
    url = env.get("COS_DATABASE_URL") or ""
    sqlite = not url or url.startswith("sqlite:///")
    return sqlite and any(marker in str(exc) for marker in _CORRUPT_MARKERS)


def _set_aside_database(path: str) -> None:
    """Move a corrupt SQLite database (and its WAL files) aside, so a fresh one is made."""
    from coding_os.clock import utc_now

    suffix = ".corrupt-" + utc_now().replace(":", "")
    for extra in ("", "-wal", "-shm"):
        try:
            os.replace(path + extra, path + suffix + extra)
        except FileNotFoundError:
            continue
        except OSError as exc:
            from coding_os.storage.base import StorageError

            raise StorageError(f"cannot set aside the corrupt database {path}: {exc}") from None


def with_index(tiers: Tiers, env: Mapping[str, str], work: Callable[[Storage], _T]) -> _T:
    """Run `work` on the project's database; a corrupt SQLite file is set aside and rebuilt
    (the index comes back from the logs), never fatal.

    Raises:
        StorageError: the database cannot be used (other than a corrupt SQLite file).
    """
    from coding_os.storage import open_storage
    from coding_os.storage.base import StorageError

    path = tiers.database
    for attempt in (1, 2):
        storage = None
        try:
            storage = open_storage(path, env=env)
            return work(storage)
        except StorageError as exc:
            if attempt == 2 or not _corrupt(exc, env):
                raise
        finally:
            if storage is not None:
                storage.close()
        _set_aside_database(path)
    raise AssertionError("unreachable")


def _sqlite_file(tiers: Tiers, env: Mapping[str, str]) -> str | None:
    """The default SQLite database of the project, or None when a URL selects another one."""
    return None if env.get("COS_DATABASE_URL") else tiers.database


def _set_aside_files(path: str) -> set[str]:
    folder, name = os.path.split(path)
    try:
        return {n for n in os.listdir(folder) if n.startswith(name + ".corrupt-")}
    except OSError:
        return set()


def _database_repairs(path: str | None, existed: bool, aside: set[str]) -> list[str]:
    """What happened to the SQLite file while the index was used: rebuilt after it was missing
    or set aside as corrupt."""
    if path is None:
        return []
    new = sorted(_set_aside_files(path) - aside)
    if new:
        return [f"database: {path} was corrupt, set aside to {new[0]} and rebuilt from the logs"]
    if not existed:
        return [f"database: {path} was missing, rebuilt from the logs"]
    return []


def with_repairs(tiers: Tiers, env: Mapping[str, str],
                 work: Callable[[Storage], _T]) -> tuple[_T, list[str]]:
    """`with_index`, and what it repaired in the SQLite file."""
    path = _sqlite_file(tiers, env)
    existed = path is not None and os.path.exists(path)
    aside = _set_aside_files(path) if path else set()
    result = with_index(tiers, env, work)
    return result, _database_repairs(path, existed, aside)
