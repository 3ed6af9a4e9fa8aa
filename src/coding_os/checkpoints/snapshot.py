"""Snapshots of a working tree (DESIGN.md §5), costing what changed rather than the tree's size.

A snapshot is a manifest (manifest.py): for a git tree, the commit checked out and an overlay of
every path whose working-tree state differs from it — modified, deleted, staged, untracked but not
ignored — as `git status` reports it. Every other file is the commit's, and its bytes are already
in the repository's object database, so a first checkpoint of a clean repository stores nothing
but its manifest. A repository nested in the tree that git does not descend into (a clone inside
the tree; nothing of the user's is renamed to see it) is a layer of its own; a directory without
git is one layer listing every file (`.cosignore` excludes, gitignore-style). `.git` and
`.coding-os` are never part of a snapshot; files over the size limit are listed in `skipped`,
never silently left out; so are submodules, whose content belongs to their own repository.

While the daemon watches the tree, a snapshot is the previous one with the changed paths looked
at again (`capture_changed`, fed by watch.py). Coverage `tracked` snapshots only the paths given
(those the agent's edit tools named), every entry in the store.
"""

from __future__ import annotations

import bisect
import os
import stat
import time

from coding_os.git.command import git
from coding_os.git.objects import blob_sha1
from coding_os.git.repo import (
    checkout_root,
    commit_paths,
    compares_raw,
    git_dirs,
    head as head_commit,
    inside_prefix,
    plain_attributes,
    relative,
)
from coding_os.checkpoints.store import ObjectStore
from coding_os.checkpoints.manifest import (
    ALWAYS_OUT,
    GIT_KINDS,
    MODE_GITLINK,
    MODE_LINK,
    SKIPPED,
    check_path,
    join_path,
    layer_list,
    overlay_of,
    read_manifest,
    same_entry,
)
from coding_os.checkpoints.settings import DEFAULT_MAX_FILE_BYTES
from coding_os.errors import CosError, InvalidInput

__all__ = [
    "IGNORE_FILE", "Capture", "StatCache", "capture", "capture_changed", "capture_of",
    "snapshot_now", "scope", "beyond_link", "symlink_above",
]

IGNORE_FILE = ".cosignore"
TYPE_CHECKING = False  # typing is not imported at run time: this runs on the hook path
if TYPE_CHECKING:
    from coding_os.checkpoints.manifest import Entry
    from coding_os.checkpoints.settings import Settings
    from coding_os.checkpoints.watch import Ask, Look
    from coding_os.state.tiers import Tiers








class StatCache:
    """What a file hashed to, by its stat (size, mtime, ctime, inode, mode): a file whose stat
    did not change is not read again. An entry whose file was written less than a second
    before it was hashed is not trusted (a write in the same clock tick leaves the stat as it
    was), as git treats racily clean index entries."""

    def __init__(self, path: str, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only  # a preview learns nothing it keeps
        self._entries: dict[str, list[object]] | None = None  # read on first use
        self.saved_ns = 0
        self.dirty = False
        self.seen: set[str] = set()

    @property
    def entries(self) -> dict[str, list[object]]:
        if self._entries is None:
            from coding_os import jsonwire

            self._entries = {}
            try:
                with open(self.path, "rb") as f:
                    data = jsonwire.loads(f.read().decode("utf-8", "replace"))
                entries = data["entries"]  # type: ignore[index]
                if isinstance(entries, dict):
                    self._entries = entries
                    self.saved_ns = int(data["saved_ns"])  # type: ignore[index]
            except (OSError, ValueError, KeyError, TypeError):
                self._entries, self.saved_ns = {}, 0
        return self._entries

    @staticmethod
    def key(st: os.stat_result) -> list[int]:
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode]

    def lookup(self, path: str, st: os.stat_result) -> tuple[str, str] | None:
        self.seen.add(path)
        cached = self.entries.get(path)
        if (not isinstance(cached, list) or len(cached) != 8 or cached[:5] != self.key(st)
                or not isinstance(cached[7], int)
                or st.st_mtime_ns >= cached[7] - 1_000_000_000):
            return None  # unknown, changed, or written within a second of being hashed
        return str(cached[5]), str(cached[6])

    def remember(self, path: str, st: os.stat_result, sha1: str, oid: str,
                 hashed_ns: int) -> None:
        self.entries[path] = [*self.key(st), sha1, oid, hashed_ns]
        self.dirty = True

    def save(self, root: str | None = None) -> None:
        """Write the cache when it learnt something; entries under `root` that this snapshot
        did not look at (files no longer modified, or gone) are dropped."""
        if not self.dirty or self.read_only:
            return
        from coding_os import jsonwire
        from coding_os import durable

        if root is not None:
            inside = root.rstrip("/") + "/"
            for path in [p for p in self.entries if p.startswith(inside) and p not in self.seen]:
                del self.entries[path]
        data = {"saved_ns": time.time_ns(), "entries": self.entries}
        try:
            durable.atomic_write(self.path, jsonwire.dumps(data).encode("ascii"), sync=False)
        except OSError:
            pass  # a cache: the next checkpoint hashes again
        except Exception:  # noqa: BLE001 - StateIOError and the like: still only a cache
            pass


