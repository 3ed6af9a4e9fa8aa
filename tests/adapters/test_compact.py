"""The writers of summaries as native sessions: adapters/claude/compact.py and
adapters/codex/compact.py (the real clients resume what they write: tests/e2e/test_summaries_real.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coding_os.adapters.claude import compact as claude
from coding_os.adapters.claude.tree import live_chain
from coding_os.adapters.codex import compact as codex
from coding_os.errors import InvalidInput, StateIOError


def chain(turns: int) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    parent = None
    for n in range(turns):
        for kind, content in (("user", f"prompt {n}"), ("assistant", [{"type": "text",
                                                                        "text": f"answer {n}"}])):
            uuid = f"{kind[0]}{n}"
            entries.append({"type": kind, "uuid": uuid, "parentUuid": parent,
                            "sessionId": "old", "cwd": "/w",
                            "timestamp": f"2026-01-01T00:00:{10 * n + (kind == 'assistant'):02d}.000Z",
                            "message": {"role": kind, "content": content}})
            parent = uuid
    return entries


@pytest.mark.parametrize("direction", ["up-to", "from"])
def test_a_claude_summary_is_one_valid_chain_under_the_new_session_id(direction: str) -> None:
    original = chain(3)
    made = claude.compacted_entries(original, 2, direction, "the summary", "2026-01-02T00:00:00.000Z",
                                    session="new")
    entries = made.entries
    assert entries[0]["subtype"] == "compact_boundary" and entries[0]["parentUuid"] is None
    for parent, child in zip(entries, entries[1:]):
        assert child["parentUuid"] == parent["uuid"]
    assert {e["sessionId"] for e in entries} == {"new"}
    summary = [e for e in entries if e.get("isCompactSummary")]
    assert len(summary) == 1 and "the summary" in summary[0]["message"]["content"]
    kept = ["u1", "a1", "u2", "a2"] if direction == "up-to" else ["u0", "a0"]
    assert [e["uuid"] for e in entries if e["uuid"] in {x["uuid"] for x in original}] == kept
    # The summary sits where what it stands for was: before the kept part, or after it.
    assert (entries.index(summary[0]) == 1) == (direction == "up-to")
    assert [e["uuid"] for e in live_chain(entries)] == [e["uuid"] for e in entries]
    assert original == chain(3)  # the entries given are not changed


def test_a_claude_split_is_found_by_native_point_or_by_time() -> None:
    entries = chain(3)
    assert claude.split_after(entries, "a0") == 2
    assert claude.split_after(entries, "nowhere") is None
    assert claude.split_at_time(entries, "2026-01-01T00:00:15.000Z") == 2
    assert claude.split_at_time(entries, "2025-01-01T00:00:00.000Z") is None


def test_a_claude_summary_with_nothing_on_its_side_is_refused() -> None:
    with pytest.raises(InvalidInput):
        claude.compacted_entries(chain(2), 0, "up-to", "s", "2026-01-02T00:00:00.000Z")


def test_a_claude_transcript_is_never_written_over(tmp_path: Path) -> None:
    made = claude.compacted_entries(chain(2), 2, "up-to", "s", "2026-01-02T00:00:00.000Z",
                                    session="new")
    path = claude.write_transcript(str(tmp_path), made)
    assert Path(path).stat().st_mode & 0o777 == 0o600
    with pytest.raises(StateIOError):
        claude.write_transcript(str(tmp_path), made)


def rollout(turns: int) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [{"timestamp": "t0", "type": "session_meta",
                                    "payload": {"id": "old", "cwd": "/w"}}]
    for n in range(turns):
        ts = f"2026-01-01T00:00:{10 * n:02d}.000Z"
        lines += [
            {"timestamp": ts, "type": "event_msg",
             "payload": {"type": "task_started", "turn_id": f"t{n}"}},
            {"timestamp": ts, "type": "response_item",
             "payload": {"type": "message", "role": "developer",
                         "content": [{"type": "input_text", "text": "instructions"}]}},
            {"timestamp": ts, "type": "response_item",
             "payload": {"type": "message", "role": "user",
                         "content": [{"type": "input_text", "text": f"prompt {n}"}]}},
            {"timestamp": ts, "type": "event_msg",
             "payload": {"type": "user_message", "thread_id": "old"}},
        ]
    return lines


@pytest.mark.parametrize("direction", ["up-to", "from"])
def test_a_codex_summary_is_a_compacted_item_in_a_new_thread(direction: str) -> None:
    original = rollout(3)
    copy = json.loads(json.dumps(original))
    split = codex.split_at_turn(original, "t1")
    assert split is not None
    made = codex.compacted_lines(original, split, direction, "the summary", "now", thread="new")
    lines = made.lines
    assert lines[0]["payload"]["id"] == "new" and lines[0]["payload"]["forked_from_id"] == "old"
    compacted = [line for line in lines if line["type"] == "compacted"]
    assert len(compacted) == 1
    history = compacted[0]["payload"]["replacement_history"]
    assert "the summary" in history[-1]["content"][0]["text"]
    prompts = [line["payload"]["content"][0]["text"] for line in lines
               if line["type"] == "response_item" and line["payload"]["role"] == "user"]
    kept_turns = [p["payload"]["turn_id"] for p in lines if p["payload"].get("type") ==
                  "task_started"]
    assert kept_turns == (["t1", "t2"] if direction == "up-to" else ["t0"])
    assert prompts == (["prompt 1", "prompt 2"] if direction == "up-to" else ["prompt 0"])
    if direction == "from":  # the kept history is in the replacement, before the summary
        assert [i["content"][0]["text"] for i in history if i["role"] == "user"][0] == "prompt 0"
    assert all(line["payload"].get("thread_id") in (None, "new") for line in lines)
    assert original == copy


def test_a_codex_split_must_be_a_turn_start() -> None:
    with pytest.raises(InvalidInput):
        codex.compacted_lines(rollout(2), 2, "up-to", "s", "now")
    assert codex.split_at_time(rollout(3), "2026-01-01T00:00:15.000Z") == 5
    assert codex.split_at_turn(rollout(3), "t9") is None


def test_a_new_thread_id_is_a_version_7_uuid() -> None:
    thread = codex.new_thread_id()
    assert len(thread) == 36 and thread[14] == "7" and thread[19] in "89ab"
