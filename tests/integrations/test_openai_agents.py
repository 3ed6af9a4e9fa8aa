"""coding_os.integrations.openai_agents: every behaviour the OpenAI Agents SDK's `SQLiteSession`
documents, run against both `SQLiteSession` and `CosSession` with the same expected results (the
SDK ships no conformance suite), and the sessions it stores as cos sessions a user sees."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import SQLiteSession
from agents.memory import Session, SessionSettings

from coding_os.errors import InvalidInput
from coding_os.integrations.openai_agents import CosSession
from coding_os.sessions import transcript
from coding_os.state.tiers import Tiers
from tests.helpers import cos, cos_json

Factory = Callable[..., Any]

# Items as the SDK stores them: input messages, output messages, tool calls and their outputs,
# reasoning, and odd JSON (unicode, nesting, numbers, null).
ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "What's the weather in Paris?"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look"}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
     "arguments": "{\"city\": \"Paris\"}", "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "18°C, clear"},
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "It is 18°C and clear.", "annotations": []}]},
    {"type": "message", "role": "user",
     "content": [{"type": "input_text", "text": "Merci ✓ — and \U0001f600?"},
                 {"type": "input_image", "image_url": "https://example.invalid/x.png",
                  "detail": "auto"}]},
    {"role": "system", "content": "Be brief."},
    {"type": "custom", "nested": {"a": [1, 2.5, None, True, {"b": "c"}]}, "big": 2 ** 62},
]


def _msg(n: int) -> dict[str, Any]:
    return {"role": "user" if n % 2 == 0 else "assistant", "content": f"message {n}"}


@pytest.fixture(params=["sqlite", "cos"])
def make(request: pytest.FixtureRequest, tmp_path: Path, project: Path) -> Iterator[Factory]:
    """Sessions of one store: `make(session_id, **settings)`, SQLiteSession (one file) or
    CosSession (one project)."""
    made: list[Any] = []

    def factory(session_id: str, **kwargs: Any) -> Any:
        if request.param == "sqlite":
            session: Any = SQLiteSession(session_id, tmp_path / "agents.db", **kwargs)
        else:
            session = CosSession(session_id, project=project, **kwargs)
        made.append(session)
        return session

    yield factory
    for session in made:
        if isinstance(session, SQLiteSession):
            session.close()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_both_stores_satisfy_the_sdk_session_protocol(make: Factory) -> None:
    session = make("conv")
    assert isinstance(session, Session)
    assert session.session_id == "conv"


def test_a_new_session_is_empty_and_pop_and_clear_on_it_do_nothing(make: Factory) -> None:
    session = make("new")
    assert run(session.get_items()) == []
    assert run(session.get_items(limit=3)) == []
    assert run(session.pop_item()) is None
    run(session.clear_session())
    assert run(session.get_items()) == []


def test_items_come_back_in_the_order_they_were_added_across_calls(make: Factory) -> None:
    session = make("order")
    run(session.add_items([_msg(0), _msg(1)]))
    run(session.add_items([_msg(2)]))
    run(session.add_items([]))
    run(session.add_items([_msg(3), _msg(4), _msg(5)]))
    assert run(session.get_items()) == [_msg(n) for n in range(6)]


def test_items_round_trip_unchanged(make: Factory) -> None:
    session = make("round-trip")
    run(session.add_items(ITEMS))
    assert run(session.get_items()) == ITEMS
    # Another object of the same session id reads the same.
    assert run(make("round-trip").get_items()) == ITEMS


def test_limit_gives_the_latest_n_items_in_chronological_order(make: Factory) -> None:
    session = make("limit")
    run(session.add_items([_msg(n) for n in range(10)]))
    assert run(session.get_items(limit=3)) == [_msg(7), _msg(8), _msg(9)]
    assert run(session.get_items(limit=1)) == [_msg(9)]
    assert run(session.get_items(limit=10)) == [_msg(n) for n in range(10)]
    assert run(session.get_items(limit=50)) == [_msg(n) for n in range(10)]
    assert run(session.get_items(limit=0)) == []
    assert run(session.get_items(limit=-1)) == [_msg(n) for n in range(10)]


def test_the_session_settings_limit_is_the_default_limit(make: Factory) -> None:
    session = make("settings", session_settings=SessionSettings(limit=2))
    run(session.add_items([_msg(n) for n in range(5)]))
    assert run(session.get_items()) == [_msg(3), _msg(4)]
    assert run(session.get_items(limit=4)) == [_msg(n) for n in range(1, 5)]


def test_pop_item_returns_and_removes_the_latest_item(make: Factory) -> None:
    session = make("pop")
    run(session.add_items([_msg(0), _msg(1), _msg(2)]))
    assert run(session.pop_item()) == _msg(2)
    assert run(session.get_items()) == [_msg(0), _msg(1)]
    run(session.add_items([_msg(3)]))
    assert run(session.pop_item()) == _msg(3)
    assert run(session.pop_item()) == _msg(1)
    assert run(session.pop_item()) == _msg(0)
    assert run(session.pop_item()) is None
    assert run(session.get_items()) == []
    run(session.add_items([_msg(4)]))
    assert run(session.get_items()) == [_msg(4)]


def test_clear_session_removes_every_item_and_the_session_takes_new_ones(make: Factory) -> None:
    session = make("clear")
    run(session.add_items([_msg(n) for n in range(4)]))
    run(session.clear_session())
    assert run(session.get_items()) == []
    assert run(make("clear").get_items()) == []
    run(session.add_items([_msg(9)]))
    assert run(session.get_items()) == [_msg(9)]
    assert run(session.pop_item()) == _msg(9)
    assert run(session.pop_item()) is None


def test_sessions_of_different_ids_are_kept_apart(make: Factory) -> None:
    one, two = make("one"), make("two")
    run(one.add_items([_msg(1)]))
    run(two.add_items([_msg(2), _msg(3)]))
    run(one.add_items([_msg(4)]))
    assert run(one.get_items()) == [_msg(1), _msg(4)]
    assert run(two.get_items()) == [_msg(2), _msg(3)]
    assert run(two.pop_item()) == _msg(3)
    run(one.clear_session())
    assert run(one.get_items()) == []
    assert run(two.get_items()) == [_msg(2)]


def test_a_random_script_of_operations_gives_the_same_results_on_both_stores(
        tmp_path: Path, project: Path) -> None:
    rng = random.Random(19)
    script: list[tuple[str, Any]] = []
    for n in range(60):
        op = rng.choice(["add", "add", "get", "pop", "clear", "limit"])
        arg: Any = None
        if op == "add":
            arg = [rng.choice(ITEMS) | {"n": n} for _ in range(rng.randint(0, 3))]
        elif op == "limit":
            arg = rng.randint(0, 6)
        script.append((op, arg))

    async def play(session: Any) -> list[Any]:
        seen = []
        for op, arg in script:
            if op == "add":
                seen.append(await session.add_items(arg))
            elif op == "get":
                seen.append(await session.get_items())
            elif op == "limit":
                seen.append(await session.get_items(limit=arg))
            elif op == "pop":
                seen.append(await session.pop_item())
            else:
                seen.append(await session.clear_session())
        seen.append(await session.get_items())
        return seen

    sqlite = SQLiteSession("script", tmp_path / "agents.db")
    try:
        expected = run(play(sqlite))
    finally:
        sqlite.close()
    assert run(play(CosSession("script", project=project))) == expected


# -- cos: what a user sees ----------------------------------------------------------------------


def test_a_session_stored_through_cos_is_listed_and_exported_as_an_openai_agents_session(
        project: Path) -> None:
    session = CosSession("support-42", project=project)
    run(session.add_items(ITEMS[:5]))
    cos_id = session.cos_session
    assert cos_id is not None and cos_id.startswith("ses-openai-agents-")

    listed = cos_json("sessions", cwd=project)
    assert isinstance(listed, list)
    row = next(r for r in listed if r["id"] == cos_id)
    assert row["agent"] == "openai-agents"
    assert row["native_id"] == "support-42"
    assert row["messages"] == 2  # the user and the assistant message

    proc = cos("export", cos_id, cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert "What's the weather in Paris?" in proc.stdout
    assert "It is 18°C and clear." in proc.stdout
    searched = cos_json("sessions", "--search", "support-42", cwd=project)
    assert isinstance(searched, list) and [r["id"] for r in searched] == [cos_id]


def test_on_postgresql_the_session_is_listed_from_the_shared_index(
        project: Path, pg_url: str) -> None:
    env = {"COS_DATABASE_URL": pg_url}
    session = CosSession("on-pg", project=project, env={**os.environ, **env})
    run(session.add_items([_msg(0), _msg(1)]))
    assert run(session.pop_item()) == _msg(1)
    listed = cos_json("sessions", "--agent", "openai-agents", cwd=project, env=env)
    assert isinstance(listed, list)
    assert [(r["id"], r["native_id"], r["messages"]) for r in listed] == [
        (session.cos_session, "on-pg", 1)]


def test_the_cos_session_id_opens_the_same_items_and_a_fork_holds_them_too(
        project: Path) -> None:
    session = CosSession("forked", project=project)
    run(session.add_items([_msg(0), _msg(1)]))
    cos_id = session.cos_session
    assert cos_id is not None
    assert run(CosSession(cos_id, project=project).get_items()) == [_msg(0), _msg(1)]

    fork = cos_json("fork", cos_id, cwd=project)
    assert isinstance(fork, dict)
    copy = CosSession(str(fork["session"]), project=project)
    assert run(copy.get_items()) == [_msg(0), _msg(1)]
    run(copy.add_items([_msg(2)]))
    assert run(session.get_items()) == [_msg(0), _msg(1)]


def test_popped_and_cleared_items_stay_in_the_transcript_hidden_by_rewinds(
        project: Path) -> None:
    session = CosSession("history", project=project)
    run(session.add_items([_msg(0), _msg(1)]))
    run(session.pop_item())
    run(session.clear_session())
    assert session.cos_session is not None
    path = transcript.transcript_path(Tiers(str(project / ".coding-os")), session.cos_session)
    read = transcript.read(path)
    assert [e["type"] for e in read.entries] == [
        "session_meta", "user", "assistant", "rewind", "rewind"]
    assert [e["type"] for e in read.visible()] == ["session_meta"]


def test_items_that_are_not_json_objects_are_refused_and_nothing_is_stored(
        project: Path) -> None:
    session = CosSession("bad", project=project)
    run(session.add_items([_msg(0)]))
    for bad in (["not an item"], [_msg(1), {"x": object()}], [_msg(1), {"x": float("nan")}]):
        with pytest.raises(InvalidInput):
            run(session.add_items(bad))
    assert run(session.get_items()) == [_msg(0)]


def test_a_cos_session_id_of_another_agent_is_refused(project: Path) -> None:
    with pytest.raises(InvalidInput, match="not openai-agents"):
        CosSession("ses-claude-20261202-050000-abcd", project=project)
    with pytest.raises(InvalidInput):
        CosSession("", project=project)


def test_a_limit_that_is_not_an_integer_is_refused(project: Path) -> None:
    session = CosSession("limits", project=project)
    for bad in ("3", 1.5, True):
        with pytest.raises(InvalidInput, match="limit must be an integer"):
            run(session.get_items(limit=bad))  # type: ignore[arg-type]


def test_processes_adding_to_one_session_at_once_keep_every_batch_whole_and_in_order(
        project: Path) -> None:
    script = textwrap.dedent("""
        import asyncio, sys
        from coding_os.integrations.openai_agents import CosSession
        who = sys.argv[1]
        session = CosSession("shared", project=sys.argv[2])
        async def main():
            for n in range(15):
                await session.add_items([{"role": "user", "content": f"{who}-{n}-a"},
                                         {"role": "user", "content": f"{who}-{n}-b"}])
        asyncio.run(main())
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, who, str(project)],
                              stderr=subprocess.PIPE, text=True) for who in ("p", "q")]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    texts = [item["content"] for item in run(CosSession("shared", project=project).get_items())]
    assert len(texts) == 60
    for who in ("p", "q"):
        mine = [t for t in texts if t.startswith(who + "-")]
        assert mine == [f"{who}-{n}-{half}" for n in range(15) for half in "ab"]
    for i in range(0, 60, 2):  # the two items of one add_items are next to each other
        assert texts[i][:-1] == texts[i + 1][:-1]
    listed = cos_json("sessions", "--agent", "openai-agents", cwd=project)
    assert isinstance(listed, list) and len(listed) == 1


