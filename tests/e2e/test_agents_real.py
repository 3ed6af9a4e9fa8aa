"""Background jobs (docs/background.md, DESIGN.md §6) as a user runs them, with the real Claude
Code and Codex against the scripted model server: `cos bg` a Claude, a Codex and an exec job on
one repository at once, each in its own worktree; approvals and replies from other processes;
two `cos attach --json` at once; a runner SIGKILLed, marked failed, and `cos respawn` resuming
the native session. Every `cos` here is its own process, as a user's shell runs it; states are
read off `cos agents --json`, polled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import JOB_WAIT as WAIT
from tests.e2e.harness import Jobs, running_jobs, shell
from tests.e2e.model_server import Text
from tests.helpers import COS, Terminal, git, tree

pytestmark = pytest.mark.e2e

Row = dict[str, Any]
Event = dict[str, Any]


def runners_of(job: str) -> list[int]:
    """The pids of the processes running `python -m coding_os.jobs.runner <job>`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                words = f.read().split(b"\0")
            with open(f"/proc/{name}/stat", encoding="ascii") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        if b"coding_os.jobs.runner" in words and job.encode() in words:
            found.append(int(name))
    return found


def lock_holders(path: Path) -> list[int]:
    """The pids holding a flock on `path`, as /proc/locks lists them."""
    info = path.stat()
    inode = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    with open("/proc/locks", encoding="ascii") as f:
        return [int(fields[4]) for fields in (line.split() for line in f)
                if fields[1] == "FLOCK" and fields[5] == inode]


@pytest.fixture
def jobs(repo: Path, isolated_env: Path) -> Iterator[Jobs]:
    with running_jobs(repo, isolated_env) as at:
        yield at


def checkout_state(repo: Path) -> tuple[object, ...]:
    """The main checkout as a user sees it: every file's bytes, `git status`, HEAD, branch."""
    return (tree(repo), git(repo, "status", "--porcelain", "--untracked-files=all"),
            git(repo, "rev-parse", "HEAD"), git(repo, "symbolic-ref", "HEAD"))


