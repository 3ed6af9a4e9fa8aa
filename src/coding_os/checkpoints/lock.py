"""The restore lock and the journal's presence: all a checkpoint needs to know of restores.

Kept apart from rewind.py so taking a checkpoint (on every hook that may write) imports nothing
of the restore machinery unless a restore was interrupted.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from coding_os.state import durable

__all__ = ["JOURNAL", "STAGING", "restore_lock", "pending"]

JOURNAL = "journal.json"
STAGING = "staging"


@contextmanager
def restore_lock(checkpoints_dir: str, exclusive: bool) -> Iterator[None]:
    """Hold the restore lock: exclusive to restore, shared to take a snapshot."""
    durable.ensure_dir(checkpoints_dir)
    fd = os.open(os.path.join(checkpoints_dir, "restore.lock"),
                 os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def pending(checkpoints_dir: str) -> bool:
    """Whether an interrupted restore (a journal) or its stale staging is waiting."""
    return (os.path.exists(os.path.join(checkpoints_dir, JOURNAL))
            or os.path.isdir(os.path.join(checkpoints_dir, STAGING)))
