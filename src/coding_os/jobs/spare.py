"""The spare runner (DESIGN.md §6): a runner process the supervisor starts ahead of need, with
the engine already imported, waiting for the next job; `cos bg` (and `cos respawn`) hand it the
job instead of starting a Python process of their own, so the agent starts sooner.

- The supervisor (daemon/server.py) keeps at most one spare while background jobs are in use
  (one was made within SPARE_KEEP_S), and starts the next one SPARE_AFTER_S after one is taken.
- The spare is started by a shell in the background, leads a session of its own (as every
  runner) and inherits none of the daemon's descriptors but one end of a socket pair: it says
  on it when it is `ready` and when it has `taken` a job; the daemon holds the other end. When
  the daemon ends, killed or not, the spare reads the end of it there and, holding no job,
  exits. A spare that has taken a job is a job's runner like any other: the daemon's death no
  longer matters to it.
- It waits on `~/.coding-os/daemon/spare.sock` (this user only). A hand-off is one JSON line:
  the job's id, the asker's interpreter and package (a spare of another installation refuses),
  its umask and the environment the job's runner is to have (one that sets a PYTHON* variable
  that shapes an interpreter, PYTHONPATH say, is never handed off). The spare takes the job's
  lock (runner.take_lock: one runner per job, whoever started it), answers `{"ok": true,
  "pid": N}`, stops listening, and becomes the job's runner (runner.run_locked) in that
  environment, its output to the job's `stderr.log`. Anything else (no spare, no answer within
  HAND_OFF_TIMEOUT_S, a refusal) and the asker starts a runner as without a spare.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping

from coding_os.jobs import jobs
from coding_os.jobs.jobs import Job

__all__ = ["SOCKET", "READY", "TAKEN", "HAND_OFF_TIMEOUT_S", "socket_path", "hand_off",
           "start_spare", "main"]

SOCKET = "spare.sock"  # in the daemon's folder
READY, TAKEN = b"ready\n", b"taken\n"  # what the spare says to the daemon
HAND_OFF_TIMEOUT_S = 5.0  # for the spare to answer a hand-off (it takes the job's lock first)
REQUEST_MAX = 4 << 20  # bytes of a hand-off (the environment is most of it)
# The PYTHON* variables a job's environment may set and still be handed to the spare (started
# isolated from them all, `-I`): those that change nothing a runner does. Any other (PYTHONPATH
# for a Python agent's module, PYTHONHOME, …) shapes an interpreter at its start: a runner of
# its own is started.
HARMLESS_PYTHON_VARS = ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE")


def socket_path(env: Mapping[str, str] | None = None) -> str:
    from coding_os.daemon.client import daemon_dir

    return os.path.join(daemon_dir(env), SOCKET)


def _installation() -> dict[str, str]:
    """What a spare and its asker must share: the interpreter and the package they run."""
    import coding_os

    return {"exe": sys.executable, "package": os.path.dirname(os.path.abspath(
        coding_os.__file__))}


def hand_off(job: Job, env: Mapping[str, str]) -> bool:
    """Give `job` to the spare runner, to run with `env`; whether it took it (it then runs the
    job). False when no spare waits, it is of another installation, or it did not answer.
    The C socket module: `cos bg` spends no time importing `socket` (enum, selectors)."""
    import _socket

    from coding_os.daemon.sockets import reach

    if any(name.startswith("PYTHON") and name not in HARMLESS_PYTHON_VARS for name in env):
        return False

    path = socket_path(env)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(HAND_OFF_TIMEOUT_S)
        try:
            reach(path, sock.connect)
        except OSError:
            return False
        umask = os.umask(0o077)
        os.umask(umask)
        sock.sendall(json.dumps({"job": job.id, "umask": umask, "env": dict(env),
                                 **_installation()}).encode() + b"\n")
        answer = b""
        while not answer.endswith(b"\n") and len(answer) < 4096:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    except OSError:
        return False
    finally:
        sock.close()
    try:
        found = json.loads(answer)
    except ValueError:
        return False
    return isinstance(found, dict) and found.get("ok") is True


def start_spare(folder: str, log: int) -> int:
    """Start a spare runner for the daemon of `folder` (its output to `log`); the daemon's end
    of the pair it talks on (close-on-exec).

    Raises:
        OSError: it could not be started.
    """
    import socket
    import subprocess

    mine, theirs = socket.socketpair()
    try:
        path = [entry for entry in sys.path if os.path.isabs(entry)]
        code = (f"import sys; sys.path[:] = {path!r}; from coding_os.jobs.spare import main; "
                f"sys.exit(main([{str(theirs.fileno())!r}]))")
        started = subprocess.run(
            ["/bin/sh", "-c", '"$0" -I -S -c "$1" &', sys.executable, code],
            cwd=folder, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            pass_fds=(theirs.fileno(),), start_new_session=True, check=False, timeout=30)
        if started.returncode != 0:
            raise OSError(f"/bin/sh exited {started.returncode}")
    except (OSError, subprocess.TimeoutExpired) as exc:
        mine.close()
        raise OSError(f"the spare runner could not start: {exc}") from None
    finally:
        theirs.close()
    fd = mine.detach()
    os.set_blocking(fd, False)
    return fd


def _warm() -> None:
    """Import what a runner needs to start its job (what `python -m coding_os.jobs.runner`
    spends its first tenths of a second on)."""
    import asyncio  # noqa: F401
    import ctypes  # noqa: F401  (runtime/children.py: each child's parent-death signal)
    import shutil  # noqa: F401

    import coding_os.jobs.runner  # noqa: F401
    import coding_os.jobs.worktrees  # noqa: F401
    import coding_os.runtime.backends.claude  # noqa: F401
    import coding_os.runtime.backends.codex  # noqa: F401
    import coding_os.runtime.backends.exec  # noqa: F401
    import coding_os.runtime.core  # noqa: F401
    import coding_os.runtime.protocol  # noqa: F401
    import coding_os.sessions.database  # noqa: F401
    import coding_os.storage.sqlite  # noqa: F401


def _read_request(conn: object) -> dict[str, object] | None:
    import socket

    assert isinstance(conn, socket.socket)
    conn.settimeout(HAND_OFF_TIMEOUT_S)
    data = b""
    try:
        while not data.endswith(b"\n") and len(data) <= REQUEST_MAX:
            chunk = conn.recv(1 << 16)
            if not chunk:
                break
            data += chunk
        found = json.loads(data)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _answer(conn: object, answer: Mapping[str, object]) -> None:
    import socket

    assert isinstance(conn, socket.socket)
    try:
        conn.sendall(json.dumps(answer).encode() + b"\n")
    except OSError:
        pass


def _take(request: Mapping[str, object]) -> tuple[Job, int, dict[str, str]] | str:
    """The job a hand-off names, its lock taken, and the environment to run it in; or why
    not."""
    from coding_os.jobs.runner import take_lock
    from coding_os.errors import CosError

    mine = _installation()
    if any(request.get(key) != value for key, value in mine.items()):
        return "a spare runner of another installation"
    env, job_id = request.get("env"), request.get("job")
    if not isinstance(env, dict) or not all(isinstance(key, str) and isinstance(value, str)
                                            and "\0" not in key + value and "=" not in key
                                            for key, value in env.items()):
        return "env must map names to strings"
    if not isinstance(job_id, str) or not jobs.JOB_ID.match(job_id):
        return "no job id"
    try:
        job = jobs.load(job_id, env)
    except CosError as exc:
        return str(exc)
    lock = take_lock(job)
    if lock is None:
        return f"job {job.id} has a runner already"
    return job, lock, env


def _retitle(words: list[str]) -> None:
    """Make this process's command line (what `ps` and /proc/PID/cmdline show) `words`, when
    they fit in the space of the one it was started with (Linux; otherwise it stays)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48, 49)
        title = b"\0".join(os.fsencode(word) for word in words) + b"\0"
        if not 0 < len(title) <= end - start:
            return
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            mem.write(title.ljust(end - start, b"\0"))
    except (OSError, ValueError, IndexError):
        pass


