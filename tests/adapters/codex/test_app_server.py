"""The one `codex app-server` client (adapters/codex/app_server.py): what `Client` makes of each
line, answers matched to their requests once, the dialogues' messages in order, and the
synchronous transport of a rewind (`fork_thread`, `revert_thread`) against a few lines of Python
standing in for the app-server (the real Codex drives both transports in
tests/e2e/test_rewind_real.py and tests/e2e/test_runtime_codex.py)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coding_os.adapters.codex.app_server import (
    METHOD_NOT_FOUND, Answer, AppServerRefused, Client, Dialogue, Notification, Other,
    ServerRequest, Step, fork_thread, fork_through, open_thread, revert_before, revert_thread)
from coding_os.errors import BackendError, NotFound


def line(message: object) -> bytes:
    return json.dumps(message).encode("utf-8") + b"\n"


def steps_of(dialogue: Dialogue[Any], results: list[object]) -> tuple[list[Step], object]:
    """The steps `dialogue` sends, each request answered by the next of `results`, and what it
    gives."""
    sent: list[Step] = []
    answers = iter(results)
    result: object = None
    while True:
        try:
            step = dialogue.send(result)
        except StopIteration as end:
            return sent, end.value
        sent.append(step)
        result = None if step.notification else next(answers)


def test_each_line_read_is_an_answer_a_server_request_a_notification_or_other() -> None:
    client = Client()
    request_id, sent = client.request("thread/start", {"cwd": "/p"})
    assert json.loads(sent) == {"id": request_id, "method": "thread/start",
                                "params": {"cwd": "/p"}}
    assert sent.endswith(b"\n") and sent.count(b"\n") == 1
    assert client.read(line({"id": request_id, "result": {"ok": 1}})) == Answer(
        request_id, "thread/start", {"ok": 1}, None, {"id": request_id, "result": {"ok": 1}})
    asked = client.read(line({"id": "r1", "method": "item/tool/requestUserInput"}))
    assert isinstance(asked, ServerRequest) and asked.id == "r1" and asked.params == {}
    told = client.read(line({"method": "turn/started", "params": {"turn": {"id": "t"}}}))
    assert isinstance(told, Notification) and told.params == {"turn": {"id": "t"}}
    assert client.read(b"Codex says hi\n") == Other("Codex says hi")
    assert client.read(b"[1, 2]") == Other([1, 2])
    assert client.read(line({"result": 1})) == Other({"result": 1})


def test_an_answer_is_matched_once_and_not_after_its_request_is_given_up() -> None:
    client = Client()
    first, _ = client.request("initialize", {})
    second, _ = client.request("thread/resume", {})
    assert second == first + 1
    answer = {"id": first, "result": {}}
    assert isinstance(client.read(line(answer)), Answer)
    assert client.read(line(answer)) == Other(answer)  # already answered
    client.forget(second)
    assert client.read(line({"id": second, "result": {}})) == Other({"id": second, "result": {}})
    assert isinstance(client.read(line({"id": True, "result": {}})), Other)  # no bool ids


def test_a_refusal_gives_the_servers_message_on_one_short_line() -> None:
    client = Client()
    request_id, _ = client.request("thread/fork", {})
    read = client.read(line({"id": request_id, "error": {
        "code": -32600, "message": "no rollout\nfound for   thread " + "x" * 500}}))
    assert isinstance(read, Answer) and read.result is None and read.error is not None
    assert read.error.startswith("no rollout found for thread x") and len(read.error) == 300
    other_id, _ = client.request("thread/fork", {})
    read = client.read(line({"id": other_id, "error": "gone"}))
    assert isinstance(read, Answer) and read.error == "gone"


def test_a_request_of_the_servers_is_refused_by_name_and_answered_by_id() -> None:
    asked = Client().read(line({"id": 7, "method": "account/refresh", "params": {"a": 1}}))
    assert isinstance(asked, ServerRequest)
    assert json.loads(Client.refuse(asked)) == {"id": 7, "error": {
        "code": METHOD_NOT_FOUND, "message": "coding-os does not handle account/refresh"}}
    assert json.loads(Client.respond(7, {"decision": "accept"})) == {
        "id": 7, "result": {"decision": "accept"}}
    assert json.loads(Client.notify("initialized")) == {"method": "initialized"}


@given(st.lists(st.sampled_from(["initialize", "thread/start", "turn/start", "turn/interrupt"]),
                min_size=1, max_size=8), st.randoms())
def test_answers_in_any_order_each_reach_their_own_request(methods: list[str],
                                                           order: Any) -> None:
    client = Client()
    asked = {client.request(method, None)[0]: method for method in methods}
    ids = list(asked)
    order.shuffle(ids)
    for request_id in ids:
        read = client.read(line({"id": request_id, "result": request_id}))
        assert isinstance(read, Answer)
        assert (read.method, read.result) == (asked[request_id], request_id)
    assert all(isinstance(client.read(line({"id": i, "result": 0})), Other) for i in ids)


def test_a_session_opens_with_the_handshake_then_its_thread() -> None:
    params = {"cwd": "/p", "approvalPolicy": "untrusted"}
    sent, thread = steps_of(open_thread(params), [{}, {"thread": {"id": "th-1"}}])
    assert [(step.method, step.notification) for step in sent] == [
        ("initialize", False), ("initialized", True), ("thread/start", False)]
    assert sent[0].params is not None and sent[0].params["capabilities"] == {
        "experimentalApi": True}
    assert sent[2].params == {**params, "experimentalRawEvents": True}
    assert thread == "th-1"
    for fork, method in ((False, "thread/resume"), (True, "thread/fork")):
        sent, thread = steps_of(open_thread(params, thread_id="th-1", fork=fork),
                                [{}, {"thread": {"id": "th-2"}}])
        assert sent[2] == Step(method, {**params, "threadId": "th-1", "excludeTurns": True})
        assert thread == "th-2"


def test_an_answer_that_names_no_thread_is_a_backend_error() -> None:
    with pytest.raises(BackendError, match="no thread id for thread/start"):
        steps_of(open_thread({}), [{}, {"thread": {}}])
    with pytest.raises(BackendError, match="no thread id for thread/fork"):
        steps_of(fork_through("th", "turn-2", "/p"), [{}, None])


def test_a_rewind_forks_through_a_turn_or_reverts_before_one() -> None:
    sent, thread = steps_of(fork_through("th", "turn-2", "/p"), [{}, {"thread": {"id": "new"}}])
    assert sent[1:] == [Step("initialized", notification=True), Step("thread/fork", {
        "threadId": "th", "lastTurnId": "turn-2", "cwd": "/p", "excludeTurns": True})]
    assert thread == "new"
    sent, _ = steps_of(revert_before("th", "turn-2", "/p"), [{}, {}, {}])
    assert sent[2:] == [
        Step("thread/resume", {"threadId": "th", "cwd": "/p", "excludeTurns": True}),
        Step("thread/revert", {"threadId": "th", "beforeTurnId": "turn-2"})]


# An app-server of a few lines: it says what the real one never says between answers (a line
# that is not JSON, a request of its own), records each message it is sent, and answers the
# thread requests as ANSWER says (a thread id, or an error).
FAKE_APP_SERVER = '''
import json, sys
def ask():
    message = json.loads(sys.stdin.readline())
    with open(RECORD, "a", encoding="utf-8") as record:
        record.write(json.dumps(message) + "\\n")
    return message
def say(message):
    sys.stdout.write((message if isinstance(message, str) else json.dumps(message)) + "\\n")
    sys.stdout.flush()
initialize = ask()
say("Codex says hi")
say({"id": initialize["id"], "result": {}})
ask()  # initialized
while True:
    request = ask()
    say({"method": "thread/started", "params": {}})
    say({"id": "r1", "method": "item/tool/requestUserInput", "params": {}})
    ask()  # the refusal
    if ANSWER == "error":
        say({"id": request["id"], "error": {"code": -32600, "message": "no rollout found"}})
    else:
        say({"id": request["id"], "result": {"thread": {"id": "forked-1"}}})
'''


def fake_codex(tmp_path: Path, answer: str) -> tuple[str, Path]:
    record = tmp_path / "received.jsonl"
    program = tmp_path / "fake-codex"
    program.write_text(f"#!{sys.executable}\nRECORD = {str(record)!r}\nANSWER = {answer!r}\n"
                       f"{FAKE_APP_SERVER}", encoding="utf-8")
    program.chmod(0o755)
    return str(program), record


def received(record: Path) -> list[dict[str, Any]]:
    return [json.loads(text) for text in record.read_text(encoding="utf-8").splitlines()]


def test_fork_thread_reads_past_what_else_the_server_says_and_refuses_its_requests(
        tmp_path: Path) -> None:
    program, record = fake_codex(tmp_path, "thread")
    assert fork_thread("th", "turn-2", cwd=str(tmp_path), program=program, timeout=30) == \
        "forked-1"
    messages = received(record)
    assert [message.get("method") for message in messages] == [
        "initialize", "initialized", "thread/fork", None]
    assert messages[2]["params"]["lastTurnId"] == "turn-2"
    assert messages[3] == {"id": "r1", "error": {
        "code": METHOD_NOT_FOUND, "message": "coding-os does not handle item/tool/requestUserInput"}}


def test_revert_thread_refused_by_the_server_is_app_server_refused(tmp_path: Path) -> None:
    program, record = fake_codex(tmp_path, "error")
    with pytest.raises(AppServerRefused, match="refused thread/resume: no rollout found"):
        revert_thread("th", "turn-2", cwd=str(tmp_path), program=program, timeout=30)
    assert [message.get("method") for message in received(record)][-2:] == [
        "thread/resume", None]  # nothing reverted after the refusal


def test_a_missing_program_is_not_found_and_one_that_ends_is_a_backend_error(
        tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="not on PATH"):
        fork_thread("th", "t", cwd=str(tmp_path), program=str(tmp_path / "no-codex"))
    false = shutil.which("false")
    assert false is not None
    with pytest.raises(BackendError, match=r"app-server ended \(exit code 1\)"):
        revert_thread("th", "t", cwd=str(tmp_path), program=false, timeout=30)