def test_a_claude_a_codex_and_an_exec_job_run_at_once_each_in_its_own_worktree_asking_and_replying(
        jobs: Jobs) -> None:
    repo = jobs.project
    (repo / "src.txt").write_text("tracked\n", encoding="utf-8")
    git(repo, "add", "src.txt")
    git(repo, "commit", "-q", "-m", "src")
    (repo / "scratch.txt").write_text("untracked, the user's\n", encoding="utf-8")
    before = checkout_state(repo)
    for agent in ("claude", "codex"):
        jobs.script(f"{agent.upper()}-JOB", [shell(agent, f"echo {agent} > {agent}.txt"),
                                             Text(f"{agent} wrote it.")])

    claude = jobs.bg("--name", "claude-job", "CLAUDE-JOB: write claude.txt")
    codex = jobs.bg("--agent", "codex", "--name", "codex-job", "CODEX-JOB: write codex.txt")
    command = jobs.bg("--exec", "echo exec-ran > exec.txt", "--name", "exec-job")
    started = {"claude": claude, "codex": codex, "exec": command}
    assert len({row["id"] for row in started.values()}) == 3
    for agent, row in started.items():
        assert row["agent"] == agent
        worktree = repo / ".coding-os" / "worktrees" / row["id"]
        assert row["worktree"] == str(worktree) and row["branch"] == f"cos/{row['id']}"
        assert git(worktree, "symbolic-ref", "HEAD") == f"refs/heads/cos/{row['id']}"
        assert git(worktree, "rev-parse", "HEAD") == git(repo, "rev-parse", "HEAD")
    listed = git(repo, "worktree", "list", "--porcelain")
    assert all(f"worktree {row['worktree']}\n" in listed for row in started.values())

    done = jobs.until(command["id"], lambda r: r["state"] == "done" and r["pid"] is None,
                      "ended")
    assert done["exit_code"] == 0
    assert (Path(command["worktree"]) / "exec.txt").read_text(encoding="utf-8") == "exec-ran\n"

    for agent in ("claude", "codex"):
        job = started[agent]["id"]
        blocked = jobs.until(job, lambda r: r["state"] == "blocked", "asked an approval")
        assert (blocked["status"], blocked["waitingFor"]) == ("waiting", "permission prompt")
        asked = [e["msg"] for e in jobs.events(job) if e["msg"]["type"] == "approval_request"]
        assert len(asked) == 1 and f"{agent}.txt" in json.dumps(asked[0]["input"])
        # What it asks, in its row: the request, the tool and the command it would run.
        approval = blocked["approval"]
        assert approval["request"] == asked[0]["request"] and approval["tool"] == asked[0]["tool"]
        assert f"echo {agent} > {agent}.txt" in approval["command"], approval
        assert not [e for e in jobs.events(job) if e["msg"]["type"] == "tool_result"]
        wrote = Path(started[agent]["worktree"]) / f"{agent}.txt"
        assert not wrote.exists()
        jobs.ok("approve", job)
        finished = jobs.until(job, lambda r: r["state"] == "done", "finished its task")
        assert finished["status"] == "idle" and finished["waitingFor"] is None
        assert finished["approval"] is None
        got = jobs.events(job)
        called = [e["msg"]["call_id"] for e in got if e["msg"]["type"] == "tool_call"]
        ran = [e["msg"]["call_id"] for e in got if e["msg"]["type"] == "tool_result"]
        assert len(called) == 1 and ran == called  # the approved command ran
        results = [e["msg"] for e in got if e["msg"]["type"] == "tool_result"]
        assert results[0]["ok"] is True, results
        assert wrote.read_text(encoding="utf-8") == f"{agent}\n"
        assert not (repo / f"{agent}.txt").exists()
        started[agent] = finished

    for agent in ("claude", "codex"):
        job = started[agent]["id"]
        marker = f"SECOND-{agent.upper()}"
        task = jobs.json("reply", job, f"{marker}: and now just answer")["task"]
        assert task
        jobs.until_asked(marker)
        got = jobs.until_task_ends(job, task)
        assert [e["msg"]["type"] for e in got].count("task_complete") == 2
        end = next(e["seq"] for e in got if e["msg"]["type"] == "task_complete"
                   and e["msg"].get("task") == task)
        again = jobs.until(job, lambda r: r["state"] == "done" and r["last_seq"] >= end,
                           "finished its second task")
        assert again["status"] == "idle" and again["pid"] == started[agent]["pid"]

    assert checkout_state(repo) == before
    assert not any((repo / f"{name}.txt").exists() for name in ("claude", "codex", "exec"))


