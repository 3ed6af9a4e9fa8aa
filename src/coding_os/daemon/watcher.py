"""The daemon's file watcher: which paths of a working tree changed since a given moment.

A checkpoint that must find what changed by scanning the tree pays for the whole tree (git's
`status` on 10,000 files costs as much as a shadow repository's `add -A`). While `cos daemon` runs,
it watches each tree a checkpoint asked about, and the next checkpoint asks it for the paths that
changed since the previous one: it then looks at those paths only (see checkpoints/watch.py).

Linux inotify, through ctypes. watchfiles (STYLE.md's choice for file watching) drops the queue's
overflow event, so a watcher built on it would silently miss changes; here an overflow, a watch
that cannot be added (the `max_user_watches` limit), the root itself moved or deleted, or too many
changed paths to keep all end the current *generation*: whoever asks next is told the changes are
unknown, and scans.

Why no sync cookie: inotify queues an event in the writer's own system call, before the write
returns. A hook runs after the tool's writes returned, so when the daemon reads its inotify
queue until it is empty (after the request arrived), every write before the request is in it.

A token names a moment: `<generation>:<seq>`, where seq counts the events of the generation. A
changed path is kept with the seq of its latest event, so "changed since token T" is every path
kept with a higher seq. A path names a file or a directory; a directory's whole subtree may have
changed under it (a directory moved in brings files no event named).

Not watched: `.git` (a commit changes no file of the working tree: the previous snapshot still
holds, its commit and overlay describe the same bytes), except `.git/info` for the rules it holds
(`exclude`, `attributes`, `sparse-checkout`; not the `refs` that every repack writes there, a
`git gc --auto` in the background too, which would make each checkpoint after it scan) and the
git dir's `index` (reported as `.git/index`: a file unstaged may leave bytes that only the index
held); the state dir; directories git ignores when the watch starts (a changed `.gitignore` is reported like
any file: the checkpoint then scans, and asks the daemon to watch anew).
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import struct
import time

from coding_os.git.repo import INFO_RULE_FILES

__all__ = ["Inotify", "Watches", "TreeWatch", "INFO_RULES", "MAX_CHANGED", "MAX_WATCHES"]

IN_MODIFY, IN_ATTRIB, IN_MOVED_FROM, IN_MOVED_TO = 0x2, 0x4, 0x40, 0x80
IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF = 0x100, 0x200, 0x400, 0x800
IN_UNMOUNT, IN_Q_OVERFLOW, IN_IGNORED = 0x2000, 0x4000, 0x8000
IN_ONLYDIR, IN_DONT_FOLLOW, IN_EXCL_UNLINK, IN_ISDIR = 0x01000000, 0x02000000, 0x04000000, \
    0x40000000
MASK = (IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
        | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
_EVENT = struct.Struct("iIII")

# The files of `.git/info` that decide what git ignores, how it reads a file, what it checks out.
INFO_RULES = frozenset(name.encode() for name in INFO_RULE_FILES)
MAX_CHANGED = 50_000  # distinct changed paths kept per tree before the generation ends
MAX_WATCHES = 100_000  # directories watched per tree before it is given up (scans instead)


class Inotify:
    """One inotify instance: one queue, so events of every watch come in the order they
    happened."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, f"inotify_init1: {os.strerror(code)}")
        self.fd = fd

    def add(self, path: str) -> int:
        """The watch descriptor of the directory at `path`.

        Raises:
            OSError: ENOSPC at the watch limit, ENOENT/ENOTDIR when it is gone.
        """
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), MASK)
        if wd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return int(wd)

    def remove(self, wd: int) -> None:
        self._libc.inotify_rm_watch(self.fd, wd)  # fails only when already gone

    def read(self) -> list[tuple[int, int, bytes]]:
        """Every event queued now, as (wd, mask, name); [] when there is none."""
        events: list[tuple[int, int, bytes]] = []
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return events
            offset = 0
            while offset < len(data):
                wd, mask, _, size = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size
                name = data[offset:offset + size].rstrip(b"\0")
                offset += size
                events.append((wd, mask, name))

    def close(self) -> None:
        os.close(self.fd)


