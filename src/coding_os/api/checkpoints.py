"""Checkpoints and rewind (DESIGN.md §5): coding_os.checkpoints, imported when first used (the
plain `cos rewind` and `cos checkpoint create` wait on these imports)."""

from __future__ import annotations

from coding_os.api.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from coding_os.checkpoints.settings import Settings
    from coding_os.runtime.rewind import EngineRewind

__all__ = ["checkpoint_create", "recover_interrupted_restore", "checkpoint_list",
           "checkpoint_verify", "checkpoint_usage", "checkpoint_collect", "checkpoint_diff",
           "rewind", "rewind_undo", "rewind_summarize"]


def checkpoint_create(session: str | None = None, mode: str | None = None,
                      paths: list[str] | None = None, env: Mapping[str, str] | None = None,
                      cwd: str | None = None) -> dict[str, Any]:
    """Take a checkpoint of the caller's tree now (see coding_os.checkpoints.take.create).

    Raises:
        InvalidId: a malformed session id.
        InvalidInput: a bad mode, a path outside the tree, tracked without paths.
        GitError, StateIOError: the snapshot cannot be taken or stored.
    """
    from coding_os.checkpoints.take import create_manual
    from coding_os.daemon.client import ask_watcher

    project = Project(env, cwd)
    root, settings = _tree(project)
    return create_manual(project.tiers, root, settings, session=_session(project, session),
                         agent=project.caller.agent, mode=mode, paths=paths,
                         watcher=ask_watcher)


def recover_interrupted_restore(env: Mapping[str, str] | None = None,
                                cwd: str | None = None) -> dict[str, Any] | None:
    """Complete a restore that was interrupted (its journal) before anything else runs; None
    when there was none. Cheap when there is none: two stats."""
    from coding_os.checkpoints.lock import pending
    from coding_os.checkpoints.restore import recover_pending

    tiers = Project(env, cwd, create=False).tiers
    return recover_pending(tiers) if pending(tiers.checkpoints_dir) else None


def checkpoint_list(session: str | None = None, env: Mapping[str, str] | None = None,
                    cwd: str | None = None) -> list[dict[str, Any]]:
    """Checkpoints of this state dir, newest first (of one session, when given; a session
    started by /clear gets the cleared session's latest checkpoint first).

    Raises:
        InvalidId: a malformed session id.
    """
    from coding_os.checkpoints.rewind import listing

    project = Project(env, cwd, create=False)
    _tree(project)
    return listing(project.tiers, _session(project, session) if session is not None else None)


def checkpoint_verify(env: Mapping[str, str] | None = None,
                      cwd: str | None = None) -> dict[str, Any]:
    """Re-hash every checkpoint object and check every reference; touches nothing."""
    from coding_os.checkpoints.upkeep import verify

    return verify(Project(env, cwd).tiers)


def checkpoint_usage(env: Mapping[str, str] | None = None,
                     cwd: str | None = None) -> dict[str, Any]:
    """Disk used by checkpoints, and the cap."""
    from coding_os.checkpoints.settings import Settings
    from coding_os.checkpoints.upkeep import usage

    project = Project(env, cwd)
    return usage(project.tiers, Settings(project.config))


def checkpoint_collect(dry_run: bool = False, env: Mapping[str, str] | None = None,
                       cwd: str | None = None) -> dict[str, Any]:
    """`cos gc` for checkpoints: those older than cleanup_period_days, then unreferenced
    objects."""
    from coding_os.checkpoints.upkeep import collect

    project = Project(env, cwd)
    return collect(project.tiers, dry_run=dry_run, older_than_s=project.period_days * 86400)


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
    from coding_os.checkpoints import diff
    from coding_os.daemon.client import ask_watcher

    diff.check_request(checkpoint, against)
    project = Project(env, cwd, create=False)
    root, settings = _tree(project)
    return diff.checkpoint_diff(project.tiers, root, checkpoint, against, settings,
                                watcher=ask_watcher)