class Attached:
    """A `cos attach ID --json` process, its stdout read line by line as it comes."""

    def __init__(self, jobs: Jobs, job: str) -> None:
        import threading

        self.proc = subprocess.Popen([COS, "attach", job, "--json"], cwd=jobs.project,
                                     env=jobs.env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def events(self) -> list[Event]:
        return [json.loads(line) for line in list(self.lines) if line.startswith("{")]

    def until_seen(self, text: str) -> None:
        deadline = time.monotonic() + WAIT
        while not any(text in line for line in list(self.lines)):
            assert self.proc.poll() is None, f"cos attach ended: {self.lines}"
            assert time.monotonic() < deadline, f"cos attach never showed {text!r}"
            time.sleep(0.05)

    def end(self) -> int:
        code = self.proc.wait(timeout=WAIT)
        self.reader.join(timeout=WAIT)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return code


def test_two_processes_attached_at_once_see_the_same_dense_seqs_as_the_stored_events(
        jobs: Jobs, tmp_path: Path) -> None:
    go = tmp_path / "go"
    command = (f"echo begin; while [ ! -e {go} ]; do sleep 0.05; done; "
               "for i in 1 2 3 4 5 6 7 8; do echo line $i; done")
    job = jobs.bg("--exec", command, "--name", "attached")["id"]
    jobs.until(job, lambda r: r["state"] == "working", "started")
    watchers = [Attached(jobs, job), Attached(jobs, job)]
    try:
        for watcher in watchers:
            watcher.until_seen('"begin"')  # both attached while the job waits
        go.touch()
        codes = [watcher.end() for watcher in watchers]
    finally:
        for watcher in watchers:
            if watcher.proc.poll() is None:
                watcher.proc.kill()
    assert codes == [0, 0]
    stored = jobs.events(job)
    seqs = [event["seq"] for event in stored]
    assert seqs == list(range(1, len(seqs) + 1))
    texts = [e["msg"].get("text") for e in stored if e["msg"]["type"] == "agent_message"]
    assert texts == ["begin", *(f"line {i}" for i in range(1, 9))]
    for watcher in watchers:
        assert watcher.events() == stored
    row = jobs.until(job, lambda r: r["pid"] is None, "ended")
    assert (row["state"], row["exit_code"]) == ("done", 0)


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_killed_runner_fails_its_job_and_respawn_resumes_the_native_session(
        jobs: Jobs, agent: str) -> None:
    jobs.script("PELICAN", [Text("Noted.")])
    row = jobs.bg("--agent", agent, "remember the word PELICAN")
    job = row["id"]
    idle = jobs.until(job, lambda r: r["state"] == "done" and r["status"] == "idle",
                      "finished its first task")
    lock = jobs.home / ".coding-os" / "jobs" / job / "runner.lock"
    assert runners_of(job) == [idle["pid"]] and lock_holders(lock) == [idle["pid"]]
    os.kill(idle["pid"], signal.SIGKILL)

    failed = jobs.until(job, lambda r: r["state"] == "failed", "was marked failed")
    stored = jobs.events(job)
    assert failed["pid"] is None and failed["last_seq"] == stored[-1]["seq"]
    assert [e["msg"]["type"] for e in stored].count("task_complete") == 1
    refused = jobs.run("reply", job, "are you there?")
    assert refused.returncode == 7 and f"cos respawn {job}" in refused.stderr

    jobs.ok("respawn", job)
    back = jobs.until(job, lambda r: r["pid"] not in (None, idle["pid"]) and r["state"] == "done",
                      "was running again")
    for field in ("worktree", "branch", "cos_session", "sessionId", "cwd"):
        assert back[field] == idle[field], field
    assert runners_of(job) == [back["pid"]] and lock_holders(lock) == [back["pid"]]
    twice = jobs.run("respawn", job)
    assert twice.returncode != 0 and "one runner per job" in twice.stderr
    assert runners_of(job) == [back["pid"]]

    task = jobs.json("reply", job, "which word was it? NEXT")["task"]
    asked = jobs.until_asked("which word was it? NEXT")
    assert "PELICAN" in asked[-1]  # the earlier conversation came with it: the session resumed
    got = jobs.until_task_ends(job, task)
    seqs = [event["seq"] for event in got]
    assert seqs == list(range(1, len(seqs) + 1))
    assert jobs.until(job, lambda r: r["state"] == "done", "finished")["pid"] == back["pid"]


def test_cos_attach_shows_what_a_claude_job_asks_and_allow_typed_there_answers_it(
        jobs: Jobs) -> None:
    jobs.script("ATTACH-JOB", [shell("claude", "echo attached > attached.txt"),
                               Text("It is written.")])
    row = jobs.bg("--name", "attach-job", "ATTACH-JOB: write attached.txt")
    job = row["id"]
    jobs.until(job, lambda r: r["state"] == "blocked", "asked an approval")
    table = jobs.ok("agents").stdout
    assert "asks: Bash echo attached > attached.txt (request " in table, table
    term = Terminal(jobs.project, "attach", job)
    try:
        term.expect(f"job {job} asks to run Bash echo attached > attached.txt", timeout=WAIT)
        term.expect("type allow or deny")
        term.type("allow\n")
        term.expect("It is written.", timeout=WAIT)
        term.type("\x04")  # Ctrl-D: detach, the job goes on
        assert term.wait() == 0
    finally:
        term.end()
    done = jobs.until(job, lambda r: r["state"] == "done", "finished its task")
    assert done["approval"] is None
    assert (Path(row["worktree"]) / "attached.txt").read_text(encoding="utf-8") == "attached\n"
