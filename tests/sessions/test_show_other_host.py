"""Reading on host B a session only host A has (DESIGN.md §8): `cos sessions show`, `cos export`
and the api reads of `cos web`'s session page, of a Claude Code transcript (with a subagent), a
Codex rollout and a cos-native session that A replicated, read the replica in the shared
PostgreSQL when A's file is not on B — what A prints, A's paths as A wrote them — and leave
nothing on B: no file materialised, no copy left, the session not moved. Two hosts simulated on
this machine: two HOMEs, two clones of one repository at different paths, COS_HOST=a and b, one
PostgreSQL schema; the transcripts are the real ones of ../shared/fixtures."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    CLAUDE_FIXTURES,
    CODEX_FIXTURES,
    COS,
    ECHO_AGENT,
    CuttingProxy,
    Host,
    OLD_EXEC,
    ROLLOUTS,
    VIEWER,
    make_host,
    new_origin,
    one_line_failure,
    require_claude_fixtures,
    require_codex_fixtures,
    succeeded,
)


@pytest.fixture
def hosts(tmp_path: Path, pg_url: str) -> tuple[Host, Host]:
    """Host A and host B: clones of one repository at different paths, one PostgreSQL schema."""
    origin = new_origin(tmp_path / "origin")
    hosts = []
    for name, where in (("a", "host-a/src/proj"), ("b", "host-b/work/proj")):
        (tmp_path / f"tmp-{name}").mkdir()  # where a temporary copy would be left
        hosts.append(make_host(tmp_path, name, origin, where, pg_url, agents=("claude",),
                               env={"TMPDIR": str(tmp_path / f"tmp-{name}")}))
    return hosts[0], hosts[1]


def plant(source: Path, target: Path, old_cwd: str, new_cwd: str) -> None:
    """A fixture transcript at `target`, its `cwd` fields moved from `old_cwd` to `new_cwd`
    (every other byte as it was)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    data = source.read_bytes()
    moved = data.replace(f'"cwd":"{old_cwd}"'.encode(), f'"cwd":"{new_cwd}"'.encode())
    assert moved != data
    target.write_bytes(moved)


def munged(path: Path) -> str:
    return "".join(c if c.isalnum() else "-" for c in str(path))


def sessions_of_a(a: Host, codex: bool = True, others: int = 0) -> None:
    """A Claude Code transcript with a subagent (and a Codex rollout) of A's checkout,
    imported and replicated."""
    require_claude_fixtures()
    claude = a.home / ".claude" / "projects" / munged(a.checkout) / f"{VIEWER}.jsonl"
    plant(CLAUDE_FIXTURES / f"claude-code-viewer__{VIEWER}.jsonl", claude, "/path/to/Demo",
          str(a.checkout))
    # A subagent of it where Claude Code 2.1 writes one: <id>/subagents/agent-<x>.jsonl.
    subagent = claude.parent / VIEWER / "subagents" / "agent-3be551df.jsonl"
    plant(CLAUDE_FIXTURES / "claude-code-log__agent-3be551df.jsonl", subagent,
          "/Users/dain/workspace/claude-code-log", str(a.checkout))
    subagent.write_bytes(subagent.read_bytes().replace(
        b"58edcfae-5291-436c-91e4-54fbb188a0ca", VIEWER.encode()))
    if codex:
        require_codex_fixtures()
        prefix, stamp = ROLLOUTS[OLD_EXEC]
        name = f"rollout-{stamp}-{OLD_EXEC}.jsonl"
        rollout = a.home / ".codex" / "sessions" / stamp[:4] / stamp[5:7] / stamp[8:10] / name
        plant(CODEX_FIXTURES / f"{prefix}{name}", rollout,
              "/Users/Nikita_Levyankov/repos/EPMCDME/codemie-ai/codemie-code", str(a.checkout))
    synced = a.cos_json("sync")
    assert synced["refused"] == [] and len(synced["pushed"]) == 2 + codex + others, synced


