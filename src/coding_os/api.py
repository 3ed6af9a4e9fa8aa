"""The one facade the interfaces call: the command line, the MCP server and the picker (the
hook entry hands its payload to `hooks.events.handle`).

Plain functions over the layers below (state, sessions, checkpoints, brain, the daemon's
client); each takes an optional environment and working directory so tests and embedding
runtimes can call them for any caller without touching `os.environ`.
"""

from __future__ import annotations

import os

from coding_os import redact
from coding_os.state import hookslog
from coding_os.state.tiers import horizon_for
from coding_os.config import load_config
from coding_os.errors import CosError, CrossProject, InvalidInput, NotFound, NotTrusted
from coding_os.git.repo import branch as git_branch
from coding_os.state.caller import Caller
from coding_os.state.root import Resolution, resolve
from coding_os.state.statefile import StateCheck, check_state, validate_name, write_state
from coding_os.state.tiers import RESERVED_NAMES

# Modules only some commands need are imported inside the functions that use them: every `cos`
# command pays for what is imported here (benchmarks/resume_continue.py), typing included.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from collections.abc import Callable, Mapping
    from typing import Any, NoReturn, TypeVar

    from coding_os.brain.attribution import Attribution
    from coding_os.install import InstallReport
    from coding_os.state.gc import PanelGcReport
    from coding_os.hooks.context import HookResult
    from coding_os.runtime.core import SessionSettings
    from coding_os.sessions.export import ReplicaLog, Turn
    from coding_os.runtime.foreground import View as RunView

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
    "collect_transcripts",
    "export_session",
    "session_branches",
]

if TYPE_CHECKING:
    _T = TypeVar("_T")


def where(env: Mapping[str, str] | None = None, cwd: str | None = None) -> dict[str, object]:
    """Where this caller's state lives, which rule of §3.1 decided it, and whether the state
    dir is this user's (`state_dir_status`: own, absent or foreign, with `foreign_reason`).

    Raises:
        Misroute: it would be the global hub or a symlinked state dir.
    """
    caller = Caller(env, cwd, create=False, foreign_ok=True)
    found: dict[str, object] = {**caller.resolution.as_dict(),
                                "state_dir_status": caller.ownership.status}
    if caller.ownership.reason is not None:
        found["foreign_reason"] = caller.ownership.reason
    return found


def whoami(env: Mapping[str, str] | None = None, cwd: str | None = None,
           payload: Mapping[str, Any] | None = None) -> dict[str, object]:
    """The caller's agent, panel (and how it was found), session and trusted task.

    Raises:
        Misroute: the state dir cannot be resolved safely.
        InvalidId: COS_AGENT names an invalid agent.
    """
    native = payload.get("session_id") if payload else None
    caller = Caller(env, cwd, native if isinstance(native, str) else None, create=False)
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
    caller = Caller(env, cwd, create=False)
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
    caller = Caller(env, cwd, create=False)
    return hookslog.read(caller.tiers.hooks_log, agent=agent, session=session, event=event,
                         limit=limit)


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

    return install(agent, local=local, caller=Caller(env, cwd, create=False, foreign_ok=True),
                   env=env)


def uninstall_hooks(agent: str | None = None, env: Mapping[str, str] | None = None,
                    cwd: str | None = None) -> list[InstallReport]:
    """Remove what `init` added (for one agent, or all).

    Raises:
        NotFound, InvalidInput, StateIOError: as `install.uninstall`.
    """
    from coding_os.install import uninstall

    return uninstall(agent, caller=Caller(env, cwd, create=False), env=env)


