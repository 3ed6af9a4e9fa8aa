"""`cos daemon`: the on-demand supervisor (DESIGN.md §6), one per user, in `~/.coding-os/daemon/`.

It serves the file watcher that checkpoints ask (daemon/watcher.py, checkpoints/watch.py), and
supervises the background jobs' runners (jobs/supervisor.py): every JOBS_SWEEP_S, and on
start, it marks failed the jobs whose runners died; it never exits on idle while a runner lives.
`cos daemon start` starts it (`--detach`) and it runs until `cos daemon stop`; a hook that had to
scan a large tree starts it too (daemon.client.start_in_background, `--until-idle`), and it then
exits once it watches nothing and has been asked nothing for IDLE_FORGET_S.

- `daemon.lock`: held (flock) by the running daemon for its whole life: the proof it runs. A
  second daemon started meanwhile finds it held and exits.
- `daemon.sock`: a Unix socket in a directory only the user can enter (and a peer of another
  uid is refused). One request per connection: a JSON line in, a JSON line out; connections
  are read and answered side by side (a client that stalls is dropped after CLIENT_TIMEOUT_S,
  keeping no other waiting), requests handled one at a time in the daemon's one thread.
  Requests: `ping`, `status`, `stop`, `changes` (`root`, `since`): the paths changed in
  `root` since a token, with a new token; and `jobs`: sweep the background jobs now (the jobs
  whose runners live, and those found dead and marked failed).
- `daemon.json`: pid, start time and version, for `cos daemon status`.
- `daemon.log`: what it has to say (start, stop, a tree given up).
- `spare.sock`: the spare runner's (jobs/spare.py), which the daemon keeps one of while
  background jobs are in use: a runner with the engine imported, waiting for `cos bg` to hand
  it the next job. It ends with the daemon unless it has taken a job.
- The spare worktrees (jobs/worktrees.py): for each project a job was made in a worktree of
  within SPARE_KEEP_S, one made ahead at the checkout's HEAD (by a process of its own at low
  priority, never within SPARE_TREE_AFTER_S of a job's making nor while a job's agent is
  starting), which the next job there takes over instead of writing its files; removed once
  the project has had no such job for SPARE_KEEP_S, and when the daemon stops (one a job is
  taking is left to it). `cos gc` removes those a killed daemon left (control.gc_jobs).

Anything can talk to the socket, so every request is checked and a bad one answered with an
error line; the daemon itself never stops on one.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping

from coding_os.git.command import GIT_ENV, is_config_pair
from coding_os.daemon import sockets
from coding_os.daemon.sockets import peer_uid
from coding_os.daemon.client import SOCKET, STOPPED, DaemonError, daemon_dir, request
from coding_os.clock import utc_now
from coding_os.errors import CosError, StateIOError
from coding_os.durable import io_error, open_private, private_dir, signatures

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.daemon.watcher import TreeWatch

__all__ = ["DaemonError", "daemon_dir", "request", "start", "stop", "status", "serve"]

LOCK, INFO, LOG = "daemon.lock", "daemon.json", "daemon.log"
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 15.0
IDLE_FORGET_S = 6 * 3600  # a tree nobody asked about for this long is no longer watched
SWEEP_S = 60.0  # how often idle trees are looked for
JOBS_SWEEP_S = 2.0  # how often the jobs' runners are looked at (jobs/supervisor.py)
KEEP_S = 1.0  # how often the spare runner and the spare worktrees are seen to
KEEP_LATE_S = 2.0  # how late the jobs may be looked at while clients keep the daemon busy
MAX_REQUEST = 1 << 16
CLIENT_TIMEOUT_S = 2.0  # to send its request line, and again to take the answer
MAX_CLIENTS = 256  # connections open at once; beyond, the oldest is dropped
SPARE_KEEP_S = 3600.0  # a spare runner is kept while a job was made this recently (or one runs)
SPARE_AFTER_S = 1.0  # after a spare is taken, or the daemon starts: when the next one starts
# (neither it nor a spare worktree is made while a job's agent is starting: agent_starting)
SPARE_RETRY_S = 30.0  # after a spare that ended before it was ready (doubled each time, to 10 min)
SPARE_TREE_AFTER_S = 1.0  # no spare worktree is made within this of a job's making


def status(env: Mapping[str, str] | None = None) -> dict[str, object]:
    """Whether the daemon runs (`responding` false when it holds its lock but did not
    answer: stopped or hung), and what it watches."""
    folder = daemon_dir(env)
    try:
        answer = request(folder, {"op": "status"})
    except DaemonError as exc:
        return {"running": _locked(folder), "responding": False, "error": str(exc),
                "dir": folder}
    if answer is None:
        return {"running": False, "dir": folder}
    return {"running": True, "responding": True, "dir": folder,
            **{k: v for k, v in answer.items() if k != "ok"}}


def start(env: Mapping[str, str] | None = None, wait: bool = True) -> dict[str, object]:
    """Start the daemon unless it runs; wait until it answers (unless not `wait`: then only
    until it has forked away).

    Raises:
        DaemonError: it exited or did not answer in time (the log's last line says why).
        StateIOError: its directory cannot be made.
    """
    import subprocess

    folder = daemon_dir(env)
    from coding_os.durable import unlink_quietly

    unlink_quietly(os.path.join(folder, STOPPED))  # the hooks may start it again
    running = request(folder, {"op": "ping"})
    if running is not None:
        return {**status(env), "already_running": True}
    _ensure_private(folder)
    try:
        log = open_private(os.path.join(folder, LOG), os.O_WRONLY | os.O_APPEND)
    except OSError as exc:
        raise io_error(os.path.join(folder, LOG), exc) from None
    try:
        # It forks away from this process (and its session) at once: not our child to reap.
        code = subprocess.run(
            [sys.executable, "-m", "coding_os.daemon.server", "--detach", folder],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            cwd="/", env=dict(os.environ if env is None else env), check=False).returncode
    finally:
        os.close(log)
    if code != 0:
        raise DaemonError(f"the daemon could not start ({code}): {_last_log_line(folder)}")
    if not wait:
        return {"running": True, "dir": folder, "already_running": False}
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if request(folder, {"op": "ping"}) is not None:
            return {**status(env), "already_running": False}
        time.sleep(0.02)
    raise DaemonError(f"the daemon did not answer within {START_TIMEOUT_S:.0f} s: "
                      f"{_last_log_line(folder)}")


def stop(env: Mapping[str, str] | None = None) -> dict[str, object]:
    """Stop the daemon when it runs; wait until it has let go of its lock. The hooks start no
    daemon on their own from then on, until `start`."""
    folder = daemon_dir(env)
    if os.path.isdir(folder):
        from coding_os.durable import atomic_write

        atomic_write(os.path.join(folder, STOPPED), b"", sync=False)
    answer = request(folder, {"op": "stop"})
    if answer is None:
        return {"running": False, "stopped": False, "dir": folder}
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if not _locked(folder):
            return {"running": False, "stopped": True, "pid": answer.get("pid"), "dir": folder}
        time.sleep(0.02)
    raise DaemonError(f"the daemon (pid {answer.get('pid')}) did not stop within "
                      f"{STOP_TIMEOUT_S:.0f} s")


def _ensure_private(folder: str) -> None:
    private_dir(folder)


def _locked(folder: str) -> bool:
    import fcntl

    try:
        fd = os.open(os.path.join(folder, LOCK), os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _last_log_line(folder: str) -> str:
    try:
        with open(os.path.join(folder, LOG), "rb") as f:
            lines = f.read()[-4096:].decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else "nothing in its log"


# -- the daemon process ---------------------------------------------------------------------------


class _Server:
    def __init__(self, folder: str) -> None:
        from coding_os import __version__
        from coding_os.daemon.watcher import Watches

        self.folder = folder
        self.version = __version__
        self.watches = Watches()
        self.started = time.time()
        self.asked = self.started  # when a request last came in
        self.running = True
        self.live_jobs: list[str] = []  # jobs whose runners lived at the last sweep
        self.swept = 0.0
        self.spare: int | None = None  # the daemon's end of the spare runner's pair
        self.spare_ready = False
        self.spare_due = time.monotonic() + SPARE_AFTER_S  # when a spare may be started
        self.spare_failures = 0  # spares in a row that ended before they were ready
        self.preparing: subprocess.Popen[bytes] | None = None  # making spare worktrees
        self.preparing_for: list[str] = []
        self.spare_trees: set[str] = set()  # projects whose spare worktree this daemon made
        self.tree_due: dict[str, float] = {}  # project: when to try again after a failure
        self.tree_projects: dict[str, float] = {}  # project: when a job was last made there
        self.job_made = 0.0  # when `cos bg` last said it made a job (Unix seconds)

    def agent_starting(self) -> bool:
        """Whether a job's agent is starting (supervisor.agent_starting): the daemon's own
        work waits."""
        from coding_os.jobs.supervisor import agent_starting

        try:
            return agent_starting()
        except (CosError, OSError):
            return False

    def keep_spare_trees(self) -> None:
        """Start making the spare worktrees that are due, or removing those no longer
        wanted, in a process of its own at the lowest priority (nice 19), one at a time; none
        while a job's agent is starting."""
        now = time.time()
        if self.preparing is not None:
            code = self.preparing.poll()
            if code is None:
                return
            if code != 0:
                for project in self.preparing_for:
                    self.tree_due[project] = now + SPARE_RETRY_S
            self.preparing = None
        from coding_os.jobs.supervisor import worktree_projects
        from coding_os.jobs.worktrees import spare_ready

        try:
            found, newest = worktree_projects(now - SPARE_KEEP_S)
        except (CosError, OSError):
            return
        if now - max(newest, self.job_made) < SPARE_TREE_AFTER_S or self.agent_starting():
            return  # a job is starting: the disk and processors are its
        for project, made in found.items():
            self.tree_projects[project] = max(self.tree_projects.get(project, 0.0), made)
        wanted = {project for project, made in self.tree_projects.items()
                  if now - made < SPARE_KEEP_S}
        stale = sorted(self.spare_trees - wanted)
        due = sorted(project for project in wanted if self.tree_due.get(project, 0) <= now
                     and not spare_ready(project))
        if stale:
            self.spare_trees -= set(stale)
            self.prepare("--drop", stale)
        elif due:
            self.spare_trees |= set(due)
            self.prepare("--prepare", due)

    def prepare(self, action: str, projects: list[str]) -> None:
        path = [entry for entry in sys.path if os.path.isabs(entry)]
        code = (f"import sys; sys.path[:] = {path!r}; from coding_os.jobs.worktrees import "
                "main; sys.exit(main(sys.argv[1:]))")
        argv = [sys.executable, "-I", "-S", "-c", code, action, *projects]
        for nice in (["nice", "-n", "19"], []):
            try:
                self.preparing = subprocess.Popen(
                    [*nice, *argv], cwd="/", stdin=subprocess.DEVNULL, stdout=sys.stdout,
                    stderr=sys.stdout, start_new_session=True)
                self.preparing_for = projects
                return
            except OSError as exc:
                error = exc
        _log(f"the spare worktrees were not made: {error}")

    def drop_spare_trees(self) -> None:
        """On the way out: end a preparation under way and remove the spare worktrees this
        daemon keeps (made, or found ready), so that none outlives it; one a job is taking
        (its lock held) is left to that job."""
        if self.preparing is not None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.preparing.pid, sig)  # a session of its own: git with it
                except OSError:
                    pass
                try:
                    self.preparing.wait(timeout=5.0)
                    break
                except subprocess.TimeoutExpired:
                    continue
            self.preparing = None
        from coding_os.jobs.worktrees import drop_spare

        for project in sorted(self.spare_trees | set(self.tree_projects)):
            try:
                if not drop_spare(project):
                    _log(f"the spare worktree of {project} is being taken by a job: left to it")
            except (CosError, OSError) as exc:
                _log(f"the spare worktree of {project} was not removed: {exc}")
        self.spare_trees.clear()

    def wants_spare(self) -> bool:
        """Whether background jobs are in use: one runs, or one was made (or removed) within
        SPARE_KEEP_S."""
        from coding_os.jobs.jobs import jobs_dir

        if self.live_jobs:
            return True
        try:
            return time.time() - os.stat(jobs_dir()).st_mtime < SPARE_KEEP_S
        except OSError:
            return False

    def keep_spare(self, selector: selectors.BaseSelector) -> None:
        """Start a spare runner when none waits, one is due and jobs are in use; let the
        spare go once jobs are no longer in use."""
        if self.spare is not None:
            if self.spare_ready and not self.wants_spare():
                self.drop_spare(selector)
            return
        if time.monotonic() < self.spare_due or \
                not self.wants_spare() or self.agent_starting():
            return
        from coding_os.jobs.spare import start_spare

        try:
            self.spare = start_spare(self.folder, sys.stdout.fileno())
        except OSError as exc:
            _log(str(exc))
            self.spare_due = time.monotonic() + SPARE_RETRY_S
            return
        self.spare_ready = False
        selector.register(self.spare, selectors.EVENT_READ, "spare")

    def on_spare(self, selector: selectors.BaseSelector) -> None:
        """What the spare runner said: ready, taken (a job: the next one is due soon), or its
        end (the next one is due later if it never got ready)."""
        from coding_os.jobs.spare import READY, TAKEN

        assert self.spare is not None
        try:
            said = os.read(self.spare, 64)
        except BlockingIOError:
            return
        except OSError:
            said = b""
        if READY in said:
            self.spare_ready = True
            self.spare_failures = 0
        if said and TAKEN not in said:
            return
        self.drop_spare(selector)
        if said or self.spare_ready:
            self.spare_due = time.monotonic() + SPARE_AFTER_S
        else:
            self.spare_failures += 1
            _log("the spare runner ended before it was ready")
            self.spare_due = time.monotonic() + min(
                SPARE_RETRY_S * 2 ** (self.spare_failures - 1), 600.0)

    def drop_spare(self, selector: selectors.BaseSelector) -> None:
        """Let the spare runner go (one waiting for a job then exits)."""
        if self.spare is None:
            return
        try:
            selector.unregister(self.spare)
        except (KeyError, ValueError):
            pass
        os.close(self.spare)
        self.spare = None
        self.spare_ready = False

    def handle(self, message: object) -> dict[str, object]:
        self.asked = time.time()
        if not isinstance(message, dict) or not isinstance(message.get("op"), str):
            return {"ok": False, "error": "a request is a JSON object with an op"}
        op = message["op"]
        if op == "ping":
            if message.get("job_made") is True:  # `cos bg` made a job (control.ensure_daemon)
                self.job_made = time.time()
                project = message.get("project")
                if isinstance(project, str) and os.path.isabs(project) and "\0" not in project:
                    self.tree_projects[project] = self.job_made
            return {"ok": True, "pid": os.getpid(), "version": self.version}
        if op == "stop":
            self.running = False
            return {"ok": True, "pid": os.getpid()}
        if op == "status":
            self.watches.drain()
            return {"ok": True, "pid": os.getpid(), "version": self.version,
                    "started": utc_now(self.started), "trees": [
                        _tree_row(tree) for tree in self.watches.trees.values()]}
        if op == "changes":
            return self.changes(message)
        if op == "jobs":
            return {"ok": True, **self.sweep_jobs()}
        return {"ok": False, "error": f"unknown op {op!r}"}

    def sweep_jobs(self) -> dict[str, list[str]]:
        """Adopt the jobs whose runners live; mark failed those whose runners died."""
        from coding_os.jobs.supervisor import sweep

        self.swept = time.monotonic()
        try:
            result = sweep()
        except (CosError, OSError) as exc:
            _log(f"jobs not swept: {exc}")
            return {"live": self.live_jobs, "failed": []}
        for job in result["failed"]:
            _log(f"job {job}: its runner died; marked failed")
        self.live_jobs = result["live"]
        return result

    def changes(self, message: dict[str, object]) -> dict[str, object]:
        root = message.get("root")
        if not isinstance(root, str) or not os.path.isabs(root) or "\0" in root:
            return {"ok": False, "error": "changes needs root, an absolute path"}
        state_dir = message.get("state_dir")
        if state_dir is not None and (not isinstance(state_dir, str) or "\0" in state_dir):
            return {"ok": False, "error": "state_dir must be a path"}
        env = message.get("env") or {}
        if not isinstance(env, dict) or not all(
                (name in GIT_ENV or is_config_pair(name))
                and (value is None or isinstance(value, str) and "\0" not in value)
                for name, value in env.items()):
            return {"ok": False, "error": f"env may hold only {', '.join(GIT_ENV)} and "
                                          "GIT_CONFIG_KEY_<n>/VALUE_<n>, as strings or null"}
        # What the asker does not set, git must not take from the daemon's own environment.
        env = {**{name: None for name in GIT_ENV}, **{
            name: None for name in os.environ if is_config_pair(name)}, **env}
        # One watch per tree, state dir and git configuration (what is left unwatched
        # depends on them).
        key = "\0".join([root, state_dir or "", json.dumps(env, sort_keys=True)])
        self.watches.drain()
        tree = self.watches.trees.get(key)
        since = message.get("since")
        changed = tree.since(since) if tree is not None else None
        if tree is not None and not tree.broken and tree.identity != identity(root):
            tree, why = None, "the tree's directory was replaced"
        elif tree is not None and not tree.broken and tree.signatures != signatures(
                tree.outside):
            tree, why = None, "ignore rules outside the tree changed"
        elif tree is None:
            why = "started watching"
        elif tree.broken or tree.stale:
            why = tree.broken or tree.lost or "the watch was restarted"
            tree = None
        elif _rules_changed(tree, tree.changed if changed is None else changed, env):
            # Looked at over the whole watch when the asker's token is unknown: the new
            # watch then follows the rules as they are now (a directory no longer ignored,
            # a file force-added in an ignored one).
            tree, why = None, "the ignore rules or attributes changed"
        elif changed is None:
            tree.asked = time.time()
            return {"ok": True, "token": tree.token, "changed": None,
                    "why": tree.lost if since and str(since).split(":")[0] != tree.generation
                    and tree.lost else "no earlier token of this watch"}
        else:
            tree.asked = time.time()
            return {"ok": True, "token": tree.token, "changed": changed}
        if tree is None:
            if not os.path.isdir(root):
                return {"ok": False, "error": f"{root} is not a directory"}
            rules = _unwatched(root, state_dir, env)
            tree = self.watches.watch(root, rules.skip, rules.info_dir, rules.git_dir, key)
            tree.state_dir, tree.ignored = state_dir, rules.ignored
            tree.identity = identity(root)
            tree.outside, tree.signatures = rules.outside, rules.signatures
            if tree.broken:
                _log(f"not watching {root}: {tree.broken}")
                self.watches.forget(key)
                return {"ok": True, "token": None, "changed": None, "why": tree.broken}
        tree.asked = time.time()
        return {"ok": True, "token": tree.token, "changed": None, "why": why}

    def forget_idle(self) -> None:
        now = time.time()
        for key, tree in list(self.watches.trees.items()):
            if now - tree.asked > IDLE_FORGET_S or tree.broken:
                self.watches.forget(key)

    def idle(self) -> bool:
        """Whether it watches nothing and nobody asked anything for IDLE_FORGET_S."""
        return (not self.watches.trees and not self.live_jobs
                and time.time() - self.asked > IDLE_FORGET_S)


