"""Observations the hooks make, spooled on the hot path and stored in the database later.

A tool-call hook must not pay for opening SQLite (importing it alone costs more than the rest of
the hook; benchmarks/hook_latency.py). So hooks append one JSON line per observation to
`.coding-os/.observations.jsonl` under a lock, and `ingest()` moves the spool into the database:
at SessionStart, Stop and SessionEnd, and before any command reads observations.

How far the spool has been stored is kept beside it, in `.observations.offset`
(`<inode> <generation> <offset>`), never in the database, so several projects can share one
database. The spool lock is held only to read lines and to move that offset, never across a
database transaction, so a slow or locked database never stalls a tool-call hook. Each line
carries a unique `oid` and inserts ignore known ones: reading a line twice (after a crash, or two
ingesters at once) never duplicates a row, and the offset only ever advances to a line boundary
of the spool file it was read from, so no line is ever skipped. Secrets of known shapes in an
observation are redacted before it is spooled (redact.py).
"""

from __future__ import annotations

import fcntl
import os

from coding_os import jsonwire
from coding_os import durable, redact as redaction

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.storage.base import Observation, Storage

__all__ = ["spool", "ingest", "SPOOL_TRUNCATE_BYTES"]

SPOOL_TRUNCATE_BYTES = 1 << 20  # an ingested spool larger than this is emptied


def spool(spool_path: str, record: dict[str, object], redact: bool = True) -> None:
    """Append one observation (with a fresh `oid`) to the spool, the secrets in its texts
    redacted (unless `redact` is false: the caller did it, or the project turned it off).

    Raises:
        StateIOError: the spool cannot be written.
    """
    if redact:
        record = redaction.redact_value(record)  # type: ignore[assignment]
    record = {"oid": os.urandom(8).hex(), **record}
    durable.locked_append(spool_path, (jsonwire.dumps(record) + "\n").encode("ascii"))


def _offset_path(spool_path: str) -> str:
    return spool_path[: -len(".jsonl")] + ".offset" if spool_path.endswith(".jsonl") \
        else spool_path + ".offset"


def _read_offset(spool_path: str, inode: int, size: int) -> tuple[int, int]:
    """(generation, offset) for the spool file with this inode; offset 0 when unknown."""
    data = durable.read_small(_offset_path(spool_path), 256) or b""
    try:
        ino, generation, offset = (int(x) for x in data.split())
    except ValueError:
        return 0, 0
    if ino != inode or not 0 <= offset <= size:
        return generation, 0
    return generation, offset


def _write_offset(spool_path: str, inode: int, generation: int, offset: int) -> None:
    durable.atomic_write(_offset_path(spool_path), f"{inode} {generation} {offset}\n".encode(),
                         sync=False)


def _parse(data: bytes) -> list[Observation]:
    from coding_os.storage.base import Observation

    rows = []
    data_field: object
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            record = jsonwire.loads(line.decode("utf-8", "replace"))
        except ValueError:
            continue  # not an observation line: never half-stored
        if not isinstance(record, dict) or not isinstance(record.get("oid"), str):
            continue
        data_field = record.get("data")
        rows.append(Observation(
            oid=record["oid"],
            session=str(record.get("session") or ""),
            agent=str(record.get("agent") or ""),
            panel=str(record.get("panel") or ""),
            ts=str(record.get("ts") or ""),
            event=str(record.get("event") or ""),
            tool=record.get("tool") if isinstance(record.get("tool"), str) else None,
            text=record.get("text") if isinstance(record.get("text"), str) else None,
            data=data_field if isinstance(data_field, dict) else {},
        ))
    return rows


def ingest(storage: Storage, spool_path: str) -> int:
    """Store every spooled observation not yet in the database; return how many were new.

    Raises:
        StorageError: the database refused the batch, or the spool cannot be read; the spool
            and its offset are left as they were.
    """
    from coding_os.storage.base import StorageError

    try:
        fd = os.open(spool_path, os.O_RDWR)
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise StorageError(f"cannot read {spool_path}: {exc.strerror}") from None
    try:
        try:
            with _locked(fd):
                inode = os.fstat(fd).st_ino
                size = os.fstat(fd).st_size
                generation, offset = _read_offset(spool_path, inode, size)
                data = os.pread(fd, size - offset, offset) if size > offset else b""
                whole = data.rfind(b"\n") + 1  # a torn tail is not consumed
                data = data[:whole]
            added = storage.add_observations(_parse(data)) if data else 0
            end = offset + len(data)
            with _locked(fd):
                stat = os.fstat(fd)
                current_generation, current = _read_offset(spool_path, inode, stat.st_size)
                if current_generation != generation or stat.st_ino != inode:
                    return added  # emptied by another ingester meanwhile: its offset stands
                if end == stat.st_size and end > SPOOL_TRUNCATE_BYTES:
                    # Everything is stored: empty the spool. The offset goes to 0 (a new
                    # generation) first, so a crash in between re-reads stored lines instead of
                    # skipping new ones.
                    _write_offset(spool_path, inode, generation + 1, 0)
                    os.ftruncate(fd, 0)
                elif end > current:
                    _write_offset(spool_path, inode, generation, end)
            return added
        except OSError as exc:
            raise StorageError(f"cannot ingest {spool_path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


class _locked:
    """An exclusive flock on the spool for the `with` block (appenders wait)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __enter__(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
