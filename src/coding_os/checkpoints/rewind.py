"""Listing checkpoints and rewinding to one (DESIGN.md §5): `listing`, `preview`,
`rewind_code`, `undo`, and `rewind`, which orders the code and the conversation halves. A rewind
of the code first takes a checkpoint of the tree as it is (`before`), then restores the target
through the journaled restore (restore.py), so it is itself undone by `undo`. The conversation
half is sessions/conversation.py's, or, for a session the engine runs, the engine's (`Engine`,
given by the caller: runtime/rewind.py). Taking checkpoints is take.py; keeping them, upkeep.py.
"""

from __future__ import annotations

import os
import stat

from coding_os import jsonwire
from coding_os.clock import utc_now
from coding_os.checkpoints import points
from coding_os.checkpoints.lock import restore_lock
from coding_os.checkpoints.manifest import diff, manifest_paths, put_entry, read_manifest
from coding_os.checkpoints.restore import last_rewind, recover_pending, remember_rewind
from coding_os.checkpoints.settings import Settings
from coding_os.checkpoints.snapshot import Capture, beyond_link, scope, snapshot_now
from coding_os.checkpoints.store import ObjectStore
from coding_os.errors import InvalidInput, NotFound
from coding_os.state.tiers import Tiers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Protocol

    from coding_os.checkpoints.watch import Ask, Look
    from coding_os.sessions.conversation import ConversationRewind

    class Engine(Protocol):
        """The conversation half of a rewind for the sessions the engine runs."""

        def runs(self, session: str) -> bool:
            """Whether the engine runs `session` (it has an events log)."""

        def check_free(self, session: str) -> None:
            """Refuse a session a process serves now."""

        def rewind(self, plan: ConversationRewind, dry_run: bool) -> dict[str, Any]:
            """The session pointed at the rewound conversation for its next input."""

__all__ = ["REWIND_PARTS", "check_request", "listing", "row", "preview", "rewind_code", "undo",
           "rewind"]

REWIND_PARTS = ("code", "conversation", "both")


def _manifest_oid(store: ObjectStore, manifest: dict[str, object]) -> tuple[str, int]:
    return store.put(jsonwire.dumps(manifest).encode("ascii"))


def listing(tiers: Tiers, session: str | None = None) -> list[dict[str, object]]:
    """Checkpoints, newest first, optionally of one session. A session started by `/clear` gets
    the cleared session's latest checkpoint as its first entry (`from_cleared_session`)."""
    records = points.all_records(tiers.checkpoints_dir)
    if session is None:
        return [row(r) for r in reversed(records)]
    mine = [row(r) for r in reversed(records) if r.get("session") == session]
    cleared = _cleared_from(tiers, session)
    if cleared:
        theirs = [r for r in records if r.get("session") == cleared]
        if theirs:
            mine.insert(0, {**row(theirs[-1]), "from_cleared_session": cleared})
    return mine


def _cleared_from(tiers: Tiers, session: str) -> str | None:
    from coding_os.state.identity import agent_of_session, is_session_id
    from coding_os.state.presence import read_presence

    agent = agent_of_session(session)
    if agent is None:
        return None
    record = read_presence(tiers, agent, session) or {}
    value = record.get("cleared_from")
    return value if isinstance(value, str) and is_session_id(value) else None


_ROW_FIELDS = ("id", "session", "agent", "turn", "prompt", "ts", "mode", "trigger", "root",
               "changed_count", "changed", "skipped", "seq", "native")


def row(record: dict[str, object]) -> dict[str, object]:
    """The fields of a checkpoint record a listing shows."""
    return {key: record.get(key) for key in _ROW_FIELDS}


def _diffstat(root: str, store: ObjectStore, change: tuple, data: bytes | None) -> dict:  # type: ignore[type-arg]
    path, target, current, _ = change
    now = (read_current(root, path) if current is not None else None) or b""
    then = data if data is not None else b""
    if b"\0" in now[:8000] or b"\0" in then[:8000] or len(now) + len(then) > 4 << 20:
        return {"binary": True, "added": None, "removed": None}
    import difflib

    added = removed = 0
    for line in difflib.unified_diff((now or b"").decode("utf-8", "replace").splitlines(),
                                     then.decode("utf-8", "replace").splitlines(), n=0,
                                     lineterm=""):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return {"binary": False, "added": added, "removed": removed}


