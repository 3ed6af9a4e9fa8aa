"""Restoring a tree to a snapshot, atomically from the user's view (DESIGN.md §5).

A restore runs in three phases under an exclusive lock (`checkpoints/restore.lock`; taking a
checkpoint waits on it, so no snapshot sees a tree half restored):

1. **Check.** Every change is checked before anything is touched: no path outside the tree or
   through a symlink (a symlink in the way is never followed), every directory to write in
   writable, every byte to write read and verified against its blob id. A failure here — a
   damaged object, git no longer holding a blob — leaves the tree untouched.
2. **Journal.** `checkpoints/journal.json` lists the operations (deletes deepest first, then
   writes shallowest first) with the bytes each write puts in place (base64) and the permission
   bits it gives. It is written to `journal.json.tmp` and flushed to disk together with the
   objects of the snapshot of the tree as it is (the caller's, for the undo), then renamed into
   place: from there the restore is committed. A full disk here leaves the tree untouched.
3. **Apply**, then remove the journal. Every operation is idempotent, so applying the journal
   again from the start is the same as finishing it: a delete of what is gone is done; a write
   puts the journal's bytes in place, over the file there when it is a plain file of its own
   (one name, this user's; the way an editor saves), else as a new file (a symlink, a directory
   left empty, a hard link, a read-only or busy file are removed first). No temporary file
   goes into the tree and nothing is staged elsewhere: a restore of a few files creates one
   file of its own, the journal.

A process killed in phases 1 and 2 leaves no journal (at most its temporary file, removed by the
next call): the tree is as before. Killed in phase 3, it leaves the journal, and the next `cos`
call (`recover`) applies it again to the end: the tree is exactly at the snapshot, never between.
"""

from __future__ import annotations

import base64
import binascii
import errno
import json
import os
import stat
from collections.abc import Callable
from typing import NoReturn

from coding_os.checkpoints.lock import JOURNAL, JOURNAL_TMP, pending, restore_lock
from coding_os.checkpoints.snapshot import _blob_sha1, check_path
from coding_os.checkpoints.store import ObjectStore
from coding_os.errors import CosError, StateIOError
from coding_os.state import durable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.checkpoints.snapshot import Entry

__all__ = ["RestoreError", "plan_ops", "fetch", "prepare", "restore", "recover"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class RestoreError(CosError):
    """A restore cannot be done safely; nothing was changed."""

    exit_code = 1


def plan_ops(changes: list[tuple[str, Entry | None, Entry | None, str]]
             ) -> list[dict[str, object]]:
    """The operations that turn the current tree into the target: deletes (deepest first), then
    writes (shallowest first)."""
    deletes, writes = [], []
    for path, target, current, prefix in changes:
        check_path(path)
        if target is None:
            deletes.append({"op": "delete", "path": path})
        else:
            writes.append({"op": "write", "path": path, "kind": target[0], "sha1": target[1],
                           "mode": target[2], "oid": target[3], "layer": prefix,
                           "replaces": current is not None})
    deletes.sort(key=lambda op: (-str(op["path"]).count("/"), str(op["path"])))
    writes.sort(key=lambda op: (str(op["path"]).count("/"), str(op["path"])))
    return deletes + writes


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
        if _blob_sha1(data) != ops[number]["sha1"]:
            raise RestoreError(f"the stored bytes of {ops[number]['path']} do not match the "
                               "checkpoint; nothing was changed (run cos checkpoints verify)")
    return found


def _git_blobs(repo: str, shas: list[str]) -> dict[str, bytes]:
    """The blobs `shas` of the repository at `repo` (those it no longer has are left out): read
    from its object files, and from `git cat-file` those this process cannot read."""
    from coding_os.checkpoints.gitobjects import Unreadable, objects_of
    from coding_os.state.root import checkout_root

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
            if kind == "blob" and _blob_sha1(data) == sha:
                blobs[sha] = data
        unique = [sha for sha in unique if sha not in blobs]
    if not unique:
        return blobs
    from coding_os.checkpoints.gitcmd import git

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


def _apply(root: str, journal: dict[str, object]) -> None:
    ops = journal["ops"]
    assert isinstance(ops, list)
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        for op in ops:
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
            parent = _open_parent(root_fd, path, create=True)
            assert parent is not None
            try:
                _put(parent, name, op)
            finally:
                os.close(parent)
    finally:
        os.close(root_fd)


_IN_PLACE = os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _put(parent: int, name: str, op: dict[str, object]) -> None:
    """Make `name` (in `parent`) what the write `op` says: a symlink made anew; a file's bytes
    written over the file there when it is a plain file of its own (a regular file with one
    name, this user's), else into a new file."""
    content = _content(op)
    try:
        st: os.stat_result | None = os.lstat(name, dir_fd=parent)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        _remove_empty_tree(parent, name)
        st = None
    if op["kind"] == "l":
        _unlink_quietly(parent, name)
        os.symlink(os.fsdecode(content), name, dir_fd=parent)
        return
    fd = -1
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink == 1 \
            and st.st_uid == os.geteuid():
        try:
            fd = os.open(name, _IN_PLACE, dir_fd=parent)
        except OSError:
            fd = -1  # read-only, a program running from it, replaced meanwhile: a new file
    if fd < 0:
        _unlink_quietly(parent, name)
        try:
            fd = os.open(name, _NEW, 0o600, dir_fd=parent)
        except FileExistsError:  # made meanwhile by someone else: replaced all the same
            _unlink_quietly(parent, name)
            fd = os.open(name, _NEW, 0o600, dir_fd=parent)
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, int(str(op["perm"])))
    finally:
        os.close(fd)


