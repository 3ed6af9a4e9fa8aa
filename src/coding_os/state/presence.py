"""Presence and heartbeat: which sessions are live, and when each panel last fired a hook.

- `<agent>/sessions/<sid>.json`: the session's presence record (agent, panel, native id, status,
  started, cwd, ...), replaced atomically at SessionStart and SessionEnd.
- `<agent>/panels/<panel>/heartbeat`: `<sid> <ts>`; its mtime is moved on every hook fire
  (one utime call on the hot path) and is what `cos gc --panels` reads against its TTL.
- `<agent>/.active-session`: `<sid> <panel>`, the agent's most recently started session.
"""

from __future__ import annotations

import fcntl
import os
import time

from coding_os import durable, jsonwire
from coding_os.clock import utc_now

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from coding_os.state.tiers import Tiers

__all__ = [
    "PanelLock",
    "write_presence",
    "read_presence",
    "beat",
    "heartbeat_age",
    "set_active_session",
    "DEFAULT_PANEL_TTL_S",
    "panel_ttl",
]

DEFAULT_PANEL_TTL_S = 24 * 3600


def write_presence(tiers: Tiers, agent: str, session: str, fields: dict[str, object]) -> None:
    """Replace the presence record of `session`, keeping fields not given.

    Raises:
        StateIOError: it cannot be written.
    """
    path = tiers.presence_path(agent, session)
    record = read_presence(tiers, agent, session) or {}
    record.update(fields)
    record["session"] = session
    record["agent"] = agent
    record["updated"] = utc_now()
    durable.ensure_dir(os.path.dirname(path))
    durable.atomic_write(path, (jsonwire.dumps(record) + "\n").encode("ascii"))


def read_presence(tiers: Tiers, agent: str, session: str) -> dict[str, object] | None:
    """The presence record of `session`, or None when it has none (or it is unreadable)."""
    data = durable.read_small(tiers.presence_path(agent, session))
    if data is None:
        return None
    try:
        record = jsonwire.loads(data.decode("utf-8", "replace"))
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def beat(panel_dir: str, session: str, new_session: bool = False) -> None:
    """Record a hook fire: move the heartbeat's mtime (one syscall); the file is rewritten with
    its owner only when it is missing or the panel has just bound a new session.

    Raises:
        StateIOError: the heartbeat cannot be written.
    """
    path = os.path.join(panel_dir, "heartbeat")
    if not new_session:
        try:
            os.utime(path, follow_symlinks=False)
            return
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise durable.io_error(path, exc) from None
    durable.atomic_write(path, f"{session} {utc_now()}\n".encode("ascii"), sync=False)


def heartbeat_age(panel_dir: str, now: float | None = None) -> float | None:
    """Seconds since the panel's last hook fire, or None when it never fired."""
    try:
        mtime = os.stat(os.path.join(panel_dir, "heartbeat"), follow_symlinks=False).st_mtime
    except OSError:
        return None
    return max(0.0, (time.time() if now is None else now) - mtime)


def set_active_session(tiers: Tiers, agent: str, session: str, panel: str) -> None:
    """Make `session` the agent's active session.

    Raises:
        StateIOError: it cannot be written.
    """
    from coding_os.state.statefile import write_state

    write_state(os.path.join(tiers.agent_dir(agent), ".active-session"), session, panel)


def panel_ttl(env: Mapping[str, str]) -> float:
    """COS_PANEL_GC_TTL in seconds (plain seconds or with an s/m/h/d unit), default 24 h.

    Raises:
        InvalidInput: the value cannot be read as a duration.
    """
    from coding_os.config import parse_duration

    raw = env.get("COS_PANEL_GC_TTL")
    return parse_duration(raw, "COS_PANEL_GC_TTL") if raw else DEFAULT_PANEL_TTL_S


class PanelLock:
    """An exclusive flock on the panel directory for the panel's read-modify-write steps.

    Every hook takes it (`with PanelLock(panel_dir):`, waiting for it, and making the directory
    when it is missing); `cos gc --panels` takes the same lock before reaping, without waiting
    (`try_take`), so a panel is never removed while a hook is writing into it; if it was reaped
    just before, the hook recreates it.
    """

    def __init__(self, panel_dir: str) -> None:
        self.panel_dir = panel_dir
        self.fd = -1

    @classmethod
    def try_take(cls, panel_dir: str) -> PanelLock | None:
        """The lock of the panel at `panel_dir` if no one holds it, without waiting; None when
        a hook holds it (the panel is live). Release it with `release` (or `with`).

        Raises:
            OSError: the directory cannot be opened (gone already).
        """
        fd = os.open(panel_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        lock = cls(panel_dir)
        lock.fd = fd
        return lock

    def __enter__(self) -> PanelLock:
        if self.fd >= 0:
            return self  # taken already (try_take)
        for _ in range(5):
            try:
                fd = os.open(self.panel_dir, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                durable.ensure_dir(self.panel_dir)
                continue
            except OSError as exc:
                raise durable.io_error(self.panel_dir, exc) from None
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.stat(self.panel_dir).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self.fd = fd
                return self
            os.close(fd)  # reaped while we waited: take the new directory's lock
            durable.ensure_dir(self.panel_dir)
        raise durable.io_error(self.panel_dir, OSError(0, "panel directory keeps disappearing"))

    def release(self) -> None:
        """Give the lock up (idempotent)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __exit__(self, *exc: object) -> None:
        self.release()
