"""`cos protocol` as a whole process over the real Claude Code and Codex (runtime/protocol.py,
runtime/core.py, backends/claude.py and codex.py), against the scripted model server: the
conformance scenarios of §7 — a task with a tool call, an interrupt during a slow tool, a second
input mid-task, an approval denied then allowed, resume by native id in a new process, fork,
shutdown — each run over both clients (tests/runtime/test_protocol.py runs them over exec and
python)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import (CLAUDE_BIN, CODEX_BIN, claude_env, claude_transcript, codex_env,
                               write_codex_config)
from tests.e2e.model_server import ModelServer, Step, Text, ToolCall, when_prompted
from tests.helpers import COS, ProtocolProcess, require_clients

pytestmark = pytest.mark.e2e

WAIT = 30.0  # seconds any one event may take; a scenario takes a few seconds
Event = dict[str, Any]


@dataclass(frozen=True)
class Client:
    """How one real client is driven: its configure op, its shell tool, its environment."""

    agent: str
    program: Path

    def tool(self, command: str) -> ToolCall:
        """A scripted call of the client's shell tool running `command`."""
        if self.agent == "claude":
            return ToolCall("Bash", {"command": command, "description": "run it"})
        return ToolCall("exec_command", {"cmd": command})

    def env(self, server: ModelServer, home: Path) -> dict[str, str]:
        """The environment of `cos protocol` (the backend gives it to the client as it is)."""
        env = dict(os.environ)
        if self.agent == "claude":
            env.update(claude_env(server, home))
        else:
            codex_home = home / ".codex"
            write_codex_config(codex_home, server)
            env.update(codex_env(home, codex_home))
        return env

    def configure(self, **fields: Any) -> dict[str, Any]:
        options: dict[str, str] = {"program": str(self.program)}
        if self.agent == "codex":  # its default sandbox in a git checkout is read-only
            options["sandbox"] = "workspace-write"
        options.update(fields.pop("options", {}))
        return {"agent": self.agent, "options": options, **fields}


CLIENTS = {"claude": Client("claude", CLAUDE_BIN), "codex": Client("codex", CODEX_BIN)}


@pytest.fixture(params=sorted(CLIENTS))
def client(request: pytest.FixtureRequest) -> Client:
    require_clients()
    return CLIENTS[request.param]


class Real:
    """One test's model server and the `cos protocol` processes talking to it."""

    def __init__(self, client: Client, project: Path, home: Path) -> None:
        self.client = client
        self.project = project
        self.home = home
        self.server = ModelServer([]).start()
        self.env = client.env(self.server, home)
        self.processes: list[ProtocolProcess] = []

    def script(self, steps: list[Step]) -> None:
        self.server.scripts[""] = steps

    def start(self, *args: str) -> ProtocolProcess:
        process = ProtocolProcess(self.project, *args, env=self.env)
        self.processes.append(process)
        return process

    def configured(self, process: ProtocolProcess, **fields: Any) -> Event:
        process.send("configure", **self.client.configure(**fields))
        event = process.until_type("session_configured", WAIT)[-1]
        assert event["msg"]["agent"] == self.client.agent and event["msg"]["native_id"]
        return event

    def model_saw(self) -> str:
        """Every agent request's conversation, as one string."""
        return json.dumps([r.body for r in self.server.requests
                           if isinstance(r.body, dict) and r.body.get("tools")])

    def end(self) -> None:
        for process in self.processes:
            process.end()
        self.server.stop()


@pytest.fixture
def real(client: Client, project: Path, isolated_env: Path) -> Iterator[Real]:
    at = Real(client, project, isolated_env)
    try:
        yield at
    finally:
        at.end()


def kinds(got: list[Event]) -> list[str]:
    """The types of `got`, without the streamed deltas and the native events (clients differ)."""
    return [event["msg"]["type"] for event in got
            if event["msg"]["type"] not in ("native", "agent_message_delta")]


def texts(got: list[Event]) -> list[str]:
    return [event["msg"]["text"] for event in got if event["msg"]["type"] == "agent_message"]


