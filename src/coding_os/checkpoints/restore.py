"""Restoring a tree to a snapshot, atomically from the user's view (DESIGN.md §5).

A restore runs in three phases under an exclusive lock (`checkpoints/restore.lock`; taking a
checkpoint waits on it, so no snapshot sees a tree half restored):

1. **Check and stage.** Every change is checked before anything is touched: no path outside the
   tree or through a symlink (a symlink in the way is never followed), every directory to write
   in writable, every byte to write read and verified against its blob id. The journal is
   written as `checkpoints/journal.json.tmp`, then the new bytes (and symlinks) as
   `checkpoints/staging/<id>.<n>`; then all of them, and the objects of the snapshot of the
   tree as it is (the caller's, for the undo), are flushed to disk at once. A failure here — a
   full disk, a damaged object — removes the staging and leaves the tree untouched: every byte
   the restore writes has its room before the tree is touched.
2. **Journal.** The journal, listing the operations (deletes deepest first, then renames of
   staged files into place, shallowest first) and the `before` checkpoint's record, is renamed
   to `checkpoints/journal.json`. From here the restore is committed.
3. **Apply**, then remove the journal and the staging. Every operation is idempotent: a delete of
   what is gone and a rename whose staged file is gone are done. A file is replaced by a rename,
   never written over: a program running from it, or with it mapped in memory, keeps the old
   one, and a hard link to it elsewhere is left alone.

A process killed in phase 1 leaves no journal: the tree is as before, and the next call removes
the temporary journal and what is staged. Killed in phase 3, it leaves the journal, and the next
`cos` call (`recover`) applies it again to the end: the tree is exactly at the snapshot, never
between.
"""

from __future__ import annotations

import errno
import os
import stat

from coding_os.checkpoints.lock import JOURNAL, JOURNAL_TMP, STAGING, pending, restore_lock
from coding_os.git.objects import blob_sha1
from coding_os.checkpoints.manifest import check_path
from coding_os.checkpoints.store import ObjectStore
from coding_os.errors import CosError, StateIOError
from coding_os import durable, jsonwire

# `cos rewind` waits on this module's imports: no json, shutil or typing here (a third of a
# rewind's start-up, see benchmarks/checkpoints.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

    from coding_os.checkpoints.manifest import Entry
    from coding_os.state.tiers import Tiers

