"""Claude Code's stream-json output, as the benchmarks that start it directly read it."""

from __future__ import annotations

from typing import Any

__all__ = ["assistant_text"]


def assistant_text(line: dict[str, Any]) -> str | None:
    """The first text block of an `assistant` line, or None for any other line."""
    if line.get("type") != "assistant":
        return None
    message = line.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "text":
            return str(block.get("text"))
    return None
