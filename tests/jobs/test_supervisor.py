"""How the supervisor and every reader of the jobs (`cos agents`, the web roster, `cos respawn`)
tell that a job's runner died (jobs/supervisor.py): decided holding the runner's lock, on the
state read under it, so a runner that ends while it is looked at is never taken for a killed
one, and a runner killed while it takes a job is known at once."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from coding_os.jobs import control, jobs, roster, runner, supervisor


def made_job(project: Path) -> jobs.Job:
    """A job as `cos bg --exec` makes it, before any runner takes it (`starting`)."""
    return jobs.new_job({"name": "r", "agent": "exec", "cwd": str(project),
                         "project": str(project), "worktree": None, "options": {}}, "true")


@pytest.fixture
def ending_runner(project: Path) -> Iterator[tuple[jobs.Job, Callable[[], None]]]:
    """A job run by a controlled runner (this process, holding the job's lock as a runner
    does: runner.take_lock), and the runner's end: its last state (`done`, exit code 0, no
    pid), then its lock let go."""
    job = made_job(project)
    lock = runner.take_lock(job)
    assert lock is not None
    job = jobs.update(jobs.reload(job), state="working", status="busy", pid=os.getpid())
    held = [lock]

    def end() -> None:
        jobs.update(jobs.reload(job), state="done", status=None, exit_code=0, pid=None)
        os.close(held.pop())

    yield job, end
    for fd in held:
        os.close(fd)


READERS: dict[str, Callable[[Path], object]] = {
    "cos agents and the web roster": lambda project: control.list_jobs(cwd=str(project)),
    "the supervisor's sweep": lambda project: supervisor.sweep(),
}


@pytest.mark.parametrize("reader", READERS)
def test_a_job_whose_runner_ends_while_a_reader_looks_at_it_is_shown_done_never_failed(
        project: Path, ending_runner: tuple[jobs.Job, Callable[[], None]],
        monkeypatch: pytest.MonkeyPatch, reader: str) -> None:
    job, end = ending_runner
    read = roster.current

    def read_then_the_runner_ends(env: Any = None) -> list[jobs.Job]:
        found = read(env)  # the reader has the job `working` with the runner's pid...
        end()  # ...and the runner writes its end and exits before the reader tests the lock
        return found

    monkeypatch.setattr(roster, "current", read_then_the_runner_ends)
    READERS[reader](project)
    state = jobs.load(job.id).state
    assert (state["state"], state["exit_code"], state["pid"]) == ("done", 0, None), state
    assert "error" not in state
    monkeypatch.setattr(roster, "current", read)
    assert [(row["state"], row["exit_code"]) for row in control.list_jobs(cwd=str(project))] == [
        ("done", 0)]


def test_a_starting_job_whose_runner_died_holding_it_is_marked_failed_at_once(
        project: Path) -> None:
    job = made_job(project)
    # A runner (the spare, handed the job) takes the job's lock and is killed before it says
    # its pid: the job is `starting` and nobody holds its lock.
    taker = ("import os, signal, sys; from coding_os.jobs import jobs, runner; "
             "runner.take_lock(jobs.load(sys.argv[1])); os.kill(os.getpid(), signal.SIGKILL)")
    killed = subprocess.run([sys.executable, "-c", taker, job.id], timeout=60, check=False)
    assert killed.returncode == -9
    assert jobs.load(job.id).state["state"] == "starting"
    assert supervisor.sweep()["failed"] == [job.id]
    state = jobs.load(job.id).state
    assert state["state"] == "failed" and state["pid"] is None


def test_a_starting_job_no_runner_took_yet_stays_starting_until_its_grace_period_ends(
        project: Path) -> None:
    job = made_job(project)
    assert supervisor.sweep() == {"live": [job.id], "failed": []}
    assert jobs.load(job.id).state["state"] == "starting"
    later = job.state["spawnedAt"] / 1000 + jobs.START_GRACE_S
    settled, marked = supervisor.settle(jobs.load(job.id), now=later)
    assert marked and settled.state["state"] == "failed"


def test_a_job_whose_runner_holds_its_lock_is_left_as_it_is(
        project: Path, ending_runner: tuple[jobs.Job, Callable[[], None]]) -> None:
    job, _ = ending_runner
    assert supervisor.sweep() == {"live": [job.id], "failed": []}
    assert supervisor.reap(job) is None
    assert jobs.load(job.id).state["state"] == "working"
