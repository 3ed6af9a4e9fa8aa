"""coding_os.integrations.claude_agent_sdk: cos as the Claude Agent SDK's `SessionStore`
(DESIGN.md §8): the SDK's own conformance suite, sessions listed and exported by `cos`, and
several processes appending to one session."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from claude_agent_sdk import InMemorySessionStore
from claude_agent_sdk.testing import run_session_store_conformance
from claude_agent_sdk.types import SessionKey, SessionStore

from coding_os.errors import InvalidInput
from coding_os.integrations.claude_agent_sdk import CosSessionStore
from coding_os.sessions import transcript
from tests.helpers import cos, cos_json, git

KEY: SessionKey = {"project_key": "proj", "session_id": "0b8c6a52-sdk-session"}


def _user(uuid: str, text: str) -> dict[str, Any]:
    return {"type": "user", "uuid": uuid, "sessionId": KEY["session_id"],
            "message": {"role": "user", "content": text}}


def _assistant(uuid: str, text: str) -> dict[str, Any]:
    return {"type": "assistant", "uuid": uuid, "sessionId": KEY["session_id"],
            "message": {"role": "assistant", "content": [
                {"type": "text", "text": text},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a"}}],
                "usage": {"input_tokens": 11, "output_tokens": 5}}}


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The project's database: the default SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "postgres":
        monkeypatch.setenv("COS_DATABASE_URL", request.getfixturevalue("pg_url"))
    return str(request.param)


def _new_project(root: Path, counter: itertools.count[int]) -> Path:
    path = root / f"project-{next(counter)}"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    return path


@pytest.mark.slow
def test_the_sdks_session_store_conformance_suite_passes_with_every_optional_method(
        tmp_path: Path, backend: str) -> None:
    counter = itertools.count()
    store = CosSessionStore(project=_new_project(tmp_path, counter))
    # Every optional method is implemented, so the suite runs all 14 contracts (it skips the
    # contracts of a method the store inherits from the Protocol or lacks).
    for method in ("list_sessions", "list_session_summaries", "delete", "list_subkeys"):
        assert getattr(type(store), method) is not getattr(SessionStore, method)

    asyncio.run(run_session_store_conformance(
        lambda: CosSessionStore(project=_new_project(tmp_path, counter))))


@pytest.mark.slow
def test_a_session_stored_through_it_is_listed_by_cos_sessions_exported_searched_and_forked(
        project: Path, backend: str) -> None:
    async def store() -> None:
        sdk = CosSessionStore(project)
        await sdk.append(KEY, [_user("u1", "rename the helper"),
                               _assistant("a1", "Renamed it to `load_rows`.")])
        await sdk.append(KEY, [{"type": "summary", "summary": "renaming", "leafUuid": "a1"}])
        await sdk.append({**KEY, "subpath": "subagents/agent-1"},
                         [_user("s1", "a subagent's prompt")])

    asyncio.run(store())
    rows = cos_json("sessions", cwd=project)
    assert isinstance(rows, list)
    [row] = rows  # the subagent's transcript is a sidechain, not a session of its own
    assert row["agent"] == "claude-sdk" and row["id"].startswith("ses-claude-sdk-")
    assert row["native_id"] == KEY["session_id"] and row["kind"] == "cos"
    assert row["title"] == "rename the helper" and row["messages"] == 2 and row["tokens"] == 16

    exported = cos("export", row["id"], "--format", "json", cwd=project)
    assert exported.returncode == 0, exported.stderr
    turns = [(t["role"], t["text"]) for t in json.loads(exported.stdout)["turns"]]
    assert ("user", "rename the helper") in turns
    assert ("assistant", "Renamed it to `load_rows`.") in turns
    assert "Renamed it to `load_rows`." in cos("export", row["id"], cwd=project).stdout

    found = cos_json("search", "load_rows", cwd=project)
    assert row["id"] in [r["session"] for r in found["results"]]  # type: ignore[index]
    forked = cos_json("fork", row["id"], cwd=project)
    assert forked["session"].startswith("ses-claude-sdk-")  # type: ignore[index]
    assert "Renamed it to `load_rows`." in cos("export", forked["session"],  # type: ignore[index]
                                               cwd=project).stdout


def test_load_gives_back_what_the_sdks_in_memory_store_gives_back(project: Path) -> None:
    batches: list[list[Any]] = [
        [_user("u1", "first"), _assistant("a1", "one")],
        [{"type": "custom-title", "customTitle": "t", "sessionId": KEY["session_id"]}],
        [_user("u2", "second \u00e9\u2603 \U0001f600 \udc80"), {"type": "x", "n": 1.5, "z": None,
                                                          "deep": [[{"k": [True, -3]}]]}],
    ]

    async def both() -> tuple[Any, Any]:
        ours, theirs = CosSessionStore(project), InMemorySessionStore()
        for batch in batches:
            await ours.append(KEY, batch)
            await theirs.append(KEY, batch)
        return await ours.load(KEY), await theirs.load(KEY)

    ours, theirs = asyncio.run(both())
    assert ours == theirs and len(ours) == 5


def test_a_retried_batch_is_stored_once_also_by_another_store_of_the_project(
        project: Path) -> None:
    batch = [_user("u1", "hello"), _assistant("a1", "hi")]

    async def run() -> Any:
        await CosSessionStore(project).append(KEY, batch)
        again = CosSessionStore(project)
        await again.append(KEY, batch)  # the SDK retries a batch whose call failed
        await again.append(KEY, [*batch, {"type": "mode", "mode": "plan"}])
        await again.append(KEY, [{"type": "mode", "mode": "plan"}])  # no uuid: appended
        return await again.load(KEY)

    assert asyncio.run(run()) == [*batch, {"type": "mode", "mode": "plan"},
                                  {"type": "mode", "mode": "plan"}]


def test_a_record_another_store_wrote_meanwhile_is_not_stored_again(project: Path) -> None:
    async def run() -> Any:
        first, second = CosSessionStore(project), CosSessionStore(project)
        await first.append(KEY, [_user("u1", "one")])
        await second.append(KEY, [_user("u2", "two")])
        await first.append(KEY, [_user("u2", "two"), _user("u3", "three")])
        return await first.load(KEY)

    assert [e["uuid"] for e in asyncio.run(run())] == ["u1", "u2", "u3"]
    [row] = cos_json("sessions", cwd=project)  # type: ignore[misc]
    turns = [e["turn"] for e in transcript.read(transcript.transcript_path(
        _tiers(project), row["id"])).entries if e["type"] == "user"]
    assert turns == [1, 2, 3]


@pytest.mark.parametrize("bad", [["not an object"], [{"type": "x", "v": object()}],
                                 [{"type": "x", 3: "a key that is not a string"}]])
def test_a_batch_holding_a_record_that_is_not_a_json_object_is_refused_whole(
        project: Path, bad: list[Any]) -> None:
    store = CosSessionStore(project)
    asyncio.run(store.append(KEY, [_user("u1", "kept")]))
    with pytest.raises(InvalidInput, match="nothing of the batch was stored"):
        asyncio.run(store.append(KEY, [_user("u2", "not kept"), *bad]))
    assert asyncio.run(store.load(KEY)) == [_user("u1", "kept")]


_WRITER = """
import asyncio, sys
from coding_os.integrations.claude_agent_sdk import CosSessionStore

