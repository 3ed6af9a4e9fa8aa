"""The panel lock (state/presence.py): the one lock a hook holds while it writes into its panel
and `cos gc --panels` takes before it reaps one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coding_os.state.presence import PanelLock


def test_gc_finds_the_lock_a_hook_holds_taken_and_takes_it_once_released(
        tmp_path: Path) -> None:
    panel = tmp_path / "claude" / "panels" / "p"
    with PanelLock(str(panel)):  # a hook: the panel directory is made on the way
        assert panel.is_dir()
        assert PanelLock.try_take(str(panel)) is None
    taken = PanelLock.try_take(str(panel))
    assert taken is not None
    try:
        assert PanelLock.try_take(str(panel)) is None
    finally:
        taken.release()
        taken.release()  # idempotent
    again = PanelLock.try_take(str(panel))
    assert again is not None
    with again:
        assert PanelLock.try_take(str(panel)) is None
    with PanelLock(str(panel)):  # released on leaving the block: a hook takes it again
        pass


def test_gc_cannot_take_the_lock_of_a_panel_already_gone(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        PanelLock.try_take(str(tmp_path / "gone"))
    assert not os.path.exists(tmp_path / "gone")  # gc never makes a panel