def gc_panels(dry_run: bool = False, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> PanelGcReport:
    """Reap panels whose heartbeat is older than COS_PANEL_GC_TTL (never a live one).

    Raises:
        InvalidInput: COS_PANEL_GC_TTL is not a duration.
    """
    env = os.environ if env is None else env
    caller = Caller(env, cwd)
    from coding_os.state.gc import reap_panels

    return reap_panels(caller.tiers, env, dry_run=dry_run)


def collect_transcripts(dry_run: bool = False, env: Mapping[str, str] | None = None,
                        cwd: str | None = None) -> Any:
    """Apply `cleanup_period_days` to cos-native transcripts (a week in the trash first).

    Raises:
        InvalidInput: the period is not a number of days, or below 1.
    """
    from coding_os.sessions.retention import cleanup_period_days, collect

    env = os.environ if env is None else env
    caller = Caller(env, cwd)
    period = cleanup_period_days(load_config(caller.resolution.project_root), env)
    return collect(caller.tiers, period, dry_run=dry_run)


def export_session(session: str, fmt: str, env: Mapping[str, str] | None = None,
                   cwd: str | None = None, branch: int | None = None) -> str:
    """A session's conversation as Markdown, JSON or HTML (cos-native, Claude Code or Codex).

    A Claude Code session exports its live chain, or with `branch` the branch of that number
    (`session_branches` lists them).

    Raises:
        InvalidId, NotFound: as `show_session`.
        InvalidInput: an unknown format, or a branch the session does not have.
    """
    from coding_os.sessions.export import FORMATS, render

    if fmt not in FORMATS:
        raise InvalidInput(f"unknown export format {fmt!r}: expected one of {', '.join(FORMATS)}")
    row, meta, turns = _read_conversation(session, "export", env, cwd, branch)
    meta.update({key: row[key] for key in ("id", "native_id", "agent", "title", "name", "cwd")
                 if row.get(key) is not None})
    meta["title"] = row.get("name") or row.get("title") or row.get("id")
    header = None
    if fmt == "html":  # the page's header: the session's facts and token use
        from coding_os.sessions.usage import totals

        header = {key: row.get(key) for key in ("agent", "project", "branch", "created",
                                                "last_active")}
        usage = session_tokens(session, env, cwd)["turns"]
        header["tokens"] = totals(usage) if usage else None
    return render(meta, turns, fmt, header)


def _read_conversation(session: str, purpose: str, env: Mapping[str, str] | None,
                       cwd: str | None, branch: int | None
                       ) -> tuple[dict[str, Any], dict[str, Any], list[Turn]]:
    """A session's row, and the metadata and turns of its log (redacted as its project says).

    Raises:
        InvalidId, NotFound: as `show_session`; NotFound: a session without a log (to `purpose`).
        InvalidInput: a branch the session does not have.
    """
    from coding_os.sessions.export import log_path, read_turns

    row, source, replica = _session_log(session, purpose, env, cwd)
    with log_path(source, replica) as path:
        meta, turns = read_turns(path, str(row.get("kind")),
                                 redact.configured(Caller(env, cwd).tiers.state_dir), branch)
    return row, meta, turns


def _session_log(session: str, purpose: str, env: Mapping[str, str] | None,
                 cwd: str | None, subagents: bool = False
                 ) -> tuple[dict[str, Any], str, ReplicaLog | None]:
    """A session's row, the path of its log, and its replica when it is another host's
    session whose file is not on this host (`_replica_log`, with its `subagents` when asked
    for; read it through `export.log_path`).

    Raises:
        InvalidId, NotFound: as `show_session`; NotFound: a session without a log (to `purpose`),
            another host's with nothing replicated.
        StorageError: as `_replica_log`.
    """
    row = show_session(session, env, cwd)
    source = row.get("source_path")
    if not isinstance(source, str) or not source:
        raise NotFound(f"session {session} has no log to {purpose}")
    return row, source, _replica_log(row, env, cwd, subagents)


def _replica_log(row: Mapping[str, object], env: Mapping[str, str] | None,
                 cwd: str | None, subagents: bool = False,
                 stream: str | None = None) -> ReplicaLog | None:
    """The log of another host's session (`row`, as `show_session` gives it) read from the
    shared storage, never from the path its host recorded: read only,
    nothing written here and the session left to its host (unlike `cos resume`, which
    materialises and takes it); its paths as its host wrote them, as the row's are; with
    `subagents`, a Claude Code session's subagent transcripts too. With `stream` ("events":
    a cos session's engine events log), that file instead, None when it is not replicated.
    None when the session is this host's, or the storage is this host's own (SQLite).

    Raises:
        NotFound: nothing of its log is replicated (the host has not synced it).
        StorageError: the storage cannot be used or went away mid-read.
        InvalidInput: COS_HOST is not a valid host name.
    """
    from coding_os.hosts.identity import this_host

    host, source = row.get("host"), row.get("source_path")
    # Another host's row is data (DESIGN.md §8): its log is read from what that host
    # replicated, never from a file of this host its `source_path` happens to name.
    if host is None or host == this_host(os.environ if env is None else env) \
            or not isinstance(source, str):
        return None
    from coding_os.sessions.export import ReplicaLog
    from coding_os.hosts.materialize import read_replica
    from coding_os.hosts.replicate import SUBAGENT

    kind = str(row.get("kind"))
    wanted = stream or ("transcript" if kind == "cos" else "native")  # the row's log

    def work(storage: Storage) -> tuple[bool, ReplicaLog | None]:
        if not storage.shared:
            return False, None
        for key in dict.fromkeys(str(k) for k in (row.get("id"), row.get("native_id")) if k):
            sources = storage.replica_sources(key)
            found = next((s for s in sources if s.stream == wanted and s.lines > 0), None)
            if found is None:
                continue
            log = ReplicaLog(os.path.basename(found.path), kind, read_replica(storage, found))
            if subagents and kind == "claude":
                log.subagents = {s.stream[len(SUBAGENT):]: read_replica(storage, s)
                                 for s in sources
                                 if s.stream.startswith(SUBAGENT) and s.lines > 0}
            return True, log
        return True, None

    shared, replica = _with_index(Caller(env, cwd), env, work)
    if shared and replica is None and stream is None:
        raise NotFound(f"{row.get('id')} is a session of host {host} with nothing replicated "
                       f"and its file is not here: run `cos sync` on {host}")
    return replica


def session_branches(row: Mapping[str, object], env: Mapping[str, str] | None = None,
                     cwd: str | None = None) -> dict[str, object]:
    """The live chain and the other branches of a session found by `show_session` (`row`):
    `live_leaf`, `live_entries`, `branches` (number, tip, fork_point, length, messages,
    first_prompt, last_ts) and `warnings`; a session whose log is not a tree has none. Another
    host's session whose file is not here is read from its replica (`_replica_log`), found
    through the storage `env` and `cwd` select.

    Raises:
        NotFound: the session's log is gone; another host's session has nothing replicated.
        StorageError: as `_replica_log`.
    """
    from coding_os.sessions.export import branches, log_path

    source = row.get("source_path")
    kind = str(row.get("kind"))
    if not isinstance(source, str) or not source or kind not in ("claude", "codex"):
        return {"live_leaf": None, "live_entries": None, "branches": [], "warnings": []}
    with log_path(source, _replica_log(row, env, cwd)) as path:
        return branches(path, kind)


def _storage(caller: Caller, env: Mapping[str, str] | None) -> Any:
    from coding_os.state import observations
    from coding_os.storage import open_storage

    storage = open_storage(caller.tiers.database, env=env)
    observations.ingest(storage, caller.tiers.observations_spool)
    return storage


def session_summary(session: str, env: Mapping[str, str] | None = None,
                    cwd: str | None = None) -> dict[str, object] | None:
    """The stored summary of a session, or None.

    Raises:
        StorageError: the database cannot be used.
    """
    from dataclasses import asdict

    with _storage(Caller(env, cwd), env) as storage:
        summary = storage.summary(session)
        return asdict(summary) if summary else None


def session_observations(session: str | None = None, env: Mapping[str, str] | None = None,
                         cwd: str | None = None) -> list[dict[str, object]]:
    """Stored observations (after moving the spool into the database), optionally of one session.

    Raises:
        StorageError: the database cannot be used.
    """
    from dataclasses import asdict

    with _storage(Caller(env, cwd), env) as storage:
        return [asdict(o) for o in storage.observations(session=session)]


# Transcripts (DESIGN.md §4.1, §4.4): thin wrappers over coding_os.sessions.transcript, which is
# imported when first used so that the commands that never touch a transcript do not load it.


if TYPE_CHECKING:
    from coding_os.sessions.transcript import Appended, Forked

__all__ += [
    "create_session",
    "append_event",
    "set_title",
    "mark_compact",
    "fork_session",
    "close_session",
]


def create_session(agent: str | None = None, *, native_id: str | None = None,
                   title: str | None = None, parent: str | None = None,
                   seed_ref: str | None = None, branch: str | None = None,
                   durability: str = "turn", env: Mapping[str, str] | None = None,
                   cwd: str | None = None) -> str:
    """Start a cos-native session (its transcript, holding its session_meta); returns its id.

    The agent defaults to the caller's; project and worktree come from where the caller's
    state lives, the branch from the worktree's git HEAD unless given.

    Raises:
        InvalidId: a bad agent name.
        InvalidInput: a bad title or durability.
        Misroute: the state dir cannot be resolved safely.
        StateIOError: the transcript cannot be written.
    """
    from coding_os.sessions import transcript
    from coding_os.state.identity import validate_agent

    if agent is not None:
        validate_agent(agent)
    caller = Caller(env, cwd)
    worktree = caller.resolution.worktree or caller.resolution.project_root
    return transcript.create(
        caller.tiers, agent or caller.agent, native_id=native_id,
        project=caller.resolution.project_root, worktree=worktree,
        branch=branch if branch is not None else git_branch(worktree), title=title,
        parent=parent, seed_ref=seed_ref, durability=durability)


def append_event(session: str, entry_type: str, fields: Mapping[str, object] | None = None, *,
                 durability: str = "turn", env: Mapping[str, str] | None = None,
                 cwd: str | None = None) -> Appended:
    """Append one entry (user, assistant, tool_call, …; DESIGN.md §4.1) to a session.

    Raises:
        InvalidId: a bad session id (checked before anything else).
        InvalidInput: an unknown type, a missing or mistyped field, a bad durability.
        NotFound: the session has no transcript in this project.
        StateIOError: the append failed; the transcript keeps its previous entries.
    """
    from coding_os.sessions import transcript

    transcript.session_agent(session)
    return transcript.append(Caller(env, cwd).tiers, session, entry_type, fields,
                             durability=durability)


def set_title(session: str, title: str, *, durability: str = "turn",
              env: Mapping[str, str] | None = None, cwd: str | None = None) -> Appended:
    """Rename a session (a `title` entry; the latest is its title).

    Raises:
        InvalidId: a bad session id.
        InvalidInput: a bad title.
        NotFound, StateIOError: as `append_event`.
    """
    from coding_os.sessions import transcript

    transcript.session_agent(session)
    return transcript.set_title(Caller(env, cwd).tiers, session, title, durability=durability)


def mark_compact(session: str, text: str, from_seq: int, to_seq: int, *,
                 durability: str = "turn", env: Mapping[str, str] | None = None,
                 cwd: str | None = None) -> Appended:
    """Record a compaction: `text` stands for entries from_seq..to_seq (which stay in the file).

    Raises:
        InvalidId: a bad session id.
        InvalidInput: a range that is not of earlier entries.
        NotFound, StateIOError: as `append_event`.
    """
    from coding_os.sessions import transcript

    transcript.session_agent(session)
    return transcript.mark_compact(Caller(env, cwd).tiers, session, text, from_seq, to_seq,
                                   durability=durability)


def fork_session(session: str, at_seq: int | None = None, name: str | None = None, *,
                 durability: str = "turn", env: Mapping[str, str] | None = None,
                 cwd: str | None = None) -> Forked:
    """Fork a cos-native session at `at_seq` (default: its end) into a new session.

    Raises:
        InvalidId: a bad session id (checked before any file is touched).
        InvalidInput: a bad seq or name, a seq past the end, a sidechain of a fork.
        NotFound: the session has no transcript in this project.
        StateIOError: the new transcript cannot be written.
    """
    from coding_os.sessions import transcript

    transcript.session_agent(session)
    return transcript.fork(Caller(env, cwd).tiers, session, at_seq, name, durability=durability)


def close_session(session: str, *, durability: str = "turn",
                  env: Mapping[str, str] | None = None, cwd: str | None = None) -> Appended:
    """Record that a session ended (an `event` named "close"), fsynced unless durability is none.

    Raises:
        InvalidId: a bad session id.
        NotFound, StateIOError: as `append_event`.
    """
    from coding_os.sessions import transcript

    transcript.session_agent(session)
    return transcript.close(Caller(env, cwd).tiers, session, durability=durability)


# The session index (DESIGN.md §4.2): one list of cos-native, Claude Code and Codex sessions.
# coding_os.sessions.index and the importers are imported when first used.

if TYPE_CHECKING:
    from coding_os.sessions.index import Progress, RefreshReport
    from coding_os.storage.base import IndexRow, Storage

__all__ += [
    "SESSION_SCOPES",
    "SESSION_FIELDS",
    "import_sessions",
    "rebuild_index",
    "sync_sessions",
    "list_sessions",
    "show_session",
    "rename_session",
    "remove_session",
]

SESSION_SCOPES = ("worktree", "repo", "all")
# The fields of a listed session, in the order they are printed.
SESSION_FIELDS = ("id", "native_id", "agent", "kind", "title", "name", "project", "worktree",
                  "cwd", "branch", "created", "last_active", "messages", "tokens", "forked_from",
                  "parent", "status", "host")
# What SQLite says about a file that is not (or no longer) a database it can use.
def _native_dirs(env: Mapping[str, str]) -> tuple[str, str]:
    from coding_os.sessions.database import native_dirs

    return native_dirs(env)


def _with_index(caller: Caller, env: Mapping[str, str] | None,
                work: Callable[[Storage], _T]) -> _T:
    from coding_os.sessions.database import with_index

    return with_index(caller.tiers, os.environ if env is None else env, work)


def _with_repairs(caller: Caller, env: Mapping[str, str] | None,
                  work: Callable[[Storage], _T]) -> tuple[_T, list[str]]:
    from coding_os.sessions.database import with_repairs

    return with_repairs(caller.tiers, os.environ if env is None else env, work)


def _refresh(storage: Storage, caller: Caller, env: Mapping[str, str] | None,
             claude_dir: str | None = None, codex_dir: str | None = None, full: bool = False,
             progress: Progress | None = None) -> RefreshReport:
    from coding_os.sessions import index

    default_claude, default_codex = _native_dirs(os.environ if env is None else env)
    report = index.refresh(storage, caller.tiers, claude_dir or default_claude,
                           codex_dir or default_codex, full=full, progress=progress)
    if storage.shared:  # other hosts read the lines: push what the refresh found
        _replicate(storage, caller, report)
    return report


def _replicate(storage: Storage, caller: Caller, report: RefreshReport) -> None:
    from coding_os.hosts import replicate

    pushed = replicate.replicate(storage, caller.tiers, caller.resolution.project_root,
                                 host=report.host)
    report.warnings.extend(f"not replicated: session {session} ({stream}): {why}"
                           for session, stream, why in pushed.refused)


def _lookup_refresh(storage: Storage, caller: Caller,
                    env: Mapping[str, str] | None) -> RefreshReport | None:
    """Import what changed before a lookup; None, without loading the importers, when a walk of
    the logs finds them as the last import left them (see coding_os.sessions.freshness)."""
    from coding_os.sessions import freshness

    claude_dir, codex_dir = _native_dirs(os.environ if env is None else env)
    if freshness.unchanged(caller.tiers, claude_dir, codex_dir) and storage.index_rows(limit=1):
        return None
    return _refresh(storage, caller, env)


def import_sessions(claude_dir: str | None = None, codex_dir: str | None = None,
                    env: Mapping[str, str] | None = None, cwd: str | None = None
                    ) -> RefreshReport:
    """Import what changed in Claude Code transcripts, Codex rollouts and cos transcripts.

    Raises:
        Misroute: the state dir cannot be resolved safely.
        StorageError: the database cannot be used.
        StateIOError: the import state cannot be saved.
    """
    caller = Caller(env, cwd)
    return _with_index(caller, env, lambda storage: _refresh(storage, caller, env, claude_dir,
                                                             codex_dir))


def sync_sessions(env: Mapping[str, str] | None = None, cwd: str | None = None
                  ) -> dict[str, Any]:
    """Import what changed, then push the new lines of the project's session files to the
    shared storage (coding_os.hosts.replicate); on SQLite nothing is pushed and the report
    says why.

    Raises:
        Misroute, StorageError, StateIOError: as `import_sessions`.
        InvalidInput: COS_HOST is not a valid host name.
    """
    from coding_os.hosts import replicate

    caller = Caller(env, cwd)

    def work(storage: Storage) -> dict[str, Any]:
        refreshed = _refresh_only(storage, caller, env)
        if not storage.shared:
            report = replicate.SyncReport(host=refreshed.host, shared=False,
                                          message="the database is this host's SQLite: nothing "
                                          "to replicate to (set COS_DATABASE_URL to a shared "
                                          "PostgreSQL)")
        else:
            report = replicate.replicate(storage, caller.tiers,
                                         caller.resolution.project_root, host=refreshed.host)
        return report.to_dict()

    return _with_index(caller, env, work)


def _refresh_only(storage: Storage, caller: Caller,
                  env: Mapping[str, str] | None) -> RefreshReport:
    from coding_os.sessions import index

    claude_dir, codex_dir = _native_dirs(os.environ if env is None else env)
    return index.refresh(storage, caller.tiers, claude_dir, codex_dir)


def rebuild_index(progress: Progress | None = None, env: Mapping[str, str] | None = None,
                  cwd: str | None = None) -> RefreshReport:
    """Empty the session index and build it again from every log, read in full.

    Raises:
        Misroute, StorageError, StateIOError: as `import_sessions`.
    """
    from coding_os.sessions import index

    caller = Caller(env, cwd)
    claude_dir, codex_dir = _native_dirs(os.environ if env is None else env)
    return _with_index(caller, env, lambda storage: index.rebuild(
        storage, caller.tiers, claude_dir, codex_dir, progress=progress))


def _checkout_dir(caller: Caller, env: Mapping[str, str]) -> str:
    """The checkout (or linked worktree) the caller works in: the default scope of a listing."""
    from coding_os.state.root import checkout_dir

    return checkout_dir(caller.resolution, caller.cwd,
                        env.get("HOME") or os.path.expanduser("~"))


def _scope_dirs(caller: Caller, scope: str, env: Mapping[str, str]) -> list[str] | None:
    """The directories a session's cwd must be in for `scope` (None: everywhere)."""
    from coding_os.state.root import linked_worktree_main

    if scope == "all":
        return None
    top = _checkout_dir(caller, env)
    if scope == "worktree":
        return [top]
    linked = linked_worktree_main(top, {})
    main = linked[1] if linked else top
    from coding_os.git.repo import linked_worktrees

    return sorted({main, caller.resolution.project_root, *linked_worktrees(main)})


def _row_dict(row: IndexRow, fields: tuple[str, ...] = SESSION_FIELDS) -> dict[str, object]:
    return {name: getattr(row, name) for name in fields}


def list_sessions(scope: str = "worktree", agent: str | None = None, search: str | None = None,
                  limit: int | None = None, refresh: bool = True, this_branch: bool = False,
                  host: str | None = None, all_hosts: bool = False,
                  env: Mapping[str, str] | None = None, cwd: str | None = None
                  ) -> list[dict[str, object]]:
    """Sessions of every kind, most recently active first, after importing what changed.

    `scope`: `worktree` (cwd inside the caller's checkout), `repo` (the repository and all its
    worktrees) or `all`. `this_branch`: only sessions on the branch checked out here.
    Hosts (DESIGN.md §8): this host's sessions (a row indexed before hosts were recorded is this
    host's; on a database of this machine alone, SQLite, every row is), or `host`'s, or every
    host's (`all_hosts`); each row says its `host`. Another host's
    session is in the worktree or repo scope when it ran in the same place of that host's
    checkout of this repository.

    Raises:
        InvalidInput: an unknown scope or a negative limit, or `this_branch` outside a branch;
            `host` not a host name, or given with `all_hosts`.
        Misroute, StorageError, StateIOError: as `import_sessions`.
    """
    from coding_os.hosts.identity import this_host, valid_host

    if scope not in SESSION_SCOPES:
        raise InvalidInput(f"scope must be one of {', '.join(SESSION_SCOPES)}, not {scope!r}")
    if limit is not None and limit < 0:
        raise InvalidInput("the limit must be zero or more")
    if host is not None and all_hosts:
        raise InvalidInput("give --host or --all-hosts, not both")
    caller = Caller(env, cwd)
    environ = os.environ if env is None else env
    here = this_host(environ)
    given = valid_host(host) if host is not None else None
    dirs = _scope_dirs(caller, scope, environ)
    branch = None
    if this_branch:
        branch = git_branch(_checkout_dir(caller, environ))
        if branch is None:
            raise InvalidInput("--branch: this checkout is not on a branch")

    def work(storage: Storage) -> list[dict[str, object]]:
        if refresh:
            _lookup_refresh(storage, caller, env)
        # A database of this machine alone (SQLite) holds this host's sessions only, under
        # whatever name the host had when it wrote them: no filter unless one is asked for.
        wanted = (None if all_hosts or (given is None and not storage.shared)
                  else [given or here])
        elsewhere = (_dirs_elsewhere(storage, caller, dirs, here, wanted)
                     if storage.shared else {})
        if not elsewhere:
            rows = storage.index_rows(agent=agent, search=search, cwd_under=dirs, limit=limit,
                                      branch=branch, hosts=wanted, local_host=here)
        else:  # the directories differ by host: every host's own filter, then the page
            under = sorted({*(dirs or []), *(d for ds in elsewhere.values() for d in ds)})
            rows = [row for row in storage.index_rows(
                agent=agent, search=search, cwd_under=under, branch=branch, hosts=wanted,
                local_host=here) if _in_dirs(row, elsewhere.get(row.host or here, dirs))]
            rows = rows[:limit] if limit is not None else rows
        return [{**_row_dict(row), "host": row.host or here} for row in rows]

    return _with_index(caller, env, work)


def _dirs_elsewhere(storage: Storage, caller: Caller, dirs: list[str] | None, here: str,
                    wanted: list[str] | None) -> dict[str, list[str]]:
    """The scope's directories as each other host wanted has them in its checkout of this
    repository (mapped from this host's root to that host's); empty when no other host is
    wanted or the scope is every project."""
    if dirs is None or wanted == [here]:
        return {}
    from coding_os.hosts.materialize import map_path
    from coding_os.hosts.identity import host_roots

    root = caller.resolution.project_root
    mapped: dict[str, list[str]] = {here: dirs}
    for other, where in host_roots(storage, root).items():
        if other != here and (wanted is None or other in wanted):
            mapped[other] = [str(map_path(d, root, where)) for d in dirs]
    return mapped


def _in_dirs(row: IndexRow, dirs: list[str] | None) -> bool:
    if dirs is None:
        return True
    where = row.cwd or ""
    return any(where == d or where.startswith(d.rstrip("/") + "/") for d in dirs)


def _validate_lookup(key: str) -> str:
    """A session id or native id as typed: one line, no path parts.

    Raises:
        InvalidId: it is empty, has whitespace or control characters, `/`, `\\` or `..`.
    """
    from coding_os.errors import InvalidId

    if (not key or len(key) > 200 or ".." in key or "/" in key or "\\" in key
            or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in key)):
        raise InvalidId(f"not a session id: {key!r}")
    return key