def _become(job: Job, env: Mapping[str, str], umask: object) -> None:
    """This process as the runner `control.spawn` would have started: the job's environment,
    umask, folder, stderr.log and command line (`python -m coding_os.jobs.runner ID`, as `ps`
    shows every runner)."""
    _retitle([sys.executable, "-m", "coding_os.jobs.runner", job.id])
    os.environ.clear()
    os.environ.update(env)
    if isinstance(umask, int) and 0 <= umask <= 0o777:
        os.umask(umask)
    os.chdir(job.folder)
    log = os.open(job.path(jobs.STDERR), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                  0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)


def serve(watch: int) -> int:
    """Wait for a job (or the daemon's end, on `watch`), then run it; the exit status."""
    import select

    from coding_os.jobs.runner import run_locked
    from coding_os.daemon.sockets import peer_uid

    path = socket_path()
    from coding_os.daemon import sockets

    listener, inode = sockets.bind(path, backlog=8)
    taken: tuple[Job, int, dict[str, str]] | None = None
    umask: object = None
    try:
        os.write(watch, READY)
        while taken is None:
            ready, _, _ = select.select([listener.fileno(), watch], [], [])
            if watch in ready:
                return 0  # the daemon ended (or let this spare go): no job, nothing to do
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                if peer_uid(conn) not in (None, os.geteuid()):
                    continue
                request = _read_request(conn)
                found = _take(request) if request is not None else "not a hand-off"
                if isinstance(found, str):
                    _answer(conn, {"ok": False, "error": found})
                    continue
                _answer(conn, {"ok": True, "pid": os.getpid()})
                taken, umask = found, request.get("umask") if request else None
    finally:
        listener.close()
        sockets.unlink(path, inode)
    try:
        os.write(watch, TAKEN)
    except OSError:
        pass  # the daemon is gone: the job runs on regardless
    os.close(watch)
    job, lock, env = taken
    _become(job, env, umask)
    return run_locked(job, lock)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        sys.stderr.write("usage: python -m coding_os.jobs.spare FD\n")
        return 2
    watch = int(args[0])
    try:
        os.set_inheritable(watch, False)  # an agent started later must not hold it
        os.setsid()  # a session and process group of its own, as every runner
    except OSError:
        pass
    try:
        _warm()
        return serve(watch)
    except Exception as exc:  # noqa: BLE001 - one line in the daemon's log, never a traceback
        sys.stderr.write(f"cos spare runner: {type(exc).__name__}: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
