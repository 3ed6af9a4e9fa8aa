"""`cos acp` (DESIGN.md §12.1) driven by real ACP clients: `acpx` (the headless client, pinned in
tests/e2e/clients) over `cos acp --agent exec` and `--agent claude` (the real Claude Code
against the scripted model server), and the ACP Python SDK's client side for exact checks of
the messages (seq meta, a permission answered through the SDK, a resume from a cursor, and a
Claude Code or Codex session made outside cos loaded, then continued in its own agent)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import (BIN_DIR, claude_env, codex_env, run_claude, run_codex, shell,
                               write_codex_config)
from tests.e2e.model_server import ModelServer, Text, ToolCall, when_prompted
from tests.helpers import COS, cos_json, require_clients

pytestmark = pytest.mark.e2e

ACPX = BIN_DIR / "acpx"
WAIT_S = 120.0


@pytest.fixture
def scripted(isolated_env: Path) -> Iterator[ModelServer]:
    require_clients()
    server = ModelServer([]).start()
    try:
        yield server
    finally:
        server.stop()


class AllowingClient:
    """An ACP client's side: records the updates and the permission requests, and allows each
    once."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.asked: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update.model_dump(by_alias=True, exclude_none=True))

    async def request_permission(self, options: Any, session_id: str, tool_call: Any,
                                 **kwargs: Any) -> Any:
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        self.asked.append(tool_call)
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="allow_once"))


def claude_acp_env(server: ModelServer, home: Path) -> dict[str, str]:
    """cos acp's environment: the scripted server for Claude Code, which is on PATH."""
    env = dict(os.environ)
    env.update(claude_env(server, home))
    env["PATH"] = f"{BIN_DIR}{os.pathsep}{env.get('PATH', '')}"
    return env


def acpx(project: Path, agent: str, prompt: str, env: dict[str, str]) -> list[dict[str, Any]]:
    """Every JSON-RPC message acpx sent and received, running one prompt against `cos acp`."""
    proc = subprocess.run(
        [str(ACPX), "--approve-all", "--format", "json", "--cwd", str(project), "--agent",
         f"{COS} acp --agent {agent}", "exec", prompt],
        cwd=project, env=env, capture_output=True, text=True, timeout=WAIT_S)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def updates(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["params"]["update"] for m in messages if m.get("method") == "session/update"]


def seqs(found: list[dict[str, Any]]) -> list[int]:
    return [u["_meta"]["cos/seq"] for u in found if "cos/seq" in (u.get("_meta") or {})]


def test_acpx_runs_an_exec_prompt_through_cos_acp(project: Path, isolated_env: Path) -> None:
    require_clients()
    messages = acpx(project, "exec", "echo from-acpx", dict(os.environ))
    chunks = [u for u in updates(messages) if u["sessionUpdate"] == "agent_message_chunk"]
    assert [c["content"]["text"] for c in chunks] == ["from-acpx\n"]
    assert all(isinstance(c["_meta"]["cos/seq"], int) for c in chunks)
    [answer] = [m for m in messages if "result" in m and "stopReason" in (m["result"] or {})]
    assert answer["result"]["stopReason"] == "end_turn"
    assert answer["result"]["_meta"]["cos/usage"] == {"exit_code": 0}


