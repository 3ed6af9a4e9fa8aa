"""Fixtures of the brain's tests: the tiers of a project's state dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding_os.state.tiers import Tiers


@pytest.fixture
def tiers(project: Path) -> Tiers:
    return Tiers(str(project / ".coding-os"))
