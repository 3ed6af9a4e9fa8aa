"""The restore lock (checkpoints/lock.py): a lock file that cannot be opened is a StateIOError
(one line, exit 6), never an internal error."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding_os.checkpoints.lock import restore_lock
from coding_os.errors import StateIOError


@pytest.mark.parametrize("exclusive", [True, False])
def test_a_restore_lock_that_cannot_be_opened_is_a_state_io_error(tmp_path: Path,
                                                                  exclusive: bool) -> None:
    # A directory where the lock file goes: root-proof, as a mode would not be.
    (tmp_path / "restore.lock").mkdir()
    with pytest.raises(StateIOError, match="restore.lock"):
        with restore_lock(str(tmp_path), exclusive=exclusive):
            pass


def test_a_restore_lock_is_taken_and_let_go(tmp_path: Path) -> None:
    with restore_lock(str(tmp_path), exclusive=True):
        assert (tmp_path / "restore.lock").is_file()
    with restore_lock(str(tmp_path), exclusive=False):
        pass
