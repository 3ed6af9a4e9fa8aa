"""Listing, rewinding and keeping checkpoints (DESIGN.md §5): `listing`, `preview`,
`rewind_code`, `undo`, `verify`, `usage`, `collect`. Taking them is in take.py.
"""

from __future__ import annotations

import os
import time

from coding_os import jsonwire
from coding_os.checkpoints import points
from coding_os.checkpoints.lock import restore_lock
from coding_os.checkpoints.snapshot import Capture, diff
from coding_os.checkpoints.store import DamagedObject, ObjectStore, pack_entries
from coding_os.checkpoints.take import (
    GRACE_S,
    LAST_REWIND,
    Settings,
    _iso,
    _scope,
    checkpoints_dir,
    read_manifest,
    recover_pending,
    snapshot_now,
)
from coding_os.errors import InvalidInput, NotFound, StateIOError
from coding_os import durable
from coding_os.state.tiers import Tiers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.checkpoints.watch import Look

__all__ = ["listing", "preview", "rewind_code", "undo", "last_rewind", "verify", "usage",
           "collect"]


def _manifest_oid(store: ObjectStore, manifest: dict[str, object]) -> tuple[str, int]:
    return store.put(jsonwire.dumps(manifest).encode("ascii"))




def listing(tiers: Tiers, session: str | None = None) -> list[dict[str, object]]:
    """Checkpoints, newest first, optionally of one session. A session started by `/clear` gets
    the cleared session's latest checkpoint as its first entry (`from_cleared_session`)."""
    records = points.all_records(checkpoints_dir(tiers))
    if session is None:
        return [_row(r) for r in reversed(records)]
    mine = [_row(r) for r in reversed(records) if r.get("session") == session]
    cleared = _cleared_from(tiers, session)
    if cleared:
        theirs = [r for r in records if r.get("session") == cleared]
        if theirs:
            mine.insert(0, {**_row(theirs[-1]), "from_cleared_session": cleared})
    return mine


def _cleared_from(tiers: Tiers, session: str) -> str | None:
    from coding_os.state.identity import is_session_id
    from coding_os.state.presence import read_presence

    if not is_session_id(session):
        return None
    agent = session.split("-")[1]
    record = read_presence(tiers, agent, session) or {}
    value = record.get("cleared_from")
    return value if isinstance(value, str) and is_session_id(value) else None


_ROW_FIELDS = ("id", "session", "agent", "turn", "prompt", "ts", "mode", "trigger", "root",
               "changed_count", "changed", "skipped", "seq")


def _row(record: dict[str, object]) -> dict[str, object]:
    return {key: record.get(key) for key in _ROW_FIELDS}


# -- rewind ---------------------------------------------------------------------------------------


def _diffstat(root: str, store: ObjectStore, change: tuple, data: bytes | None) -> dict:  # type: ignore[type-arg]
    path, target, current, _ = change
    from coding_os.checkpoints.snapshot import read_current

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


def _target(tiers: Tiers, checkpoint: str) -> tuple[dict[str, object], dict[str, object]]:
    folder = checkpoints_dir(tiers)
    record = points.load(folder, checkpoint)
    return record, read_manifest(ObjectStore(folder), str(record["manifest"]))


def _current(tiers: Tiers, root: str, target: dict[str, object], store: ObjectStore,
             settings: Settings) -> tuple[Capture, dict[str, object], Look | None]:
    from coding_os.checkpoints.snapshot import manifest_paths

    mode = str(target.get("mode"))
    paths = sorted(manifest_paths(target)) if mode == "tracked" else None
    return snapshot_now(tiers, root, store, settings, mode, paths,
                        read_only=isinstance(store, _DryStore))


