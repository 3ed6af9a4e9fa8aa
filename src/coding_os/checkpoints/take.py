"""Taking a checkpoint (DESIGN.md §5): what `cos hook` runs before a prompt's edits and before a
tool call that may write, so it imports only what an unchanged tree needs: the records, the
lock and the fingerprint; the snapshot machinery is loaded when git has to look.
"""

from __future__ import annotations

import os
import time

from coding_os import jsonwire
from coding_os.checkpoints import fingerprint, points
from coding_os.checkpoints.lock import pending, restore_lock
from coding_os.errors import InvalidInput, NotFound, StateIOError
from coding_os.state.tiers import Tiers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.checkpoints.snapshot import Capture
    from coding_os.checkpoints.watch import Look
    from coding_os.checkpoints.store import ObjectStore

__all__ = ["MODES", "DEFAULT_CAP_BYTES", "Settings", "checkpoints_dir", "create",
           "recover_pending", "snapshot_now", "read_manifest"]

DEFAULT_MAX_FILE_BYTES = 2 << 20  # files larger are listed as skipped (checkpoints.max_file_bytes)

MODES = ("worktree", "tracked")
DEFAULT_CAP_BYTES = 2 << 30
PROMPT_EXCERPT = 200
GRACE_S = 3600  # an object this young may belong to a checkpoint being taken: never collected
LAST_REWIND = "last-rewind.json"


class Settings:
    """`checkpoints:` of `.coding-os.yaml`: `mode`, `max_file_bytes`, `max_total_bytes`."""

    __slots__ = ("mode", "max_file_bytes", "max_total_bytes")

    def __init__(self, config: dict[str, object] | None = None) -> None:
        section = (config or {}).get("checkpoints") or {}
        if not isinstance(section, dict):
            raise InvalidInput("checkpoints: in .coding-os.yaml must be a mapping")
        self.mode = str(section.get("mode", "worktree"))
        if self.mode not in MODES:
            raise InvalidInput(f"checkpoints.mode must be worktree or tracked, not {self.mode!r}")
        self.max_file_bytes = _size(section.get("max_file_bytes", DEFAULT_MAX_FILE_BYTES),
                                    "checkpoints.max_file_bytes")
        self.max_total_bytes = _size(section.get("max_total_bytes", DEFAULT_CAP_BYTES),
                                     "checkpoints.max_total_bytes")