def files_of(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def hide(host: Host) -> None:
    """Move the host's HOME and checkout away, as if they were on another machine: its files
    are not here."""
    for folder in (host.home, host.checkout.parents[1]):
        folder.rename(folder.with_name(folder.name + ".away"))


def engine_session(host: Host) -> str:
    """A cos-native session the engine ran (an echo agent), with its events log."""
    ops = [{"id": "1", "op": {"type": "configure", "agent": "python", "target": ECHO_AGENT}},
           {"id": "2", "op": {"type": "user_input", "text": "remember PELICAN"}}]
    done = succeeded(subprocess.run(
        [COS, "protocol"], cwd=host.checkout, env=host.env, capture_output=True, text=True,
        timeout=120, input="".join(json.dumps(op) + "\n" for op in ops)))
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert any(e["msg"]["type"] == "task_complete" for e in events), events
    return str(events[0]["session"])


def web_reads(host: Host, native: str) -> dict[str, Any]:
    """What `cos web`'s session page reads of a session through the api, on `host`."""
    from coding_os import api

    where = {"env": host.env, "cwd": str(host.checkout)}
    row = api.show_session(native, **where)
    return {"turns": api.session_turns(native, 0, 20, **where),
            "sidechains": api.session_sidechains(native, **where)["sidechains"],
            "tokens": api.session_tokens(native, **where),
            "tree": api.session_branches(row, **where)}


@pytest.mark.slow
def test_show_and_export_on_host_b_read_the_replica_of_a_session_only_host_a_has(
        hosts: tuple[Host, Host]) -> None:
    a, b = hosts
    sid = engine_session(a)
    sessions_of_a(a, others=2)  # its transcript and events log
    shown = {native: a.cos_json("sessions", "show", native) for native in (VIEWER, OLD_EXEC)}
    formats = {VIEWER: ("json", "md"), OLD_EXEC: ("json",)}
    exports = {(native, fmt): succeeded(a.cos("export", native, "--format", fmt)).stdout
               for native, each in formats.items() for fmt in each}
    pages = {native: web_reads(a, native) for native in (*formats, sid)}
    assert {s["layout"] for s in pages[VIEWER]["sidechains"]} == {"inline", "nested"}
    cos_export = succeeded(a.cos("export", sid, "--format", "json")).stdout
    hide(a)
    home_before = files_of(b.home)
    # A cos-native session: its transcript (and its events log, for the tokens) replicated.
    assert web_reads(b, sid) == pages[sid]
    assert succeeded(b.cos("export", sid, "--format", "json")).stdout == cos_export
    assert "remember PELICAN" in cos_export
    for native, each in formats.items():
        assert web_reads(b, native) == pages[native]
        on_b = b.cos_json("sessions", "show", native)
        assert on_b["host"] == "a" and on_b["source_path"] == shown[native]["source_path"]
        assert not os.path.exists(on_b["source_path"])  # A's file is not on B
        assert on_b["tree"] == shown[native]["tree"] and on_b["tree"]["live_entries"] > 2
        for fmt in each:
            exported = succeeded(b.cos("export", native, "--format", fmt)).stdout
            assert exported == exports[native, fmt]
        turns = json.loads(exports[native, "json"])
        assert len(turns["turns"]) > 2 and turns["meta"]["cwd"] == str(a.checkout)
    # Read only: nothing materialised on B, no copy left, and the sessions stay A's.
    assert files_of(b.home) == home_before
    assert not (b.home / ".claude" / "projects").exists() and not (b.home / ".codex").exists()
    assert not list(b.checkout.glob(".coding-os/python"))
    assert not any(Path(b.env["TMPDIR"]).iterdir())
    from coding_os.storage.postgres import PostgresStorage

    with PostgresStorage(b.env["COS_DATABASE_URL"]) as storage:
        for native in (*formats, sid):
            row = storage.index_row(native)
            assert row is not None and row.host == "a"
            assert {s.host for s in storage.replica_sources(row.id)} == {"a"}


@pytest.mark.slow
def test_on_host_b_a_session_not_replicated_is_not_found_and_postgresql_gone_is_exit_6(
        hosts: tuple[Host, Host]) -> None:
    a, b = hosts
    sessions_of_a(a, codex=False)
    hide(a)
    assert "no session" in one_line_failure(b.cos("export", "no-such-session"), 1)
    unreachable = {"COS_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/test"}
    one_line_failure(b.cos("export", VIEWER, env=unreachable), 6)
    # The database goes away while the replica is read (the lookup before it is a few kB).
    proxy = CuttingProxy(budget=64 << 10)
    try:
        cut = {"COS_DATABASE_URL": proxy.url(b.env["COS_DATABASE_URL"])}
        assert cut["COS_DATABASE_URL"] != b.env["COS_DATABASE_URL"]
        for args in (("export", VIEWER), ("sessions", "show", VIEWER, "--json")):
            one_line_failure(b.cos(*args, env=cut), 6)
        assert proxy.cut == 2  # each cut once, in the read
    finally:
        proxy.close()
    assert not any(Path(b.env["TMPDIR"]).iterdir())  # no copy left behind

    from coding_os.storage.postgres import PostgresStorage

    with PostgresStorage(b.env["COS_DATABASE_URL"]) as storage:
        row = storage.index_row(VIEWER)
        assert row is not None and storage.remove_replica(row.id, "native") > 0
    for args in (("export", VIEWER), ("sessions", "show", VIEWER)):
        assert "run `cos sync` on a" in one_line_failure(b.cos(*args), 1)


@pytest.mark.slow
def test_a_row_of_another_host_naming_a_file_here_is_read_from_its_replica_never_from_the_file(
        hosts: tuple[Host, Host]) -> None:
    import dataclasses

    from coding_os.storage.postgres import PostgresStorage

    a, b = hosts
    sessions_of_a(a, codex=False)
    secret = b.home / "private.jsonl"  # a file of B's that a row of the shared index names
    secret.write_text(json.dumps({"type": "user", "uuid": "u1", "parentUuid": None,
                                  "message": {"role": "user", "content": "SECRET OF B"}}) + "\n",
                      encoding="utf-8")
    with PostgresStorage(b.env["COS_DATABASE_URL"]) as storage:
        row = storage.index_row(VIEWER)
        assert row is not None and row.host == "a"
        storage.upsert_index_rows([dataclasses.replace(
            row, id="planted-1", native_id="planted-1", source_path=str(secret))])
    for args in (("export", "planted-1"), ("sessions", "show", "planted-1")):
        done = b.cos(*args)
        assert "SECRET OF B" not in done.stdout + done.stderr
        assert "run `cos sync` on a" in one_line_failure(done, 1)