def read_current(root: str, path: str) -> bytes | None:
    """The bytes at `path` in the tree now (a symlink's target), None when absent."""
    full = os.path.join(root, path)
    try:
        st = os.lstat(full)
        if stat.S_ISLNK(st.st_mode):
            return os.fsencode(os.readlink(full))
        if not stat.S_ISREG(st.st_mode):
            return None
        with open(full, "rb") as f:
            return f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None


def _target(tiers: Tiers, checkpoint: str, store: ObjectStore
            ) -> tuple[dict[str, object], dict[str, object]]:
    record = points.load(tiers.checkpoints_dir, checkpoint)
    return record, read_manifest(store, str(record["manifest"]))


def _current(tiers: Tiers, root: str, target: dict[str, object], store: ObjectStore,
             settings: Settings, watcher: Ask | None
             ) -> tuple[Capture, dict[str, object], Look | None]:
    mode = str(target.get("mode"))
    paths = sorted(manifest_paths(target)) if mode == "tracked" else None
    return snapshot_now(tiers, root, store, settings, mode, paths,
                        read_only=isinstance(store, _DryStore), watcher=watcher)


def _outside(tiers: Tiers, root: str, record: dict[str, object], current: dict[str, object],
             store: ObjectStore) -> set[str]:
    """Paths changed outside the session since `record`: what changed between a turn's end and
    the session's next checkpoint (the agent was idle), and since its last turn end."""
    session = record.get("session")
    if not session:
        return set()
    later = [r for r in points.all_records(tiers.checkpoints_dir)
             if r.get("session") == session and str(r["id"]) >= str(record["id"])
             and r.get("root") == root and r.get("mode") == record.get("mode")]
    found: set[str] = set()
    for number, item in enumerate(later):
        if item.get("trigger") != "turn-end":
            continue
        start = read_manifest(store, str(item["manifest"]))
        end = (read_manifest(store, str(later[number + 1]["manifest"]))
               if number + 1 < len(later) else current)
        found.update(path for path, *_ in diff(root, end, start))
    return found


def preview(tiers: Tiers, root: str, checkpoint: str, settings: Settings | None = None,
            watcher: Ask | None = None) -> dict[str, object]:
    """What `rewind_code` would do, changing nothing: files to restore, create and delete, each
    with its diffstat and whether it changed outside the session since the checkpoint
    (`watcher`: as `take.create`'s).

    Raises:
        InvalidInput, NotFound: a bad or unknown checkpoint id.
        DamagedObject: the checkpoint's objects are missing or damaged.
    """
    settings = settings or Settings()
    store = _DryStore(ObjectStore(tiers.checkpoints_dir))
    record, target = _target(tiers, checkpoint, store)
    if record.get("root") != root:
        raise InvalidInput(f"checkpoint {checkpoint} is of {record.get('root')}, not of {root}; "
                           f"run cos rewind there")
    cap, current, _ = _current(tiers, root, target, store, settings, watcher)
    changes = _protect_uncaptured(root, cap, current,
                                  diff(root, target, current, cap.commit_entries))
    outside = _outside(tiers, root, record, current, store)
    data = _fetch_quietly(root, store, changes)
    files = []
    for number, change in enumerate(changes):
        path, wanted, present, _ = change
        action = "delete" if wanted is None else ("create" if present is None else "restore")
        files.append({"path": path, "action": action,
                      "changed_outside": path in outside,
                      **_diffstat(root, store, change, data.get(number))})
    skipped_now = {str(item[0]) for item in current["skipped"]}  # type: ignore[attr-defined]
    blocked = sorted(skipped_now & {str(f["path"]) for f in files})
    return {"checkpoint": row(record), "mode": record.get("mode"), "root": root,
            "files": files,
            "summary": {kind: sum(1 for f in files if f["action"] == kind)
                        for kind in ("restore", "create", "delete")},
            "unprotected": blocked}


