"""A job's runner (jobs/runner.py) as a user meets it, each step a `cos` subprocess: nothing a
job started outlives its runner, however the runner ends (killed at any moment, then `cos
agents`, the supervisor, `cos respawn` or `cos rm --force`), and a client that stops reading
costs the runner no more than CLIENT_BUFFER_MAX."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from coding_os.jobs import control, jobs
from coding_os.jobs.runner import CLIENT_BUFFER_MAX, Runner
from tests.helpers import cos, processes_with, runners_of, until
from tests.helpers import bg_job as bg

WAIT = 60.0


def row_of(project: Path, job: str) -> dict[str, Any]:
    done = cos("agents", "--json", cwd=project)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = {row["id"]: row for row in json.loads(done.stdout)}[job]
    return found


def kill_runner(job: str) -> int:
    """SIGKILL the job's runner (waiting for it to be there); its pid."""
    pid: int = until(lambda: runners_of(job), f"job {job}'s runner", timeout=WAIT)[0]
    os.kill(pid, signal.SIGKILL)
    return pid


def until_done(step: list[str], project: Path) -> None:
    """Run `cos STEP…` until it succeeds: refused (exit 7, `running`) while the runner that
    was just killed still holds the job's lock."""
    def ran() -> bool:
        done = cos(*step, cwd=project)
        assert done.returncode in (0, 7), done.stderr
        return done.returncode == 0

    until(ran, f"cos {' '.join(step)} to succeed", timeout=WAIT)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_a_runner_killed_at_random_moments_leaves_no_process_of_its_job(
        project: Path, seed: int) -> None:
    rng = random.Random(seed)
    word = f"{700 + seed}.{rng.randrange(10**6):06d}"  # a sleep no other test runs
    # The command's children: one in the background, a subshell's, one in a process group of
    # its own, and the one the shell waits for.
    command = (f"sleep {word} & (sleep {word}; true) & {sys.executable} -c 'import os, sys, "
               f"time; os.setpgid(0, 0); time.sleep(float(sys.argv[1]))' {word} & "
               f"sleep {word}")
    running = 6  # the shell, its subshell, and the four sleeping
    isolation = rng.choice(["worktree", "none"])
    job = bg(project, "--exec", command, "--isolation", isolation)["id"]

    # Killed at a random moment of its start or its run: the supervisor (or `cos agents`)
    # finds it dead, and nothing of the job is left.
    time.sleep(rng.uniform(0, 1.5))
    kill_runner(job)
    until(lambda: not processes_with(word), "no process of the job", timeout=WAIT)
    row = row_of(project, job)
    assert row["state"] in ("failed", "starting"), row  # starting: no runner took it

    # Killed while the command runs, the supervisor stopped: `cos respawn` ends what the
    # runner left before it starts the job again. (A respawned job runs its command again
    # when its first runner died before it began its session; otherwise at the next reply.)
    until_done(["respawn", job], project)
    if row["cos_session"] is not None:
        until_done(["reply", job, command], project)
    until(lambda: len(processes_with(word)) == running, "the command to run", timeout=WAIT)
    left = processes_with(word)
    assert cos("daemon", "stop", cwd=project).returncode == 0
    time.sleep(rng.uniform(0, 0.3))  # not a wait: the kill lands at a random moment
    kill_runner(job)
    until_done(["respawn", job], project)
    until(lambda: not [pid for pid in left if pid in processes_with(word)],
          "what the killed runner left to be ended", timeout=10)
    until_done(["reply", job, command], project)
    until(lambda: len(processes_with(word)) == running, "the command to run again",
          timeout=WAIT)

    # And `cos rm --force` of a job whose runner was killed leaves nothing running.
    assert cos("daemon", "stop", cwd=project).returncode == 0
    time.sleep(rng.uniform(0, 0.3))  # not a wait: the kill lands at a random moment
    kill_runner(job)
    until_done(["rm", "--force", job], project)
    until(lambda: not processes_with(word), "what the killed runner left to be ended",
          timeout=10)
    assert job not in {row["id"] for row in json.loads(
        cos("agents", "--json", cwd=project).stdout)}


