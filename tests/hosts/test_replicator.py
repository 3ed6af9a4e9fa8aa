"""hosts/replicator.py: the background replicator the hooks start on a shared PostgreSQL, so a
session's lines reach the database with no further cos command on its host; one at a time per
project, and killed at any moment it loses and repeats nothing."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from coding_os.hosts import replicator
from coding_os.state.caller import Caller
from coding_os.storage.base import Storage
from tests.helpers import (claude_session, fire, replicator_running, replicator_stopped,
                          until)

NATIVE = "aaaaaaaa-0000-4000-8000-00000000000a"
SID = "ses-claude-20261129-100000-aaaa"
# The detached replicator as the hooks start it, on the project given as its argument.
_REPLICATOR = "from coding_os.hosts.replicator import main; raise SystemExit(main())"


def claude_file(home: Path, cwd: Path, native: str = NATIVE) -> Path:
    key = "".join(c if c.isalnum() else "-" for c in str(cwd))
    return home / ".claude" / "projects" / key / f"{native}.jsonl"


def add_turns(path: Path, cwd: Path, count: int, start: int = 0, pad: int = 0) -> None:
    """Append `count` user lines of a Claude Code session to its file."""
    with path.open("ab") as f:
        for n in range(start, start + count):
            f.write(json.dumps({"type": "user", "uuid": f"u-{n}", "sessionId": NATIVE,
                                "cwd": str(cwd), "timestamp": "2026-11-29T10:00:00.000Z",
                                "message": {"role": "user", "content": f"turn {n} " + "x" * pad}
                                }).encode() + b"\n")


def stored_native(storage: Storage, native: str = NATIVE) -> bytes:
    """The lines the database holds of a Claude Code session (filed under its index id)."""
    row = storage.index_row(native)
    if row is None:
        return b""
    return b"".join(line + b"\n" for _, line in storage.replica_lines(row.id, "native"))


def stored(storage: Storage, session: str, stream: str) -> list[tuple[int, bytes]]:
    return storage.replica_lines(session, stream)


def complete_lines(path: Path) -> bytes:
    data = path.read_bytes()
    return data[:data.rfind(b"\n") + 1]


def host_env(pg_url: str) -> dict[str, str]:
    return {"COS_DATABASE_URL": pg_url, "COS_HOST": "alpha"}


@pytest.mark.slow
def test_a_hook_on_postgresql_hands_the_lines_over_and_they_arrive_with_no_command(
        pg_url: str, project: Path, isolated_env: Path) -> None:
    from coding_os.storage.postgres import PostgresStorage

    claude_session(isolated_env, NATIVE, project)
    path = claude_file(isolated_env, project)
    state = project / ".coding-os"
    # On SQLite (one host's own database) there is nothing to hand over to: nothing starts.
    assert fire("SessionStart", {"session_id": NATIVE}, cwd=project).returncode == 0
    assert not (state / ".replicate-requests").exists()
    assert not (state / ".replicate.lock").exists()
    try:
        assert fire("Stop", {"session_id": NATIVE}, cwd=project,
                    env=host_env(pg_url)).returncode == 0
        with PostgresStorage(pg_url) as storage:
            until(lambda: stored_native(storage) == path.read_bytes(),
                  "the session's lines in the database")
            add_turns(path, project, 3)  # the session goes on: the next hook hands it over too
            assert fire("PostToolUse", {"session_id": NATIVE, "tool_name": "Bash"},
                        cwd=project, env=host_env(pg_url)).returncode == 0
            until(lambda: stored_native(storage) == path.read_bytes(),
                  "the new lines in the database")
    finally:
        replicator_stopped(state)
    log = (state / ".hooks.log").read_text(encoding="utf-8").splitlines()
    assert "replicator" not in log[0]  # the fire on SQLite
    assert any(" replicator=started" in line for line in log[1:])
    assert not any("event=replicate " in line or "replicator_error" in line for line in log)


@pytest.mark.slow
def test_one_replicator_runs_at_a_time_and_serves_a_request_made_while_it_runs(
        pg_url: str, project: Path, isolated_env: Path) -> None:
    from coding_os.storage.postgres import PostgresStorage

    env = {**os.environ, **host_env(pg_url)}
    tiers = Caller(env, str(project)).tiers  # the state dir, made and registered
    path = Path(tiers.transcript_path("claude", SID))
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"n": 1}\n')
    done: list[bool] = []
    first = threading.Thread(target=lambda: done.append(
        replicator.follow(tiers, str(project), env)), daemon=True)
    first.start()
    with PostgresStorage(pg_url) as storage:
        until(lambda: stored(storage, SID, "transcript") == [(1, b'{"n": 1}')],
              "the first push")
        assert replicator_running(tiers.state_dir)
        assert replicator.follow(tiers, str(project), env) is False  # the lock is taken
        with path.open("ab") as f:
            f.write(b'{"n": 2}\n')
        with open(tiers.replication_requests, "ab") as f:  # what a hook appends
            f.write(b".")
        first.join(60)
        assert done == [True]
        assert stored(storage, SID, "transcript") == [(1, b'{"n": 1}'), (2, b'{"n": 2}')]
    assert not replicator_running(tiers.state_dir)


@pytest.mark.slow
def test_a_replicator_killed_at_random_moments_loses_and_repeats_no_line(
        pg_url: str, project: Path, isolated_env: Path) -> None:
    from coding_os.storage.postgres import PostgresStorage

    rng = random.Random(25)
    env = {**os.environ, **host_env(pg_url)}
    tiers = Caller(env, str(project)).tiers
    state = Path(tiers.state_dir)
    transcript = Path(tiers.transcript_path("claude", SID))
    events = Path(tiers.events_path("claude", SID))  # the bulk: pushed in several batches
    for path in (transcript, events):
        path.parent.mkdir(parents=True)
    claude_session(isolated_env, NATIVE, project)
    native = claude_file(isolated_env, project)
    written = 0

    def streams(storage: Storage) -> list[tuple[str, str, Path]]:
        row = storage.index_row(NATIVE)
        return [(SID, "transcript", transcript), (SID, "events", events),
                *([(row.id, "native", native)] if row is not None else [])]

    def have(storage: Storage) -> int:
        return sum(len(stored(storage, *where[:2])) for where in streams(storage))

    interrupted = 0  # runs killed with some of their lines pushed and some not
    with PostgresStorage(pg_url) as watcher:
        for round_ in range(10):
            add_turns(native, project, rng.randint(1, 40), start=written)
            with transcript.open("ab") as f:
                f.write(b"".join(b'{"n": %d}\n' % (written + n) for n in range(20)))
                if rng.random() < 0.3:
                    f.write(b'{"torn": ')  # completed by the next round's first line
            with events.open("ab") as f:
                f.write(b"".join(b'{"seq": %d, "pad": "%s"}\n' % (written + n, b"x" * 80)
                                 for n in range(rng.randint(4000, 9000))))
            written += 100
            before = have(watcher)
            child = subprocess.Popen([sys.executable, "-c", _REPLICATOR, str(project)], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if round_ % 2:  # any moment of its run: starting, importing, pushing
                until(lambda: replicator_running(state) or child.poll() is not None,
                      "the replicator to take its lock")
                time.sleep(rng.uniform(0, 0.5))
            else:  # a moment of its push
                until(lambda: have(watcher) > before or child.poll() is not None,
                      "the replicator to push", every=0.005)
                time.sleep(rng.uniform(0, 0.05))
            child.kill()
            child.wait()
            want = sum(complete_lines(path).count(b"\n") for _, _, path in streams(watcher))
            interrupted += before < have(watcher) < want
        assert interrupted >= 2, interrupted
        last = subprocess.run([sys.executable, "-c", _REPLICATOR, str(project)], env=env,
                              capture_output=True, timeout=120)
        assert last.returncode == 0, last.stderr
        assert len(streams(watcher)) == 3
        for session, stream, path in streams(watcher):
            lines = stored(watcher, session, stream)
            assert [seq for seq, _ in lines] == list(range(1, len(lines) + 1))
            assert b"".join(line + b"\n" for _, line in lines) == complete_lines(path)
    log = state / ".hooks.log"
    assert not log.exists() or "event=replicate " not in log.read_text(encoding="utf-8")
