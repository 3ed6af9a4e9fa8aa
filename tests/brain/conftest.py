"""Fixtures of the brain's tests: a project with a state dir, and panels with sessions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coding_os.state.identity import mint_session_id
from coding_os.state.statefile import write_state
from coding_os.state.tiers import Tiers


@pytest.fixture
def project(repo: Path) -> Path:
    """A git checkout with its `.coding-os` state dir."""
    (repo / ".coding-os").mkdir()
    return repo


@pytest.fixture
def tiers(project: Path) -> Tiers:
    return Tiers(str(project / ".coding-os"))


def start_panel(tiers: Tiers, panel: str, agent: str = "claude") -> str:
    """Give `panel` a current session, as its SessionStart hook does; return the session."""
    session = mint_session_id(agent)
    write_state(os.path.join(tiers.panel_dir(agent, panel), "session-id"), session, "-")
    return session