class TreeWatch:
    """What changed in one working tree since its watch began."""

    def __init__(self, root: str, skip: set[str], info_dir: str | None,
                 git_dir: str | None = None) -> None:
        self.root = root
        self.skip = skip  # relative paths not watched (ignored dirs, the state dir)
        self.info_dir = info_dir  # `.git/info`, reported as `.git/info/<name>`
        self.git_dir = git_dir  # the git dir: its `index`, reported as `.git/index`
        self.identity: tuple[int, int] | None = None  # the root directory's (st_dev, st_ino)
        self.state_dir: str | None = None  # the asker's, left unwatched
        self.ignored: set[str] = set()  # directories left unwatched as git ignores them
        # Files outside the tree that decide what is ignored, and their stat signatures.
        self.outside: list[str] = []
        self.signatures: list[tuple[int, int, int, int] | None] = []
        self.generation = secrets.token_hex(6)
        self.seq = 0
        self.changed: dict[str, int] = {}
        self.dirs: dict[str, int] = {}  # relative dir -> wd
        self.broken: str | None = None
        self.lost: str | None = None  # why the last generation ended
        self.stale = False  # to be watched anew at the next question
        self.started = time.time()
        self.asked = time.time()

    @property
    def token(self) -> str:
        return f"{self.generation}:{self.seq}"

    def note(self, rel: str) -> None:
        self.seq += 1
        self.changed[rel] = self.seq
        if len(self.changed) > MAX_CHANGED:
            self.restart("more changed paths than the watcher keeps")

    def restart(self, why: str) -> None:
        """Events were lost, or paths forgotten: a new generation, whose tokens earlier ones
        never match; the watch is to start anew (`stale`), since what was forgotten may have
        changed the rules."""
        self.generation = secrets.token_hex(6)
        self.seq = 0
        self.changed.clear()
        self.lost = why
        self.stale = True

    def since(self, token: object) -> list[str] | None:
        """The paths changed after `token` (None: unknown, the caller must scan)."""
        if self.broken or not isinstance(token, str):
            return None
        generation, _, seq = token.partition(":")
        if generation != self.generation or not seq.isdigit():
            return None
        after = int(seq)
        return sorted(path for path, at in self.changed.items() if at > after)

    def skipped(self, rel: str) -> bool:
        return rel.rsplit("/", 1)[-1] == ".git" or rel in self.skip


