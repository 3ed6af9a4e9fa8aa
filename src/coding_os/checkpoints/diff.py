"""The per-file diffs of a checkpoint (what `cos web` shows of one): from it to the tree now
(`tree`: what a rewind would undo), or from the checkpoint before it of the same tree to it
(`previous`: what its turn changed). Changes nothing: the tree's side is the rewind's preview
(rewind.py), and a checkpoint's bytes are fetched as a restore fetches them (restore.py).
"""

from __future__ import annotations

from coding_os.checkpoints import points
from coding_os.errors import InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from coding_os.checkpoints.settings import Settings
    from coding_os.checkpoints.store import ObjectStore
    from coding_os.checkpoints.watch import Ask
    from coding_os.state.tiers import Tiers

__all__ = ["AGAINST", "DIFF_TEXT_MAX", "BINARY_SNIFF", "TEXT_MAX_BYTES", "check_request",
           "checkpoint_diff", "text_diff"]

AGAINST = ("tree", "previous")
DIFF_TEXT_MAX = 200_000  # characters of one file's diff shown; the rest is cut and said
BINARY_SNIFF = 8000  # bytes of each side looked at for a NUL: then the file is binary
TEXT_MAX_BYTES = 8 << 20  # both sides together; larger is shown as binary, not diffed


def check_request(checkpoint: str, against: str) -> None:
    """Refuse a diff request before anything is read.

    Raises:
        InvalidInput: `against` is neither `tree` nor `previous`, or a malformed checkpoint id.
    """
    if against not in AGAINST:
        raise InvalidInput(f"a checkpoint is compared with the tree or the previous one, not "
                           f"{against[:40]!r}")
    if not points.valid_key(checkpoint):
        raise InvalidInput(f"not a checkpoint id: {checkpoint[:80]!r} (cp-YYYYMMDD-HHMMSS-…)")


def checkpoint_diff(tiers: Tiers, root: str, checkpoint: str, against: str, settings: Settings,
                    watcher: Ask | None = None) -> dict[str, Any]:
    """The diffs of `checkpoint` of the tree at `root` against `against` (see the module):
    `files`, each path, action (create, delete, change), binary, diff (unified, at most
    DIFF_TEXT_MAX characters; `truncated` says when cut); `previous` the checkpoint compared
    with (None for the tree, or for the first checkpoint of a tree). `watcher`: as the
    preview's.

    Raises:
        InvalidInput: as `check_request`; a checkpoint of another tree.
        NotFound: no such checkpoint in this project.
        DamagedObject, RestoreError: its objects are missing or damaged.
    """
    from coding_os.checkpoints.manifest import read_manifest
    from coding_os.checkpoints.rewind import preview, read_current, row
    from coding_os.checkpoints.store import ObjectStore

    check_request(checkpoint, against)
    folder = tiers.checkpoints_dir
    checkpoint = points.resolve(folder, checkpoint)
    record = points.load(folder, checkpoint)
    if record.get("root") != root:
        raise InvalidInput(f"checkpoint {checkpoint} is of {record.get('root')}, not of {root}")
    store = ObjectStore(folder)
    manifest = read_manifest(store, str(record["manifest"]))
    previous_id = None
    if against == "tree":
        shown = preview(tiers, root, checkpoint, settings, watcher=watcher)
        listed = shown["files"]
        assert isinstance(listed, list)
        paths = [str(item["path"]) for item in listed]
        then = _file_bytes(root, store, manifest, paths)
        pairs = [(path, then[path], read_current(root, path)) for path in paths]
    else:
        previous_id, pairs = _against_previous(folder, root, store, record, manifest)
    files = []
    for path, old, new in pairs:
        action = "create" if old is None else "delete" if new is None else "change"
        files.append({"path": path, "action": action, **text_diff(path, old, new)})
    return {"checkpoint": row(record), "against": against, "previous": previous_id,
            "root": root, "files": files}


def _against_previous(folder: str, root: str, store: ObjectStore, record: dict[str, object],
                      manifest: dict[str, object]
                      ) -> tuple[str | None, list[tuple[str, bytes | None, bytes | None]]]:
    """The checkpoint before `record` of the same tree and mode, and each path that changed
    from it to `record` with its bytes in both (None: absent); none for the first one."""
    from coding_os.checkpoints.manifest import diff, read_manifest

    checkpoint = str(record["id"])
    earlier = [r for r in points.all_records(folder)
               if str(r["id"]) < checkpoint and r.get("root") == root
               and r.get("mode") == record.get("mode")]
    if not earlier:  # the first checkpoint of this tree: nothing to compare it with
        return None, []
    before = read_manifest(store, str(earlier[-1]["manifest"]))
    paths = [change[0] for change in diff(root, manifest, before)]
    old = _file_bytes(root, store, before, paths)
    new = _file_bytes(root, store, manifest, paths)
    return str(earlier[-1]["id"]), [(path, old.get(path), new[path]) for path in paths]


def _file_bytes(root: str, store: ObjectStore, manifest: dict[str, object], paths: list[str]
                ) -> dict[str, bytes | None]:
    """The bytes each of `paths` has in `manifest` (None: absent, or not a file it stored),
    fetched and checked as a restore fetches them."""
    from coding_os.checkpoints.manifest import holds_bytes, resolve
    from coding_os.checkpoints.restore import fetch, write_op

    found = resolve(root, manifest, set(paths))
    ops = [write_op(path, entry, prefix) for path, (entry, prefix, _) in sorted(found.items())
           if entry is not None and holds_bytes(entry)]
    data = fetch(root, store, ops)
    out: dict[str, bytes | None] = {path: None for path in paths}
    for number, op in enumerate(ops):
        out[str(op["path"])] = data.get(number)
    return out


def text_diff(path: str, old: bytes | None, new: bytes | None) -> dict[str, Any]:
    """The unified diff of `path` from `old` to `new` (None: absent), cut at DIFF_TEXT_MAX
    characters; `binary` when either side holds a NUL near its start or both are large."""
    import difflib

    a, b = old or b"", new or b""
    if b"\0" in a[:BINARY_SNIFF] or b"\0" in b[:BINARY_SNIFF] or len(a) + len(b) > TEXT_MAX_BYTES:
        return {"binary": True, "diff": None, "truncated": False}
    lines = difflib.unified_diff(a.decode("utf-8", "replace").splitlines(),
                                 b.decode("utf-8", "replace").splitlines(),
                                 fromfile=f"a/{path}" if old is not None else "/dev/null",
                                 tofile=f"b/{path}" if new is not None else "/dev/null",
                                 lineterm="")
    text = "\n".join(lines)
    return {"binary": False, "diff": text[:DIFF_TEXT_MAX], "truncated": len(text) > DIFF_TEXT_MAX}
