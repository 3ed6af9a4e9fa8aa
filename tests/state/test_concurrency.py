"""Many processes firing hooks at once (DESIGN.md §3.5, §3.2): whole log lines, private panels,
no database errors reaching the agent, and every spooled observation stored exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest

from coding_os import api
from coding_os.state.hookslog import parse_line
from coding_os.state.statefile import parse_state
from coding_os.storage.migrations.sqlite import MIGRATIONS

AGENTS = ("claude", "codex")
PANELS = 4
WORKERS = 16
FIRES = 200
# The same native ids for both agents: the agent directories alone must keep them apart.
NATIVES = tuple(f"0f3c9a7e-1b2d-4c5e-8f90-00000000000{p}" for p in range(PANELS))

# Shared by the workers and the test: the event and the payload of fire `i` of worker `wid`.
PLAN = r'''
import random

FILLER = "x = \"é\" && grep -e 'a=b' | sed 's/ /_/g' ; echo ∑ \\ done "


def event_for(i, first):
    if i == 0 and first:
        return "SessionStart"
    if i % 25 == 12:
        return "Stop"
    if i % 10 == 5:
        return "UserPromptSubmit"
    if i % 7 == 3:
        return "PreToolUse"
    return "PostToolUse"


def command_for(wid, i):
    rng = random.Random(wid * 100003 + i)
    size = rng.choice([20, 300, 4500, 5200, 6100]) if i % 3 else rng.randint(4200, 6100)
    head = f"echo w{wid:02d}-i{i:03d} "
    return head + (FILLER * (size // len(FILLER) + 1))[: max(0, size - len(head))]


def payload_for(wid, i, event, native):
    body = {"hook_event_name": event, "session_id": native}
    if event == "SessionStart":
        body["source"] = "startup"
    elif event in ("PreToolUse", "PostToolUse"):
        body.update(tool_name="Bash", tool_input={"command": command_for(wid, i)},
                    tool_use_id=f"toolu-{wid}-{i}",
                    tool_response={"stdout": "ok " * 50, "is_error": False})
    elif event == "UserPromptSubmit":
        body["prompt"] = f"prompt w{wid:02d}-i{i:03d} " + "why? " * 300
    elif event == "Stop":
        body["last_assistant_message"] = f"done w{wid:02d}-i{i:03d}"
    return body
'''

WORKER = PLAN + r'''
import json, os, sys, time
from coding_os import api

wid, agent, native, first, repo, fires = (int(sys.argv[1]), sys.argv[2], sys.argv[3],
                                          sys.argv[4] == "1", sys.argv[5], int(sys.argv[6]))
env = dict(os.environ, COS_AGENT=agent)
sys.stdin.readline()  # the start gun: every worker is imported and waiting
if not first:
    # The panel's first worker opens the session; wait (bounded) until it has.
    marker = os.path.join(repo, ".coding-os", agent, "panels", native, "session-id")
    deadline = time.monotonic() + 60
    while not os.path.exists(marker):
        if time.monotonic() > deadline:
            sys.exit("the panel's SessionStart never happened")
        time.sleep(0.002)
counts = {}
for i in range(fires):
    event = event_for(i, first)
    result = api.hook(event, payload_for(wid, i, event, native), env=env, cwd=repo)
    if result.exit_code != 0:
        sys.exit(f"fire {i} ({event}) exited {result.exit_code}")
    counts[event] = counts.get(event, 0) + 1
print(json.dumps(counts))
'''

_plan: dict[str, object] = {}
exec(PLAN, _plan)  # noqa: S102 - the same plan the workers run
event_for = cast("Callable[[int, bool], str]", _plan["event_for"])
command_for = cast("Callable[[int, int], str]", _plan["command_for"])


def excerpt(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_together(argvs: list[list[str]], cwd: Path, timeout: float) -> list[tuple[int, str, str]]:
    """Start every process, release them at once, and collect (exit code, stdout, stderr)."""
    procs = [subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for argv in argvs]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = []
    deadline = time.monotonic() + timeout
    for proc in procs:
        out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        results.append((proc.returncode, out, err))
    return results


@pytest.mark.slow
def test_sixteen_processes_firing_hooks_keep_log_lines_whole_and_panels_private(
        repo: Path) -> None:
    pairs = [(agent, p) for agent in AGENTS for p in range(PANELS)]
    argvs = []
    for wid in range(WORKERS):
        agent, p = pairs[wid % len(pairs)]
        first = wid < len(pairs)
        argvs.append([sys.executable, "-c", WORKER, str(wid), agent, NATIVES[p],
                      "1" if first else "0", str(repo), str(FIRES)])

    results = run_together(argvs, repo, timeout=80)

    for wid, (code, out, err) in enumerate(results):
        assert code == 0 and err == "", f"worker {wid} failed ({code}): {err[-2000:]}"
        assert sum(json.loads(out).values()) == FIRES

    state = repo / ".coding-os"
    sessions = {}
    for agent, p in pairs:
        parsed = parse_state((state / agent / "panels" / NATIVES[p] / "session-id").read_bytes())
        assert parsed is not None
        sessions[(agent, NATIVES[p])] = parsed[0]
    assert len(set(sessions.values())) == len(pairs)

    raw = (state / ".hooks.log").read_bytes()
    assert raw.endswith(b"\n")
    lines = raw.decode("utf-8").split("\n")[:-1]
    assert len(lines) == WORKERS * FIRES

    seen: Counter[tuple[str, str, str]] = Counter()
    long_lines = 0
    for line in lines:
        fields = parse_line(line + "\n")
        assert fields is not None, f"unparseable (torn or interleaved) line: {line[:300]!r}"
        assert "db_error" not in fields and "error" not in fields, line[:500]
        agent, panel, event = str(fields["agent"]), str(fields["panel"]), str(fields["event"])
        assert (agent, panel) in sessions, line[:300]
        assert fields["session"] == sessions[(agent, panel)], "a panel read another's session"
        assert fields.get("native") is None or fields["native"] == panel
        seen[(agent, panel, event)] += 1
        long_lines += len(line.encode("utf-8")) > 4096
        if event in ("PreToolUse", "PostToolUse"):
            text = fields["input"]
            assert text is not None and text.startswith("echo w")
            wid, i = int(text[6:8]), int(text[10:13])
            assert text == excerpt(command_for(wid, i), 4000), f"value damaged: w{wid} i{i}"
            assert pairs[wid % len(pairs)] == (agent, NATIVES.index(panel))
    assert long_lines > 1000

    # The plan, replayed: how many fires of each event every panel received.
    expected: Counter[tuple[str, str, str]] = Counter()
    for wid in range(WORKERS):
        agent, p = pairs[wid % len(pairs)]
        for i in range(FIRES):
            expected[(agent, NATIVES[p], event_for(i, wid < len(pairs)))] += 1
    assert seen == expected

    rows = api.session_observations(env=dict(os.environ, COS_AGENT="claude"), cwd=str(repo))
    assert len({row["oid"] for row in rows}) == len(rows)
    stored = Counter(row["session"] for row in rows)
    spooled: Counter[str] = Counter()
    for (agent, panel, event), count in expected.items():
        if event != "PreToolUse":  # the only event here that observes nothing
            spooled[sessions[(agent, panel)]] += count
    assert stored == spooled


OPENER = r'''
import sys
from coding_os.storage.sqlite import SQLiteStorage

sys.stdin.readline()
storage = SQLiteStorage(sys.argv[1])
print(storage.schema_version())
storage.close()
'''


@pytest.mark.slow
def test_sixteen_concurrent_first_openers_of_a_fresh_database_all_see_the_latest_schema(
        tmp_path: Path) -> None:
    import sqlite3

    for round_ in range(3):
        path = tmp_path / f"db{round_}" / "coding-os.db"
        results = run_together([[sys.executable, "-c", OPENER, str(path)]] * WORKERS,
                               tmp_path, timeout=60)
        for code, out, err in results:
            assert code == 0 and err == "", err[-2000:]
            assert out.strip() == str(len(MIGRATIONS))
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            applied = [row[0] for row in conn.execute(
                "SELECT version FROM schema_migrations ORDER BY version")]
            assert applied == list(range(1, len(MIGRATIONS) + 1))
        finally:
            conn.close()
