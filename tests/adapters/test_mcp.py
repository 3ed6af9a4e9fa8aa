"""Reading an agent's project MCP registration (adapters/mcp.py): a repository's `.mcp.json`
and `.codex/config.toml` are data from elsewhere, read with bounds (DESIGN.md §11)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from coding_os.adapters.mcp import read_registration, registered_server
from coding_os.errors import InvalidInput


def test_the_cos_entry_is_read_back_as_init_writes_it(tmp_path: Path) -> None:
    entry = {"type": "stdio", "command": "/usr/bin/cos", "args": ["mcp"]}
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"cos": entry}}),
                                        encoding="utf-8")
    assert read_registration("claude", str(tmp_path)) == entry
    assert registered_server("claude", str(tmp_path)) == entry


def test_a_registration_nested_too_deeply_is_a_value_error_not_a_recursion_error(
        tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text('{"mcpServers":' + "[" * 100_000 + "]" * 100_000 + "}",
                                        encoding="utf-8")
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000,
                                                     encoding="utf-8")
    for agent in ("claude", "codex"):
        with pytest.raises(ValueError, match="nested"):
            read_registration(agent, str(tmp_path))
        assert registered_server(agent, str(tmp_path)) is None


def test_a_registration_that_is_not_a_regular_file_is_never_read(tmp_path: Path) -> None:
    os.symlink("/dev/zero", tmp_path / ".mcp.json")
    with pytest.raises(InvalidInput, match="not a regular file"):
        read_registration("claude", str(tmp_path))
    assert registered_server("claude", str(tmp_path)) is None