class Capture:
    """One snapshot being taken: where objects go, what was skipped, what it cost."""

    def __init__(self, root: str, store: ObjectStore, cache: StatCache,
                 max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
                 exclude: tuple[str, ...] = ()) -> None:
        self.root = root
        self.store = store
        self.cache = cache
        self.max_file_bytes = max_file_bytes
        # Paths (relative to the root) never part of a snapshot besides ALWAYS_OUT: the state
        # dir when it lives in the tree under another name or deeper down.
        self.exclude = tuple(p.rstrip("/") for p in exclude if p)
        self.ignored: set[str] = set()  # what git ignores (directories end with a slash)
        self.git_root = False  # the root is a git working tree (see fingerprint.py)
        # Only the paths the watcher named are looked at: they changed, so the stat cache is
        # neither read (it would not match) nor written.
        self.incremental = False
        # What each commit holds at the paths `git status` reported changed (its HEAD columns),
        # by (layer dir, commit): a diff against a snapshot of that commit needs no `ls-tree`.
        self.commit_entries: dict[tuple[str, str], dict[str, Entry | None]] = {}
        # The top layer's paths whose index entry differs from the commit (staged), when known.
        self.staged: set[str] | None = None
        self.skipped: list[list[object]] = []
        self.objects_written = 0
        self.bytes_written = 0
        self.files_hashed = 0

    def put(self, data: bytes) -> str:
        oid, written = self.store.put(data)
        if written:
            self.objects_written += 1
            self.bytes_written += written
        return oid

    def excluded(self, rel: str) -> bool:
        """Whether `rel` is the state dir (or inside it), `.git`, or `.coding-os` at the top."""
        if rel.split("/", 1)[0] in ALWAYS_OUT:
            return True
        return any(rel == p or rel.startswith(p + "/") for p in self.exclude)

    def entry(self, rel: str) -> Entry | None:
        """The entry of the file at `rel` (relative to the root) as it is now; None when absent
        (or a directory). A file that cannot be stored (over the size limit, unreadable) is
        recorded in `skipped` and given as SKIPPED: a rewind leaves it alone."""
        path = os.path.join(self.root, rel)
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISLNK(st.st_mode):
            data = os.fsencode(os.readlink(path))
            sha1 = blob_sha1(data)
            return ["l", sha1, MODE_LINK, self.put(data)]
        if not stat.S_ISREG(st.st_mode):
            return None
        mode = stat.S_IFREG | stat.S_IMODE(st.st_mode)
        if st.st_size > self.max_file_bytes:
            self.skipped.append([rel, "larger than the limit", st.st_size])
            return list(SKIPPED)
        cached = None if self.incremental else self.cache.lookup(path, st)
        if cached is not None and self.store.has(cached[1]):
            return ["f", cached[0], mode, cached[1]]
        hashed = time.time_ns()
        try:
            with open(path, "rb") as f:
                data = f.read(self.max_file_bytes + 1)
        except PermissionError:
            self.skipped.append([rel, "unreadable", st.st_size])
            return list(SKIPPED)
        except (FileNotFoundError, IsADirectoryError):
            return None
        if len(data) > self.max_file_bytes:
            self.skipped.append([rel, "larger than the limit", len(data)])
            return list(SKIPPED)
        self.files_hashed += 1
        sha1 = blob_sha1(data)
        oid = self.put(data)
        if not self.incremental:
            self.cache.remember(path, st, sha1, oid, hashed)
        return ["f", sha1, mode, oid]


