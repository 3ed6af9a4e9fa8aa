"""How `cos run` shows a session (docs/cli.md, `cos run`): its events as readable text, or as
the protocol's JSON lines; on a terminal it also asks the approvals and reads further prompts.

Text: an agent's messages as they are, each tool call folded to one line (`▸ Tool summary ·
ok`) when its result comes, errors and aborted tasks on stderr; everything from the agent with
its control characters made visible. JSON: each event exactly as `cos protocol` sends it, one
object per line, and nothing else on stdout.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any, TextIO

from coding_os import jsonwire
from coding_os.interfaces.output import visible
from coding_os.runtime import wire

__all__ = ["TextView", "JsonView", "tool_summary"]

Event = dict[str, Any]

SUMMARY_MAX = 80
# The input fields that say what a tool call does, most telling first.
_SUMMARY_FIELDS = ("command", "file_path", "path", "pattern", "query", "url", "description",
                   "prompt")


def _one_line(text: str, limit: int = SUMMARY_MAX) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def tool_summary(tool: object, tool_input: object) -> str:
    """`Tool summary`: the tool's name and the one input field that says what it does (or the
    input in short), on one line."""
    name = str(tool) if tool is not None else "tool"
    if isinstance(tool_input, dict):
        for key in _SUMMARY_FIELDS:
            value = tool_input.get(key)
            if isinstance(value, str) and value:
                return f"{name} {_one_line(value)}"
        if not tool_input:
            return name
        return f"{name} {_one_line(json.dumps(tool_input, ensure_ascii=False, default=str))}"
    if tool_input is None:
        return name
    return f"{name} {_one_line(str(tool_input))}"


class _Terminal:
    """Lines typed at the terminal on stdin, read in the event loop without changing the
    terminal's settings (it stays in canonical mode: one read gives one line)."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self.ended = False

    async def read_line(self) -> str | None:
        """The next line without its newline; None at Ctrl-D (the end of input)."""
        if self.ended:
            return None
        loop = asyncio.get_running_loop()
        line: asyncio.Future[str | None] = loop.create_future()
        typed = bytearray()

        def readable() -> None:
            try:
                chunk = os.read(self.fd, 4096)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if line.done():
                return
            if not chunk:
                self.ended = True
                line.set_result(None)
                return
            typed.extend(chunk)
            if b"\n" in typed:
                line.set_result(typed.split(b"\n", 1)[0].decode("utf-8", "replace"))

        loop.add_reader(self.fd, readable)
        try:
            return await line
        finally:
            loop.remove_reader(self.fd)


class TextView:
    """Events as text on stdout (errors on stderr); with `interactive`, approvals asked and
    further prompts read at the terminal on stdin."""

    def __init__(self, *, interactive: bool, out: TextIO | None = None,
                 err: TextIO | None = None) -> None:
        self.interactive = interactive
        self._out = out or sys.stdout
        self._err = err or sys.stderr
        self._terminal = _Terminal() if interactive else None
        self._calls: dict[object, str] = {}  # call id → `Tool summary`, until its result

    def _print(self, text: str, *, err: bool = False) -> None:
        stream = self._err if err else self._out
        stream.write(visible(text) + "\n")
        stream.flush()

    def note(self, message: str) -> None:
        self._print(f"cos: {message}", err=True)

    def show(self, event: Event) -> None:
        msg = event["msg"]
        kind = msg["type"]
        if kind == wire.AGENT_MESSAGE:
            self._print(str(msg.get("text", "")))
        elif kind == wire.TOOL_CALL:
            self._calls[msg.get("call_id")] = tool_summary(msg.get("tool"), msg.get("input"))
        elif kind == wire.TOOL_RESULT:
            summary = self._calls.pop(msg.get("call_id"), None) or f"tool {msg.get('call_id')}"
            if msg.get("ok"):
                self._print(f"▸ {summary} · ok")
            else:
                output = msg.get("output")
                why = _one_line(output if isinstance(output, str) else json.dumps(output))
                self._print(f"▸ {summary} · failed" + (f": {why}" if why else ""))
        elif kind == wire.ERROR:
            self._print(f"cos: error: {msg.get('message')}", err=True)
        elif kind == wire.SESSION_CONFIGURED:
            self._print(f"cos: session {event.get('session')} ({msg.get('agent')}, "
                        f"{msg.get('cwd')})", err=True)
        elif kind in wire.TASK_ENDS:
            for summary in self._calls.values():  # calls the task ended without a result
                self._print(f"▸ {summary} · no result")
            self._calls.clear()
            if kind == wire.TURN_ABORTED:
                self._print(f"cos: task {msg.get('task')} aborted ({msg.get('reason')})",
                            err=True)
            else:
                usage = msg.get("usage")
                code = usage.get("exit_code") if isinstance(usage, dict) else None
                if isinstance(code, int) and code != 0:
                    self._print(f"cos: task {msg.get('task')} exited {code}", err=True)
        # task_started, deltas (the whole message follows) and native events: nothing

    async def approve(self, event: Event) -> bool:
        msg = event["msg"]
        if self._terminal is None:
            return False
        self._err.write(visible(f"Allow {tool_summary(msg.get('tool'), msg.get('input'))}? "
                                "[y/N] "))
        self._err.flush()
        answer = await self._terminal.read_line()
        return answer is not None and answer.strip().lower() in ("y", "yes")

    async def next_prompt(self) -> str | None:
        if self._terminal is None:
            return None
        self._err.write("› ")
        self._err.flush()
        text = await self._terminal.read_line()
        if text is None or not text.strip():
            if text is None:
                self._err.write("\n")
            return None
        return text


class JsonView:
    """Each event as `cos protocol` sends it, one JSON object per line on stdout; it asks
    nothing and reads no further prompt."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self._out = out or sys.stdout
        self._err = err or sys.stderr

    def show(self, event: Event) -> None:
        self._out.write(jsonwire.dumps(event) + "\n")
        self._out.flush()

    def note(self, message: str) -> None:
        self._err.write(visible(f"cos: {message}") + "\n")
        self._err.flush()

    async def approve(self, event: Event) -> bool:
        return False

    async def next_prompt(self) -> str | None:
        return None
