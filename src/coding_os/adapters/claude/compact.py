"""A summary of a Claude Code session written as a new transcript Claude Code resumes as its own
(DESIGN.md §5, "Summaries of a real agent's session").

The new transcript has the shape of Claude Code's own /compact: a `compact_boundary` system
entry (no parent; `logicalParentUuid` names the entry of the original it continues) and an
`isCompactSummary` user entry holding the summary. The entries kept verbatim follow the summary
(`up-to`: the conversation from the point on) or sit between the boundary and the summary
(`from`: the conversation before the point), so the model reads them in their order. Kept
entries keep their uuids (as Claude Code's own `--fork-session` copy does), each is re-parented
on the entry written before it, and every `sessionId` is the new session's. Only the live chain
is copied; bookkeeping entries without a uuid (request records, costs, queue operations) are
not. The original file is only read.
"""

from __future__ import annotations

import os
import uuid as uuids
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from coding_os import durable, jsonwire
from coding_os.adapters.claude.tree import classify_user_entry
from coding_os.errors import InvalidInput, StateIOError

__all__ = ["DIRECTIONS", "Compacted", "compacted_entries", "prompt_starts", "split_after",
           "split_at_time", "write_transcript"]

DIRECTIONS = ("from", "up-to")

_UP_TO_HEAD = ("This session is being continued from a previous conversation. The summary below "
               "covers the earlier portion of the conversation (written by coding-os).")
_FROM_HEAD = ("The conversation above went on; the summary below covers what happened after it "
              "(written by coding-os). The files are as that part of the conversation left them.")
# The fields of a conversation entry that say where and in what it was written.
_CONTEXT_FIELDS = ("userType", "entrypoint", "cwd", "version", "gitBranch", "slug")


@dataclass(frozen=True)
class Compacted:
    """The entries of the new transcript, and what they hold of the original."""

    session: str
    entries: list[dict[str, Any]]
    kept: int  # entries of the original copied verbatim
    summarised: int  # entries of the original the summary stands for
    fork_point: str | None  # the uuid of the original's entry the boundary continues
    cwd: str | None


def prompt_starts(chain: Sequence[Mapping[str, Any]]) -> list[int]:
    """The positions in `chain` of the entries that are prompts the person typed (or slash
    commands): the points a summary can split at."""
    return [i for i, entry in enumerate(chain) if entry.get("type") == "user"
            and classify_user_entry(entry)[0] in ("prompt", "command")]


def split_after(chain: Sequence[Mapping[str, Any]], point: str) -> int | None:
    """The position after the entry `point` (a checkpoint's native point: the last chain entry
    before its prompt), or None when the live chain does not hold it."""
    for i, entry in enumerate(chain):
        if entry.get("uuid") == point:
            return i + 1
    return None


def split_at_time(chain: Sequence[Mapping[str, Any]], stamp: str,
                  prompt: str | None = None) -> int | None:
    """The position of the prompt whose turn was running at `stamp` (the last prompt written at
    or before it), or None when no prompt precedes it. With `prompt` (the checkpoint's prompt
    excerpt): when that prompt is not the one found, it was not written yet, and the position is
    that of the first prompt after `stamp` (the end when there is none)."""
    found = None
    starts = prompt_starts(chain)
    for i in starts:
        ts = chain[i].get("timestamp")
        if isinstance(ts, str) and ts <= stamp:
            found = i
    if prompt and (found is None or not classify_user_entry(chain[found])[1].strip()
                   .startswith(prompt.strip()[:50])):
        later = [i for i in starts if str(chain[i].get("timestamp") or "") > stamp]
        return later[0] if later else len(chain)
    return found


