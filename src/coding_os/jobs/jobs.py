"""Background jobs (DESIGN.md §6): one folder per job in the user's hub, `~/.coding-os/jobs/<id>/`.

- `state.json`: the job's row, replaced atomically on every change (`update`). Its fields are
  those of DESIGN.md §6 (id, name, agent, state, status, waitingFor, cwd, worktree, branch, pid,
  sessionId = the native id, cos_session, seed_ref, created/updated, exit_code), the request it
  waits for (approval), and what the runner needs to start or resume the job (project, model,
  permission_mode, options, last_seq, carry: the uncommitted changes it starts with).
- `prompt.txt`: the first prompt (it may be large; the state stays small).
- `runner.lock`: held (flock) by the job's runner for its whole life: the proof that it runs,
  and what keeps a second runner of the same job from starting. The runner that takes it writes
  in it its pid and the `spawnedAt` of the start it took (`note_taker`): a job still `starting`
  whose lock is free but names its start was taken by a runner that is gone.
- `sock`: the runner's socket, serving the protocol of §7 to any number of clients.
- `tmp/`: given to the agent as `COS_JOB_DIR`.
- `stderr.log`: what the runner and its backend wrote to stderr.
- `sessions`: the process sessions the runner's backends started (runtime/children.py), ended
  with the runner.

The session's events log stays where every session's is (`<agent>/events/<sid>.jsonl` in the
project's state dir); `state.json` names it (`events`).

A job folder is only believed when it is a real folder of this user with a job id for a name:
anything else found in `jobs/` (a file another user planted, a symlink) is passed over.
"""

from __future__ import annotations

import errno
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")

from coding_os import durable
from coding_os.errors import Ambiguous, CosError, InvalidInput, NotFound, StateIOError

__all__ = [
    "JOB_ID", "STATES", "Job", "JobError", "jobs_dir", "new_job", "load", "update", "reload",
    "all_jobs", "resolve", "runner_alive", "runner_died", "may_have_died", "unless_running",
    "note_taker", "taker", "row", "socket_path", "validate_name", "default_name",
]

JOB_ID = re.compile(r"\A[0-9a-f]{8}\Z")
STATE, PROMPT, LOCK, SOCKET, TMP, STDERR, SESSIONS = (
    "state.json", "prompt.txt", "runner.lock", "sock", "tmp", "stderr.log", "sessions")
# `starting`: made, its runner not yet running; `working`: a task runs; `blocked`: it waits for
# an approval (`approval` says what it asks: jobs/approvals.py); `done`: its last task ended
# (the runner waits for input, or has ended: a command's job that exited 0); `failed`: the
# runner or its agent died, or a command's job exited non-zero (`exit_code`); `stopped`:
# `cos stop`. A running
# runner's pid is in the state; one that ends writes `pid: null`, and its last state, before it
# lets go of its lock.
STATES = ("starting", "working", "blocked", "done", "failed", "stopped")
START_GRACE_S = 60.0  # a job still `starting` this long after it was made, no runner took: failed
STATE_LIMIT = 1 << 20
NAME_MAX = 80
# The fields `cos agents` shows, in order (a superset of `claude agents --json`).
ROW_FIELDS = ("id", "name", "kind", "state", "status", "waitingFor", "cwd", "startedAt",
              "sessionId", "agent", "worktree", "branch", "pid", "exit_code", "cos_session",
              "project", "last_seq", "approval")


class JobError(CosError):
    """A job that cannot be made, found or changed."""

    exit_code = 1


def jobs_dir(env: Mapping[str, str] | None = None) -> str:
    """`~/.coding-os/jobs`: every job of this user, one folder each."""
    from coding_os.state.root import hub_dir

    return os.path.join(hub_dir(env), "jobs")


class Job:
    """A job's folder and its last state (a plain class: `cos bg` imports no dataclasses)."""

    __slots__ = ("folder", "state")

    def __init__(self, folder: str, state: dict[str, Any]) -> None:
        self.folder = folder
        self.state = state

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Job) and (self.folder, self.state) == (other.folder,
                                                                        other.state)

    __hash__ = None  # type: ignore[assignment]  # its state is a dict

    def __repr__(self) -> str:
        return f"Job(folder={self.folder!r}, state={self.state!r})"

    @property
    def id(self) -> str:
        return str(self.state["id"])

    @property
    def name(self) -> str:
        return str(self.state.get("name") or "")

    def path(self, name: str) -> str:
        return os.path.join(self.folder, name)

    @property
    def prompt(self) -> str | None:
        data = durable.read_regular(self.path(PROMPT), 64 << 20)
        return data.decode("utf-8", "replace") if data is not None else None


def _private_dir(path: str) -> None:
    durable.ensure_dir(path)
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise durable.io_error(path, exc) from None
    if not os.path.isdir(path) or os.path.islink(path) or info.st_uid != os.geteuid():
        raise JobError(f"{path} is not a folder of this user: remove it")


