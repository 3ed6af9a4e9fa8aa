"""Each session's latest checkpoint (its head), and knowing without git that the tree is still as
that checkpoint saw it.

`checkpoints/heads/<session>` names the session's latest checkpoint, so taking the next one reads
one small file rather than the records: its id and manifest object, the manifest's text (the next
checkpoint knows without hashing whether the tree changed) and, after a checkpoint of a git tree
of at most `LIMIT` files and directories, the tree's stat fingerprint: the `lstat` of each file
(size, mtime, ctime, inode, mode) and the mtime of each directory git does not ignore. A
checkpoint runs `git status`, which costs a process start even when nothing changed — most of a
hook's time on a small repository — so the next checkpoint compares the fingerprint first: an
equal one means the tree is as that checkpoint saw it (a file added, removed or renamed changes
its directory's mtime; a file rewritten or chmod-ed changes its own stat), and the head stands
for it without git. Larger trees keep none: there, `git status` is faster than Python's `lstat`s.
The fingerprint is written with its head, in one file, so it never vouches for another head.

The walk happens after the snapshot, so anything that changed since the snapshot began must not
be trusted: a fingerprint holding a time at or after `started - RACY_NS` (the margin covers file
systems with coarse timestamps) is not kept, and the next checkpoint asks git.

Before a tool call, the hook needs this module alone (and lock.py, to know no interrupted
restore waits): `standing` tells whether the session's head stands for the tree, and then it is
the checkpoint of that point too; nothing else of the checkpoints is imported.
"""

from __future__ import annotations

import os
import stat

from coding_os import durable, jsonwire
from coding_os.checkpoints.lock import pending

__all__ = ["LIMIT", "RACY_NS", "Head", "load", "standing", "save", "drop", "fingerprint_of"]

LIMIT = 2000  # files and directories: about where git's status becomes cheaper than lstats
RACY_NS = 100_000_000
_VERSION = 2  # of the fingerprint: 1 was a file of its own, `heads/<session>.fp`
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class Head:
    """A session's latest checkpoint: its id, its manifest object, the manifest's text, and the
    fingerprint of the tree it saw (its JSON text; None when none was kept)."""

    __slots__ = ("id", "manifest", "text", "fingerprint")

    def __init__(self, checkpoint: str, manifest: str, text: str,
                 fingerprint: str | None = None) -> None:
        self.id, self.manifest, self.text = checkpoint, manifest, text
        self.fingerprint = fingerprint

    def stands(self, root: str) -> bool:
        """Whether the tree at `root` is as this checkpoint saw it, by its fingerprint (False
        when it kept none, or one of another tree)."""
        if self.fingerprint is None:
            return False
        try:
            value = jsonwire.loads(self.fingerprint)
        except ValueError:
            return False
        if not isinstance(value, dict):
            return False
        now = _stats(root, value)
        return now is not None and now == value.get("stats")

    def reused(self, session: str, root: str) -> dict[str, object]:
        """What a checkpoint that reuses this one returns: its id, session, root and manifest,
        with `reused` (nothing was written)."""
        return {"id": self.id, "session": session, "root": root, "mode": "worktree",
                "manifest": self.manifest, "objects_written": 0, "bytes_written": 0,
                "reused": True, "scan": "fingerprint"}


def _path(checkpoints_dir: str, session: str) -> str:
    return os.path.join(checkpoints_dir, "heads", session)


def load(checkpoints_dir: str, session: str) -> Head | None:
    """The latest checkpoint of `session`, or None."""
    try:
        with open(_path(checkpoints_dir, session), "rb") as f:
            data = f.read()
    except OSError:
        return None
    first, _, rest = data.decode("ascii", "replace").partition("\n")
    text, newline, kept = rest.partition("\n")
    checkpoint, _, manifest = first.partition(" ")
    if not checkpoint or not manifest:
        return None
    return Head(checkpoint, manifest, text, kept if newline and kept else None)


def standing(checkpoints_dir: str, session: str, root: str) -> Head | None:
    """The head of `session` when the tree at `root` is still as it saw (see Head.stands) and
    no interrupted restore waits to be completed; else None.

    No lock is taken: each path's stat is compared once, and a stat that still matches means
    the path did not change since the head's snapshot up to that moment (a change moves ctime,
    or a directory's mtime, for good), so when all match the tree was the head's when the walk
    began. A restore changes the tree only while its journal is there, which makes this None.
    """
    if pending(checkpoints_dir):
        return None
    head = load(checkpoints_dir, session)
    return head if head is not None and head.stands(root) else None