def capture(cap: Capture, mode: str = "worktree",
            paths: list[str] | None = None) -> dict[str, object]:
    """The manifest of the tree at `cap.root` now (not yet stored).

    Raises:
        InvalidInput: a bad mode or path.
        GitError: git failed on the repository.
        StateIOError: an object cannot be written.
    """
    if mode == "tracked":
        overlay: dict[str, Entry | None] = {}
        for path in paths or []:
            # Under a symlinked directory the tree holds no file at this path: absent.
            overlay[check_path(path)] = (None if symlink_above(cap.root, path) is not None
                                         else cap.entry(path))
        layers: list[dict[str, object]] = [{"dir": "", "commit": None, "overlay": overlay}]
    elif mode == "worktree":
        layers = _layers(cap, "")
    else:
        raise InvalidInput(f"unknown checkpoint mode {mode!r} (worktree or tracked)")
    cap.cache.save(cap.root if mode == "worktree" else None)
    return {"v": 1, "mode": mode, "layers": layers,
            "skipped": sorted(cap.skipped, key=lambda item: str(item[0]))}


def _layers(cap: Capture, prefix: str) -> list[dict[str, object]]:
    top = os.path.join(cap.root, prefix) if prefix else cap.root
    if os.path.lexists(os.path.join(top, ".git")) and (not prefix or _kept_inside(cap.root, top)):
        return _git_layers(cap, prefix)
    if not prefix and checkout_root(cap.root) is not None:
        # The root is inside a repository but not at its top: git still decides what is ignored.
        return _git_layers(cap, prefix)
    return [{"dir": prefix, "commit": None, "overlay": _plain_overlay(cap, prefix)}]


def _kept_inside(root: str, top: str) -> bool:
    """Whether the repository nested at `top` keeps its git dir (and common dir) inside the
    tree at `root`: one whose `.git` points elsewhere (a `gitdir:` file or a symlink a clone
    brought) is read as a plain directory, so that git never reads an index or objects outside
    the project for it."""
    dirs = git_dirs(top)
    if dirs is None:
        return False
    real_root = os.path.realpath(root)
    return all(os.path.realpath(found).startswith(real_root + os.sep) for found in dirs)