def new_job(fields: Mapping[str, Any], prompt: str | None,
            env: Mapping[str, str] | None = None) -> Job:
    """Make a job folder with a fresh id, its `state.json` (state `starting`) and prompt.

    Raises:
        StateIOError: the folder or its files cannot be written (disk full, permissions): no
            half-made job is left behind.
    """
    root = jobs_dir(env)
    _private_dir(os.path.dirname(root))
    _private_dir(root)
    while True:
        job_id = os.urandom(4).hex()
        folder = os.path.join(root, job_id)
        try:
            os.mkdir(folder, 0o700)
            break
        except FileExistsError:
            continue
        except OSError as exc:
            raise durable.io_error(folder, exc) from None
    now = time.time()
    state: dict[str, Any] = {
        "id": job_id, "kind": "background", "state": "starting", "status": None,
        "waitingFor": None, "pid": None, "sessionId": None, "cos_session": None,
        "exit_code": None, "last_seq": 0, "startedAt": int(now * 1000),
        "spawnedAt": int(now * 1000),
        "created": _iso(now), "updated": _iso(now), **fields}
    state["id"] = job_id
    try:
        os.mkdir(os.path.join(folder, TMP), 0o700)
        if prompt is not None:
            durable.atomic_write(os.path.join(folder, PROMPT), prompt.encode("utf-8"))
        durable.atomic_write(os.path.join(folder, STATE), _encode(state))
    except (OSError, StateIOError) as exc:
        _remove_tree(folder)
        if isinstance(exc, StateIOError):
            raise
        raise durable.io_error(folder, exc) from None
    return Job(folder, state)


def _iso(when: float) -> str:
    from coding_os.clock import utc_now

    return utc_now(when)