def wait_for_file(path: Path) -> None:
    deadline = time.monotonic() + WAIT
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def slow_script(real: Real) -> Path:
    """A first turn running a slow command (it touches the returned file when it starts); any
    input saying `second` is answered at once."""
    started = real.project / "started.txt"
    slow = real.client.tool(f"touch {started}; for i in $(seq 1 300); do sleep 0.1; done; "
                            f"touch {real.project / 'late.txt'}")
    second = Text("Second turn done.")
    real.script([when_prompted("second", second, slow), second])
    return started


def test_a_task_with_a_tool_call_runs_to_task_complete(real: Real) -> None:
    real.script([real.client.tool("echo ran > ran.txt"), Text("Ran it.")])
    process = real.start()
    session = real.configured(process, permission_mode="bypassPermissions")["session"]
    submission = process.send("user_input", text="run the command")
    got = process.until_type("task_complete", WAIT)
    assert kinds(got)[0] == "task_started"
    assert kinds(got)[-3:] == ["tool_result", "agent_message", "task_complete"]
    assert "tool_call" in kinds(got) and texts(got) == ["Ran it."]
    call = next(e["msg"] for e in got if e["msg"]["type"] == "tool_call")
    result = next(e["msg"] for e in got if e["msg"]["type"] == "tool_result")
    assert result["call_id"] == call["call_id"] and result["ok"] is True
    task = [e for e in got if e["seq"] >= next(t["seq"] for t in got
                                               if t["msg"]["type"] == "task_started")]
    assert all(e["id"] == submission and e["session"] == session for e in task)
    assert (real.project / "ran.txt").read_text(encoding="utf-8") == "ran\n"
    seqs = [e["seq"] for e in process.seen]
    assert seqs == list(range(1, len(seqs) + 1))


def test_an_interrupt_during_a_slow_tool_aborts_the_task_and_the_next_input_works(
        real: Real) -> None:
    started = slow_script(real)
    process = real.start()
    real.configured(process, permission_mode="bypassPermissions")
    process.send("user_input", text="first: run the slow command")
    wait_for_file(started)
    process.send("interrupt")
    got = process.until_type("turn_aborted", WAIT)
    assert got[-1]["msg"]["reason"] == "interrupted" and "task_complete" not in kinds(got)
    process.send("user_input", text="second: just answer")
    got = process.until_type("task_complete", WAIT)
    assert texts(got) == ["Second turn done."]
    assert not (real.project / "late.txt").exists()


def test_a_second_input_mid_task_replaces_the_running_task(real: Real) -> None:
    started = slow_script(real)
    process = real.start()
    real.configured(process, permission_mode="bypassPermissions")
    process.send("user_input", text="first: run the slow command")
    first = process.until_type("task_started", WAIT)[-1]["msg"]["task"]
    wait_for_file(started)
    process.send("user_input", text="second: just answer")
    aborted = process.until_type("turn_aborted", WAIT)[-1]
    assert aborted["msg"] == {"type": "turn_aborted", "reason": "replaced", "task": first}
    got = process.until_type("task_complete", WAIT)
    assert kinds(got)[0] == "task_started" and got[0]["msg"]["task"] != first
    assert texts(got) == ["Second turn done."]


def test_an_approval_denied_then_allowed_runs_the_tool_only_after_allow(real: Real) -> None:
    target = real.project / "notes.txt"
    write = real.client.tool(f"echo second > {target}")
    real.script([real.client.tool(f"echo first > {target}"),
                 when_prompted("second", write, Text("Understood.")), Text("Wrote it.")])
    process = real.start()
    real.configured(process)  # the default mode asks before a command runs
    process.send("user_input", text="first: write notes.txt")
    asked = process.until_type("approval_request", WAIT)[-1]["msg"]
    assert not target.exists()
    process.send("approval", request=asked["request"], decision="deny")
    got = process.until_type("task_complete", WAIT)
    denied = [e["msg"] for e in got if e["msg"]["type"] == "tool_result"]
    assert [result["ok"] for result in denied] == [False] and not target.exists()
    process.send("user_input", text="second: write notes.txt")
    asked = process.until_type("approval_request", WAIT)[-1]["msg"]
    assert not target.exists()
    process.send("approval", request=asked["request"], decision="allow")
    got = process.until_type("task_complete", WAIT)
    assert [e["msg"]["ok"] for e in got if e["msg"]["type"] == "tool_result"] == [True]
    assert texts(got) == ["Wrote it."]
    assert target.read_text(encoding="utf-8") == "second\n"