def _git_layers(cap: Capture, prefix: str,
                pathspecs: list[str] | None = None) -> list[dict[str, object]]:
    """The layer of the repository at `prefix` and those of the repositories nested in it;
    with `pathspecs`, only what git reports under those paths (nested ones not followed)."""
    top = os.path.join(cap.root, prefix) if prefix else cap.root
    # For a few paths, git's threads that stat the whole index ahead cost more than they save.
    few = ("-c", "core.preloadIndex=false") if pathspecs is not None else ()
    out = git(top, *few, "status", "--porcelain=v2", "-z", "--untracked-files=all",
              "--no-renames", "--branch", "--no-ahead-behind", "--ignore-submodules=dirty",
              "--ignored=matching", "--", *(pathspecs or ["."]), nested=bool(prefix))
    if not prefix:
        cap.git_root = True
    commit: str | None = None
    overlay: dict[str, Entry | None] = {}
    in_head: dict[str, Entry | None] = {}
    staged: set[str] = set()
    nested: list[str] = []
    within = inside_prefix(top)
    for record in out.split(b"\0"):
        if not record:
            continue
        line = record.decode("utf-8", "surrogateescape")
        if _always_out(line, cap, prefix, within):
            continue  # the state dir and git's own, even where git does not ignore them
        if line.startswith("# branch.oid "):
            oid = line[len("# branch.oid "):]
            commit = None if oid == "(initial)" else oid
            continue
        if line.startswith("#"):
            continue
        kind = line[0]
        if kind == "1":
            fields = line.split(" ", 8)
            xy, sub, m_index, m_work, h_index = (fields[1], fields[2], fields[4], fields[5],
                                                 fields[7])
            path = relative(fields[8], within)
            if path is None:
                continue
            m_head = int(fields[3], 8)
            if xy[0] != ".":
                staged.add(path)
            in_head[path] = (None if m_head == 0 else
                             ["l" if m_head == MODE_LINK else "f", fields[6], m_head, None])
            if sub.startswith("S"):
                cap.skipped.append([join_path(prefix, path), "submodule", 0])
                continue
            if m_work == "000000" or xy[1] == "D":
                overlay[path] = None
            elif xy[1] == ".":
                mode = int(m_index, 8)
                overlay[path] = ["l" if mode == MODE_LINK else "f", h_index, mode, None]
            else:
                overlay[path] = cap.entry(join_path(prefix, path))
        elif kind == "u":
            path = relative(line.split(" ", 10)[10], within)
            if path is not None:
                staged.add(path)
                overlay[path] = cap.entry(join_path(prefix, path))
        elif kind == "!":
            path = relative(line[2:], within)
            if path is not None:
                cap.ignored.add(join_path(prefix, path))
        elif kind == "?":
            path = relative(line[2:], within)
            if path is None:
                continue
            if path.endswith("/"):
                nested.append(join_path(prefix, path.rstrip("/")))
            else:
                overlay[path] = cap.entry(join_path(prefix, path))
    if commit:
        _hide_under_replaced(top, commit, overlay)
        cap.commit_entries.setdefault((prefix, commit), {}).update(
            (p, e) for p, e in in_head.items() if e is None or int(e[2]) != MODE_GITLINK)
    if not prefix:
        cap.staged = staged
    layers: list[dict[str, object]] = [{"dir": prefix, "commit": commit,
                                        "overlay": dict(sorted(overlay.items()))}]
    if pathspecs is not None:
        return layers + [{"dir": inner, "commit": None, "overlay": {}} for inner in nested]
    for inner in nested:
        if os.path.lexists(os.path.join(cap.root, inner, ".git")):
            layers.extend(_layers(cap, inner))
    return layers


MAX_CHANGED_PATHS = 2000  # more, and one whole `git status` is as quick
MAX_CHANGED_BYTES = 256 << 10  # the paths go on git's command line


def capture_changed(cap: Capture, previous: dict[str, object], changed: list[str],
                    staged: list[str] | None = None) -> dict[str, object] | None:
    """The manifest of the tree at `cap.root` now, given `previous` (a worktree manifest of the
    same tree), every path changed since it was taken (a directory standing for everything
    under it; see checkpoints/watch.py) and the paths staged then (`staged`, None when not
    known): `previous` with those paths looked at again. Files git already covered are read
    directly (`_changed_files`); otherwise a `git status` limited to the paths tells. None when
    only a whole capture can tell: not a git tree, too many paths, a nested repository among
    them (or a `.git` appearing), or another commit checked out."""
    if previous.get("mode") != "worktree" or len(changed) > MAX_CHANGED_PATHS \
            or sum(map(len, changed)) > MAX_CHANGED_BYTES:
        return None
    layers = layer_list(previous)
    if len(layers) != 1 or layers[0].get("dir") != "":
        return None  # nested repositories: their index and ignore rules are not watched
    if not os.path.lexists(os.path.join(cap.root, ".git")) and checkout_root(cap.root) is None:
        return None
    top = layers[0]
    paths: set[str] = set()
    for path in changed:
        path = path.rstrip("/")
        if path == ".git" or path.startswith(".git/") or path.endswith("/.git"):
            # The index changed (staged, unstaged, force-added: what is covered and which
            # bytes only git holds may change), or a repository was made anew or appeared.
            return None
        if path and not cap.excluded(path):
            paths.add(path)
    if any(_in_nested(cap.root, path) or _linked(cap.root, path) for path in paths):
        # A submodule or a repository made inside the tree; or a file with another name,
        # which inotify did not report written.
        return None
    from coding_os.git.command import GitError

    known = set(staged) if staged is not None else None
    try:
        if not paths:  # nothing changed, unless HEAD moved (`git reset --soft` writes no file)
            cap.staged = known
            return previous if head_commit(cap.root) == top.get("commit") else None
        read = _changed_files(cap, top, paths, known)
        if read is not None:
            overlay = dict(overlay_of(top))
            for path, entry in read.items():
                if isinstance(entry, str):  # "commit": the commit's file again
                    overlay.pop(path, None)
                else:
                    overlay[path] = entry
            cap.staged = known
            return _merged(previous, top, overlay, paths, cap.skipped)
        fresh = _git_layers(cap, "", sorted(paths))
    except GitError:
        return None  # let a whole `git status` tell, or say what is wrong
    if len(fresh) > 1 or fresh[0]["commit"] != top.get("commit"):
        return None
    if known is not None and cap.staged is not None:
        cap.staged |= {path for path in known if not _under_any(path, paths)}
    else:
        cap.staged = None
    overlay = dict(overlay_of(top))
    names = sorted(overlay)
    for path in paths:  # what was there at a changed path, or under it, is looked at anew
        overlay.pop(path, None)
        at = bisect.bisect_left(names, path + "/")
        while at < len(names) and names[at].startswith(path + "/"):
            overlay.pop(names[at], None)
            at += 1
    overlay.update(overlay_of(fresh[0]))
    return _merged(previous, top, overlay, paths, cap.skipped)


