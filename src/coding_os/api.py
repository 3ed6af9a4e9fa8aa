"""The one facade every interface calls: CLI, hooks, and (later) MCP, web and protocol.

Plain functions over the state layer; each takes an optional environment and working directory
so tests and embedding runtimes can call them for any caller without touching `os.environ`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from coding_os.config import horizon_for, load_config
from coding_os.errors import InvalidInput, NotFound, NotTrusted
from coding_os.install import InstallReport, install, uninstall
from coding_os.state import hookslog
from coding_os.state.caller import Caller
from coding_os.state.gc import PanelGcReport, reap_panels
from coding_os.state.lifecycle import HookResult, handle
from coding_os.state.root import Resolution, resolve
from coding_os.state.statefile import StateCheck, check_state, validate_name, write_state
from coding_os.state.tiers import RESERVED_NAMES

__all__ = [
    "where",
    "whoami",
    "state_set",
    "state_get",
    "state_check",
    "hooks_log",
    "hook",
    "init",
    "uninstall_hooks",
    "gc_panels",
    "session_summary",
    "session_observations",
]


def where(env: Mapping[str, str] | None = None, cwd: str | None = None) -> Resolution:
    """Where this caller's state lives and which rule of §3.1 decided it.

    Raises:
        Misroute: it would be the global hub or a symlinked state dir.
    """
    return resolve(cwd, os.environ if env is None else env)


def whoami(env: Mapping[str, str] | None = None, cwd: str | None = None,
           payload: Mapping[str, Any] | None = None) -> dict[str, object]:
    """The caller's agent, panel (and how it was found), session and trusted task.

    Raises:
        Misroute: the state dir cannot be resolved safely.
        InvalidId: COS_AGENT names an invalid agent.
    """
    native = payload.get("session_id") if payload else None
    caller = Caller(env, cwd, native if isinstance(native, str) else None)
    session = caller.session()
    task = None
    if session is not None:
        verdict = _check(caller, ".task-current", session)
        task = verdict.value if verdict.valid else None
    return {
        "agent": caller.agent,
        "panel_id": caller.panel,
        "panel_source": caller.panel_source,
        "session_id": session,
        "task": task,
        "state_dir": caller.resolution.state_dir,
        "panel_dir": caller.panel_dir,
    }


def _check(caller: Caller, name: str, session: str | None) -> StateCheck:
    horizon = horizon_for(name, load_config(caller.resolution.project_root))
    return check_state(caller.tiers.state_path(caller.agent, caller.panel, name), session, horizon)


def state_set(name: str, value: str, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> str:
    """Write state file `name` owned by the caller's session; returns its path.

    Raises:
        InvalidInput: bad name (or a reserved one), or a value that is not one line.
        NotFound: the caller's panel has no session yet (no SessionStart seen).
        StateIOError: the file cannot be written.
    """
    validate_name(name)
    if name in RESERVED_NAMES:
        raise InvalidInput(f"{name} is written by coding-os itself")
    caller = Caller(env, cwd)
    session = caller.session()
    if session is None:
        raise NotFound(f"panel {caller.panel} of {caller.agent} has no session yet "
                       "(no SessionStart seen); nothing written")
    path = caller.tiers.state_path(caller.agent, caller.panel, name)
    write_state(path, session, value)
    return path


def state_check(name: str, env: Mapping[str, str] | None = None,
                cwd: str | None = None) -> StateCheck:
    """Whether the caller may trust state file `name`, with owner, age and path.

    Raises:
        InvalidInput: bad name, or a bad horizon in `.coding-os.yaml`.
    """
    validate_name(name)
    caller = Caller(env, cwd)
    return _check(caller, name, caller.session())


def state_get(name: str, env: Mapping[str, str] | None = None, cwd: str | None = None) -> str:
    """The value of state file `name` when the caller may trust it.

    Raises:
        NotTrusted: absent, malformed, another session's, or stale (`reason` says which).
        InvalidInput: bad name.
    """
    verdict = state_check(name, env, cwd)
    if not verdict.valid:
        assert verdict.reason is not None
        raise NotTrusted(f"{name}: {verdict.reason}", verdict.reason)
    assert verdict.value is not None
    return verdict.value


def hooks_log(agent: str | None = None, session: str | None = None, limit: int | None = None,
              event: str | None = None, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> list[dict[str, str | None]]:
    """Hooks-log lines (oldest first), filtered, at most the last `limit`.

    Raises:
        InvalidInput: a negative limit.
        Misroute: the state dir cannot be resolved safely.
    """
    if limit is not None and limit < 0:
        raise InvalidInput("-n must be zero or more")
    caller_dir = resolve(cwd, os.environ if env is None else env).state_dir
    return hookslog.read(os.path.join(caller_dir, ".hooks.log"), agent=agent, session=session,
                         event=event, limit=limit)


def hook(event: str, payload: dict[str, object], env: Mapping[str, str] | None = None,
         cwd: str | None = None) -> HookResult:
    """Carry out one hook event for the caller (what `cos hook` does, without stdin/stdout).

    Raises:
        InvalidInput, Misroute, StateIOError: as `state.lifecycle.handle`.
    """
    return handle(event, payload, env, cwd)


def init(agent: str, local: bool = False, env: Mapping[str, str] | None = None,
         cwd: str | None = None) -> InstallReport:
    """Install coding-os hooks for `agent` in this checkout.

    Raises:
        InvalidInput, NotFound, StateIOError: as `install.install`.
    """
    return install(agent, local=local, caller=Caller(env, cwd))


def uninstall_hooks(agent: str | None = None, env: Mapping[str, str] | None = None,
                    cwd: str | None = None) -> list[InstallReport]:
    """Remove what `init` added (for one agent, or all).

    Raises:
        NotFound, InvalidInput, StateIOError: as `install.uninstall`.
    """
    return uninstall(agent, caller=Caller(env, cwd))


def gc_panels(dry_run: bool = False, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> PanelGcReport:
    """Reap panels whose heartbeat is older than COS_PANEL_GC_TTL (never a live one).

    Raises:
        InvalidInput: COS_PANEL_GC_TTL is not a duration.
    """
    env = os.environ if env is None else env
    caller = Caller(env, cwd)
    return reap_panels(caller.tiers, env, dry_run=dry_run)


def _storage(caller: Caller) -> Any:
    from coding_os.state import observations
    from coding_os.storage import open_storage

    storage = open_storage(caller.tiers.database)
    observations.ingest(storage, caller.tiers.observations_spool)
    return storage


def session_summary(session: str, env: Mapping[str, str] | None = None,
                    cwd: str | None = None) -> dict[str, object] | None:
    """The stored summary of a session, or None.

    Raises:
        StorageError: the database cannot be used.
    """
    from dataclasses import asdict

    storage = _storage(Caller(env, cwd))
    try:
        summary = storage.summary(session)
        return asdict(summary) if summary else None
    finally:
        storage.close()


def session_observations(session: str | None = None, env: Mapping[str, str] | None = None,
                         cwd: str | None = None) -> list[dict[str, object]]:
    """Stored observations (after moving the spool into the database), optionally of one session.

    Raises:
        StorageError: the database cannot be used.
    """
    from dataclasses import asdict

    storage = _storage(Caller(env, cwd))
    try:
        return [asdict(o) for o in storage.observations(session=session)]
    finally:
        storage.close()
