"""Keeping checkpoints (DESIGN.md §5): `verify` re-hashes every object, `usage` is the disk
used against the cap, `collect` (`cos gc`) removes what the retention period and no checkpoint
keep, `enforce_cap` prunes the oldest checkpoints once the store outgrows its cap, and
`drop_worktree` removes the checkpoints of a background job's worktree as `cos rm` removes it.

A checkpoint names the tree it was taken in (its `root`). A job's worktree
(`<project>/.coding-os/worktrees/<job>`) goes with its job (`cos rm`, or `cos gc` for jobs past
the retention period), and so do its checkpoints: nothing can be rewound into a tree that is no
more, and the git objects they name went with the job's branch. A checkpoint of a job's worktree
that is gone all the same (removed by hand, or by a cos before this one) is `orphaned`:
`verify` lists it apart, not as damage (the store is whole), and `collect` drops it.
"""

from __future__ import annotations

import os
import time

from coding_os import durable, jsonwire
from coding_os.checkpoints import points
from coding_os.checkpoints.lock import restore_lock
from coding_os.checkpoints.manifest import read_manifest
from coding_os.checkpoints.settings import GRACE_S, Settings
from coding_os.checkpoints.store import DamagedObject, ObjectStore, pack_entries
from coding_os.errors import InvalidInput, StateIOError
from coding_os.state.root import STATE_DIR_NAME
from coding_os.state.tiers import Tiers

__all__ = ["verify", "usage", "collect", "enforce_cap", "drop_worktree", "orphaned"]

# Where background jobs' worktrees live in a state dir (jobs/worktrees.py, WORKTREES_DIR).
JOB_WORKTREES = "worktrees"


def orphaned(record: dict[str, object]) -> bool:
    """Whether a checkpoint was taken in a background job's worktree that is gone."""
    root = record.get("root")
    if not isinstance(root, str) or not os.path.isabs(root):
        return False
    parent = os.path.dirname(os.path.normpath(root))
    return (os.path.basename(parent) == JOB_WORKTREES
            and os.path.basename(os.path.dirname(parent)) == STATE_DIR_NAME
            and not os.path.lexists(root))


def drop_worktree(tiers: Tiers, worktree: str) -> list[str]:
    """Remove the checkpoints taken in `worktree` (a job's, which `cos rm` removed); returns
    their ids. Their objects are left to `cos gc`, which deletes what no checkpoint reaches.

    Raises:
        StateIOError: the checkpoint store cannot be locked or written.
    """
    folder = tiers.checkpoints_dir
    if not os.path.isdir(folder):
        return []
    top = os.path.normpath(worktree)
    dropped: list[str] = []
    with restore_lock(folder, exclusive=True):  # no checkpoint is being recorded meanwhile
        for record in points.all_records(folder):
            root = record.get("root")
            if isinstance(root, str) and (os.path.normpath(root) == top
                                          or root.startswith(top + os.sep)):
                points.remove(folder, str(record["id"]), record.get("session"))
                dropped.append(str(record["id"]))
    return dropped


def verify(tiers: Tiers) -> dict[str, object]:
    """Re-hash every object and check every record's references (git blobs included); report
    damage without touching anything. The checkpoints of a job's worktree that is gone are
    listed as `orphaned` (`cos gc` drops them), their git objects not looked for."""
    from coding_os.git.command import GitError

    folder = tiers.checkpoints_dir
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
    gone: list[dict[str, str]] = []
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
        # The git objects of a job's worktree that is gone went with its branch: not damage.
        lost_tree = orphaned(record)
        if lost_tree:
            gone.append({"checkpoint": str(record["id"]), "root": root})
        for layer in manifest.get("layers", []):  # type: ignore[attr-defined]
            repo = os.path.join(root, layer["dir"]) if layer["dir"] else root
            if layer.get("commit") and not lost_tree:
                git_refs.setdefault(repo, set()).add(str(layer["commit"]))
            for path, entry in layer.get("overlay", {}).items():
                if not entry or entry[0] == "s":
                    continue
                if entry[3]:
                    if not store.has(str(entry[3])):
                        missing.append({"checkpoint": str(record["id"]), "path": path,
                                        "problem": f"object {entry[3]} is missing"})
                elif not lost_tree:
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
            "missing": missing, "orphaned": gone, "ok": not damaged and not missing}


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
    folder = tiers.checkpoints_dir
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
    """Remove checkpoints older than `older_than_s` (the retention period) and those of a job's
    worktree that is gone (`orphans_removed`), then every object no checkpoint reaches and older
    than `grace_s`. Returns what was (or would be) removed."""
    folder = tiers.checkpoints_dir
    with restore_lock(folder, exclusive=True):  # no checkpoint is being recorded meanwhile
        return _collect(folder, dry_run, older_than_s, grace_s)


def _collect(folder: str, dry_run: bool, older_than_s: float | None,
             grace_s: float) -> dict[str, object]:
    store = ObjectStore(folder)
    removed_points: list[str] = []
    orphans: list[str] = []
    cutoff = points.new_id(time.time() - older_than_s) if older_than_s is not None else None
    for record in points.all_records(folder):
        checkpoint = str(record["id"])
        if orphaned(record):
            orphans.append(checkpoint)  # of a job's worktree that is gone, whatever its age
        elif cutoff is not None and checkpoint < cutoff:
            removed_points.append(checkpoint)
        else:
            continue
        if not dry_run:
            points.remove(folder, checkpoint, record.get("session"))
    # A dry run removed nothing: the records it would remove must not count as reaching.
    keep, problems = _referenced(folder, store,
                                 set(removed_points + orphans) if dry_run else None)
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
    return {"checkpoints_removed": removed_points, "orphans_removed": orphans,
            "objects_removed": removed_objects, "bytes_freed": freed, "dry_run": dry_run,
            "problems": problems}


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
        points.remove(folder, checkpoint, record.get("session"))
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


def enforce_cap(tiers: Tiers, cap: int, keep: str, added: int) -> list[str]:
    """Prune the oldest checkpoints (never `keep`) until the store fits `cap`; returns the ids
    pruned. The store's size is kept in `checkpoints/usage.json`, counted again when it is an
    hour old or the new bytes would cross the cap, so a checkpoint does not walk the store."""
    folder = tiers.checkpoints_dir
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