__all__ = ["RestoreError", "plan_ops", "write_op", "fetch", "prepare", "restore", "recover",
           "recover_pending", "remember_rewind", "last_rewind", "LAST_REWIND"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class RestoreError(CosError):
    """A restore cannot be done safely; nothing was changed."""

    exit_code = 1


def plan_ops(changes: list[tuple[str, Entry | None, Entry | None, str]]
             ) -> list[dict[str, object]]:
    """The operations that turn the current tree into the target: deletes (deepest first), then
    writes (shallowest first)."""
    deletes: list[dict[str, object]] = []
    writes: list[dict[str, object]] = []
    for path, target, current, prefix in changes:
        check_path(path)
        if target is None:
            deletes.append({"op": "delete", "path": path})
        else:
            writes.append({**write_op(path, target, prefix), "replaces": current is not None})
    deletes.sort(key=lambda op: (-str(op["path"]).count("/"), str(op["path"])))
    writes.sort(key=lambda op: (str(op["path"]).count("/"), str(op["path"])))
    return deletes + writes


def write_op(path: str, entry: Entry, layer: str) -> dict[str, object]:
    """The operation that writes manifest entry `entry` at `path` (`layer`: the dir of the
    layer whose repository holds its bytes when the store does not)."""
    return {"op": "write", "path": path, "kind": entry[0], "sha1": entry[1], "mode": entry[2],
            "oid": entry[3], "layer": layer}


def fetch(root: str, store: ObjectStore, ops: list[dict[str, object]]) -> dict[int, bytes]:
    """The bytes each write operation puts in place, by index in `ops`, checked against the
    entry's blob id.

    Raises:
        DamagedObject: a store object is missing or damaged.
        RestoreError: git no longer has a blob the snapshot refers to.
    """
    found: dict[int, bytes] = {}
    from_git: dict[str, list[tuple[int, str]]] = {}
    for number, op in enumerate(ops):
        if op["op"] != "write":
            continue
        if op["oid"]:
            found[number] = store.get(str(op["oid"]))
        else:
            from_git.setdefault(str(op["layer"]), []).append((number, str(op["sha1"])))
    for prefix, wanted in from_git.items():
        blobs = _git_blobs(os.path.join(root, prefix) if prefix else root,
                           [sha for _, sha in wanted])
        for number, sha in wanted:
            if sha not in blobs:
                raise RestoreError(f"git no longer has blob {sha} of {ops[number]['path']} "
                                   "(pruned from the repository); nothing was changed")
            found[number] = blobs[sha]
    for number, data in found.items():
        if blob_sha1(data) != ops[number]["sha1"]:
            raise RestoreError(f"the stored bytes of {ops[number]['path']} do not match the "
                               "checkpoint; nothing was changed (run cos checkpoints verify)")
    return found


def _git_blobs(repo: str, shas: list[str]) -> dict[str, bytes]:
    """The blobs `shas` of the repository at `repo` (those it no longer has are left out): read
    from its object files, and from `git cat-file` those this process cannot read."""
    from coding_os.git.objects import Unreadable, objects_of
    from coding_os.git.repo import checkout_root

    blobs: dict[str, bytes] = {}
    top = checkout_root(repo)
    objects = objects_of(top) if top is not None else None
    unique = sorted(set(shas))
    if objects is not None:
        for sha in unique:
            try:
                kind, data = objects.read(sha)
            except Unreadable:
                continue
            if kind == "blob" and blob_sha1(data) == sha:
                blobs[sha] = data
        unique = [sha for sha in unique if sha not in blobs]
    if not unique:
        return blobs
    from coding_os.git.command import git

    out = git(repo, "cat-file", "--batch",
              stdin="".join(f"{sha}\n" for sha in unique).encode("ascii"))
    pos = 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        header = out[pos:end].decode("ascii", "replace").split(" ")
        pos = end + 1
        if len(header) == 3:
            size = int(header[2])
            blobs[header[0]] = out[pos:pos + size]
            pos += size + 1
    return blobs


def _check_tree(root: str, ops: list[dict[str, object]]) -> None:
    """Refuse before anything changes: a path through a symlink or a file, a directory in the
    way, a directory that cannot be written."""
    deleted = {str(op["path"]) for op in ops if op["op"] == "delete"}
    for op in ops:
        path = str(op["path"])
        parts = path.split("/")
        for depth in range(1, len(parts)):
            above = "/".join(parts[:depth])
            try:
                st = os.lstat(os.path.join(root, above))
            except FileNotFoundError:
                break
            if stat.S_ISDIR(st.st_mode):
                continue
            if above in deleted:
                break  # a file or symlink in the way that the restore removes first
            what = "a symlink" if stat.S_ISLNK(st.st_mode) else "a file"
            raise RestoreError(f"{above} is {what} where the checkpoint has a directory "
                               f"(for {path}); it is not followed; nothing was changed")
        full = os.path.join(root, path)
        if op["op"] == "write":
            try:
                is_dir = stat.S_ISDIR(os.lstat(full).st_mode)
            except (FileNotFoundError, NotADirectoryError):
                is_dir = False
            if is_dir and _has_other_files(root, path, deleted):
                raise RestoreError(f"{path} is a directory holding files the checkpoint "
                                   "does not know; nothing was changed")
        _check_writable(root, path, deleted)


def _has_other_files(root: str, path: str, deleted: set[str]) -> bool:
    """Whether the directory `path` holds anything the restore does not delete first."""
    for folder, dirs, files in os.walk(os.path.join(root, path)):
        for name in files:
            rel = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
            if rel not in deleted:
                return True
        if any(os.path.islink(os.path.join(folder, name)) for name in dirs):
            return True
    return False


def _check_writable(root: str, path: str, deleted: set[str]) -> None:
    """The nearest directory above `path` that will still be there must be writable (a file or
    symlink the restore deletes first does not count)."""
    folder = os.path.dirname(path)
    while folder:
        full = os.path.join(root, folder)
        if folder not in deleted and os.path.isdir(full) and not os.path.islink(full):
            break
        folder = os.path.dirname(folder)
    full = os.path.join(root, folder) if folder else root
    if not os.access(full, os.W_OK | os.X_OK):
        raise RestoreError(f"directory {folder or '.'} is read-only; nothing was changed")


def _permissions(op: dict[str, object], umask: int) -> int:
    """The permission bits a restored file gets: those recorded when cos stored its bytes; for a
    file of the commit, git's 0o644 or 0o755 under the umask, as a checkout would."""
    mode = int(str(op["mode"]))
    if op["oid"]:
        return mode & 0o7777
    return (0o755 if mode & 0o111 else 0o644) & ~umask


def _open_parent(root_fd: int, path: str, create: bool) -> int | None:
    """A descriptor of `path`'s directory, walked without following symlinks (created when
    `create`); None when it does not exist and `create` is false."""
    fd = os.dup(root_fd)
    for part in path.split("/")[:-1]:
        try:
            nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                os.close(fd)
                return None
            os.mkdir(part, 0o755, dir_fd=fd)
            nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise RestoreError(f"a symlink or file is in the way of {path}; "
                                   "not followed") from None
            raise
        os.close(fd)
        fd = nfd
    return fd


def _staged(journal: dict[str, object], number: int) -> str:
    """Where write `number` of `journal` is staged: `staging/<id>.<n>` (`staging/<id>/<n>` in
    the journals of the first layout)."""
    if journal.get("layout") == 2:
        return os.path.join(str(journal["staging"]), f"{journal['id']}.{number}")
    return os.path.join(str(journal["staging"]), str(number))


def _apply(root: str, journal: dict[str, object]) -> None:
    ops = journal["ops"]
    assert isinstance(ops, list)
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        for number, op in enumerate(ops):
            path = str(op["path"])
            name = path.rsplit("/", 1)[-1]
            if op["op"] == "delete":
                try:
                    parent = _open_parent(root_fd, path, create=False)
                except RestoreError:
                    continue  # a file or symlink now stands where its directory was: gone
                if parent is None:
                    continue
                try:
                    _remove(parent, name)
                finally:
                    os.close(parent)
                _prune(root_fd, path)
                continue
            staged = _staged(journal, number)
            if not os.path.lexists(staged):
                continue  # renamed into place before an interruption
            parent = _open_parent(root_fd, path, create=True)
            assert parent is not None
            try:
                try:
                    st = os.lstat(name, dir_fd=parent)
                except FileNotFoundError:
                    st = None
                if st is not None and stat.S_ISDIR(st.st_mode):
                    _remove_empty_tree(parent, name)
                try:
                    os.rename(staged, name, dst_dir_fd=parent)
                except OSError as exc:
                    if exc.errno != errno.EXDEV:
                        raise
                    # The state dir is on another filesystem than the tree (a linked worktree
                    # elsewhere): copy through a temporary file beside the target instead. The
                    # staged file stays, so doing it again after an interruption is the same.
                    _copy_into(staged, parent, name, f".cos-restore-{journal['id']}-{number}")
            finally:
                os.close(parent)
    finally:
        os.close(root_fd)


def _copy_into(staged: str, parent: int, name: str, temp: str) -> None:
    """Put a copy of the staged file or symlink at `name` in `parent`, atomically."""
    st = os.lstat(staged)
    try:
        os.unlink(temp, dir_fd=parent)
    except FileNotFoundError:
        pass
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(staged), temp, dir_fd=parent)
    else:
        with open(staged, "rb") as f:
            data = f.read()
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW,
                     0o600, dir_fd=parent)
        try:
            durable.write_all(fd, data)
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
            os.fsync(fd)
        finally:
            os.close(fd)
    os.rename(temp, name, src_dir_fd=parent, dst_dir_fd=parent)


