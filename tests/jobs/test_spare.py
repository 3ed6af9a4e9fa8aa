"""The spare runner (jobs/spare.py): the supervisor keeps a runner with the engine imported
waiting, `cos bg` hands it the next job; exactly one process runs each job whichever way it was
started, and a spare holding no job ends with the daemon."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from coding_os.jobs import jobs
from tests.helpers import ECHO_AGENT, cos, live, until
from tests.helpers import bg_job as bg

ECHO = f"python:{ECHO_AGENT}"


def daemon_folder() -> Path:
    return Path(os.environ["HOME"]) / ".coding-os" / "daemon"


def spares() -> list[int]:
    """The live spare runners of this test's HOME that hold no job yet (by command line)."""
    found = []
    home = f"HOME={os.environ['HOME']}".encode()
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                line = f.read()
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            continue
        if not zombie and b"coding_os.jobs.spare" in line and home in environ:
            found.append(int(pid))
    return found


def waiting_spare() -> int:
    """The pid of the spare runner once it listens."""
    pid: int = until(lambda: (found := spares()) and (daemon_folder() / "spare.sock").exists()
                     and len(found) == 1 and found[0], "a spare runner to wait")
    return pid


def runners_of(job: str) -> list[int]:
    """The processes holding job `job`'s runner lock, as /proc/locks lists them, and those whose
    command line is its runner's."""
    lock = Path(os.environ["HOME"]) / ".coding-os" / "jobs" / job / jobs.LOCK
    found = set()
    if lock.exists():
        info = lock.stat()
        inode = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
        with open("/proc/locks", encoding="ascii") as f:
            found |= {int(fields[4]) for fields in (line.split() for line in f)
                      if fields[1] == "FLOCK" and fields[5] == inode}
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                words = f.read().split(b"\0")
        except OSError:
            continue
        if b"coding_os.jobs.runner" in words and job.encode() in words:
            found.add(int(pid))
    return sorted(found)