def _merged(previous: dict[str, object], top: dict[str, object],
            overlay: dict[str, Entry | None], paths: set[str],
            skipped: list[list[object]]) -> dict[str, object]:
    """`previous` with the top layer's new `overlay`, and `skipped` in place of what it
    skipped at or under the changed `paths`."""
    kept = [item for item in previous.get("skipped") or []  # type: ignore[attr-defined]
            if not _under_any(str(item[0]), paths)] + skipped
    return {"v": 1, "mode": "worktree",
            "layers": [{"dir": "", "commit": top.get("commit"),
                        "overlay": dict(sorted(overlay.items()))}],
            "skipped": sorted(kept, key=lambda item: str(item[0]))}




def _changed_files(cap: Capture, top: dict[str, object], paths: set[str],
                   staged: set[str] | None) -> dict[str, Entry | str | None] | None:
    """The new entries at `paths` ("commit" where the file is the commit's again), read from
    the files and the commit's objects, with no `git status`; None when git must tell.

    This holds when every path is a file, a symlink or nothing, and was covered before: the
    commit has it, or the previous snapshot held it. The index did not change since (a change
    of it is a change of `.git/index`, which makes the caller scan), nor did the ignore rules
    (the watch would have started anew), so a path that was covered still is, and the index
    entry of one not `staged` is the commit's. A path new to both (perhaps ignored), a
    directory (or a path the previous snapshot held anything under), a submodule, a staged
    path (its index entry decides), another commit checked out, objects only git can read, or
    settings under which git does not compare a file's bytes and mode as they are (`_raw`):
    git tells."""
    from coding_os.git.objects import Unreadable, objects_of

    commit = top.get("commit")
    if not isinstance(commit, str) or len(commit) != 40:
        return None
    repo_top = checkout_root(cap.root)
    dirs = git_dirs(repo_top) if repo_top is not None else None
    objects = objects_of(repo_top) if repo_top is not None else None
    if objects is None or dirs is None or head_commit(cap.root) != commit \
            or not compares_raw(repo_top, *dirs):  # type: ignore[arg-type]
        return None
    within = "" if repo_top == cap.root else inside_prefix(cap.root)
    overlay = overlay_of(top)
    names = sorted(overlay)
    attributes: dict[str, bool] = {}
    found: dict[str, Entry | str | None] = {}
    heads: dict[str, Entry | None] = {}
    for path in sorted(paths):
        if staged is None and path in overlay or staged is not None and _under_one(path, staged):
            return None
        at = bisect.bisect_left(names, path + "/")
        if at < len(names) and names[at].startswith(path + "/"):
            return None  # it held files under this path: a directory moved or replaced
        if not plain_attributes(repo_top, within + path, attributes):  # type: ignore[arg-type]
            return None
        try:
            st = os.lstat(os.path.join(cap.root, path))
        except (FileNotFoundError, NotADirectoryError):
            st = None
        if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)) \
                or st is not None and st.st_size > cap.max_file_bytes or beyond_link(cap.root,
                                                                                  path):
            return None  # a directory; a file git alone can tell is the commit's; a link above
        try:
            in_commit = objects.tree_entry(commit, within + path)
        except Unreadable:
            return None
        if in_commit is not None and in_commit[0] not in GIT_KINDS:
            return None  # a directory or a submodule in the commit
        before = overlay.get(path, "none")
        if st is not None and in_commit is None and (before == "none" or before is None):
            return None  # new to the commit and to the snapshot: git knows if it is ignored
        head = (None if in_commit is None else
                [GIT_KINDS[in_commit[0]], in_commit[1], in_commit[0], None])
        heads[path] = head
        if st is None:
            found[path] = None if head is not None else "commit"
            continue
        entry = cap.entry(path)
        if entry is None and head is None or head is not None and same_entry(entry, head):
            found[path] = "commit"
        else:
            found[path] = entry
    cap.git_root = True
    cap.commit_entries.setdefault(("", commit), {}).update(heads)
    return found


