"""A real `cos web --json --port 0` started in the test's project (`web`). Its clients and what a
test reads of its answers (`Web`, `Page`, `page`, `read_sse`) are in tests/helpers.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import Web, start_web, stop_web


@pytest.fixture
def web(project: Path) -> Iterator[Web]:
    """`cos web` in the project for one test, ended afterwards."""
    shared = start_web(project)
    try:
        yield shared
    finally:
        stop_web(shared)