def _fetch_quietly(root: str, store: ObjectStore, changes: list) -> dict[int, bytes]:  # type: ignore[type-arg]
    from coding_os.checkpoints.restore import fetch, write_op

    ops: list[dict[str, object]] = [
        write_op(p, t, prefix) if t is not None else {"op": "delete", "path": p}
        for p, t, _, prefix in changes]
    return fetch(root, store, ops)


class _DryStore(ObjectStore):
    """A store that hashes without writing: a preview changes nothing on disk."""

    def __init__(self, real: ObjectStore) -> None:
        super().__init__(os.path.dirname(real.root))

    def put(self, data: bytes, *, sync: bool = True) -> tuple[str, int]:
        oid = self.oid_of(data)
        self._made = getattr(self, "_made", {})
        self._made[oid] = data
        return oid, 0

    def get(self, oid: str) -> bytes:
        made = getattr(self, "_made", {})
        return made[oid] if oid in made else super().get(oid)

    def has(self, oid: str) -> bool:
        return oid in getattr(self, "_made", {}) or super().has(oid)


class _ReadOnce(ObjectStore):
    """The store of a rewind, which reads an object once: the target's manifest is read first,
    and the watcher's base, which the snapshot of the tree as it is starts from, is most often
    that same manifest (the checkpoint was the latest taken)."""

    def __init__(self, checkpoints_dir: str, *, compress: bool = True,
                 pack: bool = False) -> None:
        super().__init__(checkpoints_dir, compress=compress, pack=pack)
        self.read: dict[str, bytes] = {}

    def get(self, oid: str) -> bytes:
        data = self.read.get(oid)
        if data is None:
            data = self.read[oid] = super().get(oid)
        return data


def rewind_code(tiers: Tiers, root: str, checkpoint: str, *, session: str | None = None,
                agent: str | None = None, settings: Settings | None = None,
                kind: str = "rewind", watcher: Ask | None = None) -> dict[str, object]:
    """Restore the tree at `root` to `checkpoint`, after taking a checkpoint of it as it is
    (`before`), so `undo` brings it back. Returns the report: each file and its action (the
    diffstat and the outside marks are the preview's), and `before`. `watcher`: as
    `take.create`'s.

    Raises:
        InvalidInput, NotFound: a bad or unknown checkpoint id; another tree's checkpoint.
        RestoreError: a file that would be overwritten is not protected (too large to store),
            a symlink or read-only directory is in the way; nothing was changed.
        DamagedObject, StateIOError: nothing was changed.
    """
    settings = settings or Settings()
    folder = tiers.checkpoints_dir
    recover_pending(tiers)
    # The user waits on a rewind: its snapshot's new objects go to one pack, flushed with the
    # staged bytes (see restore), and are not compressed (a tenth of the rewind's time).
    store = _ReadOnce(folder, pack=True, compress=False)
    record, target = _target(tiers, checkpoint, store)
    if record.get("root") != root:
        raise InvalidInput(f"checkpoint {checkpoint} is of {record.get('root')}, not of {root}; "
                           f"run cos rewind there")
    with restore_lock(folder, exclusive=True):
        try:
            before, changes = _rewind(tiers, root, checkpoint, record, target, store, settings,
                                      session, agent, kind, watcher)
        finally:
            store.discard()  # the snapshot of a rewind refused before it was flushed
    files = [{"path": path, "action": "delete" if wanted is None
              else ("create" if present is None else "restore")}
             for path, wanted, present, _ in changes]
    return {"checkpoint": row(record), "mode": record.get("mode"), "root": root,
            "files": files,
            "summary": {kind_: sum(1 for f in files if f["action"] == kind_)
                        for kind_ in ("restore", "create", "delete")},
            "unprotected": [], "before": before, "applied": True}


