"""A summary of a Codex session written as a new rollout Codex resumes as its own (DESIGN.md §5,
"Summaries of a real agent's session").

A rollout is a line per item (`session_meta`, `turn_context`, `response_item`, `event_msg`,
`compacted`, …); a turn starts at its `task_started` event. The new rollout is the original's
header with its `session_meta` updated (the new thread id, `forked_from_id` naming the
original), then, as Codex's own compaction writes it, a `compacted` item whose `message` is the
summary and whose `replacement_history` is the history the model is given from there on:

- `up-to`: the compacted item first (the context messages the original started with, then the
  summary as a user message), then the turns from the point on, verbatim;
- `from`: the turns before the point, verbatim, then the compacted item (their history, then the
  summary).

The original file is only read.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coding_os import durable, jsonwire
from coding_os.errors import InvalidInput, StateIOError

__all__ = ["DIRECTIONS", "Compacted", "compacted_lines", "new_thread_id", "rollout_path",
           "split_at_time", "split_at_turn", "turn_starts", "write_rollout"]

DIRECTIONS = ("from", "up-to")

# Codex's own words before a summary it hands the model (codex-rs compaction, 0.169).
SUMMARY_PREFIX = ("Another language model started to solve this problem and produced a summary "
                  "of its thinking process. You also have access to the state of the tools that "
                  "were used by that language model. Use this to build on the work that has "
                  "already been done and avoid duplicating work. Here is the summary produced by "
                  "the other language model, use the information in this summary to assist with "
                  "your own analysis:")
_CONTEXT_PREFIXES = ("<environment_context", "<user_instructions", "# AGENTS.md",
                     "<permissions instructions>")


@dataclass(frozen=True)
class Compacted:
    """The lines of the new rollout, and what they hold of the original."""

    thread: str
    lines: list[dict[str, Any]]
    kept: int  # turns of the original copied verbatim
    summarised: int  # turns the summary stands for
    fork_point: str | None  # the turn id the split is at (the first turn not kept, or kept)
    cwd: str | None


def _payload(line: Mapping[str, Any]) -> Mapping[str, Any]:
    payload = line.get("payload")
    return payload if isinstance(payload, dict) else {}


def turn_starts(lines: Sequence[Mapping[str, Any]]) -> list[int]:
    """The positions of the `task_started` events, where turns start."""
    return [i for i, line in enumerate(lines) if line.get("type") == "event_msg"
            and _payload(line).get("type") == "task_started"]


def split_at_turn(lines: Sequence[Mapping[str, Any]], turn_id: str) -> int | None:
    """The position where turn `turn_id` starts, or None when the rollout has no such turn."""
    for i in turn_starts(lines):
        if _payload(lines[i]).get("turn_id") == turn_id:
            return i
    return None


def split_at_time(lines: Sequence[Mapping[str, Any]], stamp: str) -> int | None:
    """The position where the turn running at `stamp` started (the last one started at or
    before it), or None when no turn had started."""
    found = None
    for i in turn_starts(lines):
        ts = lines[i].get("timestamp")
        if isinstance(ts, str) and ts <= stamp:
            found = i
    return found


def new_thread_id(now: float | None = None) -> str:
    """A new thread id: a UUID version 7 (time-ordered), as Codex makes them."""
    ms = int((time.time() if now is None else now) * 1000)
    raw = bytearray(ms.to_bytes(6, "big") + os.urandom(10))
    raw[6] = 0x70 | (raw[6] & 0x0F)
    raw[8] = 0x80 | (raw[8] & 0x3F)
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _is_context(item: Mapping[str, Any]) -> bool:
    """A message Codex sends before the conversation: instructions, the environment."""
    if item.get("type") != "message":
        return False
    if item.get("role") == "developer":
        return True
    if item.get("role") != "user":
        return False
    parts = item.get("content") or []
    text = "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))
    return text.lstrip().startswith(_CONTEXT_PREFIXES)


def _history(lines: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The model's history as these lines leave it: their response items, and a compacted
    item's replacement history in place of what came before it."""
    history: list[dict[str, Any]] = []
    for line in lines:
        payload = _payload(line)
        if line.get("type") == "response_item":
            history.append(dict(payload))
        elif line.get("type") == "compacted":
            replaced = payload.get("replacement_history")
            if isinstance(replaced, list):
                history = [dict(i) for i in replaced if isinstance(i, dict)]
    return history


