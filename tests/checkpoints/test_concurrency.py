"""Checkpoints taken from several panels at once (DESIGN.md §5): hook
fires of two agents' panels taking checkpoints at the same time while another process keeps
changing the tree leave no corrupt object and lose no checkpoint; a rewind running meanwhile is
seen by every checkpoint whole or not at all (the restore lock)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from coding_os import jsonwire
from coding_os.checkpoints.store import ObjectStore
from coding_os.state.hookslog import parse_line
from tests.helpers import COS, cos, cos_json, create


PANELS = (("claude", "0f3c9a7e-1b2d-4c5e-8f90-0000000000d1"),
          ("codex", "0f3c9a7e-1b2d-4c5e-8f90-0000000000d2"))

# One panel's hooks, fired through the library entry `cos hook` runs, as fast as they come: a
# session start, then prompts, shell tool calls (PreToolUse Bash takes a checkpoint) and turn
# ends, until the stop file appears (or `fires` ran). Every fire must exit 0.
HOOKS = r'''
import json, os, sys, time
from coding_os import api

agent, native, repo, stop, fires = sys.argv[1:6]
env = dict(os.environ, COS_AGENT=agent)
sys.stdin.readline()  # the start gun


def fire(event, **payload):
    result = api.hook(event, {"hook_event_name": event, "session_id": native, **payload},
                      env=env, cwd=repo)
    if result.exit_code != 0:
        sys.exit(f"{event} exited {result.exit_code}")


fire("SessionStart", source="startup")
count = 0
while count < int(fires) and not os.path.exists(stop):
    turn = count // 5
    step = count % 5
    if step == 0:
        fire("UserPromptSubmit", prompt=f"{agent} prompt {turn}")
    elif step == 4:
        fire("Stop", last_assistant_message=f"{agent} done {turn}")
    else:
        fire("PreToolUse", tool_name="Bash", tool_use_id=f"{agent}-{count}",
             tool_input={"command": f"sed -i s/a/b/ m{count % 7}.txt"})
    count += 1
print(count)
'''

# The third process: keeps writing, deleting and renaming files in the tree until stopped.
MUTATOR = r'''
import os, random, sys
repo, stop = sys.argv[1], sys.argv[2]
rng = random.Random(7)
sys.stdin.readline()
changes = 0
while not os.path.exists(stop):
    name = os.path.join(repo, f"m{rng.randrange(7)}.txt")
    what = rng.random()
    try:
        if what < 0.6:
            with open(name, "wb") as f:
                f.write(os.urandom(rng.randrange(1, 5000)))
        elif what < 0.8:
            os.unlink(name)
        else:
            os.makedirs(os.path.join(repo, "sub"), exist_ok=True)
            os.replace(name, os.path.join(repo, "sub", os.path.basename(name)))
    except FileNotFoundError:
        pass
    changes += 1
print(changes)
'''


def start(argvs: list[list[str]], cwd: Path) -> list[subprocess.Popen[str]]:
    """Start every process, then release them at once."""
    procs = [subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for argv in argvs]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    return procs


def finish(procs: list[subprocess.Popen[str]], timeout: float) -> list[str]:
    outs = []
    deadline = time.monotonic() + timeout
    for proc in procs:
        out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        assert proc.returncode == 0, err[-2000:]
        outs.append(out)
    return outs


def hooks_log(project: Path) -> list[dict[str, str]]:
    raw = (project / ".coding-os" / ".hooks.log").read_text(encoding="utf-8")
    fields = [parse_line(line + "\n") for line in raw.splitlines()]
    assert all(f is not None for f in fields), "a torn hooks-log line"
    return [f for f in fields if f is not None]  # type: ignore[misc]


def assert_store_sound(project: Path) -> None:
    """verify is ok, nothing half-written is left, and every checkpoint the log names exists."""
    report = cos_json("checkpoints", "verify", cwd=project)
    assert isinstance(report, dict)
    assert report["ok"] is True, report
    assert report["damaged"] == [] and report["missing"] == []
    folder = project / ".coding-os" / "checkpoints"
    staging = folder / "staging"
    assert not staging.exists() or not any(staging.iterdir())
    assert not (folder / "journal.json").exists()
    assert not (folder / "journal.json.tmp").exists()
    leftovers = [p for p in (folder / "objects").rglob("*") if ".tmp-" in p.name]
    assert leftovers == []
    rows: list[dict[str, Any]] = cos_json("checkpoints", cwd=project)  # type: ignore[assignment]
    listed = {row["id"] for row in rows}
    lines = hooks_log(project)
    assert [f for f in lines if "checkpoint_error" in f] == []
    named = {f["checkpoint"] for f in lines if f.get("checkpoint")}
    assert named and named <= listed, sorted(named - listed)[:5]


def test_two_panels_checkpointing_while_the_tree_changes_lose_nothing_and_corrupt_nothing(
        project: Path) -> None:
    stop = project.parent / "stop"
    argvs = [[sys.executable, "-c", HOOKS, agent, native, str(project), str(stop), "60"]
             for agent, native in PANELS]
    mutator = start([[sys.executable, "-c", MUTATOR, str(project), str(stop)]], project)
    hookers = start(argvs, project)
    counts = [int(out) for out in finish(hookers, timeout=60)]
    stop.touch()
    changes = int(finish(mutator, timeout=10)[0])
    assert counts == [60, 60] and changes > 100

    assert_store_sound(project)
    lines = hooks_log(project)
    per_agent = {agent: [f for f in lines if f["agent"] == agent and f.get("checkpoint")]
                 for agent, _ in PANELS}
    # 12 prompts, 36 shell calls and 12 turn ends a panel: each one names its checkpoint.
    assert {agent: len(rows) for agent, rows in per_agent.items()} == {"claude": 60, "codex": 60}
    records = cos_json("checkpoints", cwd=project)
    assert isinstance(records, list)
    sessions = {r["session"] for r in records}
    assert len(sessions) == 2 and all(str(s).startswith("ses-") for s in sessions)


FILES = 150


def state_a(project: Path) -> dict[str, bytes]:
    return {f"pkg/mod{i:03d}.py": f"# version A of module {i}\n".encode() * 20
            for i in range(FILES)}


def state_b(project: Path) -> dict[str, bytes]:
    changed = {f"pkg/mod{i:03d}.py": f"# version B of module {i}\n".encode() * 20
               for i in range(0, FILES, 2)}
    created = {f"gen/out{i:03d}.txt": f"generated {i}\n".encode() for i in range(40)}
    return {**changed, **created}


def write_state(project: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def blob_ids(files: dict[str, bytes]) -> dict[str, str]:
    import hashlib

    return {rel: hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            for rel, data in files.items()}


# Rewinds the tree to A and undoes it, `rounds` times, each through `cos` as a user would.
REWINDER = r'''
import subprocess, sys
cos, repo, checkpoint, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.stdin.readline()
for _ in range(rounds):
    for args in (["rewind", checkpoint, "--code"], ["rewind", "--undo"]):
        proc = subprocess.run([cos, *args], cwd=repo, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"{args} exited {proc.returncode}: {proc.stderr}")
print(rounds)
'''


@pytest.mark.slow
def test_checkpoints_taken_during_a_rewind_see_the_whole_tree_before_or_after_never_a_mix(
        project: Path) -> None:
    a = state_a(project)
    write_state(project, a)
    target = create(project)
    b = {**a, **state_b(project)}
    write_state(project, b)
    expected_a, expected_b = blob_ids(a), blob_ids(b)

    stop = project.parent / "stop"
    rewinder = start([[sys.executable, "-c", REWINDER, COS, str(project), str(target["id"]),
                       "4"]], project)
    hookers = start([[sys.executable, "-c", HOOKS, agent, native, str(project), str(stop),
                      "100000"] for agent, native in PANELS], project)
    finish(rewinder, timeout=60)
    stop.touch()
    finish(hookers, timeout=30)

    assert_store_sound(project)
    store = ObjectStore(str(project / ".coding-os" / "checkpoints"))
    records = cos_json("checkpoints", cwd=project)
    assert isinstance(records, list)
    seen = {"A": 0, "B": 0}
    for record in records:
        record = json.loads(
            (project / ".coding-os" / "checkpoints" / "points" / f"{record['id']}.json")
            .read_text(encoding="utf-8"))
        manifest: Any = jsonwire.loads(store.get(str(record["manifest"])).decode("ascii"))
        (layer,) = manifest["layers"]
        tree = {path: entry[1] for path, entry in layer["overlay"].items() if entry}
        assert tree in (expected_a, expected_b), (record["id"], record["trigger"])
        seen["A" if tree == expected_a else "B"] += 1
    hook_taken = [r for r in records if r["trigger"] != "before-rewind" and r["session"]]
    assert len(hook_taken) > 10
    assert seen["A"] > 1 and seen["B"] > 1
    proc = cos("checkpoints", "verify", cwd=project)
    assert proc.returncode == 0, proc.stderr
