"""The whole-process tests with the real clients: each is marked e2e (`make test-fast` leaves
them out), and their fixture, a scripted Gemini API server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.gemini_server import GeminiServer


@pytest.fixture
def gemini_server() -> Iterator[GeminiServer]:
    """A scripted Gemini API server on 127.0.0.1 for one test: set its `scripts` first."""
    with GeminiServer() as server:
        yield server


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of this folder e2e: each drives a real client."""
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.e2e)
