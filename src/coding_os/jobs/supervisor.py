"""The supervisor's part of the daemon (DESIGN.md §6): it tells which jobs' runners died.

Runners do not depend on the daemon: each holds its job's lock and writes its job's state. The
daemon, on start and every SWEEP_S after, adopts the jobs whose runners live (it only watches
them: a runner is never its child to wait for) and marks `failed`, with the last seq of its
events log, every job whose runner ended without saying so (killed), ending what the runner had
started (runtime/children.py). It restarts nothing: a failed job comes back by `cos respawn`
only, and a stopped one never by itself. `cos agents`, `cos respawn`, `cos stop` and `cos rm`
tell the same way (settle, reap).

That a runner died is decided holding its lock, on its state read under it (jobs.unless_running):
a runner writes its last state before it lets go of its lock, so a job read a moment before its
runner ended is never taken for one whose runner was killed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from coding_os.jobs import jobs, roster
from coding_os.errors import CosError, StateIOError

__all__ = ["SWEEP_S", "STARTING_S", "sweep", "settle", "reap", "mark_failed",
           "end_processes", "worktree_projects", "agent_starting"]

SWEEP_S = 2.0
STARTING_S = 10.0  # a job made longer ago than this is no longer starting, whatever it says


def sweep(env: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """Mark failed the jobs whose runners died; the ids of the jobs alive and of those marked."""
    live: list[str] = []
    failed: list[str] = []
    for job in roster.current(env):
        job, marked = settle(job)
        if marked:
            failed.append(job.id)
        elif job.state.get("state") not in ("failed", "stopped") and (
                job.state.get("pid") is not None or job.state.get("state") == "starting"):
            live.append(job.id)
    return {"live": live, "failed": failed}


def settle(job: jobs.Job, now: float | None = None) -> tuple[jobs.Job, bool]:
    """The job as it stands, and whether it was just marked failed: a job whose state (however
    old) says a runner runs or takes it is looked at again holding its runner lock, and marked
    failed when that runner died (jobs.runner_died). A job whose runner holds its lock, or
    whose lock cannot be opened (its folder removed meanwhile), is given as it is.

    Raises:
        StateIOError: the failure could not be written.
    """
    if not jobs.may_have_died(job):
        return job, False
    marked = False

    def decide(current: jobs.Job) -> jobs.Job:
        nonlocal marked
        if not jobs.runner_died(current, now):
            return current
        marked = True
        return mark_failed(current)

    try:
        found = jobs.unless_running(job, decide)
    except StateIOError:
        if marked:
            raise
        return job, False
    return (job, False) if found is None else (found, marked)


def reap(job: jobs.Job) -> jobs.Job | None:
    """The job as it stands once nothing of a runner is left: marked failed if its runner died,
    and every process its runner started ended (end_processes), holding its lock; None when a
    runner holds it (it runs).

    Raises:
        StateIOError: the lock cannot be opened, or the failure written.
    """
    def decide(current: jobs.Job) -> jobs.Job:
        if jobs.runner_died(current):
            return mark_failed(current)
        end_processes(current)
        return current

    return jobs.unless_running(job, decide)


def mark_failed(job: jobs.Job) -> jobs.Job:
    """Record that the job's runner died: `failed`, with the last seq its events log holds; what
    the runner started is ended first (end_processes). Called holding the job's runner lock
    (jobs.unless_running), the job read under it.

    Raises:
        StateIOError: it could not be written.
    """
    from coding_os.runtime.events import last_seq

    end_processes(job)
    changes: dict[str, object] = {"state": "failed", "status": None, "waitingFor": None,
                                  "pid": None, "error": "its runner ended without a word "
                                                        "(killed); cos respawn resumes it"}
    events = job.state.get("events")
    if isinstance(events, str) and os.path.isabs(events):
        try:
            changes["last_seq"] = last_seq(events)
        except (CosError, OSError):
            pass
    return jobs.update(job, **changes)


def end_processes(job: jobs.Job) -> list[int]:
    """Kill every process the job's runners started that is still there (its agent, its
    command and what they started in their sessions: runtime/children.py); the pids. Called
    holding the job's runner lock, so that no runner of it runs."""
    from coding_os.runtime.children import end

    return end(job.path(jobs.SESSIONS))


def worktree_projects(since: float, env: Mapping[str, str] | None = None
                      ) -> tuple[dict[str, float], float]:
    """The projects of the jobs made in a worktree of their own since `since` (Unix seconds),
    each with when its newest such job was made, and when the newest job of all was made (0
    when there is none)."""
    projects: dict[str, float] = {}
    newest = 0.0
    for job in roster.current(env):
        made = (job.state.get("startedAt") or 0) / 1000
        newest = max(newest, made)
        project = job.state.get("project")
        if made >= since and job.state.get("worktree") and isinstance(project, str):
            projects[project] = max(projects.get(project, 0.0), made)
    return projects, newest


def agent_starting(env: Mapping[str, str] | None = None) -> bool:
    """Whether a job made within STARTING_S is still starting: its runner not yet running, or
    its Claude Code or Codex not yet initialised (no native session id) or not yet answering
    (nothing in its events log after the prompt): the time the supervisor's own work (a spare
    runner, a spare worktree) waits out."""
    import time

    now = time.time()
    for job in roster.current(env):
        state = job.state
        if now - (state.get("startedAt") or 0) / 1000 > STARTING_S:
            continue
        if state.get("state") == "starting":
            return True
        if state.get("state") == "working" and state.get("agent") in ("claude", "codex") and (
                not state.get("sessionId") or not _answered(state.get("events"))):
            return True
    return False


ANSWER_READ = 1 << 18  # bytes of an events log looked at (a longer one has answered)


def _answered(events: object) -> bool:
    """Whether the events log `events` holds an answer of the agent: an event that shows it at
    work on its first prompt."""
    from coding_os import jsonwire
    from coding_os.runtime import wire

    answers = (wire.AGENT_MESSAGE, wire.TOOL_CALL, wire.APPROVAL_REQUEST, wire.TASK_COMPLETE,
               wire.TURN_ABORTED, wire.ERROR)

    if not isinstance(events, str) or not os.path.isabs(events):
        return False
    try:
        with open(events, "rb") as f:
            data = f.read(ANSWER_READ + 1)
    except OSError:
        return False
    if len(data) > ANSWER_READ:
        return True
    for line in data.split(b"\n"):
        try:
            event = jsonwire.loads(line) if line.strip() else None
        except ValueError:
            continue
        msg = event.get("msg") if isinstance(event, dict) else None
        if isinstance(msg, dict) and msg.get("type") in answers:
            return True
    return False