def _retag(line: Mapping[str, Any], old: str | None, new: str) -> dict[str, Any]:
    """`line` with its payload's thread and session ids that name the original renamed."""
    copy = dict(line)
    payload = _payload(line)
    if old and any(payload.get(k) == old for k in ("thread_id", "session_id")):
        copy["payload"] = {k: (new if k in ("thread_id", "session_id") and v == old else v)
                           for k, v in payload.items()}
    return copy


def compacted_lines(lines: Sequence[Mapping[str, Any]], split: int, direction: str,
                    summary: str, now: str, thread: str | None = None) -> Compacted:
    """The new rollout for the rollout `lines` split at `split` (a turn start): `up-to`
    summarises the turns before it and keeps the rest, `from` keeps the turns before it and
    summarises the rest. `now` stamps the new lines; `thread` is the new thread id (a new one
    when None).

    Raises:
        InvalidInput: a bad direction, a rollout without a session_meta, a split that is not a
            turn start, or nothing to summarise on that side.
    """
    if direction not in DIRECTIONS:
        raise InvalidInput(f"summarize from or up-to, not {direction!r}")
    starts = turn_starts(lines)
    if split not in starts:
        raise InvalidInput("a Codex rollout is summarised at a turn's start")
    meta_at = next((i for i, line in enumerate(lines) if line.get("type") == "session_meta"),
                   None)
    if meta_at is None:
        raise InvalidInput("the rollout has no session_meta")
    header = list(lines[:starts[0]])
    before, after = list(lines[starts[0]:split]), list(lines[split:])
    summarised, kept = (before, after) if direction == "up-to" else (after, before)
    if not summarised:
        raise InvalidInput("nothing to summarise on that side of the point")
    thread = thread or new_thread_id()
    meta = _payload(lines[meta_at])
    old = meta.get("id") if isinstance(meta.get("id"), str) else None
    new_meta = {**meta, "id": thread, "timestamp": now, "forked_from_id": old}
    if "session_id" in meta:
        new_meta["session_id"] = thread
    message = f"{SUMMARY_PREFIX}\n{summary}"
    summary_item = {"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": message}]}
    if direction == "up-to":
        context = [item for item in _history(header + before) if _is_context(item)]
        replacement = [*context, summary_item]
    else:
        replacement = [*_history(header + before), summary_item]
    compacted = {"timestamp": now, "type": "compacted",
                 "payload": {"message": message, "replacement_history": replacement}}
    noted = {"timestamp": now, "type": "event_msg", "payload": {"type": "context_compacted"}}
    out: list[dict[str, Any]] = []
    for line in header:
        out.append({**line, "payload": new_meta} if line is lines[meta_at]
                   else _retag(line, old, thread))
    body = ([compacted, noted, *kept] if direction == "up-to" else [*kept, compacted, noted])
    out.extend(line if line is compacted or line is noted else _retag(line, old, thread)
               for line in body)
    if any("ordinal" in line for line in lines):
        out = [{**line, "ordinal": n} for n, line in enumerate(out)]
    point = _payload(lines[split]).get("turn_id")
    cwd = meta.get("cwd")
    return Compacted(thread, out, _turns(kept), _turns(summarised),
                     point if isinstance(point, str) else None,
                     cwd if isinstance(cwd, str) else None)


def _turns(lines: Sequence[Mapping[str, Any]]) -> int:
    return len(turn_starts(lines))


def rollout_path(sessions_dir: str, thread: str, now: float | None = None) -> str:
    """Where Codex keeps a rollout of `thread` started at `now`:
    `<sessions>/YYYY/MM/DD/rollout-YYYY-MM-DDTHH-MM-SS-<thread>.jsonl`, in local time as Codex
    names them."""
    when = time.localtime(time.time() if now is None else now)
    day = time.strftime("%Y/%m/%d", when)
    stamp = time.strftime("%Y-%m-%dT%H-%M-%S", when)
    return os.path.join(sessions_dir, *day.split("/"), f"rollout-{stamp}-{thread}.jsonl")


def write_rollout(path: str, compacted: Compacted) -> str:
    """Write `compacted` at `path` (a new file, 0600, flushed; its folders made) and return the
    path.

    Raises:
        StateIOError: the file exists or cannot be written.
    """
    data = b"".join(jsonwire.dumps(line).encode("utf-8") + b"\n" for line in compacted.lines)
    if os.path.lexists(path):
        raise StateIOError(f"cannot write {path}: it exists")
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    except OSError as exc:
        raise durable.io_error(path, exc) from None
    durable.atomic_write(path, data)
    return path
