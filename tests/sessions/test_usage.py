"""Token use per turn of a session (sessions/usage.py): from the native logs of Claude Code and
Codex (the fixtures of ../shared/fixtures, described in their SOURCES.md); an engine session's,
from the usage its finished tasks reported, is tests/runtime/test_usage.py's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coding_os.errors import NotFound
from coding_os.sessions.usage import native_turns, totals
from tests.helpers import (
    CLAUDE_FIXTURES,
    CODEX_FIXTURES,
    MAIN_1053,
    VIEWER,
    assistant,
    require_claude_fixtures,
    require_codex_fixtures,
    user,
    write_jsonl,
)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_codex_turns_add_up_to_the_rollouts_last_total_and_start_at_each_user_message() -> None:
    require_codex_fixtures()
    rollouts = sorted(CODEX_FIXTURES.glob("*.jsonl"))
    assert len(rollouts) == 4
    for rollout in rollouts:
        entries = lines(rollout)
        counts = [e["payload"]["info"] for e in entries if e["type"] == "event_msg"
                  and e["payload"]["type"] == "token_count" and e["payload"]["info"]]
        total = counts[-1]["total_token_usage"]
        prompts = [e["payload"]["message"] for e in entries if e["type"] == "event_msg"
                   and e["payload"]["type"] == "user_message"]
        turns = native_turns(str(rollout), "codex")
        # Codex writes most counts twice; each is counted once, so the turns add up to the
        # thread's own running total.
        assert sum(t["input"] for t in turns) == total["input_tokens"], rollout.name
        assert sum(t["output"] for t in turns) == total["output_tokens"], rollout.name
        assert sum(t["cached"] for t in turns) == total["cached_input_tokens"], rollout.name
        assert [t["prompt"] for t in turns] == [" ".join(p.split())[:len(t["prompt"])]
                                                for p, t in zip(prompts, turns)]
        assert len(turns) == len(prompts) and [t["turn"] for t in turns] == \
            list(range(1, len(prompts) + 1)), rollout.name


def test_the_unredacted_codex_rollout_has_two_turns_of_known_size() -> None:
    require_codex_fixtures()
    [rollout] = CODEX_FIXTURES.glob("*019e1625-789d-76c0-80ab-3724b5ddb799.jsonl")
    first, second = native_turns(str(rollout), "codex")
    # gpt-5.5 at $5 per million fresh input tokens, $0.50 cached, $30 output.
    assert first == {"turn": 1, "prompt": "show tools", "input": 57906, "output": 374,
                     "cached": 37120, "cache_write": 0, "models": ["gpt-5.5"],
                     "cost": pytest.approx(((57906 - 37120) * 5 + 37120 * 0.5 + 374 * 30) / 1e6)}
    assert second["prompt"].startswith("let's update the defailt context")
    assert (second["input"], second["output"]) == (6055836 - 57906, 9118 - 374)


def claude_usage_by_message(path: Path) -> dict[str, dict[str, int]]:
    """Each main-chain assistant message's usage, once per message id and request (the
    transcript writes one line per content block, each with the message's usage)."""
    found: dict[str, dict[str, int]] = {}
    for entry in lines(path):
        if entry.get("type") == "assistant" and not entry.get("isSidechain"):
            message = entry["message"]
            found[f"{message['id']}|{entry.get('requestId')}"] = message["usage"]
    return found


def test_claude_turns_count_each_message_once_and_leave_the_sidechains_out() -> None:
    require_claude_fixtures()
    for name, prompt in ((f"claude-code-log__{MAIN_1053}.jsonl", "now we have cache so we"),
                         (f"claude-code-viewer__{VIEWER}.jsonl", "/orchestrator @CLAUDE.md")):
        path = CLAUDE_FIXTURES / name
        usage = claude_usage_by_message(path).values()
        [turn] = native_turns(str(path), "claude")  # one prompt each, then tool calls
        assert turn["prompt"].startswith(prompt)
        assert turn["input"] == sum(u["input_tokens"] + u["cache_creation_input_tokens"]
                                    + u["cache_read_input_tokens"] for u in usage)
        assert turn["cached"] == sum(u["cache_read_input_tokens"] for u in usage)
        assert turn["output"] == sum(u["output_tokens"] for u in usage)
    sidechain_output = sum(e["message"]["usage"]["output_tokens"]
                           for e in lines(CLAUDE_FIXTURES / f"claude-code-viewer__{VIEWER}.jsonl")
                           if e.get("type") == "assistant" and e.get("isSidechain"))
    assert sidechain_output > 0  # there was something to leave out


