"""Background agents (DESIGN.md §6): start a job, list them, talk to one, stop, respawn, remove.

A job is made here (jobs.py: its folder and state), given its own worktree in a git repository
(worktrees.py), and handed to a runner process of its own (runner.py); the daemon is started
on demand to watch over the runners (supervisor.py). Everything said to a running job goes to
its runner's socket as the protocol of §7: `reply` is a `user_input`, `approve` an `approval`,
`stop` a `shutdown`; `attach` replays the job's events and follows the live ones.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping

from coding_os import jsonwire
from coding_os.jobs import jobs
from coding_os.jobs.jobs import Job, JobError
from coding_os.errors import Conflict, CosError, InvalidInput, NotFound

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import Any

    from coding_os.runtime.foreground import View
    from coding_os.runtime.settings import SessionSettings

__all__ = [
    "PROMPT_MAX", "start_job", "list_jobs", "find_job", "reply", "approve",
    "stop", "respawn",
    "remove", "logs", "attach", "follow", "gc_jobs", "ensure_daemon", "Connection", "spawn",
    "agents", "agents_all_hosts", "attach_view", "JobFeed", "feed", "interrupt", "session_job",
    "bg_run", "ANSWERS",
]

PROMPT_MAX = 1 << 20  # bytes of a first prompt
CONNECT_TIMEOUT_S = 10.0
READY_TIMEOUT_S = 30.0  # for a runner to open its socket
APPROVAL_SETTLE_S = 2.0
# What a line typed at `cos attach` answers an approval request with (True: allow).
ANSWERS = {"allow": True, "y": True, "yes": True, "deny": False, "n": False, "no": False}
DIFF_LINES = 40  # lines of a request's diff `cos attach` shows


def ensure_daemon(env: Mapping[str, str] | None = None, made: Job | None = None) -> None:
    """Start the supervisor unless it runs, without waiting for it; a daemon that cannot start
    is said on stderr, never fatal: the jobs run without it. `made`: the job just made, which
    the supervisor is told of (it then keeps a spare worktree for the job's project, when the
    job has a worktree: jobs/worktrees.py)."""
    import sys

    from coding_os.daemon.client import DaemonError, daemon_dir, request

    try:
        message: dict[str, object] = {"op": "ping"}
        if made is not None:
            message.update(job_made=True, project=made.state.get("project")
                           if made.state.get("worktree") else None)
        if request(daemon_dir(env), message) is None:
            from coding_os.daemon.server import start

            start(env, wait=False)
    except (DaemonError, CosError, OSError) as exc:
        sys.stderr.write(f"cos: the supervisor did not start ({exc}); the job runs without "
                         "it\n")


def _project(cwd: str, env: Mapping[str, str] | None) -> tuple[str, str | None]:
    """The project root of `cwd` and the linked worktree it is in, if any; the project's state
    dir is made and registered on the way when it does not exist yet, as any command's caller
    (state/caller.py) does.

    Raises:
        InvalidInput: `cwd` is in no project (no git repository, no project marker).
        ForeignState: the project's state dir is not this user's.
    """
    import sys

    from coding_os.errors import ForeignState
    from coding_os.git.repo import checkout_root
    from coding_os.state import registry
    from coding_os.state.root import resolve

    resolution = resolve(cwd, os.environ if env is None else env)
    if resolution.rule == "default" and checkout_root(cwd) is None:
        raise InvalidInput(f"{cwd} is in no project (no git repository, no project marker): "
                           "cos bg runs a job in a project; cd into one")
    state_dir, hub = resolution.state_dir, resolution.hub
    ownership = registry.check(state_dir, hub, resolution.project_root)
    if ownership.note is not None:
        sys.stderr.write(f"cos: {ownership.note}\n")
    if ownership.status == "foreign":
        raise ForeignState(f"{state_dir} is not this user's state dir: {ownership.reason}; "
                           "`cos init` moves it aside and starts a fresh one")
    if ownership.status == "absent":
        registry.create(state_dir, hub)
    return resolution.project_root, resolution.worktree


def _on_path(program: str, path: str | None) -> bool:
    """Whether `program` is an executable file, named by a path or found on `path` (as
    shutil.which finds it, without importing shutil)."""
    def runnable(name: str) -> bool:
        return os.path.isfile(name) and os.access(name, os.X_OK)

    if os.sep in program:
        return runnable(program)
    if path == "":
        return False
    dirs = (os.defpath if path is None else path).split(os.pathsep)
    return any(runnable(os.path.join(folder or os.curdir, program)) for folder in dirs)


def _check_program(settings: SessionSettings, env: Mapping[str, str]) -> None:
    if settings.agent not in ("claude", "codex"):
        return
    program = str(settings.options.get("program") or settings.agent)
    if not _on_path(program, env.get("PATH")):
        raise InvalidInput(f"{settings.agent}: program {program!r} not found on PATH")


def start_job(settings: SessionSettings, prompt: str | None, *,
              name: str | None = None, isolation: str = "worktree",
              seed_ref: Mapping[str, Any] | None = None,
              in_worktree: Callable[[str], Mapping[str, Any]] | None = None,
              waiting: bool = False, carry: bool = False, resume_native: str | None = None,
              env: Mapping[str, str] | None = None) -> Job:
    """Make a job running `settings` (in a worktree of its own unless `isolation` is `none`),
    start its runner and the supervisor, and give the job at once. `in_worktree(checkout)`
    gives options the agent needs beside its settings' when it runs in a worktree made from
    `checkout` (the cos hooks a worktree lacks). `waiting`: no prompt; the session starts and
    waits for its first input (cos acp's session/new). A worktree starts from the checkout's
    commit: when the checkout has uncommitted changes, one line on stderr says so, and `carry`
    takes them into the worktree (jobs/carry.py). `resume_native`: the session goes on in that
    session of the agent's own (one made outside cos: Claude Code's `--resume`, Codex's
    `thread/resume`).

    Raises:
        InvalidInput: no prompt (nor command), a prompt over PROMPT_MAX, a bad name or
            isolation, a program not on PATH, a cwd in no project.
        StateIOError, JobError: the job could not be made (nothing of it is left).
    """
    env = dict(os.environ if env is None else env)
    if isolation not in ("worktree", "none"):
        raise InvalidInput("--isolation is worktree or none")
    command = settings.options.get("command")
    if waiting:
        prompt = None
    elif settings.agent == "exec":
        if not isinstance(command, str) or not command.strip():
            raise InvalidInput("cos bg --exec needs a command")
    elif not prompt or not prompt.strip():
        raise InvalidInput("cos bg needs a prompt")
    if prompt is not None and len(prompt.encode("utf-8")) > PROMPT_MAX:
        raise InvalidInput(f"the prompt is {len(prompt.encode('utf-8')) / 1e6:.1f} MB; a job "
                           f"takes at most {PROMPT_MAX >> 20} MB (put the rest in a file and "
                           "name it in the prompt)")
    name = jobs.validate_name(name) if name is not None else jobs.default_name(
        prompt, command if isinstance(command, str) else None)
    _check_program(settings, env)
    cwd = os.path.realpath(settings.cwd)
    project, linked = _project(cwd, env)
    fields: dict[str, Any] = {
        "name": name, "agent": settings.agent, "cwd": cwd, "project": project,
        "worktree": None, "branch": None, "model": settings.model,
        "permission_mode": settings.permission_mode, "options": dict(settings.options),
        "isolation": isolation, "seed_ref": dict(seed_ref) if seed_ref else None}
    if resume_native is not None:
        fields["resume_native"] = resume_native
    if settings.agent == "exec" and not waiting:
        prompt = command if isinstance(command, str) else prompt
        fields["options"] = {key: value for key, value in settings.options.items()
                             if key != "command"}
    job = jobs.new_job(fields, prompt, env)
    try:
        if isolation == "worktree" and linked is None:
            from coding_os.jobs.worktrees import create_worktree, needs_worktree

            if needs_worktree(project):
                # Its files are the spare worktree's, ready at the same commit, or written by
                # the runner (check_out): the command returns at once whatever the size of
                # the tree.
                left = _uncommitted(project, job, carry)
                made = create_worktree(project, job.id, checkout=False, use_spare=True)
                agent_cwd = made.cwd
                changes: dict[str, Any] = {"cwd": agent_cwd, "worktree": made.path,
                                           "branch": made.branch,
                                           "checked_out": made.checked_out}
                if left is not None:
                    changes["carry"] = left[1]
                    _say_uncommitted(made.base, len(left[0]), left[1] is not None)
                if in_worktree is not None:
                    changes["options"] = {**job.state["options"], **in_worktree(project)}
                job = jobs.update(job, **changes)
        job = spawn(job, env)
    except BaseException:
        _discard(job)
        raise
    ensure_daemon(env, job)
    return job


def _uncommitted(project: str, job: Job, carry: bool) -> tuple[list[str], str | None] | None:
    """The checkout's uncommitted paths and, with `carry`, the tree that carries them
    (carry.snapshot); None when it has none.

    Raises:
        GitError: git failed.
    """
    from coding_os.jobs.carry import snapshot, uncommitted

    paths = uncommitted(project)
    if not paths:
        return None
    return paths, snapshot(project, job.folder) if carry else None


def _say_uncommitted(base: str, count: int, carried: bool) -> None:
    """One line on stderr: the job starts from the last commit, and what of the changes."""
    import sys

    changes = f"{count} uncommitted {'path' if count == 1 else 'paths'}"
    if carried:
        sys.stderr.write(f"cos: the job starts from the last commit (HEAD {base[:12]}) with "
                         f"the {changes} of this checkout carried into its worktree\n")
    else:
        sys.stderr.write(f"cos: the job starts from the last commit (HEAD {base[:12]}); the "
                         f"{changes} of this checkout stay here (cos bg --carry takes them "
                         "along)\n")


def spawn(job: Job, env: Mapping[str, str] | None = None) -> Job:
    """Start the job's runner in a process of its own (a new session, stdin closed, output to
    the job's stderr.log); the job's state says `starting` until the runner takes over. The
    supervisor's spare runner takes the job when one waits (jobs/spare.py); otherwise a shell
    starts the runner in the background and exits, so the runner is nobody's child: no caller (a
    command, `cos web`) has to wait for it, and none is left holding a zombie.

    Raises:
        StateIOError: the state could not be written. JobError: the runner could not be run.
    """
    from coding_os.jobs.spare import hand_off

    env = dict(os.environ if env is None else env)
    env["COS_JOB_DIR"] = job.path(jobs.TMP)
    env["COS_JOB_ID"] = job.id
    if job.state.get("state") != "starting" or job.state.get("pid") is not None or (
            job.state.get("spawnedAt") is None):  # a new job is written starting already
        job = jobs.update(job, state="starting", status=None, waitingFor=None, pid=None,
                          spawnedAt=int(time.time() * 1000))
    if hand_off(job, env):  # the supervisor's spare runner took it: it runs the job now
        return job
    import subprocess
    import sys

    log = os.open(job.path(jobs.STDERR), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                  0o600)
    try:
        started = subprocess.run(
            ["/bin/sh", "-c", '"$0" -m coding_os.jobs.runner "$1" &', sys.executable, job.id],
            cwd=job.folder, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True, check=False, timeout=30)
        if started.returncode != 0:
            raise OSError(f"/bin/sh exited {started.returncode}")
    except (OSError, subprocess.TimeoutExpired) as exc:
        jobs.update(job, state="failed", error=f"the runner could not start: {exc}")
        raise jobs.JobError(f"job {job.id}: the runner could not start: {exc}") from None
    finally:
        os.close(log)
    return job


def _discard(job: Job) -> None:
    """Remove a job that never ran (its worktree too, which holds nothing yet)."""
    import shutil

    worktree, branch = job.state.get("worktree"), job.state.get("branch")
    if isinstance(worktree, str) and isinstance(branch, str):
        from coding_os.jobs.worktrees import remove_worktree

        try:
            remove_worktree(str(job.state["project"]), worktree, branch, force=True)
        except CosError:
            pass
    shutil.rmtree(job.folder, ignore_errors=True)


def list_jobs(*, every_project: bool = False, cwd: str | None = None,
              env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The rows of `cos agents`: the jobs of the project of `cwd`, or of every project. A job
    whose runner died is marked failed on the way, as the supervisor does (supervisor.settle)."""
    from coding_os.jobs import roster

    from coding_os.jobs.supervisor import settle

    found = [settle(job)[0] for job in roster.current(env)]
    if not every_project:
        from coding_os.state.caller import Caller

        project = Caller(env, os.path.realpath(cwd or os.getcwd())).resolution.project_root
        found = [job for job in found if job.state.get("project") == project]
    return [jobs.row(job) for job in found]