def _stage(journal: dict[str, object], ops: list[dict[str, object]],
           data: dict[int, bytes]) -> list[str]:
    """Write each write operation's bytes (or symlink) where `journal` stages it; return what
    must be flushed before the journal commits: the files, and the staging directory (which
    holds the symlinks)."""
    folder = durable.ensure_dir(str(journal["staging"]))
    umask = os.umask(0)
    os.umask(umask)
    files = []
    for number, op in enumerate(ops):
        if op["op"] != "write":
            continue
        path = _staged(journal, number)
        content = data[number]
        if op["kind"] == "l":
            os.symlink(os.fsdecode(content), path)
            continue
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            durable.write_all(fd, content)
            os.fchmod(fd, _permissions(op, umask))
        finally:
            os.close(fd)
        files.append(path)
    return [*files, folder]


def _remove_empty_tree(parent: int, name: str) -> None:
    """Remove the directory `name` (in `parent`) and the empty directories in it, bottom-up,
    without following symlinks; a file found inside stops it (checked before the journal)."""
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    try:
        for entry in os.listdir(fd):
            st = os.lstat(entry, dir_fd=fd)
            if not stat.S_ISDIR(st.st_mode):
                raise RestoreError(f"{name}/{entry} is in the way of the restore")
            _remove_empty_tree(fd, entry)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)