def _find(storage: Storage, caller: Caller, env: Mapping[str, str] | None,
          key: str) -> IndexRow:
    """The indexed session `key` names; a miss imports what changed and looks again.

    Raises:
        NotFound: no session has this id or native id.
    """
    row = storage.index_row(key)
    if row is None:
        _lookup_refresh(storage, caller, env)
        row = storage.index_row(key)
    if row is None:
        raise NotFound(f"no session {key}")
    return row


def show_session(session: str, env: Mapping[str, str] | None = None,
                 cwd: str | None = None) -> dict[str, object]:
    """Everything the index knows about one session (by cos id or native id), found as
    `cos resume ID` finds it, with `path` (`index`, `direct_scan`, `native_import`) and
    `repaired` (what the lookup rebuilt or added: the database, index rows; empty when none).

    Raises:
        InvalidId: the id is malformed (checked before any lookup).
        NotFound: no such session, even after importing what changed and reading the
            transcripts.
        Misroute, StorageError, StateIOError: as `import_sessions`.
    """
    from dataclasses import asdict

    from coding_os.sessions.resume import Found, find_by_id

    _validate_lookup(session)
    caller = Caller(env, cwd)

    def work(storage: Storage) -> tuple[Found, dict[str, object]]:
        found = find_by_id(storage, caller.tiers, session,
                           lambda: _lookup_refresh(storage, caller, env))
        if found is None:
            raise NotFound(f"no session {session}")
        return found, _fork_of(storage, found.row)

    (found, fork), repairs = _with_repairs(caller, env, work)
    return {**asdict(found.row), **fork, "path": found.path,
            "repaired": [*repairs, *found.rebuilt]}


def _fork_of(storage: Storage, row: IndexRow) -> dict[str, object]:
    """Where the session was forked from, as the hooks or a rewind filed it: the cos session
    (`forked_from`) and the point (`fork_point`: the checkpoint and the agent's own point)."""
    from coding_os import jsonwire

    record = storage.session(row.id)
    if record is None and row.native_id:
        record = storage.session_by_native(row.agent, row.native_id)
    if record is None or record.fork_point is None:
        return {"fork_point": None}
    try:
        point = jsonwire.loads(record.fork_point)
    except ValueError:
        point = None
    return {"fork_point": point, "forked_from": record.forked_from or row.forked_from}


def rename_session(session: str, name: str, env: Mapping[str, str] | None = None,
                   cwd: str | None = None) -> dict[str, object]:
    """Give a session a name (one line, at most 200 characters, never a session id; `/` may be
    inside it, but no `\\`, no leading `/` and no `..` segment: a name is never a path).

    Raises:
        InvalidId: the id is malformed.
        InvalidInput: the name is not acceptable.
        NotFound: no such session.
        Misroute, StorageError, StateIOError: as `import_sessions`.
    """
    from dataclasses import asdict

    from coding_os.sessions.transcript import validate_title

    _validate_lookup(session)
    try:
        name = validate_title(name)
    except InvalidInput as exc:  # the rules are those of titles; the message speaks of names
        raise InvalidInput(str(exc).replace("title", "name", 1)) from None
    caller = Caller(env, cwd)

    def work(storage: Storage) -> dict[str, object]:
        row = _find(storage, caller, env, session)
        storage.set_name(row.id, name)
        row.name = name
        return asdict(row)

    return _with_index(caller, env, work)


def remove_session(session: str, env: Mapping[str, str] | None = None,
                   cwd: str | None = None) -> dict[str, object]:
    """Remove a cos-native session: its transcript moves to `<state_dir>/trash/`, its row goes.

    Native logs (Claude Code, Codex) belong to their tool and are never deleted by cos.

    Raises:
        InvalidId: the id is malformed.
        InvalidInput: the session is not cos-native.
        NotFound: no such session.
        Misroute, StorageError, StateIOError: as `import_sessions`.
    """
    from coding_os import durable

    _validate_lookup(session)
    caller = Caller(env, cwd)

    def work(storage: Storage) -> dict[str, object]:
        row = _find(storage, caller, env, session)
        if row.kind != "cos":
            tool = {"claude": "Claude Code", "codex": "Codex"}.get(row.kind, row.kind)
            raise InvalidInput(f"{row.id} is a {tool} session: its log belongs to {tool} and "
                               "cos never deletes it")
        trashed = None
        from coding_os.sessions.transcript import transcript_path

        path = transcript_path(caller.tiers, row.id)
        if os.path.lexists(path):
            trash = durable.ensure_dir(os.path.join(caller.tiers.state_dir, "trash"))
            trashed = os.path.join(trash, os.path.basename(path))
            try:
                os.replace(path, trashed)
            except OSError as exc:
                raise durable.io_error(path, exc) from None
        storage.remove_index_row(row.id)
        return {"id": row.id, "removed": True, "trash": trashed}

    return _with_index(caller, env, work)


# Resume and fork (DESIGN.md §4.3, §4.4): the finding, the restore report and the handover live
# in coding_os.sessions.resume, imported when first used.

if TYPE_CHECKING:
    from coding_os.sessions.resume import (ForkReport, Found, Handover, RestoreReport,
                                           ResumeScope)

__all__ += [
    "resume_session",
    "fork_any_session",
    "hand_over",
]


def _resume_scope(caller: Caller, env: Mapping[str, str]) -> ResumeScope:
    """The caller's checkout, its repository's directories, and its own sessions (excluded from
    `--continue`)."""
    from coding_os.adapters import PANEL_ENV_VARS
    from coding_os.sessions.resume import ResumeScope
    from coding_os.state.caller import read_panel_session

    current: set[str] = set()
    panel = read_panel_session(caller.panel_dir)
    if panel is not None:
        current.update(value for value in panel if value)
    current.update(env[var] for var in PANEL_ENV_VARS if env.get(var))
    if caller.native:
        current.add(caller.native)
    return ResumeScope(here=_checkout_dir(caller, env),
                       repo=_scope_dirs(caller, "repo", env) or [], current=current)


def resume_session(session: str | None = None, *, latest: bool = False, pr: str | None = None,
                   materialize: bool = True, env: Mapping[str, str] | None = None,
                   cwd: str | None = None) -> RestoreReport:
    """Find a session to resume (exact id or name, `latest` of this checkout, or pull request
    `pr`) and return its restore report; nothing is executed (see `hand_over`).

    A session another host wrote (DESIGN.md §8) is first materialised here from its replica,
    its paths mapped to this host's checkout (coding_os.hosts.materialize; with
    `materialize` false nothing is written and the report says what would be), and taken over
    by this host (`RestoreReport.moved_from`): its new lines are replicated from here.

    Raises:
        InvalidId: the id or name is malformed (checked before any lookup).
        InvalidInput: not exactly one way to find it; a malformed pull request.
        NotFound: no such session, even after an import and a scan of the transcripts.
        Ambiguous: several sessions have the name or link the pull request.
        CrossProject: the session belongs to another project; the message is the command to run.
        Conflict: a local file differs from the replica of another host's session.
        Misroute, StorageError, StateIOError: as `import_sessions`.
    """
    from coding_os.sessions import resume
    from coding_os.hosts.identity import this_host

    if session is not None:
        resume.validate_key(session)
    if pr is not None:
        resume.pr_number(pr)
    caller = Caller(env, cwd)
    environ = os.environ if env is None else env
    host = this_host(environ)
    scope = _resume_scope(caller, environ)
    claude_dir, codex_dir = _native_dirs(environ)

    def work(storage: Storage) -> RestoreReport:
        try:
            found = resume.find_for_resume(
                storage, caller.tiers, scope, lambda: _lookup_refresh(storage, caller, env),
                key=session,
                latest=latest, pr=pr, claude_dir=claude_dir)
        except NotFound:
            # A session a conversation rewind made has no log until its handover runs.
            pending = (resume.pending_rewind_report(storage, caller.tiers, session)
                       if session is not None else None)
            if pending is None:
                raise
            return pending
        if storage.shared and found.row.host is not None and found.row.host != host:
            return _restore_elsewhere(storage, found, scope, caller, host, claude_dir,
                                      codex_dir, materialize)
        return resume.restore_report(found, scope, caller.tiers)

    report, repairs = _with_repairs(caller, env, work)
    report.rebuilt[:0] = repairs
    return report


def _restore_elsewhere(storage: Storage, found: Found, scope: ResumeScope, caller: Caller,
                       host: str, claude_dir: str, codex_dir: str, write: bool) -> RestoreReport:
    """The restore report of another host's session, materialised here (see resume_session)."""
    from coding_os.hosts.materialize import restore_report_elsewhere
    from coding_os.hosts.identity import project_keys

    root = caller.resolution.project_root
    return restore_report_elsewhere(storage, found, scope, caller.tiers, local_host=host,
                                    local_root=root, local_keys=lambda: project_keys(root),
                                    claude_dir=claude_dir, codex_dir=codex_dir, write=write)