def find_job(key: str, env: Mapping[str, str] | None = None) -> Job:
    """The job `key` names (id, unique prefix or name); as jobs.resolve."""
    from coding_os.jobs import roster

    return jobs.resolve(key, env, roster.current(env))


# -- talking to a job's runner ----------------------------------------------------------------


class Connection:
    """A client of a job's runner: ops out, events in, one JSON object a line."""

    def __init__(self, job: Job, timeout: float | None = CONNECT_TIMEOUT_S) -> None:
        from coding_os.daemon import sockets

        self.job = job
        try:
            self.sock = sockets.connect(jobs.socket_path(job), timeout)
        except OSError:
            raise Conflict(f"job {job.id} ({job.name}) is {job.state.get('state')}: its runner "
                           f"is not running (cos respawn {job.id} resumes it)") from None
        self.file = self.sock.makefile("rwb")

    def send(self, op: Mapping[str, Any], submission: str | None = None) -> None:
        line = json.dumps({"id": submission, "op": op}, ensure_ascii=True).encode() + b"\n"
        self.file.write(line)
        self.file.flush()

    def events(self) -> Iterator[dict[str, Any]]:
        yield from jsonwire.objects(self.file)

    def lines(self) -> Iterator[list[bytes]]:
        """The runner's lines as they come, unparsed (each one JSON object, ASCII), in batches:
        every whole line one read of the socket brought."""
        pending = b""
        while True:
            chunk = self.file.read1(1 << 16)
            if not chunk:
                return
            pending += chunk
            whole = pending.rfind(b"\n") + 1
            if whole:
                lines = [line for line in pending[:whole].split(b"\n") if line.strip()]
                pending = pending[whole:]
                if lines:
                    yield lines

    def close(self) -> None:
        try:
            self.file.close()
        finally:
            self.sock.close()