def _size(value: object, what: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = str(value).strip().lower().removesuffix("ib").removesuffix("b")
    factor = units.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in units else text
    try:
        size = int(float(number) * factor)
    except ValueError:
        raise InvalidInput(f"{what} must be a size like 2MiB or 2000000, not {value!r}") from None
    if size < 1:
        raise InvalidInput(f"{what} must be positive, not {value!r}")
    return size


def checkpoints_dir(tiers: Tiers) -> str:
    return os.path.join(tiers.state_dir, "checkpoints")


def _capture_of(tiers: Tiers, root: str, store: ObjectStore, settings: Settings,
                read_only: bool = False) -> Capture:
    """A capture of the tree at `root` that leaves the state dir out wherever it lives."""
    from coding_os.checkpoints.snapshot import Capture, StatCache

    state = os.path.realpath(tiers.state_dir)
    rel = os.path.relpath(state, root).replace(os.sep, "/")
    exclude = () if rel == ".." or rel.startswith("../") else (rel,)
    cache = StatCache(os.path.join(checkpoints_dir(tiers), "stat-cache.json"), read_only)
    return Capture(root, store, cache, settings.max_file_bytes, exclude)


def snapshot_now(tiers: Tiers, root: str, store: ObjectStore, settings: Settings,
                 mode: str = "worktree", paths: list[str] | None = None,
                 read_only: bool = False) -> tuple[Capture, dict[str, object], Look | None]:
    """A capture of the tree at `root` now, and the daemon's answer when it watches the tree
    (then only the paths changed since its base are looked at; see watch.py). The caller keeps
    the new base (`watch.remember`) once the manifest is stored."""
    from coding_os.checkpoints import watch
    from coding_os.checkpoints.snapshot import capture, capture_changed

    cap = _capture_of(tiers, root, store, settings, read_only)
    looked = (watch.look(checkpoints_dir(tiers), tiers.state_dir, root,
                         _scope(cap)) if mode == "worktree" else None)
    manifest = None
    if looked is not None and looked.changed is not None and looked.manifest is not None:
        previous = _stored_manifest(store, looked.manifest)
        if previous is not None:
            cap.incremental = True
            manifest = capture_changed(cap, previous, looked.changed, looked.staged)
            if manifest is None:  # what the limited look found is not to be mixed in
                cap = _capture_of(tiers, root, store, settings, read_only)
    if manifest is None:
        manifest = capture(cap, mode, paths)
    return cap, manifest, looked


def _scope(cap: Capture) -> list[object]:
    """What decides a snapshot's content besides the tree: a base taken under other settings
    (a size limit, the state dir's place) is not built upon."""
    return [cap.max_file_bytes, list(cap.exclude)]


def read_manifest(store: ObjectStore, oid: str) -> dict[str, object]:
    """The manifest object `oid`.

    Raises:
        DamagedObject: it is missing, does not re-hash to its id, or is not a JSON object.
    """
    from coding_os.checkpoints.store import DamagedObject

    try:
        data = jsonwire.loads(store.get(oid).decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        raise DamagedObject(f"checkpoint manifest {oid} is not JSON") from None
    if not isinstance(data, dict):
        raise DamagedObject(f"checkpoint manifest {oid} is damaged")
    return data


def _stored_manifest(store: ObjectStore, oid: str) -> dict[str, object] | None:
    """The manifest object `oid`, or None when it is gone or damaged (a base is a cache)."""
    from coding_os.errors import CosError

    try:
        return read_manifest(store, oid)
    except (CosError, OSError):
        return None


def recover_pending(tiers: Tiers) -> dict[str, object] | None:
    """Complete a restore that was interrupted (see rewind.py); None when there was none."""
    folder = checkpoints_dir(tiers)
    if not pending(folder):
        return None
    from coding_os.checkpoints.core import _remember_rewind
    from coding_os.checkpoints.rewind import recover

    return recover(folder, after=lambda journal: _remember_rewind(folder, journal))


def _changed(previous: dict[str, object] | None, manifest: dict[str, object],
             root: str) -> list[str]:
    """Paths whose state differs from the previous checkpoint's: overlays compared entry by
    entry; a commit that moved adds what changed between the two commits."""
    if previous is None:
        return []
    old = {str(layer["dir"]): layer for layer in previous["layers"]}  # type: ignore[attr-defined]
    changed: set[str] = set()
    for layer in manifest["layers"]:  # type: ignore[attr-defined]
        prefix = str(layer["dir"])
        before = old.pop(prefix, None)
        overlay = layer["overlay"]
        earlier = before["overlay"] if before else {}
        for path in set(overlay) | set(earlier):
            if overlay.get(path, "absent") != earlier.get(path, "absent"):
                changed.add(f"{prefix}/{path}" if prefix else path)
        if before and before.get("commit") != layer.get("commit") and layer.get("commit") \
                and before.get("commit"):
            from coding_os.git.repo import changed_between

            repo = os.path.join(root, prefix) if prefix else root
            changed.update(f"{prefix}/{p}" if prefix else p
                           for p in changed_between(repo, str(before["commit"]),
                                                    str(layer["commit"])))
    for prefix in old:
        changed.add(prefix + "/")
    return sorted(changed)


def create(tiers: Tiers, root: str, *, session: str | None = None, agent: str | None = None,
           mode: str = "worktree", paths: list[str] | None = None, trigger: str = "manual",
           prompt: str | None = None, turn: int | None = None, seq: int | None = None,
           settings: Settings | None = None) -> dict[str, object]:
    """Take a checkpoint of the tree at `root` now and return its record (with `objects_written`
    and `bytes_written`: 0 when the tree did not change since a snapshot already stored).

    Raises:
        InvalidInput: a bad mode or path.
        GitError: git failed on the repository.
        StateIOError: the snapshot cannot be stored.
    """
    settings = settings or Settings()
    folder = checkpoints_dir(tiers)
    recover_pending(tiers)
    if mode == "tracked" and not paths:
        raise InvalidInput("a tracked checkpoint needs the paths it covers (--paths)")
    rel_paths = [_inside(root, p) for p in paths or []]
    cap = None
    with restore_lock(folder, exclusive=False):  # held until the record names its objects
        head = points.session_head(folder, session) if session else None
        known = _unchanged_head(folder, root, session, head) if mode == "worktree" else None
        started = time.time_ns()
        looked = None
        store = None  # a tree unchanged by its fingerprint needs none: the hook's common case
        try:
            if known is not None:
                manifest, objects, written = known, 0, 0
            else:
                from coding_os.checkpoints.store import ObjectStore

                store = ObjectStore(folder, defer_sync=True)
                cap, manifest, looked = snapshot_now(tiers, root, store, settings, mode,
                                                     rel_paths)
                objects, written = cap.objects_written, cap.bytes_written
            record = _record(folder, store, root, manifest, objects, written, head,
                             session=session, agent=agent, mode=mode, trigger=trigger,
                             prompt=prompt, turn=turn, seq=seq,
                             text=head.text if known is not None and head else None)
        finally:
            if store is not None:
                store.discard()  # what a failed snapshot put and did not flush
        if looked is not None and cap is not None:
            from coding_os.checkpoints import watch

            watch.remember(folder, root, str(record["manifest"]), looked.token, _scope(cap),
                           cap.staged)
    # How the tree was looked at: a stat of it, the daemon's changed paths, or all of it.
    record["scan"] = ("fingerprint" if cap is None
                      else "watcher" if cap.incremental else "full")
    if session and mode == "worktree" and cap is not None:
        # After a snapshot fed by the watcher, git's list of ignored paths is not at hand.
        taken = (fingerprint.take(root, cap.excluded, cap.ignored, started)
                 if cap.git_root and not cap.incremental else None)
        if taken is not None:
            taken["manifest"] = record["manifest"]
        fingerprint.save(folder, session, taken)
    if record.get("bytes_written") and not record.get("reused"):
        from coding_os.checkpoints.core import _enforce_cap

        pruned = _enforce_cap(tiers, settings.max_total_bytes, keep=str(record["id"]),
                              added=int(str(record["bytes_written"])))
        if pruned:
            record["pruned"] = pruned
    return record


def _unchanged_head(folder: str, root: str, session: str | None,
                    head: points.Head | None) -> dict[str, object] | None:
    """The manifest of the session's latest checkpoint (`head`) when a stat of the tree shows
    nothing changed since (see fingerprint.py), else None: then git has to look."""
    if not session or head is None:
        return None
    known = fingerprint.load(folder, session)
    if known is None or known.get("manifest") != head.manifest \
            or not fingerprint.unchanged(root, known):
        return None
    try:
        manifest = jsonwire.loads(head.text)
    except ValueError:
        return None
    return manifest if isinstance(manifest, dict) else None


def _record(folder: str, store: ObjectStore | None, root: str, manifest: dict[str, object],
            objects: int, written_before: int, head: points.Head | None, *,
            session: str | None, agent: str | None, mode: str, trigger: str,
            prompt: str | None, turn: int | None, seq: int | None,
            text: str | None = None) -> dict[str, object]:
    """Store the snapshot's manifest and its record, or reuse the session's latest (`head`,
    read once before the snapshot; a reuse needs the tree equal to that head's manifest, so a
    head another hook of the session moved meanwhile is never mistaken for this tree). `text`
    is the manifest as stored, when the caller has it (the head's, for an unchanged tree). The
    objects `store` holds unflushed (and the manifest) are flushed before the record names
    them."""
    text = jsonwire.dumps(manifest) if text is None else text
    last: dict[str, object] = {}
    if head is not None:
        try:
            last = points.load(folder, head.id)
        except (NotFound, StateIOError):
            head = None
    same_tree = head is not None and last.get("root") == root and last.get("mode") == mode
    if head is not None and same_tree and head.text == text:
        oid, written = head.manifest, 0  # the tree as the session's latest checkpoint left it
        if trigger.startswith("tool:"):
            # Before a tool call, nothing changed since the latest checkpoint: it stands for
            # this point too, and nothing is written (see docs/checkpoints.md).
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
    changed = (_changed(previous, manifest, root)
               if isinstance(previous, dict) else [])
    now = time.time()
    record: dict[str, object] = {
        "v": 1, "id": points.new_id(now), "ts": _iso(now), "session": session, "agent": agent,
        "turn": turn, "prompt": _excerpt(prompt), "trigger": trigger, "mode": mode,
        "root": root, "manifest": oid, "previous": head.id if head else None, "seq": seq,
        "changed": changed[:500],
        "changed_count": len(changed) if isinstance(previous, dict) else None,
        "skipped": manifest["skipped"],
    }
    if store is not None:
        store.flush()
    points.write(folder, record)
    if session:
        points.set_head(folder, session, str(record["id"]), oid, text)
    record["objects_written"] = objects + (1 if written else 0)
    record["bytes_written"] = written_before + written
    return record


def _inside(root: str, path: str) -> str:
    """`path` (absolute, or relative to `root`) as a path relative to `root`.

    Raises:
        InvalidInput: it is outside the tree.
    """
    from coding_os.checkpoints.snapshot import check_path

    full = os.path.normpath(path if os.path.isabs(path) else os.path.join(root, path))
    rel = os.path.relpath(full, root)
    if rel.startswith(".."):
        raise InvalidInput(f"{path} is outside the tree {root}")
    return check_path(rel.replace(os.sep, "/"))


def _iso(now: float) -> str:
    from coding_os.clock import utc_now

    return utc_now(now)


def _excerpt(text: str | None) -> str | None:
    if not text:
        return None
    line = " ".join(text.split())
    return line if len(line) <= PROMPT_EXCERPT else line[:PROMPT_EXCERPT - 1] + "…"
