"""Taking a checkpoint (DESIGN.md §5): what `cos hook` runs before a prompt's edits and before a
tool call that may write, so a tree unchanged since the session's latest checkpoint costs its
fingerprint's `lstat`s and the modules that read it (heads.py, lock.py); the records, the
settings and the snapshot machinery are loaded when the tree changed or git has to look.
"""

from __future__ import annotations

import os
import time

from coding_os import jsonwire
from coding_os.checkpoints import heads
from coding_os.checkpoints.lock import pending, restore_lock
from coding_os.errors import InvalidInput, NotFound, StateIOError
from coding_os.state.tiers import Tiers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from coding_os.checkpoints.settings import Settings
    from coding_os.checkpoints.store import ObjectStore
    from coding_os.checkpoints.watch import Ask

__all__ = ["create", "PROMPT_EXCERPT"]


PROMPT_EXCERPT = 200


def create(tiers: Tiers, root: str, *, session: str | None = None, agent: str | None = None,
           mode: str = "worktree", paths: list[str] | None = None, trigger: str = "manual",
           prompt: str | None = None, turn: int | None = None, seq: int | None = None,
           settings: Settings | None = None, watcher: Ask | None = None,
           native: Mapping[str, object] | None = None,
           stands: bool | None = None) -> dict[str, object]:
    """Take a checkpoint of the tree at `root` now and return its record (with `objects_written`
    and `bytes_written`: 0 when the tree did not change since a snapshot already stored);
    `native` is the agent's own point in its log (points.new_record).
    `watcher` asks the daemon's file watcher what changed (daemon.client.ask_watcher): without
    it the tree is scanned.

    Before a tool call (`trigger` `tool:<name>`) on a tree unchanged since the session's latest
    checkpoint, that one stands for this point too and nothing is written: the record returned
    is then its head's (heads.Head.reused). `stands` False says the caller found the session's
    head does not stand for the tree (heads.standing), so it is not looked at again.

    Raises:
        InvalidInput: a bad mode or path.
        GitError: git failed on the repository.
        StateIOError: the snapshot cannot be stored.
    """
    folder = tiers.checkpoints_dir
    if pending(folder):
        from coding_os.checkpoints.restore import recover_pending

        recover_pending(tiers)
    if mode == "tracked" and not paths:
        raise InvalidInput("a tracked checkpoint needs the paths it covers (--paths)")
    rel_paths = [_inside(root, p) for p in paths or []]
    cap = None
    with restore_lock(folder, exclusive=False):  # held until the record names its objects
        head = heads.load(folder, session) if session else None
        unchanged = (mode == "worktree" and head is not None and stands is not False
                     and head.stands(root))
        if unchanged and head is not None and session and trigger.startswith("tool:"):
            return head.reused(session, root)  # see docs/checkpoints.md
        from coding_os.checkpoints.settings import Settings

        settings = settings or Settings()
        known = _manifest(head.text) if unchanged and head is not None else None
        started = time.time_ns()
        looked = None
        store = None  # a tree unchanged by its fingerprint needs none
        try:
            kept: dict[str, object] | str | None = None  # the tree's fingerprint, if any
            if known is not None and head is not None:
                manifest, objects, written = known, 0, 0
                kept = head.fingerprint  # the tree is still as it saw
            else:
                from coding_os.checkpoints.snapshot import snapshot_now
                from coding_os.checkpoints.store import ObjectStore

                store = ObjectStore(folder, defer_sync=True)
                cap, manifest, looked = snapshot_now(tiers, root, store, settings, mode,
                                                     rel_paths, watcher=watcher)
                objects, written = cap.objects_written, cap.bytes_written
                # After a snapshot fed by the watcher, git's list of ignored paths is not at
                # hand; the walk comes after the snapshot, whose start it is checked against.
                kept = (heads.fingerprint_of(root, cap.excluded, cap.ignored, started)
                        if session and mode == "worktree" and cap.git_root
                        and not cap.incremental else None)
            record = _record(folder, store, root, manifest, objects, written, head,
                             session=session, agent=agent, mode=mode, trigger=trigger,
                             prompt=prompt, turn=turn, seq=seq, native=native,
                             text=head.text if known is not None and head else None,
                             fingerprint=kept)
        finally:
            if store is not None:
                store.discard()  # what a failed snapshot put and did not flush
        if looked is not None and cap is not None:
            from coding_os.checkpoints import watch
            from coding_os.checkpoints.snapshot import scope

            watch.remember(folder, root, str(record["manifest"]), looked.token, scope(cap),
                           cap.staged)
    # How the tree was looked at: a stat of it, the daemon's changed paths, or all of it.
    record["scan"] = ("fingerprint" if cap is None
                      else "watcher" if cap.incremental else "full")
    if record.get("bytes_written") and not record.get("reused"):
        from coding_os.checkpoints.upkeep import enforce_cap

        pruned = enforce_cap(tiers, settings.max_total_bytes, keep=str(record["id"]),
                              added=int(str(record["bytes_written"])))
        if pruned:
            record["pruned"] = pruned
    return record


def _manifest(text: str) -> dict[str, object] | None:
    """The manifest a head keeps as text, or None when it cannot be read: then git looks."""
    try:
        manifest = jsonwire.loads(text)
    except ValueError:
        return None
    return manifest if isinstance(manifest, dict) else None