class Watches:
    """Every tree the daemon watches, on one inotify instance."""

    def __init__(self) -> None:
        self.inotify = Inotify()
        self.trees: dict[str, TreeWatch] = {}
        self._wds: dict[int, list[tuple[TreeWatch, str]]] = {}

    def watch(self, root: str, skip: set[str], info_dir: str | None,
              git_dir: str | None = None, key: str | None = None) -> TreeWatch:
        """Start watching `root` (again, when it was watched under `key`, by default the root:
        a fresh generation)."""
        key = root if key is None else key
        self.forget(key)
        tree = TreeWatch(root, skip, info_dir, git_dir)
        self.trees[key] = tree
        self._add_tree(tree, "")
        if info_dir and not tree.broken:
            self._add(tree, "\0info", info_dir)
        if git_dir and not tree.broken:
            self._add(tree, "\0git", git_dir)
        return tree

    def forget(self, key: str) -> None:
        tree = self.trees.pop(key, None)
        if tree is None:
            return
        for rel, wd in list(tree.dirs.items()):
            self._drop(tree, rel, wd)

    def _add(self, tree: TreeWatch, rel: str, path: str) -> bool:
        try:
            wd = self.inotify.add(path)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return False  # gone meanwhile: its parent's event names it
            tree.broken = (f"cannot watch {path}: {exc.strerror}"
                           + (" (raise fs.inotify.max_user_watches)"
                              if exc.errno == errno.ENOSPC else ""))
            return False
        tree.dirs[rel] = wd
        owners = self._wds.setdefault(wd, [])
        if (tree, rel) not in owners:
            owners.append((tree, rel))
        return True

    def _drop(self, tree: TreeWatch, rel: str, wd: int) -> None:
        tree.dirs.pop(rel, None)
        owners = [o for o in self._wds.get(wd, []) if not (o[0] is tree and o[1] == rel)]
        if owners:
            self._wds[wd] = owners
        else:
            self._wds.pop(wd, None)
            self.inotify.remove(wd)

    def _add_tree(self, tree: TreeWatch, top: str) -> None:
        """Watch the directory `top` (relative) and every directory under it; a directory is
        watched before it is listed, so nothing created meanwhile goes unseen."""
        pending = [top]
        while pending and not tree.broken:
            rel = pending.pop()
            path = os.path.join(tree.root, rel) if rel else tree.root
            if not self._add(tree, rel, path):
                continue
            if len(tree.dirs) > MAX_WATCHES:
                tree.broken = f"more than {MAX_WATCHES} directories"
                return
            try:
                entries = list(os.scandir(path))
            except OSError:
                continue
            for entry in entries:
                child = f"{rel}/{entry.name}" if rel else entry.name
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if is_dir and not tree.skipped(child):
                    pending.append(child)

    def _drop_tree(self, tree: TreeWatch, top: str) -> None:
        """Stop watching `top` and what is under it (gone, or moved away). Directories under it
        that were left unwatched as ignored may come back where other rules hold."""
        prefix = top + "/"
        for rel, wd in list(tree.dirs.items()):
            if rel == top or rel.startswith(prefix):
                self._drop(tree, rel, wd)
        tree.skip -= {rel for rel in tree.skip if rel.startswith(prefix)}

    def drain(self) -> None:
        """Take in every event queued now."""
        for wd, mask, raw in self.inotify.read():
            if mask & IN_Q_OVERFLOW:
                # Lost events may have created directories that never got a watch: each
                # tree is watched anew at its next question (see daemon/server.py).
                for tree in self.trees.values():
                    tree.restart("the inotify queue overflowed")
                    tree.broken = "the inotify queue overflowed: events were lost"
                continue
            for tree, rel in list(self._wds.get(wd, [])):
                self._event(tree, wd, rel, mask, raw)

    def _event(self, tree: TreeWatch, wd: int, rel: str, mask: int, raw: bytes) -> None:
        if mask & IN_IGNORED:
            if tree.dirs.get(rel) == wd:
                tree.dirs.pop(rel, None)
            owners = [o for o in self._wds.get(wd, []) if o[0] is not tree or o[1] != rel]
            if owners:
                self._wds[wd] = owners
            else:
                self._wds.pop(wd, None)
            if rel == "" and not tree.broken:
                tree.broken = "the tree's top directory went away"
            return
        if mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT) and rel == "":
            tree.broken = "the tree's top directory was moved or deleted"
            return
        if not raw:
            return  # the directory's own events: its parent reported them by name
        name = raw.decode("utf-8", "surrogateescape")
        if rel == "\0info":
            if raw in INFO_RULES:
                tree.note(f".git/info/{name}")
            return
        if rel == "\0git":
            if name == "index":  # staged or unstaged: which bytes only git holds may change
                tree.note(".git/index")
            return
        path = f"{rel}/{name}" if rel else name
        # Reported even when it is a directory not watched (ignored, `.git`): a file may now
        # stand where it was, or a repository appeared.
        tree.note(path)
        if mask & IN_ISDIR:
            if mask & (IN_MOVED_FROM | IN_DELETE):
                self._drop_tree(tree, path)
            if mask & (IN_CREATE | IN_MOVED_TO):
                self._drop_tree(tree, path)  # a directory moved over another
                if not tree.skipped(path):
                    self._add_tree(tree, path)