def test_acpx_runs_claude_through_cos_acp_with_its_tool_call_and_permission(
        project: Path, isolated_env: Path, scripted: ModelServer) -> None:
    scripted.scripts[""] = [ToolCall("Bash", {"command": "echo ran > ran.txt",
                                              "description": "run it"}), Text("Ran it.")]
    messages = acpx(project, "claude", "run the command",
                    claude_acp_env(scripted, isolated_env))
    assert (project / "ran.txt").read_text(encoding="utf-8") == "ran\n"
    found = updates(messages)
    [call] = [u for u in found if u["sessionUpdate"] == "tool_call"]
    assert call["kind"] == "execute" and call["rawInput"]["command"] == "echo ran > ran.txt"
    assert call["title"].startswith("Bash")
    done = [u for u in found if u["sessionUpdate"] == "tool_call_update"
            and u["toolCallId"] == call["toolCallId"]]
    assert done and done[-1]["status"] == "completed"
    asked = [m for m in messages if m.get("method") == "session/request_permission"]
    assert asked and asked[0]["params"]["toolCall"]["toolCallId"] == call["toolCallId"]
    text = "".join(u["content"]["text"] for u in found
                   if u["sessionUpdate"] == "agent_message_chunk")
    assert "Ran it." in text
    numbers = seqs(found)
    assert numbers == sorted(set(numbers)) and len(numbers) >= 3
    [answer] = [m for m in messages if "result" in m and "stopReason" in (m["result"] or {})]
    assert answer["result"]["stopReason"] == "end_turn"
    assert "cos/usage" in answer["result"]["_meta"]


def test_the_python_sdk_client_resumes_a_claude_session_from_its_cursor(
        project: Path, isolated_env: Path, scripted: ModelServer) -> None:
    from acp import spawn_agent_process, text_block

    scripted.scripts[""] = [ToolCall("Bash", {"command": "echo one > one.txt",
                                              "description": "first"}),
                            when_prompted("now answer", Text("Second done."),
                                          Text("First done."))]
    env = claude_acp_env(scripted, isolated_env)

    async def run() -> tuple[AllowingClient, AllowingClient, int, dict[str, Any]]:
        first = AllowingClient()
        async with spawn_agent_process(first, COS, "acp", "--agent", "claude", cwd=project,
                                       env=env) as (connection, _process):
            await connection.initialize(protocol_version=1)
            session = await connection.new_session(cwd=str(project), mcp_servers=[])
            answer = await connection.prompt(session_id=session.session_id,
                                             prompt=[text_block("run the first command")])
            assert answer.stop_reason == "end_turn"
        cursor = max(seqs(first.updates))
        second = AllowingClient()
        async with spawn_agent_process(second, COS, "acp", "--agent", "claude", cwd=project,
                                       env=env) as (connection, _process):
            await connection.initialize(protocol_version=1)
            resumed = await connection.resume_session(
                cwd=str(project), session_id=session.session_id, mcp_servers=[],
                field_meta={"cos/since": cursor})
            meta = dict(resumed.field_meta or {})
            answer = await connection.prompt(session_id=session.session_id,
                                             prompt=[text_block("now answer")])
            assert answer.stop_reason == "end_turn"
        return first, second, cursor, meta

    first, second, cursor, meta = asyncio.run(asyncio.wait_for(run(), WAIT_S))
    assert (project / "one.txt").read_text(encoding="utf-8") == "one\n"
    # The task's end (after the last update) has no update of its own: the cursor is behind it.
    assert meta["cos/last_seq"] >= cursor and meta["cos/turn"] == "idle"
    later = seqs(second.updates)
    assert later and min(later) > cursor and later == sorted(set(later))
    text = "".join(u["content"]["text"] for u in second.updates
                   if u["sessionUpdate"] == "agent_message_chunk")
    assert "Second done." in text and "First done." not in text


