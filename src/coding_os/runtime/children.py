"""The processes a backend starts (an agent, a command) die with the process that started them,
however it ends.

Each is started in a session and process group of its own (an interrupt signals the group), with
its parent-death signal set to SIGKILL (Linux `prctl(PR_SET_PDEATHSIG)`, set in the child before
it runs anything; a child whose parent is already gone exits at once): when the process that
started it dies, killed or not, the kernel kills it. That reaches the child only, not what it
started (`sh -c "a; b"` runs `a` as a child of its own), so a process that runs a background job
(jobs/runner.py) also keeps a list of those sessions (`record_sessions`): each child appends
its session to it before it runs anything, and `end` kills every process still in one, once the
runner is gone (the runner itself at its end, or whoever finds it dead). A process that makes a
session of its own (`setsid`, a daemon) has left the job and is not ended with it.

`end` reads `/proc` (Linux); elsewhere it signals the process groups the sessions began with.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["options", "record_sessions", "end", "LIST_MAX"]

PR_SET_PDEATHSIG = 1
LIST_MAX = 1 << 20  # bytes of a list of sessions read (a job of some 50,000 tasks)
PASSES = 20  # looks at /proc by `end`, at most

_ledger: int | None = None  # the open list of sessions (record_sessions), inherited by each child
_prctl: Callable[..., int] | None | bool = False  # False: not looked up yet; None: none here


def _load_prctl() -> Callable[..., int] | None:
    global _prctl
    if _prctl is False:
        try:
            import ctypes

            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError, ImportError):
            _prctl = None
    return _prctl if callable(_prctl) else None


def record_sessions(path: str | None) -> None:
    """Each child started from now on appends its session (`<sid> <start time>`: the child leads
    it) to the file at `path`, made empty first (None: no list). Called by a job's runner
    holding its job.

    Raises:
        OSError: the file cannot be opened.
    """
    global _ledger
    if _ledger is not None:
        os.close(_ledger)
        _ledger = None
    if path is not None:
        _ledger = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND
                          | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)


def options() -> dict[str, Any]:
    """The keyword arguments of `subprocess.Popen` (and asyncio's subprocess calls) that start
    a child of a session and process group of its own that dies with this process. The kernel
    sends the parent-death signal when the *thread* that forked the child ends: a child started
    from another thread than the main one (which may end long before the process) goes without
    it, and is ended through the list of sessions only."""
    import threading

    prctl = _load_prctl() if threading.current_thread() is threading.main_thread() else None
    return {"start_new_session": True, "preexec_fn": _Lifeline(os.getpid(), prctl, _ledger)}


class _Lifeline:
    """Run in the child between fork and exec: the parent-death signal, the check that the
    parent is still there, and the child's session in the list."""

    __slots__ = ("parent", "prctl", "ledger")

    def __init__(self, parent: int, prctl: Callable[..., int] | None, ledger: int | None
                 ) -> None:
        self.parent = parent
        self.prctl = prctl
        self.ledger = ledger

    def __call__(self) -> None:
        if self.prctl is not None:
            self.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != self.parent:
            os._exit(137)  # the parent died before the signal was set: run nothing
        if self.ledger is not None:
            start = _start_time(os.getpid())
            try:
                os.write(self.ledger, f"{os.getsid(0)} {start if start is not None else -1}\n"
                         .encode("ascii"))
            except OSError:
                pass  # a full disk: the parent-death signal still holds


def _stat(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (field 3, the state, first)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_time(pid: int | str) -> int | None:
    fields = _stat(pid)
    try:
        return int(fields[19]) if fields is not None else None  # field 22: starttime
    except (IndexError, ValueError):
        return None


def _listed(path: str) -> dict[int, int]:
    """The sessions listed at `path`: sid → its leader's start time (-1: unknown)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return {}
    try:
        data = os.read(fd, LIST_MAX)
    except OSError:
        data = b""
    finally:
        os.close(fd)
    found: dict[int, int] = {}
    for line in data.split(b"\n"):
        words = line.split()
        if len(words) == 2 and all(word.lstrip(b"-").isdigit() for word in words):
            sid, start = int(words[0]), int(words[1])
            if sid > 1:
                found[sid] = start
    return found


def end(sessions: str) -> list[int]:
    """SIGKILL every process of this user in a session listed at `sessions` (record_sessions),
    never this process, and empty the list; the pids signalled. Called by the one process that
    holds the job (its lock): nothing adds to the list meanwhile. A session whose leader lives
    with another start time than the one listed is another's (its number was given again):
    passed over. /proc is looked at again until nothing is left to kill (a process may fork
    while it is read).
    """
    listed = _listed(sessions)
    ours = set()
    for sid, start in listed.items():
        now = _start_time(sid)
        if now is None or start < 0 or now == start:
            ours.add(sid)
    killed: list[int] = []
    if ours:
        me, uid = os.getpid(), os.geteuid()
        for _ in range(PASSES):
            try:
                pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
            except OSError:  # no /proc: the groups the sessions began with is all there is
                for sid in ours:
                    try:
                        os.killpg(sid, signal.SIGKILL)
                    except OSError:
                        pass
                break
            found = [pid for pid in pids if pid != me and _kill_if_ours(pid, uid, ours)]
            if not found:
                break
            killed.extend(pid for pid in found if pid not in killed)
    if listed:
        try:
            os.close(os.open(sessions, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC))
        except OSError:
            pass
    return killed


def _kill_if_ours(pid: int, uid: int, sessions: set[int]) -> bool:
    """SIGKILL process `pid` when it is this user's, alive, and in one of `sessions`; it is held
    by a pid file descriptor while it is looked at, so a pid given again meanwhile is never
    signalled."""
    try:
        handle: int | None = os.pidfd_open(pid)
    except (OSError, AttributeError):
        handle = None
    try:
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                return False
        except OSError:
            return False
        fields = _stat(pid)
        try:
            if fields is None or fields[0] in (b"Z", b"X") or int(fields[3]) not in sessions:
                return False
        except (IndexError, ValueError):
            return False
        try:
            if handle is not None:
                signal.pidfd_send_signal(handle, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except OSError:
            return False
        return True
    finally:
        if handle is not None:
            os.close(handle)