def save(checkpoints_dir: str, session: str, checkpoint: str, manifest: str, text: str,
         fingerprint: dict[str, object] | str | None = None) -> None:
    """Make `checkpoint` (its manifest object and the manifest's `text`) the latest of
    `session`, with the fingerprint of the tree it saw (a value of `fingerprint_of`, or the
    text a head kept: Head.fingerprint) or none.

    Raises:
        StateIOError: it cannot be written.
    """
    if isinstance(fingerprint, dict):
        fingerprint = jsonwire.dumps(fingerprint)
    durable.ensure_dir(os.path.join(checkpoints_dir, "heads"))
    data = f"{checkpoint} {manifest}\n{text}\n{fingerprint or ''}".encode("ascii")
    durable.atomic_write(_path(checkpoints_dir, session), data, sync=False)
    # A cos before this one kept the fingerprint in a file of its own: it vouches for nothing.
    durable.unlink_quietly(_path(checkpoints_dir, session) + ".fp")


def drop(checkpoints_dir: str, session: str, checkpoint: str) -> None:
    """Forget the head of `session` when it is `checkpoint` (whose record is being removed:
    a head never names a checkpoint that is gone). Called under the exclusive restore lock, so
    no checkpoint moves the head meanwhile."""
    head = load(checkpoints_dir, session)
    if head is not None and head.id == checkpoint:
        durable.unlink_quietly(_path(checkpoints_dir, session))


def fingerprint_of(root: str, excluded: object, ignored: set[str], started_ns: int,
                limit: int = LIMIT) -> dict[str, object] | None:
    """The fingerprint of the tree at `root` now, or None (too large, or something in it
    changed since `started_ns`). `excluded(rel)` names what snapshots leave out; `ignored` holds
    what git ignores (directories with a trailing slash)."""
    racy = started_ns - RACY_NS
    dirs: list[str] = []
    dir_stats: list[int] = []
    files: list[str] = []
    file_stats: list[int] = []
    pending = [""]
    while pending:
        rel = pending.pop()
        full = os.path.join(root, rel) if rel else root
        try:
            st = os.lstat(full)
            entries = list(os.scandir(full))
        except OSError:
            return None
        if st.st_mtime_ns >= racy:
            return None
        dirs.append(rel)
        dir_stats.append(st.st_mtime_ns)
        for entry in entries:
            path = f"{rel}/{entry.name}" if rel else entry.name
            if entry.name == ".git" or excluded(path) or path in ignored:  # type: ignore[operator]
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    if path + "/" not in ignored:
                        pending.append(path)
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                return None
            if st.st_mtime_ns >= racy or st.st_ctime_ns >= racy:
                return None
            files.append(path)
            file_stats += (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)
        if len(dirs) + len(files) > limit:
            return None
    # Flat lists: a list per entry would make the reader walk them all for their depth.
    return {"v": _VERSION, "root": root, "dirs": len(dirs), "paths": dirs + files,
            "stats": dir_stats + file_stats}


def _stats(root: str, fingerprint: dict[str, object]) -> list[int] | None:
    """The stats of the paths `fingerprint` lists, as it keeps them, now; None when it is not
    one of the tree at `root`, or a path is gone or no longer a directory."""
    paths, dirs = fingerprint.get("paths"), fingerprint.get("dirs")
    if (fingerprint.get("v") != _VERSION or fingerprint.get("root") != root
            or not isinstance(paths, list) or not isinstance(dirs, int)):
        return None
    lstat = os.lstat
    now: list[int] = []
    try:
        # Each path looked up from the root's descriptor: a shorter walk for the kernel than
        # the whole path, and every path of this one tree even if the root is moved meanwhile.
        top = os.open(root, _DIR_FLAGS)
    except OSError:
        return None
    try:
        for rel in paths[:dirs]:
            st = lstat(rel or ".", dir_fd=top)
            if not stat.S_ISDIR(st.st_mode):
                return None
            now.append(st.st_mtime_ns)
        for rel in paths[dirs:]:
            st = lstat(rel, dir_fd=top)
            now += (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)
    except (OSError, TypeError, ValueError):
        return None
    finally:
        os.close(top)
    return now