@pytest.mark.slow
def test_a_client_that_stops_reading_is_dropped_and_the_runner_stays_small(
        project: Path) -> None:
    size = 3 * CLIENT_BUFFER_MAX
    command = (f"head -c {size} /dev/zero | tr '\\0' x | fold -w 60000; echo; "
               "echo end-of-output; sleep 600")
    job = bg(project, "--exec", command, "--isolation", "none")["id"]
    row = until(lambda: (found := row_of(project, job))["cos_session"] and found["pid"]
                and found, "the job to run", timeout=WAIT)
    runner = row["pid"]
    stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(str(Path(jobs.load(job).folder) / jobs.SOCKET))
    try:
        stalled.sendall(json.dumps({"id": "stall", "op": {
            "type": "resume", "session": row["cos_session"], "last_seq": 0}}).encode() + b"\n")
        before = resident_kb(runner)
        events = Path(jobs.load(job).state["events"])
        until(lambda: b"end-of-output" in tail(events), "the command's output", timeout=WAIT)
        grown = resident_kb(runner) - before
        # Read what the runner had sent before it dropped the client: far less than the
        # output, then the end of the connection, while the runner goes on.
        stalled.settimeout(WAIT)
        received = 0
        while chunk := stalled.recv(1 << 20):
            received += len(chunk)
        assert received < 2 * CLIENT_BUFFER_MAX < size
        assert runners_of(job) == [runner] and row_of(project, job)["state"] == "working"
        assert grown < 2 * CLIENT_BUFFER_MAX // 1024, f"the runner grew {grown} kB"
    finally:
        stalled.close()


@pytest.mark.slow
def test_an_attached_client_dropped_for_falling_behind_resumes_with_no_gap(
        project: Path) -> None:
    size = 3 * CLIENT_BUFFER_MAX
    command = (f"head -c {size} /dev/zero | tr '\\0' x | fold -w 60000; echo; "
               "echo end-of-output; sleep 600")
    job = bg(project, "--exec", command, "--isolation", "none")["id"]
    _, connection, _ = control.attach(job, 0)
    assert connection is not None
    events = Path(jobs.load(job).state["events"])
    # The client reads nothing until the command has printed it all: the runner drops it.
    until(lambda: b"end-of-output" in tail(events), "the command's output", timeout=WAIT)
    seqs: list[int] = []
    ended = threading.Event()

    class Ended(Exception):
        pass

    def show(event: dict[str, Any]) -> None:
        seqs.append(event["seq"])
        if event["msg"].get("text") == "end-of-output":
            ended.set()
            raise Ended

    def attached() -> None:
        with contextlib.suppress(Ended):
            control.follow(connection, show)

    threading.Thread(target=attached, daemon=True).start()  # ends with the runner, if stuck
    assert ended.wait(WAIT), f"the attached client stopped at seq {seqs[-1:]}"
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > size // 60000


def resident_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def tail(path: Path) -> bytes:
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - 4096))
        return f.read()


def test_state_changes_not_yet_written_add_up_in_the_order_of_their_events(
        tmp_path: Path) -> None:
    # Written last: working. Then, within one STATE_SETTLE_S, the agent asks for approval
    # (blocked) and, answered, goes on (working): what is to be written is working again.
    written = {"agent": "python", "state": "working", "status": "busy", "waitingFor": None,
               "approval": None, "last_seq": 4}
    runner = Runner(jobs.Job(str(tmp_path), dict(written)), {})
    runner.note({"seq": 5, "msg": {"type": "approval_request", "request": "r1",
                                   "tool": "Write", "input": {"file_path": "a.txt"}}})
    assert runner.unwritten["state"] == "blocked"
    runner.note({"seq": 6, "msg": {"type": "tool_call", "call_id": "c1", "tool": "Write",
                                   "input": {"file_path": "a.txt"}}})
    assert {name: runner.unwritten[name] for name in written if name != "agent"} == {
        "state": "working", "status": "busy", "waitingFor": None, "approval": None,
        "last_seq": 6}
    runner.note({"seq": 7, "msg": {"type": "agent_message", "text": "done"}})
    assert runner.unwritten["last_seq"] == 6  # a bare new seq adds nothing to write