def test_a_claude_session_made_outside_cos_loads_then_goes_on_in_claude_under_the_engine(
        project: Path, isolated_env: Path, scripted: ModelServer) -> None:
    from acp import spawn_agent_process, text_block

    scripted.scripts["OUTSIDE-COS"] = [
        when_prompted("now write the file",
                      ToolCall("Bash", {"command": "echo continued > continued.txt",
                                        "description": "write it"}),
                      Text("Noted: PELICAN.")),
        ToolCall("Bash", {"command": "echo again >> continued.txt", "description": "add"}),
        Text("Written.")]
    made = run_claude(project, "OUTSIDE-COS: remember the word PELICAN", scripted,
                      isolated_env)
    assert made.returncode == 0, made.stderr[-2000:]
    native = json.loads(made.stdout)["session_id"]
    env = claude_acp_env(scripted, isolated_env)

    async def run() -> tuple[AllowingClient, int, str]:
        client = AllowingClient()
        async with spawn_agent_process(client, COS, "acp", "--agent", "claude", cwd=project,
                                       env=env) as (connection, _process):
            await connection.initialize(protocol_version=1)
            listed = await connection.list_sessions(cwd=str(project))
            [row] = [row for row in listed.sessions
                     if (row.field_meta or {}).get("cos/native_id") == native]
            await connection.load_session(cwd=str(project), session_id=row.session_id,
                                          mcp_servers=[])
            replayed = len(client.updates)
            answer = await connection.prompt(session_id=row.session_id,
                                             prompt=[text_block("now write the file")])
            return client, replayed, str(answer.stop_reason)

    client, replayed, stop = asyncio.run(asyncio.wait_for(run(), WAIT_S))
    assert stop == "end_turn"
    before, after = client.updates[:replayed], client.updates[replayed:]
    said = {(u["sessionUpdate"], u["content"]["text"]) for u in before if "content" in u
            and isinstance(u["content"], dict) and "text" in u["content"]}
    assert ("user_message_chunk", "OUTSIDE-COS: remember the word PELICAN") in said
    assert ("agent_message_chunk", "Noted: PELICAN.") in said
    # It went on in Claude Code: the same native session, resumed, ran the tool and answered.
    assert (project / "continued.txt").read_text(encoding="utf-8") == "continued\nagain\n"
    call, _ = [u for u in after if u["sessionUpdate"] == "tool_call"]
    assert call["kind"] == "execute" and call["rawInput"]["command"].startswith("echo continued")
    assert client.asked and client.asked[0].tool_call_id == call["toolCallId"]
    assert "Written." in "".join(u["content"]["text"] for u in after
                                 if u["sessionUpdate"] == "agent_message_chunk")
    latest = json.dumps(scripted.requests[-1].body)
    assert "remember the word PELICAN" in latest and "now write the file" in latest
    # Under the engine: a job whose session resumed that native id, with a checkpoint taken
    # before the prompt and one before its second command (the first found the tree as the
    # prompt's checkpoint has it), which holds what the first one wrote.
    rows = cos_json("agents", "--all", cwd=project)
    assert isinstance(rows, list)
    [job] = [row for row in rows if row.get("sessionId") == native]
    checkpoints = cos_json("checkpoints", "--session", job["cos_session"], cwd=project)
    assert isinstance(checkpoints, list)
    triggers = [row["trigger"] for row in checkpoints]
    assert "prompt" in triggers and "tool:Bash" in triggers, triggers

    async def again() -> tuple[AllowingClient, str]:
        # A second editor loads it too: it attaches to that job, starts no other.
        other = AllowingClient()
        async with spawn_agent_process(other, COS, "acp", "--agent", "claude", cwd=project,
                                       env=env) as (connection, _process):
            await connection.initialize(protocol_version=1)
            listed = await connection.list_sessions(cwd=str(project))
            [row] = [row for row in listed.sessions
                     if (row.field_meta or {}).get("cos/native_id") == native]
            await connection.load_session(cwd=str(project), session_id=row.session_id,
                                          mcp_servers=[])
            answer = await connection.prompt(session_id=row.session_id,
                                             prompt=[text_block("and after that?")])
            return other, str(answer.stop_reason)

    other, stop = asyncio.run(asyncio.wait_for(again(), WAIT_S))
    assert stop == "end_turn"
    # The whole conversation in one replay, then live: no update twice.
    numbers = seqs(other.updates)
    assert numbers == sorted(set(numbers))
    starts = [u["toolCallId"] for u in other.updates if u["sessionUpdate"] == "tool_call"]
    assert len(starts) == len(set(starts)) >= 2
    assert any(u["sessionUpdate"] == "user_message_chunk" and "PELICAN" in u["content"]["text"]
               for u in other.updates)
    latest = json.dumps(scripted.requests[-1].body)
    assert "now write the file" in latest and "and after that?" in latest
    rows = cos_json("agents", "--all", cwd=project)
    assert isinstance(rows, list)
    assert [row["id"] for row in rows if row.get("sessionId") == native] == [job["id"]]
    before_second = next(row for row in checkpoints if row["trigger"] == "tool:Bash")
    rewound = subprocess.run([COS, "rewind", "--code", before_second["id"]], cwd=project,
                             env=env, capture_output=True, text=True, timeout=WAIT_S)
    assert rewound.returncode == 0, rewound.stderr
    assert (project / "continued.txt").read_text(encoding="utf-8") == "continued\n"
    stopped = subprocess.run([COS, "stop", job["id"]], cwd=project, env=env,
                             capture_output=True, text=True, timeout=WAIT_S)
    assert stopped.returncode == 0, stopped.stderr


