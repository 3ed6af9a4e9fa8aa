"""CosSessionStore across hosts (DESIGN.md §8): a Claude Agent SDK session stored on one host
(its HOME, its checkout, its COS_HOST) is loaded, listed and continued on another host holding a
checkout of the same repository, through the shared PostgreSQL storage; on SQLite each host keeps
its own."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from claude_agent_sdk import project_key_for_directory
from claude_agent_sdk.types import SessionKey

from coding_os.integrations.claude_agent_sdk import CosSessionStore
from tests.helpers import cos, git

SESSION = "5d0c2e1a-0000-4000-8000-00000000a11e"


def _user(uuid: str, text: str) -> dict[str, Any]:
    return {"type": "user", "uuid": uuid, "sessionId": SESSION,
            "message": {"role": "user", "content": text}}


def _assistant(uuid: str, text: str) -> dict[str, Any]:
    return {"type": "assistant", "uuid": uuid, "sessionId": SESSION,
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}],
                        "usage": {"input_tokens": 3, "output_tokens": 2}}}


class Host:
    """One host: a HOME, a checkout of the repository, COS_HOST, and the storage's URL."""

    def __init__(self, name: str, root: Path, checkout: Path, url: str | None) -> None:
        self.name, self.checkout = name, checkout
        self.home = root / f"home-{name}"
        self.home.mkdir()
        self.env = {"HOME": str(self.home), "COS_HOST": name, "PATH": "/usr/bin:/bin",
                    "GIT_CONFIG_GLOBAL": str(self.home / ".gitconfig")}
        if url is not None:
            self.env["COS_DATABASE_URL"] = url

    def store(self) -> CosSessionStore:
        return CosSessionStore(project=self.checkout, env=self.env)

    def key(self) -> SessionKey:
        """The key the SDK makes for SESSION run in this host's checkout."""
        return {"project_key": project_key_for_directory(self.checkout), "session_id": SESSION}


def _two_hosts(project: Path, tmp_path: Path, url: str | None) -> tuple[Host, Host]:
    clone = tmp_path / "checkout-b"
    git(tmp_path, "clone", "-q", str(project), str(clone))
    with open(clone / ".git" / "info" / "exclude", "a", encoding="utf-8") as f:
        f.write("/.coding-os/\n")
    return Host("a", tmp_path, project, url), Host("b", tmp_path, clone, url)


def _run(work: Any) -> Any:
    return asyncio.run(work)


@pytest.mark.slow
def test_a_session_stored_on_one_host_is_loaded_listed_and_continued_on_another(
        project: Path, tmp_path: Path, pg_url: str) -> None:
    a, b = _two_hosts(project, tmp_path, pg_url)
    first = [_user("u1", "remember the word pelican"), _assistant("a1", "Noted.")]
    assert a.key() != b.key()  # the SDK keys a session by its checkout's path

    async def on_a() -> None:
        store = a.store()
        await store.append(a.key(), first)
        store.close()

    _run(on_a())

    async def on_b() -> tuple[Any, ...]:
        store = b.store()
        loaded = await store.load(b.key())
        listed = await store.list_sessions(b.key()["project_key"])
        summaries = await store.list_session_summaries(b.key()["project_key"])
        elsewhere = await store.list_sessions("-some-other-directory")
        await store.append(b.key(), [_user("u2", "which word?"), _assistant("a2", "pelican")])
        again = await store.load(b.key())
        store.close()
        return loaded, listed, summaries, elsewhere, again

    loaded, listed, summaries, elsewhere, again = _run(on_b())
    assert loaded == first
    assert [entry["session_id"] for entry in listed] == [SESSION] and listed[0]["mtime"] > 0
    assert [summary["session_id"] for summary in summaries] == [SESSION]
    assert elsewhere == []
    assert [entry["uuid"] for entry in again] == ["u1", "a1", "u2", "a2"]

    # Host a's session is as a left it; b's is b's own, listed by cos on b with its history.
    assert _run(a.store().load(a.key())) == first
    [row] = json.loads(cos("sessions", "--json", cwd=b.checkout, env=b.env).stdout)
    assert row["native_id"] == SESSION and row["messages"] == 4
    exported = cos("export", row["id"], cwd=b.checkout, env=b.env).stdout
    assert "remember the word pelican" in exported and "which word?" in exported


@pytest.mark.slow
def test_the_subagents_transcripts_of_a_session_come_along(project: Path, tmp_path: Path,
                                                           pg_url: str) -> None:
    a, b = _two_hosts(project, tmp_path, pg_url)
    early: SessionKey = {**a.key(), "subpath": "subagents/agent-1"}  # before the main key
    late: SessionKey = {**a.key(), "subpath": "subagents/agent-2"}

    async def on_a() -> None:
        store = a.store()
        await store.append(early, [_user("s1", "first subagent")])
        await store.append(a.key(), [_user("u1", "main")])
        await store.append(late, [_user("s2", "second subagent")])
        store.close()

    _run(on_a())

    async def on_b() -> tuple[Any, ...]:
        store = b.store()
        subkeys = await store.list_subkeys(b.key())
        loaded = [await store.load({**b.key(), "subpath": s}) for s in subkeys]
        await store.append(b.key(), [_user("u2", "go on")])  # b's own session of the key
        await store.append({**b.key(), "subpath": "subagents/agent-3"}, [_user("s3", "b's")])
        after = await store.list_subkeys(b.key())
        kept = await store.load({**b.key(), "subpath": "subagents/agent-1"})
        store.close()
        return subkeys, loaded, after, kept

    subkeys, loaded, after, kept = _run(on_b())
    assert subkeys == ["subagents/agent-1", "subagents/agent-2"]
    assert [[e["uuid"] for e in entries] for entries in loaded] == [["s1"], ["s2"]]
    assert after == ["subagents/agent-1", "subagents/agent-2", "subagents/agent-3"]
    assert [e["uuid"] for e in kept] == ["s1"]
    # The main key's records are only its own.
    assert [e["uuid"] for e in _run(a.store().load(a.key()))] == ["u1"]