def row_of(project: Path, job: str, *states: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        done = cos("agents", "--json", cwd=project)
        rows = {row["id"]: row for row in json.loads(done.stdout)}
        row = rows.get(job)
        return row if row is not None and row["state"] in states else None

    result: dict[str, Any] = until(found, f"job {job} to be {'/'.join(states)}")
    return result


def echoed(project: Path, job: str, text: str) -> bool:
    done = cos("logs", job, "--json", cwd=project)
    return any(event["msg"].get("text") == f"echo: {text}"
               for event in json.loads(done.stdout)["events"])


@pytest.mark.slow
def test_a_spare_runner_takes_the_next_job_and_runs_it_as_its_only_runner(
        project: Path) -> None:
    first = bg(project, "--agent", ECHO, "--isolation", "none", "first")["id"]
    row_of(project, first, "done")
    spare = waiting_spare()

    job = bg(project, "--agent", ECHO, "--isolation", "none", "second")["id"]

    row = row_of(project, job, "done")
    assert row["pid"] == spare
    assert runners_of(job) == [spare]
    until(lambda: echoed(project, job, "second"), "the spare's job to answer")
    with open(f"/proc/{spare}/cmdline", "rb") as f:  # `ps` shows it as every runner
        assert [w for w in f.read().split(b"\0") if w][1:] == [
            b"-m", b"coding_os.jobs.runner", job.encode()]
    assert cos("reply", job, "third", cwd=project).returncode == 0
    until(lambda: echoed(project, job, "third"), "the spare's job to answer a reply")
    # The supervisor starts the next spare; the one that took the job is a runner now.
    assert until(lambda: (found := spares()) and found != [spare], "the next spare") != [spare]


def test_a_job_made_while_no_spare_waits_gets_a_runner_of_its_own(project: Path) -> None:
    assert not (daemon_folder() / "spare.sock").exists()
    job = bg(project, "--agent", ECHO, "--isolation", "none", "alone")["id"]
    row = row_of(project, job, "done")
    assert runners_of(job) == [row["pid"]]
    until(lambda: echoed(project, job, "alone"), "the job to answer")


@pytest.mark.slow
def test_jobs_started_side_by_side_with_one_spare_each_run_exactly_once(project: Path) -> None:
    import threading

    row_of(project, bg(project, "--agent", ECHO, "--isolation", "none", "warm")["id"], "done")
    waiting_spare()
    found: dict[int, str] = {}

    def start(n: int) -> None:
        found[n] = bg(project, "--agent", ECHO, "--isolation", "none", f"job {n}")["id"]

    threads = [threading.Thread(target=start, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    pids = set()
    for n in range(4):
        job = found[n]
        row = row_of(project, job, "done")
        until(lambda: echoed(project, job, f"job {n}"), f"job {n} to answer")
        assert runners_of(job) == [row["pid"]]
        pids.add(row["pid"])
    assert len(pids) == 4


@pytest.mark.slow
def test_a_spare_holding_no_job_ends_when_the_daemon_is_killed(project: Path) -> None:
    row_of(project, bg(project, "--agent", ECHO, "--isolation", "none", "warm")["id"], "done")
    spare = waiting_spare()
    daemon = json.loads((daemon_folder() / "daemon.json").read_text())["pid"]

    os.kill(daemon, signal.SIGKILL)

    until(lambda: spare not in spares(), "the spare to end with its daemon")
    job = bg(project, "--agent", ECHO, "--isolation", "none", "after")["id"]
    row = row_of(project, job, "done")
    assert row["pid"] != spare and runners_of(job) == [row["pid"]]
    until(lambda: echoed(project, job, "after"), "the job after the daemon's death to answer")


@pytest.mark.slow
def test_the_job_a_spare_took_survives_the_daemon_killed(project: Path) -> None:
    row_of(project, bg(project, "--agent", ECHO, "--isolation", "none", "warm")["id"], "done")
    spare = waiting_spare()
    job = bg(project, "--agent", ECHO, "--isolation", "none", "kept")["id"]
    assert row_of(project, job, "done")["pid"] == spare
    daemon = json.loads((daemon_folder() / "daemon.json").read_text())["pid"]

    os.kill(daemon, signal.SIGKILL)
    until(lambda: not live(daemon), "the daemon to be gone")

    assert runners_of(job) == [spare]
    assert cos("reply", job, "still here", cwd=project).returncode == 0
    until(lambda: echoed(project, job, "still here"), "the job to answer after the kill")


@pytest.mark.slow
def test_a_spare_refuses_a_hand_off_of_another_installation_and_keeps_waiting(
        project: Path) -> None:
    row_of(project, bg(project, "--agent", ECHO, "--isolation", "none", "warm")["id"], "done")
    spare = waiting_spare()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(daemon_folder() / "spare.sock"))
        sock.sendall(json.dumps({"job": "0123abcd", "exe": "/elsewhere/python",
                                 "package": "/elsewhere/coding_os", "umask": 0o22,
                                 "env": {}}).encode() + b"\n")
        answer = json.loads(sock.makefile("rb").readline())
    assert answer["ok"] is False and "another installation" in answer["error"]
    assert spares() == [spare]
    job = bg(project, "--agent", ECHO, "--isolation", "none", "taken")["id"]
    assert row_of(project, job, "done")["pid"] == spare


@pytest.mark.slow
def test_the_supervisor_keeps_a_spare_worktree_that_the_next_job_takes(project: Path) -> None:
    from tests.helpers import git, tree

    first = bg(project, "--agent", ECHO, "first")["id"]  # makes the worktrees folder
    row_of(project, first, "done")
    worktrees = project / ".coding-os" / "worktrees"
    until(lambda: (worktrees / "spare.ready").exists(), "the spare worktree", timeout=120)
    main_before = (tree(project), git(project, "rev-parse", "HEAD"),
                   git(project, "status", "--porcelain"))

    job = bg(project, "--agent", ECHO, "second")["id"]

    state = json.loads((Path(os.environ["HOME"]) / ".coding-os" / "jobs" / job
                        / "state.json").read_text())
    assert state["checked_out"] is True and state["worktree"] == str(worktrees / job)
    assert not (worktrees / "spare").exists()
    assert git(worktrees / job, "symbolic-ref", "HEAD") == f"refs/heads/cos/{job}"
    assert git(worktrees / job, "status", "--porcelain", "--untracked-files=all") == ""
    assert (worktrees / job / "README.md").read_bytes() == (project / "README.md").read_bytes()
    until(lambda: echoed(project, job, "second"), "the job in the spare worktree to answer")
    assert (tree(project), git(project, "rev-parse", "HEAD"),
            git(project, "status", "--porcelain")) == main_before

    # HEAD moves: the next job's worktree is at the new commit, whatever the spare was.
    (project / "later.txt").write_text("later\n", encoding="utf-8")
    git(project, "add", "later.txt")
    git(project, "commit", "-q", "-m", "later")
    after = bg(project, "--agent", ECHO, "third")["id"]
    row_of(project, after, "done")
    assert (worktrees / after / "later.txt").read_text(encoding="utf-8") == "later\n"
    assert git(worktrees / after, "rev-parse", "HEAD") == git(project, "rev-parse", "HEAD")

    # The supervisor makes the next spare and keeps it: `cos gc` leaves it; `cos daemon stop`
    # removes it, and only it.
    until(lambda: (worktrees / "spare.ready").exists(), "the next spare worktree", timeout=120)
    daemon = json.loads((daemon_folder() / "daemon.json").read_text())["pid"]
    assert (worktrees / "spare.owner").read_text().strip() == str(daemon)
    kept = cos("gc", "--dry-run", "--json", cwd=project)
    assert json.loads(kept.stdout)["jobs"]["spares"] == [], kept.stderr
    assert cos("daemon", "stop", cwd=project).returncode == 0
    assert not (worktrees / "spare").exists() and not (worktrees / "spare.ready").exists()
    assert "worktrees/spare" not in git(project, "worktree", "list")
    assert all((worktrees / name).is_dir() for name in (first, job, after))


def test_a_job_whose_agent_is_starting_holds_back_the_supervisors_own_work() -> None:
    from coding_os.jobs.supervisor import agent_starting

    assert not agent_starting()
    job = jobs.new_job({"name": "j", "agent": "claude", "cwd": "/", "project": "/"}, "hi")
    assert agent_starting()  # its runner has not started
    job = jobs.update(job, state="working", pid=os.getpid())
    assert agent_starting()  # Claude Code not initialised yet: no native session id
    events = Path(os.environ["HOME"]) / "events.jsonl"
    events.write_text('{"v":1,"seq":1,"msg":{"type":"session_configured"}}\n'
                      '{"v":1,"seq":2,"msg":{"type":"task_started","task":1}}\n')
    job = jobs.update(job, sessionId="0f6c2a52-0000-4000-8000-000000000000",
                      events=str(events))
    assert agent_starting()  # initialised, but it has not answered its prompt yet
    with open(events, "a", encoding="utf-8") as f:
        f.write('{"v":1,"seq":3,"msg":{"type":"agent_message","text":"hi"}}\n')
    assert not agent_starting()
    command = jobs.new_job({"name": "c", "agent": "exec", "cwd": "/", "project": "/"}, "true")
    assert agent_starting()
    jobs.update(command, state="working", pid=os.getpid())
    assert not agent_starting()  # a command has no agent to initialise
    jobs.update(command, state="starting", pid=None,
                startedAt=int((time.time() - 60) * 1000))
    assert not agent_starting()  # made a minute ago: no longer starting, whatever it says