def _tree_row(tree: TreeWatch) -> dict[str, object]:
    return {"root": tree.root, "state_dir": tree.state_dir, "watched_dirs": len(tree.dirs),
            "changed_paths": len(tree.changed),
            "token": tree.token, "broken": tree.broken, "since": utc_now(tree.started),
            "last_asked": utc_now(tree.asked)}


class Rules:
    """What the watch of a tree depends on besides the tree: the directories not watched (the
    state dir, what an ignore pattern matches), the repository's `info` and git dirs (for
    `exclude` and `index`), and the files outside the tree that decide what is ignored (the
    global excludes file, `.gitignore`s above a root below the repository's top, git's config
    files), with their stat signatures when the watch began."""

    def __init__(self, skip: set[str], info_dir: str | None, git_dir: str | None,
                 outside: list[str], ignored: set[str] | None = None) -> None:
        self.skip = skip
        self.ignored = ignored or set()  # the directories of `skip` an ignore pattern matches
        self.info_dir = info_dir
        self.git_dir = git_dir
        self.outside = outside
        self.signatures = signatures(outside)


def identity(root: str) -> tuple[int, int] | None:
    """The directory `root` names now: a tree moved away and replaced is another one."""
    try:
        st = os.stat(root)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _rules_changed(tree: TreeWatch, changed: object, env: dict[str, str | None]) -> bool:
    """Whether `changed` (paths) holds a rule file, `.git/info/*`, or an index change that
    made git track a file in a directory left unwatched as ignored (`git add -f`): then it
    must be watched."""
    from coding_os.git.repo import rules_changed, tracked_in

    paths = list(changed) if isinstance(changed, (list, dict)) else []
    if rules_changed(paths):
        return True
    if ".git/index" not in paths:
        return False
    ignored = sorted(tree.skip & tree.ignored)
    return bool(ignored) and tracked_in(tree.root, ignored, env)


