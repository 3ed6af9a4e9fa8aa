"""How `cos run` shows a session (docs/cli.md, `cos run`): its events as readable text, or as
the protocol's JSON lines; on a terminal it also asks the approvals and reads further prompts.

Text: an agent's messages as they are, each tool call folded to one line (`▸ Tool summary ·
ok`) when its result comes, errors and aborted tasks on stderr; everything from the agent with
its control characters made visible. With `status` (stdout a terminal), the tool running and
its elapsed time stay on one line below the output (`▸ Tool summary · running 3s`), redrawn
about once a second and cleared before anything else is printed, so the next output replaces
it. JSON: each event exactly as `cos protocol` sends it, one object per line, and nothing else
on stdout.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import time
from typing import Any, TextIO

from coding_os import jsonwire
from coding_os.interfaces.output import visible
from coding_os.runtime import wire

__all__ = ["TextView", "JsonView", "tool_summary", "elapsed_text", "STATUS_EVERY_S"]

Event = dict[str, Any]

SUMMARY_MAX = 80
STATUS_EVERY_S = 1.0  # how often the running tool's line is redrawn
# The terminal's own sequences, written as they are (not through `visible`): back to the start
# of the line, and erase from there to its end.
_LINE_START = "\r"
_ERASE_LINE = "\x1b[K"
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


def elapsed_text(seconds: float) -> str:
    """`7s`, `1m05s`, `2h03m`: a running tool's elapsed time, as its status line shows it."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


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
    further prompts read at the terminal on stdin; with `status`, the running tool's line."""

    def __init__(self, *, interactive: bool, status: bool = False, out: TextIO | None = None,
                 err: TextIO | None = None) -> None:
        self.interactive = interactive
        self.status = status
        self._out = out or sys.stdout
        self._err = err or sys.stderr
        self._terminal = _Terminal() if interactive else None
        self._calls: dict[object, str] = {}  # call id → `Tool summary`, until its result
        self._started: dict[object, float] = {}  # call id → when its tool_call came (monotonic)
        self._drawn = False  # the status line is on the screen
        self._asking = False  # a question waits on the terminal: no status line under it
        self._ticker: asyncio.TimerHandle | None = None

    def _print(self, text: str, *, err: bool = False) -> None:
        self._clear_status()
        stream = self._err if err else self._out
        stream.write(visible(text) + "\n")
        stream.flush()
        self._draw_status()

    def _status_text(self) -> str | None:
        """`▸ Tool summary · running 3s` for the latest call still running, or None."""
        if not self._started:
            return None
        call, started = max(self._started.items(), key=lambda item: item[1])
        summary = self._calls.get(call) or f"tool {call}"
        more = len(self._started) - 1
        text = visible(f"▸ {summary} · running {elapsed_text(time.monotonic() - started)}"
                       + (f" (and {more} more)" if more else ""))
        try:
            width = os.get_terminal_size(self._out.fileno()).columns
        except (OSError, ValueError, AttributeError):
            width = shutil.get_terminal_size().columns
        # One column short of the width: a line that fills it would wrap, and a carriage
        # return would then go back to the start of its second row only.
        return text if len(text) < width else text[:max(width - 2, 0)] + "…"

    def _draw_status(self) -> None:
        if not self.status or self._asking:
            return
        text = self._status_text()
        if text is None:
            return
        self._out.write(_LINE_START + text + _ERASE_LINE)
        self._out.flush()
        self._drawn = True

    def _clear_status(self) -> None:
        if self._drawn:
            self._out.write(_LINE_START + _ERASE_LINE)
            self._out.flush()
            self._drawn = False

    def _tick(self) -> None:
        """Redraw the status line with its time, and again in STATUS_EVERY_S while a tool runs."""
        self._ticker = None
        if not self._started:
            return
        self._draw_status()
        self._ticker = asyncio.get_running_loop().call_later(STATUS_EVERY_S, self._tick)

    def _tool_started(self, call: object, summary: str) -> None:
        self._calls[call] = summary
        if not self.status:
            return
        self._started[call] = time.monotonic()
        self._draw_status()
        if self._ticker is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # shown outside an event loop: no redraws, the line stays
                return
            self._ticker = loop.call_later(STATUS_EVERY_S, self._tick)

    def _tools_ended(self, *calls: object) -> None:
        for call in calls:
            self._started.pop(call, None)
        if not self._started:
            self._clear_status()
            if self._ticker is not None:
                self._ticker.cancel()
                self._ticker = None

    def note(self, message: str) -> None:
        self._print(f"cos: {message}", err=True)

    def show(self, event: Event) -> None:
        msg = event["msg"]
        kind = msg["type"]
        if kind == wire.AGENT_MESSAGE:
            self._print(str(msg.get("text", "")))
        elif kind == wire.TOOL_CALL:
            self._tool_started(msg.get("call_id"), tool_summary(msg.get("tool"), msg.get("input")))
        elif kind == wire.TOOL_RESULT:
            self._tools_ended(msg.get("call_id"))
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
            self._tools_ended(*self._started)
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
        self._clear_status()
        self._asking = True
        try:
            self._err.write(visible(f"Allow {tool_summary(msg.get('tool'), msg.get('input'))}? "
                                    "[y/N] "))
            self._err.flush()
            answer = await self._terminal.read_line()
        finally:
            self._asking = False
        self._draw_status()
        return answer is not None and answer.strip().lower() in ("y", "yes")

    async def next_prompt(self) -> str | None:
        if self._terminal is None:
            return None
        self._clear_status()
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