def _rewind(tiers: Tiers, root: str, checkpoint: str, record: dict[str, object],
            target: dict[str, object], store: ObjectStore, settings: Settings,
            session: str | None, agent: str | None, kind: str,
            watcher: Ask | None) -> tuple[str, list]:  # type: ignore[type-arg]
    """`rewind_code`'s work under the lock: returns the `before` checkpoint and the changes."""
    from coding_os.checkpoints.restore import RestoreError, plan_ops, prepare, restore

    folder = tiers.checkpoints_dir
    cap, current, looked = _current(tiers, root, target, store, settings, watcher)
    found = diff(root, target, current, cap.commit_entries)
    changes = _protect_uncaptured(root, cap, current, found)
    # Whether an ignored file joined the snapshot (no capture holds those).
    as_captured = all(a[2] is b[2] for a, b in zip(found, changes))
    # The snapshot's list (a watcher-fed one looked at the changed paths only).
    unprotected = sorted({str(item[0]) for item in current["skipped"]}  # type: ignore[attr-defined]
                         & {path for path, *_ in changes})
    if unprotected:
        raise RestoreError(f"{', '.join(unprotected[:5])} would be overwritten but is "
                           "larger than checkpoints.max_file_bytes, so the rewind could not "
                           "be undone; nothing was changed")
    ops = plan_ops(changes)
    data = prepare(root, store, ops)  # refused here, no checkpoint is left behind
    oid, _ = _manifest_oid(store, current)
    before = points.new_record(
        session=session, agent=agent, turn=None, prompt=f"before {kind} to {checkpoint}",
        trigger="before-rewind", mode=record.get("mode"), root=root, manifest=oid,
        previous=None, seq=None, changed=[], changed_count=None, skipped=current["skipped"])
    marker = {"id": points.new_id(), "kind": kind, "target": checkpoint,
              "before": before["id"], "ts": utc_now()}
    restore(root, folder, store, ops, marker,
            after=lambda: remember_rewind(folder, {**marker, "root": root}), data=data,
            before_journal=lambda: points.write(folder, before), before_record=before)
    if looked is not None and as_captured:
        # The tree as it was is the watcher's base (the restore's own writes are events
        # after its token); not when a file git ignores joined it (no capture holds those).
        from coding_os.checkpoints import watch

        watch.remember(folder, root, oid, looked.token, scope(cap), cap.staged)
    return str(before["id"]), changes


def _protect_uncaptured(root: str, cap: Capture, current: dict[str, object],
                        changes: list) -> list:  # type: ignore[type-arg]
    """A path the snapshot holds as absent but where a file stands (ignored by git, or written
    since) would be overwritten by a restore that creates it: its bytes join the snapshot of
    the tree as it is, so the undo brings them back, and the preview calls it a restore."""
    kept = []
    for path, wanted, present, prefix in changes:
        if present is None and wanted is not None and os.path.lexists(os.path.join(root, path)) \
                and not os.path.isdir(os.path.join(root, path)) and not beyond_link(root, path):
            present = cap.entry(path)
            if present is not None:
                put_entry(current, path, present)
        kept.append((path, wanted, present, prefix))
    return kept


def undo(tiers: Tiers, root: str, *, session: str | None = None, agent: str | None = None,
         settings: Settings | None = None, watcher: Ask | None = None) -> dict[str, object]:
    """Undo the last rewind of this tree: restore the checkpoint taken just before it (itself
    a rewind, so undoing again redoes it).

    Raises:
        NotFound: no rewind to undo here.
        as `rewind_code`.
    """
    recover_pending(tiers)
    last = last_rewind(tiers)
    if not last or last.get("root") != root or not last.get("before"):
        raise NotFound(f"no rewind to undo in {root}")
    return rewind_code(tiers, root, str(last["before"]), session=session, agent=agent,
                       settings=settings, kind="undo", watcher=watcher)


