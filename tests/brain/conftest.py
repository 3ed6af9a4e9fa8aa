"""Fixtures of the brain's tests: the tiers of a project's state dir, made as cos makes it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coding_os.state import registry
from coding_os.state.tiers import Tiers


@pytest.fixture
def tiers(project: Path, isolated_env: Path) -> Tiers:
    state_dir = str(project / ".coding-os")
    registry.create(state_dir, os.path.join(isolated_env, ".coding-os"))
    return Tiers(state_dir)