def _running(key: str, env: Mapping[str, str] | None) -> Job:
    job = find_job(key, env)
    if job.state.get("pid") is None or not jobs.runner_alive(job):
        raise Conflict(f"job {job.id} ({job.name}) is {job.state.get('state')}: its runner is "
                       f"not running (cos respawn {job.id} resumes it)")
    return job


def _request(job: Job, op: Mapping[str, Any], settle: Callable[[dict[str, Any], str], bool],
             timeout: float = CONNECT_TIMEOUT_S) -> list[dict[str, Any]]:
    """Send `op` and read the live events that follow, until `settle(event, submission)` says
    enough, the runner refuses the op, or `timeout` passes without an event.

    Raises:
        InvalidInput: the runner refused the op (the message of its error).
    """
    from coding_os.runtime import wire

    submission = f"cli-{os.getpid()}-{time.monotonic_ns()}"
    connection = Connection(job, timeout)
    seen: list[dict[str, Any]] = []
    try:
        connection.send({"type": wire.RESUME, "session": job.state["cos_session"],
                         "last_seq": job.state.get("last_seq") or 0})
        connection.send(op, submission)
        for event in connection.events():
            msg = event.get("msg") or {}
            if event.get("seq") is None and msg.get("type") == wire.ERROR:
                raise InvalidInput(f"job {job.id}: {msg.get('message')}")
            if event.get("seq", 0) <= (job.state.get("last_seq") or 0):
                continue
            seen.append(event)
            if settle(event, submission):
                break
    except TimeoutError:
        pass
    finally:
        connection.close()
    return seen