def _unwatched(root: str, state_dir: str | None, env: dict[str, str | None]) -> Rules:
    """The rules of the watch of `root` (see Rules) for git run with `env`: the state dir and
    what git's ignore rules (git/repo.py) leave out; outside git, only the state dir."""
    from coding_os.git.repo import ignore_rules

    skip: set[str] = set()
    if state_dir:
        rel = os.path.relpath(os.path.realpath(state_dir), root)
        if not rel.startswith(".."):
            skip.add(rel.replace(os.sep, "/"))
    skip.add(".coding-os")
    rules = ignore_rules(root, env)
    if rules is None:
        return Rules(skip, None, None, [])
    return Rules(skip | rules.ignored, rules.info_dir, rules.git_dir, rules.outside,
                 rules.ignored)


def _log(text: str) -> None:
    print(f"{utc_now(time.time())} {text}", flush=True)


def serve(folder: str, until_idle: bool = False) -> int:
    """Run the daemon in this process until stopped (or, `until_idle`, until it has had
    nothing to do for IDLE_FORGET_S: a daemon a hook started on demand); 0 also when another
    one already runs."""
    import fcntl

    _ensure_private(folder)
    lock = open_private(os.path.join(folder, LOCK), os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        _log(f"another daemon already runs (pid {os.getpid()} exits)")
        return 0
    path = os.path.join(folder, SOCKET)
    # One left by a daemon that was killed (nobody listens on it) is replaced; the socket is
    # removed at the end only if it is still ours (its inode `bound`).
    listener, bound = sockets.bind(path)
    server = _Server(folder)
    info = {"pid": os.getpid(), "started": utc_now(server.started), "version": server.version}
    from coding_os.durable import atomic_write

    atomic_write(os.path.join(folder, INFO), json.dumps(info).encode())
    signal.signal(signal.SIGTERM, lambda *_: setattr(server, "running", False))
    signal.signal(signal.SIGINT, lambda *_: setattr(server, "running", False))
    _log(f"daemon started (pid {os.getpid()}, version {server.version})")
    listener.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "listener")
    selector.register(server.watches.inotify.fd, selectors.EVENT_READ, "inotify")
    clients: set[_Client] = set()
    last_sweep = kept = time.monotonic()
    try:
        while server.running:
            now = time.monotonic()
            due = min(server.swept + JOBS_SWEEP_S, kept + KEEP_S)
            # While clients wait, the jobs' look is put off (below): no wake-up for it then.
            until = due + KEEP_LATE_S if clients else due
            wait = min([1.0, until - now, *(client.deadline - now for client in clients)])
            ready = selector.select(timeout=max(0.0, wait))
            now = time.monotonic()
            # Too slow to send its line or take its answer; one whose line came while another
            # request was handled is ready, and served.
            for client in clients - {key.data for key, _ in ready}:
                if client.deadline < now:
                    _drop(client, selector, clients)
            for key, _ in ready:
                if key.data == "inotify":
                    server.watches.drain()
                elif key.data == "listener":
                    _accept(listener, selector, clients)
                elif key.data == "spare":
                    server.on_spare(selector)
                else:
                    _serve(server, key.data, selector, clients)
            # The jobs are looked at when no client waits (each look reads every job's state),
            # so an answer never waits for them; under a stream of clients, late at most
            # KEEP_LATE_S.
            now = time.monotonic()
            if not clients or now - due > KEEP_LATE_S:
                if now - server.swept > JOBS_SWEEP_S:
                    server.sweep_jobs()
                if now - kept > KEEP_S:
                    server.keep_spare(selector)
                    server.keep_spare_trees()
                    kept = time.monotonic()
            if time.monotonic() - last_sweep > SWEEP_S:
                server.forget_idle()
                last_sweep = time.monotonic()
                if until_idle and server.idle():
                    _log("nothing asked for a while: the daemon started on demand stops")
                    break
    finally:
        server.drop_spare(selector)
        for client in list(clients):
            _drop(client, selector, clients)
        sockets.unlink(path, bound)
        listener.close()
        try:
            os.unlink(os.path.join(folder, INFO))
        except OSError:
            pass
        server.drop_spare_trees()  # before the lock goes: `cos daemon stop` waits for it
        _log(f"daemon stopped (pid {os.getpid()})")
        os.close(lock)
    return 0