def _remove(parent: int, name: str) -> None:
    try:
        st = os.lstat(name, dir_fd=parent)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        try:
            os.rmdir(name, dir_fd=parent)
        except OSError:
            pass  # holds what the checkpoint does not know: kept
        return
    os.unlink(name, dir_fd=parent)


def _prune(root_fd: int, path: str) -> None:
    """Remove the directories a delete left empty, up to the root."""
    parts = path.split("/")[:-1]
    while parts:
        parent = _open_parent(root_fd, "/".join(parts), create=False)
        if parent is None:
            parts.pop()
            continue
        try:
            os.rmdir(parts[-1], dir_fd=parent)
        except OSError:
            return
        finally:
            os.close(parent)
        parts.pop()


def prepare(root: str, store: ObjectStore, ops: list[dict[str, object]]) -> dict[int, bytes]:
    """Everything `restore` checks before it touches anything: the bytes of each write
    (verified), and the tree (no symlink or file in the way, writable directories).

    Raises:
        RestoreError, DamagedObject: the restore cannot be done safely.
    """
    data = fetch(root, store, ops)
    _check_tree(root, ops)
    return data


def restore(root: str, checkpoints_dir: str, store: ObjectStore, ops: list[dict[str, object]],
            record: dict[str, object], after: Callable[[], None] | None = None,
            data: dict[int, bytes] | None = None,
            before_journal: Callable[[], None] | None = None,
            before_record: dict[str, object] | None = None) -> None:
    """Apply `ops` to the tree at `root` with the journal; the caller holds the exclusive lock.
    `record` goes into the journal (what is being restored, and the checkpoint taken before,
    whose record is `before_record`); the objects `store` holds unflushed (that checkpoint's)
    are flushed with the staged bytes and the journal; `before_journal` runs once they are,
    just before the journal commits the restore (nothing it leaves behind when that fails);
    `after` runs once the tree is restored, before the journal is removed; `data` is what
    `prepare` returned, when the caller checked first.

    Raises:
        RestoreError, DamagedObject, StateIOError: nothing was changed.
    """
    data = prepare(root, store, ops) if data is None else data
    journal = {**record, "root": root, "layout": 2,
               "staging": os.path.join(checkpoints_dir, STAGING), "ops": ops,
               "before_record": before_record}
    path = os.path.join(checkpoints_dir, JOURNAL)
    tmp = os.path.join(checkpoints_dir, JOURNAL_TMP)
    try:
        _unstage(checkpoints_dir, None)  # what an abandoned or older restore left
        # Written first: while it exists, what is staged is known to be there (see `pending`).
        # ASCII: names that are not UTF-8 survive escaped.
        durable.overwrite(tmp, jsonwire.dumps(journal).encode("ascii"))
        staged = _stage(journal, ops, data)
        store.flush(also=[*staged, tmp])
        if before_journal is not None:
            before_journal()
        os.replace(tmp, path)
    except (OSError, ValueError, StateIOError) as exc:
        _unstage(checkpoints_dir, journal)
        if isinstance(exc, StateIOError):
            raise StateIOError(f"{exc}; nothing was changed") from None
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise StateIOError(f"cannot stage the restore in {os.path.dirname(tmp)}: {reason}; "
                           "nothing was changed") from None
    _finish(checkpoints_dir, journal, after)


