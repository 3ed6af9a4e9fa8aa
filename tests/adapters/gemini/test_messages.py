"""What a Gemini CLI message says, as conversation entries for export and replay: prompts (never
the injected context), the model's text and thoughts, each tool call once with its arguments and
result, over the real files of fixtures/ and a few made-up messages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coding_os.adapters.gemini.messages import (
    GeminiTokens,
    conversation_entries,
    prompt_text,
    response_counts,
)
from coding_os.adapters.gemini.sessions import read_conversation

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CHATS = FIXTURES / "gemini-home" / "tmp" / "project" / "chats"


def kinds(entries: Any) -> list[str]:
    return [entry.kind if entry.kind != "tool_call" else f"call:{entry.tool}"
            for entry in entries]


def test_a_first_turn_reads_as_context_prompt_thought_calls_and_answer() -> None:
    entries = read_conversation(FIXTURES / "snapshots" / "plain.jsonl").entries
    assert kinds(entries) == ["context", "prompt", "thought", "call:run_shell_command",
                              "call:write_file", "call:replace", "assistant"]
    thought, shell, write, replace, answer = entries[2:]
    assert (thought.subject, thought.text) == ("Planning the notes",
                                              "I will look at the project first.")
    assert thought.model == "gemini-3.8-flash"
    assert thought.tokens == GeminiTokens(input=210, output=5, thoughts=3, total=218)
    assert shell.args == {"command": "ls", "description": "List files"}
    assert shell.ok is True and shell.status == "success"
    assert shell.output is not None and "README.md" in shell.output and "main.py" in shell.output
    assert write.args == {"file_path": "notes.txt", "content": "alpha\nbeta\n"}
    assert write.output is not None and write.output.startswith("Successfully created")
    assert replace.args is not None and replace.args["new_string"] == "gamma"
    assert answer.text == "notes.txt holds alpha and gamma."
    assert answer.tokens is not None and answer.tokens.output == 5


def test_after_a_resume_each_call_is_one_entry_with_its_result() -> None:
    entries = read_conversation(CHATS / "session-2026-12-06T08-07-aa78fc04.jsonl").entries
    # 0.61 wrote the first turn back without its calls' records and kept each response twice
    # (as `<id>_response` and as the original): still one entry per call, none for a result.
    assert kinds(entries) == [
        "context", "prompt", "thought", "call:run_shell_command", "call:write_file",
        "call:replace", "assistant", "prompt", "call:run_shell_command", "assistant"]
    assert all(entry.output for entry in entries if entry.kind == "tool_call")
    assert entries[-2].output is not None and "alpha\ngamma" in entries[-2].output


def test_a_rewound_prompt_and_its_answer_are_not_entries() -> None:
    entries = read_conversation(CHATS / "session-2026-12-06T08-07-72a406ac.jsonl").entries
    assert [e.text for e in entries if e.kind == "prompt"] == [
        "REWIND: write rewind.txt with one line.", "REWIND third prompt"]
    assert [e.text for e in entries if e.kind == "assistant"] == [
        "Wrote rewind.txt.", "Third answer, after the rewind."]


def test_a_subagent_call_names_the_subagent_it_ran() -> None:
    entries = read_conversation(CHATS / "session-2026-12-06T08-07-bc799a31.jsonl").entries
    [call] = [entry for entry in entries if entry.kind == "tool_call"]
    assert call.tool == "invoke_agent"
    assert call.agent_id == "0456292b-6ccc-424b-8356-a37725bc09d9"
    assert call.args == {"agent_name": "generalist",
                         "prompt": "SUBTASK: count the files of the project."}
    assert call.output is not None and "There are 3 files." in call.output


def test_a_session_of_0_38_has_its_thought_and_calls() -> None:
    path = FIXTURES / "gemini-home" / "tmp" / "legacy" / "chats" / \
        "session-2026-12-06T08-07-fb7f6adf.json"
    entries = read_conversation(path).entries
    assert kinds(entries) == ["prompt", "thought", "call:run_shell_command", "call:write_file",
                              "assistant"]
    assert entries[1].subject == "Checking" and entries[1].text == "the folder."


def test_a_function_response_no_call_claims_is_a_result_of_its_own() -> None:
    messages = [
        {"id": "u", "type": "user", "content": [{"text": "go"}]},
        {"id": "r", "type": "user", "content": [{"functionResponse": {
            "id": "lost", "name": "run_shell_command", "response": {"error": "boom"}}}]},
        {"id": "g", "type": "gemini", "content": "", "toolCalls": [{
            "id": "c1", "name": "read_file", "args": {"file_path": "a"}, "status": "error",
            "result": [{"functionResponse": {"id": "c1", "name": "read_file",
                                             "response": {"error": "no such file"}}}]}]},
        {"id": "n", "type": "warning", "content": "quota low"},
    ]
    entries = conversation_entries(messages)
    assert kinds(entries) == ["prompt", "tool_result", "call:read_file", "notice"]
    assert entries[1].output == "boom" and entries[1].call_id == "lost"
    assert entries[2].ok is False and entries[2].output == "no such file"
    assert (entries[3].subject, entries[3].text) == ("warning", "quota low")


def test_a_call_kept_only_as_a_content_part_gets_its_result_from_the_response() -> None:
    messages = [
        {"id": "g", "type": "gemini", "content": [
            {"text": "**Look** first", "thought": True},
            {"functionCall": {"id": "c", "name": "glob", "args": {"pattern": "*"}}}]},
        {"id": "g_response", "type": "user", "content": [{"functionResponse": {
            "id": "c", "name": "glob", "response": {"output": "a.txt"}}}]},
    ]
    entries = conversation_entries(messages)
    assert kinds(entries) == ["thought", "call:glob"]
    assert (entries[0].subject, entries[0].text) == ("Look", "first")
    assert entries[1].output == "a.txt"


def test_prompt_text_is_what_a_person_typed() -> None:
    assert prompt_text({"type": "user", "content": [{"text": "fix it"}]}) == "fix it"
    assert prompt_text({"type": "user", "content": "plain string"}) == "plain string"
    for content in ([{"text": "<session_context>\nThis is the Gemini CLI.</session_context>"}],
                    [{"text": "/rewind"}], [{"functionResponse": {"id": "x"}}], []):
        assert prompt_text({"type": "user", "content": content}) is None
    assert prompt_text({"type": "gemini", "content": "an answer"}) is None


def test_response_counts_are_the_calls_thoughts_and_subagents_of_the_entries() -> None:
    responses = [
        {"id": "a", "type": "gemini", "content": "just text"},
        {"id": "b", "type": "gemini", "content": "", "thoughts": [],
         "toolCalls": [{"id": "c1", "name": "glob"}, "not a call",
                       {"id": "c2", "name": "invoke_agent", "agentId": "sub",
                        "args": {"agent_name": "generalist"}}]},
        {"id": "c", "type": "gemini", "content": [{"text": "**Plan** it", "thought": True},
                                                  {"functionCall": {"id": "f", "name": "ls"}},
                                                  "text"],
         "thoughts": [{"subject": "Recorded", "description": "wins"}, "not a thought"]},
        {"id": "d", "type": "gemini", "content": {"text": "**Only** a thought", "thought": True}},
        {"id": "e", "type": "gemini", "content": [{"functionCall": {"id": "g", "name": "ls"}}]},
    ]
    for message in responses:
        entries = conversation_entries([message])
        calls, thoughts, delegations = response_counts(message)
        assert calls == sum(1 for entry in entries if entry.kind == "tool_call")
        assert thoughts == sum(1 for entry in entries if entry.kind == "thought")
        assert delegations == tuple((entry.agent_id, "generalist") for entry in entries
                                    if entry.agent_id)
    assert response_counts(responses[1]) == (2, 0, (("sub", "generalist"),))
    assert response_counts(responses[2]) == (1, 1, ())
