"""`cos resume` on host B of a cos-native session written on host A (DESIGN.md §8), two hosts
simulated on this machine (the `two_hosts` fixture: two HOMEs, two clones of one repository at
different paths, COS_HOST=a and b, one PostgreSQL schema): the session with its events log is
materialised in B's checkout and continues there, moves back and forth with every line once, and
exactly one of two hosts resuming at once takes it. Bad input: a local file that differs, and a
PostgreSQL that stops answering mid-resume (nothing half-written). Listing by host, and SQLite
under a renamed host. The sessions of the real Claude Code and Codex are in
tests/e2e/test_hosts_resume.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import (COS, ECHO_AGENT, CuttingProxy, Host, claude_project_dir, make_host,
                           replica_lines, succeeded)


pytestmark = pytest.mark.slow

FIRST = "FIRST-PROMPT remember the word PELICAN"
SECOND = "SECOND-PROMPT where are you now?"


def no_temporaries(folder: Path) -> bool:
    return not folder.exists() or not [p for p in folder.rglob(".*.tmp-*")]


# -- cos-native -----------------------------------------------------------------------------------


def engine_session(host: Host, *inputs: str, session: str | None = None) -> str:
    ops = [{"id": "1", "op": {"type": "configure", "agent": "python", "target": ECHO_AGENT}},
           *[{"id": str(n + 2), "op": {"type": "user_input", "text": text}}
             for n, text in enumerate(inputs)]]
    args = ("protocol",) if session is None else ("protocol", "--session", session)
    done = succeeded(host.cos(*args, input="".join(json.dumps(x) + "\n" for x in ops)))
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert any(e["msg"]["type"] == "task_complete" for e in events), events
    return str(events[0]["session"])


def test_a_cos_native_session_with_events_resumes_on_host_b(
        two_hosts: tuple[Host, Host]) -> None:
    a, b = two_hosts
    sid = engine_session(a, FIRST)
    succeeded(a.cos("sync"))
    report = b.cos_json("resume", sid)
    assert report["host"] == "a" and report["handover"] is None
    written = {f["stream"]: f for f in report["materialized"]}
    transcript = b.checkout / ".coding-os" / "python" / "transcripts" / f"{sid}.jsonl"
    events = b.checkout / ".coding-os" / "python" / "events" / f"{sid}.jsonl"
    assert written["transcript"]["path"] == str(transcript)
    assert written["transcript"]["action"] == "written" and transcript.is_file()
    assert written["events"]["path"] == str(events) and events.is_file()
    assert report["restored"]["entries"] == len(transcript.read_bytes().splitlines())
    meta = json.loads(transcript.read_bytes().splitlines()[0])
    assert meta["project"] == str(b.checkout)
    engine_session(b, SECOND, session=sid)  # the engine goes on with it here, in B's checkout
    entries = [json.loads(x) for x in transcript.read_bytes().splitlines()]
    assert [e["text"] for e in entries if e["type"] == "user"] == [FIRST, SECOND]
    assert entries[-1]["text"] == f"echo: {SECOND}"
    configured = [json.loads(x)["msg"] for x in events.read_bytes().splitlines()]
    assert {m["cwd"] for m in configured if m["type"] == "session_configured"} == {
        str(b.checkout)}


def test_a_local_file_that_differs_is_left_alone_and_a_prefix_gets_the_rest(
        two_hosts: tuple[Host, Host]) -> None:
    a, b = two_hosts
    sid = engine_session(a, FIRST)
    succeeded(a.cos("sync"))
    preview = b.cos_json("resume", sid, "--dry-run")
    transcript = Path(next(f["path"] for f in preview["materialized"]
                           if f["stream"] == "transcript"))
    assert not transcript.exists()  # a dry run writes nothing
    transcript.parent.mkdir(parents=True, exist_ok=True)
    transcript.write_bytes(b'{"something": "else"}\n')
    refused = b.cos("resume", sid, "--json")
    assert refused.returncode == 7 and refused.stderr.count("\n") == 1, refused.stderr
    assert transcript.read_bytes() == b'{"something": "else"}\n'
    transcript.unlink()
    whole = b.cos_json("resume", sid)
    assert whole["moved_from"] == "a"
    full = transcript.read_bytes()
    # A takes it back: its own files are the replica mapped to A's checkout, left as they are.
    back = a.cos_json("resume", sid)
    assert back["moved_from"] == "b"
    assert {f["action"] for f in back["materialized"]} == {"unchanged"}
    transcript.write_bytes(full[:full.index(b"\n") + 1])  # its first line only
    again = b.cos_json("resume", sid)
    assert {f["stream"]: f["action"] for f in again["materialized"]}["transcript"] == "extended"
    assert transcript.read_bytes() == full
    assert whole["restored"]["entries"] == again["restored"]["entries"]


def test_a_cos_native_session_moves_to_host_b_goes_on_there_and_comes_back_to_a(
        two_hosts: tuple[Host, Host]) -> None:
    a, b = two_hosts
    sid = engine_session(a, FIRST)
    succeeded(a.cos("sync"))
    a_file = a.checkout / ".coding-os" / "python" / "transcripts" / f"{sid}.jsonl"
    b_file = b.checkout / ".coding-os" / "python" / "transcripts" / f"{sid}.jsonl"
    first = a_file.read_bytes().splitlines()
    moved = b.cos("resume", sid)
    assert moved.returncode == 0, moved.stderr
    assert re.search(r"^moved +from host a to this one", moved.stdout, re.M), moved.stdout
    again = b.cos_json("resume", sid)  # B's own now, its row naming B's checkout
    assert (again["host"], again["moved_from"], again["cwd"]) == (None, None, str(b.checkout))
    row = next(r for r in b.cos_json("sessions", "--all-hosts") if r["id"] == sid)
    assert row["host"] == "b"
    engine_session(b, SECOND, session=sid)  # B goes on with it
    pushed = b.cos_json("sync")
    assert pushed["refused"] == [] and pushed["restarted"] == []
    on_b = b_file.read_bytes().splitlines()
    # exactly B's new lines were pushed, after A's: each line once, as its host wrote it
    assert pushed["pushed"][f"transcript:{sid}"] == len(on_b) - len(first)
    stored = replica_lines(a, sid, "transcript")
    assert stored == first + on_b[len(first):]
    assert replica_lines(a, sid, "events")[-1] == \
        (b.checkout / ".coding-os" / "python" / "events" / f"{sid}.jsonl").read_bytes() \
        .splitlines()[-1]
    assert b.cos_json("sync")["pushed"] == {}  # nothing more

    back = a.cos_json("resume", sid)  # back on A: its own file is a prefix, it gets the rest
    assert back["moved_from"] == "b"
    assert {f["stream"]: f["action"] for f in back["materialized"]}["transcript"] == "extended"
    data = a_file.read_bytes()
    assert str(b.checkout).encode() not in data  # B's lines carry A's paths here
    entries = [json.loads(x) for x in data.splitlines()]
    assert [e["text"] for e in entries if e["type"] == "user"] == [FIRST, SECOND]
    assert [e["text"] for e in entries if e["type"] == "assistant"][-1] == f"echo: {SECOND}"
    assert len({json.dumps(e, sort_keys=True) for e in entries}) == len(entries)
    assert entries[0]["project"] == str(a.checkout)
    again = a.cos_json("sync")
    assert again["restarted"] == [] and again["refused"] == [] and again["pushed"] == {}
    engine_session(a, "THIRD-PROMPT", session=sid)  # A goes on: its lines follow B's
    assert a.cos_json("sync")["pushed"][f"transcript:{sid}"] == \
        len(a_file.read_bytes().splitlines()) - len(stored)
    assert replica_lines(a, sid, "transcript")[:len(stored)] == stored


def test_two_hosts_resuming_one_session_at_once_exactly_one_takes_it_from_its_owner(
        two_hosts: tuple[Host, Host], tmp_path: Path, pg_url: str) -> None:
    a, b = two_hosts
    c = make_host(tmp_path, "c", Path(subprocess.run(
        ["git", "-C", str(a.checkout), "remote", "get-url", "origin"], check=True,
        capture_output=True, text=True).stdout.strip()), "host-c/proj", pg_url)
    from coding_os.storage.postgres import PostgresStorage

    for _ in range(3):
        sid = engine_session(a, FIRST)
        succeeded(a.cos("sync"))
        runs = [subprocess.Popen([COS, "resume", sid, "--json"], cwd=h.checkout, env=h.env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for h in (b, c)]
        outs = [run.communicate(timeout=120) for run in runs]
        assert [run.returncode for run in runs] == [0, 0], outs
        moved = {h.name: json.loads(out)["moved_from"] for h, (out, _) in zip((b, c), outs)}
        # One takes it from A; the other either lost the race (not moved) or resumed after
        # it and took it from the first (the last host to resume owns it).
        (first,) = [name for name, old in moved.items() if old == "a"]
        other = "c" if first == "b" else "b"
        assert moved[other] in (None, first)
        owner = other if moved[other] == first else first
        with PostgresStorage(pg_url) as storage:
            row = storage.index_row(sid)
            assert row is not None and row.host == owner
            assert {s.host for s in storage.replica_sources(sid)} == {owner}


# -- PostgreSQL going away mid-resume -------------------------------------------------------------


@pytest.fixture
def proxy() -> Iterator[CuttingProxy]:
    cutting = CuttingProxy(budget=11 << 19)  # 5.5 MB: inside the second batch of lines
    yield cutting
    cutting.close()


def big_claude_session(a: Host, native: str, lines: int = 7000) -> Path:
    """A Claude Code transcript of A's checkout, about 6.7 MB (two batches of replicated lines
    read back), as Claude writes them."""
    folder = claude_project_dir(a.home, a.checkout)
    folder.mkdir(parents=True)
    path = folder / f"{native}.jsonl"
    parent = None
    with open(path, "w", encoding="utf-8") as f:
        for n in range(lines):
            uuid = f"00000000-0000-4000-8000-{n:012d}"
            kind = "user" if n % 2 == 0 else "assistant"
            content = f"turn {n}: " + "lorem ipsum dolor sit amet " * 20
            entry = {"parentUuid": parent, "isSidechain": False, "userType": "external",
                     "cwd": str(a.checkout), "sessionId": native, "version": "2.1.328",
                     "gitBranch": "main", "type": kind, "uuid": uuid,
                     "timestamp": f"2026-11-30T10:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
                     "message": {"role": kind, "content": content}}
            f.write(json.dumps(entry, separators=(",", ":")) + "\n")
            parent = uuid
    return path


def test_postgresql_going_away_mid_resume_leaves_nothing_half_written(
        two_hosts: tuple[Host, Host], proxy: CuttingProxy) -> None:
    a, b = two_hosts
    native = "0a1b2c3d-1111-4222-8333-444455556666"
    source = big_claude_session(a, native)
    succeeded(a.cos("sync"))
    url = proxy.url(b.env["COS_DATABASE_URL"])
    assert url != b.env["COS_DATABASE_URL"]
    folder = claude_project_dir(b.home, b.checkout)
    target = folder / f"{native}.jsonl"
    done = b.cos("resume", native, "--json", env={"COS_DATABASE_URL": url})
    assert proxy.cut >= 1, done.stderr  # the database did stop answering mid-read
    assert done.returncode == 6, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not target.exists() and no_temporaries(folder)
    # A previous (shorter) file stays as it was.
    mapped = source.read_bytes().replace(f'"cwd":"{a.checkout}"'.encode(),
                                         f'"cwd":"{b.checkout}"'.encode())
    folder.mkdir(parents=True, exist_ok=True)
    first = mapped.split(b"\n", 1)[0] + b"\n"
    target.write_bytes(first)
    done = b.cos("resume", native, "--json", env={"COS_DATABASE_URL": url})
    assert done.returncode == 6 and target.read_bytes() == first, done.stderr
    assert no_temporaries(folder)
    report = b.cos_json("resume", native)  # with the database back, the rest is written
    assert [f["action"] for f in report["materialized"]] == ["extended"]
    assert target.read_bytes() == mapped


# -- listing --------------------------------------------------------------------------------------


def test_sessions_of_each_host_are_listed_by_host_and_bad_host_flags_are_refused(
        two_hosts: tuple[Host, Host]) -> None:
    a, b = two_hosts
    sid_a = engine_session(a, FIRST)
    sid_b = engine_session(b, SECOND)
    succeeded(a.cos("sync"))
    mine = [r["id"] for r in b.cos_json("sessions")]
    assert mine == [sid_b]
    every = {r["id"]: r["host"] for r in b.cos_json("sessions", "--all-hosts")}
    assert every == {sid_a: "a", sid_b: "b"}  # A's in B's worktree scope: its root mapped
    assert [r["id"] for r in b.cos_json("sessions", "--host", "a")] == [sid_a]
    assert [r["id"] for r in a.cos_json("sessions", "--host", "b", "--scope", "repo")] == [sid_b]
    header, *table = succeeded(b.cos("sessions", "--all-hosts")).stdout.splitlines()
    assert header.split()[0] == "ID" and len(table) == 2  # ids shown short: ends of the ids
    assert all(("@a " in line) == sid_a.endswith(line.split()[0]) for line in table)
    for args in (("--host", "a", "--all-hosts"), ("--host", "no such/host")):
        refused = b.cos("sessions", *args)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr


def test_on_sqlite_a_session_indexed_under_an_earlier_host_name_is_listed_and_resumed_as_local(
        repo: Path, isolated_env: Path) -> None:
    (repo / ".coding-os").mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(isolated_env), "COS_HOST": "old-name"}
    ops = [{"id": "1", "op": {"type": "configure", "agent": "python", "target": ECHO_AGENT}},
           {"id": "2", "op": {"type": "user_input", "text": FIRST}}]
    done = succeeded(subprocess.run([COS, "protocol"], cwd=repo, env=env, capture_output=True,
                                    text=True, timeout=120,
                                    input="".join(json.dumps(x) + "\n" for x in ops)))
    sid = json.loads(done.stdout.splitlines()[0])["session"]
    succeeded(subprocess.run([COS, "sessions"], cwd=repo, env=env, capture_output=True))
    renamed = {**env, "COS_HOST": "new-name"}  # SQLite: one machine, renamed; nothing replicated
    listed = subprocess.run([COS, "sessions", "--json"], cwd=repo, env=renamed,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert [(r["id"], r["host"]) for r in json.loads(listed.stdout)] == [(sid, "new-name")]  # re-indexed as its own
    resumed = subprocess.run([COS, "resume", sid, "--json"], cwd=repo, env=renamed,
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["host"] is None and report["materialized"] == []  # this machine's own
    assert report["restored"]["entries"] == 3 and report["cwd"] == str(repo)
