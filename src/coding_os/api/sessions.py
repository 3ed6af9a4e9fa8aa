"""Sessions (DESIGN.md §4): cos-native transcripts, the index of every agent's sessions and
what is read of one, resume and fork, summaries and observations, retention."""

from __future__ import annotations

from coding_os.api.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.sessions.listing import PICKER_FIELDS, SESSION_FIELDS, SESSION_SCOPES
    from coding_os.sessions.reading import TURNS_PAGE_MAX
    from collections.abc import Callable, Mapping
    from typing import Any, NoReturn

    from coding_os.sessions.export import ReplicaLog
    from coding_os.sessions.index import Progress, RefreshReport
    from coding_os.sessions.resume import (ForkReport, Found, Handover, RestoreReport,
                                           ResumeScope)
    from coding_os.sessions.retention import RetentionReport
    from coding_os.sessions.transcript import Appended, Forked
    from coding_os.storage.base import Storage

__all__ = ["SESSION_SCOPES", "SESSION_FIELDS", "PICKER_FIELDS", "TURNS_PAGE_MAX",
           "create_session", "append_event", "set_title", "mark_compact", "fork_session",
           "close_session", "import_sessions", "rebuild_index", "list_sessions", "show_session",
           "rename_session", "remove_session", "resume_session", "fork_any_session",
           "hand_over", "resumable_sessions", "export_session", "session_branches",
           "session_turns", "session_events", "session_tokens", "session_sidechains",
           "session_summary", "session_observations", "collect_transcripts"]


# The layers' names this module re-exports, imported when first asked for (`__getattr__`).
_FROM_LAYERS = {"SESSION_SCOPES": "coding_os.sessions.listing",
                "SESSION_FIELDS": "coding_os.sessions.listing",
                "PICKER_FIELDS": "coding_os.sessions.listing",
                "TURNS_PAGE_MAX": "coding_os.sessions.reading"}


def __getattr__(name: str) -> object:
    """A name of `_FROM_LAYERS`, from its layer: importing the facade loads none of them."""
    if name not in _FROM_LAYERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(__import__(_FROM_LAYERS[name], fromlist=[name]), name)


