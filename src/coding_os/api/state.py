"""The caller and its project's state (DESIGN.md §3): where it lives, who calls, state files,
the hooks log and a hook event, `cos init`, panel gc, consent, the doctor and the daemon."""

from __future__ import annotations

from coding_os.api.project import Project
from coding_os.state import statefile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from coding_os.doctor import DoctorReport
    from coding_os.hooks.context import HookResult
    from coding_os.install import InstallReport
    from coding_os.state.gc import PanelGcReport
    from coding_os.state.statefile import StateCheck

__all__ = ["where", "in_project", "whoami", "state_set", "state_check", "state_get", "hooks_log", "hook",
           "init", "uninstall_hooks", "gc_panels", "trust", "doctor", "daemon_start",
           "daemon_stop", "daemon_status"]


def where(env: Mapping[str, str] | None = None, cwd: str | None = None) -> dict[str, object]:
    """Where this caller's state lives, which rule of §3.1 decided it, and whether the state
    dir is this user's (`state_dir_status`: own, absent or foreign, with `foreign_reason`).

    Raises:
        Misroute: it would be the global hub or a symlinked state dir.
    """
    caller = Project(env, cwd, create=False, foreign_ok=True).caller
    found: dict[str, object] = {**caller.resolution.as_dict(),
                                "state_dir_status": caller.ownership.status}
    if caller.ownership.reason is not None:
        found["foreign_reason"] = caller.ownership.reason
    return found


def in_project(env: Mapping[str, str] | None = None, cwd: str | None = None) -> bool:
    """Whether the caller is in a project (a git checkout, or a state dir here or above);
    nothing is created.

    Raises:
        Misroute: the state dir cannot be resolved safely.
    """
    from coding_os.state.root import is_project

    project = Project(env, cwd, create=False, foreign_ok=True)
    return is_project(project.resolution, project.caller.cwd, project.home)


def whoami(env: Mapping[str, str] | None = None, cwd: str | None = None,
           payload: Mapping[str, Any] | None = None) -> dict[str, object]:
    """The caller's agent, panel (and how it was found), session and trusted task.

    Raises:
        Misroute: the state dir cannot be resolved safely.
        InvalidId: COS_AGENT names an invalid agent.
    """
    native = payload.get("session_id") if payload else None
    project = Project(env, cwd, create=False, native=native if isinstance(native, str) else None)
    caller, session = project.caller, project.caller.session()
    task = (statefile.check_for(caller, ".task-current", session, project.config)
            if session is not None else None)
    return {"agent": caller.agent, "panel_id": caller.panel, "panel_source": caller.panel_source,
            "session_id": session, "task": task.value if task and task.valid else None,
            "state_dir": caller.resolution.state_dir, "panel_dir": caller.panel_dir}