def fork_any_session(session: str, at_seq: int | None = None, name: str | None = None, *,
                     dry_run: bool = False, env: Mapping[str, str] | None = None,
                     cwd: str | None = None) -> ForkReport:
    """Fork a session found by id or name: a cos-native one into a new transcript (unless
    `dry_run`), which the index learns at once; a Claude Code or Codex one gets the handover to
    its own fork (`claude --resume <id> --fork-session`, `codex fork <id>`), not executed here.

    Raises:
        InvalidId: the id or name is malformed (checked before any lookup).
        InvalidInput: a bad seq or name; `--at`/`--name` for a Claude Code or Codex session;
            a sidechain of a fork.
        NotFound, Ambiguous, CrossProject: as `resume_session`.
        Misroute, StorageError, StateIOError: as `import_sessions`.
    """
    from dataclasses import asdict

    from coding_os.sessions import resume, transcript

    resume.validate_key(session)
    if name is not None:
        transcript.validate_title(name)
    caller = Caller(env, cwd)
    environ = os.environ if env is None else env
    scope = _resume_scope(caller, environ)

    def work(storage: Storage) -> ForkReport:
        found = resume.find_for_resume(storage, caller.tiers, scope,
                                       lambda: _lookup_refresh(storage, caller, env), key=session)
        row = found.row
        where, relocation = resume.place(row, scope, verb="fork")
        handover = resume.fork_handover(row, where)
        report = resume.ForkReport(path=found.path, source=asdict(row), session=None,
                                   transcript=None, fork_point=at_seq, copied=None,
                                   relocation=relocation, cwd=where, handover=handover,
                                   dry_run=dry_run)
        if handover is not None:
            if at_seq is not None or name is not None:
                raise InvalidInput(f"{row.id} is a {row.kind} session: --at and --name apply to "
                                   "cos-native sessions (name the fork with `cos sessions "
                                   "rename` once it appears)")
            return report
        if dry_run:
            return report
        forked = transcript.fork(caller.tiers, row.id, at_seq, name)
        _lookup_refresh(storage, caller, env)
        if name is not None:
            storage.set_name(forked.session, name)
        report.session, report.transcript = forked.session, forked.path
        report.fork_point, report.copied = forked.fork_point, forked.copied
        return report

    return _with_index(caller, env, work)


def hand_over(handover: Handover, announce: Callable[[], None] | None = None) -> NoReturn:
    """Run the agent in place of this process, in the session's directory (never returns);
    `announce` runs just before, once the agent and the directory are known to be there.

    Raises:
        NotFound: the agent is not on PATH or the directory cannot be entered.
        CosError: the exec failed.
    """
    from coding_os.sessions.resume import hand_over as exec_agent

    exec_agent(handover, announce)


__all__ += ["resumable_sessions", "PICKER_FIELDS"]

# The fields of a session the picker lists and previews: a listed session's and its prompts.
PICKER_FIELDS = SESSION_FIELDS + ("first_prompt", "last_prompt")


def resumable_sessions(scope: str = "worktree", search: str | None = None,
                       this_branch: bool = False, limit: int = 50,
                       env: Mapping[str, str] | None = None, cwd: str | None = None
                       ) -> list[dict[str, object]]:
    """One page of the sessions `cos resume` may pick, most recently active first, from the
    index as it stands (no import: see `import_sessions`); rows have the PICKER_FIELDS.

    The caller's own sessions and sidechains are left out; `this_branch` keeps the sessions of
    the branch checked out here. The cost follows the page (ORDER BY last_active LIMIT).

    Raises:
        InvalidInput: an unknown scope or a negative limit.
        Misroute, StorageError: as `import_sessions`.
    """
    if scope not in SESSION_SCOPES:
        raise InvalidInput(f"scope must be one of {', '.join(SESSION_SCOPES)}, not {scope!r}")
    if limit < 0:
        raise InvalidInput("the limit must be zero or more")
    caller = Caller(env, cwd)
    environ = os.environ if env is None else env
    dirs = _scope_dirs(caller, scope, environ)
    mine = _resume_scope(caller, environ).current
    branch = git_branch(_checkout_dir(caller, environ)) if this_branch else None

    def keep(row: IndexRow) -> bool:
        return (row.parent is None and row.id not in mine and (row.native_id or "") not in mine
                and (branch is None or row.branch == branch))

    def work(storage: Storage) -> list[dict[str, object]]:
        # Rows left out make a page short: ask for more until it is full or the index ends.
        fetch = limit + len(mine)
        while True:
            rows = storage.index_rows(search=search or None, cwd_under=dirs, limit=fetch)
            kept = [_row_dict(row, PICKER_FIELDS) for row in rows if keep(row)]
            if len(kept) >= limit or len(rows) < fetch:
                return kept[:limit]
            fetch *= 4

    return _with_index(caller, env, work)


# The brain (DESIGN.md §8): tasks, the work log and search, in coding_os.brain. `who` is the
# session a write is filed under (brain.attribution); the command line leaves it None and gets
# the caller's panel or active session.


def _who(caller: Caller, who: Attribution | None, env: Mapping[str, str] | None) -> Attribution:
    from coding_os.brain.attribution import attribute

    return who if who is not None else attribute(caller, env=env, synthetic=None)


def task_create(title: object, body: object = None, status: object = "todo",
                who: Attribution | None = None, env: Mapping[str, str] | None = None,
                cwd: str | None = None) -> dict[str, object]:
    """Add a task to the project's board; returns it as JSON.

    Raises:
        InvalidInput: empty or too long title, too long body, unknown status.
        StorageError: the database cannot be used.
    """
    from coding_os.brain import tasks

    caller = Caller(env, cwd)
    with _storage(caller, env) as storage:
        task = tasks.create_task(storage, caller.tiers, title, body, _who(caller, who, env),
                                 status, redacting=redact.configured(caller.tiers.state_dir))
        return tasks.task_dict(task, moves=tasks.MOVES_IN_RESULT, storage=storage)