def test_a_new_process_resumes_by_native_id_and_the_session_is_listed(real: Real) -> None:
    real.script([Text("Noted.")])
    first = real.start()
    configured = real.configured(first, permission_mode="bypassPermissions")
    session, native_id = configured["session"], configured["msg"]["native_id"]
    first.send("user_input", text="remember the word PELICAN")
    first.until_type("task_complete", WAIT)
    first.send("shutdown")
    assert first.proc.wait(timeout=WAIT) == 0
    second = real.start("--session", session)
    second.send("user_input", text="which word was it?")
    got = second.until_type("task_complete", WAIT)
    assert kinds(got)[:2] == ["session_configured", "task_started"]
    assert got[0]["msg"]["native_id"] == native_id and got[0]["seq"] == first.seen[-1]["seq"] + 1
    last = [r.body for r in real.server.requests if isinstance(r.body, dict)
            and r.body.get("tools") and "which word was it?" in json.dumps(r.body)]
    assert last and "PELICAN" in json.dumps(last[-1])
    second.send("shutdown")
    assert second.proc.wait(timeout=WAIT) == 0
    listed = json.loads(cos_json(real, "sessions", "--json", "--agent", real.client.agent))
    rows = listed["sessions"] if isinstance(listed, dict) else listed
    row = next(r for r in rows if r.get("id") == session)
    assert row.get("native_id") == native_id


def test_a_fork_is_a_new_session_with_its_own_native_id_holding_the_conversation(
        real: Real) -> None:
    real.script([Text("Noted.")])
    process = real.start()
    configured = real.configured(process, permission_mode="bypassPermissions")
    source, native_id = configured["session"], configured["msg"]["native_id"]
    process.send("user_input", text="remember the word PAPAYA")
    process.until_type("task_complete", WAIT)
    process.send("fork", session=source)
    forked = process.until_type("session_configured", WAIT)[-1]
    if real.client.agent == "claude":  # the source's process has ended: its log is whole
        original = claude_transcript(real.home, real.project, native_id)
        before = original.read_bytes()
    assert forked["session"] not in (source, None) and forked["seq"] == 1
    assert forked["msg"]["native_id"] not in (native_id, None)
    process.send("user_input", text="and in the fork?")
    got = process.until_type("task_complete", WAIT)
    assert {e["session"] for e in got} == {forked["session"]}
    asked = [r.body for r in real.server.requests if isinstance(r.body, dict)
             and r.body.get("tools") and "and in the fork?" in json.dumps(r.body)]
    assert asked and "PAPAYA" in json.dumps(asked[-1])
    if real.client.agent == "claude":
        assert original.read_bytes() == before  # the source's native session is untouched


def test_shutdown_mid_task_aborts_it_and_the_process_exits_zero(real: Real) -> None:
    started = slow_script(real)
    process = real.start()
    real.configured(process, permission_mode="bypassPermissions")
    process.send("user_input", text="first: run the slow command")
    wait_for_file(started)
    process.send("shutdown")
    aborted = process.until_type("turn_aborted", WAIT)[-1]
    assert aborted["msg"]["reason"] == "shutdown"
    assert process.proc.wait(timeout=WAIT) == 0