def test_a_codex_session_made_outside_cos_loads_then_goes_on_in_codex_under_the_engine(
        project: Path, isolated_env: Path, scripted: ModelServer) -> None:
    from acp import spawn_agent_process, text_block

    scripted.scripts["OUTSIDE-CODEX"] = [
        when_prompted("now write the file", shell("codex", "echo continued > continued.txt"),
                      Text("Noted: HERON.")),
        shell("codex", "echo again >> continued.txt"),
        Text("Written.")]
    codex_home = isolated_env / ".codex"
    made = run_codex(project, "OUTSIDE-CODEX: remember the word HERON", scripted, isolated_env,
                     codex_home)
    assert made.returncode == 0, made.stderr[-2000:]
    write_codex_config(codex_home, scripted)
    env = dict(os.environ)
    env.update(codex_env(isolated_env, codex_home))
    env["PATH"] = f"{BIN_DIR}{os.pathsep}{env.get('PATH', '')}"

    async def run() -> tuple[AllowingClient, int, str, str]:
        client = AllowingClient()
        async with spawn_agent_process(client, COS, "acp", "--agent", "codex", cwd=project,
                                       env=env) as (connection, _process):
            await connection.initialize(protocol_version=1)
            listed = await connection.list_sessions(cwd=str(project))
            [row] = [row for row in listed.sessions
                     if (row.field_meta or {}).get("cos/agent") == "codex"]
            await connection.load_session(cwd=str(project), session_id=row.session_id,
                                          mcp_servers=[])
            replayed = len(client.updates)
            answer = await connection.prompt(session_id=row.session_id,
                                             prompt=[text_block("now write the file")])
            return client, replayed, str(answer.stop_reason), str(
                (row.field_meta or {}).get("cos/native_id"))

    client, replayed, stop, native = asyncio.run(asyncio.wait_for(run(), WAIT_S))
    assert stop == "end_turn"
    before, after = client.updates[:replayed], client.updates[replayed:]
    said = " ".join(u["content"]["text"] for u in before if isinstance(u.get("content"), dict)
                    and "text" in u["content"])
    assert "remember the word HERON" in said and "Noted: HERON." in said
    assert (project / "continued.txt").read_text(encoding="utf-8") == "continued\nagain\n"
    assert [u for u in after if u["sessionUpdate"] == "tool_call"] and client.asked
    latest = json.dumps(scripted.requests[-1].body)
    assert "remember the word HERON" in latest and "now write the file" in latest
    rows = cos_json("agents", "--all", cwd=project)
    assert isinstance(rows, list)
    [job] = [row for row in rows if row.get("sessionId") == native]
    checkpoints = cos_json("checkpoints", "--session", job["cos_session"], cwd=project)
    assert isinstance(checkpoints, list)
    triggers = [row["trigger"] for row in checkpoints]
    assert "prompt" in triggers and any(t.startswith("tool") for t in triggers), triggers
    stopped = subprocess.run([COS, "stop", job["id"]], cwd=project, env=env,
                             capture_output=True, text=True, timeout=WAIT_S)
    assert stopped.returncode == 0, stopped.stderr