def task_move(task: object, status: object, note: object = None, force: bool = False,
              who: Attribution | None = None, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> dict[str, object]:
    """Move a task to another status (to `doing`: claim it); returns it as JSON.

    Raises:
        InvalidInput: a bad task id, status or note.
        NotFound: no such task.
        Conflict: another session is doing it (without `force`), or it changed meanwhile.
        StorageError: the database cannot be used.
    """
    from coding_os.brain import tasks

    caller = Caller(env, cwd)
    with _storage(caller, env) as storage:
        moved = tasks.move_task(storage, caller.tiers, task, status, _who(caller, who, env),
                                note, force, redacting=redact.configured(caller.tiers.state_dir))
        return tasks.task_dict(moved, moves=tasks.MOVES_IN_RESULT, storage=storage)


def task_list(status: object = None, owner: str | None = None, cursor: object = None,
              limit: object = 50, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> dict[str, object]:
    """A page of tasks by number: `{"tasks": [...], "next_cursor": TASK-n or None}`.

    Raises:
        InvalidInput: an unknown status, a bad cursor or limit.
        StorageError: the database cannot be used.
    """
    from coding_os.brain import tasks

    state, after, size = tasks.task_page_query(status, cursor, limit)
    with _storage(Caller(env, cwd), env) as storage:
        return tasks.task_page(storage, state, owner, after, size)


def task_show(task: object, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> dict[str, object]:
    """A task with its moves and its latest work-log lines.

    Raises:
        InvalidInput: a bad task id.
        NotFound: no such task.
        StorageError: the database cannot be used.
    """
    from coding_os.brain import tasks

    n = tasks.parse_task_id(task)
    with _storage(Caller(env, cwd), env) as storage:
        found = storage.task(n)
        if found is None:
            raise NotFound(f"no task TASK-{n}")
        out = tasks.task_dict(found, moves=tasks.MOVES_SHOWN, storage=storage)
        out["work_log"] = [tasks.work_log_dict(e) for e in storage.work_log(task=n, limit=20)]
        return out


def work_log_append(text: object, task: object = None, who: Attribution | None = None,
                    env: Mapping[str, str] | None = None,
                    cwd: str | None = None) -> dict[str, object]:
    """Add a line to the project's work log; returns it as JSON.

    Raises:
        InvalidInput: empty or too long text, a bad task id.
        NotFound: the task does not exist.
        StorageError: the database cannot be used.
    """
    from coding_os.brain import tasks

    caller = Caller(env, cwd)
    with _storage(caller, env) as storage:
        entry = tasks.append_work_log(storage, text, _who(caller, who, env), task,
                                      redacting=redact.configured(caller.tiers.state_dir))
        return tasks.work_log_dict(entry)


def work_log(session: str | None = None, task: object = None, cursor: object = None,
             limit: object = 50, env: Mapping[str, str] | None = None,
             cwd: str | None = None) -> dict[str, object]:
    """A page of the work log, newest first: `{"entries": [...], "next_cursor": N or None}`.

    Raises:
        InvalidInput: a bad task id, cursor or limit.
        StorageError: the database cannot be used.
    """
    from coding_os.brain import tasks

    n, before, size = tasks.work_log_page_query(task, cursor, limit)
    with _storage(Caller(env, cwd), env) as storage:
        return tasks.work_log_page(storage, session, n, before, size)


def search(query: object, kinds: list[str] | None = None, session: str | None = None,
           cursor: object = None, limit: object = 20, progress: Progress | None = None,
           env: Mapping[str, str] | None = None, cwd: str | None = None) -> dict[str, object]:
    """A page of what the agents did that holds every word of `query` (observations, work log,
    tasks, transcripts), newest first: `{"results": [...], "next_cursor": N or None}`.

    Raises:
        InvalidInput: a query without words, too long, a bad kind, cursor or limit.
        StorageError: the database cannot be used.
    """
    from coding_os.brain.paging import page_size, parse_cursor
    from coding_os.brain.search import MAX_PAGE, parse_query, search_page, sync_transcripts

    parse_query(query)  # bad input is refused before anything is read
    before = parse_cursor(cursor)
    size = page_size(limit, maximum=MAX_PAGE)
    caller = Caller(env, cwd)
    with _storage(caller, env) as storage:
        _lookup_refresh(storage, caller, env)  # a session started since is searchable too
        sync_transcripts(storage, caller.tiers, progress)
        return search_page(storage, query, kinds, session, before, size).to_dict()


# Checkpoints and rewind (DESIGN.md §5): coding_os.checkpoints, imported when first used.

if TYPE_CHECKING:
    from coding_os.checkpoints.settings import Settings as CheckpointSettings

__all__ += [
    "checkpoint_create",
    "recover_interrupted_restore",
    "checkpoint_list",
    "checkpoint_verify",
    "checkpoint_usage",
    "checkpoint_collect",
    "rewind",
    "rewind_undo",
    "rewind_summarize",
]

REWIND_PARTS = ("code", "conversation", "both")


def _checkpoint_context(env: Mapping[str, str] | None, cwd: str | None, create: bool = True
                        ) -> tuple[Caller, str, CheckpointSettings]:
    """The caller, the tree its checkpoints cover (the top of its git working tree, else its
    checkout) and the `checkpoints:` settings; an interrupted restore is completed first. The
    state dir is made only when `create` (a command that only reads or rewinds makes none)."""
    from coding_os.checkpoints.settings import Settings
    from coding_os.checkpoints.restore import recover_pending
    from coding_os.git.repo import checkout_root

    environ = os.environ if env is None else env
    caller = Caller(env, cwd, create=create)
    checkout = _checkout_dir(caller, environ)
    root = checkout_root(checkout) or os.path.realpath(checkout)
    settings = Settings(load_config(caller.resolution.project_root))
    recover_pending(caller.tiers)
    return caller, root, settings


def _caller_session(caller: Caller, session: str | None) -> str | None:
    """`session` validated, or the caller's own (its panel's), or None."""
    from coding_os.errors import InvalidId
    from coding_os.state.caller import read_panel_session
    from coding_os.state.identity import is_session_id

    if session is not None:
        if not is_session_id(session):
            raise InvalidId(f"not a cos session id: {session[:80]!r} (ses-<agent>-…)")
        return session
    current = read_panel_session(caller.panel_dir)
    return current[0] if current else None


def checkpoint_create(session: str | None = None, mode: str | None = None,
                      paths: list[str] | None = None, env: Mapping[str, str] | None = None,
                      cwd: str | None = None) -> dict[str, Any]:
    """Take a checkpoint of the caller's tree now (see coding_os.checkpoints.take.create).

    Raises:
        InvalidId: a malformed session id.
        InvalidInput: a bad mode, a path outside the tree, tracked without paths.
        GitError, StateIOError: the snapshot cannot be taken or stored.
    """
    from coding_os.daemon.client import ask_watcher
    from coding_os.checkpoints.take import create

    caller, root, settings = _checkpoint_context(env, cwd)
    sid = _caller_session(caller, session)
    seq = _transcript_seq(caller, sid)
    record = create(caller.tiers, root, session=sid, agent=caller.agent if sid else None,
                    mode=mode or settings.mode, paths=paths, trigger="manual", seq=seq,
                    settings=settings, watcher=ask_watcher)
    if seq is not None and sid is not None:
        # A cos-native session's transcript records where the checkpoint was taken.
        from coding_os.sessions import transcript

        fields: dict[str, object] = {"checkpoint": record["id"]}
        if isinstance(record.get("turn"), int):
            fields["turn"] = record["turn"]
        transcript.append(caller.tiers, sid, "checkpoint", fields)
    return record


def recover_interrupted_restore(env: Mapping[str, str] | None = None,
                                cwd: str | None = None) -> dict[str, Any] | None:
    """Complete a restore that was interrupted (its journal) before anything else runs; None
    when there was none. Cheap when there is none: two stats."""
    from coding_os.checkpoints.restore import recover_pending
    from coding_os.checkpoints.lock import pending

    caller = Caller(env, cwd, create=False)
    if not pending(caller.tiers.checkpoints_dir):
        return None
    return recover_pending(caller.tiers)


def _transcript_seq(caller: Caller, session: str | None) -> int | None:
    """The last seq of a cos-native session's transcript, or None (none, or not cos-native)."""
    if session is None:
        return None
    from coding_os.sessions import transcript

    path = transcript.transcript_path(caller.tiers, session)
    return transcript.last_seq(path) if os.path.exists(path) else None


def checkpoint_list(session: str | None = None, env: Mapping[str, str] | None = None,
                    cwd: str | None = None) -> list[dict[str, Any]]:
    """Checkpoints of this state dir, newest first (of one session, when given; a session
    started by /clear gets the cleared session's latest checkpoint first)."""
    from coding_os.checkpoints.rewind import listing

    caller, _, _ = _checkpoint_context(env, cwd, create=False)
    sid = _caller_session(caller, session) if session is not None else None
    return listing(caller.tiers, sid)


def checkpoint_verify(env: Mapping[str, str] | None = None,
                      cwd: str | None = None) -> dict[str, Any]:
    """Re-hash every checkpoint object and check every reference; touches nothing."""
    from coding_os.checkpoints.upkeep import verify

    caller = Caller(env, cwd)
    return verify(caller.tiers)


def checkpoint_usage(env: Mapping[str, str] | None = None,
                     cwd: str | None = None) -> dict[str, Any]:
    """Disk used by checkpoints, and the cap."""
    from coding_os.checkpoints.settings import Settings
    from coding_os.checkpoints.upkeep import usage

    caller = Caller(env, cwd)
    return usage(caller.tiers, Settings(load_config(caller.resolution.project_root)))


def checkpoint_collect(dry_run: bool = False, env: Mapping[str, str] | None = None,
                       cwd: str | None = None) -> dict[str, Any]:
    """`cos gc` for checkpoints: those older than cleanup_period_days, then unreferenced
    objects."""
    from coding_os.checkpoints.upkeep import collect
    from coding_os.sessions.retention import cleanup_period_days

    environ = os.environ if env is None else env
    caller = Caller(env, cwd)
    period = cleanup_period_days(load_config(caller.resolution.project_root), environ)
    return collect(caller.tiers, dry_run=dry_run, older_than_s=period * 86400)


def rewind(checkpoint: str, part: str = "code", dry_run: bool = False, in_place: bool = False,
           env: Mapping[str, str] | None = None, cwd: str | None = None) -> dict[str, Any]:
    """Rewind the code, the conversation or both to `checkpoint` (`dry_run`: the preview only).

    The code is restored atomically, after a checkpoint of the tree as it is (so `rewind_undo`
    brings it back). The conversation of a cos-native session gets a `rewind` entry (nothing is
    deleted); a Claude Code session gets the handover that resumes it at the checkpoint's point
    (a new session, or the same with `in_place`); a Codex thread is forked through the turn
    before the checkpoint's by `codex app-server` (or reverted, `in_place`), and the handover
    resumes it (sessions.conversation). Everything is checked before anything is done: when
    the conversation cannot be rewound, the code is not restored either.

    Raises:
        InvalidInput, NotFound: a bad part or checkpoint id, an unknown checkpoint, another
            tree's checkpoint, a checkpoint of another session than the caller's; the native
            point is not in the agent's log, or the app-server cannot load the thread.
        RestoreError: the restore is not safe (nothing changed).
        DamagedObject, GitError, StateIOError, BackendError: nothing changed.
    """
    from coding_os.daemon.client import ask_watcher
    from coding_os.checkpoints import points
    from coding_os.checkpoints.rewind import preview, rewind_code

    if part not in REWIND_PARTS:
        raise InvalidInput(f"rewind --code, --conversation or --both, not {part!r}")
    if not points.valid_id(checkpoint):
        raise InvalidInput(f"not a checkpoint id: {checkpoint[:80]!r} (cp-YYYYMMDD-HHMMSS-…)")
    caller, root, settings = _checkpoint_context(env, cwd, create=False)
    record = points.load(caller.tiers.checkpoints_dir, checkpoint)
    sid = _caller_session(caller, None)
    report: dict[str, object] = {"checkpoint": checkpoint, "part": part, "dry_run": dry_run}
    plan = None
    if part in ("conversation", "both"):
        from coding_os.sessions.conversation import plan_rewind

        owner = record.get("session")
        if sid is not None and isinstance(owner, str) and not _in_lineage(caller, sid, owner):
            raise InvalidInput(f"checkpoint {checkpoint} is of session {owner}, not of this "
                               f"panel's session {sid}: its conversation is not this one")
        plan = plan_rewind(caller.tiers, record, in_place=in_place, env=env)
        if part == "conversation" and not plan.available:
            raise InvalidInput(f"{plan.note} (cos rewind {checkpoint} --code)")
    engine = plan is not None and plan.kind in ("claude", "codex") and _engine_run(
        caller, plan.session)
    if plan is not None and engine and not dry_run:
        _check_not_served(caller, plan.session)  # before anything is done
    conversation_first = plan is not None and plan.kind == "codex"  # the uncertain half first
    if plan is not None and conversation_first:
        report["conversation"] = _rewind_conversation(caller, plan, engine, dry_run, env)
    if part in ("code", "both"):
        if dry_run:
            report["code"] = preview(caller.tiers, root, checkpoint, settings,
                                     watcher=ask_watcher)
        else:
            report["code"] = rewind_code(caller.tiers, root, checkpoint, session=sid,
                                         agent=caller.agent, settings=settings,
                                         watcher=ask_watcher)
    if plan is not None and not conversation_first:
        report["conversation"] = _rewind_conversation(caller, plan, engine, dry_run, env)
    return report


def _engine_run(caller: Caller, session: str) -> bool:
    """Whether the engine runs `session` (it has an events log): its conversation is rewound
    in place of a handover, for its next input."""
    from coding_os.runtime.events import events_path

    return os.path.exists(events_path(caller.tiers, session))


def _check_not_served(caller: Caller, session: str) -> None:
    """Refuse to rewind a session a process serves now (a job's runner, a cos protocol).

    Raises:
        Conflict: it is being served.
    """
    from coding_os.runtime.events import take_lease

    take_lease(caller.tiers, session).release()


def _rewind_conversation(caller: Caller, plan: Any, engine: bool, dry_run: bool,
                         env: Mapping[str, str] | None) -> dict[str, Any]:
    """The conversation half: a handover (plan.apply), or for a session the engine runs, the
    session pointed at the rewound conversation for its next input (SessionCore.repoint)."""
    if not engine:
        report: dict[str, Any] = plan.apply(caller.tiers, dry_run)
        return report
    import asyncio

    from coding_os.runtime.core import open_session

    async def repoint() -> dict[str, Any]:
        # Served by this process meanwhile (the lease), so nothing else starts it in between.
        core = open_session(plan.session, str(plan.cwd), env=env, repair=not dry_run)
        try:
            options = core.settings.options if core.settings else {}
            program = options.get("program")
            done: dict[str, Any] = plan.apply_to_engine(
                dry_run, program=program if isinstance(program, str) else None)
            point = done.get("repoint")
            if not dry_run and isinstance(point, dict):
                await core.repoint(point["native_id"], point["resume_at"], bool(point["fork"]))
                done["note"] = (f"{plan.session}'s next input goes on from the checkpoint "
                                f"(cos protocol --session {plan.session}, or cos respawn of "
                                "its job)")
            return done
        finally:
            await core.shutdown()

    return asyncio.run(repoint())


def _in_lineage(caller: Caller, session: str, ancestor: str) -> bool:
    """Whether `ancestor` is `session` or a session it was forked or cleared from (a rewound
    conversation goes on in a new session of the same lineage)."""
    from coding_os.state import presence
    from coding_os.state.identity import agent_of_session

    seen: set[str] = set()
    current: str | None = session
    while current is not None and current not in seen:
        if current == ancestor:
            return True
        seen.add(current)
        agent = agent_of_session(current)
        record = presence.read_presence(caller.tiers, agent, current) if agent else None
        parent = (record or {}).get("forked_from") or (record or {}).get("cleared_from")
        current = parent if isinstance(parent, str) else None
    return False


def rewind_undo(env: Mapping[str, str] | None = None,
                cwd: str | None = None) -> dict[str, Any]:
    """Undo the last rewind of the caller's tree (itself undoable).

    Raises:
        NotFound: no rewind to undo; as `rewind`.
    """
    from coding_os.daemon.client import ask_watcher
    from coding_os.checkpoints.rewind import undo

    caller, root, settings = _checkpoint_context(env, cwd, create=False)
    sid = _caller_session(caller, None)
    return {"undo": undo(caller.tiers, root, session=sid, agent=caller.agent,
                         settings=settings, watcher=ask_watcher)}


def rewind_summarize(checkpoint: str, direction: str, instructions: str | None = None,
                     dry_run: bool = False, env: Mapping[str, str] | None = None,
                     cwd: str | None = None) -> dict[str, Any]:
    """Summarise the conversation from `checkpoint` on (`direction` "from") or up to it ("up-to")
    with the configured summariser: a cos-native session gets a `summary` entry
    (sessions.conversation.summarize_around); a Claude Code or Codex session gets a new native
    session the agent resumes as its own, listed in the index forked from the original
    (sessions.native_summary; the report's `handover` is the command to continue).

    Raises:
        InvalidInput, NotFound: a bad direction or checkpoint; a checkpoint of no session.
        SummaryError: the configured summariser failed.
    """
    from coding_os.checkpoints import points
    from coding_os.sessions import transcript
    from coding_os.sessions.conversation import (
        SUMMARY_DIRECTIONS,
        summarize_around,
        summarizer_command,
    )

    if direction not in SUMMARY_DIRECTIONS:
        raise InvalidInput(f"summarize from or up-to, not {direction!r}")
    if not points.valid_id(checkpoint):
        raise InvalidInput(f"not a checkpoint id: {checkpoint[:80]!r} (cp-YYYYMMDD-HHMMSS-…)")
    caller = Caller(env, cwd, create=False)
    record = points.load(caller.tiers.checkpoints_dir, checkpoint)
    session = record.get("session")
    if not isinstance(session, str):
        raise InvalidInput(f"checkpoint {checkpoint} belongs to no session: nothing to summarise")
    command = summarizer_command(load_config(caller.resolution.project_root))
    skipped = None
    if command is not None:
        # A command from the repository: never under --dry-run, and only with consent.
        if dry_run:
            command, skipped = None, "summarizer.command is not run under --dry-run"
        else:
            from coding_os.trust import require

            require(caller.resolution.project_root, caller.resolution.hub,
                    f"summarizer.command ({command[:80]!r})")
    path = transcript.transcript_path(caller.tiers, session)
    if os.path.exists(path):
        kind, source = "cos", path
    else:
        row = show_session(session, env, cwd)
        kind, source = str(row.get("kind")), str(row.get("source_path") or "")
        if not source:
            raise NotFound(f"session {session} has no log to summarise")
    if kind in ("claude", "codex"):
        # A new native session the agent resumes as its own (sessions.native_summary).
        from coding_os.sessions.native_summary import summarize_native

        _, codex_dir = _native_dirs(os.environ if env is None else env)
        report = summarize_native(record, direction, kind, source, instructions, command,
                                  dry_run, redacting=redact.configured(caller.tiers.state_dir),
                                  codex_sessions=os.path.join(codex_dir, "sessions"))
        if report["written"] is not None:
            _link_summary(caller, env, row, report)
    else:
        report = summarize_around(caller.tiers, record, direction, kind, source, instructions,
                                  command, dry_run)
    if skipped is not None:
        report["summarizer_note"] = skipped
    return report


def _link_summary(caller: Caller, env: Mapping[str, str] | None, row: Mapping[str, object],
                  report: dict[str, Any]) -> None:
    """List the native session a summary wrote in the index, forked from the summarised one
    (the index is a cache: a failure to update it is said in the note, never fatal)."""
    from coding_os.errors import CosError
    from coding_os.storage.base import StorageError

    written = report["written"]

    def work(storage: Storage) -> bool:
        _refresh(storage, caller, env)
        new = storage.index_row(written["native_id"])
        if new is None:
            return False
        new.forked_from = str(row.get("id") or row.get("native_id"))
        storage.upsert_index_rows([new])
        return True

    try:
        written["linked"] = _with_index(caller, env, work)
    except (StorageError, CosError) as exc:
        written["linked"] = False
        report["note"] = f"{report['note']} (not listed in the index: {exc})"


# Consent to the repository's commands (DESIGN.md §11): coding_os.trust, imported when used.

__all__ += ["trust"]


def trust(revoke: bool = False, env: Mapping[str, str] | None = None,
          cwd: str | None = None) -> dict[str, object]:
    """Trust this project's `.coding-os.yaml` as it is now (its commands may run), or, with
    `revoke`, take that back.

    Raises:
        InvalidInput: there is no `.coding-os.yaml` to trust, or it cannot be read.
        StateIOError: the user's hub cannot be written.
    """
    from coding_os import trust as consent

    caller = Caller(env, cwd, create=False)
    root, hub = caller.resolution.project_root, caller.resolution.hub
    return consent.revoke(root, hub) if revoke else consent.trust(root, hub)


# Doctor: every health check of the project at once (coding_os.doctor, imported when used).

if TYPE_CHECKING:
    from coding_os.doctor import DoctorReport

__all__ += ["doctor"]


def doctor(env: Mapping[str, str] | None = None, cwd: str | None = None) -> DoctorReport:
    """Check hooks (and whether the agent runs them), state dir resolution, whether cos can
    write there, database, index freshness, orphaned panels, the checkpoint store and the MCP
    server; read-only but for a probe file, and never raises for what it finds (each check has
    a status and a fix; `report.ok` is false when any check failed)."""
    from coding_os.doctor import run_checks

    return run_checks(os.environ if env is None else env,
                      cwd if cwd is not None else os.getcwd())


# The daemon: the on-demand supervisor and its file watcher (coding_os.daemon.server).

__all__ += ["daemon_start", "daemon_stop", "daemon_status"]


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


def serve_protocol(session: str | None = None, agent: str | None = None,
                   cwd: str | None = None, env: Mapping[str, str] | None = None) -> int:
    """`cos protocol`: the protocol of DESIGN.md §7 on stdin and stdout until shutdown or the
    end of stdin; its exit status. `session` serves that session (of this project); `agent` is
    the agent a `configure` without one starts; `cwd` the project and the agent's directory.

    Raises:
        InvalidInput: both a session and an agent, or an agent without a backend.
    """
    from coding_os.runtime.backends import BACKENDS
    from coding_os.runtime.protocol import serve_stdio

    if session is not None and agent is not None:
        raise InvalidInput("give --session or --agent, not both")
    if agent is not None and agent not in BACKENDS:
        raise InvalidInput(f"no backend {agent!r}: expected one of {', '.join(BACKENDS)}")
    return serve_stdio(session=session, agent=agent,
                       cwd=os.path.abspath(cwd) if cwd is not None else None, env=env)


# Background agents (DESIGN.md §6): coding_os.jobs.control makes and drives the jobs.

__all__ += ["bg_start", "agents_list", "job_attach", "job_reply", "job_approve", "job_logs",
            "job_stop", "job_respawn", "job_remove", "jobs_gc"]


def bg_start(prompt: str | None, *, agent: str | None = None, command: str | None = None,
             name: str | None = None, isolation: str = "worktree", model: str | None = None,
             permission_mode: str | None = None, recipe: str | None = None,
             params: list[str] | None = None, cwd: str | None = None,
             env: Mapping[str, str] | None = None) -> dict[str, object]:
    """`cos bg`: start `prompt` (or `command`, or the prompt `recipe` renders) as a background
    job of `agent`; its row, at once.

    Raises:
        InvalidInput: as control.start_job, or a bad agent. RecipeError: as
            `prepare_recipe_run`. StateIOError, JobError: the job could not be made.
    """
    from dataclasses import replace

    from coding_os.jobs import control, jobs
    from coding_os.jobs.recipes import parse_params

    seed_ref = None
    if command is not None:
        settings = run_agent_settings("exec", cwd)
        settings = replace(settings, options={**settings.options, "command": command})
    elif recipe is not None:
        if prompt:
            raise InvalidInput("--recipe gives the prompt: give no PROMPT with it")
        seeded = prepare_recipe_run(recipe, parse_params(tuple(params or ())), agent=agent,
                                    model=model, cwd=cwd, env=env)
        settings, prompt, seed_ref = seeded.settings, seeded.text, seeded.seed_ref
    else:
        if (agent or "").partition(":")[0] == "exec":
            raise InvalidInput("cos bg runs a command with --exec CMD")
        settings = run_agent_settings(agent or "claude", cwd, model=model)
    if permission_mode is not None:
        settings = replace(settings, permission_mode=permission_mode)
    def in_worktree(checkout: str) -> dict[str, object]:
        """Claude Code in a worktree: the cos hooks of the checkout's settings files, which the
        worktree may lack (uncommitted), passed with --settings."""
        from coding_os.install import cos_hooks_settings

        if settings.agent != "claude" or "settings" in settings.options:
            return {}
        hooks = cos_hooks_settings("claude", checkout)
        return {"settings": hooks} if hooks else {}

    job = control.start_job(settings, prompt, name=name, isolation=isolation,
                               seed_ref=seed_ref, in_worktree=in_worktree, env=env)
    return jobs.row(job, alive=True)


def agents_list(every: bool = False, cwd: str | None = None,
                env: Mapping[str, str] | None = None,
                publish: bool = False) -> list[dict[str, Any]]:
    """`cos agents`: the rows of the jobs of the project of `cwd` (or of every project);
    `publish`: also publish this host's rows to a shared storage (for the other hosts'
    `cos agents --all-hosts`; a failure to is no failure of the listing)."""
    from coding_os.jobs import control, roster

    control.ensure_daemon(env)
    rows = control.list_jobs(every_project=every, cwd=cwd, env=env)
    if publish:
        try:
            roster.publish(env)
        except CosError:
            pass
    return rows


def agents_all_hosts(every: bool = False, cwd: str | None = None,
                     env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """`cos agents --all-hosts`: this host's rows as `agents_list` gives them, then the rows
    the other hosts published to the shared storage (of the same repository, or of every
    project), each with its `host`.

    Raises:
        StorageError: the shared storage fails.
    """
    from coding_os.jobs import control, roster
    from coding_os.hosts.identity import project_keys, this_host

    host = this_host(env)
    control.ensure_daemon(env)
    rows = control.list_jobs(every_project=every, cwd=cwd, env=env)
    roster.publish(env)
    keys = [] if every else project_keys(
        Caller(env, os.path.realpath(cwd or os.getcwd())).resolution.project_root)
    return [{**row, "host": host} for row in rows] + roster.published(
        env, project_keys=keys, every_project=every)


def job_elsewhere(job: str, command: str, env: Mapping[str, str] | None = None) -> None:
    """Refuse `cos <command> <job>` for a job this host does not have but another host
    published: CrossProject naming the command to run there. Nothing when no other host has it.

    Raises:
        CrossProject: the job runs on another host.
    """
    from coding_os.jobs import roster

    try:
        row = roster.published_job(job, env)
    except CosError:
        return
    if row is not None:
        raise CrossProject(f"job {row['id']} ({row.get('name')}) runs on another host: "
                           f"on host {row['host']}: cos {command} {row['id']}")


def job_attach(job: str, view: RunView, *, since: int = 0, interactive: bool = False,
               env: Mapping[str, str] | None = None) -> int:
    """`cos attach`: show the job's events after `since` through `view`, then the live ones
    until the job's runner ends (or, `interactive`, Ctrl-D detaches: lines typed are replies,
    Ctrl-C interrupts). 0; 1 when the job ended failed.

    Raises:
        NotFound, Ambiguous: as jobs.resolve. InvalidInput: `since` beyond the end.
    """
    from coding_os.jobs import control, jobs

    found, connection, stored = control.attach(job, since, env)
    if connection is None:
        for event in stored:
            view.show(event)
        view.note(f"job {found.id} ({found.name}) is {found.state.get('state')}: its runner "
                  "does not run")
    else:
        lines = None
        if interactive:
            def lines() -> str | None:
                import sys

                line = sys.stdin.readline()
                return line.rstrip("\n") if line else None
        how = control.follow(connection, view.show, interactive=interactive, lines=lines)
        if how == "detached":
            view.note(f"detached from job {found.id}; it goes on (cos attach {found.id})")
            return 0
    state = jobs.reload(found).state.get("state")
    return 1 if state == "failed" else 0


def job_reply(job: str, text: str, env: Mapping[str, str] | None = None) -> dict[str, object]:
    """`cos reply`: `text` as the job's next user input."""
    from coding_os.jobs import control

    return control.reply(job, text, env)


def job_approve(job: str, allow: bool = True, request: str | None = None,
                env: Mapping[str, str] | None = None) -> dict[str, object]:
    """`cos approve`: answer the approval the job waits for."""
    from coding_os.jobs import control

    return control.approve(job, allow, request, env)


def job_logs(job: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`cos logs`: the job's row, its events and its runner's stderr."""
    from coding_os.jobs import control

    return control.logs(job, env)


def job_stop(job: str, env: Mapping[str, str] | None = None) -> dict[str, object]:
    """`cos stop`: interrupt the job and end its runner; it stays stopped."""
    from coding_os.jobs import control

    return control.stop(job, env)


def job_respawn(job: str | None, every: bool = False,
                env: Mapping[str, str] | None = None) -> list[dict[str, object]]:
    """`cos respawn`: start the runner of a failed or stopped job again (or of every failed
    one), resuming its native session."""
    from coding_os.jobs import control

    return control.respawn(job, every=every, env=env)


def job_remove(job: str, force: bool = False,
               env: Mapping[str, str] | None = None) -> dict[str, object]:
    """`cos rm`: remove a job that does not run and its worktree (refused when it holds work,
    unless `force`); its transcript and events stay."""
    from coding_os.jobs import control

    return control.remove(job, force, env)


def jobs_gc(dry_run: bool = False, env: Mapping[str, str] | None = None,
            cwd: str | None = None) -> dict[str, Any]:
    """The jobs ended longer ago than cleanup_period_days, removed with their worktrees (a
    worktree that holds work is kept, and said)."""
    from coding_os.jobs import control
    from coding_os.sessions.retention import cleanup_period_days

    environ = os.environ if env is None else env
    caller = Caller(environ, cwd, create=False)
    period = cleanup_period_days(load_config(caller.resolution.project_root), environ)
    return control.gc_jobs(period, dry_run, env)


def run_agent_settings(agent: str, cwd: str | None = None, *, model: str | None = None,
                       seed_ref: Mapping[str, object] | None = None) -> SessionSettings:
    """The session settings `cos run --agent AGENT` names: `claude`, `codex`, `exec`, or
    `python:TARGET` with TARGET `module:attr`, `path/to/file.py:attr` (from here) or the name of
    an entry point of the group `coding_os.agents`. `seed_ref` (a recipe's, see
    `prepare_recipe_run`) goes in the options, so the session's `session_configured` records it.

    Raises:
        InvalidInput: no backend of that name, or `python` without a target.
    """
    from coding_os.runtime.backends import BACKENDS
    from coding_os.runtime.core import SessionSettings  # noqa: F811 - at run time

    name, _, target = agent.partition(":")
    if name not in BACKENDS:
        raise InvalidInput(f"no agent {name!r}: expected one of {', '.join(BACKENDS)} "
                           "(python:MODULE:ATTR for a Python agent)")
    options: dict[str, object] = {}
    if name == "python":
        if not target:
            raise InvalidInput("a Python agent is named python:MODULE:ATTR, "
                               "python:FILE.py:ATTR or python:ENTRY_POINT")
        module, sep, attr = target.rpartition(":")
        if sep and (module.endswith(".py") or os.sep in module):
            target = f"{os.path.abspath(module)}:{attr}"  # a file named from here
        options["target"] = target
    elif target:
        raise InvalidInput(f"the {name} agent takes no target ({agent!r})")
    if seed_ref is not None:
        options["seed_ref"] = dict(seed_ref)
    return SessionSettings(agent=name, cwd=os.path.abspath(cwd or os.getcwd()), model=model,
                           options=options)


def run_session(prompt: str | None, view: RunView, *, agent: str | None = None,
                cwd: str | None = None, approvals: str = "deny",
                env: Mapping[str, str] | None = None, recipe: str | None = None,
                params: Mapping[str, str] | None = None, model: str | None = None) -> int:
    """`cos run`: run `prompt` (or the prompt `recipe` renders with `params`) in a new session
    of `agent` (default: the recipe's, else claude) in the foreground, then each further prompt
    `view` reads, showing every event through `view`; the exit status of the last task
    (0 completed, 1 failed or aborted, 130 ended by Ctrl-C). `approvals`: `ask` (the view asks),
    `allow` or `deny` every request.

    Raises:
        InvalidInput: a bad agent or approvals policy; no prompt and no recipe, both, or params
            without a recipe. RecipeError: as `prepare_recipe_run`. Misroute, StateIOError: as
            the state dir.
    """
    from coding_os.runtime.foreground import run_foreground

    if recipe is None:
        if params:
            raise InvalidInput("--param needs --recipe FILE")
        if not prompt:
            raise InvalidInput("give a PROMPT or --recipe FILE")
        settings = run_agent_settings(agent or "claude", cwd, model=model)
        return run_foreground(settings, prompt, view, approvals=approvals, env=env)
    if prompt:
        raise InvalidInput("--recipe gives the prompt: give no PROMPT with it")
    seeded = prepare_recipe_run(recipe, params or {}, agent=agent, model=model, cwd=cwd,
                                env=env)
    return run_foreground(seeded.settings, seeded.text, view, approvals=approvals, env=env)


# Recipes (DESIGN.md §6): coding_os.jobs.recipes loads and renders them; a run from a recipe
# records its seed_ref in the options of its `session_configured` event.

__all__ += ["RecipeRun", "RESUME_MODES", "prepare_recipe_run", "recipe_seed", "plan_rerun",
            "rerun_session"]

RESUME_MODES = ("replay", "rerun")


class RecipeRun:
    """A recipe ready to run: the session settings (with `seed_ref` in their options), the
    prompt text, and the seed_ref."""

    def __init__(self, settings: SessionSettings, text: str,
                 seed_ref: dict[str, object]) -> None:
        self.settings = settings
        self.text = text
        self.seed_ref = seed_ref


def prepare_recipe_run(recipe: str, params: Mapping[str, str], *, agent: str | None = None,
                       model: str | None = None, cwd: str | None = None,
                       env: Mapping[str, str] | None = None) -> RecipeRun:
    """Load and render `recipe` with `params` (file parameters inside the checkout of `cwd`),
    then take a manual checkpoint of that checkout (the seed's `checkpoint`). `agent` and
    `model` win over the recipe's `settings`; the agent defaults to claude. Nothing is written
    when the recipe or a value is refused.

    Raises:
        RecipeError: as `load_recipe` and `render`. InvalidInput: a bad agent.
        GitError, StateIOError: the checkpoint cannot be taken.
    """
    from coding_os.jobs import recipes
    from coding_os.git.repo import checkout_root

    where = os.path.abspath(cwd or os.getcwd())
    loaded = recipes.load_recipe(recipe)
    top = checkout_root(where) or os.path.realpath(where)
    rendered = recipes.render(loaded, params, cwd=where, project=top)
    chosen = agent or loaded.agent or "claude"
    run_agent_settings(chosen, where)  # a bad agent is refused before the checkpoint
    record = checkpoint_create(env=env, cwd=where)
    seed = recipes.seed_ref(loaded.path, rendered.params, str(record["id"]),
                            sha256=loaded.sha256, version=loaded.version)
    settings = run_agent_settings(chosen, where, model=model or loaded.model, seed_ref=seed)
    return RecipeRun(settings, rendered.text, seed)


def recipe_seed(session: str, env: Mapping[str, str] | None = None,
                cwd: str | None = None) -> dict[str, Any] | None:
    """The seed_ref of `session` (a cos session id of this project) when a recipe seeded it,
    else None (also for an id that is no cos session id)."""
    from coding_os.jobs.recipes import session_seed
    from coding_os.state.identity import is_session_id

    if not is_session_id(session):
        return None  # a native id: only cos runs sessions from recipes
    found = session_seed(Caller(env, cwd, create=False).tiers, session)
    return None if found is None else found[0]


def plan_rerun(session: str, *, force: bool = False, env: Mapping[str, str] | None = None,
               cwd: str | None = None) -> dict[str, Any]:
    """What `cos resume SESSION --rerun` does, checked and changing nothing: `mode` (rerun),
    the session, its seed, the recipe file as it is now, the agent settings it ran with, and
    the fresh worktree (`<project>/.coding-os/worktrees/<id>` on branch `cos/<id>`) the rerun
    will run in.

    Raises:
        InvalidId: not a session id. InvalidInput: the session has no recipe seed, or its seed
            has no checkpoint. RecipeError: the recipe file is gone, is refused by
            `load_recipe`, or changed since the seed (unless `force`).
        InvalidInput: the project is in no git checkout.
    """
    import secrets

    from coding_os.jobs import recipes
    from coding_os.jobs.worktrees import worktrees_dir
    from coding_os.state.identity import validate_session_id

    validate_session_id(session)
    caller = Caller(env, cwd, create=False)
    found = recipes.session_seed(caller.tiers, session)
    if found is None:
        raise InvalidInput(f"{session} was not started from a recipe: --replay and --rerun "
                           "are for recipe sessions")
    seed, configured = found
    if not seed.get("checkpoint"):
        raise InvalidInput(f"{session}: its seed names no checkpoint to rerun from")
    loaded = recipes.load_recipe(str(seed["path"]))
    changed = loaded.sha256 != seed["sha256"]
    if changed and not force:
        raise recipes.RecipeError(
            f"recipe {seed['path']} changed since {session} ran it (sha256 "
            f"{str(seed['sha256'])[:12]} then, {loaded.sha256[:12]} now): --force reruns the "
            "file as it is now")
    project = caller.resolution.project_root
    worktree_id = secrets.token_hex(6)
    worktree = os.path.join(worktrees_dir(project), worktree_id)
    options = configured.get("options")
    return {"mode": "rerun", "session": session, "seed": seed,
            "recipe": {"path": loaded.path, "sha256": loaded.sha256, "changed": changed},
            "settings": {"agent": configured.get("agent"), "model": configured.get("model"),
                         "permission_mode": configured.get("permission_mode"),
                         "options": options if isinstance(options, dict) else {}},
            "project": project, "worktree_id": worktree_id, "worktree": worktree,
            "branch": f"cos/{worktree_id}", "checkpoint": seed["checkpoint"]}


def rerun_session(plan: Mapping[str, Any], view: RunView, *, approvals: str = "deny",
                  env: Mapping[str, str] | None = None, cwd: str | None = None) -> int:
    """Run a `plan_rerun` plan: the seed's checkpoint restored into the plan's fresh worktree,
    the recipe rendered there with the seed's params, and run in the foreground with the
    session's agent settings (a new session whose seed_ref is the original's); the exit status
    as `run_session`'s.

    Raises:
        RecipeError: the checkpoint is of no git tree, the recipe or a value is refused now.
        Conflict: the worktree exists. NotFound, DamagedObject, RestoreError, GitError: the
            tree cannot be restored.
    """
    from coding_os.jobs import recipes
    from coding_os.runtime.core import SessionSettings  # noqa: F811 - at run time
    from coding_os.runtime.foreground import run_foreground

    caller = Caller(env, cwd, create=False)
    seed = dict(plan["seed"])
    loaded = recipes.load_recipe(str(seed["path"]))
    restored = recipes.restore_seed_tree(caller.tiers, str(plan["checkpoint"]),
                                         str(plan["project"]), str(plan["worktree_id"]))
    worktree = str(restored["worktree"])
    rendered = recipes.render(loaded, seed["params"], cwd=worktree, project=worktree)
    ran = plan["settings"]
    options = {**ran["options"], "seed_ref": seed}
    settings = SessionSettings(agent=str(ran["agent"]), cwd=worktree, model=ran["model"],
                               permission_mode=ran["permission_mode"], options=options)
    return run_foreground(settings, rendered.text, view, approvals=approvals, env=env)


# The web view (DESIGN.md §10, `cos web`): what its pages read beside the functions above — a
# page of a session's conversation, an engine session's stored events, a job's events as a
# feed, an interrupt, and a checkpoint's per-file diffs.

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ += ["TURNS_PAGE_MAX", "session_turns", "session_events", "session_job", "JobFeed",
            "job_feed", "job_interrupt", "checkpoint_diff"]

TURNS_PAGE_MAX = 500
DIFF_TEXT_MAX = 200_000  # characters of one file's diff shown; the rest is cut and said


def session_turns(session: str, offset: int = 0, limit: int = 50, branch: int | None = None,
                  env: Mapping[str, str] | None = None, cwd: str | None = None
                  ) -> dict[str, Any]:
    """A page of a session's conversation (its live chain, or `branch`): `turns` (role, text,
    ts, tool) from `offset`, at most `limit`, with `total` (None when it is not known),
    `next_offset` (None at the end) and the log's `meta`; only the page is redacted. A cos
    transcript is read from its start, or from where this process's read of an earlier page
    stopped, until one turn past the page (`total` is then None unless that is its end; the
    whole file when a rewind may hide some of it); a Claude
    transcript (a tree whose live chain is known only at its end) is read whole, its turns kept
    in this process while the file is unchanged; a Codex thread is read whole for each page
    (export.read_page).

    Raises:
        InvalidInput: a negative offset, a limit outside 1..TURNS_PAGE_MAX, a bad branch.
        NotFound: no such session, no log, or an offset past the end.
        InvalidId: as `show_session`.
    """
    from dataclasses import asdict

    from coding_os.sessions.export import log_path, read_page

    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInput("the offset must be an integer, 0 or more")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= TURNS_PAGE_MAX:
        raise InvalidInput(f"the page size must be 1 to {TURNS_PAGE_MAX}")
    row, source, replica = _session_log(session, "read", env, cwd)
    with log_path(source, replica) as path:
        page = read_page(path, str(row.get("kind")), offset, limit,
                         redact.configured(Caller(env, cwd).tiers.state_dir), branch)
    if offset and not page.turns:
        raise NotFound(f"session {session} has {page.total} turns: offset {offset} is past "
                       "the end")
    return {"session": row.get("id"), "kind": row.get("kind"), "meta": page.meta,
            "offset": offset, "total": page.total,
            "next_offset": offset + len(page.turns) if page.more else None,
            "turns": [asdict(turn) for turn in page.turns]}


def session_events(session: str, since: int = 0, env: Mapping[str, str] | None = None,
                   cwd: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """The stored events of a session the engine runs, after seq `since`: `events` (the
    first `limit` of them, when given), `last_seq`, and `engine` (False, with no events, for a
    session without an events log: one the agent ran on its own).

    Raises:
        InvalidInput: `since` is not an integer >= 0, or beyond the last seq.
        InvalidId: a malformed session id.
    """
    from itertools import islice

    from coding_os.runtime.events import events_path, last_seq, replay

    _validate_lookup(session)
    caller = Caller(env, cwd)
    path = events_path(caller.tiers, session)
    if not os.path.exists(path):
        return {"engine": False, "events": [], "last_seq": 0}
    end = last_seq(path)
    if isinstance(since, int) and not isinstance(since, bool) and since > end:
        raise InvalidInput(f"seq {since} is beyond the end of {session}'s events (its last "
                           f"seq is {end})")
    events = list(islice(replay(path, since), limit))  # the read ends, its file closed, here
    return {"engine": True, "events": events,
            "last_seq": events[-1]["seq"] if events else max(end, since)}


def session_tokens(session: str, env: Mapping[str, str] | None = None,
                   cwd: str | None = None) -> dict[str, Any]:
    """Token use per turn of a session: `source` ("engine": the usage its finished tasks
    reported; "claude" or "codex": its native log; None: neither holds any) and `turns`, each
    `turn`, `prompt`, `input`, `output`, `cached` (sessions/usage.py).

    Raises:
        InvalidId, NotFound: as `show_session`; NotFound: its log cannot be read.
    """
    from coding_os.runtime.events import events_path, read_since
    from coding_os.sessions.usage import engine_turns, native_turns

    from coding_os.errors import InvalidId

    row = show_session(session, env, cwd)
    try:
        path: str | None = events_path(Caller(env, cwd).tiers, str(row["id"]))
    except InvalidId:  # a native session imported under its agent's id: no events log
        path = None
    from coding_os.sessions.export import log_path

    kind, source = str(row.get("kind")), row.get("source_path")
    events = None
    if path is not None and not os.path.exists(path) and kind == "cos":
        events = _replica_log(row, env, cwd, stream="events")  # another host's, if replicated
    if path is not None and (events is not None or os.path.exists(path)):
        with log_path(path, events) as log:
            turns = engine_turns(read_since(log, 0).events)
        if turns:
            return {"session": row["id"], "source": "engine", "turns": turns}
    if kind in ("claude", "codex") and isinstance(source, str) and source:
        with log_path(source, _replica_log(row, env, cwd)) as native:
            turns = native_turns(native, kind)
        if turns:
            return {"session": row["id"], "source": kind, "turns": turns}
    return {"session": row["id"], "source": None, "turns": []}


def session_sidechains(session: str, branch: int | None = None,
                       env: Mapping[str, str] | None = None,
                       cwd: str | None = None) -> dict[str, Any]:
    """The subagent conversations of a session, each with the turn that started it (its index
    among `session_turns`' turns of the live chain, or of branch `branch`; None when not
    placed): a Claude Code session's sidechains (inline, beside or under its transcript), a cos
    session's sidechains (cos sessions whose `parent` it is); `sidechains`, oldest first
    (sessions/sidechains.py), their turns redacted as the conversation's are.

    Raises:
        InvalidId, NotFound: as `show_session`. InvalidInput: a branch it does not have.
    """
    from coding_os.sessions.export import log_path
    from coding_os.sessions.sidechains import claude_sidechains, cos_sidechains

    row, source, replica = _session_log(session, "read", env, cwd, subagents=True)
    state_dir = Caller(env, cwd).tiers.state_dir
    redacting = redact.configured(state_dir)
    kind = str(row.get("kind"))
    with log_path(source, replica) as path:
        if kind == "claude":
            found = claude_sidechains(path, branch, redacting)
        elif kind == "cos" and branch is None:
            found = cos_sidechains(state_dir, str(row["id"]), path, redacting)
        else:
            found = []
    return {"session": row["id"], "sidechains": found}


def session_job(session: str, env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The row of the background job whose session is `session`, or None."""
    from coding_os.jobs import jobs, roster

    for job in roster.current(env):
        if job.state.get("cos_session") == session:
            return jobs.row(job)
    return None


class JobFeed:
    """A job's events after a seq: through its runner's connection (the stored ones, then the
    live ones, with no gap and no duplicate: the protocol's `resume`) while the runner runs,
    else those stored. `close` may be called from another thread to end a blocked read."""

    def __init__(self, job: dict[str, Any], connection: Any,
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


def job_feed(job: str, since: int = 0, env: Mapping[str, str] | None = None) -> JobFeed:
    """The feed of job `job`'s events after seq `since` (see `JobFeed`).

    Raises:
        NotFound, Ambiguous: as jobs.resolve. InvalidInput: `since` beyond the end.
    """
    from coding_os.jobs import control, jobs

    found, connection, stored = control.attach(job, since, env)
    return JobFeed(jobs.row(found), connection, stored)


def job_interrupt(job: str, env: Mapping[str, str] | None = None) -> dict[str, object]:
    """Interrupt the job's running task (`turn_aborted` `interrupted`); the job goes on.

    Raises:
        NotFound, Ambiguous: as jobs.resolve. Conflict: its runner does not run.
        InvalidInput: the runner refused (no task runs).
    """
    from coding_os.jobs import control, jobs
    from coding_os.errors import Conflict
    from coding_os.runtime.events import last_seq

    found = control.find_job(job, env)
    if found.state.get("pid") is None or not jobs.runner_alive(found):
        raise Conflict(f"job {found.id} ({found.name}) is {found.state.get('state')}: its "
                       f"runner is not running")
    path = found.state.get("events")
    seq = last_seq(path) if isinstance(path, str) and os.path.exists(path) else 0
    connection = control.Connection(found, control.CONNECT_TIMEOUT_S)
    aborted = None
    try:
        if found.state.get("cos_session"):
            connection.send({"type": "resume", "session": found.state["cos_session"],
                             "last_seq": seq})
        connection.send({"type": "interrupt"}, "web-interrupt")
        for event in connection.events():
            msg = event.get("msg") or {}
            if event.get("seq") is None and msg.get("type") == "error":
                raise InvalidInput(f"job {found.id}: {msg.get('message')}")
            if msg.get("type") == "turn_aborted":
                aborted = msg.get("task")
                break
    except TimeoutError:
        pass
    finally:
        connection.close()
    return {"id": found.id, "name": found.name, "task": aborted}


def _file_bytes(root: str, store: Any, manifest: dict[str, object], paths: list[str]
                ) -> dict[str, bytes | None]:
    """The bytes each of `paths` has in `manifest` (None: absent, or not a file it stored)."""
    from coding_os.checkpoints.manifest import resolve
    from coding_os.checkpoints.restore import fetch

    found = resolve(root, manifest, set(paths))
    wanted = [(path, entry, prefix) for path, (entry, prefix, _) in sorted(found.items())
              if entry is not None and entry[0] in ("f", "l")]
    data = fetch(root, store, [{"op": "write", "path": path, "kind": entry[0], "sha1": entry[1],
                                "mode": entry[2], "oid": entry[3], "layer": prefix}
                               for path, entry, prefix in wanted])
    out: dict[str, bytes | None] = {path: None for path in paths}
    for number, (path, _, _) in enumerate(wanted):
        out[path] = data.get(number)
    return out


def _text_diff(path: str, old: bytes | None, new: bytes | None) -> dict[str, Any]:
    import difflib

    a, b = old or b"", new or b""
    if b"\0" in a[:8000] or b"\0" in b[:8000] or len(a) + len(b) > 8 << 20:
        return {"binary": True, "diff": None, "truncated": False}
    lines = difflib.unified_diff(a.decode("utf-8", "replace").splitlines(),
                                 b.decode("utf-8", "replace").splitlines(),
                                 fromfile=f"a/{path}" if old is not None else "/dev/null",
                                 tofile=f"b/{path}" if new is not None else "/dev/null",
                                 lineterm="")
    text = "\n".join(lines)
    truncated = len(text) > DIFF_TEXT_MAX
    return {"binary": False, "diff": text[:DIFF_TEXT_MAX], "truncated": truncated}


def checkpoint_diff(checkpoint: str, against: str = "tree", env: Mapping[str, str] | None = None,
                    cwd: str | None = None) -> dict[str, Any]:
    """The per-file diffs of a checkpoint: from it to the tree now (`tree`: what a rewind
    would undo), or from the checkpoint before it of the same tree to it (`previous`: what
    its turn changed). `files`: path, action (create, delete, change), binary, diff
    (unified, at most DIFF_TEXT_MAX characters; `truncated` says when cut). Changes nothing.

    Raises:
        InvalidInput: a bad id or `against`, a checkpoint of another tree.
        NotFound: no such checkpoint in this project.
        DamagedObject, RestoreError: its objects are missing or damaged.
    """
    from coding_os.daemon.client import ask_watcher
    from coding_os.checkpoints import points
    from coding_os.checkpoints.manifest import diff, read_manifest
    from coding_os.checkpoints.rewind import preview, read_current, row
    from coding_os.checkpoints.store import ObjectStore

    if against not in ("tree", "previous"):
        raise InvalidInput(f"a checkpoint is compared with the tree or the previous one, not "
                           f"{against[:40]!r}")
    if not points.valid_id(checkpoint):
        raise InvalidInput(f"not a checkpoint id: {checkpoint[:80]!r} (cp-YYYYMMDD-HHMMSS-…)")
    caller, root, settings = _checkpoint_context(env, cwd, create=False)
    folder = caller.tiers.checkpoints_dir
    record = points.load(folder, checkpoint)
    if record.get("root") != root:
        raise InvalidInput(f"checkpoint {checkpoint} is of {record.get('root')}, not of {root}")
    store = ObjectStore(folder)
    manifest = read_manifest(store, str(record["manifest"]))
    previous_id = None
    files: list[dict[str, Any]] = []
    if against == "tree":
        shown = preview(caller.tiers, root, checkpoint, settings, watcher=ask_watcher)
        listed = shown["files"]
        assert isinstance(listed, list)
        paths = [str(item["path"]) for item in listed]
        then = _file_bytes(root, store, manifest, paths)
        pairs = [(path, then[path], read_current(root, path)) for path in paths]
    else:
        earlier = [r for r in points.all_records(folder)
                   if str(r["id"]) < checkpoint and r.get("root") == root
                   and r.get("mode") == record.get("mode")]
        if earlier:
            previous_id = str(earlier[-1]["id"])
            before = read_manifest(store, str(earlier[-1]["manifest"]))
            paths = [change[0] for change in diff(root, manifest, before)]
            old = _file_bytes(root, store, before, paths)
        else:  # the first checkpoint of this tree: nothing to compare it with
            paths, old = [], {}
        new = _file_bytes(root, store, manifest, paths)
        pairs = [(path, old.get(path), new[path]) for path in paths]
    for path, a, b in pairs:
        action = "create" if a is None else "delete" if b is None else "change"
        files.append({"path": path, "action": action, **_text_diff(path, a, b)})
    return {"checkpoint": row(record), "against": against, "previous": previous_id,
            "root": root, "files": files}
