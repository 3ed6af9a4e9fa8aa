"""The codex backend (runtime/backends/codex.py) driving the real `codex app-server` offline.

Each test runs CodexBackend from asyncio against the scripted model server: a command that asks
for approval, allowed and denied; an interrupt during a slow command; resume and fork of a thread
in new processes; bypassed permissions letting a command write in the workspace; a command a
read-only sandbox refuses, reported all the same. A program that is missing or ends at once, and
lines that are not events, are in tests/runtime/backends/test_codex.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from pathlib import Path
from typing import Any

import pytest

from coding_os.runtime.backend import BackendConfig, BackendEvent
from coding_os.runtime.backends.codex import CodexBackend
from tests.e2e.harness import CODEX_BIN, codex_env, write_codex_config
from tests.e2e.model_server import ModelServer, Text, ToolCall, when_prompted
from tests.helpers import require_clients

pytestmark = pytest.mark.e2e

WAIT = 30.0  # seconds any one event may take before the test fails


def codex_config(tmp_path: Path, server: ModelServer, **fields: Any) -> BackendConfig:
    """A config running the pinned Codex in `tmp_path/project` against `server`."""
    require_clients()
    home = tmp_path / "home"
    codex_home = home / ".codex"
    if not (codex_home / "config.toml").exists():
        write_codex_config(codex_home, server)
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    options = {"program": str(CODEX_BIN), "stderr_path": str(tmp_path / "codex.stderr")}
    return BackendConfig(cwd=str(project), env=codex_env(home, codex_home), options=options,
                         **fields)


async def until(events: AsyncIterator[BackendEvent], wanted: Collection[str]) -> list[BackendEvent]:
    """The events up to and including the first of a type in `wanted`.

    Raises:
        AssertionError: the events ended first.
        TimeoutError: none came within WAIT seconds.
    """
    seen: list[BackendEvent] = []
    while True:
        event = await asyncio.wait_for(anext(events), WAIT)
        seen.append(event)
        if event.type in wanted:
            return seen


def of_type(events: list[BackendEvent], event_type: str) -> list[BackendEvent]:
    return [event for event in events if event.type == event_type]


def run_backend(config: BackendConfig,
                scenario: Callable[[CodexBackend, str | None], Awaitable[None]]) -> None:
    """Start a backend, run `scenario` with it and its native id, and always close it."""

    async def main() -> None:
        backend = CodexBackend()
        try:
            native_id = await asyncio.wait_for(backend.start(config), WAIT)
            await scenario(backend, native_id)
        finally:
            await backend.close()

    asyncio.run(main())


def test_an_allowed_command_runs_after_its_approval_and_the_turn_completes(tmp_path: Path) -> None:
    script = [ToolCall("exec_command", {"cmd": "echo approved > ran.txt"}), Text("Ran it.")]
    with ModelServer(script) as server:
        config = codex_config(tmp_path, server)

        async def scenario(backend: CodexBackend, native_id: str | None) -> None:
            assert native_id
            events = backend.events()
            await backend.submit("Run the command")
            asked = await until(events, {"approval_request"})
            call = of_type(asked, "tool_call")[-1]
            request = asked[-1]
            assert call.fields["tool"] == "commandExecution"
            assert "echo approved > ran.txt" in str(request.fields["input"]["command"])
            assert request.fields["call_id"] == call.fields["call_id"]
            assert not (Path(config.cwd) / "ran.txt").exists()  # nothing runs before the answer
            await backend.answer(request.fields["request"], True)
            rest = await until(events, {"task_complete", "turn_aborted"})
            result = of_type(rest, "tool_result")[0]
            assert (result.fields["call_id"], result.fields["ok"]) == (call.fields["call_id"], True)
            assert [e.fields["text"] for e in of_type(rest, "agent_message")] == ["Ran it."]
            assert "".join(e.fields["text"] for e in of_type(rest, "agent_message_delta")) == \
                "Ran it."
            done = rest[-1]
            assert done.type == "task_complete"
            assert done.fields["usage"]["input"] > 0 and done.fields["usage"]["output"] > 0

        run_backend(config, scenario)
    assert (Path(config.cwd) / "ran.txt").read_text(encoding="utf-8") == "approved\n"


def test_a_denied_command_does_not_run(tmp_path: Path) -> None:
    script = [ToolCall("exec_command", {"cmd": "echo denied > ran.txt"}), Text("Understood.")]
    with ModelServer(script) as server:
        config = codex_config(tmp_path, server)

        async def scenario(backend: CodexBackend, native_id: str | None) -> None:
            events = backend.events()
            await backend.submit("Run the command")
            request = (await until(events, {"approval_request"}))[-1]
            await backend.answer(request.fields["request"], False)
            rest = await until(events, {"task_complete", "turn_aborted"})
            result = of_type(rest, "tool_result")[0]
            assert result.fields["ok"] is False and result.fields["status"] == "declined"
            assert rest[-1].type == "task_complete"
            await backend.answer(request.fields["request"], True)  # answered already
            assert (await until(events, {"error"}))[-1].fields["fatal"] is False

        run_backend(config, scenario)
    assert not (Path(config.cwd) / "ran.txt").exists()


def test_an_interrupt_during_a_slow_command_aborts_the_turn_and_the_next_turn_runs(
        tmp_path: Path) -> None:
    slow = ToolCall("exec_command", {"cmd": "sleep 9.37; echo late > late.txt"})
    script = [when_prompted("slow", slow, Text("Back again.")), Text("Back again.")]
    with ModelServer(script) as server:
        config = codex_config(tmp_path, server, permission_mode="bypassPermissions")

        async def scenario(backend: CodexBackend, native_id: str | None) -> None:
            events = backend.events()
            await backend.submit("Run the slow command")
            started = await until(events, {"tool_call"})
            assert "sleep 9.37" in str(started[-1].fields["input"])
            await backend.interrupt()
            ended = await until(events, {"task_complete", "turn_aborted"})
            assert ended[-1] == BackendEvent("turn_aborted", {"reason": "interrupted"})
            await backend.submit("Are you there?")
            after = await until(events, {"task_complete", "turn_aborted"})
            assert after[-1].type == "task_complete"
            assert [e.fields["text"] for e in of_type(after, "agent_message")] == ["Back again."]

        run_backend(config, scenario)


def test_a_thread_resumes_in_a_new_process_and_forks_under_a_new_id(tmp_path: Path) -> None:
    with ModelServer([Text("Noted.")]) as server:
        config = codex_config(tmp_path, server)
        first: list[str] = []

        async def remember(backend: CodexBackend, native_id: str | None) -> None:
            assert native_id
            first.append(native_id)
            events = backend.events()
            await backend.submit("Remember the word PAPAYA")
            assert (await until(events, {"task_complete", "turn_aborted"}))[-1].type == \
                "task_complete"

        def continued(prompt: str) -> Callable[[CodexBackend, str | None], Awaitable[None]]:
            async def scenario(backend: CodexBackend, native_id: str | None) -> None:
                events = backend.events()
                await backend.submit(prompt)
                assert (await until(events, {"task_complete", "turn_aborted"}))[-1].type == \
                    "task_complete"
                first.append(str(native_id))
            return scenario

        run_backend(config, remember)
        resumed = dataclasses.replace(config, native_id=first[0])
        run_backend(resumed, continued("Which word was it?"))
        forked = dataclasses.replace(config, native_id=first[0], fork=True)
        run_backend(forked, continued("And in the fork?"))
        requests = [str(r.body) for r in server.requests_to("/v1/responses")
                    if r.answer.startswith("step")]
    assert first[1] == first[0]  # resume keeps the thread
    assert first[2] not in (first[0], "None")  # a fork is a thread of its own
    resumed_request = next(r for r in requests if "Which word was it?" in r)
    forked_request = next(r for r in requests if "And in the fork?" in r)
    assert "PAPAYA" in resumed_request and "PAPAYA" in forked_request
    assert "Which word was it?" in forked_request  # the fork holds the whole thread so far


def test_bypassing_permissions_lets_a_command_write_in_the_workspace(tmp_path: Path) -> None:
    script = [ToolCall("exec_command", {"cmd": "echo bypassed > ran.txt"}), Text("Wrote it.")]
    with ModelServer(script) as server:
        config = codex_config(tmp_path, server, permission_mode="bypassPermissions")

        async def scenario(backend: CodexBackend, native_id: str | None) -> None:
            events = backend.events()
            await backend.submit("Write the file")
            seen = await until(events, {"task_complete", "turn_aborted"})
            assert not of_type(seen, "approval_request")  # nothing asked: permissions bypassed
            result = of_type(seen, "tool_result")[0]
            assert (result.fields["ok"], result.fields["exit_code"]) == (True, 0)
            assert seen[-1].type == "task_complete"

        run_backend(config, scenario)
    assert (Path(config.cwd) / "ran.txt").read_text(encoding="utf-8") == "bypassed\n"


def test_a_command_the_sandbox_stops_still_shows_as_a_failed_tool_call(tmp_path: Path) -> None:
    """Codex sends no item for a command its sandbox refused; the backend still reports it."""
    script = [ToolCall("exec_command", {"cmd": "echo sandboxed > ran.txt"}), Text("It failed.")]
    with ModelServer(script) as server:
        config = codex_config(tmp_path, server, permission_mode="bypassPermissions")
        config = dataclasses.replace(config, options={**config.options, "sandbox": "read-only"})

        async def scenario(backend: CodexBackend, native_id: str | None) -> None:
            events = backend.events()
            await backend.submit("Write the file")
            seen = await until(events, {"task_complete", "turn_aborted"})
            calls, results = of_type(seen, "tool_call"), of_type(seen, "tool_result")
            assert len(calls) == 1 and len(results) == 1
            assert seen.index(calls[0]) < seen.index(results[0])
            assert calls[0].fields["tool"] == "commandExecution"
            assert "echo sandboxed > ran.txt" in str(calls[0].fields["input"]["command"])
            result = results[0].fields
            assert result["call_id"] == calls[0].fields["call_id"]
            assert (result["ok"], result["exit_code"]) == (False, 1)
            assert "Read-only file system" in str(result["output"])
            assert [e.fields["text"] for e in of_type(seen, "agent_message")] == ["It failed."]
            assert not [e for e in of_type(seen, "native")
                        if str(e.fields["raw"].get("method", "")).startswith("rawResponse")]

        run_backend(config, scenario)
    assert not (Path(config.cwd) / "ran.txt").exists()
