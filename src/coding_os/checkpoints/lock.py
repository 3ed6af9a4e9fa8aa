"""The restore lock and the journal's presence: all a checkpoint needs to know of restores.

Kept apart from restore.py and rewind.py so taking a checkpoint (on every hook that may write) imports nothing
of the restore machinery unless a restore was interrupted.
"""

from __future__ import annotations

import fcntl
import os

from coding_os import durable

__all__ = ["JOURNAL", "JOURNAL_TMP", "STAGING", "restore_lock", "pending"]

JOURNAL = "journal.json"
JOURNAL_TMP = "journal.json.tmp"  # being written: the restore is not committed yet
STAGING = "staging"


class restore_lock:  # noqa: N801 - used as a function: `with restore_lock(dir, exclusive):`
    """Hold the restore lock: exclusive to restore, shared to take a snapshot. (A class rather
    than a contextlib generator: contextlib is not imported on the hook path.)"""

    __slots__ = ("path", "exclusive", "fd")

    def __init__(self, checkpoints_dir: str, exclusive: bool) -> None:
        self.path = os.path.join(checkpoints_dir, "restore.lock")
        self.exclusive = exclusive
        self.fd = -1

    def __enter__(self) -> None:
        """Take the lock, waiting for it.

        Raises:
            StateIOError: the lock file cannot be made or opened (a read-only state dir).
        """
        durable.ensure_dir(os.path.dirname(self.path))
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise durable.io_error(self.path, exc) from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH)
        except BaseException:
            os.close(self.fd)
            raise

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def pending(checkpoints_dir: str) -> bool:
    """Whether an interrupted restore (a journal), or the temporary journal of one that never
    committed (written before anything is staged), is waiting."""
    return (os.path.exists(os.path.join(checkpoints_dir, JOURNAL))
            or os.path.exists(os.path.join(checkpoints_dir, JOURNAL_TMP)))
