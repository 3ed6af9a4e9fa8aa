"""The background replicator (DESIGN.md §8): on a shared PostgreSQL, the new lines of a
project's sessions reach the database within seconds of being written, with no further cos
command on this host (a host may end its session and go away).

The hooks hand over to it (hooks/sessions.py, `replicate_soon`): every fire on PostgreSQL
appends one byte to `<state_dir>/.replicate-requests` and, when no replicator holds
`<state_dir>/.replicate.lock`, starts one as a detached process (a session of its own, its
stdio on /dev/null), which outlives the hook and the agent. The hook never waits for it and
imports nothing for it (no psycopg on the hook path). One replicator runs per project: the one
that holds the lock; another started meanwhile exits at once.

`follow`: with the lock held (its pid written in the lock file), push — an index refresh, then
`replicate.replicate` of the project's own files — and push again whenever the request file
has grown since the last push began. Once no request came for `LINGER_S` seconds, push a last
time (lines an agent writes just after its last hook), release the lock and exit. A request
that arrives while the lock is being released is not lost: the request file is looked at once
more after the release, and the lock taken again.

Killed at any moment (the host goes away mid-push), nothing is lost or stored twice: each batch
is one transaction of lines keyed by (session, stream, seq), and the next push, from a hook or
any command, goes on from what the storage holds (hosts/replicate.py); the lock dies with
the process. A push that fails (PostgreSQL unreachable, an invalid COS_HOST) is written to the
hooks log (`event=replicate error=…`) and ends the run: the next request pushes what is left.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping

from coding_os import durable
from coding_os.errors import CosError
from coding_os.state.tiers import Tiers
from coding_os.storage.base import Storage

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.hosts.replicate import SyncReport

__all__ = ["LINGER_S", "POLL_S", "REQUESTS_MAX", "requests", "push", "follow", "main"]

LINGER_S = 2.0  # how long a replicator waits for another request before its last push
POLL_S = 0.1  # how often it looks at the request file meanwhile
REQUESTS_MAX = 4096  # request bytes kept before the file is emptied (by the lock's holder)


def requests(tiers: Tiers) -> int:
    """How many requests the request file holds (its size; 0 when there is none)."""
    try:
        return os.lstat(tiers.replication_requests).st_size
    except OSError:
        return 0


def _take(path: str) -> int | None:
    """The lock file's descriptor, the lock held and this process's pid written in it; None
    when another process holds it."""
    import fcntl

    fd = durable.open_private(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return fd


def _emptied(tiers: Tiers) -> int:
    """Empty the request file (its holder does, before a push) and return its size after."""
    fd = durable.open_private(tiers.replication_requests, os.O_WRONLY)
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)
    return requests(tiers)


def push(storage: Storage, tiers: Tiers, root: str, env: Mapping[str, str]) -> SyncReport:
    """One push, as `cos sync` does it: import what changed (so a new native file is known),
    then replicate the project's files.

    Raises:
        StorageError: the storage cannot be read or written.
        StateIOError: the import state cannot be saved.
        InvalidInput: COS_HOST is not a valid host name.
    """
    from coding_os.sessions import index
    from coding_os.hosts import replicate
    from coding_os.sessions.database import native_dirs

    claude_dir, codex_dir = native_dirs(env)
    refreshed = index.refresh(storage, tiers, claude_dir, codex_dir)
    return replicate.replicate(storage, tiers, root, host=refreshed.host)


def _serve(storage: Storage, tiers: Tiers, root: str, env: Mapping[str, str], linger: float,
           poll: float) -> int | None:
    """Push while requests come, the lock held; the request count the last push began at
    (None when the storage is not shared: nothing is pushed)."""
    if not storage.shared:
        return None
    seen: int | None = None
    settled = False
    deadline = 0.0
    while True:
        count = requests(tiers)
        if count != seen:
            # Read before the push: a request made after this is seen by the next look.
            seen = _emptied(tiers) if count > REQUESTS_MAX else count
            push(storage, tiers, root, env)
            deadline, settled = time.monotonic() + linger, False
        elif time.monotonic() < deadline:
            time.sleep(poll)
        elif not settled:
            push(storage, tiers, root, env)  # what the agent wrote after its last hook
            settled = True
        else:
            return seen


def follow(tiers: Tiers, root: str, env: Mapping[str, str], *, linger: float = LINGER_S,
           poll: float = POLL_S) -> bool:
    """Be the project's replicator until requests stop (see the module docstring); False when
    another process holds the lock (it sees every request), or a push failed (logged).

    Raises:
        OSError: the lock file cannot be opened.
    """
    from coding_os.sessions.database import with_index

    while True:
        fd = _take(tiers.replication_lock)
        if fd is None:
            return False
        try:
            seen = with_index(tiers, env, lambda storage: _serve(storage, tiers, root, env,
                                                                 linger, poll))
        except CosError as exc:
            _log_failure(tiers, str(exc))
            return False
        finally:
            os.close(fd)  # the lock goes with it
        if seen is None or requests(tiers) == seen:
            return True


def _log_failure(tiers: Tiers, message: str) -> None:
    from coding_os import clock
    from coding_os.state import hookslog

    try:
        hookslog.append(tiers.hooks_log, {"ts": clock.utc_now(), "event": "replicate",
                                          "error": " ".join(message.split())[:1000]})
    except CosError:
        pass  # nowhere left to say it: the next request tries again


def main(argv: list[str] | None = None) -> int:
    """The detached replicator of the project at `argv[0]` (what the hooks start): 0 when it
    pushed until requests stopped, 1 otherwise (another one runs, a push failed, the state dir
    is not this user's)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        return 2
    from coding_os.state.caller import Caller

    try:
        caller = Caller(os.environ, args[0], create=False)
    except CosError:
        return 1
    if caller.ownership.status != "own":
        return 1
    try:
        return 0 if follow(caller.tiers, caller.resolution.project_root, os.environ) else 1
    except OSError as exc:
        _log_failure(caller.tiers, f"the replicator's lock: {exc.strerror or exc}")
    except Exception as exc:  # noqa: BLE001 - detached: the hooks log is all it has to say it
        _log_failure(caller.tiers, f"internal {type(exc).__name__}: {exc}")
    return 1
