"""interfaces/acp/mapping.py: the §7 events as ACP updates, each with its seq."""

from __future__ import annotations

from typing import Any

from coding_os.interfaces.acp import mapping
from coding_os.runtime import wire


def event(seq: int | None, **msg: Any) -> dict[str, Any]:
    return {"seq": seq, "msg": msg}


def test_a_message_is_one_chunk_carrying_its_seq() -> None:
    [update] = mapping.Updates().update(event(7, type=wire.AGENT_MESSAGE, text="hi"))
    assert update == {"sessionUpdate": "agent_message_chunk",
                      "content": {"type": "text", "text": "hi"}, "_meta": {"cos/seq": 7}}


def test_a_streamed_message_sends_only_what_its_deltas_did_not() -> None:
    updates = mapping.Updates()
    first = updates.update(event(1, type=wire.AGENT_MESSAGE_DELTA, text="hel"))
    rest = updates.update(event(2, type=wire.AGENT_MESSAGE, text="hello"))
    assert [u["content"]["text"] for u in first + rest] == ["hel", "lo"]
    assert updates.update(event(3, type=wire.AGENT_MESSAGE_DELTA, text="")) == []


def test_an_exec_line_keeps_its_newline() -> None:
    [update] = mapping.Updates().update(event(4, type=wire.AGENT_MESSAGE, text="x",
                                              stream="stdout"))
    assert update["content"]["text"] == "x\n"


def test_a_tool_call_has_its_kind_title_input_and_locations() -> None:
    [update] = mapping.Updates().update(event(
        5, type=wire.TOOL_CALL, call_id="c1", tool="Read",
        input={"file_path": "/p/a.py", "offset": 10}))
    assert update == {"sessionUpdate": mapping.TOOL_CALL_START, "toolCallId": "c1",
                      "title": "Read: /p/a.py", "kind": "read", "status": "pending",
                      "rawInput": {"file_path": "/p/a.py", "offset": 10},
                      "locations": [{"path": "/p/a.py", "line": 10}], "_meta": {"cos/seq": 5}}
    assert mapping.TOOL_CALL_START == "tool_call"


def test_tool_kinds_cover_the_agents_tool_names() -> None:
    assert [mapping.tool_kind(name) for name in (
        "Bash", "Edit", "Write", "Grep", "WebFetch", "TodoWrite", "commandExecution",
        "fileChange", "mcp__srv__Read", "Frobnicate")] == [
        "execute", "edit", "edit", "search", "fetch", "think", "execute", "edit", "read",
        "other"]


def test_an_edit_result_is_a_diff_and_a_failed_one_its_output() -> None:
    updates = mapping.Updates()
    updates.update(event(1, type=wire.TOOL_CALL, call_id="e", tool="Edit",
                         input={"file_path": "/p/a", "old_string": "a", "new_string": "b"}))
    [done] = updates.update(event(2, type=wire.TOOL_RESULT, call_id="e", ok=True,
                                  output="edited"))
    assert done["status"] == "completed"
    assert done["content"] == [{"type": "diff", "path": "/p/a", "oldText": "a",
                                "newText": "b"}]
    updates.update(event(3, type=wire.TOOL_CALL, call_id="f", tool="Bash",
                         input={"command": "false"}))
    [failed] = updates.update(event(4, type=wire.TOOL_RESULT, call_id="f", ok=False,
                                    output="exit 1"))
    assert failed["status"] == "failed"
    assert failed["content"] == [{"type": "content",
                                  "content": {"type": "text", "text": "exit 1"}}]


def test_bookkeeping_events_make_no_update() -> None:
    updates = mapping.Updates()
    for msg in ({"type": wire.TASK_STARTED, "task": 1},
                {"type": wire.SESSION_CONFIGURED, "native_id": None, "agent": "exec", "cwd": "/"},
                {"type": wire.APPROVAL_REQUEST, "request": 1, "tool": "Bash", "input": {}},
                {"type": wire.TASK_COMPLETE, "task": 1, "usage": None}):
        assert updates.update({"seq": 1, "msg": msg}) == []


def test_a_claude_thought_is_a_thought_chunk() -> None:
    raw = {"type": "assistant", "message": {"content": [{"type": "thinking", "thinking": "hm"},
                                                        {"type": "text", "text": "x"}]}}
    [update] = mapping.Updates().update(event(9, type=wire.NATIVE, raw=raw))
    assert update["sessionUpdate"] == "agent_thought_chunk"
    assert update["content"]["text"] == "hm"


def test_a_permission_request_names_the_open_call_of_its_tool_and_three_options() -> None:
    updates = mapping.Updates()
    updates.update(event(1, type=wire.TOOL_CALL, call_id="t1", tool="Bash",
                         input={"command": "rm x"}))
    params = updates.permission("ses", event(2, type=wire.APPROVAL_REQUEST, request="r9",
                                             tool="Bash", input={"command": "rm x"}))
    assert params["toolCall"]["toolCallId"] == "t1"
    assert params["toolCall"]["kind"] == "execute"
    assert params["_meta"] == {"cos/request": "r9", "cos/seq": 2}
    assert [o["kind"] for o in params["options"]] == ["allow_once", "allow_always",
                                                      "reject_once"]
    alone = mapping.Updates().permission("ses", event(3, type=wire.APPROVAL_REQUEST,
                                                      request=4, tool="X", input=None))
    assert alone["toolCall"]["toolCallId"] == "approval-4"


def test_an_answer_is_the_engines_decision() -> None:
    assert mapping.decision({"outcome": "selected", "optionId": "allow_once"}) == wire.ALLOW
    assert mapping.decision({"outcome": "selected", "optionId": "allow_always"}) == wire.ALLOW
    assert mapping.decision({"outcome": "selected", "optionId": "reject_once"}) == wire.DENY
    assert mapping.decision({"outcome": "cancelled"}) is None


def test_an_interrupted_task_stops_cancelled_and_a_finished_one_end_turn() -> None:
    assert mapping.stop_reason({"type": wire.TURN_ABORTED,
                                "reason": wire.ABORT_INTERRUPTED}) == "cancelled"
    assert mapping.stop_reason({"type": wire.TASK_COMPLETE}) == "end_turn"


def test_a_prompt_joins_its_text_resources_and_links() -> None:
    assert mapping.prompt_text([
        {"type": "text", "text": "look at"},
        {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}},
        {"type": "resource_link", "uri": "file:///b", "name": "b"},
        {"type": "image", "data": "", "mimeType": "image/png"}]) == (
        "look at\n<file:///a>\nbody\n<file:///b>")


def test_an_approval_stays_open_until_the_agent_goes_on() -> None:
    asked = event(3, type=wire.APPROVAL_REQUEST, request=1, tool="Bash", input={})
    assert mapping.open_approvals([event(1, type=wire.TASK_STARTED, task=1), asked]) == [asked]
    assert mapping.open_approvals([asked, event(4, type=wire.TOOL_RESULT, call_id="c",
                                                ok=True, output="")]) == []