def _encode(state: Mapping[str, Any]) -> bytes:
    return json.dumps(state, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n"


def _remove_tree(folder: str) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


def _read_state(folder: str, job_id: str) -> dict[str, Any] | None:
    """The state of the job in `folder`, or None when it is not a job of this user."""
    try:
        info = os.lstat(folder)
    except OSError:
        return None
    import stat

    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        return None
    path = os.path.join(folder, STATE)
    try:
        if os.lstat(path).st_uid != os.geteuid():
            return None
    except OSError:
        return None
    data = durable.read_regular(path, STATE_LIMIT)
    if data is None:
        return None
    try:
        state = json.loads(data)
    except ValueError:
        return None
    if not isinstance(state, dict) or state.get("id") != job_id:
        return None
    return state


def load(job_id: str, env: Mapping[str, str] | None = None) -> Job:
    """The job `job_id` (an exact id).

    Raises:
        NotFound: no job of this user has that id.
    """
    if not JOB_ID.match(job_id):
        raise NotFound(f"no job {job_id[:40]!r}")
    folder = os.path.join(jobs_dir(env), job_id)
    state = _read_state(folder, job_id)
    if state is None:
        raise NotFound(f"no job {job_id}")
    return Job(folder, state)


def update(job: Job, **changes: Any) -> Job:
    """Write `changes` into the job's state (atomically: a reader sees the old state or the
    new one) and give the new job.

    Raises:
        StateIOError: it could not be written; the old state stays.
    """
    state = {**job.state, **changes, "updated": _iso(time.time())}
    durable.atomic_write(os.path.join(job.folder, STATE), _encode(state))
    return Job(job.folder, state)


def unless_running(job: Job, then: Callable[[Job], T]) -> T | None:
    """`then(job)`, the job as its state file says now, called while this process holds the
    job's runner lock (for that moment): no runner starts, writes or ends meanwhile, and a
    runner writes its last state before it lets go of the lock, so what the state says of the
    runner is so. None, and `then` not called, when a runner holds the lock. A runner that
    starts meanwhile waits for the lock (runner.take_lock), then reads what was written.

    Raises:
        StateIOError: the lock cannot be opened (the job's folder is gone).
    """
    import fcntl

    try:
        fd = os.open(job.path(LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                     0o600)
    except OSError as exc:
        raise durable.io_error(job.path(LOCK), exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return None
            raise durable.io_error(job.path(LOCK), exc) from None
        return then(reload(job))
    finally:
        os.close(fd)  # and the lock with it


def update_unless_running(job: Job, **changes: Any) -> Job | None:
    """`update`, under the job's runner lock (unless_running): None (nothing written) when a
    runner holds it; a job marked `stopped` before its runner took over never runs.

    Raises:
        StateIOError: it could not be written; the old state stays.
    """
    return unless_running(job, lambda now: update(now, **changes))


def note_taker(lock: int, job: Job) -> None:
    """Write in the lock `lock` (held) that this process took the job's start (its pid and the
    job's `spawnedAt`), before it does anything else with the job."""
    try:
        os.ftruncate(lock, 0)
        os.pwrite(lock, f"{os.getpid()} {job.state.get('spawnedAt')}\n".encode("ascii"), 0)
    except OSError:
        pass  # the start is then told by its grace period only


def taker(job: Job) -> tuple[int | None, int | None]:
    """The pid of the runner that last took the job's lock and the `spawnedAt` of the start it
    took (note_taker); None for what the lock does not say."""
    try:
        fd = os.open(job.path(LOCK), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None, None
    try:
        words = os.read(fd, 128).split()
    except OSError:
        words = []
    finally:
        os.close(fd)
    numbers = [int(word) if word.isdigit() else None for word in words[:2]]
    numbers += [None] * (2 - len(numbers))
    return numbers[0], numbers[1]


def reload(job: Job) -> Job:
    """The job as its state file says now (the runner may have changed it)."""
    state = _read_state(job.folder, job.id)
    return Job(job.folder, state) if state is not None else job


def all_jobs(env: Mapping[str, str] | None = None) -> Iterator[Job]:
    """Every job of this user, oldest first."""
    root = jobs_dir(env)
    try:
        names = sorted(entry.name for entry in os.scandir(root) if JOB_ID.match(entry.name))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise durable.io_error(root, exc) from None
    found = []
    for name in names:
        state = _read_state(os.path.join(root, name), name)
        if state is not None:
            found.append(Job(os.path.join(root, name), state))
    found.sort(key=lambda job: (job.state.get("startedAt") or 0, job.id))
    yield from found


def resolve(key: str, env: Mapping[str, str] | None = None,
            jobs: list[Job] | None = None) -> Job:
    """The job named by `key`: its id, a unique prefix of one, or its name.

    Raises:
        InvalidInput: an empty key. NotFound: nothing matches. Ambiguous: several jobs match
            (the message lists them).
    """
    key = key.strip()
    if not key:
        raise InvalidInput("a job id, prefix or name is needed")
    if JOB_ID.match(key):
        try:
            return load(key, env)
        except NotFound:
            pass
    every = list(all_jobs(env)) if jobs is None else jobs
    named = [job for job in every if job.name == key]
    prefixed = [job for job in every if job.id.startswith(key.lower())] if re.fullmatch(
        r"[0-9a-fA-F]{1,8}", key) else []
    matches = named or prefixed
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise NotFound(f"no job {key[:60]!r}: `cos agents --all` lists them")
    listed = ", ".join(f"{job.id} ({job.name}, {job.state.get('state')})" for job in matches[:8])
    more = f" and {len(matches) - 8} more" if len(matches) > 8 else ""
    raise Ambiguous(f"{key[:60]!r} names {len(matches)} jobs: {listed}{more}; give the id")


def runner_alive(job: Job) -> bool:
    """Whether the job's runner holds its lock (it runs). A shared lock taken for a moment to
    tell: a runner that starts meanwhile waits for it (runner.take_lock)."""
    import fcntl

    try:
        fd = os.open(job.path(LOCK), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def may_have_died(job: Job) -> bool:
    """Whether the job's state, however old, says a runner runs it or is taking it: only such a
    job's runner may have died without a word (runner_died tells, under its lock)."""
    state = job.state
    return state.get("state") not in ("failed", "stopped") and (
        state.get("pid") is not None or state.get("state") == "starting")


def runner_died(job: Job, now: float | None = None) -> bool:
    """Whether the job's runner ended without saying so (killed), for a job read while holding
    its runner lock (unless_running), so that no runner holds it: its pid is still in the
    state; or it is `starting` and the runner that took this start (the lock says, taker) is
    gone, or none took it within START_GRACE_S of the start."""
    state = job.state
    if state.get("state") in ("failed", "stopped"):
        return False
    if state.get("pid") is not None:
        return True
    if state.get("state") != "starting":
        return False
    spawned = state.get("spawnedAt") or state.get("startedAt") or 0
    if spawned and taker(job)[1] == spawned:
        return True
    return (time.time() if now is None else now) - spawned / 1000 >= START_GRACE_S


def socket_path(job: Job) -> str:
    return job.path(SOCKET)


def row(job: Job, alive: bool | None = None) -> dict[str, Any]:
    """The job as `cos agents` shows it: `status`, `waitingFor` and `approval` (the request it
    waits for) only while its runner lives, and `pid` only then. A runner found gone since the state was read wrote its last
    state first: that one is shown."""
    if alive is None:
        alive = job.state.get("pid") is not None and runner_alive(job)
        if not alive and job.state.get("pid") is not None:
            job = reload(job)
    state = job.state
    out = {name: state.get(name) for name in ROW_FIELDS}
    out["kind"] = "background"
    if not alive:
        out["status"] = out["waitingFor"] = out["pid"] = out["approval"] = None
    return out


def validate_name(name: str) -> str:
    """A job name: printable, one line, at most NAME_MAX characters.

    Raises:
        InvalidInput: it is empty, too long, or has control characters.
    """
    name = name.strip()
    if not name or len(name) > NAME_MAX or any(ord(c) < 32 or c == "\x7f" for c in name):
        raise InvalidInput(f"a job name is 1 to {NAME_MAX} printable characters on one line")
    return name


def default_name(prompt: str | None, command: str | None) -> str:
    """A short name from the prompt's first words (or the command's)."""
    words = re.findall(r"[A-Za-z0-9]+", (prompt or command or "job"))[:4]
    return "-".join(word.lower() for word in words)[:40] or "job"
