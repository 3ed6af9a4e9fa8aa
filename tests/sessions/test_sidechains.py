"""The subagent conversations of a session (sessions/sidechains.py), each placed at the turn
that started it: Claude Code's inline sidechains (the fixture of ../shared/fixtures/claude,
described in its SOURCES.md), 2.0.x sibling and 2.1.x nested subagent files, and cos sessions
whose `parent` is the session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coding_os import api
from coding_os.errors import NotFound
from coding_os.sessions.export import read_turns
from coding_os.sessions.sidechains import claude_sidechains
from tests.helpers import (CLAUDE_FIXTURES, VIEWER, assistant, require_claude_fixtures, user,
                           write_jsonl)


def task_calls(path: Path) -> dict[str, dict[str, Any]]:
    """The Task tool calls of a transcript's main conversation, by tool_use id."""
    calls = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        content = entry.get("message", {}).get("content")
        if entry.get("type") == "assistant" and not entry.get("isSidechain") \
                and isinstance(content, list):
            calls.update({b["id"]: b["input"] for b in content
                          if b.get("type") == "tool_use" and b.get("name") == "Task"})
    return calls


def test_inline_sidechains_sit_at_the_task_call_whose_prompt_started_them() -> None:
    require_claude_fixtures()
    path = CLAUDE_FIXTURES / f"claude-code-viewer__{VIEWER}.jsonl"
    calls = task_calls(path)
    assert len(calls) == 3  # SOURCES.md: three Task calls, two sidechain chains
    found = claude_sidechains(str(path))
    assert len(found) == 2
    _meta, turns = read_turns(str(path), "claude")
    sidechain_entries = sum(1 for line in path.read_text(encoding="utf-8").splitlines()
                            if json.loads(line).get("isSidechain"))
    assert sidechain_entries == 22
    for sidechain in found:
        task = calls[sidechain["call"]]
        assert sidechain["layout"] == "inline"
        assert sidechain["description"] == task["description"]
        assert sidechain["agent_type"] == task["subagent_type"] == "general-purpose"
        assert " ".join(task["prompt"].split()).startswith(sidechain["prompt"])
        # Its place is the Task call among the conversation's turns, as the page numbers them.
        placed = turns[sidechain["turn"]]
        assert (placed.role, placed.tool) == ("tool_call", "Task")
        assert json.loads(placed.text)["description"] == task["description"]
        assert sidechain["turns"][0]["role"] == "user"
        assert {"assistant", "tool_call", "tool_result"} <= {t["role"] for t in
                                                              sidechain["turns"]}
    assert found[0]["created"] < found[1]["created"]
    # The call whose subagent left no transcript starts nothing.
    assert len({s["call"] for s in found}) == 2


def subagent_session(tmp_path: Path) -> Path:
    """A 2.1.x session that started two subagents with Task: one whose result names its
    agentId (nested under the session), one that is found by its prompt (a 2.0.x sibling
    file); and a warm-up subagent no call started."""
    s = "11111111-2222-3333-4444-555555555555"
    project = tmp_path / "projects" / "-work-app"
    call = {"type": "tool_use", "name": "Task", "id": "toolu_A",
            "input": {"description": "Find the bug", "prompt": "Look for the bug",
                      "subagent_type": "Explore"}}
    second = {"type": "tool_use", "name": "Task", "id": "toolu_B",
              "input": {"description": "Write tests", "prompt": "Write the tests",
                        "subagent_type": "general-purpose"}}
    a1 = assistant("a1", "u1", "msg_1", "req_1", 2, s)
    a1["message"]["content"] = [{"type": "text", "text": "on it"}, call, second]
    write_jsonl(project / f"{s}.jsonl", [
        user("u1", None, "fix it", 1, s),
        a1,
        user("r1", "a1", [{"type": "tool_result", "tool_use_id": "toolu_A", "content": "found"}],
             9, s, toolUseResult={"agentId": "abc123", "status": "completed"}),
        user("r2", "r1", [{"type": "tool_result", "tool_use_id": "toolu_B", "content": "ok"}],
             10, s),
        assistant("a2", "r2", "msg_2", "req_2", 11, s),
    ])
    nested = project / s / "subagents"
    write_jsonl(nested / "agent-abc123.jsonl", [
        user("n1", None, "Look for the bug", 3, s, isSidechain=True, agentId="abc123"),
        assistant("n2", "n1", "msg_n", "req_n", 4, s, isSidechain=True, agentId="abc123"),
    ])
    (nested / "agent-abc123.meta.json").write_text(
        json.dumps({"agentType": "Explore", "spawnDepth": 1}), encoding="utf-8")
    write_jsonl(project / "agent-def456.jsonl", [
        user("b1", None, "Write the tests", 5, s, isSidechain=True, agentId="def456"),
        assistant("b2", "b1", "msg_b", "req_b", 6, s, isSidechain=True, agentId="def456"),
    ])
    write_jsonl(project / "agent-0warm.jsonl", [
        user("w1", None, "Warmup", 0, s, isSidechain=True, agentId="0warm"),
    ])
    write_jsonl(project / "agent-other.jsonl", [  # another session's subagent: not this one's
        user("o1", None, "Write the tests", 7, "someone-else", isSidechain=True),
    ])
    return project / f"{s}.jsonl"


