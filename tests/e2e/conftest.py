"""Fixtures of the whole-process tests with the real clients: a scripted Gemini API server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.gemini_server import GeminiServer


@pytest.fixture
def gemini_server() -> Iterator[GeminiServer]:
    """A scripted Gemini API server on 127.0.0.1 for one test: set its `scripts` first."""
    with GeminiServer() as server:
        yield server