def _under_one(path: str, paths: set[str]) -> bool:
    """Whether `path` is one of `paths`, or one of them lies under it."""
    return path in paths or any(other.startswith(path + "/") for other in paths)


















def _linked(root: str, path: str) -> bool:
    try:
        st = os.lstat(os.path.join(root, path))
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink > 1


def beyond_link(root: str, path: str) -> bool:
    """Whether a symlink or a file stands above `path` in the tree (reaching it would follow
    the link: the file there is another path's)."""
    at = path.find("/")
    while at > 0:
        full = os.path.join(root, path[:at])
        if os.path.islink(full) or not os.path.isdir(full):
            return True
        at = path.find("/", at + 1)
    return False


def symlink_above(root: str, path: str) -> str | None:
    """The first directory on the way to `path` (from the root) that is a symlink, or None:
    the file there is another path's (outside the tree, or elsewhere in it) and never read
    through it. A missing directory ends the look: nothing lies beyond it."""
    at = path.find("/")
    while at > 0:
        try:
            st = os.lstat(os.path.join(root, path[:at]))
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISLNK(st.st_mode):
            return path[:at]
        at = path.find("/", at + 1)
    return None


def _in_nested(root: str, path: str) -> bool:
    """Whether `path` lies in a repository of its own inside the tree (a `.git` on the way)."""
    at = path.find("/")
    while at > 0:
        if os.path.lexists(os.path.join(root, path[:at], ".git")):
            return True
        at = path.find("/", at + 1)
    return False


def _under_any(path: str, paths: set[str]) -> bool:
    """Whether `path` is one of `paths` or lies under one of them."""
    if path in paths:
        return True
    at = path.find("/")
    while at > 0:
        if path[:at] in paths:
            return True
        at = path.find("/", at + 1)
    return False


def _always_out(line: str, cap: Capture, prefix: str, within: str) -> bool:
    """Whether a `git status` record names a path never part of a snapshot (see
    `Capture.excluded`)."""
    if line.startswith("#"):
        return False
    path = line[2:] if line[0] == "?" else line.split(" ", 10 if line[0] == "u" else 8)[-1]
    rel = relative(path, within)
    return rel is None or cap.excluded(join_path(prefix, rel.rstrip("/")))


def _hide_under_replaced(top: str, commit: str, overlay: dict[str, Entry | None]) -> None:
    """A symlink that replaced a directory of the commit hides that directory's files, though
    git (following the link) may not report them deleted: mark them absent."""
    links = [path for path, entry in overlay.items() if entry is not None and entry[0] == "l"]
    if not links:
        return
    for path in commit_paths(top, "ls-tree", "-z", "-r", "--name-only", "--full-tree", commit,
                              paths=[f"{path}/" for path in links]):
        if path not in overlay:
            overlay[path] = None










