"""Checkpoint records: which snapshot, of which session, at which prompt (DESIGN.md §5).

A record is a small JSON file `<state_dir>/checkpoints/points/<id>.json`, written atomically,
naming the manifest object of its snapshot and what the caller knew then: session, agent, turn,
the prompt's excerpt, trigger (`prompt`, `tool:<name>`, `turn-end`, `manual`, `before-rewind`),
coverage mode, the transcript seq of a cos-native session, the paths changed since the
session's previous checkpoint, and, when the agent keeps its own log, its native point (`native`:
`{"agent": "claude", "native_id", "transcript", "uuid", "prompt_id"}` or `{"agent": "codex",
"native_id", "transcript", "turn_id"}`), which the conversation half of a rewind goes back to. Ids sort by time: `cp-YYYYMMDD-HHMMSS-<ms>-<4 hex>`.
Each session's latest checkpoint, its head, is kept apart (heads.py).

One file per record means two panels checkpointing at once never share a file; objects they
both write are identical by construction.
"""

from __future__ import annotations

import os
import time

from coding_os import jsonwire
from coding_os.clock import utc_now
from coding_os.errors import InvalidInput, NotFound, StateIOError
from coding_os import durable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "TRIGGERS",
    "new_id",
    "valid_id",
    "valid_key",
    "resolve",
    "write",
    "load",
    "all_records",
    "remove",
]

TRIGGERS = ("prompt", "tool:<name>", "turn-end", "manual", "before-rewind")
_ID_CHARS = frozenset("0123456789abcdef-cp")


def new_id(now: float | None = None) -> str:
    now = time.time() if now is None else now
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"cp-{stamp}-{int(now % 1 * 1000):03d}-{os.urandom(2).hex()}"


def new_record(*, session: str | None, agent: str | None, turn: int | None, prompt: str | None,
               trigger: str, mode: object, root: str, manifest: str, previous: str | None,
               seq: int | None, changed: list[str], changed_count: int | None, skipped: object,
               native: Mapping[str, object] | None = None,
               now: float | None = None) -> dict[str, object]:
    """A new checkpoint record (not yet written), with its id and time taken from `now`, and
    the agent's `native` point when one is known."""
    now = time.time() if now is None else now
    record: dict[str, object] = {"v": 1, "id": new_id(now), "ts": utc_now(now), "session": session, "agent": agent,
            "turn": turn, "prompt": prompt, "trigger": trigger, "mode": mode, "root": root,
            "manifest": manifest, "previous": previous, "seq": seq, "changed": changed,
            "changed_count": changed_count, "skipped": skipped}
    if native is not None:
        record["native"] = dict(native)
    return record


def valid_id(value: object) -> bool:
    """Whether `value` has the shape of a checkpoint id (checked before any file is opened)."""
    return (isinstance(value, str) and len(value) == 27 and value.startswith("cp-")
            and set(value) <= _ID_CHARS and value[11] == "-" and value[18] == "-"
            and value[22] == "-" and value[3:11].isdigit() and value[12:18].isdigit())


def valid_key(value: object) -> bool:
    """Whether `value` can name a checkpoint as typed: a whole id, or a part of one as a table
    shows it or a start of it (coding_os.state.shortid)."""
    return isinstance(value, str) and 4 <= len(value) <= 27 and set(value) <= _ID_CHARS


def resolve(checkpoints_dir: str, key: str) -> str:
    """The id of the checkpoint `key` names: the whole id, its end as `cos checkpoints` shows
    it, or a start of it.

    Raises:
        InvalidInput: `key` cannot name a checkpoint (checked first).
        NotFound: no checkpoint matches.
        Ambiguous: several do; the message lists them.
    """
    from coding_os.state.shortid import pick

    if valid_id(key):
        return key
    if not valid_key(key):
        raise InvalidInput(f"not a checkpoint id: {key[:80]!r} (cp-YYYYMMDD-HHMMSS-…)")
    try:
        names = os.listdir(_points(checkpoints_dir))
    except (FileNotFoundError, NotADirectoryError):
        names = []
    known = [(name[:-5], None) for name in sorted(names, reverse=True)
             if name.endswith(".json") and valid_id(name[:-5])]
    found = pick(key, known, "checkpoint")
    if found is None:
        raise NotFound(f"no checkpoint {key}")
    return found


def _points(checkpoints_dir: str) -> str:
    return os.path.join(checkpoints_dir, "points")


def write(checkpoints_dir: str, record: dict[str, object]) -> None:
    """Store `record` (its `id` names the file).

    Raises:
        StateIOError: it cannot be written.
    """
    folder = durable.ensure_dir(_points(checkpoints_dir))
    data = jsonwire.dumps(record).encode("ascii")
    # Not flushed to disk: a record lost to a power cut is one checkpoint fewer, never a
    # dangling one (its objects were flushed before it was written), and the hooks that write
    # records run on every prompt of every panel.
    durable.atomic_write(os.path.join(folder, f"{record['id']}.json"), data, sync=False)


def load(checkpoints_dir: str, checkpoint: str) -> dict[str, object]:
    """The record of `checkpoint`.

    Raises:
        InvalidInput: the id is malformed (checked first).
        NotFound: there is no such checkpoint.
        StateIOError: the record cannot be read or is damaged.
    """
    if not valid_id(checkpoint):
        raise InvalidInput(f"not a checkpoint id: {checkpoint[:80]!r} (cp-YYYYMMDD-HHMMSS-…)")
    path = os.path.join(_points(checkpoints_dir), f"{checkpoint}.json")
    try:
        with open(path, "rb") as f:
            record = jsonwire.loads(f.read().decode("utf-8", "replace"))
    except FileNotFoundError:
        raise NotFound(f"no checkpoint {checkpoint}") from None
    except (OSError, ValueError) as exc:
        raise StateIOError(f"checkpoint record {path} cannot be read: {exc}") from None
    if not isinstance(record, dict) or record.get("id") != checkpoint:
        raise StateIOError(f"checkpoint record {path} is damaged")
    return record


def all_records(checkpoints_dir: str) -> list[dict[str, object]]:
    """Every readable record, oldest first (a damaged one is left out, never fatal)."""
    folder = _points(checkpoints_dir)
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise StateIOError(f"cannot list {folder}: {exc.strerror or exc}") from None
    records = []
    for name in names:
        if not name.endswith(".json") or not valid_id(name[:-5]):
            continue
        try:
            records.append(load(checkpoints_dir, name[:-5]))
        except (NotFound, StateIOError):
            continue
    return records


def remove(checkpoints_dir: str, checkpoint: str, session: object = None) -> None:
    """Remove the record of `checkpoint`, and the head of its `session` when it names it (a
    head never names a checkpoint that is gone). Called under the exclusive restore lock."""
    try:
        os.unlink(os.path.join(_points(checkpoints_dir), f"{checkpoint}.json"))
    except FileNotFoundError:
        pass
    if isinstance(session, str) and session:
        from coding_os.checkpoints.heads import drop

        drop(checkpoints_dir, session, checkpoint)