def _unstage(checkpoints_dir: str, journal: dict[str, object] | None) -> None:
    """Remove what a restore staged (all that is staged when `journal` is None: the restore
    lock is held, so no other restore is staging), then its temporary journal. The staging
    directory stays for the next restore (making a directory costs as much as a file)."""
    folder = os.path.join(checkpoints_dir, STAGING)
    if journal is None:
        if os.path.islink(folder) or os.path.lexists(folder) and not os.path.isdir(folder):
            _remove_quietly(folder)  # not ours to follow: made anew by the next restore
        for name in os.listdir(folder) if os.path.isdir(folder) else []:
            _remove_tree(os.path.join(folder, name))  # a directory: the first layout's
    elif journal.get("layout") == 2:
        for number in range(len(journal["ops"])):  # type: ignore[arg-type]
            _remove_quietly(_staged(journal, number))
    else:
        _remove_tree(str(journal.get("staging")))
    _remove_tree(os.path.join(checkpoints_dir, JOURNAL_TMP))


def _remove_tree(path: str) -> None:
    """Remove the file, symlink or directory at `path` (never what a symlink points to)."""
    if os.path.isdir(path) and not os.path.islink(path):
        import shutil

        shutil.rmtree(path, ignore_errors=True)
    else:
        _remove_quietly(path)


_remove_quietly = durable.unlink_quietly


def _finish(checkpoints_dir: str, journal: dict[str, object],
            after: Callable[[], None] | None) -> None:
    try:
        _apply(str(journal["root"]), journal)
    except (OSError, RestoreError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _abandon(checkpoints_dir, journal, f"{reason} (at {getattr(exc, 'filename', '')})"
                 if isinstance(exc, OSError) else reason)
    if after is not None:
        after()
    _unstage(checkpoints_dir, journal)  # while the journal says the restore is not done
    os.unlink(os.path.join(checkpoints_dir, JOURNAL))


def recover(checkpoints_dir: str, after: Callable[[dict[str, object]], None] | None = None
            ) -> dict[str, object] | None:
    """Complete an interrupted restore (its journal), or remove the temporary journal and the
    staging of one that never committed. Returns the completed journal, or None. Takes the
    exclusive lock.

    A journal that cannot be completed (damaged, naming paths outside its tree, or an operation
    that fails) is moved aside to `journal.failed-<time>.json`, so it never blocks later calls.

    Raises:
        RestoreError: the journal could not be completed (the message says how to get the tree
            back to where it was before that rewind).
    """
    if not pending(checkpoints_dir):
        return None
    with restore_lock(checkpoints_dir, exclusive=True):
        path = os.path.join(checkpoints_dir, JOURNAL)
        try:
            with open(path, "rb") as f:
                journal = jsonwire.loads(f.read())
        except FileNotFoundError:
            journal = None
        except (OSError, ValueError) as exc:
            _abandon(checkpoints_dir, None, f"its journal cannot be read ({exc})")
        if journal is None:
            _unstage(checkpoints_dir, None)
            return None
        problem = _journal_problem(checkpoints_dir, journal)
        if problem or not isinstance(journal, dict):
            _abandon(checkpoints_dir, journal if isinstance(journal, dict) else None,
                     problem or "its journal is damaged")
        done: dict[str, object] = journal
        _keep_before(checkpoints_dir, done)
        _finish(checkpoints_dir, done, (lambda: after(done)) if after is not None else None)
        return done


def _keep_before(checkpoints_dir: str, journal: dict[str, object]) -> None:
    """Write the `before` checkpoint's record again from the journal if it was lost (it is not
    flushed to disk on its own): the undo of the completed restore needs it."""
    from coding_os.checkpoints import points
    from coding_os.errors import CosError as Error

    kept = journal.get("before_record")
    if not isinstance(kept, dict) or kept.get("id") != journal.get("before") \
            or not points.valid_id(kept.get("id")):
        return
    try:
        points.load(checkpoints_dir, str(kept["id"]))
    except Error:
        points.write(checkpoints_dir, kept)


def _journal_problem(checkpoints_dir: str, journal: object) -> str | None:
    """Why `journal` cannot be trusted, or None: its paths stay inside its tree, its staging
    is this store's, and its tree is the one its `before` checkpoint was taken of."""
    from coding_os.checkpoints import points
    from coding_os.errors import CosError as Error

    if not isinstance(journal, dict) or not isinstance(journal.get("ops"), list):
        return "its journal is damaged"
    staging = os.path.join(checkpoints_dir, STAGING)
    if journal.get("layout") is None:  # the first layout: a directory per restore
        staging = os.path.join(staging, str(journal.get("id")))
    if journal.get("staging") != staging or not points.valid_id(journal.get("id")) \
            or journal.get("layout") not in (None, 2):
        return "its journal names a staging area outside the checkpoint store"
    try:
        for op in journal["ops"]:
            check_path(op.get("path") if isinstance(op, dict) else None)
        kept = journal.get("before_record")
        try:
            before = points.load(checkpoints_dir, str(journal.get("before")))
        except Error:
            if not isinstance(kept, dict) or kept.get("id") != journal.get("before") \
                    or not points.valid_id(kept.get("id")):
                raise
            before = kept  # lost to a power cut: the journal holds it
    except Error as exc:
        return f"its journal is not usable ({exc})"
    if before.get("root") != journal.get("root"):
        return "its journal names another tree than its checkpoint"
    if not _tree_of_project(checkpoints_dir, journal.get("root")):
        return "its journal names a tree outside this state dir's project"
    return None


def _tree_of_project(checkpoints_dir: str, root: object) -> bool:
    """Whether `root` is a tree this state dir takes checkpoints of: its project (the state
    dir's parent) or a linked worktree of it, or a directory below one (DESIGN.md §11: paths
    come from the resolved root, never from a file)."""
    from coding_os.git.repo import linked_worktrees

    if not isinstance(root, str) or not os.path.isabs(root) or os.path.realpath(root) != root:
        return False
    project = os.path.dirname(os.path.dirname(os.path.realpath(checkpoints_dir)))
    return any(root == top or root.startswith(top.rstrip(os.sep) + os.sep)
               for top in (project, *linked_worktrees(project)))


def _abandon(checkpoints_dir: str, journal: dict[str, object] | None, reason: str) -> NoReturn:
    """Move a journal that cannot be completed aside, and say how to get the tree back."""
    import time

    path = os.path.join(checkpoints_dir, JOURNAL)
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(3).hex()}"
    aside = os.path.join(checkpoints_dir, f"journal.failed-{stamp}.json")
    try:
        os.replace(path, aside)
    except OSError:
        aside = path
    # What it staged is of no use now (the before checkpoint brings the tree back); the journal
    # is not trusted to say where that is: all that is staged goes (the lock is held).
    _unstage(checkpoints_dir, None)
    before = journal.get("before") if journal else None
    hint = (f"; cos rewind {before} --code brings back the tree as it was before it"
            if before else "")
    raise RestoreError(f"an interrupted rewind could not be completed: {reason}; its journal "
                       f"is kept at {aside}{hint}")