def _shifted(stamp: object, milliseconds: int) -> str | None:
    if not isinstance(stamp, str):
        return None
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    when = (when + timedelta(milliseconds=milliseconds)).astimezone(timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def compacted_entries(chain: Sequence[Mapping[str, Any]], split: int, direction: str,
                      summary: str, now: str, session: str | None = None) -> Compacted:
    """The new transcript for `chain` (a live chain, root first) split at position `split`:
    `up-to` summarises chain[:split] and keeps the rest, `from` keeps chain[:split] and
    summarises the rest. `now` stamps the summary entries; `session` is the new session id
    (a new one when None).

    Raises:
        InvalidInput: a bad direction, or a split that leaves nothing to summarise.
    """
    if direction not in DIRECTIONS:
        raise InvalidInput(f"summarize from or up-to, not {direction!r}")
    if not 0 <= split <= len(chain):
        raise InvalidInput(f"split {split} is outside the conversation ({len(chain)} entries)")
    before, after = list(chain[:split]), list(chain[split:])
    summarised, kept = (before, after) if direction == "up-to" else (after, before)
    if not summarised:
        raise InvalidInput("nothing to summarise on that side of the point")
    # An earlier compaction's boundary among the kept entries would cut the chain there.
    kept = [e for e in kept if not (e.get("type") == "system"
                                    and e.get("subtype") == "compact_boundary")]
    session = session or str(uuids.uuid4())
    context_entry = chain[-1] if chain else {}
    context = {k: context_entry[k] for k in _CONTEXT_FIELDS if k in context_entry}
    fork_point = summarised[-1].get("uuid") if direction == "up-to" else (
        before[-1].get("uuid") if before else None)
    boundary_uuid, summary_uuid = str(uuids.uuid4()), str(uuids.uuid4())
    if direction == "up-to":
        first_kept = kept[0].get("timestamp") if kept else None
        boundary_ts = _shifted(first_kept, -2) or now
        summary_ts = _shifted(first_kept, -1) or now
        logical = summarised[-1].get("uuid")
    else:
        first = kept[0].get("timestamp") if kept else None
        boundary_ts, summary_ts = _shifted(first, -1) or now, now
        first_parent = kept[0].get("parentUuid") if kept else None
        logical = first_parent if isinstance(first_parent, str) else None
    boundary: dict[str, Any] = {
        "parentUuid": None, "logicalParentUuid": logical, "isSidechain": False,
        "type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
        "isMeta": False, "timestamp": boundary_ts, "uuid": boundary_uuid, "level": "info",
        "compactMetadata": {"trigger": "manual", "preTokens": 0},
        **context, "sessionId": session,
    }
    head = _UP_TO_HEAD if direction == "up-to" else _FROM_HEAD
    summary_entry: dict[str, Any] = {
        "parentUuid": None, "isSidechain": False, "type": "user",
        "message": {"role": "user", "content": f"{head}\n\nSummary:\n{summary}"},
        "isVisibleInTranscriptOnly": True, "isCompactSummary": True,
        "uuid": summary_uuid, "timestamp": summary_ts, **context, "sessionId": session,
    }
    ordered = ([boundary, summary_entry, *kept] if direction == "up-to"
               else [boundary, *kept, summary_entry])
    written: list[dict[str, Any]] = []
    parent: str | None = None
    for entry in ordered:
        copy = dict(entry)
        if entry is not boundary:
            copy["parentUuid"] = parent
        copy["sessionId"] = session
        if "session_id" in copy:
            copy["session_id"] = session
        written.append(copy)
        parent = str(copy["uuid"])
    cwd = context.get("cwd")
    return Compacted(session, written, len(kept), len(summarised),
                     fork_point if isinstance(fork_point, str) else None,
                     cwd if isinstance(cwd, str) else None)


def write_transcript(directory: str, compacted: Compacted) -> str:
    """Write `compacted` as `<directory>/<session>.jsonl` (a new file, 0600, flushed) and return
    its path.

    Raises:
        StateIOError: the file exists or cannot be written (nothing is left half written).
    """
    path = os.path.join(directory, f"{compacted.session}.jsonl")
    data = b"".join(jsonwire.dumps(entry).encode("utf-8") + b"\n"
                    for entry in compacted.entries)
    if os.path.lexists(path):
        raise StateIOError(f"cannot write {path}: it exists")
    durable.atomic_write(path, data)
    return path
