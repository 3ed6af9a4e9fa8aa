"""Fixtures of the whole-process tests: a checkout whose HOME holds copies of the fixtures where
Claude Code and Codex keep their logs; a scripted Gemini API server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.gemini_server import GeminiServer
from tests.helpers import copy_claude_fixtures, copy_codex_fixtures


@pytest.fixture
def checkout(isolated_env: Path, repo: Path) -> tuple[Path, dict[str, str]]:
    """An initialised checkout, and the environment pointing at fixture-filled native dirs."""
    (repo / ".coding-os").mkdir(mode=0o700)  # as cos makes it
    copy_claude_fixtures(isolated_env / ".claude")
    codex_home = isolated_env / "codex-home"
    copy_codex_fixtures(codex_home)
    return repo, {"CODEX_HOME": str(codex_home)}


@pytest.fixture
def gemini_server() -> Iterator[GeminiServer]:
    """A scripted Gemini API server on 127.0.0.1 for one test: set its `scripts` first."""
    with GeminiServer() as server:
        yield server