LAST_REWIND = "last-rewind.json"


def recover_pending(tiers: Tiers) -> dict[str, object] | None:
    """Complete a restore that was interrupted (its journal); None when there was none."""
    folder = tiers.checkpoints_dir
    if not pending(folder):
        return None
    return recover(folder, after=lambda journal: remember_rewind(folder, journal))


def remember_rewind(folder: str, journal: dict[str, object]) -> None:
    """What `cos rewind --undo` undoes. Written in place and not flushed: it is written under
    the restore lock while the journal exists, so a process killed meanwhile leaves it to
    `recover`, which writes it again; a reader meeting it half written takes it as missing.
    A power cut that lost it loses the shortcut only (the checkpoint taken before the rewind
    is listed, and `cos rewind <it> --code` is the undo)."""
    keep = {key: journal.get(key) for key in ("id", "kind", "target", "before", "ts", "root")}
    durable.overwrite(os.path.join(folder, LAST_REWIND), jsonwire.dumps(keep).encode("ascii"))


def last_rewind(tiers: Tiers) -> dict[str, object] | None:
    """What `remember_rewind` kept of the last rewind, or None."""
    data = durable.read_small(os.path.join(tiers.checkpoints_dir, LAST_REWIND), 4096)
    try:
        value = jsonwire.loads(data.decode("ascii", "replace")) if data else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
