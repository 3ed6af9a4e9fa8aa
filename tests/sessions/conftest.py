"""Fixtures for the session tests: a private state dir and a session in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding_os.sessions import transcript
from coding_os.state.tiers import Tiers


@pytest.fixture
def tiers(tmp_path: Path) -> Tiers:
    """The tiers of a fresh state dir."""
    return Tiers(str(tmp_path / ".coding-os"))


@pytest.fixture
def session(tiers: Tiers) -> str:
    """A claude session with only its session_meta."""
    return transcript.create(tiers, "claude", project="/abs/root", worktree="/abs/root",
                             branch="main")