def _unlink_quietly(parent: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=parent)
    except FileNotFoundError:
        pass


def _content(op: dict[str, object]) -> bytes:
    """The bytes a journal's write operation puts in place.

    Raises:
        RestoreError: they are not base64, or do not hash to the operation's blob id.
    """
    try:
        data = base64.b64decode(str(op["data"]), validate=True)
    except (KeyError, binascii.Error):
        raise RestoreError(f"the journal holds no bytes for {op.get('path')}") from None
    if _blob_sha1(data) != op.get("sha1"):
        raise RestoreError(f"the journal's bytes for {op.get('path')} are damaged")
    return data


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
            before_journal: Callable[[], None] | None = None) -> None:
    """Apply `ops` to the tree at `root` with the journal; the caller holds the exclusive lock.
    `record` goes into the journal (what is being restored, and the checkpoint taken before);
    the objects `store` holds unflushed (that checkpoint's) are flushed with the journal;
    `before_journal` runs once they are, just before the journal commits the restore (nothing
    it leaves behind when that fails); `after` runs once the tree is restored, before the
    journal is removed; `data` is what `prepare` returned, when the caller checked first.

    Raises:
        RestoreError, DamagedObject, StateIOError: nothing was changed.
    """
    from coding_os import jsonwire

    data = prepare(root, store, ops) if data is None else data
    umask = os.umask(0)
    os.umask(umask)
    journal = {**record, "root": root, "ops": [
        {**op, "perm": _permissions(op, umask),
         "data": base64.b64encode(data[number]).decode("ascii")}
        if op["op"] == "write" else op for number, op in enumerate(ops)]}
    path = os.path.join(checkpoints_dir, JOURNAL)
    tmp = os.path.join(checkpoints_dir, JOURNAL_TMP)
    try:
        # ASCII: names that are not UTF-8 survive escaped.
        durable.overwrite(tmp, jsonwire.dumps(journal).encode("ascii"))
        store.flush(also=[tmp])
        if before_journal is not None:
            before_journal()
        os.replace(tmp, path)
    except StateIOError as exc:
        _remove_quietly(tmp)
        raise StateIOError(f"{exc}; nothing was changed") from None
    except (OSError, ValueError) as exc:
        _remove_quietly(tmp)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise StateIOError(f"cannot write the restore's journal {path}: {reason}; "
                           "nothing was changed") from None
    _finish(checkpoints_dir, journal, after)


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


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
    os.unlink(os.path.join(checkpoints_dir, JOURNAL))


def recover(checkpoints_dir: str, after: Callable[[dict[str, object]], None] | None = None
            ) -> dict[str, object] | None:
    """Complete an interrupted restore (its journal), or remove the temporary journal of one
    that never committed. Returns the completed journal, or None. Takes the exclusive lock.

    A journal that cannot be completed (damaged, naming paths outside its tree, or an operation
    that fails) is moved aside to `journal.failed-<time>.json`, so it never blocks later calls.

    Raises:
        RestoreError: the journal could not be completed (the message says how to get the tree
            back to where it was before that rewind).
    """
    if not pending(checkpoints_dir):
        return None
    with restore_lock(checkpoints_dir, exclusive=True):
        _remove_quietly(os.path.join(checkpoints_dir, JOURNAL_TMP))
        path = os.path.join(checkpoints_dir, JOURNAL)
        try:
            with open(path, "rb") as f:
                journal = json.loads(f.read())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            _abandon(checkpoints_dir, None, f"its journal cannot be read ({exc})")
        problem = _journal_problem(checkpoints_dir, journal)
        if problem:
            _abandon(checkpoints_dir, journal if isinstance(journal, dict) else None, problem)
        done: dict[str, object] = journal
        _finish(checkpoints_dir, done, (lambda: after(done)) if after is not None else None)
        return done


def _journal_problem(checkpoints_dir: str, journal: object) -> str | None:
    """Why `journal` cannot be trusted, or None: its paths stay inside its tree, each write's
    bytes are whole, and its tree is the one its `before` checkpoint was taken of."""
    from coding_os.checkpoints import points
    from coding_os.errors import CosError as Error

    if not isinstance(journal, dict) or not isinstance(journal.get("ops"), list) \
            or not points.valid_id(journal.get("id")):
        return "its journal is damaged"
    try:
        for op in journal["ops"]:
            if not isinstance(op, dict) or op.get("op") not in ("write", "delete"):
                return "its journal is damaged"
            check_path(op.get("path"))
            if op["op"] == "write":
                if op.get("kind") not in ("f", "l") or not isinstance(op.get("perm"), int):
                    return "its journal is damaged"
                _content(op)
        before = points.load(checkpoints_dir, str(journal.get("before")))
    except Error as exc:
        return f"its journal is not usable ({exc})"
    if before.get("root") != journal.get("root"):
        return "its journal names another tree than its checkpoint"
    return None


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
    before = journal.get("before") if journal else None
    hint = (f"; cos rewind {before} --code brings back the tree as it was before it"
            if before else "")
    raise RestoreError(f"an interrupted rewind could not be completed: {reason}; its journal "
                       f"is kept at {aside}{hint}")
