"""Observations the hooks make, spooled on the hot path and stored in the database later.

A tool-call hook must not pay for opening SQLite (importing it alone costs more than the rest of
the hook; benchmarks/hook_latency.py). So hooks append one JSON line per observation to
`.coding-os/.observations.jsonl` under a lock, and `ingest()` moves the spool into the database:
at SessionStart, Stop and SessionEnd, and before any command reads observations. Each line
carries a unique `oid`, so ingesting twice (a crash between the insert and the truncation) never
duplicates a row, and nothing is lost when the database is unavailable: the spool just waits.
"""

from __future__ import annotations

import fcntl
import os

from coding_os import jsonwire
from coding_os.state import durable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.storage.base import Storage

__all__ = ["spool", "ingest", "SPOOL_TRUNCATE_BYTES"]

SPOOL_TRUNCATE_BYTES = 1 << 20  # an ingested spool larger than this is emptied


def spool(spool_path: str, record: dict[str, object]) -> None:
    """Append one observation (with a fresh `oid`) to the spool.

    Raises:
        StateIOError: the spool cannot be written.
    """
    record = {"oid": os.urandom(8).hex(), **record}
    durable.locked_append(spool_path, (jsonwire.dumps(record) + "\n").encode("ascii"))


def ingest(storage: Storage, spool_path: str) -> int:
    """Store every spooled observation not yet in the database; return how many were new.

    Raises:
        StorageError: the database refused the batch; the spool is left as it was.
    """
    from coding_os.storage.base import Observation

    try:
        fd = os.open(spool_path, os.O_RDWR)
    except FileNotFoundError:
        return 0
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # appenders wait; nothing lands mid-ingest
        size = os.fstat(fd).st_size
        offset = storage.spool_offset()
        if offset > size:  # the spool was emptied after the offset was stored
            offset = 0
        os.lseek(fd, offset, os.SEEK_SET)
        data = b""
        while len(data) < size - offset:
            chunk = os.read(fd, size - offset - len(data))
            if not chunk:
                break
            data += chunk
        rows = []
        data_field: object
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                record = jsonwire.loads(line.decode("utf-8", "replace"))
            except ValueError:
                continue  # a line cut by a crash mid-append: unreadable, and never half-stored
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
        added = storage.add_observations(rows, spool_offset=size)
        if size > SPOOL_TRUNCATE_BYTES:
            # Offset first, then truncate: a crash in between re-reads stored lines (ignored by
            # oid) instead of skipping new ones.
            storage.add_observations([], spool_offset=0)
            os.ftruncate(fd, 0)
        return added
    finally:
        os.close(fd)