def _ignore_rules(root: str) -> list[tuple[str, bool, bool, bool]]:
    """The patterns of the root's `.cosignore`: (pattern, negated, dir only, anchored)."""
    rules = []
    try:
        with open(os.path.join(root, IGNORE_FILE), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    for raw in lines:
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        line = line[1:] if negated else line
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        anchored = "/" in line
        rules.append((line.lstrip("/"), negated, dir_only, anchored))
    return rules


def _ignored(rules: list[tuple[str, bool, bool, bool]], rel: str, is_dir: bool) -> bool:
    import fnmatch

    name = rel.rsplit("/", 1)[-1]
    ignored = False
    for pattern, negated, dir_only, anchored in rules:
        if dir_only and not is_dir:
            continue
        target = rel if anchored else name
        if fnmatch.fnmatchcase(target, pattern) or (
                "**" in pattern and fnmatch.fnmatchcase(rel, pattern.replace("**/", "*"))):
            ignored = not negated
    return ignored


def _plain_overlay(cap: Capture, prefix: str) -> dict[str, Entry | None]:
    """Every file of a directory without git, `.cosignore` applied."""
    top = os.path.join(cap.root, prefix) if prefix else cap.root
    rules = _ignore_rules(top)
    overlay: dict[str, Entry | None] = {}
    pending = [""]
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(os.path.join(top, folder) if folder else top))
        except OSError:
            continue
        for item in entries:
            rel = f"{folder}/{item.name}" if folder else item.name
            if item.name == ".git" or cap.excluded(join_path(prefix, rel)):
                continue
            is_dir = item.is_dir(follow_symlinks=False)
            if rules and _ignored(rules, rel, is_dir):
                continue
            if is_dir:
                pending.append(rel)
                continue
            entry = cap.entry(join_path(prefix, rel))
            if entry is not None:
                overlay[rel] = entry
    return dict(sorted(overlay.items()))


def capture_of(tiers: Tiers, root: str, store: ObjectStore, settings: Settings,
                read_only: bool = False) -> Capture:
    """A capture of the tree at `root` that leaves the state dir out wherever it lives."""
    state = os.path.realpath(tiers.state_dir)
    rel = os.path.relpath(state, root).replace(os.sep, "/")
    exclude = () if rel == ".." or rel.startswith("../") else (rel,)
    cache = StatCache(os.path.join(tiers.checkpoints_dir, "stat-cache.json"), read_only)
    return Capture(root, store, cache, settings.max_file_bytes, exclude)


def snapshot_now(tiers: Tiers, root: str, store: ObjectStore, settings: Settings,
                 mode: str = "worktree", paths: list[str] | None = None,
                 read_only: bool = False, watcher: Ask | None = None
                 ) -> tuple[Capture, dict[str, object], Look | None]:
    """A capture of the tree at `root` now, and the answer of the file watcher (`watcher`
    asks it) when it watches the tree: then only the paths changed since its base are looked
    at (see watch.py). The caller keeps the new base (`watch.remember`) once the manifest is
    stored."""
    from coding_os.checkpoints import watch

    cap = capture_of(tiers, root, store, settings, read_only)
    looked = (watch.look(tiers.checkpoints_dir, tiers.state_dir, root, scope(cap), watcher)
              if mode == "worktree" and watcher is not None else None)
    manifest = None
    if looked is not None and looked.changed is not None and looked.manifest is not None:
        previous = _stored_manifest(store, looked.manifest)
        if previous is not None:
            cap.incremental = True
            manifest = capture_changed(cap, previous, looked.changed, looked.staged)
            if manifest is None:  # what the limited look found is not to be mixed in
                cap = capture_of(tiers, root, store, settings, read_only)
    if manifest is None:
        manifest = capture(cap, mode, paths)
    return cap, manifest, looked


def scope(cap: Capture) -> list[object]:
    """What decides a snapshot's content besides the tree: a base taken under other settings
    (a size limit, the state dir's place) is not built upon."""
    return [cap.max_file_bytes, list(cap.exclude)]


def _stored_manifest(store: ObjectStore, oid: str) -> dict[str, object] | None:
    """The manifest object `oid`, or None when it is gone or damaged (a base is a cache)."""
    try:
        return read_manifest(store, oid)
    except (CosError, OSError):
        return None
