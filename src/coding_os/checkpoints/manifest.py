"""A snapshot's manifest (DESIGN.md §5) and what compares two of them.

A manifest (itself an object of the store) is a list of layers, one per repository in the tree:
the tree's own git repository, each nested repository git does not descend into, or the plain
directory when there is no git. A git layer is the commit checked out (`HEAD`) and an overlay:
every path whose working-tree state differs from that commit. A plain layer's overlay lists
every file.

An entry is `[kind, sha1, mode, oid]`: kind `f` (file) or `l` (symlink, whose target is its
content), the git blob id of the content (computed for files cos stores too, so entries compare
across layers and snapshots without reading anything), the mode (git's 0o100644, 0o100755 or
0o120000 for a file of the commit; the file's own permission bits when cos stores its bytes), and
the store object holding the bytes, or None when the repository's object database holds them.
An absent path is None; a file a snapshot could not store is SKIPPED (a rewind leaves it alone).
Paths are relative to the tree and checked (`check_path`) wherever a manifest is read back.
"""

from __future__ import annotations

import os

from coding_os import jsonwire
from coding_os.checkpoints.store import DamagedObject
from coding_os.errors import InvalidInput
from coding_os.git.command import git
from coding_os.git.repo import changed_between, checkout_root, commit_files, inside_prefix

TYPE_CHECKING = False  # typing is not imported at run time: this runs on the hook path
if TYPE_CHECKING:
    from typing import Any, TypeAlias

    from coding_os.checkpoints.store import ObjectStore

    Entry: TypeAlias = list[Any]  # [kind, sha1, mode, oid | None]

__all__ = [
    "FILE_MODES", "SKIPPED", "ALWAYS_OUT", "GIT_KINDS", "check_path", "read_manifest",
    "manifest_paths", "layer_list", "overlay_of", "join_path", "commit_entries", "resolve",
    "candidates", "diff", "changed_paths", "put_entry", "same_entry", "holds_bytes",
]

MODE_FILE, MODE_EXEC, MODE_LINK, MODE_GITLINK = 0o100644, 0o100755, 0o120000, 0o160000
FILE_MODES = (MODE_FILE, MODE_EXEC, MODE_LINK)
# The entry of a file a snapshot could not store: its path is left alone by a rewind.
SKIPPED = ("s", "", 0, None)
ALWAYS_OUT = (".git", ".coding-os")
GIT_KINDS = {MODE_FILE: "f", MODE_EXEC: "f", MODE_LINK: "l"}


def check_path(path: object) -> str:
    """`path` if it is a clean relative path inside a tree: no `..`, no absolute, no NUL, no
    empty or `.` component, not inside `.git` or `.coding-os`.

    Raises:
        InvalidInput: it is not.
    """
    if not isinstance(path, str) or not path or "\0" in path or path.startswith("/"):
        raise InvalidInput(f"not a relative path inside the tree: {str(path)[:200]!r}")
    parts = path.split("/")
    if parts[0] in ALWAYS_OUT or not _BAD_PARTS.isdisjoint(parts):  # a diff checks hundreds
        if parts[0] in ALWAYS_OUT or not _UNCLEAN_PARTS.isdisjoint(parts):
            raise InvalidInput(f"not a relative path inside the tree: {path[:200]!r}")
        raise InvalidInput(f"a path inside a .git directory: {path[:200]!r}")
    return path


_UNCLEAN_PARTS = frozenset(("", ".", ".."))
_BAD_PARTS = _UNCLEAN_PARTS | {".git"}