def _record(folder: str, store: ObjectStore | None, root: str, manifest: dict[str, object],
            objects: int, written_before: int, head: heads.Head | None, *,
            session: str | None, agent: str | None, mode: str, trigger: str,
            prompt: str | None, turn: int | None, seq: int | None,
            native: Mapping[str, object] | None = None, text: str | None = None,
            fingerprint: dict[str, object] | str | None = None) -> dict[str, object]:
    """Store the snapshot's manifest and its record, or reuse the session's latest (`head`,
    read once before the snapshot; a reuse needs the tree equal to that head's manifest, so a
    head another hook of the session moved meanwhile is never mistaken for this tree). `text`
    is the manifest as stored, when the caller has it (the head's, for an unchanged tree);
    `fingerprint` is the tree's as this checkpoint saw it, kept with the session's head. The
    objects `store` holds unflushed (and the manifest) are flushed before the record names
    them."""
    from coding_os.checkpoints import points

    text = jsonwire.dumps(manifest) if text is None else text
    last: dict[str, object] = {}
    if head is not None:
        try:
            last = points.load(folder, head.id)
        except (InvalidInput, NotFound, StateIOError):
            head = None
    same_tree = head is not None and last.get("root") == root and last.get("mode") == mode
    if head is not None and same_tree and head.text == text:
        oid, written = head.manifest, 0  # the tree as the session's latest checkpoint left it
        if trigger.startswith("tool:"):
            # Before a tool call, nothing changed since the latest checkpoint: it stands for
            # this point too, and nothing is written but the fingerprint of the tree as it is.
            if session:
                heads.save(folder, session, head.id, head.manifest, head.text, fingerprint)
            return {**last, "objects_written": objects, "bytes_written": 0, "reused": True}
    else:
        if store is None:
            from coding_os.checkpoints.store import ObjectStore

            store = ObjectStore(folder)  # flushes as it puts
        oid, written = store.put(text.encode("ascii"))
    previous = None
    if head is not None and same_tree:
        try:
            previous = jsonwire.loads(head.text)
        except ValueError:
            previous = None
    if turn is None and session:
        # A prompt starts the next turn; any other checkpoint belongs to the current one.
        last_turn = last.get("turn")
        turn = (last_turn if isinstance(last_turn, int) else 0) + (trigger == "prompt")
        if trigger != "prompt" and prompt is None and isinstance(last.get("prompt"), str):
            prompt = str(last["prompt"])
    changed: list[str] = []
    if isinstance(previous, dict):
        from coding_os.checkpoints.manifest import changed_paths

        changed = changed_paths(previous, manifest, root)
    record = points.new_record(
        session=session, agent=agent, turn=turn, prompt=_excerpt(prompt), trigger=trigger,
        mode=mode, root=root, manifest=oid, previous=head.id if head else None, seq=seq,
        changed=changed[:500], changed_count=len(changed) if isinstance(previous, dict) else None,
        skipped=manifest["skipped"], native=native)
    if store is not None:
        store.flush()
    points.write(folder, record)
    if session:
        heads.save(folder, session, str(record["id"]), oid, text, fingerprint)
    record["objects_written"] = objects + (1 if written else 0)
    record["bytes_written"] = written_before + written
    return record


def _inside(root: str, path: str) -> str:
    """`path` (absolute, or relative to `root`) as a path relative to `root`.

    Raises:
        InvalidInput: it is outside the tree, or a directory on the way is a symlink (followed,
            it may lead anywhere: a checkpoint never stores a file through one).
    """
    from coding_os.checkpoints.manifest import check_path
    from coding_os.checkpoints.snapshot import symlink_above

    full = os.path.normpath(path if os.path.isabs(path) else os.path.join(root, path))
    rel = os.path.relpath(full, root)
    if rel.startswith(".."):
        raise InvalidInput(f"{path} is outside the tree {root}")
    rel = check_path(rel.replace(os.sep, "/"))
    link = symlink_above(root, rel)
    if link is not None:
        raise InvalidInput(f"{path} lies under the symlink {link}: not followed")
    return rel


def _excerpt(text: str | None) -> str | None:
    if not text:
        return None
    line = " ".join(text.split())
    return line if len(line) <= PROMPT_EXCERPT else line[:PROMPT_EXCERPT - 1] + "…"


def create_manual(tiers: Tiers, root: str, settings: Settings, *, session: str | None = None,
                  agent: str | None = None, mode: str | None = None,
                  paths: list[str] | None = None, watcher: Ask | None = None
                  ) -> dict[str, object]:
    """`cos checkpoint create`: a checkpoint of the tree at `root` taken now (`mode`, default
    the settings'), of `session` of `agent` when given; a cos-native session's transcript
    records where it was taken (a `checkpoint` entry, with the turn).

    Raises:
        InvalidInput: a bad mode, a path outside the tree, tracked without paths.
        GitError, StateIOError: the snapshot cannot be taken or stored.
    """
    seq = None
    if session is not None:  # the transcript module only for a session's checkpoint
        from coding_os.sessions import transcript

        path = transcript.transcript_path(tiers, session)
        seq = transcript.last_seq(path) if os.path.exists(path) else None
    record = create(tiers, root, session=session, agent=agent if session else None,
                    mode=mode or settings.mode, paths=paths, trigger="manual", seq=seq,
                    settings=settings, watcher=watcher)
    if seq is not None and session is not None:
        from coding_os.sessions import transcript

        fields: dict[str, object] = {"checkpoint": record["id"]}
        if isinstance(record.get("turn"), int):
            fields["turn"] = record["turn"]
        transcript.append(tiers, session, "checkpoint", fields)
    return record