def rewind(checkpoint: str, part: str = "code", dry_run: bool = False, in_place: bool = False,
           env: Mapping[str, str] | None = None, cwd: str | None = None) -> dict[str, Any]:
    """Rewind the code, the conversation or both to `checkpoint` (`dry_run`: the preview only).

    The code is restored atomically, after a checkpoint of the tree as it is (so `rewind_undo`
    brings it back). The conversation of a cos-native session gets a `rewind` entry (nothing is
    deleted); a Claude Code session gets the handover that resumes it at the checkpoint's point
    (a new session, or the same with `in_place`); a Codex thread is forked through the turn
    before the checkpoint's by `codex app-server` (or reverted, `in_place`), and the handover
    resumes it (sessions.conversation); a session the engine runs is pointed at the checkpoint
    for its next input (runtime/rewind.py). Everything is checked before anything is done: when
    the conversation cannot be rewound, the code is not restored either (the order:
    checkpoints/rewind.py `rewind`).

    Raises:
        InvalidInput, NotFound: a bad part or checkpoint id, an unknown checkpoint, another
            tree's checkpoint, a checkpoint of another session than the caller's; the native
            point is not in the agent's log, or the app-server cannot load the thread.
        RestoreError: the restore is not safe (nothing changed).
        DamagedObject, GitError, StateIOError, BackendError: nothing changed.
    """
    from coding_os.checkpoints import rewind as rewinding
    from coding_os.daemon.client import ask_watcher

    rewinding.check_request(checkpoint, part)
    project = Project(env, cwd, create=False)
    root, settings = _tree(project)
    return rewinding.rewind(project.tiers, root, checkpoint, part, dry_run=dry_run,
                            in_place=in_place, session=project.caller.session(),
                            agent=project.caller.agent, settings=settings, watcher=ask_watcher,
                            env=env, engine=None if part == "code" else _engine(project))


def rewind_undo(env: Mapping[str, str] | None = None,
                cwd: str | None = None) -> dict[str, Any]:
    """Undo the last rewind of the caller's tree (itself undoable).

    Raises:
        NotFound: no rewind to undo; as `rewind`.
    """
    from coding_os.checkpoints.rewind import undo
    from coding_os.daemon.client import ask_watcher

    project = Project(env, cwd, create=False)
    root, settings = _tree(project)
    return {"undo": undo(project.tiers, root, session=project.caller.session(),
                         agent=project.caller.agent, settings=settings, watcher=ask_watcher)}


def rewind_summarize(checkpoint: str, direction: str, instructions: str | None = None,
                     dry_run: bool = False, env: Mapping[str, str] | None = None,
                     cwd: str | None = None) -> dict[str, Any]:
    """Summarise the conversation from `checkpoint` on (`direction` "from") or up to it ("up-to")
    with the configured summariser: a cos-native session gets a `summary` entry
    (sessions.summaries.summarize_around); a Claude Code or Codex session gets a new native
    session the agent resumes as its own, listed in the index forked from the original
    (sessions.summaries.summarize_native; the report's `handover` is the command to continue).

    Raises:
        InvalidInput, NotFound: a bad direction or checkpoint; a checkpoint of no session.
        NotTrusted: summarizer.command is configured and the project's consent is not given.
        SummaryError: the configured summariser failed.
    """
    from coding_os.api.sessions import show_session
    from coding_os.sessions import lookup
    from coding_os.sessions.summaries import check_request, summarize_at
    from coding_os.trust import require

    check_request(checkpoint, direction)
    project = Project(env, cwd, create=False)
    return summarize_at(
        project.tiers, checkpoint, direction, instructions, dry_run,
        config=lambda: project.config,
        consent=lambda what: require(project.root, project.resolution.hub, what),
        row_of=lambda session: show_session(session, env, cwd),
        link=lambda native, source: project.index(lambda storage: lookup.link_fork(
            storage, native, source, lambda: project.refresh(storage))),
        codex_dir=project.native_dirs[1], redacting=project.redacting)


def _tree(project: Project) -> tuple[str, Settings]:
    """The tree the caller's checkpoints cover (the top of its git working tree, else its
    checkout) and the `checkpoints:` settings; an interrupted restore is completed first."""
    import os

    from coding_os.checkpoints.restore import recover_pending
    from coding_os.checkpoints.settings import Settings
    from coding_os.git.repo import checkout_root

    root = checkout_root(project.checkout) or os.path.realpath(project.checkout)
    settings = Settings(project.config)
    recover_pending(project.tiers)
    return root, settings


def _session(project: Project, session: str | None) -> str | None:
    """The cos id of `session` (its cos id, the agent's own id, the id as `cos sessions` shows
    it or a start of either: sessions/lookup.py `session_id`), or the caller's own (its
    panel's), or None.

    Raises:
        InvalidId: `session` is malformed.
        NotFound: no session has it.
        Ambiguous: several sessions match it.
    """
    from coding_os.sessions import lookup

    if session is None:
        return project.caller.session()
    return lookup.session_id(session, lambda key: project.index(
        lambda storage: lookup.find(storage, key, project.refresher(storage)).id))


def _engine(project: Project) -> EngineRewind:
    """The engine's side of a rewind (runtime/rewind.py), for a conversation part."""
    from coding_os.runtime.rewind import EngineRewind

    return EngineRewind(project.tiers, project.env)