async def main(writer):
    store = CosSessionStore(sys.argv[2])
    key = {"project_key": "proj", "session_id": "shared"}
    for batch in range(15):
        await store.append(key, [{"type": "x", "uuid": f"{writer}-{batch}-{i}", "writer": writer,
                                  "batch": batch, "i": i} for i in range(4)])

asyncio.run(main(int(sys.argv[1])))
"""


@pytest.mark.slow
def test_several_processes_appending_to_one_session_each_land_whole_and_in_order(
        project: Path) -> None:
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(w), str(project)])
               for w in range(3)]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0]
    loaded = asyncio.run(CosSessionStore(project).load({"project_key": "proj",
                                                        "session_id": "shared"}))
    assert loaded is not None and len(loaded) == 3 * 15 * 4
    for start in range(0, len(loaded), 4):  # each batch in one piece
        batch = loaded[start:start + 4]
        assert [e["i"] for e in batch] == [0, 1, 2, 3]
        assert len({(e["writer"], e["batch"]) for e in batch}) == 1
    for writer in range(3):  # each process's batches in the order it made them
        assert [e["batch"] for e in loaded if e["writer"] == writer and e["i"] == 0] == \
            list(range(15))
    [row] = cos_json("sessions", cwd=project)  # type: ignore[misc]
    path = transcript.transcript_path(_tiers(project), row["id"])
    assert [e["seq"] for e in transcript.read(path).entries] == list(range(181))


@pytest.mark.slow
def test_a_deleted_session_is_gone_from_cos_sessions_and_from_the_sdk(project: Path,
                                                                     backend: str) -> None:
    other: SessionKey = {"project_key": "proj", "session_id": "other"}

    async def run() -> tuple[Any, Any, Any]:
        store = CosSessionStore(project)
        await store.append(KEY, [_user("u1", "to be deleted")])
        await store.append({**KEY, "subpath": "subagents/agent-1"}, [_user("s1", "sub")])
        await store.append(other, [_user("u2", "kept")])
        await store.delete(KEY)
        return (await store.load(KEY), await store.list_sessions("proj"),
                await store.list_session_summaries("proj"))

    loaded, listed, summaries = asyncio.run(run())
    assert loaded is None
    assert [s["session_id"] for s in listed] == ["other"]
    assert [s["session_id"] for s in summaries] == ["other"]
    rows = cos_json("sessions", cwd=project)
    assert [r["native_id"] for r in rows] == ["other"]  # type: ignore[union-attr,index]


@pytest.mark.parametrize("key", [
    {"project_key": "", "session_id": "s"},
    {"project_key": "p", "session_id": ""},
    {"project_key": "p", "session_id": "s", "subpath": ""},
    {"project_key": "p", "session_id": 7},
])
def test_a_malformed_key_is_refused_and_nothing_is_stored(project: Path,
                                                          key: dict[str, Any]) -> None:
    store = CosSessionStore(project)
    with pytest.raises(InvalidInput, match="session key"):
        asyncio.run(store.append(key, [_user("u1", "x")]))  # type: ignore[arg-type]
    assert not (project / ".coding-os" / "claude-sdk" / "transcripts").exists()


def test_a_project_directory_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no project directory"):
        CosSessionStore(tmp_path / "missing")


def _tiers(project: Path) -> Any:
    from coding_os.state.tiers import Tiers

    return Tiers(str(project / ".coding-os"))


@pytest.mark.slow
@pytest.mark.e2e
def test_a_real_sdk_session_resumes_from_cos_where_the_cli_has_no_transcript_of_it(
        project: Path, tmp_path: Path) -> None:
    from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

    from tests.e2e.harness import claude_env
    from tests.e2e.model_server import ModelServer, Text

    async def turn(server: ModelServer, home: Path, prompt: str,
                   resume: str | None = None) -> str:
        home.mkdir(exist_ok=True)
        options = ClaudeAgentOptions(
            cwd=str(project), resume=resume,
            env=claude_env(server, home, {"CLAUDE_CONFIG_DIR": str(home / ".claude")}),
            session_store=CosSessionStore(project=project),
            permission_mode="bypassPermissions", max_turns=2)
        ended = [m.session_id async for m in query(prompt=prompt, options=options)
                 if isinstance(m, ResultMessage)]
        assert len(ended) == 1
        return ended[0]

    with ModelServer([Text("Noted.")]) as server:
        first = asyncio.run(turn(server, tmp_path / "home-a", "remember the word pelican"))
        # Another HOME: the CLI there has no transcript of the session, only cos has it.
        again = asyncio.run(turn(server, tmp_path / "home-b", "which word?", resume=first))
        assert again == first
        last = json.dumps(server.requests_to("/v1/messages")[-1].body["messages"])
    assert "remember the word pelican" in last and "which word?" in last
    assert not list((tmp_path / "home-b").rglob(f"{first}.jsonl"))

    [row] = cos_json("sessions", cwd=project)  # type: ignore[misc]
    assert row["agent"] == "claude-sdk" and row["native_id"] == first
    exported = cos("export", first, cwd=project).stdout
    assert "remember the word pelican" in exported and "which word?" in exported