def test_subagent_files_beside_and_under_a_session_sit_at_the_call_that_started_them(
        tmp_path: Path) -> None:
    path = subagent_session(tmp_path)
    found = {s["agent_id"]: s for s in claude_sidechains(str(path))}
    assert set(found) == {"abc123", "def456", "0warm"}
    assert (found["abc123"]["layout"], found["abc123"]["call"], found["abc123"]["turn"]) == \
        ("nested", "toolu_A", 2)
    assert (found["def456"]["layout"], found["def456"]["call"], found["def456"]["turn"]) == \
        ("sibling", "toolu_B", 3)
    assert found["abc123"]["description"] == "Find the bug"
    assert [t["role"] for t in found["abc123"]["turns"]] == ["user", "assistant"]
    assert (found["0warm"]["call"], found["0warm"]["turn"]) == (None, None)
    _meta, turns = read_turns(str(path), "claude")
    assert [(t.role, t.tool) for t in turns[2:4]] == [("tool_call", "Task")] * 2


def test_a_missing_transcript_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="no session log at"):
        claude_sidechains(str(tmp_path / "gone.jsonl"))


def test_a_cos_session_whose_parent_is_the_session_sits_after_the_turn_before_it(
        project: Path) -> None:
    parent = api.create_session("python", title="lead", cwd=str(project))
    api.append_event(parent, "user", {"turn": 1, "text": "plan the work"}, cwd=str(project))
    api.append_event(parent, "assistant", {"turn": 1, "text": "starting a helper"}, cwd=str(project))
    child = api.create_session("python", title="helper", parent=parent, cwd=str(project))
    api.append_event(child, "user", {"turn": 1, "text": "do the part"}, cwd=str(project))
    api.append_event(child, "assistant", {"turn": 1, "text": "part done"}, cwd=str(project))
    api.append_event(parent, "assistant", {"turn": 1, "text": "the helper is done"}, cwd=str(project))
    api.create_session("python", title="unrelated", cwd=str(project))
    [found] = api.session_sidechains(parent, cwd=str(project))["sidechains"]
    assert (found["session"], found["layout"], found["description"]) == (child, "cos", "helper")
    assert found["turn"] == 1  # after "starting a helper", before "the helper is done"
    assert [(t["role"], t["text"]) for t in found["turns"]] == [("user", "do the part"),
                                                               ("assistant", "part done")]
    with pytest.raises(NotFound):  # a sidechain is not a session of its own
        api.session_sidechains(child, cwd=str(project))
    later = api.create_session("python", title="second helper", parent=parent,
                               cwd=str(project))
    found_again = api.session_sidechains(parent, cwd=str(project))["sidechains"]
    assert [s["session"] for s in found_again] == [child, later]
    assert found_again[1]["turn"] == 2  # after "the helper is done"


def test_a_subagent_written_after_a_read_is_found_by_the_next_read(tmp_path: Path) -> None:
    path = subagent_session(tmp_path)
    first = claude_sidechains(str(path))
    assert {s["agent_id"] for s in first} == {"abc123", "def456", "0warm"}
    first[0]["turns"].clear()  # what a caller does with its answer is not remembered
    s = "11111111-2222-3333-4444-555555555555"
    write_jsonl(path.parent / s / "subagents" / "agent-ghi789.jsonl", [
        user("g1", None, "A third look", 20, s, isSidechain=True, agentId="ghi789")])
    again = claude_sidechains(str(path))
    assert {x["agent_id"] for x in again} == {"abc123", "def456", "0warm", "ghi789"}
    assert all(x["turns"] for x in again)


def test_a_real_2_0_warm_up_subagent_beside_its_session_is_listed_with_no_place(
        tmp_path: Path) -> None:
    require_claude_fixtures()
    parent = "58edcfae-5291-436c-91e4-54fbb188a0ca"  # the session the fixture's entries name
    project = tmp_path / "projects" / "-Users-dain-workspace-claude-code-log"
    write_jsonl(project / f"{parent}.jsonl", [user("p1", None, "hello", 1, parent),
                                              assistant("p2", "p1", "msg_p", "req_p", 2, parent)])
    fixture = CLAUDE_FIXTURES / "claude-code-log__agent-3be551df.jsonl"
    (project / "agent-3be551df.jsonl").write_bytes(fixture.read_bytes())
    [warmup] = claude_sidechains(str(project / f"{parent}.jsonl"))
    assert (warmup["agent_id"], warmup["layout"], warmup["call"], warmup["turn"]) == \
        ("3be551df", "sibling", None, None)
    assert warmup["prompt"] == "Warmup"
    assert [t["role"] for t in warmup["turns"]][0] == "user"
