"""Checkpoints fed by the daemon's file watcher: look only at what changed.

While `cos daemon` runs (daemon/server.py), a checkpoint of a git tree asks it which paths
changed since the last snapshot it knows the watcher's token for — the *base*, kept per tree
and git configuration in `checkpoints/watch/<key>.json` as `{root, manifest, token, scope,
staged}` (`staged`: the paths whose index entry differed from the commit, None when not known)
— and takes the new snapshot as that base with those paths looked at again
(`snapshot.capture_changed`: from the files and the commit's objects where git covered them,
else by a `git status` of those paths). The daemon's token is taken before the snapshot begins,
so whatever changes during the snapshot is reported again next time: looking at a path twice
costs a little, missing one never happens.

The daemon says "unknown" (the changes are then found by a whole `git status`) when it had not
watched the tree, lost events, or saw the ignore rules change; no daemon, an error, or a base whose
manifest is gone make the checkpoint scan as it does without a daemon. Any checkpoint of the tree
(any session's, a rewind's) may leave a base: a base is only a manifest and the moment it held.
"""

from __future__ import annotations

import os

from coding_os import jsonwire
from coding_os import durable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    # Sends one question to the watcher, returns its answer (None: no watcher could answer).
    Ask = Callable[[dict[str, object]], dict[str, object] | None]

__all__ = ["Look", "look", "remember"]


class Look:
    """The daemon's answer: its token now, and the paths changed since the base (None: unknown)
    with the base's manifest id and the paths staged then (None: not known)."""

    __slots__ = ("token", "changed", "manifest", "staged")

    def __init__(self, token: str, changed: list[str] | None, manifest: str | None,
                 staged: list[str] | None = None) -> None:
        self.token = token
        self.changed = changed
        self.manifest = manifest
        self.staged = staged


def _base_path(checkpoints_dir: str, root: str) -> str:
    """One base per tree and git configuration, as the daemon keeps one watch per both."""
    from coding_os.digest import sha256_hex
    from coding_os.git.command import git_config_env

    key = sha256_hex(os.fsencode(root), b"\0", jsonwire.dumps(
        sorted(git_config_env().items())).encode("ascii"))[:20]
    return os.path.join(checkpoints_dir, "watch", f"{key}.json")


def _base(checkpoints_dir: str, root: str) -> dict[str, object] | None:
    data = durable.read_small(_base_path(checkpoints_dir, root), 1 << 20)
    try:
        base = jsonwire.loads(data.decode("utf-8", "surrogateescape")) if data else None
    except ValueError:
        return None
    if not isinstance(base, dict) or base.get("root") != root \
            or not isinstance(base.get("token"), str) or not isinstance(base.get("manifest"), str):
        return None
    return base


def look(checkpoints_dir: str, state_dir: str, root: str, scope: list[object],
         ask: Ask) -> Look | None:
    """What the watcher (asked through `ask`) saw change in `root` since the base; None when
    it cannot say. A base taken under another `scope` (the snapshot's settings) is not used."""
    from coding_os.git.command import git_config_env

    base = _base(checkpoints_dir, root)
    if base is not None and base.get("scope") != scope:
        base = None
    answer = ask({"op": "changes", "root": root, "state_dir": state_dir,
                  "since": base["token"] if base else None, "env": git_config_env()})
    if answer is None or answer.get("ok") is not True or not isinstance(answer.get("token"), str):
        return None
    changed = answer.get("changed")
    if base is None or not isinstance(changed, list) \
            or not all(isinstance(path, str) for path in changed):
        return Look(str(answer["token"]), None, None)
    staged = base.get("staged")
    if not isinstance(staged, list) or not all(isinstance(path, str) for path in staged):
        staged = None
    return Look(str(answer["token"]), changed, str(base["manifest"]), staged)


MAX_STAGED = 1000  # more staged paths are not kept: git is asked about each changed one


def remember(checkpoints_dir: str, root: str, manifest: str, token: str,
             scope: list[object], staged: set[str] | None = None) -> None:
    """Keep `manifest` (stored, taken under `scope`) as the tree's base at `token`, with the
    paths staged then (`staged`; None when not known). A cache: a failure only costs the next
    checkpoint a scan. Written in place, one `write` (no new file each time): two checkpoints
    writing at once leave one's whole JSON, or the longer one's tail after the shorter one's
    JSON, which does not parse; a torn one does not either."""
    path = _base_path(checkpoints_dir, root)
    known = sorted(staged) if staged is not None and len(staged) <= MAX_STAGED else None
    try:
        durable.ensure_dir(os.path.dirname(path))
        durable.overwrite(path, jsonwire.dumps(
            {"root": root, "manifest": manifest, "token": token, "scope": scope,
             "staged": known}
        ).encode("ascii"))
    except Exception:  # noqa: BLE001 - StateIOError, OSError: still only a cache
        pass