def state_set(name: str, value: str, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> str:
    """Write state file `name` owned by the caller's session; returns its path.

    Raises:
        InvalidInput: bad name (or a reserved one), or a value that is not one line.
        NotFound: the caller's panel has no session yet (no SessionStart seen).
        StateIOError: the file cannot be written.
    """
    statefile.validate_settable(name)
    return statefile.set_for(Project(env, cwd).caller, name, value)


def state_check(name: str, env: Mapping[str, str] | None = None,
                cwd: str | None = None) -> StateCheck:
    """Whether the caller may trust state file `name`, with owner, age and path.

    Raises:
        InvalidInput: bad name, or a bad horizon in `.coding-os.yaml`.
    """
    statefile.validate_name(name)
    project = Project(env, cwd, create=False)
    return statefile.check_for(project.caller, name, project.caller.session(), project.config)


def state_get(name: str, env: Mapping[str, str] | None = None, cwd: str | None = None) -> str:
    """The value of state file `name` when the caller may trust it.

    Raises:
        NotTrusted: absent, malformed, another session's, or stale (`reason` says which).
        InvalidInput: bad name.
    """
    return statefile.trusted(state_check(name, env, cwd), name)


def hooks_log(agent: str | None = None, session: str | None = None, limit: int | None = None,
              event: str | None = None, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> list[dict[str, str | None]]:
    """Hooks-log lines (oldest first), filtered, at most the last `limit`.

    Raises:
        InvalidInput: a negative limit.
        Misroute: the state dir cannot be resolved safely.
    """
    from coding_os.errors import InvalidInput
    from coding_os.state import hookslog

    if limit is not None and limit < 0:
        raise InvalidInput("-n must be zero or more")
    return hookslog.read(Project(env, cwd, create=False).tiers.hooks_log, agent=agent,
                         session=session, event=event, limit=limit)


def hook(event: str, payload: dict[str, object], env: Mapping[str, str] | None = None,
         cwd: str | None = None) -> HookResult:
    """Carry out one hook event for the caller (what `cos hook` does, without stdin/stdout).

    Raises:
        InvalidInput, Misroute, StateIOError: as `hooks.events.handle`.
    """
    from coding_os.hooks.events import handle

    return handle(event, payload, env, cwd)


def init(agent: str, local: bool = False, env: Mapping[str, str] | None = None,
         cwd: str | None = None) -> InstallReport:
    """Install coding-os hooks for `agent` in this checkout.

    Raises:
        InvalidInput, NotFound, StateIOError: as `install.install`.
    """
    from coding_os.install import install

    project = Project(env, cwd, create=False, foreign_ok=True)
    return install(agent, local=local, caller=project.caller, env=env)


def uninstall_hooks(agent: str | None = None, env: Mapping[str, str] | None = None,
                    cwd: str | None = None) -> list[InstallReport]:
    """Remove what `init` added (for one agent, or all).

    Raises:
        NotFound, InvalidInput, StateIOError: as `install.uninstall`.
    """
    from coding_os.install import uninstall

    return uninstall(agent, caller=Project(env, cwd, create=False).caller, env=env)


def gc_panels(dry_run: bool = False, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> PanelGcReport:
    """Reap panels whose heartbeat is older than COS_PANEL_GC_TTL (never a live one).

    Raises:
        InvalidInput: COS_PANEL_GC_TTL is not a duration.
    """
    from coding_os.state.gc import reap_panels

    project = Project(env, cwd)
    return reap_panels(project.tiers, project.environ, dry_run=dry_run)


def trust(revoke: bool = False, env: Mapping[str, str] | None = None,
          cwd: str | None = None) -> dict[str, object]:
    """Trust this project's `.coding-os.yaml` as it is now (its commands may run), or, with
    `revoke`, take that back.

    Raises:
        InvalidInput: there is no `.coding-os.yaml` to trust, or it cannot be read.
        StateIOError: the user's hub cannot be written.
    """
    from coding_os import trust as consent

    resolution = Project(env, cwd, create=False).resolution
    change = consent.revoke if revoke else consent.trust
    return change(resolution.project_root, resolution.hub)


def doctor(env: Mapping[str, str] | None = None, cwd: str | None = None) -> DoctorReport:
    """Check hooks (and whether the agent runs them), state dir resolution, whether cos can
    write there, database, index freshness, orphaned panels, the checkpoint store and the MCP
    server; read-only but for a probe file, and never raises for what it finds (each check has
    a status and a fix; `report.ok` is false when any check failed)."""
    import os

    from coding_os.doctor import run_checks

    return run_checks(Project(env, cwd).environ, cwd if cwd is not None else os.getcwd())


def daemon_start(env: Mapping[str, str] | None = None) -> dict[str, object]:
    """Start `cos daemon` unless it runs (one per user, in ~/.coding-os/daemon); its status.

    Raises:
        DaemonError: it exited or did not answer in time.
        StateIOError: its directory cannot be made.
    """
    from coding_os.daemon.server import start

    return start(env)


def daemon_stop(env: Mapping[str, str] | None = None) -> dict[str, object]:
    """Stop the daemon when it runs (`stopped` says whether one did)."""
    from coding_os.daemon.server import stop

    return stop(env)


def daemon_status(env: Mapping[str, str] | None = None) -> dict[str, object]:
    """Whether the daemon runs, its pid and version, and every tree it watches."""
    from coding_os.daemon.server import status

    return status(env)
