"""The acp backend (runtime/backends/acp.py) driving a scripted ACP agent: a real process of a few
dozen lines of Python speaking ACP v1 on its stdio (JSON-RPC 2.0, one message a line), whose
prompt says what it does (`write PATH TEXT`, `shell CMD`, `terminal CMD`, `read PATH`, `wait`).

cos serves the agent's `fs` and `terminal` requests, answers its permission requests by the
session's policy with a checkpoint first, and maps its updates to §7 events; whole `cos run`
processes show that `cos rewind` undoes a file the agent wrote and one its command removed. The
real `gemini --acp` and `claude-agent-acp` drive it in tests/e2e/test_runtime_acp.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from pathlib import Path
from typing import Any

import pytest

from coding_os.errors import BackendError, InvalidInput
from coding_os.runtime.agents import settings_for
from coding_os.runtime.backend import BackendConfig, BackendEvent
from coding_os.runtime.backends.acp import AcpBackend
from tests.helpers import COS, cos, cos_json, git

WAIT = 30.0  # seconds any one event may take before the test fails

SCRIPTED_AGENT = r'''
import json, os, subprocess, sys

LOG = os.environ.get("ACP_LOG")
waiting = []  # messages read while waiting for a response


def log(entry):
    if LOG:
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def read():
    if waiting:
        return waiting.pop(0)
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    message = json.loads(line)
    log({"got": message})
    return message


def say(message):
    message["jsonrpc"] = "2.0"
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


next_id = [100]


def call(method, params):
    next_id[0] += 1
    mine = next_id[0]
    say({"id": mine, "method": method, "params": params})
    held = []
    while True:
        message = read()
        if message.get("id") == mine and "method" not in message:
            waiting[:0] = held
            return message
        held.append(message)


def update(session, body):
    say({"method": "session/update", "params": {"sessionId": session, "update": body}})


def text(session, words):
    for word in words.split(" "):
        update(session, {"sessionUpdate": "agent_message_chunk",
                         "content": {"type": "text", "text": word + " "}})


def prompt(session, line, request_id):
    for action in line.split(" && "):
        if act(session, action, request_id):
            return  # answered already
    say({"id": request_id, "result": {"stopReason": "end_turn", "usage": {
        "inputTokens": 10, "outputTokens": 3, "cachedReadTokens": 4, "totalTokens": 13}}})


def act(session, line, request_id):
    verb, _, rest = line.partition(" ")
    cwd = os.getcwd()
    if verb == "write":
        path, _, content = rest.partition(" ")
        update(session, {"sessionUpdate": "tool_call", "toolCallId": "w1", "title": "write",
                         "kind": "edit", "status": "pending",
                         "rawInput": {"path": path, "content": content}})
        answer = call("fs/write_text_file", {"sessionId": session,
                                             "path": os.path.join(cwd, path),
                                             "content": content})
        failed = "error" in answer
        update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "w1",
                         "status": "failed" if failed else "completed",
                         "content": [{"type": "content", "content": {
                             "type": "text", "text": json.dumps(answer.get("error"))}}]})
    elif verb == "read":
        answer = call("fs/read_text_file", {"sessionId": session, "path": rest, "line": 2,
                                            "limit": 1})
        text(session, "read:" + json.dumps(answer.get("result", answer.get("error"))))
    elif verb == "shell":
        update(session, {"sessionUpdate": "tool_call", "toolCallId": "s1", "title": rest,
                         "kind": "execute", "status": "pending", "rawInput": {"command": rest}})
        answer = call("session/request_permission", {
            "sessionId": session, "toolCall": {"toolCallId": "s1"},
            "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "always", "name": "Always", "kind": "allow_always"},
                        {"optionId": "no", "name": "Reject", "kind": "reject_once"}]})
        outcome = answer["result"]["outcome"]
        log({"outcome": outcome})
        if outcome["outcome"] == "cancelled":
            say({"id": request_id, "result": {"stopReason": "cancelled"}})
            return True
        if outcome.get("optionId") == "yes":
            done = subprocess.run(rest, shell=True, capture_output=True, text=True)
            update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "s1",
                             "status": "completed", "rawOutput": {"output": done.stdout}})
        else:
            update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "s1",
                             "status": "failed", "rawOutput": {"output": "rejected"}})
    elif verb == "terminal":
        made = call("terminal/create", {"sessionId": session, "command": "/bin/sh",
                                        "args": ["-c", rest], "cwd": cwd})
        terminal = made["result"]["terminalId"]
        ended = call("terminal/wait_for_exit", {"sessionId": session, "terminalId": terminal})
        output = call("terminal/output", {"sessionId": session, "terminalId": terminal})
        call("terminal/release", {"sessionId": session, "terminalId": terminal})
        text(session, "exit " + str(ended["result"]["exitCode"]) + " output "
             + output["result"]["output"].strip())
    elif verb == "wait":
        text(session, "waiting")
        while True:
            message = read()
            if message.get("method") == "session/cancel":
                say({"id": request_id, "result": {"stopReason": "cancelled"}})
                return True
    else:
        update(session, {"sessionUpdate": "agent_thought_chunk",
                         "content": {"type": "text", "text": "hmm"}})
        text(session, "you said " + line)
    return False


while True:
    message = read()
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        say({"id": message["id"], "result": {
            "protocolVersion": 1,
            "agentCapabilities": {"loadSession": True,
                                  "sessionCapabilities": {"resume": {}}}}})
    elif method in ("session/new", "session/resume"):
        session = params.get("sessionId") or "native-" + str(os.getpid())
        say({"id": message["id"], "result": {"sessionId": session, "modes": {
            "currentModeId": "yolo", "availableModes": [{"id": "default", "name": "Ask"},
                                                         {"id": "yolo", "name": "YOLO"}]}}})
    elif method == "session/set_mode":
        say({"id": message["id"], "result": {}})
    elif method == "session/prompt":
        blocks = params["prompt"]
        prompt(params["sessionId"], blocks[0]["text"], message["id"])
'''


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    """The scripted ACP agent as a program."""
    program = tmp_path / "scripted-acp-agent"
    program.write_text(f"#!{sys.executable}\n{SCRIPTED_AGENT}", encoding="utf-8")
    program.chmod(0o755)
    return program


def received(log: Path) -> list[dict[str, Any]]:
    """What the scripted agent logged: each message it read, and the outcomes it got."""
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


async def until(events: AsyncIterator[BackendEvent], wanted: Collection[str]) -> list[BackendEvent]:
    """The events up to and including the first of a type in `wanted`."""
    seen: list[BackendEvent] = []
    while True:
        event = await asyncio.wait_for(anext(events), WAIT)
        seen.append(event)
        if event.type in wanted:
            return seen


def of_type(events: list[BackendEvent], event_type: str) -> list[dict[str, object]]:
    return [dict(event.fields) for event in events if event.type == event_type]


def run_backend(tmp_path: Path, agent: Path,
                scenario: Callable[[AcpBackend, str | None, list[Any]], Awaitable[None]],
                **fields: Any) -> list[dict[str, Any]]:
    """Start the backend on the scripted agent in `tmp_path/project`, with a checkpoint that
    notes what it was given (and the agent's log at that moment); run `scenario`; always close.
    The agent's log, read at the end."""
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    log = tmp_path / "agent.log"
    checkpoints: list[Any] = []

    async def checkpoint(tool: str | None, tool_input: object) -> None:
        seen = len(received(log)) if log.exists() else 0
        checkpoints.append((tool, tool_input, seen))

    async def main() -> None:
        backend = AcpBackend()
        config = BackendConfig(cwd=str(project), env={**os.environ, "ACP_LOG": str(log)},
                               options={"command": [str(agent)]}, checkpoint=checkpoint,
                               **fields)
        try:
            native_id = await asyncio.wait_for(backend.start(config), WAIT)
            await scenario(backend, native_id, checkpoints)
        finally:
            await backend.close()

    asyncio.run(main())
    return received(log)


def test_a_prompt_streams_the_message_and_completes_with_the_turns_usage(
        tmp_path: Path, agent: Path) -> None:
    async def scenario(backend: AcpBackend, native_id: str | None, _: list[Any]) -> None:
        assert native_id is not None and native_id.startswith("native-")
        await backend.submit("hello there")
        got = await until(backend.events(), {"task_complete"})
        assert [e["text"] for e in of_type(got, "agent_message_delta")] == \
            ["you ", "said ", "hello ", "there "]
        assert of_type(got, "agent_message") == [{"text": "you said hello there "}]
        assert of_type(got, "task_complete") == [{"usage": {
            "input": 10, "output": 3, "cached_input": 4, "total": 13},
            "stop_reason": "end_turn"}]
        assert any(e.type == "native" for e in got)  # the thought

    messages = run_backend(tmp_path, agent, scenario)
    initialize = messages[0]["got"]
    assert initialize["method"] == "initialize"
    assert initialize["params"]["protocolVersion"] == 1
    assert initialize["params"]["clientCapabilities"] == {
        "fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
    # The agent started in a mode that does not ask: cos put it back in its asking mode.
    assert messages[2]["got"]["params"]["modeId"] == "default"
    methods = [m["got"].get("method") for m in messages if "got" in m]
    assert methods[:3] == ["initialize", "session/new", "session/set_mode"]


def test_a_file_write_is_checkpointed_first_and_a_path_outside_the_project_is_refused(
        tmp_path: Path, agent: Path) -> None:
    outside = tmp_path / "outside.txt"

    async def scenario(backend: AcpBackend, _: str | None, checkpoints: list[Any]) -> None:
        await backend.submit("write notes.txt hello")
        got = await until(backend.events(), {"task_complete"})
        assert of_type(got, "tool_call")[0]["tool"] == "edit"
        assert of_type(got, "tool_result")[0]["ok"] is True
        written = str((tmp_path / "project" / "notes.txt").resolve())
        assert ("Write", {"file_path": written}) in [(c[0], c[1]) for c in checkpoints]
        await backend.submit(f"write ../{outside.name} nope")
        got = await until(backend.events(), {"task_complete"})
        result = of_type(got, "tool_result")[0]
        assert result["ok"] is False and "outside the session" in str(result)
        await backend.submit(f"read {tmp_path / 'project' / 'notes.txt'}")
        got = await until(backend.events(), {"task_complete"})

    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").write_text("old\n", encoding="utf-8")
    run_backend(tmp_path, agent, scenario)
    assert (tmp_path / "project" / "notes.txt").read_text(encoding="utf-8") == "hello"
    assert not outside.exists()


def test_a_file_is_read_by_its_lines_within_the_project(tmp_path: Path, agent: Path) -> None:
    async def scenario(backend: AcpBackend, _: str | None, __: list[Any]) -> None:
        await backend.submit(f"read {tmp_path / 'project' / 'lines.txt'}")
        got = await until(backend.events(), {"task_complete"})
        assert str(of_type(got, "agent_message")[0]["text"]).startswith(
            'read:{"content": "two\\n"}')
        await backend.submit("read /etc/passwd")
        got = await until(backend.events(), {"task_complete"})
        assert "outside the session" in str(of_type(got, "agent_message")[0]["text"])

    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "lines.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    run_backend(tmp_path, agent, scenario)


def test_a_permission_request_becomes_an_approval_and_is_answered_after_its_checkpoint(
        tmp_path: Path, agent: Path) -> None:
    async def scenario(backend: AcpBackend, _: str | None, checkpoints: list[Any]) -> None:
        await backend.submit("shell echo made > made.txt")
        got = await until(backend.events(), {"approval_request"})
        request = of_type(got, "approval_request")[0]
        assert request["tool"] == "execute"
        assert request["input"] == {"command": "echo made > made.txt"}
        assert request["call_id"] == "s1"
        await backend.answer(str(request["request"]), True)
        got = await until(backend.events(), {"task_complete"})
        assert of_type(got, "tool_result")[0]["ok"] is True
        assert [c[:2] for c in checkpoints] == [
            ("Bash", {"command": "echo made > made.txt"}),  # when its tool_call came
            ("Bash", {"command": "echo made > made.txt"})]  # before the allow
        await backend.submit("shell echo again > again.txt")
        got = await until(backend.events(), {"approval_request"})
        await backend.answer(str(of_type(got, "approval_request")[0]["request"]), False)
        got = await until(backend.events(), {"task_complete"})
        assert of_type(got, "tool_result")[0]["ok"] is False

    messages = run_backend(tmp_path, agent, scenario)
    outcomes = [m["outcome"] for m in messages if "outcome" in m]
    assert outcomes == [{"outcome": "selected", "optionId": "yes"},
                        {"outcome": "selected", "optionId": "no"}]
    assert (tmp_path / "project" / "made.txt").exists()
    assert not (tmp_path / "project" / "again.txt").exists()


def test_allowing_all_answers_the_request_itself_after_a_checkpoint(
        tmp_path: Path, agent: Path) -> None:
    async def scenario(backend: AcpBackend, _: str | None, checkpoints: list[Any]) -> None:
        await backend.submit("shell echo made > made.txt")
        got = await until(backend.events(), {"task_complete"})
        assert of_type(got, "approval_request") == []
        assert len(checkpoints) == 2

    messages = run_backend(tmp_path, agent, scenario, permission_mode="allow-all")
    assert [m["outcome"] for m in messages if "outcome" in m] == [
        {"outcome": "selected", "optionId": "yes"}]
    assert (tmp_path / "project" / "made.txt").exists()


def test_accepting_edits_still_asks_before_a_command(tmp_path: Path, agent: Path) -> None:
    async def scenario(backend: AcpBackend, _: str | None, __: list[Any]) -> None:
        await backend.submit("shell echo made > made.txt")
        got = await until(backend.events(), {"approval_request"})
        await backend.interrupt()
        got = await until(backend.events(), {"turn_aborted"})
        assert of_type(got, "turn_aborted") == [{"reason": "interrupted"}]

    messages = run_backend(tmp_path, agent, scenario, permission_mode="acceptEdits")
    assert [m["outcome"] for m in messages if "outcome" in m] == [{"outcome": "cancelled"}]
    assert not (tmp_path / "project" / "made.txt").exists()


def test_a_terminal_runs_after_a_checkpoint_and_gives_its_exit_and_output(
        tmp_path: Path, agent: Path) -> None:
    async def scenario(backend: AcpBackend, _: str | None, checkpoints: list[Any]) -> None:
        await backend.submit("terminal echo out; rm gone.txt; exit 3")
        got = await until(backend.events(), {"task_complete"})
        assert of_type(got, "agent_message")[0]["text"] == "exit 3 output out "
        assert [c[0] for c in checkpoints] == ["Bash"]
        assert "rm gone.txt" in str(checkpoints[0][1])

    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "gone.txt").write_text("here\n", encoding="utf-8")
    run_backend(tmp_path, agent, scenario)
    assert not (tmp_path / "project" / "gone.txt").exists()


def test_an_interrupt_cancels_the_prompt_and_the_next_one_runs(
        tmp_path: Path, agent: Path) -> None:
    async def scenario(backend: AcpBackend, _: str | None, __: list[Any]) -> None:
        await backend.submit("wait")
        await until(backend.events(), {"agent_message_delta"})
        await backend.interrupt()
        got = await until(backend.events(), {"turn_aborted", "task_complete"})
        assert got[-1] == BackendEvent("turn_aborted", {"reason": "interrupted"})
        await backend.submit("again")
        got = await until(backend.events(), {"task_complete"})
        assert of_type(got, "agent_message") == [{"text": "you said again "}]

    messages = run_backend(tmp_path, agent, scenario)
    assert "session/cancel" in [m["got"].get("method") for m in messages if "got" in m]


def test_a_native_session_is_resumed_through_session_resume(tmp_path: Path,
                                                            agent: Path) -> None:
    async def scenario(backend: AcpBackend, native_id: str | None, __: list[Any]) -> None:
        assert native_id == "native-earlier"

    messages = run_backend(tmp_path, agent, scenario, native_id="native-earlier")
    resumed = [m["got"] for m in messages if m.get("got", {}).get("method") == "session/resume"]
    assert resumed[0]["params"]["sessionId"] == "native-earlier"


def test_a_missing_program_and_a_bad_permission_mode_are_refused(tmp_path: Path) -> None:
    config = BackendConfig(cwd=str(tmp_path), options={"command": "no-such-acp-agent --acp"})
    with pytest.raises(BackendError, match="not found"):
        asyncio.run(AcpBackend().start(config))
    config = BackendConfig(cwd=str(tmp_path), options={"command": "true"},
                           permission_mode="sometimes")
    with pytest.raises(InvalidInput, match="no approval policy"):
        asyncio.run(AcpBackend().start(config))
    with pytest.raises(BackendError, match="ended"):
        asyncio.run(AcpBackend().start(BackendConfig(cwd=str(tmp_path),
                                                     options={"command": "true"})))


def test_an_acp_agent_is_named_by_a_short_name_or_a_command_line(tmp_path: Path) -> None:
    assert settings_for("acp:gemini", str(tmp_path)).options == {"command": "gemini"}
    assert settings_for("acp:my-agent --flag 'a b'", str(tmp_path)).options == {
        "command": "my-agent --flag 'a b'"}
    assert settings_for("gemini", str(tmp_path)).agent == "gemini"
    with pytest.raises(InvalidInput, match="acp:<command line>"):
        settings_for("acp:", str(tmp_path))


def test_cos_rewind_undoes_a_file_the_agent_wrote_and_one_its_terminal_removed(
        project: Path, agent: Path) -> None:
    (project / "notes.txt").write_text("first\n", encoding="utf-8")
    (project / "doomed.txt").write_text("keep me\n", encoding="utf-8")
    git(project, "add", "notes.txt", "doomed.txt")
    git(project, "commit", "-q", "-m", "files")
    prompt = "write notes.txt changed && terminal rm doomed.txt"
    done = subprocess.run([COS, "run", "--agent", f"acp:{agent}", "--json", prompt],
                          cwd=project, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert "task_complete" in [event["msg"]["type"] for event in events]
    assert "error" not in [event["msg"]["type"] for event in events], done.stdout
    assert (project / "notes.txt").read_text(encoding="utf-8") == "changed"
    assert not (project / "doomed.txt").exists()
    rows = cos_json("checkpoints", "--session", events[0]["session"], cwd=project)
    assert isinstance(rows, list)
    # Newest first: the turn's end; before the terminal (after the write); before the prompt
    # (the write's own checkpoint is that one: nothing changed between them).
    assert [row["trigger"] for row in rows] == ["turn-end", "tool:Bash", "prompt"], rows
    before_terminal, before_prompt = rows[1]["id"], rows[2]["id"]
    rewound = cos("rewind", "--code", before_terminal, cwd=project)
    assert rewound.returncode == 0, rewound.stderr
    assert (project / "doomed.txt").read_text(encoding="utf-8") == "keep me\n"
    assert (project / "notes.txt").read_text(encoding="utf-8") == "changed"
    rewound = cos("rewind", "--code", before_prompt, cwd=project)
    assert rewound.returncode == 0, rewound.stderr
    assert (project / "notes.txt").read_text(encoding="utf-8") == "first\n"
    assert (project / "doomed.txt").read_text(encoding="utf-8") == "keep me\n"