# -- the connections: served side by side, none waited for ---------------------------------------


class _Client:
    """One connection: the request read so far, then the answer left to send, and when it is
    dropped if it has not sent its line (or taken its answer) by then."""

    __slots__ = ("sock", "data", "out", "deadline")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.data = b""
        self.out = b""
        self.deadline = time.monotonic() + CLIENT_TIMEOUT_S


def _accept(listener: socket.socket, selector: selectors.BaseSelector,
            clients: set[_Client]) -> None:
    """Take a waiting connection, of this user only (the directory keeps others out; the
    peer's uid is checked besides). At MAX_CLIENTS the oldest connection is dropped."""
    try:
        conn, _ = listener.accept()
    except OSError:
        return
    uid = peer_uid(conn)
    if uid is not None and uid != os.geteuid():
        _log(f"a connection from uid {uid} refused")
        conn.close()
        return
    if len(clients) >= MAX_CLIENTS:
        _drop(min(clients, key=lambda c: c.deadline), selector, clients)
    conn.setblocking(False)
    client = _Client(conn)
    clients.add(client)
    selector.register(conn, selectors.EVENT_READ, client)


def _serve(server: _Server, client: _Client, selector: selectors.BaseSelector,
           clients: set[_Client]) -> None:
    """Read what the client sent and, once its line is whole (or it stopped sending, or sent
    too much), answer it; or send more of an answer it is taking slowly."""
    if not client.out:
        try:
            chunk = client.sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            _drop(client, selector, clients)
            return
        client.data += chunk
        if chunk and not client.data.endswith(b"\n") and len(client.data) <= MAX_REQUEST:
            return
        client.out = _answer(server, client.data)
        client.deadline = time.monotonic() + CLIENT_TIMEOUT_S
        selector.modify(client.sock, selectors.EVENT_WRITE, client)
    try:
        client.out = client.out[client.sock.send(client.out):]
    except BlockingIOError:
        return
    except OSError:
        client.out = b""
    if not client.out:
        _drop(client, selector, clients)