def cos_json(real: Real, *args: str) -> str:
    import subprocess

    done = subprocess.run([COS, *args], cwd=real.project, env=real.env, capture_output=True,
                          text=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_with_the_hooks_installed_an_engine_task_is_one_session_checkpointed_exported_and_found(
        real: Real) -> None:
    installed = cos_run(real, "init", "--agent", real.client.agent)
    assert installed.returncode == 0, installed.stderr
    options: dict[str, str] = {}
    if real.client.agent == "codex":  # hooks run in a trusted project, once trusted themselves
        with open(real.home / ".codex" / "config.toml", "a", encoding="utf-8") as config:
            config.write(f'\n[projects.{json.dumps(str(real.project))}]\ntrust_level = "trusted"\n')
        trusting = real.home / "codex-trusting-hooks"
        trusting.write_text(f'#!/bin/sh\nexec {CODEX_BIN} --dangerously-bypass-hook-trust "$@"\n',
                            encoding="utf-8")
        trusting.chmod(0o755)
        options = {"program": str(trusting)}
    real.script([real.client.tool("echo kept > kept.txt"), Text("Wrote kept.txt for you.")])
    process = real.start()
    configured = real.configured(process, permission_mode="bypassPermissions", options=options)
    session, native_id = configured["session"], configured["msg"]["native_id"]
    process.send("user_input", text="write the WOMBAT file")
    process.until_type("task_complete", WAIT)
    process.send("shutdown")
    assert process.proc.wait(timeout=WAIT) == 0
    assert (real.project / "kept.txt").read_text(encoding="utf-8") == "kept\n"
    rows = json.loads(cos_json(real, "sessions", "--json", "--agent", real.client.agent))
    linked = [row["id"] for row in rows if row.get("native_id") == native_id]
    # One cos session for the native id, the engine's: the hooks bound it at SessionStart.
    assert linked == [session], rows
    listed = session
    for name in (native_id, session):
        exported = cos_run(real, "export", name)
        assert exported.returncode == 0, exported.stderr
        assert "write the WOMBAT file" in exported.stdout
        assert "Wrote kept.txt for you." in exported.stdout
    found = json.loads(cos_json(real, "search", "WOMBAT", "--json"))["results"]
    assert found and {hit["session"] for hit in found} == {listed}
    # Claude Code's hooks take the checkpoints; `codex app-server` runs no project hooks, so
    # the engine takes them itself.
    checkpoints = json.loads(cos_json(real, "checkpoints", "--json"))
    assert [(row["trigger"], row["session"], row["prompt"]) for row in reversed(checkpoints)
            ][0] == ("prompt", listed, "write the WOMBAT file")
    assert any("kept.txt" in row["changed"] for row in checkpoints)


def cos_run(real: Real, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([COS, *args], cwd=real.project, env=real.env, capture_output=True,
                          text=True, timeout=WAIT)


def test_a_rewound_engine_session_goes_on_from_the_checkpoint_at_its_next_input(
        real: Real) -> None:
    """cos rewind --conversation of a session the engine runs: no handover; a new cos protocol
    process serving it sends the model the conversation up to the checkpoint, then the input."""
    if real.client.agent == "claude":  # its checkpoints come from the hooks inside it
        installed = cos_run(real, "init", "--agent", "claude")
        assert installed.returncode == 0, installed.stderr
    real.script([Text("Noted.")])
    process = real.start()
    session = real.configured(process)["session"]
    prompts = ["first ALPHA-ONE", "second BRAVO-TWO", "third CHARLIE-THREE"]
    for prompt in prompts:
        process.send("user_input", text=prompt)
        process.until_type("task_complete", WAIT)
    process.send("shutdown")
    assert process.proc.wait(timeout=WAIT) == 0
    rows = json.loads(cos_json(real, "checkpoints", "--json", "--session", session))
    second = next(row for row in rows
                  if row["trigger"] == "prompt" and row["prompt"] == prompts[1])
    rewound = cos_run(real, "rewind", second["id"], "--conversation", "--json")
    assert rewound.returncode == 0, rewound.stderr
    conversation = json.loads(rewound.stdout)["conversation"]
    assert conversation["engine"] is True and "handover" not in conversation
    assert conversation["rewound_session"] == session
    before = len(real.server.requests)
    again = real.start("--session", session)
    again.send("user_input", text="fourth DELTA-FOUR")
    again.until_type("task_complete", WAIT)
    again.send("shutdown")
    assert again.proc.wait(timeout=WAIT) == 0
    sent = json.dumps([r.body for r in real.server.requests[before:]
                       if isinstance(r.body, dict) and r.body.get("tools")])
    assert "ALPHA-ONE" in sent and "DELTA-FOUR" in sent
    assert "BRAVO-TWO" not in sent and "CHARLIE-THREE" not in sent
    # Once: a later start resumes the conversation as it is then, with the fourth input.
    third = real.start("--session", session)
    third.send("user_input", text="fifth ECHO-FIVE")
    third.until_type("task_complete", WAIT)
    third.send("shutdown")
    assert third.proc.wait(timeout=WAIT) == 0
    last = json.dumps([r.body for r in real.server.requests
                       if isinstance(r.body, dict) and r.body.get("tools")][-1])
    assert "DELTA-FOUR" in last and "ECHO-FIVE" in last and "BRAVO-TWO" not in last