def _wait_session(job: Job, timeout: float = READY_TIMEOUT_S) -> Job:
    """The job once its runner has named its session and opened its socket."""
    deadline = time.monotonic() + timeout
    while True:
        job = jobs.reload(job)
        if job.state.get("cos_session") and os.path.exists(jobs.socket_path(job)):
            return job
        if job.state.get("state") in ("failed", "stopped") or time.monotonic() > deadline:
            return job
        time.sleep(0.05)


def reply(key: str, text: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Send `text` to the job as the user's next input; the task it started."""
    if not text.strip():
        raise InvalidInput("cos reply needs a text")
    if len(text.encode("utf-8")) > PROMPT_MAX:
        raise InvalidInput(f"the text is over {PROMPT_MAX >> 20} MB")
    from coding_os.runtime import wire

    job = _wait_session(_running(key, env))
    seen = _request(job, {"type": wire.USER_INPUT, "text": text},
                    lambda event, mine: event.get("id") == mine and (
                        event.get("msg") or {}).get("type") in (wire.TASK_STARTED, wire.ERROR))
    started = [event for event in seen
               if (event.get("msg") or {}).get("type") == wire.TASK_STARTED]
    return {"id": job.id, "name": job.name,
            "task": started[-1]["msg"]["task"] if started else None}


def approve(key: str, allow: bool = True, request: str | None = None,
            env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Answer the job's waiting approval request (the oldest, or `request`).

    Raises:
        Conflict: nothing waits for an approval.
    """
    from coding_os.runtime import wire
    from coding_os.runtime.events import read_since

    job = _wait_session(_running(key, env))
    events_log = job.state.get("events")
    if request is None:
        if not isinstance(events_log, str):
            raise Conflict(f"job {job.id} waits for no approval")
        asked: list[Any] = []
        for event in read_since(events_log, 0).events:
            msg = event["msg"]
            if msg["type"] == wire.APPROVAL_REQUEST:
                asked.append(msg.get("request"))
            elif msg["type"] in (wire.TASK_STARTED, *wire.TASK_ENDS):
                asked.clear()
            elif msg["type"] in (wire.TOOL_CALL, wire.TOOL_RESULT, wire.AGENT_MESSAGE) and asked:
                asked.clear()
        if job.state.get("state") != "blocked" or not asked:
            raise Conflict(f"job {job.id} ({job.name}) waits for no approval")
        chosen: Any = asked[0]
    else:
        chosen = request
    decision = wire.ALLOW if allow else wire.DENY
    # The answer makes no event of its own: the agent going on (or the error of a request
    # nobody waits for) comes back soon, and a short wait without either is taken as done.
    _request(job, {"type": wire.APPROVAL, "request": chosen, "decision": decision},
             lambda event, mine: True, timeout=APPROVAL_SETTLE_S)
    return {"id": job.id, "name": job.name, "request": chosen, "decision": decision}


def stop(key: str, env: Mapping[str, str] | None = None, timeout: float = 30.0
         ) -> dict[str, Any]:
    """Interrupt the job's task and end its runner; the job is `stopped` and never restarted
    by the supervisor. A job whose runner is gone is marked stopped as it is."""
    job = find_job(key, env)
    if job.state.get("state") == "starting":
        # Its runner is on its way: marked stopped under the runner's lock, the runner that
        # takes the lock next exits at once; one that holds it already is stopped below.
        marked = jobs.update_unless_running(job, state="stopped", status=None,
                                            waitingFor=None, pid=None)
        if marked is not None:
            return jobs.row(marked, alive=False)
    if jobs.runner_alive(job):
        job = _wait_session(job)
        try:
            connection = Connection(job)
        except Conflict:
            connection = None
        if connection is not None:
            from coding_os.runtime import wire

            try:
                connection.send({"type": wire.SHUTDOWN}, "cli-stop")
            finally:
                connection.close()
        deadline = time.monotonic() + timeout
        while jobs.runner_alive(job) and time.monotonic() < deadline:
            time.sleep(0.05)
        if jobs.runner_alive(job):
            pid = job.state.get("pid")
            if isinstance(pid, int):
                import signal

                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass
    from coding_os.jobs.supervisor import end_processes

    def ended(now: Job) -> Job:  # its runner gone: nothing it started is left
        end_processes(now)
        return _mark_stopped(now)

    stopped = jobs.unless_running(job, ended)
    if stopped is None:  # its runner is still ending (SIGTERM): it writes `stopped` too
        stopped = _mark_stopped(jobs.reload(job))
    return jobs.row(stopped, alive=False)


def _mark_stopped(job: Job) -> Job:
    if job.state.get("state") == "stopped":
        return job
    return jobs.update(job, state="stopped", status=None, waitingFor=None, pid=None)


def respawn(key: str | None, *, every: bool = False, env: Mapping[str, str] | None = None
            ) -> list[dict[str, Any]]:
    """Start again the runner of a job whose runner died (`failed`) or was stopped: the same
    job id, worktree and cos session; the native session is resumed (Claude Code `--resume`,
    Codex `thread/resume`) for the next input. `every`: each failed job of every project.

    Raises:
        Conflict: the job's runner is alive (one process per job, never two).
    """
    from coding_os.jobs import roster

    from coding_os.jobs.supervisor import reap

    # A command that exited non-zero failed too, but ran to its end: `every` leaves it be.
    chosen = ([job for job in roster.current(env) if job.state.get("state") == "failed"
               and job.state.get("exit_code") is None] if every else [find_job(key or "", env)])
    out = []
    for job in chosen:
        reaped = reap(job)  # marked failed if its runner died; nothing of a runner left
        if reaped is None:
            if every:
                continue
            raise Conflict(f"job {job.id} ({job.name}) is running (pid "
                           f"{job.state.get('pid')}): one runner per job")
        job = reaped
        worktree = job.state.get("worktree")
        if isinstance(worktree, str) and not os.path.isdir(worktree):
            raise NotFound(f"job {job.id}: its worktree {worktree} is gone")
        job = spawn(job, env)
        out.append(jobs.row(job, alive=False))
    if out:
        ensure_daemon(env)
    return out


def remove(key: str, force: bool = False, env: Mapping[str, str] | None = None
           ) -> dict[str, Any]:
    """Remove a job that does not run: its worktree and branch (refused when that would lose
    uncommitted changes or commits no other branch holds, unless `force`) and its folder. A
    finished job whose runner waits for the next input (`done`, idle) is stopped first. The
    session's transcript and events log are kept.

    Raises:
        Conflict: the job runs a task, waits for an approval or is starting (stop it first).
            WorkAtRisk: its worktree holds work.
    """
    import shutil

    from coding_os.jobs import roster

    from coding_os.jobs.supervisor import reap

    job = find_job(key, env)
    reaped = reap(job)  # nothing its runner started is left running in what is removed
    if reaped is None and _finished(jobs.reload(job)):
        _refuse_work_at_risk(job, force)  # before its runner is ended: a refusal changes nothing
        stop(job.id, env)  # its runner only waits for the next input: ended first
        reaped = reap(job)
    if reaped is None or reaped.state.get("state") == "starting":
        raise Conflict(f"job {job.id} ({job.name}) is running: cos stop {job.id} first")
    job = reaped
    removed: dict[str, Any] = {"id": job.id, "name": job.name, "worktree": None}
    worktree, branch = job.state.get("worktree"), job.state.get("branch")
    if isinstance(worktree, str) and isinstance(branch, str):
        from coding_os.jobs.worktrees import remove_worktree

        removed["worktree"] = remove_worktree(str(job.state["project"]), worktree, branch,
                                              force=force)
        removed["checkpoints_dropped"] = _drop_checkpoints(str(job.state["project"]),
                                                           worktree, env)
    shutil.rmtree(job.folder)
    roster.current(env)
    removed["kept"] = [path for path in (job.state.get("events"),) if isinstance(path, str)]
    return removed


def _finished(job: Job) -> bool:
    """Whether the job's last task ended and its runner only waits for the next input (`done`
    and idle): nothing of it runs that removing it would cut short."""
    return job.state.get("state") == "done" and job.state.get("status") == "idle"


def _refuse_work_at_risk(job: Job, force: bool) -> None:
    """Raise as remove_worktree would when removing the job's worktree loses work.

    Raises:
        WorkAtRisk: it holds work and not `force`.
    """
    worktree, branch = job.state.get("worktree"), job.state.get("branch")
    if force or not isinstance(worktree, str) or not isinstance(branch, str):
        return
    from coding_os.jobs.worktrees import WorkAtRisk, inspect_worktree

    status = inspect_worktree(worktree, branch)
    if status.at_risk:
        raise WorkAtRisk(f"{worktree} holds work that removing it would lose: "
                         f"{status.loss()}; nothing was removed (commit and push or merge it, "
                         "or --force)")


def _drop_checkpoints(project: str, worktree: str, env: Mapping[str, str] | None) -> list[str]:
    """Drop the checkpoints taken in a job's worktree as it goes (checkpoints/upkeep.py): none
    is left that names a tree no more. A store that cannot be written keeps them, and `cos gc`
    drops them later (they are then checkpoints of a worktree that is gone)."""
    from coding_os.checkpoints.upkeep import drop_worktree
    from coding_os.state.root import resolve
    from coding_os.state.tiers import Tiers

    try:
        state_dir = resolve(project, os.environ if env is None else env).state_dir
        return drop_worktree(Tiers(state_dir), os.path.realpath(worktree))
    except (CosError, OSError):
        return []


def logs(key: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The job's events so far, and its runner's stderr."""
    from coding_os.runtime.events import read_since

    job = find_job(key, env)
    path = job.state.get("events")
    events = read_since(path, 0).events if isinstance(path, str) else []
    from coding_os import durable

    stderr = durable.read_regular(job.path(jobs.STDERR), 1 << 20)
    return {"job": jobs.row(job), "events": events,
            "stderr": stderr.decode("utf-8", "replace") if stderr else ""}


def attach(key: str, since: int = 0, env: Mapping[str, str] | None = None
           ) -> tuple[Job, Connection | None, list[dict[str, Any]]]:
    """A connection to the job that replays its events after `since` then follows the live
    ones; for a job whose runner is gone, no connection and its stored events.

    Raises:
        InvalidInput: `since` beyond the job's last event.
    """
    from coding_os.runtime.events import read_since

    job = find_job(key, env)
    if job.state.get("state") == "starting":  # just made: its runner is on its way
        job = _wait_session(job)
    path = job.state.get("events")
    if since and isinstance(path, str) and os.path.exists(path):
        from coding_os.runtime.events import last_seq

        end = last_seq(path)
        if since > end:
            raise InvalidInput(f"--since {since} is beyond the end of job {job.id}'s events "
                               f"(its last seq is {end})")
    if job.state.get("pid") is not None and jobs.runner_alive(job):
        job = _wait_session(job)
        try:
            connection = Connection(job, None)
        except Conflict:
            connection = None
        if connection is not None:
            from coding_os.runtime import wire

            connection.send({"type": wire.RESUME, "session": job.state["cos_session"],
                             "last_seq": since}, "attach")
            return job, connection, []
    stored = read_since(path, since).events if isinstance(path, str) else []
    return job, None, stored


def gc_jobs(days: float, dry_run: bool = False, env: Mapping[str, str] | None = None
            ) -> dict[str, Any]:
    """Remove the jobs that ended more than `days` ago with their worktrees, keeping each
    worktree that holds work (and its job), said in `kept`; and the spare worktrees no running
    supervisor keeps (its supervisor was stopped or killed) of the projects that had no job in
    a worktree for the supervisor's keep period, said in `spares` (`kept_spares`: one a job
    or a supervisor holds the lock of, named with why)."""
    from coding_os.jobs import roster

    from coding_os.jobs.worktrees import WorkAtRisk

    now = time.time()
    removed, kept = [], []
    for job in roster.current(env):
        if job.state.get("state") not in ("done", "failed", "stopped") or jobs.runner_alive(job):
            continue
        try:
            updated = os.stat(job.path(jobs.STATE)).st_mtime  # its last change
        except OSError:
            continue
        if now - updated < days * 86400:
            continue
        if dry_run:
            removed.append(job.id)
            continue
        try:
            remove(job.id, env=env)
            removed.append(job.id)
        except WorkAtRisk as exc:
            kept.append({"id": job.id, "why": str(exc)})
        except (JobError, CosError):
            continue
    spares, kept_spares = _gc_spares(now, dry_run, env)
    return {"removed": removed, "kept": kept, "spares": spares, "kept_spares": kept_spares}


def _gc_spares(now: float, dry_run: bool, env: Mapping[str, str] | None
               ) -> tuple[list[str], list[dict[str, str]]]:
    """The spare worktrees gc_jobs removes (or would), and those it keeps because their lock
    is held."""
    from coding_os.daemon import server
    from coding_os.jobs.supervisor import worktree_projects
    from coding_os.jobs.worktrees import (SPARE, WORKTREES_DIR, drop_spare, spare_locked,
                                            spare_owner, spare_projects, worktrees_dir)
    from coding_os.state.root import STATE_DIR_NAME, hub_dir

    candidates = spare_projects(hub_dir(env))
    if not candidates:
        return [], []
    recent = set()
    for project in worktree_projects(now - server.SPARE_KEEP_S, env)[0]:
        try:
            recent.add(os.path.dirname(os.path.dirname(worktrees_dir(project))))
        except CosError:
            continue
    keeper = None  # the pid of the running supervisor: the spares it made are its own
    daemon = server.status(env)
    if daemon.get("running"):
        keeper = daemon.get("pid")
        if keeper is None:  # it holds its lock but does not answer: its info file says
            try:
                with open(os.path.join(str(daemon["dir"]), server.INFO), "rb") as f:
                    keeper = json.loads(f.read(4096)).get("pid")
            except (OSError, ValueError, AttributeError):
                keeper = -1  # unknown: every spare with an owner counts as its
    removed: list[str] = []
    kept: list[dict[str, str]] = []
    for top in candidates:
        owner = spare_owner(top)
        if top in recent or (owner is not None and keeper in (owner, -1)):
            continue
        path = os.path.join(top, STATE_DIR_NAME, WORKTREES_DIR, SPARE)
        try:
            if spare_locked(top) or (not dry_run and not drop_spare(top)):
                kept.append({"worktree": path, "why": "its lock is held (a job taking it, or "
                                                      "a supervisor making it)"})
            else:
                removed.append(path)
        except CosError as exc:
            kept.append({"worktree": path, "why": str(exc)})
    return removed, kept


def follow(connection: Connection, show: Callable[[dict[str, Any]], None], *,
           interactive: bool = False, lines: Callable[[], str | None] | None = None) -> str:
    """Show the connection's events until the runner ends or the user detaches; how it ended:
    `ended` (the runner closed) or `detached`. `interactive`: each line `lines` gives is sent
    as a reply, or, while an approval request waits, `allow` (`y`) or `deny` (`n`) answers the
    oldest one; Ctrl-C interrupts the task, the end of `lines` (Ctrl-D) detaches. A runner
    that dropped this client (it fell runner.CLIENT_BUFFER_MAX behind) is asked again for what
    came after the last event shown, while it serves."""
    import signal
    import socket
    import threading

    from coding_os.runtime import wire

    sending = threading.Lock()
    detached = threading.Event()
    current = [connection]
    asked: list[Any] = []  # the approval requests not answered yet, oldest first

    def send(op: Mapping[str, Any]) -> None:
        with sending:
            try:
                current[0].send(op, f"attach-{os.getpid()}")
            except OSError:
                pass

    def read_lines() -> None:
        assert lines is not None
        while True:
            line = lines()
            if line is None:
                detached.set()
                with sending:
                    try:
                        current[0].sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                return
            answer = ANSWERS.get(line.strip().lower())
            if answer is not None and asked:
                send({"type": wire.APPROVAL, "request": asked.pop(0),
                      "decision": wire.ALLOW if answer else wire.DENY})
            elif line.strip():
                send({"type": wire.USER_INPUT, "text": line})

    previous = None
    if interactive and lines is not None:
        threading.Thread(target=read_lines, daemon=True).start()
        previous = signal.signal(signal.SIGINT, lambda *_: send({"type": wire.INTERRUPT}))
    try:
        while True:
            seen = None
            try:
                for event in current[0].events():
                    _track_requests(asked, event)
                    show(event)
                    if isinstance(event.get("seq"), int):
                        seen = event["seq"]
            except OSError:
                pass
            if seen is None or detached.is_set():
                break  # nothing came: the runner ended (or refused), not a client behind
            again = _resume(current[0].job, seen)
            if again is None:
                break
            with sending:
                current[0].close()
                current[0] = again
            if detached.is_set():
                break
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        current[0].close()
    return "detached" if detached.is_set() else "ended"


def _track_requests(asked: list[Any], event: Mapping[str, Any]) -> None:
    """Keep in `asked` the approval requests not answered yet, as the runner does: a request
    waits until the agent goes on (a tool call or result, a message) or its task ends."""
    from coding_os.runtime import wire

    msg = event.get("msg") or {}
    kind = msg.get("type")
    if kind == wire.APPROVAL_REQUEST and event.get("seq") is not None:
        if msg.get("request") not in asked:
            asked.append(msg.get("request"))
    elif kind in (wire.TASK_STARTED, *wire.TASK_ENDS, wire.TOOL_CALL, wire.TOOL_RESULT,
                  wire.AGENT_MESSAGE):
        asked.clear()


def _resume(job: Job, after: int) -> Connection | None:
    """A new connection to the job's runner that sends the events after seq `after`, then the
    live ones; None when the runner no longer serves."""
    job = jobs.reload(job)
    if not job.state.get("cos_session"):
        return None
    try:
        connection = Connection(job, None)
    except Conflict:
        return None
    from coding_os.runtime import wire

    try:
        connection.send({"type": wire.RESUME, "session": job.state["cos_session"],
                         "last_seq": after}, "attach")
    except OSError:
        connection.close()
        return None
    return connection


# -- what the interfaces ask of jobs: listings, a view attached, a feed, an interrupt ----------


def bg_run(prompt: str | None, checkpoint: Callable[[str], str], *, agent: str | None = None,
           command: str | None = None, recipe: str | None = None,
           params: list[str] | None = None, model: str | None = None,
           permission_mode: str | None = None, cwd: str | None = None
           ) -> tuple[SessionSettings, str | None, dict[str, object] | None]:
    """What `cos bg` runs: `command` (the exec agent), or the prompt `recipe` renders with
    `params` (`KEY=VALUE` each; `checkpoint` takes the seed's checkpoint, recipes.prepare_run),
    or `prompt` with `agent` (default claude); the session settings, the prompt and the seed_ref.

    Raises:
        InvalidInput: a bad agent, a prompt with a recipe, the exec agent without `command`.
        RecipeError, GitError, StateIOError: as recipes.prepare_run.
    """
    from dataclasses import replace

    from coding_os.runtime.agents import settings_for

    seed_ref = None
    if command is not None:
        settings = settings_for("exec", cwd)
        settings = replace(settings, options={**settings.options, "command": command})
    elif recipe is not None:
        if prompt:
            raise InvalidInput("--recipe gives the prompt: give no PROMPT with it")
        from coding_os.jobs.recipes import parse_params, prepare_run

        seeded = prepare_run(recipe, parse_params(tuple(params or ())), checkpoint, agent=agent,
                             model=model, cwd=cwd)
        settings, prompt, seed_ref = seeded.settings, seeded.text, seeded.seed_ref
    else:
        if (agent or "").partition(":")[0] == "exec":
            raise InvalidInput("cos bg runs a command with --exec CMD")
        settings = settings_for(agent or "claude", cwd, model=model)
    if permission_mode is not None:
        settings = replace(settings, permission_mode=permission_mode)
    return settings, prompt, seed_ref


def agents(every_project: bool = False, cwd: str | None = None,
           env: Mapping[str, str] | None = None, publish: bool = False) -> list[dict[str, Any]]:
    """The rows of the jobs of the project of `cwd` (or of every project), the daemon started
    first; `publish`: also publish this host's rows to a shared storage (for the other hosts'
    `cos agents --all-hosts`; a failure to is no failure of the listing)."""
    from coding_os.jobs import roster

    ensure_daemon(env)
    rows = list_jobs(every_project=every_project, cwd=cwd, env=env)
    if publish:
        try:
            roster.publish(env)
        except CosError:
            pass
    return rows


def agents_all_hosts(project: str | None, cwd: str | None = None,
                     env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """This host's rows as `agents` gives them, published, then the rows the other hosts
    published to the shared storage, of the repository whose checkout is `project` (None:
    of every project), each with its `host`.

    Raises:
        StorageError: the shared storage fails.
    """
    from coding_os.hosts.identity import project_keys, this_host
    from coding_os.jobs import roster

    host = this_host(env)
    ensure_daemon(env)
    rows = list_jobs(every_project=project is None, cwd=cwd, env=env)
    roster.publish(env)
    keys = [] if project is None else project_keys(project)
    return [{**row, "host": host} for row in rows] + roster.published(
        env, project_keys=keys, every_project=project is None)


def attach_view(key: str, view: View, *, since: int = 0, interactive: bool = False,
                env: Mapping[str, str] | None = None) -> int:
    """Show job `key`'s events after `since` through `view`, then the live ones until its
    runner ends (or, `interactive`, Ctrl-D detaches: lines read from stdin are replies, Ctrl-C
    interrupts). 0; 1 when the job ended failed.

    Raises:
        NotFound, Ambiguous: as jobs.resolve. InvalidInput: `since` beyond the end.
    """
    found, connection, stored = attach(key, since, env)
    if connection is None:
        for event in stored:
            view.show(event)
        view.note(f"job {found.id} ({found.name}) is {found.state.get('state')}: its runner "
                  "does not run")
    else:
        from coding_os.runtime import wire

        def show(event: dict[str, Any]) -> None:
            view.show(event)
            msg = event.get("msg") or {}
            if msg.get("type") == wire.APPROVAL_REQUEST and event.get("seq") is not None:
                _say_request(view, found, msg, interactive)

        how = follow(connection, show, interactive=interactive,
                     lines=_stdin_line if interactive else None)
        if how == "detached":
            view.note(f"detached from job {found.id}; it goes on (cos attach {found.id})")
            return 0
    state = jobs.reload(found).state.get("state")
    return 1 if state == "failed" else 0


def _say_request(view: View, job: Job, msg: Mapping[str, Any], interactive: bool) -> None:
    """Tell the attached user what the job asks (approvals.pending) and how to answer it."""
    from coding_os.jobs.approvals import pending, summary

    asked = pending(dict(msg))
    how = ("type allow or deny" if interactive
           else f"cos approve {job.id} [--deny] --request {asked['request']}")
    view.note(f"job {job.id} asks to run {summary(asked)}: {how}")
    diff = str(asked.get("diff") or "").splitlines()
    for line in diff[:DIFF_LINES]:
        view.note(f"  {line}")
    if len(diff) > DIFF_LINES:
        view.note(f"  … {len(diff) - DIFF_LINES} more lines (cos agents --json has them)")


def _stdin_line() -> str | None:
    """The next line typed, None at the end of stdin."""
    import sys

    line = sys.stdin.readline()
    return line.rstrip("\n") if line else None


class JobFeed:
    """A job's events after a seq: through its runner's connection (the stored ones, then the
    live ones, with no gap and no duplicate: the protocol's `resume`) while the runner runs,
    else those stored. `close` may be called from another thread to end a blocked read."""

    def __init__(self, job: dict[str, Any], connection: Connection | None,
                 stored: list[dict[str, Any]]) -> None:
        self.job = job
        self.live = connection is not None
        self._connection = connection
        self._stored = stored

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._connection is None:
            yield from self._stored
            return
        try:
            for event in self._connection.events():
                if isinstance(event.get("seq"), int):
                    yield event
        except (OSError, ValueError):
            return  # closed under the read, or the runner went away

    def runner_socket(self) -> socket.socket | None:
        """The runner connection's socket, for a relay that waits on it in an event loop
        (cos web's SSE): the runner's JSON lines, one event each, `seq` null on a line for this
        client only; None when the runner does not run (then the feed is the stored events).
        `close` closes it."""
        return None if self._connection is None else self._connection.sock

    def close(self) -> None:
        """End the feed (a blocked read returns)."""
        import socket

        if self._connection is None:
            return
        try:
            self._connection.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._connection.close()
        except (OSError, ValueError):
            pass


def feed(key: str, since: int = 0, env: Mapping[str, str] | None = None) -> JobFeed:
    """The feed of job `key`'s events after seq `since` (see `JobFeed`).

    Raises:
        NotFound, Ambiguous: as jobs.resolve. InvalidInput: `since` beyond the end.
    """
    found, connection, stored = attach(key, since, env)
    return JobFeed(jobs.row(found), connection, stored)


def interrupt(key: str, env: Mapping[str, str] | None = None) -> dict[str, object]:
    """Interrupt job `key`'s running task (`turn_aborted` `interrupted`); the job goes on.

    Raises:
        NotFound, Ambiguous: as jobs.resolve. Conflict: its runner does not run.
        InvalidInput: the runner refused (no task runs).
    """
    from coding_os.runtime import wire
    from coding_os.runtime.events import last_seq

    found = find_job(key, env)
    if found.state.get("pid") is None or not jobs.runner_alive(found):
        raise Conflict(f"job {found.id} ({found.name}) is {found.state.get('state')}: its "
                       f"runner is not running")
    path = found.state.get("events")
    seq = last_seq(path) if isinstance(path, str) and os.path.exists(path) else 0
    connection = Connection(found, CONNECT_TIMEOUT_S)
    aborted = None
    try:
        if found.state.get("cos_session"):
            connection.send({"type": wire.RESUME, "session": found.state["cos_session"],
                             "last_seq": seq})
        connection.send({"type": wire.INTERRUPT}, "web-interrupt")
        for event in connection.events():
            msg = event.get("msg") or {}
            if event.get("seq") is None and msg.get("type") == wire.ERROR:
                raise InvalidInput(f"job {found.id}: {msg.get('message')}")
            if msg.get("type") == wire.TURN_ABORTED:
                aborted = msg.get("task")
                break
    except TimeoutError:
        pass
    finally:
        connection.close()
    return {"id": found.id, "name": found.name, "task": aborted}


def session_job(session: str, env: Mapping[str, str] | None = None,
                native_id: str | None = None) -> dict[str, Any] | None:
    """The row of the background job whose session is `session`, or, given `native_id`, of
    the newest job that went on in that session of the agent's own (start_job's
    `resume_native`); None when there is none."""
    from coding_os.jobs import roster

    found = None
    for job in roster.current(env):
        if job.state.get("cos_session") == session:
            return jobs.row(job)
        if native_id is not None and job.state.get("resume_native") == native_id:
            found = job
    return jobs.row(found) if found is not None else None