def _drop(client: _Client, selector: selectors.BaseSelector, clients: set[_Client]) -> None:
    clients.discard(client)
    try:
        selector.unregister(client.sock)
    except (KeyError, ValueError):
        pass
    client.sock.close()


def _answer(server: _Server, data: bytes) -> bytes:
    """The answer line to the request `data`; a bad request gets an error, never an exception."""
    try:
        answer = (server.handle(json.loads(data)) if len(data) <= MAX_REQUEST
                  else {"ok": False, "error": "the request is too long"})
    except (ValueError, RecursionError):
        answer = {"ok": False, "error": "the request is not JSON"}
    except (CosError, OSError) as exc:
        answer = {"ok": False, "error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - a bad request never stops the daemon
        _log(f"internal error on a request: {type(exc).__name__}: {exc}")
        answer = {"ok": False, "error": f"internal error: {type(exc).__name__}"}
    return json.dumps(answer).encode() + b"\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    detach = args[:1] == ["--detach"]
    args = args[1:] if detach else args
    until_idle = args[:1] == ["--until-idle"]
    args = args[1:] if until_idle else args
    if len(args) != 1:
        print("usage: python -m coding_os.daemon.server [--detach] [--until-idle] DAEMON_DIR",
              file=sys.stderr)
        return 2
    if detach and os.fork() != 0:
        os._exit(0)  # the parent: whoever started us waits only for this
    try:
        os.chdir("/")
        return serve(args[0], until_idle)
    except (StateIOError, OSError) as exc:
        _log(f"daemon failed: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