def test_pop_in_two_processes_at_once_removes_two_different_items(project: Path) -> None:
    session = CosSession("popping", project=project)
    run(session.add_items([_msg(n) for n in range(20)]))
    script = textwrap.dedent("""
        import asyncio, json, sys
        from coding_os.integrations.openai_agents import CosSession
        session = CosSession("popping", project=sys.argv[1])
        async def main():
            return [await session.pop_item() for _ in range(5)]
        print(json.dumps(asyncio.run(main())))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(project)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    popped = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        popped += json.loads(out)
    assert sorted(item["content"] for item in popped) == sorted(
        f"message {n}" for n in range(10, 20))
    assert run(session.get_items()) == [_msg(n) for n in range(10)]


# -- the SDK's own runner, and the documented example ------------------------------------------


def test_the_sdk_runner_keeps_a_conversation_in_a_cos_session_across_runs(project: Path) -> None:
    from agents import Agent, ModelResponse, RunConfig, Runner, Usage
    from agents.models.interface import Model
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    seen: list[Any] = []

    class Scripted(Model):
        """A model that answers `reply N` and records the input of each request."""

        async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                               **kwargs: Any) -> ModelResponse:
            seen.append(input)
            text = ResponseOutputText(type="output_text", text=f"reply {len(seen)}",
                                      annotations=[])
            message = ResponseOutputMessage(id=f"msg_{len(seen)}", type="message",
                                            role="assistant", status="completed",
                                            content=[text])
            return ModelResponse(output=[message], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    agent = Agent(name="helper", instructions="Be brief.", model=Scripted())
    config = RunConfig(tracing_disabled=True)

    async def two_runs() -> tuple[str, str]:
        first = await Runner.run(agent, "hello", session=CosSession("chat", project=project),
                                 run_config=config)
        second = await Runner.run(agent, "and again",
                                  session=CosSession("chat", project=project),
                                  run_config=config)
        return first.final_output, second.final_output

    assert run(two_runs()) == ("reply 1", "reply 2")
    # The second request carried the first exchange, read back from cos.
    texts = [json.dumps(item) for item in seen[1]]
    assert "hello" in texts[0] and "reply 1" in texts[1] and "and again" in texts[2]
    items = run(CosSession("chat", project=project).get_items())
    assert [item.get("role") for item in items] == ["user", "assistant", "user", "assistant"]
    proc = cos("export", "chat", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert "and again" in proc.stdout and "reply 2" in proc.stdout


def test_the_example_of_docs_integrations_runs_and_prints_what_it_says(project: Path) -> None:
    page = (Path(__file__).parents[2] / "docs" / "integrations.md").read_text(encoding="utf-8")
    section = page.split("## OpenAI Agents SDK", 1)[1].split("\n## ", 1)[0]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    proc = subprocess.run([sys.executable, "-c", example], cwd=project, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1] == "{'role': 'assistant', 'content': 'It is 18°C and clear.'}"
    assert lines[2] == "3"
    assert lines[3].startswith("ses-openai-agents-")
    listed = cos_json("sessions", cwd=project)
    assert isinstance(listed, list) and [r["id"] for r in listed] == [lines[3]]