# -- cos-native transcripts (DESIGN.md §4.1, §4.4): coding_os.sessions.transcript -------------


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
    from coding_os.git.repo import branch as git_branch
    from coding_os.sessions import transcript
    from coding_os.state.identity import validate_agent

    if agent is not None:
        validate_agent(agent)
    project = Project(env, cwd)
    worktree = project.resolution.worktree or project.root
    return transcript.create(
        project.tiers, agent or project.caller.agent, native_id=native_id,
        project=project.root, worktree=worktree,
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
    return transcript.append(Project(env, cwd).tiers, session, entry_type, fields,
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
    return transcript.set_title(Project(env, cwd).tiers, session, title, durability=durability)


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
    return transcript.mark_compact(Project(env, cwd).tiers, session, text, from_seq, to_seq,
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
    return transcript.fork(Project(env, cwd).tiers, session, at_seq, name, durability=durability)


def close_session(session: str, *, durability: str = "turn",
                  env: Mapping[str, str] | None = None, cwd: str | None = None) -> Appended:
    """Record that a session ended (an `event` named "close"), fsynced unless durability is none.

    Raises:
        InvalidId: a bad session id.
        NotFound, StateIOError: as `append_event`.
    """
    from coding_os.sessions import transcript

    transcript.session_agent(session)
    return transcript.close(Project(env, cwd).tiers, session, durability=durability)


# -- the index (DESIGN.md §4.2): one list of cos-native, Claude Code and Codex sessions -------


def import_sessions(claude_dir: str | None = None, codex_dir: str | None = None,
                    env: Mapping[str, str] | None = None, cwd: str | None = None
                    ) -> RefreshReport:
    """Import what changed in Claude Code transcripts, Codex rollouts and cos transcripts (on
    a shared storage, the new lines are pushed for the other hosts too).

    Raises:
        Misroute: the state dir cannot be resolved safely.
        StorageError: the database cannot be used.
        StateIOError: the import state cannot be saved.
    """
    project = Project(env, cwd)
    return project.index(lambda storage: project.refresh(storage, claude_dir, codex_dir))


def rebuild_index(progress: Progress | None = None, env: Mapping[str, str] | None = None,
                  cwd: str | None = None) -> RefreshReport:
    """Empty the session index and build it again from every log, read in full.

    Raises:
        Misroute, StorageError, StateIOError: as `import_sessions`.
    """
    from coding_os.sessions import index
    from coding_os.sessions.database import gemini_dir

    project = Project(env, cwd)
    claude_dir, codex_dir = project.native_dirs
    return project.index(lambda storage: index.rebuild(
        storage, project.tiers, claude_dir, codex_dir, progress=progress,
        gemini_dir=gemini_dir(project.environ)))


def list_sessions(scope: str = "worktree", agent: str | None = None, search: str | None = None,
                  limit: int | None = None, refresh: bool = True, this_branch: bool = False,
                  host: str | None = None, all_hosts: bool = False,
                  env: Mapping[str, str] | None = None, cwd: str | None = None
                  ) -> list[dict[str, object]]:
    """Sessions of every kind, most recently active first, after importing what changed.

    `scope`: `worktree` (cwd inside the caller's checkout), `repo` (the repository and all its
    worktrees) or `all`. `this_branch`: only sessions on the branch checked out here.
    Hosts (DESIGN.md §8): this host's sessions, or `host`'s, or every host's (`all_hosts`);
    each row says its `host` (sessions/listing.py `list_rows`).

    Raises:
        InvalidInput: an unknown scope or a negative limit, or `this_branch` outside a branch;
            `host` not a host name, or given with `all_hosts`.
        Misroute, StorageError, StateIOError: as `import_sessions`.
    """
    from coding_os.sessions import listing

    listing.check_query(scope, limit, host, all_hosts)
    project = Project(env, cwd)
    here, dirs = project.host, _scope_dirs(project, scope)
    branch = listing.branch_here(project.checkout) if this_branch else None
    return project.index(lambda storage: listing.list_rows(
        storage, project.root, dirs, here, host=host, all_hosts=all_hosts, agent=agent,
        search=search, limit=limit, branch=branch,
        refresh=project.refresher(storage) if refresh else None))


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
    return _show(Project(env, cwd), session)


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
    from coding_os.sessions import lookup

    lookup.validate_lookup(session)
    name = lookup.check_name(name)
    project = Project(env, cwd)
    return project.index(lambda storage: lookup.rename(storage, session, name,
                                                       project.refresher(storage)))


def remove_session(session: str, env: Mapping[str, str] | None = None,
                   cwd: str | None = None) -> dict[str, object]:
    """Remove a cos-native session: its transcript moves to the trash (`<state_dir>/trash/
    <YYYYMMDD>/…`, deleted a week after that day, as retention's), its row goes.

    Native logs (Claude Code, Codex) belong to their tool and are never deleted by cos.

    Raises:
        InvalidId: the id is malformed.
        InvalidInput: the session is not cos-native.
        NotFound: no such session.
        Misroute, StorageError, StateIOError: as `import_sessions`.
    """
    from coding_os.sessions import lookup

    lookup.validate_lookup(session)
    project = Project(env, cwd)
    return project.index(lambda storage: lookup.remove(storage, project.tiers, session,
                                                       project.refresher(storage)))


# -- resume and fork (DESIGN.md §4.3, §4.4): coding_os.sessions.resume ------------------------


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

    resume.check_request(session, pr)
    project = Project(env, cwd)
    host, scope = project.host, _resume_scope(project)
    report, repairs = project.repairs(lambda storage: resume.resume(
        storage, project.tiers, scope, project.refresher(storage), key=session, latest=latest,
        pr=pr, claude_dir=project.native_dirs[0],
        elsewhere=_elsewhere(project, storage, scope, host, materialize)))
    report.rebuilt[:0] = repairs
    return report


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
    from coding_os.sessions import resume

    resume.check_request(session, name=name)
    project = Project(env, cwd)
    scope = _resume_scope(project)
    return project.index(lambda storage: resume.fork(
        storage, project.tiers, scope, project.refresher(storage), session, at_seq, name,
        dry_run=dry_run))


def hand_over(handover: Handover, announce: Callable[[], None] | None = None) -> NoReturn:
    """Run the agent in place of this process, in the session's directory (never returns);
    `announce` runs just before, once the agent and the directory are known to be there.

    Raises:
        NotFound: the agent is not on PATH or the directory cannot be entered.
        CosError: the exec failed.
    """
    from coding_os.sessions.resume import hand_over as exec_agent

    exec_agent(handover, announce)


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
    from coding_os.git.repo import branch as git_branch
    from coding_os.sessions import listing

    listing.check_query(scope, limit)
    project = Project(env, cwd)
    dirs, mine = _scope_dirs(project, scope), _resume_scope(project).current
    branch = git_branch(project.checkout) if this_branch else None
    return project.index(lambda storage: listing.resumable_rows(
        storage, dirs, mine, search=search, branch=branch, limit=limit))


# -- what is read of one session (DESIGN.md §4.5, §10): coding_os.sessions.reading ------------


def export_session(session: str, fmt: str, env: Mapping[str, str] | None = None,
                   cwd: str | None = None, branch: int | None = None) -> str:
    """A session's conversation as Markdown, JSON or HTML (cos-native, Claude Code or Codex).

    A Claude Code session exports its live chain, or with `branch` the branch of that number
    (`session_branches` lists them).

    Raises:
        InvalidId, NotFound: as `show_session`.
        InvalidInput: an unknown format, or a branch the session does not have.
    """
    from coding_os.runtime.history import tokens
    from coding_os.sessions import reading

    reading.check_format(fmt)
    project = Project(env, cwd)
    row, source, replica = _session_log(project, session, "export")
    usage = tokens(project.tiers, row, lambda stream: _replica(project, row, stream=stream)) \
        if fmt == "html" else None  # the HTML page's header says the session's token use
    return reading.export(row, source, replica, fmt, project.redacting, branch, usage)


def session_branches(row: Mapping[str, object], env: Mapping[str, str] | None = None,
                     cwd: str | None = None) -> dict[str, object]:
    """The live chain and the other branches of a session found by `show_session` (`row`):
    `live_leaf`, `live_entries`, `branches` (number, tip, fork_point, length, messages,
    first_prompt, last_ts) and `warnings`; a session whose log is not a tree has none. Another
    host's session whose file is not here is read from its replica (hosts/remote.py), found
    through the storage `env` and `cwd` select.

    Raises:
        NotFound: the session's log is gone; another host's session has nothing replicated.
        StorageError: as `hosts.remote.replica_log`.
    """
    from coding_os.sessions import reading

    return reading.branches(row, lambda: _replica(Project(env, cwd), row))


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
    from coding_os.sessions import reading

    reading.check_page(offset, limit)
    project = Project(env, cwd)
    row, source, replica = _session_log(project, session, "read")
    return reading.turns_page(row, source, replica, session, offset, limit, project.redacting,
                              branch)


def session_events(session: str, since: int = 0, env: Mapping[str, str] | None = None,
                   cwd: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """The stored events of a session the engine runs, after seq `since`: `events` (the
    first `limit` of them, when given), `last_seq`, and `engine` (False, with no events, for a
    session without an events log: one the agent ran on its own).

    Raises:
        InvalidInput: `since` is not an integer >= 0, or beyond the last seq.
        InvalidId: a malformed session id.
    """
    from coding_os.runtime.history import events_after
    from coding_os.sessions.lookup import validate_lookup

    validate_lookup(session)
    return events_after(Project(env, cwd).tiers, session, since, limit)


def session_tokens(session: str, env: Mapping[str, str] | None = None,
                   cwd: str | None = None) -> dict[str, Any]:
    """Token use per turn of a session: `source` ("engine": the usage its finished tasks
    reported; "claude", "codex" or "gemini": its native log; None: neither holds any) and
    `turns`, each `turn`, `prompt`, `input`, `output`, `cached` (sessions/usage.py).

    Raises:
        InvalidId, NotFound: as `show_session`; NotFound: its log cannot be read.
    """
    from coding_os.runtime.history import tokens

    project = Project(env, cwd)
    row = _show(project, session)
    return tokens(project.tiers, row, lambda stream: _replica(project, row, stream=stream))


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
    from coding_os.sessions import reading

    project = Project(env, cwd)
    row, source, replica = _session_log(project, session, "read", subagents=True)
    return reading.sidechains(row, source, replica, project.tiers.state_dir, project.redacting,
                              branch)


def session_summary(session: str, env: Mapping[str, str] | None = None,
                    cwd: str | None = None) -> dict[str, object] | None:
    """The stored summary of a session, or None.

    Raises:
        StorageError: the database cannot be used.
    """
    from dataclasses import asdict

    with Project(env, cwd).storage() as storage:
        summary = storage.summary(session)
        return asdict(summary) if summary else None


def session_observations(session: str | None = None, env: Mapping[str, str] | None = None,
                         cwd: str | None = None) -> list[dict[str, object]]:
    """Stored observations (after moving the spool into the database), optionally of one session.

    Raises:
        StorageError: the database cannot be used.
    """
    from dataclasses import asdict

    with Project(env, cwd).storage() as storage:
        return [asdict(o) for o in storage.observations(session=session)]


def collect_transcripts(dry_run: bool = False, env: Mapping[str, str] | None = None,
                        cwd: str | None = None) -> RetentionReport:
    """Apply `cleanup_period_days` to cos-native transcripts (a week in the trash first).

    Raises:
        InvalidInput: the period is not a number of days, or below 1.
    """
    from coding_os.sessions.retention import collect

    project = Project(env, cwd)
    return collect(project.tiers, project.period_days, dry_run=dry_run)


# -- what the functions above share -----------------------------------------------------------


def _scope_dirs(project: Project, scope: str) -> list[str] | None:
    """The directories of `scope` from the caller's checkout (None: everywhere)."""
    from coding_os.sessions.listing import scope_dirs

    return None if scope == "all" else scope_dirs(project.resolution, project.checkout, scope)


def _resume_scope(project: Project) -> ResumeScope:
    """The caller's checkout, its repository's directories, and its own sessions (excluded from
    `--continue`)."""
    from coding_os.sessions.resume import scope_of

    return scope_of(project.caller, project.environ, project.checkout,
                    _scope_dirs(project, "repo") or [])


def _elsewhere(project: Project, storage: Storage, scope: ResumeScope, host: str,
               write: bool) -> Callable[[Found], RestoreReport | None]:
    """How a session another host wrote is restored here (`_restore_elsewhere`)."""
    from functools import partial

    return partial(_restore_elsewhere, project, storage, scope, host, write)


def _restore_elsewhere(project: Project, storage: Storage, scope: ResumeScope, host: str,
                       write: bool, found: Found) -> RestoreReport | None:
    """The restore report of `found` when another host wrote it, materialised here
    (hosts/remote.py, imported only for a shared storage); None for this host's own."""
    from coding_os.hosts.remote import restore_elsewhere

    from coding_os.sessions.database import gemini_dir

    claude_dir, codex_dir = project.native_dirs
    return restore_elsewhere(storage, scope, project.tiers, found, host=host, root=project.root,
                             claude_dir=claude_dir, codex_dir=codex_dir,
                             gemini_dir=gemini_dir(project.environ), write=write)


def _show(project: Project, session: str) -> dict[str, object]:
    """`show_session` for the caller of `project`."""
    from coding_os.sessions import lookup

    lookup.validate_lookup(session)
    found, repairs = project.repairs(lambda storage: lookup.show(
        storage, project.tiers, session, project.refresher(storage)))
    return lookup.shown(found, repairs)


def _replica(project: Project, row: Mapping[str, object], subagents: bool = False,
             stream: str | None = None) -> ReplicaLog | None:
    """Another host's copy of the log of the session of `row` (hosts/remote.py), None when
    its file is here."""
    from coding_os.hosts.remote import replica_log

    return replica_log(row, lambda: project.host, project.index, subagents, stream)


def _session_log(project: Project, session: str, purpose: str, subagents: bool = False
                 ) -> tuple[dict[str, Any], str, ReplicaLog | None]:
    """A session's row, the path of its log, and its replica when it is another host's
    session whose file is not on this host (with its `subagents` when asked for).

    Raises:
        InvalidId, NotFound: as `show_session`; NotFound: a session without a log (to `purpose`),
            another host's with nothing replicated.
    """
    from coding_os.sessions.reading import log_source

    row = _show(project, session)
    source = log_source(row, session, purpose)
    return row, source, _replica(project, row, subagents)
