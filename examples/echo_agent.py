"""A cos-native agent with no model: it echoes what it is told, and edits a file when asked.

Run it with cos (docs/runtime.md, "Python agents"):

    cos protocol --agent python
    {"id":"1","op":{"type":"configure","target":"examples/echo_agent.py:EchoAgent"}}
    {"id":"2","op":{"type":"user_input","text":"hello"}}
    {"id":"3","op":{"type":"user_input","text":"write notes.txt: a line"}}

What it understands:

- `write FILE: TEXT`: asks for approval (tool `Write`), then appends TEXT as a line to FILE
  (inside the session's directory); says so when it is denied.
- `sleep N`: says it sleeps, waits N seconds (a slow step, to interrupt), then says it woke.
- `recall`: answers `turn N; you said: A | B | …` with the inputs of the earlier turns, from
  `session.history` (the conversation before this input, also after a resume or a fork).
- anything else: answers `echo: <the input>`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any


class EchoAgent:
    """The agent: one `run_turn` per user input."""

    async def run_turn(self, session: Any, user_input: str) -> AsyncIterator[dict[str, Any]]:
        text = user_input.strip()
        if text.startswith("write ") and ":" in text:
            name, _, content = text[len("write "):].partition(":")
            async for event in self._write(session, name.strip(), content.strip()):
                yield event
            return
        if text.startswith("sleep "):
            seconds = float(text.split()[1])
            yield {"type": "agent_message", "text": f"sleeping {seconds:g}s"}
            await asyncio.sleep(seconds)
            yield {"type": "agent_message", "text": "awake"}
            return
        if text == "recall":
            said = [message["text"] for message in session.history if message["role"] == "user"]
            yield {"type": "agent_message",
                   "text": f"turn {len(said) + 1}; you said: {' | '.join(said) or 'nothing'}"}
            return
        yield {"type": "agent_message", "text": f"echo: {user_input}"}

    async def _write(self, session: Any, name: str,
                     content: str) -> AsyncIterator[dict[str, Any]]:
        root = os.path.realpath(session.cwd)
        path = os.path.realpath(os.path.join(root, name))
        if os.path.commonpath([root, path]) != root:
            yield {"type": "agent_message", "text": f"{name} is outside {root}; not written"}
            return
        tool_input = {"file_path": path, "content": content}
        if not await session.approve("Write", tool_input):
            yield {"type": "agent_message", "text": f"not allowed to write {name}"}
            return
        yield {"type": "tool_call", "call_id": "w1", "tool": "Write", "input": tool_input}
        with open(path, "a", encoding="utf-8") as f:
            f.write(content + "\n")
        yield {"type": "tool_result", "call_id": "w1", "ok": True, "output": f"wrote {name}"}
        yield {"type": "agent_message", "text": f"wrote {name}"}
