"""Token use per turn of a session the engine runs (runtime/usage.py): from the usage its
finished tasks reported, priced at the model it was configured with."""

from __future__ import annotations

from typing import Any

import pytest

from coding_os.runtime.usage import engine_turns


def test_engine_turns_come_from_the_usage_of_finished_tasks() -> None:
    events = [
        {"seq": 1, "msg": {"type": "task_started", "task": "t1"}},
        {"seq": 2, "msg": {"type": "task_complete", "task": "t1",
                           "usage": {"input": 120, "output": 30, "cached": 100}}},
        {"seq": 3, "msg": {"type": "task_complete", "task": "t2"}},  # reported none
        {"seq": 4, "msg": {"type": "task_complete", "task": "t3", "usage": {"output": 9}}},
    ]
    # No session_configured names a model: the cost is not known.
    assert engine_turns(events) == [
        {"turn": 1, "task": "t1", "seq": 2, "prompt": None, "input": 120, "output": 30,
         "cached": 100, "cache_write": 0, "models": [], "cost": None},
        {"turn": 2, "task": "t3", "seq": 4, "prompt": None, "input": 0, "output": 9,
         "cached": 0, "cache_write": 0, "models": [], "cost": None},
    ]


def test_engine_turns_count_each_backends_cache_as_its_agent_does_and_price_its_model() -> None:
    def configured(agent: str, model: str | None) -> dict[str, Any]:
        return {"seq": 1, "msg": {"type": "session_configured", "agent": agent, "model": model,
                                  "native_id": "n", "cwd": "/w"}}

    def complete(usage: dict[str, int]) -> dict[str, Any]:
        return {"seq": 2, "msg": {"type": "task_complete", "task": "t1", "usage": usage}}

    # The codex backend's input holds its cached input (as OpenAI reports it).
    [codex] = engine_turns([configured("codex", "gpt-5.3-codex"),
                            complete({"input": 1000, "cached_input": 600, "output": 50})])
    assert (codex["input"], codex["cached"], codex["models"]) == (1000, 600, ["gpt-5.3-codex"])
    assert codex["cost"] == pytest.approx((400 * 1.75 + 600 * 0.175 + 50 * 14) / 1e6)
    # The claude backend's input leaves out what was read from the cache (as Claude reports it).
    [claude] = engine_turns([configured("claude", "claude-opus-5"),
                             complete({"input": 10, "cached_input": 3000, "output": 40})])
    assert (claude["input"], claude["cached"]) == (3010, 3000)
    assert claude["cost"] == pytest.approx((10 * 5 + 3000 * 0.5 + 40 * 25) / 1e6)
    # Claude cache writes whose lifetime the usage does not say, or no model named: no cost.
    [written] = engine_turns([configured("claude", "claude-opus-5"),
                              complete({"input": 10, "cache_creation_input": 500, "output": 4})])
    assert (written["input"], written["cache_write"], written["cost"]) == (510, 500, None)
    [unnamed] = engine_turns([configured("codex", None), complete({"input": 9, "output": 1})])
    assert unnamed["cost"] is None and unnamed["models"] == []