def read_manifest(store: ObjectStore, oid: str) -> dict[str, object]:
    """The manifest object `oid`.

    Raises:
        DamagedObject: it is missing, does not re-hash to its id, or is not a JSON object.
    """
    try:
        data = jsonwire.loads(store.get(oid).decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        raise DamagedObject(f"checkpoint manifest {oid} is not JSON") from None
    if not isinstance(data, dict):
        raise DamagedObject(f"checkpoint manifest {oid} is damaged")
    return data


def manifest_paths(manifest: dict[str, object]) -> set[str]:
    """The paths a manifest's overlays name (for a tracked one, every path it covers)."""
    found: set[str] = set()
    for layer in layer_list(manifest):
        prefix = str(layer["dir"])
        found.update(join_path(prefix, path) for path in overlay_of(layer))
    return found


def layer_list(manifest: dict[str, object]) -> list[dict[str, object]]:
    layers = manifest.get("layers")
    if not isinstance(layers, list):
        raise InvalidInput("a checkpoint manifest without layers")
    return layers


def overlay_of(layer: dict[str, object]) -> dict[str, Entry | None]:
    overlay = layer.get("overlay")
    if not isinstance(overlay, dict):
        raise InvalidInput("a checkpoint layer without an overlay")
    return overlay


def join_path(prefix: str, path: str) -> str:
    return f"{prefix}/{path}" if prefix else path


def commit_entries(repo: str, commit: str, paths: list[str]) -> dict[str, Entry]:
    """The entries `commit` has for `paths` (each relative to `repo`, which may lie below the
    repository's top: git's tree paths start at the top): read from the object files, or
    from `git ls-tree` when they cannot be."""
    within = inside_prefix(repo)
    found = _read_commit_entries(repo, within, commit, paths)
    if found is not None:
        return found
    found = {}
    for start in range(0, len(paths), 500):
        chunk = [within + p for p in paths[start:start + 500]]
        out = git(repo, "ls-tree", "-z", "-r", "--full-tree", commit, "--", *chunk)
        for record in out.split(b"\0"):
            if not record:
                continue
            head, _, path = record.decode("utf-8", "surrogateescape").partition("\t")
            mode, kind, sha1 = head.split(" ")
            if kind != "blob" or not path.startswith(within):
                continue
            number = int(mode, 8)
            found[path[len(within):]] = ["l" if number == MODE_LINK else "f", sha1, number, None]
    return found


def _read_commit_entries(repo: str, within: str, commit: str,
                        paths: list[str]) -> dict[str, Entry] | None:
    """`commit_entries` from the object files; None when one cannot be read there, or a path
    is a directory of the commit (`ls-tree -r` lists what is under it)."""
    from coding_os.git.objects import Unreadable, objects_of

    top = checkout_root(repo)
    objects = objects_of(top) if top is not None and len(commit) == 40 else None
    if objects is None:
        return None
    found: dict[str, Entry] = {}
    try:
        for path in paths:
            entry = objects.tree_entry(commit, within + path)
            if entry is None or entry[0] == MODE_GITLINK:
                continue
            if entry[0] not in GIT_KINDS:
                return None
            found[path] = [GIT_KINDS[entry[0]], entry[1], entry[0], None]
    except Unreadable:
        return None
    return found


def resolve(root: str, manifest: dict[str, object], paths: set[str],
            known: dict[tuple[str, str], dict[str, Entry | None]] | None = None
            ) -> dict[str, tuple[Entry | None, str, str | None]]:
    """What `manifest` holds at each of `paths`: (entry or None, layer dir, layer commit).
    `known` holds commits' entries already at hand (`Capture.commit_entries`), by (layer dir,
    commit) and path relative to the layer: git is asked only for the others.

    Raises:
        InvalidInput: a path is not a clean relative path inside the tree (a damaged or
            crafted manifest).
    """
    for path in paths:
        check_path(path)
    layers = sorted(layer_list(manifest), key=lambda layer: len(str(layer["dir"])),
                    reverse=True)
    result: dict[str, tuple[Entry | None, str, str | None]] = {}
    by_layer: dict[int, list[str]] = {}
    for path in paths:
        for number, layer in enumerate(layers):
            prefix = str(layer["dir"])
            if not prefix or path.startswith(prefix + "/"):
                by_layer.setdefault(number, []).append(path)
                break
        else:
            result[path] = (None, "", None)
    for number, members in by_layer.items():
        layer = layers[number]
        prefix = str(layer["dir"])
        commit = layer.get("commit")
        overlay = overlay_of(layer)
        inner = {path: path[len(prefix) + 1:] if prefix else path for path in members}
        at_hand = (known or {}).get((prefix, str(commit)), {}) if commit else {}
        missing = [rel for rel in inner.values() if rel not in overlay and rel not in at_hand]
        base = (commit_entries(os.path.join(root, prefix) if prefix else root, str(commit),
                                missing) if commit and missing else {})
        for path, rel in inner.items():
            entry = (overlay[rel] if rel in overlay
                     else at_hand[rel] if rel in at_hand else base.get(rel))
            result[path] = (entry, prefix, str(commit) if commit else None)
    return result


def candidates(root: str, old: dict[str, object], new: dict[str, object]) -> set[str]:
    """Every path where two manifests of one tree may differ: their overlays, what changed
    between their commits, and the files of a layer only one of them has."""
    found = manifest_paths(old) | manifest_paths(new)
    old_layers = {str(layer["dir"]): layer for layer in layer_list(old)}
    new_layers = {str(layer["dir"]): layer for layer in layer_list(new)}
    for prefix in set(old_layers) | set(new_layers):
        repo = os.path.join(root, prefix) if prefix else root
        a, b = old_layers.get(prefix), new_layers.get(prefix)
        commits = [layer.get("commit") for layer in (a, b) if layer is not None]
        if a is not None and b is not None:
            if a.get("commit") and b.get("commit") and a["commit"] != b["commit"]:
                found.update(join_path(prefix, p) for p in changed_between(
                    repo, str(a["commit"]), str(b["commit"])))
            elif bool(a.get("commit")) != bool(b.get("commit")):
                for commit in commits:
                    if commit:
                        found.update(join_path(prefix, p) for p in commit_files(repo, str(commit)))
        else:
            for commit in commits:
                if commit:
                    found.update(join_path(prefix, p) for p in commit_files(repo, str(commit)))
    return found


def diff(root: str, target: dict[str, object], current: dict[str, object],
         known: dict[tuple[str, str], dict[str, Entry | None]] | None = None
         ) -> list[tuple[str, Entry | None, Entry | None, str]]:
    """The paths whose entry differs between `target` and `current`, as (path, target entry,
    current entry, layer dir of the target entry), sorted by path (`known`: see `resolve`)."""
    if target.get("mode") == "tracked":
        paths = manifest_paths(target)
    else:
        paths = candidates(root, target, current)
    wanted = resolve(root, target, paths, known)
    now = resolve(root, current, paths, known)
    changes = []
    for path in sorted(paths):
        entry, prefix, _ = wanted[path]
        present = now[path][0]
        if same_entry(entry, present) or (entry is not None and entry[0] == "s"):
            continue  # the same, or a file the snapshot could not store: left alone
        changes.append((path, entry, present, prefix))
    return changes


def changed_paths(previous: dict[str, object] | None, manifest: dict[str, object],
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
            repo = os.path.join(root, prefix) if prefix else root
            changed.update(f"{prefix}/{p}" if prefix else p
                           for p in changed_between(repo, str(before["commit"]),
                                                    str(layer["commit"])))
    for prefix in old:
        changed.add(prefix + "/")
    return sorted(changed)


def put_entry(manifest: dict[str, object], path: str, entry: Entry) -> None:
    """Record `entry` at `path` in the overlay of the layer holding it."""
    layers = sorted(layer_list(manifest), key=lambda layer: len(str(layer["dir"])),
                    reverse=True)
    for layer in layers:
        prefix = str(layer["dir"])
        if not prefix or path.startswith(prefix + "/"):
            overlay_of(layer)[path[len(prefix) + 1:] if prefix else path] = entry
            return


def same_entry(a: Entry | None, b: Entry | None) -> bool:
    """Same kind, bytes and mode; modes compare as git does for files: the owner's executable
    bit (a file's other permission bits are restored when cos holds its bytes, not
    compared)."""
    if a is None or b is None:
        return a is b
    if a[0] != b[0] or a[1] != b[1]:
        return False
    return a[0] == "l" or bool(int(a[2]) & 0o100) == bool(int(b[2]) & 0o100)


def holds_bytes(entry: Entry | None) -> bool:
    """Whether `entry` has content a restore writes: a file or a symlink (not an absent path,
    not a file the snapshot could not store)."""
    return entry is not None and entry[0] in ("f", "l")