def check_request(checkpoint: str, part: str) -> None:
    """Refuse a rewind request before anything is read.

    Raises:
        InvalidInput: a part other than REWIND_PARTS, or a malformed checkpoint id.
    """
    if part not in REWIND_PARTS:
        raise InvalidInput(f"rewind --code, --conversation or --both, not {part!r}")
    if not points.valid_key(checkpoint):
        raise InvalidInput(f"not a checkpoint id: {checkpoint[:80]!r} (cp-YYYYMMDD-HHMMSS-…)")


def rewind(tiers: Tiers, root: str, checkpoint: str, part: str = "code", *,
           dry_run: bool = False, in_place: bool = False, session: str | None = None,
           agent: str | None = None, settings: Settings | None = None,
           watcher: Ask | None = None, env: Mapping[str, str] | None = None,
           engine: Engine | None = None) -> dict[str, Any]:
    """Rewind the code, the conversation or both of the tree at `root` to `checkpoint`
    (`dry_run`: the preview only), for the caller's `session` of `agent`.

    Everything is checked before anything is done: when the conversation cannot be rewound,
    the code is not restored either. Codex's half, the uncertain one (its app-server may
    refuse), goes first; otherwise the code goes first. The conversation of a session the
    engine runs (`engine`, needed for a conversation part) is pointed at the checkpoint for its
    next input, after checking no process serves it; any other is rewound by
    `ConversationRewind.apply` (a handover).

    Raises:
        InvalidInput, NotFound: as `check_request`; an unknown checkpoint, another tree's, a
            checkpoint of another session than `session`'s lineage; the native point is not in
            the agent's log, or the app-server cannot load the thread.
        Conflict: a process serves the session the engine runs.
        RestoreError: the restore is not safe (nothing changed).
        DamagedObject, GitError, StateIOError, BackendError: nothing changed.
    """
    check_request(checkpoint, part)
    checkpoint = points.resolve(tiers.checkpoints_dir, checkpoint)
    record = points.load(tiers.checkpoints_dir, checkpoint)
    report: dict[str, Any] = {"checkpoint": checkpoint, "part": part, "dry_run": dry_run}
    plan = None
    if part in ("conversation", "both"):
        from coding_os.sessions.conversation import plan_rewind

        owner = record.get("session")
        if session is not None and isinstance(owner, str) \
                and not _in_lineage(tiers, session, owner):
            raise InvalidInput(f"checkpoint {checkpoint} is of session {owner}, not of this "
                               f"panel's session {session}: its conversation is not this one")
        plan = plan_rewind(tiers, record, in_place=in_place, env=env)
        if part == "conversation" and not plan.available:
            raise InvalidInput(f"{plan.note} (cos rewind {checkpoint} --code)")
    served = (engine if plan is not None and engine is not None
              and plan.kind in ("claude", "codex") and engine.runs(plan.session) else None)
    if plan is not None and served is not None and not dry_run:
        served.check_free(plan.session)  # before anything is done
    conversation_first = plan is not None and plan.kind == "codex"  # the uncertain half first
    if plan is not None and conversation_first:
        report["conversation"] = _conversation(tiers, plan, served, dry_run)
    if part in ("code", "both"):
        if dry_run:
            report["code"] = preview(tiers, root, checkpoint, settings, watcher=watcher)
        else:
            report["code"] = rewind_code(tiers, root, checkpoint, session=session, agent=agent,
                                         settings=settings, watcher=watcher)
    if plan is not None and not conversation_first:
        report["conversation"] = _conversation(tiers, plan, served, dry_run)
    return report


def _conversation(tiers: Tiers, plan: ConversationRewind, served: Engine | None,
                  dry_run: bool) -> dict[str, Any]:
    """The conversation half: a handover (`plan.apply`), or for a session the engine runs,
    the session pointed at the rewound conversation (`served.rewind`)."""
    if served is None:
        return plan.apply(tiers, dry_run)
    return served.rewind(plan, dry_run)


def _in_lineage(tiers: Tiers, session: str, ancestor: str) -> bool:
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
        record = presence.read_presence(tiers, agent, current) if agent else None
        parent = (record or {}).get("forked_from") or (record or {}).get("cleared_from")
        current = parent if isinstance(parent, str) else None
    return False