def _outside(tiers: Tiers, root: str, record: dict[str, object], current: dict[str, object],
             store: ObjectStore) -> set[str]:
    """Paths changed outside the session since `record`: what changed between a turn's end and
    the session's next checkpoint (the agent was idle), and since its last turn end."""
    session = record.get("session")
    if not session:
        return set()
    later = [r for r in points.all_records(checkpoints_dir(tiers))
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


def preview(tiers: Tiers, root: str, checkpoint: str,
            settings: Settings | None = None) -> dict[str, object]:
    """What `rewind_code` would do, changing nothing: files to restore, create and delete, each
    with its diffstat and whether it changed outside the session since the checkpoint.

    Raises:
        InvalidInput, NotFound: a bad or unknown checkpoint id.
        DamagedObject: the checkpoint's objects are missing or damaged.
    """
    settings = settings or Settings()
    record, target = _target(tiers, checkpoint)
    if record.get("root") != root:
        raise InvalidInput(f"checkpoint {checkpoint} is of {record.get('root')}, not of {root}; "
                           f"run cos rewind there")
    store = _DryStore(ObjectStore(checkpoints_dir(tiers)))
    cap, current, _ = _current(tiers, root, target, store, settings)
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
    return {"checkpoint": _row(record), "mode": record.get("mode"), "root": root,
            "files": files,
            "summary": {kind: sum(1 for f in files if f["action"] == kind)
                        for kind in ("restore", "create", "delete")},
            "unprotected": blocked}


def _fetch_quietly(root: str, store: ObjectStore, changes: list) -> dict[int, bytes]:  # type: ignore[type-arg]
    from coding_os.checkpoints.rewind import fetch

    ops: list[dict[str, object]] = [
        {"op": "write", "path": p, "kind": t[0], "sha1": t[1], "mode": t[2], "oid": t[3],
         "layer": prefix} if t is not None else {"op": "delete", "path": p}
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


def rewind_code(tiers: Tiers, root: str, checkpoint: str, *, session: str | None = None,
                agent: str | None = None, settings: Settings | None = None,
                kind: str = "rewind") -> dict[str, object]:
    """Restore the tree at `root` to `checkpoint`, after taking a checkpoint of it as it is
    (`before`), so `undo` brings it back. Returns the report: each file and its action (the
    diffstat and the outside marks are the preview's), and `before`.

    Raises:
        InvalidInput, NotFound: a bad or unknown checkpoint id; another tree's checkpoint.
        RestoreError: a file that would be overwritten is not protected (too large to store),
            a symlink or read-only directory is in the way; nothing was changed.
        DamagedObject, StateIOError: nothing was changed.
    """
    settings = settings or Settings()
    folder = checkpoints_dir(tiers)
    recover_pending(tiers)
    record, target = _target(tiers, checkpoint)
    if record.get("root") != root:
        raise InvalidInput(f"checkpoint {checkpoint} is of {record.get('root')}, not of {root}; "
                           f"run cos rewind there")
    # The user waits on a rewind: its snapshot's new objects go to one pack, flushed with the
    # staged bytes (see restore), and are not compressed (a tenth of the rewind's time).
    store = ObjectStore(folder, pack=True, compress=False)
    with restore_lock(folder, exclusive=True):
        try:
            before, changes = _rewind(tiers, root, checkpoint, record, target, store, settings,
                                      session, agent, kind)
        finally:
            store.discard()  # the snapshot of a rewind refused before it was flushed
    files = [{"path": path, "action": "delete" if wanted is None
              else ("create" if present is None else "restore")}
             for path, wanted, present, _ in changes]
    return {"checkpoint": _row(record), "mode": record.get("mode"), "root": root,
            "files": files,
            "summary": {kind_: sum(1 for f in files if f["action"] == kind_)
                        for kind_ in ("restore", "create", "delete")},
            "unprotected": [], "before": before, "applied": True}


def _rewind(tiers: Tiers, root: str, checkpoint: str, record: dict[str, object],
            target: dict[str, object], store: ObjectStore, settings: Settings,
            session: str | None, agent: str | None, kind: str) -> tuple[str, list]:  # type: ignore[type-arg]
    """`rewind_code`'s work under the lock: returns the `before` checkpoint and the changes."""
    from coding_os.checkpoints.rewind import RestoreError, plan_ops, prepare, restore

    folder = checkpoints_dir(tiers)
    cap, current, looked = _current(tiers, root, target, store, settings)
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
    now = time.time()
    before = {"v": 1, "id": points.new_id(now), "ts": _iso(now), "session": session,
              "agent": agent, "turn": None, "prompt": f"before {kind} to {checkpoint}",
              "trigger": "before-rewind", "mode": record.get("mode"), "root": root,
              "manifest": oid, "previous": None, "seq": None, "changed": [],
              "changed_count": None, "skipped": current["skipped"]}
    marker = {"id": points.new_id(), "kind": kind, "target": checkpoint,
              "before": before["id"], "ts": _iso(time.time())}
    restore(root, folder, store, ops, marker,
            after=lambda: _remember_rewind(folder, {**marker, "root": root}), data=data,
            before_journal=lambda: points.write(folder, before), before_record=before)
    if looked is not None and as_captured:
        # The tree as it was is the watcher's base (the restore's own writes are events
        # after its token); not when a file git ignores joined it (no capture holds those).
        from coding_os.checkpoints import watch

        watch.remember(folder, root, oid, looked.token, _scope(cap), cap.staged)
    return str(before["id"]), changes


def _protect_uncaptured(root: str, cap: Capture, current: dict[str, object],
                        changes: list) -> list:  # type: ignore[type-arg]
    """A path the snapshot holds as absent but where a file stands (ignored by git, or written
    since) would be overwritten by a restore that creates it: its bytes join the snapshot of
    the tree as it is, so the undo brings them back, and the preview calls it a restore."""
    from coding_os.checkpoints.snapshot import put_entry

    from coding_os.checkpoints.snapshot import beyond_link

    kept = []
    for path, wanted, present, prefix in changes:
        if present is None and wanted is not None and os.path.lexists(os.path.join(root, path)) \
                and not os.path.isdir(os.path.join(root, path)) and not beyond_link(root, path):
            present = cap.entry(path)
            if present is not None:
                put_entry(current, path, present)
        kept.append((path, wanted, present, prefix))
    return kept


def _remember_rewind(folder: str, journal: dict[str, object]) -> None:
    """What `cos rewind --undo` undoes. Written in place and not flushed: it is written under
    the restore lock while the journal exists, so a process killed meanwhile leaves it to
    `recover`, which writes it again; a reader meeting it half written takes it as missing.
    A power cut that lost it loses the shortcut only (the checkpoint taken before the rewind
    is listed, and `cos rewind <it> --code` is the undo)."""
    keep = {key: journal.get(key) for key in ("id", "kind", "target", "before", "ts", "root")}
    durable.overwrite(os.path.join(folder, LAST_REWIND), jsonwire.dumps(keep).encode("ascii"))


def last_rewind(tiers: Tiers) -> dict[str, object] | None:
    data = durable.read_small(os.path.join(checkpoints_dir(tiers), LAST_REWIND), 4096)
    try:
        value = jsonwire.loads(data.decode("ascii", "replace")) if data else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def undo(tiers: Tiers, root: str, *, session: str | None = None, agent: str | None = None,
         settings: Settings | None = None) -> dict[str, object]:
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
                       settings=settings, kind="undo")


# -- upkeep ---------------------------------------------------------------------------------------


def _referenced(folder: str, store: ObjectStore, leave_out: set[str] | None = None
                ) -> tuple[set[str], list[str]]:
    """Every object the records (but those in `leave_out`) reach, and the problems met."""
    keep: set[str] = set()
    problems: list[str] = []
    for record in points.all_records(folder):
        if leave_out and str(record["id"]) in leave_out:
            continue
        keep.update(_reach(store, record, problems))
    return keep, problems


def verify(tiers: Tiers) -> dict[str, object]:
    """Re-hash every object and check every record's references (git blobs included); report
    damage without touching anything."""
    from coding_os.git.command import GitError

    folder = checkpoints_dir(tiers)
    store = ObjectStore(folder)
    damaged: list[dict[str, str]] = []
    checked = 0
    for oid, path in store:
        if not oid and _temporary(path):
            continue  # an object being written, or left by a writer killed before its flush
        checked += 1
        if not oid:
            damaged.append({"object": path, "problem": "not an object of the store"})
            continue
        try:
            store.get_loose(oid)
        except DamagedObject as exc:
            damaged.append({"object": oid, "problem": str(exc)})
    for pack in store.packs():
        try:
            entries = pack_entries(pack)
        except (OSError, ValueError) as exc:
            checked += 1
            damaged.append({"object": pack, "problem": f"pack cannot be read: {exc}"})
            continue
        for oid, offset, length in entries:
            checked += 1
            try:
                store.get_packed(oid, pack, offset, length)
            except DamagedObject as exc:
                damaged.append({"object": oid, "problem": str(exc)})
    missing: list[dict[str, str]] = []
    records = points.all_records(folder)
    git_refs: dict[str, set[str]] = {}
    for record in records:
        oid = str(record.get("manifest"))
        try:
            manifest = read_manifest(store, oid)
        except (DamagedObject, InvalidInput) as exc:
            missing.append({"checkpoint": str(record["id"]), "problem": str(exc)})
            continue
        root = str(record.get("root"))
        for layer in manifest.get("layers", []):  # type: ignore[attr-defined]
            repo = os.path.join(root, layer["dir"]) if layer["dir"] else root
            if layer.get("commit"):
                git_refs.setdefault(repo, set()).add(str(layer["commit"]))
            for path, entry in layer.get("overlay", {}).items():
                if not entry or entry[0] == "s":
                    continue
                if entry[3]:
                    if not store.has(str(entry[3])):
                        missing.append({"checkpoint": str(record["id"]), "path": path,
                                        "problem": f"object {entry[3]} is missing"})
                else:
                    git_refs.setdefault(repo, set()).add(str(entry[1]))
    for repo, shas in git_refs.items():
        try:
            lines = _batch_check(repo, sorted(shas))
        except GitError as exc:
            missing.append({"repository": repo, "problem": str(exc)})
            continue
        for sha in sorted(shas - lines):
            missing.append({"repository": repo, "problem": f"git object {sha} is missing"})
    return {"objects_checked": checked, "checkpoints": len(records), "damaged": damaged,
            "missing": missing, "ok": not damaged and not missing}


def _batch_check(repo: str, shas: list[str]) -> set[str]:
    """Which of `shas` the repository at `repo` has."""
    from coding_os.git.command import git

    out = git(repo, "cat-file", "--batch-check",
              stdin="".join(f"{s}\n" for s in shas).encode("ascii"))
    present = set()
    for line in out.decode("ascii", "replace").splitlines():
        parts = line.split(" ")
        if len(parts) == 3 and parts[1] != "missing":
            present.add(parts[0])
    return present


def usage(tiers: Tiers, settings: Settings | None = None) -> dict[str, object]:
    """Disk used by checkpoints: objects, records, and the cap."""
    settings = settings or Settings()
    folder = checkpoints_dir(tiers)
    objects = object_bytes = 0
    store = ObjectStore(folder)
    for _, path in store:
        try:
            object_bytes += os.lstat(path).st_blocks * 512
            objects += 1
        except FileNotFoundError:
            continue
    for pack in store.packs():
        try:
            object_bytes += os.lstat(pack).st_blocks * 512
            objects += len(pack_entries(pack))
        except (OSError, ValueError):
            continue
    record_bytes = 0
    records = 0
    for sub in ("points", "heads"):
        top = os.path.join(folder, sub)
        for name in _names(top):
            try:
                record_bytes += os.lstat(os.path.join(top, name)).st_blocks * 512
                records += sub == "points"
            except FileNotFoundError:
                continue
    total = object_bytes + record_bytes
    return {"objects": objects, "object_bytes": object_bytes, "checkpoints": records,
            "record_bytes": record_bytes, "total_bytes": total,
            "cap_bytes": settings.max_total_bytes,
            "percent_of_cap": round(100 * total / settings.max_total_bytes, 2)}


def _names(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def collect(tiers: Tiers, *, dry_run: bool = False, older_than_s: float | None = None,
            grace_s: float = GRACE_S) -> dict[str, object]:
    """Remove checkpoints older than `older_than_s` (the retention period), then every object no
    checkpoint reaches and older than `grace_s`. Returns what was (or would be) removed."""
    folder = checkpoints_dir(tiers)
    with restore_lock(folder, exclusive=True):  # no checkpoint is being recorded meanwhile
        return _collect(folder, dry_run, older_than_s, grace_s)


def _collect(folder: str, dry_run: bool, older_than_s: float | None,
             grace_s: float) -> dict[str, object]:
    store = ObjectStore(folder)
    removed_points: list[str] = []
    if older_than_s is not None:
        cutoff = points.new_id(time.time() - older_than_s)
        for record in points.all_records(folder):
            if str(record["id"]) < cutoff:
                removed_points.append(str(record["id"]))
                if not dry_run:
                    points.remove(folder, str(record["id"]))
    # A dry run removed nothing: the records it would remove must not count as reaching.
    keep, problems = _referenced(folder, store, set(removed_points) if dry_run else None)
    now = time.time()
    removed_objects = 0
    freed = 0
    for oid, path in list(store):
        if oid in keep or not oid and not _temporary(path):
            continue  # a stray file that is not a temporary object is left for verify to report
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if now - st.st_mtime < grace_s:
            continue
        removed_objects += 1
        freed += st.st_blocks * 512
        if not dry_run:
            if oid:
                store.remove(oid)
            else:
                os.unlink(path)  # a writer killed before it flushed, over an hour ago
    for pack in store.packs():
        gone, pack_freed = _unpack_one(store, pack, keep, now - grace_s, dry_run)
        removed_objects += gone
        freed += pack_freed
    return {"checkpoints_removed": removed_points, "objects_removed": removed_objects,
            "bytes_freed": freed, "dry_run": dry_run, "problems": problems}


def _unpack_one(store: ObjectStore, pack: str, keep: set[str], before: float,
                dry_run: bool) -> tuple[int, int]:
    """Move the objects of `pack` that `keep` names out to loose objects, then remove it (not
    when it is younger than `before`, nor unreadable or damaged, nor when it holds the intact
    copy of a needed object whose loose copy is damaged: `verify` reports those). Returns the
    objects dropped and the bytes freed (a dry run counts what the loose objects would take)."""
    import zlib

    try:
        st = os.lstat(pack)
        entries = pack_entries(pack)
    except (OSError, ValueError):
        return 0, 0
    if st.st_mtime > before:
        return 0, 0
    loose = ObjectStore(os.path.dirname(store.root))
    wanted: dict[str, bytes] = {}  # a needed object with no good loose copy, by id
    try:
        for oid, offset, length in entries:
            if oid not in keep or oid in wanted:
                continue
            if os.path.exists(loose.path(oid)):
                loose.get_loose(oid)  # damaged: the pack's copy is kept
                continue
            wanted[oid] = store.get_packed(oid, pack, offset, length)
    except DamagedObject:
        return 0, 0
    if dry_run:
        block = os.statvfs(pack).f_frsize or 4096
        written = sum(-(-len(zlib.compress(data, loose.level)) // block) * block
                      for data in wanted.values())
        return len(entries) - len(wanted), st.st_blocks * 512 - written
    try:
        for data in wanted.values():
            loose.put(data)
    except StateIOError:
        return 0, 0
    written = sum(os.lstat(loose.path(oid)).st_blocks * 512 for oid in wanted)
    return len(entries) - len(wanted), store.remove_pack(pack) - written


def _temporary(path: str) -> bool:
    """Whether a stray file of the store is an object's temporary file (`<id>.tmp-…`)."""
    return ".tmp-" in os.path.basename(path)


def _reach(store: ObjectStore, record: dict[str, object],
           problems: list[str] | None = None) -> set[str]:
    """The objects one checkpoint needs: its manifest and the stored files it names (a damaged
    manifest is noted in `problems`)."""
    oid = str(record.get("manifest"))
    found = {oid}
    try:
        manifest = read_manifest(store, oid)
    except (DamagedObject, InvalidInput) as exc:
        if problems is not None:
            problems.append(f"{record['id']}: {exc}")
        return found
    for layer in manifest.get("layers", []):  # type: ignore[attr-defined]
        for entry in layer.get("overlay", {}).values():
            if entry and entry[3]:
                found.add(str(entry[3]))
    return found


def _prune(folder: str, cap: int, keep: str, total: int, pruned: list[str]) -> int:
    """Remove the oldest checkpoints (never `keep`) and the objects only they needed, whatever
    their age, until the store fits `cap`; returns the new total. Objects no checkpoint has
    named yet (one being taken elsewhere) are never touched."""
    store = ObjectStore(folder)
    records = points.all_records(folder)
    reach = {str(r["id"]): _reach(store, r) for r in records}
    count: dict[str, int] = {}
    for oids in reach.values():
        for oid in oids:
            count[oid] = count.get(oid, 0) + 1
    # A pack goes when none of its objects is needed any more.
    packs_of: dict[str, list[str]] = {}
    live: dict[str, int] = {}
    for pack in store.packs():
        try:
            entries = pack_entries(pack)
        except (OSError, ValueError):
            continue
        for oid, _, _ in entries:
            packs_of.setdefault(oid, []).append(pack)
        live[pack] = sum(1 for oid, _, _ in entries if count.get(oid))
    for record in records:
        if total <= cap:
            break
        checkpoint = str(record["id"])
        if checkpoint == keep:
            continue
        points.remove(folder, checkpoint)
        pruned.append(checkpoint)
        for oid in reach[checkpoint]:
            count[oid] -= 1
            if count[oid] == 0:
                total -= store.remove(oid)
                for pack in packs_of.get(oid, []):
                    live[pack] -= 1
                    if live[pack] == 0:
                        total -= store.remove_pack(pack)
    return total


USAGE_FILE = "usage.json"
USAGE_STALE_S = 3600


def _enforce_cap(tiers: Tiers, cap: int, keep: str, added: int) -> list[str]:
    """Prune the oldest checkpoints (never `keep`) until the store fits `cap`; returns the ids
    pruned. The store's size is kept in `checkpoints/usage.json`, counted again when it is an
    hour old or the new bytes would cross the cap, so a checkpoint does not walk the store."""
    folder = checkpoints_dir(tiers)
    path = os.path.join(folder, USAGE_FILE)
    saved = durable.read_small(path, 4096)
    try:
        known = jsonwire.loads(saved.decode("ascii")) if saved else None
        total = int(known["bytes"]) + added  # type: ignore[index]
        fresh = time.time() - float(known["ts"]) < USAGE_STALE_S  # type: ignore[index]
    except (ValueError, TypeError, KeyError):
        total, fresh = 0, False
    if not fresh or total > cap:
        total = int(str(usage(tiers)["total_bytes"]))
    pruned: list[str] = []
    if total > cap:
        with restore_lock(folder, exclusive=True):  # no checkpoint is being recorded meanwhile
            total = _prune(folder, cap, keep, total, pruned)
    durable.atomic_write(path, jsonwire.dumps({"bytes": total, "ts": time.time()}).encode(),
                         sync=False)
    return pruned
