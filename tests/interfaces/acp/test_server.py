"""`cos acp` as a whole process (interfaces/acp/server.py): JSON-RPC on stdio, sessions that are
background jobs, updates with their seq, cancel, resume from a cursor after the process died,
two clients and one permission, cos attach beside cos acp, and bad input. The client side here
is plain JSON lines; the real clients are in tests/e2e/test_acp_real.py."""

from __future__ import annotations

import itertools
import json
import os
import queue
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import COS, cos

ROOT = Path(__file__).resolve().parents[3]
ECHO = f"python:{ROOT / 'examples' / 'echo_agent.py'}:EchoAgent"
WAIT_S = 60.0

Message = dict[str, Any]


class AcpClient:
    """A `cos acp` process and the messages it sent, read as they come."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.cwd = cwd
        self.proc = subprocess.Popen([COS, "acp", *args], cwd=cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.seen: list[Message] = []
        self.stdout_raw: list[bytes] = []
        self.ids = itertools.count(1)
        assert self.proc.stdout is not None
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Message) -> None:
        self.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    def next(self) -> Message:
        line = self.lines.get(timeout=WAIT_S)
        assert line is not None, "cos acp ended"
        self.stdout_raw.append(line)
        message = json.loads(line)
        self.seen.append(message)
        return message  # type: ignore[no-any-return]

    def until(self, done: Callable[[Message], bool],
              on_request: Callable[[Message], Any] | None = None) -> Message:
        while True:
            message = self.next()
            if "method" in message and "id" in message and on_request is not None:
                result = on_request(message)
                if result is not None:
                    self.send({"id": message["id"], "result": result})
            if done(message):
                return message

    def call(self, method: str, params: Any,
             on_request: Callable[[Message], Any] | None = None) -> Message:
        number = next(self.ids)
        self.send({"id": number, "method": method, "params": params})
        return self.until(lambda m: m.get("id") == number and "method" not in m, on_request)

    def updates(self) -> list[Message]:
        return [m["params"]["update"] for m in self.seen if m.get("method") == "session/update"]

    def new_session(self, **meta: str) -> str:
        params: dict[str, Any] = {"cwd": str(self.cwd), "mcpServers": []}
        if meta:
            params["_meta"] = meta
        answer = self.call("session/new", params)
        assert "result" in answer, answer
        return str(answer["result"]["sessionId"])

    def text(self) -> str:
        return "".join(u["content"]["text"] for u in self.updates()
                       if u["sessionUpdate"] == "agent_message_chunk")

    def close(self) -> str:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=WAIT_S)
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode("utf-8", "replace")


@pytest.fixture
def clients(project: Path) -> Iterator[Callable[..., AcpClient]]:
    made: list[AcpClient] = []

    def start(*args: str) -> AcpClient:
        client = AcpClient(project, *args)
        made.append(client)
        return client

    yield start
    for client in made:
        if client.proc.poll() is None:
            client.proc.kill()
            client.proc.wait()
        for pipe in (client.proc.stdin, client.proc.stdout, client.proc.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass


def prompt(text: str, session: str) -> dict[str, Any]:
    return {"sessionId": session, "prompt": [{"type": "text", "text": text}]}


def seqs(updates: list[Message]) -> list[int]:
    return [u["_meta"]["cos/seq"] for u in updates if "cos/seq" in u.get("_meta", {})]


@pytest.mark.slow
def test_initialize_says_protocol_1_and_the_session_capabilities(
        clients: Callable[..., AcpClient]) -> None:
    client = clients("--agent", "exec")
    answer = client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    result = answer["result"]
    assert result["protocolVersion"] == 1
    assert result["agentInfo"]["name"] == "coding-os"
    assert result["authMethods"] == []
    capabilities = result["agentCapabilities"]
    assert capabilities["loadSession"] is True
    assert capabilities["sessionCapabilities"] == {"list": {}, "resume": {}, "close": {}}
    assert capabilities["promptCapabilities"]["embeddedContext"] is True


@pytest.mark.slow
def test_an_exec_prompt_streams_its_lines_with_increasing_seqs_and_ends_with_its_usage(
        clients: Callable[..., AcpClient]) -> None:
    client = clients("--agent", "exec")
    session = client.new_session()
    answer = client.call("session/prompt", prompt("echo hello; echo world", session))
    assert answer["result"]["stopReason"] == "end_turn"
    assert answer["result"]["_meta"]["cos/usage"] == {"exit_code": 0}
    assert client.text() == "hello\nworld\n"
    numbers = seqs(client.updates())
    assert len(numbers) == 2 and numbers == sorted(set(numbers))
    assert answer["result"]["_meta"]["cos/seq"] > numbers[-1]
    again = client.call("session/prompt", prompt("echo again", session))  # a new task
    assert again["result"]["stopReason"] == "end_turn"
    assert client.text().endswith("again\n")
    assert seqs(client.updates()) == sorted(set(seqs(client.updates())))
    assert "Traceback" not in client.close()


@pytest.mark.slow
def test_session_new_offers_the_agent_and_approval_options(
        clients: Callable[..., AcpClient]) -> None:
    client = clients("--agent", "exec")
    answer = client.call("session/new", {"cwd": str(client.cwd), "mcpServers": []})
    options = {o["id"]: o for o in answer["result"]["configOptions"]}
    assert options["agent"]["currentValue"] == "exec"
    assert [o["value"] for o in options["approval"]["options"]] == [
        "ask", "accept-edits", "allow-all"]
    session = answer["result"]["sessionId"]
    changed = client.call("session/set_config_option",
                          {"sessionId": session, "configId": "approval", "value": "allow-all"})
    assert {o["id"]: o["currentValue"] for o in changed["result"]["configOptions"]} == {
        "agent": "exec", "approval": "allow-all"}
    bad = client.call("session/set_config_option",
                      {"sessionId": session, "configId": "approval", "value": "sometimes"})
    assert bad["error"]["code"] == -32602 and "value" in bad["error"]["message"]


@pytest.mark.slow
def test_cancel_interrupts_the_running_task_and_the_prompt_ends_cancelled(
        clients: Callable[..., AcpClient]) -> None:
    client = clients("--agent", "exec")
    session = client.new_session()
    client.send({"id": 99, "method": "session/prompt",
                 "params": prompt("echo started; sleep 60; echo never", session)})
    client.until(lambda m: m.get("method") == "session/update")
    client.send({"method": "session/cancel", "params": {"sessionId": session}})
    answer = client.until(lambda m: m.get("id") == 99)
    assert answer["result"]["stopReason"] == "cancelled"
    assert "never" not in client.text()


@pytest.mark.slow
def test_the_task_outlives_a_killed_cos_acp_and_a_resume_from_its_cursor_has_no_gap_or_duplicate(
        clients: Callable[..., AcpClient], project: Path) -> None:
    gate = project / "gate"
    first = clients("--agent", "exec")
    session = first.new_session()
    first.send({"id": 50, "method": "session/prompt", "params": prompt(
        f"echo one; echo two; while [ ! -e {gate} ]; do sleep 0.05; done; echo three; "
        "echo four", session)})
    first.until(lambda m: "two" in json.dumps(m))
    cursor = seqs(first.updates())[-1]
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait()

    second = clients("--agent", "exec")
    answer = second.call("session/resume", {"sessionId": session, "cwd": str(project),
                                            "mcpServers": [], "_meta": {"cos/since": cursor}})
    assert "result" in answer, answer
    assert answer["result"]["_meta"]["cos/turn"] == "running"
    assert answer["result"]["_meta"]["cos/last_seq"] >= cursor
    gate.write_text("", encoding="utf-8")
    second.until(lambda m: "four" in json.dumps(m))
    assert second.text() == "three\nfour\n"  # nothing before the cursor, nothing twice
    numbers = seqs(first.updates()) + seqs(second.updates())
    assert numbers == sorted(set(numbers))
    assert min(seqs(second.updates())) > cursor


@pytest.mark.slow
def test_resume_from_zero_replays_the_whole_session_then_prompts_go_on(
        clients: Callable[..., AcpClient], project: Path) -> None:
    first = clients("--agent", "exec")
    session = first.new_session()
    first.call("session/prompt", prompt("echo kept", session))
    first.close()
    second = clients("--agent", "exec")
    answer = second.call("session/resume", {"sessionId": session, "cwd": str(project),
                                            "mcpServers": [], "_meta": {"cos/since": 0}})
    assert answer["result"]["_meta"]["cos/turn"] == "idle"
    assert second.text() == "kept\n"
    assert answer["result"]["_meta"]["cos/last_seq"] >= max(seqs(second.updates()))
    more = second.call("session/prompt", prompt("echo more", session))
    assert more["result"]["stopReason"] == "end_turn"
    assert second.text() == "kept\nmore\n"


@pytest.mark.slow
def test_two_clients_see_one_permission_request_and_the_first_answer_wins(
        clients: Callable[..., AcpClient], project: Path) -> None:
    first = clients("--agent", ECHO)
    session = first.new_session()
    second = clients("--agent", ECHO)
    second.call("session/resume", {"sessionId": session, "cwd": str(project), "mcpServers": []})
    first.send({"id": 70, "method": "session/prompt",
                "params": prompt("write notes.txt: a line", session)})
    asked_first = first.until(lambda m: m.get("method") == "session/request_permission")
    asked_second = second.until(lambda m: m.get("method") == "session/request_permission")
    assert asked_first["params"]["_meta"]["cos/request"] == \
        asked_second["params"]["_meta"]["cos/request"]
    assert [o["kind"] for o in asked_first["params"]["options"]] == [
        "allow_once", "allow_always", "reject_once"]
    second.send({"id": asked_second["id"],
                 "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}})
    done = first.until(lambda m: m.get("id") == 70)
    assert done["result"]["stopReason"] == "end_turn"
    # The later answer changes nothing: the file was written once, as allowed.
    first.send({"id": asked_first["id"],
                "result": {"outcome": {"outcome": "selected", "optionId": "reject_once"}}})
    assert (project / "notes.txt").read_text(encoding="utf-8") == "a line\n"
    second.until(lambda m: m.get("method") == "session/update"
                 and m["params"]["update"].get("sessionUpdate") == "tool_call_update")


@pytest.mark.slow
def test_a_permission_still_open_is_asked_again_after_a_resume(
        clients: Callable[..., AcpClient], project: Path) -> None:
    first = clients("--agent", ECHO)
    session = first.new_session()
    first.send({"id": 80, "method": "session/prompt",
                "params": prompt("write notes.txt: later", session)})
    asked = first.until(lambda m: m.get("method") == "session/request_permission")
    cursor = asked["params"]["_meta"]["cos/seq"]
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait()
    second = clients("--agent", ECHO)
    answer = second.call("session/resume", {"sessionId": session, "cwd": str(project),
                                            "mcpServers": [], "_meta": {"cos/since": cursor}})
    assert answer["result"]["_meta"]["cos/turn"] == "awaiting_permission"
    again = second.until(lambda m: m.get("method") == "session/request_permission")
    assert again["params"]["_meta"]["cos/request"] == asked["params"]["_meta"]["cos/request"]
    second.send({"id": again["id"],
                 "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}})
    second.until(lambda m: "later" in json.dumps(m.get("params", {}).get("update", {}))
                 or (project / "notes.txt").exists() and m.get("method") == "session/update"
                 and m["params"]["update"].get("sessionUpdate") == "tool_call_update")
    assert (project / "notes.txt").read_text(encoding="utf-8") == "later\n"


@pytest.mark.slow
def test_bad_input_gets_json_rpc_errors_and_the_process_keeps_serving(
        clients: Callable[..., AcpClient], project: Path) -> None:
    client = clients("--agent", "exec")
    client.write(b"{not json\n")
    assert client.next()["error"]["code"] == -32700
    client.write(b"[1, 2]\n")
    assert client.next()["error"]["code"] == -32600
    client.write(b'{"jsonrpc": "2.0", "id": 5}\n')
    refused = client.next()
    assert refused["error"]["code"] == -32600 and refused["id"] == 5
    client.write(b'{"jsonrpc": "2.0", "id": 6, "method": "session/new", "params": {"cwd": "'
                 + b"x" * (1 << 20) + b'"}}\n')
    too_long = client.next()
    assert too_long["error"]["code"] == -32600 and "refused whole" in too_long["error"]["message"]
    unknown = client.call("session/frobnicate", {})
    assert unknown["error"]["code"] == -32601
    assert unknown["error"]["data"] == {"method": "session/frobnicate"}
    missing = client.call("session/new", {"mcpServers": []})
    assert missing["error"]["code"] == -32602 and "cwd" in missing["error"]["message"]
    relative = client.call("session/new", {"cwd": "here", "mcpServers": []})
    assert relative["error"]["code"] == -32602 and "cwd" in relative["error"]["message"]
    nowhere = client.call("session/prompt", prompt("echo x", "ses-exec-20260101-000000-abcd"))
    assert nowhere["error"]["code"] == -32002
    assert "ses-exec-20260101-000000-abcd" in nowhere["error"]["message"]
    resumed = client.call("session/resume", {"sessionId": "ses-nope", "cwd": str(project),
                                             "mcpServers": []})
    assert resumed["error"]["code"] == -32002 and "ses-nope" in resumed["error"]["message"]
    no_prompt = client.call("session/prompt", {"sessionId": "x"})
    assert no_prompt["error"]["code"] == -32602 and "prompt" in no_prompt["error"]["message"]
    no_text = client.call("session/prompt", {"sessionId": "x",
                                             "prompt": [{"type": "text", "text": 5}]})
    assert no_text["error"]["code"] == -32602 and "prompt" in no_text["error"]["message"]
    assert client.call("initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1
    stderr = client.close()
    assert "Traceback" not in stderr
    for line in client.stdout_raw:
        assert json.loads(line)["jsonrpc"] == "2.0"


def test_cos_acp_without_the_sdk_says_how_to_install_it(project: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "no_acp"
    blocker.mkdir()
    (blocker / "acp.py").write_text("raise ModuleNotFoundError('no acp', name='acp')\n",
                                    encoding="utf-8")
    proc = subprocess.run([COS, "acp"], cwd=project, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(blocker)}, input="",
                          timeout=WAIT_S)
    assert proc.returncode == 2
    assert "pip install 'coding-os[acp]'" in proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_cos_attach_beside_cos_acp_sees_the_same_updates_and_answers_its_permission(
        clients: Callable[..., AcpClient], project: Path) -> None:
    editor = clients("--agent", ECHO)
    session = editor.new_session()
    [row] = [r for r in json.loads(cos("agents", "--json", "--all", cwd=project).stdout)
             if r["cos_session"] == session]
    attach = subprocess.Popen([COS, "attach", row["id"], "--json"], cwd=project,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    events: queue.Queue[dict[str, Any]] = queue.Queue()

    def pump() -> None:
        assert attach.stdout is not None
        for line in attach.stdout:
            events.put(json.loads(line))

    pumping = threading.Thread(target=pump, daemon=True)
    pumping.start()
    seen: list[dict[str, Any]] = []

    def attached_until(done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while True:
            event = events.get(timeout=WAIT_S)
            seen.append(event)
            if done(event):
                return event

    try:
        answer = editor.call("session/prompt", prompt("hello from the editor", session))
        assert answer["result"]["stopReason"] == "end_turn"
        attached_until(lambda e: e["seq"] == answer["result"]["_meta"]["cos/seq"])
        # A permission request reaches both; the answer typed beside the editor wins.
        editor.send({"id": 90, "method": "session/prompt",
                     "params": prompt("write notes.txt: a line", session)})
        asked = editor.until(lambda m: m.get("method") == "session/request_permission")
        request = attached_until(lambda e: e["msg"]["type"] == "approval_request")
        assert request["msg"]["request"] == asked["params"]["_meta"]["cos/request"]
        approved = cos("approve", row["id"], "--request", str(request["msg"]["request"]),
                       cwd=project)
        assert approved.returncode == 0, approved.stderr
        done = editor.until(lambda m: m.get("id") == 90)
        assert done["result"]["stopReason"] == "end_turn"
        attached_until(lambda e: e["seq"] == done["result"]["_meta"]["cos/seq"])
    finally:
        attach.kill()
        attach.wait()
        pumping.join(timeout=WAIT_S)
        for pipe in (attach.stdout, attach.stderr):
            if pipe is not None:
                pipe.close()
    assert (project / "notes.txt").read_text(encoding="utf-8") == "a line\n"
    # The same updates: each the editor got is an event cos attach showed, with its seq.
    by_seq = {event["seq"]: event["msg"] for event in seen}
    updates = [u for u in editor.updates() if "cos/seq" in u.get("_meta", {})]
    assert updates and all(u["_meta"]["cos/seq"] in by_seq for u in updates)
    said = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert said == [msg["text"] for msg in by_seq.values() if msg["type"] == "agent_message"]
    assert said == ["echo: hello from the editor", "wrote notes.txt"]
    calls = [u for u in updates if u["sessionUpdate"] == "tool_call_update"]
    assert calls and calls[-1]["status"] == "completed"