def test_a_claude_turn_runs_from_a_prompt_or_command_to_the_next_on_the_live_chain(
        tmp_path: Path) -> None:
    s = "ses-usage"
    entries = [
        user("u1", None, "first prompt", 1, s),
        assistant("a1", "u1", "msg_1", "req_1", 2, s, output=5),
        # The same message again (a second content block): counted once.
        assistant("a1b", "a1", "msg_1", "req_1", 3, s, output=5),
        user("r1", "a1b", [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}], 4, s),
        assistant("a2", "r1", "msg_2", "req_2", 5, s, output=7),
        # A subagent's message on a sidechain is not the conversation's.
        assistant("x1", None, "msg_x", "req_x", 6, s, output=900, isSidechain=True),
        user("u2", "a2", "<command-name>/review</command-name><command-args>now</command-args>",
             7, s),
        assistant("a3", "u2", "msg_3", "req_3", 8, s, output=11),
        # A branch that was left: not on the live chain.
        user("u9", "a1b", "abandoned", 9, s),
        assistant("a9", "u9", "msg_9", "req_9", 10, s, output=500),
        user("u3", "a3", "third", 11, s),
    ]
    path = tmp_path / "t.jsonl"
    write_jsonl(path, entries)
    # "claude-test" is no model of the price table: its turns have no cost, never a guess.
    assert native_turns(str(path), "claude") == [
        {"turn": 1, "prompt": "first prompt", "input": 2 * 1110, "output": 12, "cached": 2000,
         "cache_write": 200, "models": ["claude-test"], "cost": None},
        {"turn": 2, "prompt": "/review now", "input": 1110, "output": 11, "cached": 1000,
         "cache_write": 100, "models": ["claude-test"], "cost": None},
        {"turn": 3, "prompt": "third", "input": 0, "output": 0, "cached": 0, "cache_write": 0,
         "models": [], "cost": 0.0},
    ]


def priced(entry: dict[str, Any], model: str, **usage: Any) -> dict[str, Any]:
    entry["message"]["model"] = model
    entry["message"]["usage"] = usage
    return entry


def test_a_claude_turn_prices_each_message_at_its_models_rates_and_its_cache_writes_lifetime(
        tmp_path: Path) -> None:
    s = "ses-usage"
    path = tmp_path / "t.jsonl"
    write_jsonl(path, [
        user("u1", None, "first", 1, s),
        priced(assistant("a1", "u1", "msg_1", "req_1", 2, s), "claude-sonnet-4-20250514",
               input_tokens=100, cache_read_input_tokens=2000, cache_creation_input_tokens=300,
               output_tokens=50),  # no split: Claude Code wrote 5-minute caches only
        # A second model in the same turn (a /model switch), writing an hour-long cache.
        priced(assistant("a2", "a1", "msg_2", "req_2", 3, s), "claude-opus-5",
               input_tokens=10, cache_read_input_tokens=0, cache_creation_input_tokens=1000,
               cache_creation={"ephemeral_5m_input_tokens": 400,
                               "ephemeral_1h_input_tokens": 600}, output_tokens=20),
        user("u2", "a2", "second", 4, s),
        priced(assistant("a3", "u2", "msg_3", "req_3", 5, s), "claude-opus-5",
               input_tokens=10, output_tokens=20, speed="fast"),  # fast mode: not in the table
    ])
    first, second = native_turns(str(path), "claude")
    sonnet = (100 * 3 + 2000 * 0.30 + 300 * 3.75 + 50 * 15) / 1e6
    opus = (10 * 5 + 400 * 6.25 + 600 * 10 + 20 * 25) / 1e6
    assert first["models"] == ["claude-sonnet-4-20250514", "claude-opus-5"]
    assert first["cost"] == pytest.approx(sonnet + opus)
    assert first["cache_write"] == 1300 and first["input"] == 100 + 2000 + 300 + 10 + 1000
    assert second["models"] == ["claude-opus-5"] and second["cost"] is None
    assert totals([first, second]) == {
        "input": first["input"] + 10, "output": 90, "cached": 2000, "cache_write": 1300,
        "models": ["claude-sonnet-4-20250514", "claude-opus-5"], "cost": None}
    assert totals([first])["cost"] == pytest.approx(sonnet + opus)


def test_a_missing_log_is_not_found_and_another_kind_has_no_native_turns(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="no session log at"):
        native_turns(str(tmp_path / "gone.jsonl"), "claude")
    with pytest.raises(NotFound, match="no session log at"):
        native_turns(str(tmp_path / "gone.jsonl"), "codex")
    (tmp_path / "cos.jsonl").write_text("{}\n", encoding="utf-8")
    assert native_turns(str(tmp_path / "cos.jsonl"), "cos") == []


def test_a_claude_turn_appended_after_a_read_is_counted_by_the_next_read(tmp_path: Path) -> None:
    s = "ses-usage"
    path = tmp_path / "t.jsonl"
    write_jsonl(path, [user("u1", None, "first", 1, s),
                       assistant("a1", "u1", "msg_1", "req_1", 2, s, output=5)])
    assert [t["output"] for t in native_turns(str(path), "claude")] == [5]
    write_jsonl(path, [user("u2", "a1", "second", 3, s),
                       assistant("a2", "u2", "msg_2", "req_2", 4, s, output=8)], mode="a")
    assert [t["output"] for t in native_turns(str(path), "claude")] == [5, 8]
