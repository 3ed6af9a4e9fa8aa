"""The `claude` backend of the engine driving the real Claude Code (stream-json, one process per
session) against the scripted model server: tool calls and their approvals, interrupts, resume
and fork by native id. What it does with a missing program or a program that says odd things is
in tests/runtime/backends/test_claude.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from coding_os.runtime.backend import BackendConfig, BackendEvent
from coding_os.runtime.backends.claude import ClaudeBackend
from tests.e2e.harness import CLAUDE_BIN, claude_env, claude_transcript
from tests.e2e.model_server import ModelServer, Step, Text, ToolCall, when_prompted
from tests.helpers import require_clients

pytestmark = pytest.mark.e2e

TIMEOUT = 30.0  # seconds for any one thing the client does; a test takes a few seconds


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 4 * TIMEOUT))


async def until(events: AsyncIterator[BackendEvent], wanted: str,
                seen: list[BackendEvent]) -> BackendEvent:
    """Read events (into `seen`) up to the first of type `wanted`."""
    while True:
        event = await asyncio.wait_for(anext(events), TIMEOUT)
        seen.append(event)
        if event.type == wanted:
            return event


async def wait_for_file(path: Path) -> None:
    async with asyncio.timeout(TIMEOUT):
        while not path.exists():
            await asyncio.sleep(0.05)


def types(seen: list[BackendEvent]) -> list[str]:
    return [event.type for event in seen if event.type != "native"]


class Claude:
    """Where a test runs Claude Code: a project directory, a private HOME, a model server."""

    def __init__(self, tmp_path: Path, server: ModelServer) -> None:
        self.project = tmp_path / "project"
        self.project.mkdir(exist_ok=True)
        self.home = tmp_path / "claude-home"
        self.home.mkdir(exist_ok=True)
        self.server = server
        self.stderr = tmp_path / "claude-stderr.log"

    def config(self, **fields: Any) -> BackendConfig:
        return BackendConfig(cwd=str(self.project), env=claude_env(self.server, self.home),
                             options={"program": str(CLAUDE_BIN)}, **fields)

    def agent_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.server.requests_to("/v1/messages") if r.body.get("tools")]


@pytest.fixture
def claude_at(tmp_path: Path) -> Iterator[Callable[[list[Step]], Claude]]:
    require_clients()
    servers: list[ModelServer] = []

    def make(script: list[Step]) -> Claude:
        servers.append(ModelServer(script).start())
        return Claude(tmp_path, servers[-1])

    yield make
    for server in servers:
        server.stop()


def test_an_allowed_tool_runs_and_the_turn_reports_each_step(
        claude_at: Callable[[list[Step]], Claude]) -> None:
    at = claude_at([])
    target = at.project / "out.txt"
    at.server.scripts[""] = [ToolCall("Write", {"file_path": str(target), "content": "hi\n"}),
                             Text("Wrote it.")]

    async def test() -> None:
        backend = ClaudeBackend()
        try:
            native_id = await backend.start(at.config(model="scripted-model"))
            events = backend.events()
            await backend.submit("write out.txt")
            seen: list[BackendEvent] = []
            approval = await until(events, "approval_request", seen)
            assert (approval.fields["tool"], approval.fields["input"]) == \
                ("Write", {"file_path": str(target), "content": "hi\n"})
            assert not target.exists()  # nothing runs before the answer
            await backend.answer(str(approval.fields["request"]), allow=True)
            done = await until(events, "task_complete", seen)
        finally:
            await backend.close()
        assert types(seen) == ["tool_call", "approval_request", "tool_result", "agent_message",
                               "task_complete"]
        call, result = (next(e for e in seen if e.type == kind)
                        for kind in ("tool_call", "tool_result"))
        assert (call.fields["tool"], result.fields["call_id"], result.fields["ok"]) == \
            ("Write", call.fields["call_id"], True)
        assert [e.fields["text"] for e in seen if e.type == "agent_message"] == ["Wrote it."]
        usage = done.fields["usage"]
        assert isinstance(usage, dict) and usage["input"] > 0 and usage["output"] > 0
        assert target.read_text(encoding="utf-8") == "hi\n"
        assert {request["model"] for request in at.agent_requests()} == {"scripted-model"}
        assert native_id is not None and native_id == backend.native_id
        assert claude_transcript(at.home, at.project, native_id).exists()

    run(test)


def test_a_denied_tool_does_not_run_and_the_agent_is_told_so(
        claude_at: Callable[[list[Step]], Claude]) -> None:
    at = claude_at([])
    target = at.project / "out.txt"
    target.write_text("before\n", encoding="utf-8")
    at.server.scripts[""] = [ToolCall("Bash", {"command": f"echo after > {target}",
                                               "description": "overwrite"}),
                             Text("Understood.")]

    async def test() -> None:
        backend = ClaudeBackend()
        try:
            await backend.start(at.config())
            events = backend.events()
            await backend.submit("overwrite out.txt")
            seen: list[BackendEvent] = []
            approval = await until(events, "approval_request", seen)
            await backend.answer(str(approval.fields["request"]), allow=False)
            await until(events, "task_complete", seen)
        finally:
            await backend.close()
        result = [e for e in seen if e.type == "tool_result"][0]
        assert result.fields["ok"] is False
        assert target.read_text(encoding="utf-8") == "before\n"
        assert "denied" in json.dumps(at.agent_requests()[-1]["messages"][-1])

    run(test)


def test_an_interrupt_aborts_the_turn_and_the_next_input_runs_in_the_same_process(
        claude_at: Callable[[list[Step]], Claude]) -> None:
    at = claude_at([])
    started, late = at.project / "started.txt", at.project / "late.txt"
    slow = ToolCall("Bash", {"command": f"touch {started}; for i in $(seq 1 300); do sleep 0.1; "
                                        f"done; touch {late}", "description": "slow"})
    second = Text("Second turn done.")
    at.server.scripts[""] = [when_prompted("second", second, slow),
                             when_prompted("second", second, Text("First turn done."))]

    async def test() -> None:
        backend = ClaudeBackend()
        try:
            await backend.start(at.config())
            events = backend.events()
            await backend.submit("first: run the slow command")
            seen: list[BackendEvent] = []
            approval = await until(events, "approval_request", seen)
            await backend.answer(str(approval.fields["request"]), allow=True)
            await wait_for_file(started)
            await backend.interrupt()
            aborted = await until(events, "turn_aborted", seen)
            assert aborted.fields == {"reason": "interrupted"}
            assert "task_complete" not in types(seen)
            # The same process and the same events go on: the interrupt did not end the session.
            await backend.submit("second: just answer")
            seen.clear()
            await until(events, "task_complete", seen)
            assert [e.fields["text"] for e in seen if e.type == "agent_message"] == \
                ["Second turn done."]
        finally:
            await backend.close()
        assert not late.exists()

    run(test)


def test_resume_carries_the_conversation_and_fork_leaves_the_original_unchanged(
        claude_at: Callable[[list[Step]], Claude]) -> None:
    at = claude_at([Text("Noted.")])

    seen: list[BackendEvent] = []

    async def turn(backend: ClaudeBackend, config: BackendConfig, text: str) -> str | None:
        seen.clear()
        try:
            native_id = await backend.start(config)
            events = backend.events()
            await backend.submit(text)
            await until(events, "task_complete", seen)
        finally:
            await backend.close()
        return native_id

    async def test() -> None:
        first = await turn(ClaudeBackend(), at.config(permission_mode="acceptEdits"),
                           "remember the word PELICAN")
        assert first is not None
        init = next(e.fields["raw"] for e in seen if e.type == "native")
        assert isinstance(init, dict) and (init["subtype"], init["session_id"],
                                           init["permissionMode"]) == ("init", first, "acceptEdits")
        resumed = await turn(ClaudeBackend(), at.config(native_id=first), "which word?")
        assert resumed == first
        assert "PELICAN" in json.dumps(at.agent_requests()[-1]["messages"])
        original = claude_transcript(at.home, at.project, first)
        before = original.read_bytes()
        forked = await turn(ClaudeBackend(), at.config(native_id=first, fork=True), "fork it")
        assert forked is not None and forked != first
        assert "which word?" in json.dumps(at.agent_requests()[-1]["messages"])
        assert original.read_bytes() == before
        assert "fork it" in claude_transcript(at.home, at.project, forked).read_text(
            encoding="utf-8")

    run(test)
