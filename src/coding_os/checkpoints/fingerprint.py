"""Knowing without git that a small tree did not change since a session's latest checkpoint.

A checkpoint runs `git status`, which costs a process start even when nothing changed — most of
a hook's time on a small repository. So after a checkpoint of a git tree of at most `LIMIT`
files and directories, the `lstat` of each file (size, mtime, ctime, inode, mode) and the mtime of
each directory git does not ignore are kept beside the session's head
(`checkpoints/heads/<session>.fp`). The next checkpoint compares them first: an equal fingerprint
means the tree is as that checkpoint saw it (a file added, removed or renamed changes its
directory's mtime; a file rewritten or chmod-ed changes its own stat), so it is reused without
starting git. Larger trees skip this: there, `git status` is faster than Python's `lstat`s.

The walk happens after the snapshot, so anything that changed since the snapshot began must not
be trusted: a fingerprint holding a time at or after `started - RACY_NS` (the margin covers
file systems with coarse timestamps) is not kept, and the next checkpoint asks git.
"""

from __future__ import annotations

import os
import stat

from coding_os import jsonwire
from coding_os import durable

__all__ = ["LIMIT", "take", "unchanged", "load", "save", "drop"]

LIMIT = 2000  # files and directories: about where git's status becomes cheaper than lstats
RACY_NS = 100_000_000


def take(root: str, excluded: object, ignored: set[str], started_ns: int,
         limit: int = LIMIT) -> dict[str, object] | None:
    """The fingerprint of the tree at `root` now, or None (too large, or something in it
    changed since `started_ns`). `excluded(rel)` names what snapshots leave out; `ignored` holds
    what git ignores (directories with a trailing slash)."""
    racy = started_ns - RACY_NS
    dirs: list[list[object]] = []
    files: list[list[object]] = []
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
        dirs.append([rel, st.st_mtime_ns])
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
            files.append([path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                          st.st_mode])
        if len(dirs) + len(files) > limit:
            return None
    return {"v": 1, "root": root, "dirs": dirs, "files": files}


def unchanged(root: str, fingerprint: dict[str, object]) -> bool:
    """Whether every directory and file of `fingerprint` is as it was (so nothing was added,
    removed, rewritten or chmod-ed where a snapshot would look)."""
    if fingerprint.get("v") != 1 or fingerprint.get("root") != root:
        return False
    base = root.rstrip("/") + "/"  # joined by hand: os.path.join is most of the cost here
    lstat = os.lstat
    try:
        for rel, mtime in fingerprint["dirs"]:  # type: ignore[attr-defined]
            st = lstat(base + rel if rel else root)
            if not stat.S_ISDIR(st.st_mode) or st.st_mtime_ns != mtime:
                return False
        for rel, size, mtime, ctime, ino, mode in fingerprint["files"]:  # type: ignore[attr-defined]
            st = lstat(base + rel)
            if (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode) != (
                    size, mtime, ctime, ino, mode):
                return False
    except (OSError, TypeError, ValueError):
        return False
    return True


def _path(checkpoints_dir: str, session: str) -> str:
    return os.path.join(checkpoints_dir, "heads", f"{session}.fp")


def load(checkpoints_dir: str, session: str) -> dict[str, object] | None:
    try:
        with open(_path(checkpoints_dir, session), "rb") as f:
            value = jsonwire.loads(f.read().decode("utf-8", "surrogateescape"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def save(checkpoints_dir: str, session: str, fingerprint: dict[str, object] | None) -> None:
    """Keep `fingerprint` for the session's head (None: drop the old one, it no longer holds)."""
    if fingerprint is None:
        drop(checkpoints_dir, session)
        return
    durable.atomic_write(_path(checkpoints_dir, session),
                         jsonwire.dumps(fingerprint).encode("ascii"), sync=False)


def drop(checkpoints_dir: str, session: str) -> None:
    try:
        os.unlink(_path(checkpoints_dir, session))
    except FileNotFoundError:
        pass