@pytest.mark.slow
def test_what_another_host_appends_later_is_loaded_too(project: Path, tmp_path: Path,
                                                      pg_url: str) -> None:
    a, b = _two_hosts(project, tmp_path, pg_url)
    store_a = a.store()
    _run(store_a.append(a.key(), [_user("u1", "one")]))
    assert [e["uuid"] for e in _run(b.store().load(b.key()))] == ["u1"]
    _run(store_a.append(a.key(), [_assistant("a1", "two")]))
    assert [e["uuid"] for e in _run(b.store().load(b.key()))] == ["u1", "a1"]


def test_a_session_stored_before_the_storage_was_shared_goes_whole_with_its_next_append(
        project: Path, tmp_path: Path, pg_url: str) -> None:
    a, b = _two_hosts(project, tmp_path, pg_url)
    on_sqlite = {name: value for name, value in a.env.items() if name != "COS_DATABASE_URL"}
    alone = CosSessionStore(project=a.checkout, env=on_sqlite)
    _run(alone.append(a.key(), [_user("u1", "one"), _assistant("a1", "two")]))
    assert _run(b.store().load(b.key())) is None
    _run(a.store().append(a.key(), [_user("u2", "three")]))
    assert [e["uuid"] for e in _run(b.store().load(b.key()))] == ["u1", "a1", "u2"]


def test_a_session_deleted_on_its_host_is_gone_on_the_other(project: Path, tmp_path: Path,
                                                           pg_url: str) -> None:
    a, b = _two_hosts(project, tmp_path, pg_url)
    store_a = a.store()
    _run(store_a.append(a.key(), [_user("u1", "one")]))
    assert _run(b.store().load(b.key())) is not None
    _run(store_a.delete(a.key()))
    assert _run(b.store().load(b.key())) is None
    assert _run(b.store().list_sessions(b.key()["project_key"])) == []


def test_a_session_of_another_repository_is_not_found(project: Path, tmp_path: Path,
                                                      pg_url: str) -> None:
    a, _ = _two_hosts(project, tmp_path, pg_url)
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    git(other, "commit", "-q", "--allow-empty", "-m", "another repository")
    c = Host("c", tmp_path, other, pg_url)
    _run(a.store().append(a.key(), [_user("u1", "one")]))
    assert _run(c.store().load(c.key())) is None
    assert _run(c.store().list_sessions(c.key()["project_key"])) == []


def test_on_sqlite_each_host_keeps_its_own_sessions(project: Path, tmp_path: Path) -> None:
    a, b = _two_hosts(project, tmp_path, None)
    _run(a.store().append(a.key(), [_user("u1", "one")]))
    assert _run(b.store().load(b.key())) is None
    assert _run(b.store().list_sessions(b.key()["project_key"])) == []
    assert [e["uuid"] for e in _run(a.store().load(a.key()))] == ["u1"]


@pytest.mark.slow
@pytest.mark.e2e
def test_a_real_sdk_client_resumes_on_another_host_a_session_written_on_the_first(
        project: Path, tmp_path: Path, pg_url: str) -> None:
    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage

    from tests.e2e.harness import claude_env
    from tests.e2e.model_server import ModelServer, Text

    a, b = _two_hosts(project, tmp_path, pg_url)

    async def turn(host: Host, server: ModelServer, prompt: str,
                   resume: str | None = None) -> str:
        store = host.store()
        options = ClaudeAgentOptions(
            cwd=str(host.checkout), resume=resume, session_store=store,
            env=claude_env(server, host.home, {"CLAUDE_CONFIG_DIR": str(host.home / ".claude"),
                                                "COS_HOST": host.name}),
            permission_mode="bypassPermissions", max_turns=2)
        async with ClaudeSDKClient(options=options) as client:
            await client.query(prompt)
            ended = [m.session_id async for m in client.receive_response()
                     if isinstance(m, ResultMessage)]
        store.close()
        assert len(ended) == 1
        return ended[0]

    with ModelServer([Text("Noted.")]) as server:
        first = asyncio.run(turn(a, server, "remember the word pelican"))
        again = asyncio.run(turn(b, server, "which word?", resume=first))
        assert again == first
        last = json.dumps(server.requests_to("/v1/messages")[-1].body["messages"])
    assert "remember the word pelican" in last and "Noted." in last and "which word?" in last
    # Host b's CLI never had the session: it came from host a through the shared storage.
    assert not list(b.home.rglob(f"{first}.jsonl"))
    rows = json.loads(cos("sessions", "--all-hosts", "--json", cwd=b.checkout,
                          env=b.env).stdout)
    assert {(row["host"], row["native_id"]) for row in rows} >= {("a", first), ("b", first)}
