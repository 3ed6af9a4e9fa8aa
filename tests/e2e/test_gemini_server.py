"""The scripted Gemini API server answers as the Gemini API does and follows its script from the
conversation a request carries; the real Gemini CLI 0.61 runs a whole session against it (a
shell command and two file edits, then a resume whose request holds the first turn), and the
session file it writes reads back with coding_os.adapters.gemini."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from coding_os.adapters.gemini.sessions import read_conversation
from .gemini_cli import gemini_sessions, require_gemini, run_gemini
from .gemini_server import (
    SUMMARY_CUE,
    GeminiServer,
    Text,
    Thinking,
    ToolCall,
    contents_text,
)
from .model_server import OUT_OF_SCRIPT, SIDE_ANSWER

REPOSITORY = Path(__file__).resolve().parents[2]
TOOLS = [{"functionDeclarations": [{"name": "run_shell_command"}]}]


def post(server: GeminiServer, path: str, body: dict[str, Any]) -> bytes:
    request = urllib.request.Request(server.base_url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return bytes(answer.read())


def stream(server: GeminiServer, body: dict[str, Any], model: str = "m") -> list[dict[str, Any]]:
    raw = post(server, f"/v1beta/models/{model}:streamGenerateContent?alt=sse", body)
    frames = raw.decode().split("\r\n\r\n")
    assert frames[-1] == ""  # every frame ends with a blank line, and nothing follows the last
    assert all(frame.startswith("data: ") for frame in frames[:-1])
    return [json.loads(frame[len("data: "):]) for frame in frames[:-1]]


def turn(role: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "parts": list(parts)}


def parts(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [part for chunk in chunks for part in chunk["candidates"][0]["content"]["parts"]]


def test_a_streamed_step_is_sse_frames_a_thought_first_and_usage_last(
        gemini_server: GeminiServer) -> None:
    gemini_server.scripts[""] = [
        Thinking("**Look** around", ToolCall("run_shell_command", {"command": "ls"}))]
    body = {"contents": [turn("user", {"text": "<session_context>x</session_context>"},
                              {"text": "go"})], "tools": TOOLS}
    chunks = stream(gemini_server, body, model="gemini-2.5-pro")
    assert parts(chunks) == [{"text": "**Look** around", "thought": True},
                             {"functionCall": {"name": "run_shell_command",
                                               "args": {"command": "ls"}}}]
    last = chunks[-1]
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert last["modelVersion"] == "gemini-2.5-pro"
    usage = last["usageMetadata"]
    assert usage["totalTokenCount"] == (usage["promptTokenCount"] + usage["candidatesTokenCount"]
                                        + usage["thoughtsTokenCount"])
    [request] = gemini_server.agent_requests()
    assert request.answer == "step 0" and request.body == body


def test_the_step_is_the_number_of_model_turns_a_request_carries(
        gemini_server: GeminiServer) -> None:
    gemini_server.scripts[""] = [ToolCall("run_shell_command", {"command": "ls"}),
                                 Text("first answer"), Text("second answer")]
    first = [turn("user", {"text": "go"})]
    called = [*first, turn("model", {"functionCall": {"name": "run_shell_command"}}),
              turn("user", {"functionResponse": {"name": "run_shell_command"}})]
    answered = [*called, turn("model", {"text": "first answer"}), turn("user", {"text": "more"})]
    answers = [parts(stream(gemini_server, {"contents": c, "tools": TOOLS}))[0]
               for c in (first, called, called, answered, [*answered, *answered[-2:]])]
    assert answers == [{"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}}},
                       {"text": "first answer"}, {"text": "first answer"},  # a retry
                       {"text": "second answer"}, {"text": OUT_OF_SCRIPT}]


def test_a_conversation_follows_the_script_whose_marker_its_first_prompt_holds(
        gemini_server: GeminiServer) -> None:
    gemini_server.scripts = {"": [Text("default")], "SUBTASK:": [Text("subagent")]}
    context = {"text": "<session_context>SUBTASK: is not a prompt</session_context>"}
    asked = [parts(stream(gemini_server, {"contents": [turn("user", context, {"text": p})],
                                          "tools": TOOLS}))[0]["text"]
             for p in ("plain", "SUBTASK: count")]
    assert asked == ["default", "subagent"]


def test_side_requests_get_json_of_their_schema_a_summary_or_a_text(
        gemini_server: GeminiServer) -> None:
    router = {"contents": [turn("user", {"text": "rate it"})], "generationConfig": {
        "responseMimeType": "application/json", "responseJsonSchema": {
            "type": "OBJECT", "properties": {
                "complexity_reasoning": {"type": "STRING"},
                "complexity_score": {"type": "INTEGER"},
                "next": {"type": "STRING", "enum": ["user", "model"]}}}}}
    summary = {"contents": [turn("user", {"text": f"{SUMMARY_CUE} in ONE sentence.\n\n"
                                                  "User: <session_context>…\n\n"
                                                  "User: fix the login bug\n\nSummary:"})]}
    answers = []
    for body in (router, summary, {"contents": [turn("user", {"text": "anything"})]}):
        raw = post(gemini_server, "/v1beta/models/flash:generateContent", body)
        answers.append(json.loads(raw)["candidates"][0]["content"]["parts"][0]["text"])
    assert json.loads(answers[0]) == {"complexity_reasoning": SIDE_ANSWER,
                                      "complexity_score": 1, "next": "user"}
    assert answers[1:] == ["Scripted: fix the login bug", SIDE_ANSWER]
    assert [r.answer for r in gemini_server.side_requests()] == ["side"] * 3


def test_token_counts_models_and_unknown_paths_are_answered_and_recorded(
        gemini_server: GeminiServer) -> None:
    counted = json.loads(post(gemini_server, "/v1beta/models/m:countTokens",
                              {"contents": [turn("user", {"text": "x" * 400})]}))
    assert counted["totalTokens"] > 100
    with urllib.request.urlopen(gemini_server.base_url + "/v1beta/models", timeout=10) as found:
        assert json.loads(found.read())["models"][0]["name"] == "models/gemini-2.5-pro"
    with pytest.raises(urllib.error.HTTPError) as missing:
        post(gemini_server, "/v1/other", {})
    assert missing.value.code == 404
    missing.value.close()
    assert [r.answer for r in gemini_server.requests] == ["count_tokens", "models", "not_found"]


def test_the_server_runs_as_a_script_from_a_json_script(tmp_path: Path) -> None:
    script = tmp_path / "steps.json"
    script.write_text(json.dumps([{"call": "run_shell_command", "args": {"command": "ls"},
                                   "thought": "**Hmm**"}, {"text": "done"}]), encoding="utf-8")
    log = tmp_path / "requests.jsonl"
    process = subprocess.Popen([sys.executable, "-m", "tests.e2e.gemini_server", "--script",
                                str(script), "--log", str(log)], cwd=REPOSITORY,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        request = urllib.request.Request(
            base_url + "/v1beta/models/m:generateContent",
            data=json.dumps({"contents": [turn("user", {"text": "go"})], "tools": TOOLS}).encode())
        with urllib.request.urlopen(request, timeout=10) as answer:
            got = json.loads(answer.read())["candidates"][0]["content"]["parts"]
        assert got == [{"text": "**Hmm**", "thought": True},
                       {"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}}}]
        assert json.loads(log.read_text(encoding="utf-8"))["answer"] == "step 0"
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0
        if process.stdout is not None:
            process.stdout.close()


# -- with the real Gemini CLI --------------------------------------------------------------------


@pytest.mark.e2e
def test_gemini_cli_runs_a_scripted_session_and_a_resume_sends_the_first_turn(
        gemini_server: GeminiServer, tmp_path: Path) -> None:
    require_gemini()
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("alpha\n", encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    gemini_server.scripts[""] = [
        Thinking("**Plan** look first", ToolCall("run_shell_command", {"command": "ls"})),
        ToolCall("write_file", {"file_path": "new.txt", "content": "one\ntwo\n"}),
        ToolCall("replace", {"file_path": "notes.txt", "old_string": "alpha",
                             "new_string": "beta", "instruction": "Rename alpha."}),
        Text("Edited both files."),
        ToolCall("run_shell_command", {"command": "cat new.txt"}),
        Text("Still there."),
    ]
    first = run_gemini(project, "edit the files", gemini_server, home)
    assert first.returncode == 0, first.stderr[-2000:]
    result = json.loads(first.stdout)
    assert result["response"] == "Edited both files."
    assert (project / "new.txt").read_text(encoding="utf-8") == "one\ntwo\n"
    assert (project / "notes.txt").read_text(encoding="utf-8") == "beta\n"

    again = run_gemini(project, "is new.txt still there?", gemini_server, home,
                       extra_args=("--resume", result["session_id"]))
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)["response"] == "Still there."
    resumed = gemini_server.agent_requests()[4]
    assert resumed.answer == "step 4"
    sent = contents_text(resumed.body)
    assert "edit the files" in sent and "Edited both files." in sent
    assert "is new.txt still there?" in sent

    # A resume that starts in another minute also writes a file of its own (named by that
    # minute: its header and the injected context); the conversation goes on in the first one.
    path = [p for p in gemini_sessions(home, project)
            if p.name.endswith(f"-{result['session_id'][:8]}.jsonl")][0]
    conversation = read_conversation(path)
    session = conversation.session
    assert session.native_id == result["session_id"]
    assert (session.user_messages, session.assistant_messages, session.tool_calls,
            session.thoughts) == (2, 6, 4, 1)
    assert session.first_prompt == "edit the files" and os.path.isabs(session.path)
