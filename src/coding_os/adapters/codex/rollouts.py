"""Codex's own rollouts, imported as native sessions (DESIGN.md §9).

Layout under `CODEX_HOME` (else `~/.codex`)::

    sessions/YYYY/MM/DD/rollout-<timestamp>-<thread id>.jsonl   one thread (session) each
    session_index.jsonl                                         {id, thread_name, updated_at}

A rollout line is `{timestamp, type, payload}`: `session_meta` first (`id`, `cwd`,
`cli_version`, `git`, `forked_from_id`; a subagent's also names its parent thread), then
`response_item`, `event_msg`, `turn_context` and `compacted` lines. Newer versions add types
this module does not know; they are counted, never an error. A resumed thread is appended to its
own rollout; a fork is a new rollout whose `session_meta` carries `forked_from_id`. A rollout
spawned by another thread (a subagent) is linked to that thread and never listed as a session.

History that is not live: Codex 0.169 numbers a thread's lines (`ordinal`) and keeps paginated
history. A fork (`thread/fork`) is a new rollout whose `session_meta.history_base` names the
parent's rollout and the ordinal its copy ends before, without copying the lines; a revert in
place (`thread/revert`) leaves the rollout as it is and starts a new one for the same thread,
`rollout-<ts>-<thread>_<history id>.jsonl`, whose `history_base` names the rollout (its history
id: the thread id for the first) and the ordinal the kept history ends before. The live history
of a thread is that of its newest rollout, resolved through these bases; the lines of older
rollouts past where the live history leaves them are the turns a revert dropped (branches).
Older versions record a rollback in the rollout itself (`event_msg` `thread_rolled_back` with
`num_turns`): the last turns before it are dropped.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coding_os import jsonwire, redact
from coding_os.adapters.native import (
    FileRecord,
    ImportState,
    LineCounts,
    NativeSession,
    NativeSubagent,
    ScanReport,
    TokenTotals,
    TurnUsage,
    clip,
    count,
    list_dir,
    normalise_timestamp,
    refresh_file,
)

__all__ = [
    "KNOWN_LINE_TYPES",
    "thread_of_path",
    "CodexRollout",
    "CodexHistory",
    "SessionIndex",
    "default_codex_dir",
    "read_history",
    "prompt_text",
    "redacted_aggregate",
    "scan_codex",
    "turn_usage",
]

AGENT = "codex"
KNOWN_LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context",
                              "compacted"})
INDEX_NAME = "session_index.jsonl"
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# rollout-<ts>-<thread>.jsonl, or rollout-<ts>-<thread>_<history id>.jsonl after a revert.
_ROLLOUT_NAME = re.compile(rf"^rollout-.*?({_UUID})(?:_({_UUID}))?\.jsonl$")
# A content part that is wholly one tagged block is context Codex injected, not typed text
# (<environment_context>, <user_instructions>, <subagent_notification>, ...).
_TAGGED_BLOCK = re.compile(r"^<([A-Za-z_][\w-]*)\b[^>]*>.*</\1>$", re.S)
_IMAGE_FRAME = re.compile(r"^</?image\b[^>]*>$")
_INJECTED_PREFIXES = ("# AGENTS.md instructions",)


def default_codex_dir() -> str:
    """The Codex home: `CODEX_HOME`, else `~/.codex`."""
    configured = os.environ.get("CODEX_HOME")
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    return os.path.join(os.path.expanduser("~"), ".codex")


def prompt_text(content: object) -> str | None:
    """The text a person typed in a `response_item` user message, or None for injected context.

    Image parts and the `<image>` tags that frame them are left out; an image-only message is
    `[image]`.
    """
    if isinstance(content, str):
        content = [{"type": "input_text", "text": content}]
    if not isinstance(content, list):
        return None
    texts: list[str] = []
    images = 0
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") in ("input_image", "image"):
            images += 1
            continue
        text = part.get("text")
        if not isinstance(text, str) or not text.strip():
            continue
        text = text.strip()
        if _IMAGE_FRAME.match(text) or _TAGGED_BLOCK.match(text):
            continue
        if text.startswith(_INJECTED_PREFIXES):
            continue
        texts.append(text)
    if texts:
        return "\n".join(texts)
    return "[image]" if images else None


def _new_prompts() -> dict[str, Any]:
    return {"count": 0, "first": None, "last": None}


def _add_prompt(prompts: dict[str, Any], text: str) -> None:
    prompts["count"] += 1
    if text:
        if prompts["first"] is None:
            prompts["first"] = clip(text)
        prompts["last"] = clip(text)


# What a line adds to a thread's summary, kept per line with its ordinal so that a history cut
# at an ordinal (a fork's, a revert's) can be summed: ["p", ordinal, kind, text] a prompt
# (kind "e": a user_message event, "i": a completed UserMessage item, "r": a user response
# item); ["a", ordinal] an assistant message; ["t", ordinal, totals] a cumulative token_count
# (`_TOKEN_KEYS`, in that order); ["m", ordinal, model]; ["c", ordinal] a compaction;
# ["u", ordinal] a turn's start; ["b", ordinal, turns] a rollback of the last `turns` turns
# (before 0.169). Tuples as they are made (the collector passes over them), lists once read back.
Event = Sequence[Any]
_TOKEN_KEYS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens",
               "output_tokens", "reasoning_output_tokens")
# What a rollout's head holds: enough to tell its thread, its place in a history and whether it
# is a subagent's, without its events (and of its `session_meta`, only that).
_HEAD = ("lines", "malformed", "unknown", "first_ts", "last_ts", "next_ordinal")
_HEAD_META = ("id", "timestamp", "forked_from", "history_base", "parent", "subagent")


class CodexRollout(LineCounts):
    """The partial aggregate of one rollout file (see `FileAggregate`)."""

    def __init__(self, data: dict[str, Any] | None) -> None:
        if data is None:
            data = {
                "lines": 0,
                "malformed": {},
                "types": {},
                "unknown": {},
                "meta": None,
                "meta_lines": 0,
                "first_ts": None,
                "last_ts": None,
                "events": [],
                "next_ordinal": 0,
                "compactions": 0,
            }
        self.data = data

    def head(self) -> dict[str, Any]:
        """The rollout's head: its thread, place in a history, times and counts."""
        data = self.data
        head = {key: data[key] for key in _HEAD}
        meta = data["meta"]
        head["meta"] = None if meta is None else {key: meta[key] for key in _HEAD_META}
        return head

    def feed(self, entry: dict[str, Any]) -> None:
        """Take one rollout line."""
        # One call per line of every rollout: written for speed (a rebuild's time is mostly
        # here and in the JSON parser). `x.__class__ is int` is `isinstance(x, int)` without
        # bool: JSON gives no other subclass.
        data = self.data
        data["lines"] += 1
        types = data["types"]
        kind = entry.get("type")
        if kind.__class__ is not str:
            kind = "<missing>"
        types[kind] = types.get(kind, 0) + 1
        ordinal = entry.get("ordinal")
        if ordinal.__class__ is not int:
            ordinal = data["next_ordinal"]
        data["next_ordinal"] = ordinal + 1
        payload = entry.get("payload")
        if payload.__class__ is not dict:
            payload = {}
        subtype = payload.get("type")
        if subtype.__class__ is str and (kind == "event_msg" or kind == "response_item"):
            key = kind + "/" + subtype
            types[key] = types.get(key, 0) + 1
        elif kind not in KNOWN_LINE_TYPES:
            count(data["unknown"], kind)
        ts = entry.get("timestamp")
        if not (ts.__class__ is str and len(ts) == 24 and ts[10] == "T" and ts[23] == "Z"
                and ts[19] == "."):
            ts = normalise_timestamp(ts)
        if ts is not None:
            first = data["first_ts"]
            if first is None or ts < first:
                data["first_ts"] = ts
            last = data["last_ts"]
            if last is None or ts > last:
                data["last_ts"] = ts
        if kind == "event_msg":
            self._event(payload, subtype, ordinal)
        elif kind == "response_item":
            if subtype == "message":
                role = payload.get("role")
                if role == "assistant":
                    data["events"].append(("a", ordinal))
                elif role == "user":
                    text = prompt_text(payload.get("content"))
                    if text is not None:
                        data["events"].append(("p", ordinal, "r", clip(text)))
        elif kind == "turn_context":
            model = payload.get("model")
            if isinstance(model, str) and model:
                data["events"].append(("m", ordinal, model))
        elif kind == "session_meta":
            self._meta(payload)
        elif kind == "compacted":
            data["compactions"] += 1
            data["events"].append(("c", ordinal))

    def _meta(self, payload: Mapping[str, Any]) -> None:
        data = self.data
        data["meta_lines"] += 1
        if data["meta"] is not None:
            return  # the first is the thread's own; later ones come with copied history
        git = payload.get("git")
        git = git if isinstance(git, dict) else {}
        source = payload.get("source")
        parent = payload.get("parent_thread_id")
        subagent: str | None = None
        if isinstance(source, dict) and "subagent" in source:
            spawn = source["subagent"]
            if isinstance(spawn, str):
                subagent = spawn
            elif isinstance(spawn, dict):
                subagent = next(iter(spawn), "subagent")
                details = spawn.get("thread_spawn")
                if parent is None and isinstance(details, dict):
                    parent = details.get("parent_thread_id")
        elif payload.get("thread_source") == "subagent" or parent:
            subagent = "subagent"

        def text(value: object) -> str | None:
            return value if isinstance(value, str) and value else None

        data["meta"] = {
            "id": text(payload.get("id")),
            "timestamp": normalise_timestamp(payload.get("timestamp")),
            "cwd": text(payload.get("cwd")),
            "cli_version": text(payload.get("cli_version")),
            "originator": text(payload.get("originator")),
            "source": source if isinstance(source, str) else None,
            "model_provider": text(payload.get("model_provider")),
            "branch": text(git.get("branch")),
            "commit": text(git.get("commit_hash")),
            "repository": text(git.get("repository_url")),
            "forked_from": text(payload.get("forked_from_id")),
            "history_base": _history_base(payload),
            "parent": text(parent),
            "subagent": subagent,
            "nickname": text(payload.get("agent_nickname")),
            "role": text(payload.get("agent_role")),
        }

    def _event(self, payload: Mapping[str, Any], subtype: object, ordinal: int) -> None:
        events: list[Event] = self.data["events"]
        if subtype == "token_count":
            info = payload.get("info")
            total = info.get("total_token_usage") if info.__class__ is dict else None
            if total.__class__ is dict:
                # Cumulative: the last one of a history is its total.
                events.append(("t", ordinal, tuple([n if (n := total.get(key)).__class__ is int
                                                    else 0 for key in _TOKEN_KEYS])))
        elif subtype == "user_message":
            message = payload.get("message")
            events.append(("p", ordinal, "e",
                           clip(message.strip()) if isinstance(message, str) else ""))
        elif subtype == "item_completed":
            item = payload.get("item")
            if isinstance(item, dict) and item.get("type") == "UserMessage":
                parts = item.get("content")
                text = prompt_text(parts) if isinstance(parts, list) else None
                events.append(("p", ordinal, "i", clip(text or "")))
        elif subtype == "task_started":
            events.append(("u", ordinal))
        elif subtype == "thread_rolled_back":
            turns = payload.get("num_turns")
            if isinstance(turns, int) and not isinstance(turns, bool) and turns > 0:
                events.append(("b", ordinal, turns))


def redacted_aggregate(kind: str, data: Mapping[str, Any]) -> Mapping[str, Any]:
    """A rollout's (or the index's) aggregate with the secrets of its texts redacted
    (coding_os.redact): the prompts and models of its events, and every string outside them;
    the same object when none holds one. The events hold no other text (their kinds, ordinals
    and counts are cos's), so they are not walked whole."""
    if kind != "rollout":
        return redact.redact_value(data)  # type: ignore[return-value]
    events: list[Event] = data["events"]
    cleaned: list[Event] | None = None
    for index, event in enumerate(events):
        what = event[0]
        at = 3 if what == "p" else 2 if what == "m" else 0
        if not at or not isinstance(event[at], str):
            continue
        text = redact.redact(event[at])
        if text is not event[at]:
            if cleaned is None:
                cleaned = list(events)
            cleaned[index] = [*event[:at], text, *event[at + 1:]]
    rest = {key: value for key, value in data.items() if key != "events"}
    redacted = redact.redact_value(rest)
    if cleaned is None and redacted is rest:
        return data
    assert isinstance(redacted, dict)
    return {**redacted, "events": cleaned if cleaned is not None else events}


def _history_base(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The rollout (history id) and ordinal a paginated history continues: `history_base`, or
    a fork's `forked_from_id` and `forked_from_ordinal_exclusive`."""
    base = payload.get("history_base")
    if isinstance(base, dict):
        history, end = base.get("thread_id"), base.get("end_ordinal_exclusive")
    else:
        history, end = payload.get("forked_from_id"), payload.get("forked_from_ordinal_exclusive")
    if isinstance(history, str) and history and isinstance(end, int) \
            and not isinstance(end, bool):
        return {"id": history, "end": end}
    return None


def _rolled_back(events: list[Event]) -> list[Event]:
    """`events` with each rollback applied: the turns it names, from their prompt on, dropped."""
    if not any(event[0] == "b" for event in events):
        return events
    kept: list[Event] = []
    for event in events:
        if event[0] != "b":
            kept.append(event)
            continue
        starts = [i for i, e in enumerate(kept) if e[0] == "p" and e[2] != "i"
                  and not (i and kept[i - 1][0] == "p" and kept[i - 1][2] != "i")]
        if not starts:
            continue
        cut = starts[-event[2]] if event[2] <= len(starts) else starts[0]
        while cut and kept[cut - 1][0] in ("u", "m"):
            cut -= 1  # the turn's start and context go with it
        del kept[cut:]
    return kept


def _summary(events: list[Event], inherited: int = 0) -> dict[str, Any]:
    """Prompts, assistant messages, tokens, model and compactions of a history's events; the
    first `inherited` events are another thread's (a fork's base): their tokens are not this
    thread's spend."""
    prompts = {"e": _new_prompts(), "i": _new_prompts(), "r": _new_prompts()}
    assistant = compactions = 0
    tokens: list[int] | None = None
    base_tokens: list[int] | None = None
    model: str | None = None
    for index, event in enumerate(events):
        what = event[0]
        if what == "p":
            _add_prompt(prompts[event[2]], event[3])
        elif what == "a":
            assistant += 1
        elif what == "t":
            tokens = event[2]
            if index < inherited:
                base_tokens = event[2]
        elif what == "m":
            model = event[2]
        elif what == "c":
            compactions += 1
    if tokens is not None and base_tokens is not None:
        tokens = [max(0, value - base) for value, base in zip(tokens, base_tokens)]
    return {"prompt_events": prompts["e"], "prompt_items": prompts["i"],
            "prompt_responses": prompts["r"], "assistant": assistant,
            "tokens": dict(zip(_TOKEN_KEYS, tokens)) if tokens is not None else None,
            "model": model, "compactions": compactions}


class SessionIndex:
    """The partial aggregate of `session_index.jsonl`: thread names, the last line per id wins."""

    def __init__(self, data: dict[str, Any] | None) -> None:
        if data is None:
            data = {"lines": 0, "malformed": {}, "names": {}}
        self.data: dict[str, Any] = data

    def dump(self) -> dict[str, Any]:
        """The aggregate as JSON."""
        return self.data

    def head(self) -> dict[str, Any]:
        """The index's head: its counts, without the names."""
        return {"lines": self.data["lines"], "malformed": self.data["malformed"]}

    def malformed(self, reason: str) -> None:
        """Count one unusable line."""
        count(self.data["malformed"], reason)

    def feed(self, entry: dict[str, Any]) -> None:
        """Take one index line."""
        self.data["lines"] += 1
        thread_id, name = entry.get("id"), entry.get("thread_name")
        if isinstance(thread_id, str) and isinstance(name, str):
            self.data["names"][thread_id] = name


def scan_codex(
    codex_dir: str | os.PathLike[str] | None = None, state: ImportState | None = None,
    changed_only: bool = False, also: Callable[[str], bool] | None = None,
) -> tuple[list[NativeSession], ImportState]:
    """Import every Codex thread under `codex_dir/sessions`, reading only what changed.

    `codex_dir` defaults to `CODEX_HOME`, else `~/.codex`. Returns the sessions (newest
    activity first; subagent threads attached to their parents) and the new state, whose `report`
    tells what was read and what could not be. Records of other agents and directories in
    `state` are kept as they are.

    With `changed_only`, only the threads that changed since `state` are assembled and returned:
    those with a rollout (their own, a subagent's, or one their history continues) read anew,
    gone or moved to another thread, and those whose name changed, and those whose live rollout
    `also` accepts; the others' aggregates are not read back. The report counts every thread
    either way.

    Raises:
        AggregateLost: a kept aggregate that is needed cannot be read back.
    """
    base = os.path.abspath(os.fspath(codex_dir)) if codex_dir is not None else default_codex_dir()
    sessions_dir = os.path.join(base, "sessions")
    index_path = os.path.join(base, INDEX_NAME)
    previous = state if state is not None else ImportState()
    report = ScanReport(agent=AGENT, root=base)
    inside = sessions_dir + os.sep

    def is_mine(path: str, record: FileRecord) -> bool:
        return record.agent == AGENT and (path.startswith(inside) or path == index_path)

    files: dict[str, FileRecord] = {}
    before: dict[str, FileRecord] = {}
    for path, kept in previous.files.items():
        (before if is_mine(path, kept) else files)[path] = kept
    mine: dict[str, FileRecord] = {}
    for path in _discover(sessions_dir, report):
        record = _refresh(path, "rollout", before.get(path), report)
        if record is not None:
            mine[path] = record
    if os.path.lexists(index_path):
        index = _refresh(index_path, "index", before.get(index_path), report)
        if index is not None:
            mine[index_path] = index
    files.update(mine)
    changed = {path for path, record in mine.items() if before.get(path) is not record}
    changed.update(path for path in before if path not in mine)
    sessions = _assemble(mine, index_path, report, before, changed if changed_only else None,
                         also)
    return sessions, ImportState(files=files, links=previous.links, report=report)


def _discover(sessions_dir: str, report: ScanReport) -> Iterator[str]:
    """Every `rollout-*.jsonl` below `sessions_dir` (YYYY/MM/DD, but any depth is searched)."""
    pending = [sessions_dir]
    while pending:
        folder = pending.pop()
        for name, is_dir in list_dir(folder):
            path = os.path.join(folder, name)
            if name.startswith("rollout-") and name.endswith(".jsonl"):
                if is_dir:
                    report.unreadable.append((path, "is a directory"))
                else:
                    yield path
            elif is_dir:
                pending.append(path)


def _refresh(
    path: str, kind: str, previous: FileRecord | None, report: ScanReport
) -> FileRecord | None:
    try:
        st = os.stat(path)
    except OSError as exc:
        report.unreadable.append((path, exc.strerror or type(exc).__name__))
        return previous
    if not stat.S_ISREG(st.st_mode):
        report.unreadable.append((path, "is a directory" if stat.S_ISDIR(st.st_mode) else
                                  "not a regular file"))
        return previous
    if kind == "index":
        return refresh_file(path, st, previous, AGENT, kind, SessionIndex, report)
    return refresh_file(path, st, previous, AGENT, kind, CodexRollout, report)


def _tokens(total: Mapping[str, int] | None) -> TokenTotals:
    if not total:
        return TokenTotals()
    return TokenTotals(
        input=total.get("input_tokens", 0),
        cached=total.get("cached_input_tokens", 0),
        cache_write=total.get("cache_write_input_tokens", 0),
        output=total.get("output_tokens", 0),
        reasoning=total.get("reasoning_output_tokens", 0),
    )


def _prompts(data: Mapping[str, Any]) -> tuple[int, str | None, str | None]:
    """Prompt count, first and last: from prompt events; from user response items without any."""
    events, items = data["prompt_events"], data["prompt_items"]
    count = events["count"] + items["count"]
    if count:
        # A thread resumed by a newer Codex mixes the two kinds of event, in time order.
        if events["count"] and items["count"]:
            return count, events["first"] or items["first"], items["last"] or events["last"]
        chosen = events if events["count"] else items
        return count, chosen["first"], chosen["last"]
    responses = data["prompt_responses"]
    return responses["count"], responses["first"], responses["last"]


def _thread_id(record: FileRecord) -> str | None:
    meta = record.head["meta"]
    if meta is not None and meta["id"]:
        return str(meta["id"])
    match = _ROLLOUT_NAME.match(os.path.basename(record.path))
    return match.group(1) if match else None


def _history_id(path: str, thread: str | None) -> str | None:
    """The id a `history_base` names a rollout by: the uuid after `_` in its name (a revert's
    rollout), else its thread's id."""
    match = _ROLLOUT_NAME.match(os.path.basename(path))
    if match and match.group(2):
        return match.group(2)
    return thread


# -- histories across rollouts ------------------------------------------------------------------

INFINITE = 1 << 62
Segment = tuple[str, int, int]  # (history id, first ordinal, ordinal it ends before)


def _history_segments(history: str, metas: Mapping[str, Mapping[str, Any] | None]
                     ) -> tuple[list[Segment], list[str]]:
    """The parts of rollouts that make up the history of rollout `history`, oldest first —
    each (history id, from ordinal, before ordinal) — and warnings for bases that are missing
    or loop. `metas` maps history ids to their rollouts' `session_meta` aggregates."""
    chain: list[tuple[str, int]] = []  # newest first: (history id, ordinal its part ends before)
    warnings: list[str] = []
    seen: set[str] = set()
    current: str | None = history
    end = INFINITE
    while current is not None:
        if current in seen:
            warnings.append(f"the history of rollout {history} loops at {current}")
            break
        seen.add(current)
        chain.append((current, end))
        base = (metas.get(current) or {}).get("history_base")
        if not base:
            break
        if base["id"] not in metas:
            warnings.append(f"rollout {current} continues {base['id']}, which is not found: "
                            "its history starts at its own lines")
            break
        current, end = base["id"], min(end, int(base["end"]))
    segments: list[Segment] = []
    start = -INFINITE
    for history_id, ends in reversed(chain):
        segments.append((history_id, start, ends))
        start = max(start, ends)
    return segments, warnings


def _take(events: list[Event], lo: int, hi: int) -> list[Event]:
    """The events of the lines with ordinals from `lo` up to (not including) `hi`."""
    return [event for event in events if lo <= event[1] < hi]


@dataclass
class _Threads:
    """Rollouts grouped by thread, from their heads alone (no events read)."""

    # thread -> its own rollouts, and the one it is resumed from (threads that are sessions)
    own: dict[str, list[FileRecord]]
    live: dict[str, FileRecord]
    # history id -> its rollout, and the rollouts' metas by history id
    by_history: dict[str, FileRecord]
    metas: dict[str, Any]
    # subagent rollouts with their thread, the session each belongs to (None: not found), and
    # each session's subagent rollouts
    children: list[tuple[FileRecord, str]]
    owner: dict[str, str | None]
    kids: dict[str, list[str]]
    empty: list[str]

    def depends_on(self, thread: str) -> tuple[set[str], str | None]:
        """The rollouts a session's assembly reads (its own, its subagents', those its live
        history continues), and the history id of a base its history names that is missing."""
        paths = {record.path for record in self.own[thread]}
        paths.update(self.kids.get(thread, ()))
        current = _history_id(self.live[thread].path, thread) or thread
        seen: set[str] = set()
        while current in self.metas and current not in seen:
            seen.add(current)
            paths.add(self.by_history[current].path)
            base = (self.metas[current] or {}).get("history_base")
            if not base:
                return paths, None
            current = base["id"]
        return paths, (current if current not in seen else None)


def _group(ordered: list[FileRecord]) -> _Threads:
    """The rollouts among `ordered` (sorted by path) grouped by thread, from their heads."""
    own: dict[str, list[FileRecord]] = {}
    by_history: dict[str, FileRecord] = {}
    children: list[tuple[FileRecord, str]] = []
    empty: list[str] = []
    for record in ordered:
        if record.kind != "rollout":
            continue
        thread = _thread_id(record)
        if thread is None or record.head["lines"] == 0:
            empty.append(record.path)
            continue
        history = _history_id(record.path, thread)
        if history is not None:
            by_history.setdefault(history, record)
        meta = record.head["meta"] or {}
        if meta.get("subagent"):
            children.append((record, thread))
        else:
            own.setdefault(thread, []).append(record)
    live = {thread: _live_record(files) for thread, files in own.items()}
    spawned_by = {thread: record.head["meta"]["parent"] for record, thread in children}
    owner = {record.path: _root_thread(record.head["meta"]["parent"], spawned_by, live)
             for record, _thread in children}
    kids: dict[str, list[str]] = {}
    for path, session in owner.items():
        if session is not None:
            kids.setdefault(session, []).append(path)
    metas = {history: record.head["meta"] for history, record in by_history.items()}
    return _Threads(own, live, by_history, metas, children, owner, kids, empty)


def _touched(now: _Threads, before: _Threads, changed: set[str], ids: set[str]) -> set[str]:
    """The session threads whose assembly reads a rollout in `changed` (read anew or gone), now
    or in the previous state, or whose history names a missing base whose history id is in
    `ids` (the history ids of the changed rollouts)."""
    touched: set[str] = set()
    for group, missing_counts in ((now, True), (before, False)):
        for thread in group.own:
            if thread in touched or thread not in now.own:
                continue
            paths, missing = group.depends_on(thread)
            if not paths.isdisjoint(changed) or (missing_counts and missing in ids):
                touched.add(thread)
    return touched


def _assemble(records: Mapping[str, FileRecord], index_path: str, report: ScanReport,
              before: Mapping[str, FileRecord], changed: set[str] | None,
              also: Callable[[str], bool] | None = None) -> list[NativeSession]:
    """The sessions of `records` (all, or with `changed` those `_touched` by it and those whose
    live rollout `also` accepts), the report's counts filled in; `before` are the previous
    state's records of the same files.

    Raises:
        AggregateLost: a kept aggregate that is needed cannot be read back.
    """
    ordered = [records[path] for path in sorted(records)]
    for record in ordered:
        if record.torn_tail:
            report.torn_files.append(record.path)
        report.malformed_lines += sum(record.head["malformed"].values())
    now = _group(ordered)
    report.empty_files.extend(now.empty)
    # Nothing read anew and nothing gone: the same records, grouped the same.
    previous = now if changed is not None and not changed else \
        _group([before[path] for path in sorted(before)])
    report.vanished.extend(sorted(set(previous.own) - set(now.own)))
    report.sessions = len(now.own)
    report.session_paths.extend(record.path for record in now.live.values())
    report.orphans = sum(1 for owner in now.owner.values() if owner is None)
    report.subagents = len(now.owner) - report.orphans
    names: Mapping[str, str] = {}
    if changed is None:
        wanted = set(now.own)
    else:
        ids = set()
        for path in changed:
            for found in (records.get(path), before.get(path)):
                if found is not None and found.kind == "rollout":
                    ids.add(_history_id(path, _thread_id(found)))
        wanted = _touched(now, previous, changed, {i for i in ids if i is not None}) \
            if changed else set()
        if index_path in changed:
            old = before[index_path].aggregate["names"] if index_path in before else {}
            new = records[index_path].aggregate["names"] if index_path in records else {}
            wanted.update(thread for thread in now.own
                          if old.get(thread) != new.get(thread))
        if also is not None:
            wanted.update(thread for thread, record in now.live.items() if also(record.path))
    if wanted and index_path in records:
        names = records[index_path].aggregate["names"]
    subagents: dict[str, list[NativeSubagent]] = {}
    for record, thread in now.children:
        owner = now.owner[record.path]
        if owner not in wanted and (owner is not None or (changed is not None
                                                           and record.path not in changed)):
            continue
        subagent = _subagent(record, thread)
        if owner is not None:
            subagents.setdefault(owner, []).append(subagent)
        else:
            report.orphan_subagents.append(subagent)
    sessions = [
        _session(thread, now.own[thread], now.live[thread], now.by_history, now.metas,
                 names.get(thread), subagents.get(thread, []))
        for thread in now.live if thread in wanted
    ]
    sessions.sort(key=lambda s: (s.last_active or "", s.native_id), reverse=True)
    return sessions


def _subagent(record: FileRecord, thread: str) -> NativeSubagent:
    """A subagent thread's rollout as a subagent of its parent session."""
    data = record.aggregate
    meta = data["meta"]
    summary = _summary(_rolled_back(data["events"]))
    count, first, _last = _prompts(summary)
    return NativeSubagent(
        agent=AGENT,
        agent_id=thread,
        parent=meta["parent"],
        layout="thread",
        path=record.path,
        agent_type=meta["role"] or meta["subagent"],
        description=meta["nickname"],
        first_prompt=first,
        entries=data["lines"],
        user_messages=count,
        assistant_messages=summary["assistant"],
        tokens=_tokens(summary["tokens"]),
        created=meta["timestamp"] or data["first_ts"],
        last_active=data["last_ts"],
    )


def _live_record(files: list[FileRecord]) -> FileRecord:
    """The rollout Codex resumes a thread from: the one written last (a revert starts one)."""
    def key(record: FileRecord) -> tuple[str, int, str]:
        head = record.head
        meta = head["meta"] or {}
        return (meta.get("timestamp") or head["first_ts"] or "", head["next_ordinal"],
                record.path)
    return max(files, key=key)


def _root_thread(parent: str | None, spawned_by: Mapping[str, str | None],
                 rollouts: Mapping[str, FileRecord]) -> str | None:
    """The session a subagent thread belongs to: its parent, or its parent's, up the spawn chain."""
    seen: set[str] = set()
    while parent is not None and parent not in rollouts and parent not in seen:
        seen.add(parent)
        parent = spawned_by.get(parent)
    return parent if parent in rollouts else None


def _live_events(thread: str, record: FileRecord, by_history: Mapping[str, FileRecord],
                 metas: Mapping[str, Any]) -> tuple[list[Event], int, list[Segment], list[str]]:
    """The live history's events of a thread whose newest rollout is `record`, how many of them
    are another thread's (a fork's base), its segments and warnings."""
    history = _history_id(record.path, thread) or thread
    if history not in metas:
        return record.aggregate["events"], 0, [], []
    segments, warnings = _history_segments(history, metas)
    events: list[Event] = []
    inherited = 0
    for history_id, lo, hi in segments:
        part = _take(by_history[history_id].aggregate["events"], lo, hi)
        events.extend(part)
        if _thread_id(by_history[history_id]) != thread:
            inherited = len(events)
    return _rolled_back(events), inherited, segments, warnings


def _dropped(thread: str, files: list[FileRecord], segments: list[Segment]) -> int:
    """How many of a thread's rollouts hold turns its live history no longer has (branches)."""
    live_until = {history_id: hi for history_id, _lo, hi in segments}
    branches = 0
    for record in files:
        history = _history_id(record.path, thread) or thread
        hi = live_until.get(history)
        if hi is None:
            meta = record.head["meta"] or {}
            hi = (meta.get("history_base") or {}).get("end", -INFINITE)
        if any(e[0] == "p" and e[1] >= hi for e in record.aggregate["events"]):
            branches += 1
    return branches


def _session(thread: str, files: list[FileRecord], record: FileRecord,
             by_history: Mapping[str, FileRecord], metas: Mapping[str, Any], name: str | None,
             subagents: list[NativeSubagent]) -> NativeSession:
    data = record.aggregate
    meta = data["meta"] or {}
    events, inherited, segments, warnings = _live_events(thread, record, by_history, metas)
    summary = _summary(events, inherited)
    count, first, last = _prompts(summary)
    subagents = sorted(subagents, key=lambda s: (s.created or "", s.agent_id))
    version = meta.get("cli_version")
    own = sorted(f.path for f in files)
    first_meta = min(((f.head["meta"] or {}).get("timestamp") or f.head["first_ts"]
                      or "" for f in files), default="")
    return NativeSession(
        agent=AGENT,
        native_id=thread,
        path=record.path,
        paths=(record.path, *(p for p in own if p != record.path),
               *(s.path for s in subagents)),
        cwd=meta.get("cwd"),
        project=meta.get("cwd"),
        git_branch=meta.get("branch"),
        git_commit=meta.get("commit"),
        git_repository=meta.get("repository"),
        cli_version=version,
        cli_versions=(version,) if version else (),
        model=summary["model"],
        title=name or None,
        title_source="session_index" if name else None,
        first_prompt=first,
        last_prompt=last,
        user_messages=count,
        assistant_messages=summary["assistant"],
        tokens=_tokens(summary["tokens"]),
        created=first_meta or None,
        last_active=max((f.head["last_ts"] or "" for f in files), default="") or None,
        forked_from=meta.get("forked_from") or _fork_source(files, thread),
        compactions=summary["compactions"],
        subagents=tuple(subagents),
        entry_counts=_sum_counts(f.aggregate["types"] for f in files),
        unknown_types=_sum_counts(f.aggregate["unknown"] for f in files),
        malformed_lines=sum(sum(f.head["malformed"].values()) for f in files),
        torn_tail=any(f.torn_tail for f in files),
        branches=_dropped(thread, files, segments),
        tree_warnings=tuple(warnings),
    )


def _fork_source(files: list[FileRecord], thread: str) -> str | None:
    """The thread a thread was forked from, as its first rollout says."""
    for record in files:
        forked = (record.head["meta"] or {}).get("forked_from")
        if forked and forked != thread:
            return str(forked)
    return None


def _sum_counts(tables: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for table in tables:
        for key, value in table.items():
            total[key] = total.get(key, 0) + value
    return dict(sorted(total.items()))


# -- a thread's history read from its rollouts (export, `cos sessions show`) --------------------


@dataclass
class CodexHistory:
    """A Codex thread's conversation as its rollouts hold it.

    `live` is the live history's lines in order (what Codex would send the model next, with the
    thread's other lines); `leaf` the last turn id in it; `branches` the turns a revert dropped,
    one per rollout that holds some (`number`, `tip`: the last dropped turn id, `fork_point`:
    the last live turn before them, `length` lines, `messages`, `first_prompt`, `last_ts`,
    `path`), oldest first; `warnings` say where a base rollout is missing.
    """

    thread: str | None
    live: list[dict[str, Any]]
    leaf: str | None
    branches: list[dict[str, Any]]
    warnings: list[str]


def _sessions_root(path: str) -> str:
    """The `sessions` folder a rollout is in (sessions/YYYY/MM/DD), else the rollout's folder."""
    folder = os.path.dirname(os.path.abspath(path))
    probe = folder
    for _ in range(4):
        if os.path.basename(probe) == "sessions":
            return probe
        probe = os.path.dirname(probe)
    return folder


def _read_rollout(path: str) -> list[tuple[int, dict[str, Any]]]:
    """The JSON-object lines of a rollout with their ordinals; unusable lines are skipped."""
    lines: list[tuple[int, dict[str, Any]]] = []
    ordinal = 0
    with open(path, "rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                break  # a torn last line, as the importer leaves it
            try:
                entry = jsonwire.loads(raw)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            given = entry.get("ordinal")
            if isinstance(given, int) and not isinstance(given, bool):
                ordinal = given
            lines.append((ordinal, entry))
            ordinal += 1
    return lines


def _meta_of(lines: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    for _ordinal, entry in lines:
        if entry.get("type") == "session_meta" and isinstance(entry.get("payload"), dict):
            payload = entry["payload"]
            return {"id": payload.get("id") if isinstance(payload.get("id"), str) else None,
                    "timestamp": normalise_timestamp(payload.get("timestamp")),
                    "history_base": _history_base(payload)}
    return {"id": None, "timestamp": None, "history_base": None}


def _turn_id(entry: Mapping[str, Any]) -> str | None:
    payload = entry.get("payload")
    if entry.get("type") == "event_msg" and isinstance(payload, dict) \
            and payload.get("type") == "task_started" and isinstance(payload.get("turn_id"), str):
        return str(payload["turn_id"])
    return None


def _typed_prompt(entry: Mapping[str, Any]) -> str | None:
    payload = entry.get("payload")
    if entry.get("type") == "response_item" and isinstance(payload, dict) \
            and payload.get("type") == "message" and payload.get("role") == "user":
        return prompt_text(payload.get("content"))
    return None


def turn_usage(lines: Iterable[Mapping[str, Any]]) -> list[TurnUsage]:
    """Token use per turn of a thread's history (`CodexHistory.live`, in order): each turn's
    prompt and the usage of the model calls that answered it, until the next prompt, from the
    `token_count` events' `last_token_usage`, with their models (the `turn_context` before
    each count names it) and cost (adapters/prices.py). A turn starts at a `user_message` event
    (at a typed user message in a history without such events, as the listing counts prompts).
    Codex repeats a count (a rate-limit update, a new turn's first event): one whose
    `total_token_usage` did not change is not counted again. What comes before the first prompt
    is a turn of its own, prompt "" (none when it used no tokens)."""
    from coding_os.adapters.prices import cost

    lines = list(lines)
    starts = [_user_message(entry) for entry in lines]
    if not any(start is not None for start in starts):
        starts = [_typed_prompt(entry) for entry in lines]
    turns: list[TurnUsage] = [TurnUsage("", TokenTotals())]
    seen_total: object = None
    model: str | None = None
    for entry, prompt in zip(lines, starts):
        if prompt is not None:
            turns.append(TurnUsage(prompt, TokenTotals()))
            continue
        payload = entry.get("payload")
        if entry.get("type") == "turn_context" and isinstance(payload, dict) \
                and isinstance(payload.get("model"), str) and payload["model"]:
            model = payload["model"]
            continue
        if entry.get("type") != "event_msg" or not isinstance(payload, dict) \
                or payload.get("type") != "token_count":
            continue
        info = payload.get("info")
        if not isinstance(info, dict) or not isinstance(info.get("last_token_usage"), dict):
            continue
        total = info.get("total_token_usage")
        if total is not None and total == seen_total:
            continue
        seen_total = total
        last = _tokens({key: value for key, value in info["last_token_usage"].items()
                        if isinstance(value, int) and not isinstance(value, bool) and value > 0})
        if last.total == 0:
            continue
        turn = turns[-1]
        # Codex counts its cached and cache-written tokens inside its input tokens.
        fresh = max(0, last.input - last.cached - last.cache_write)
        spent = cost(model, fresh, last.output, last.cached, last.cache_write)
        models = turn.models if model is None or model in turn.models \
            else (*turn.models, model)
        turns[-1] = TurnUsage(turn.prompt, turn.tokens + last, models,
                              None if turn.cost is None or spent is None else turn.cost + spent)
    if turns[0].tokens.total == 0:
        turns.pop(0)
    return turns


def _user_message(entry: Mapping[str, Any]) -> str | None:
    payload = entry.get("payload")
    if entry.get("type") == "event_msg" and isinstance(payload, dict) \
            and payload.get("type") == "user_message":
        message = payload.get("message")
        return message.strip() if isinstance(message, str) and message.strip() else "[image]"
    return None


def _apply_rollbacks(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Lines with each `thread_rolled_back` applied: its last `num_turns` turns dropped."""
    kept: list[dict[str, Any]] = []
    for entry in lines:
        payload = entry.get("payload")
        turns = payload.get("num_turns") if isinstance(payload, dict) else None
        if not (entry.get("type") == "event_msg" and isinstance(payload, dict)
                and payload.get("type") == "thread_rolled_back"):
            kept.append(entry)
            continue
        if not isinstance(turns, int) or isinstance(turns, bool) or turns <= 0:
            continue
        starts = [i for i, e in enumerate(kept) if _typed_prompt(e) is not None]
        if not starts:
            continue
        cut = starts[-turns] if turns <= len(starts) else starts[0]
        while cut and (kept[cut - 1].get("type") == "turn_context" or _turn_id(kept[cut - 1])):
            cut -= 1
        del kept[cut:]
    return kept


def thread_of_path(path: str) -> str | None:
    """The thread a rollout file belongs to, from its name (`rollout-<ts>-<thread>.jsonl`, or
    `…-<thread>_<history>.jsonl` for the thread's rollout after a revert)."""
    match = _ROLLOUT_NAME.match(os.path.basename(path))
    return match.group(1) if match else None


# Histories read in this process (cos web's pages of a thread, its branches and tokens), by the
# rollout asked for: (the rollouts below its sessions folder then, the stat of every rollout the
# read loaded, taken before loading it, the history).
_HISTORIES_KEPT = 2
_histories: dict[str, tuple[tuple[str, ...], dict[str, tuple[int, int, int] | None],
                            CodexHistory]] = {}


def _stat(file: str) -> tuple[int, int, int] | None:
    try:
        info = os.stat(file)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


def read_history(path: str | os.PathLike[str]) -> CodexHistory:
    """The history of the Codex thread whose rollout is at `path`: its live history (through the
    newest rollout of the thread and the bases it continues) and the turns reverts dropped.

    The answer is remembered in this process while the rollouts below the sessions folder are
    the same files and the ones it read are unchanged (a page after the first of a long thread
    does not parse it again): the caller must not change it.

    Raises:
        OSError: the rollout at `path` cannot be read.
    """
    path = os.path.abspath(os.fspath(path))
    rollouts = tuple(_discover(_sessions_root(path), ScanReport(agent=AGENT, root="")))
    known = _histories.get(path)
    if known is not None and known[0] == rollouts \
            and all(_stat(file) == stat for file, stat in known[1].items()):
        return known[2]
    stats: dict[str, tuple[int, int, int] | None] = {}
    history = _read_history(path, rollouts, stats)
    if all(stat is not None for stat in stats.values()):
        if len(_histories) >= _HISTORIES_KEPT and path not in _histories:
            _histories.pop(next(iter(list(_histories))), None)  # the oldest
        _histories[path] = (rollouts, stats, history)
    return history


def _read_history(path: str, rollouts: tuple[str, ...],
                  stats: dict[str, tuple[int, int, int] | None]) -> CodexHistory:
    """`read_history` of the rollout at `path` (absolute), the thread's other rollouts and bases
    found among `rollouts`; the stat of each file it loads is put in `stats` before loading it."""
    stats[path] = _stat(path)
    own = _read_rollout(path)
    thread = _meta_of(own)["id"]
    if thread is None:
        match = _ROLLOUT_NAME.match(os.path.basename(path))
        thread = match.group(1) if match else None
    paths_by_history: dict[str, str] = {}
    thread_paths: list[str] = [path]
    for candidate in rollouts:
        match = _ROLLOUT_NAME.match(os.path.basename(candidate))
        if match is None:
            continue
        paths_by_history.setdefault(match.group(2) or match.group(1), candidate)
        if match.group(1) == thread and os.path.abspath(candidate) != path:
            thread_paths.append(os.path.abspath(candidate))
    loaded: dict[str, list[tuple[int, dict[str, Any]]]] = {path: own}

    def load(file: str) -> list[tuple[int, dict[str, Any]]]:
        if file not in loaded:
            stats[file] = _stat(file)
            try:
                loaded[file] = _read_rollout(file)
            except OSError:
                loaded[file] = []
        return loaded[file]

    metas_by_path = {file: _meta_of(load(file)) for file in thread_paths}
    live_path = max(thread_paths, key=lambda f: (metas_by_path[f]["timestamp"] or "",
                                                 len(loaded[f]), f))
    history_of = {file: _history_id(file, thread) or file for file in thread_paths}
    metas: dict[str, Any] = {history_of[f]: metas_by_path[f] for f in thread_paths}
    files_by_history = {history_of[f]: f for f in thread_paths}
    current = metas[history_of[live_path]].get("history_base")
    while current and current["id"] not in metas and current["id"] in paths_by_history:
        base_path = paths_by_history[current["id"]]
        metas[current["id"]] = _meta_of(load(base_path))
        files_by_history[current["id"]] = base_path
        current = metas[current["id"]].get("history_base")
    segments, warnings = _history_segments(history_of[live_path], metas)
    live: list[dict[str, Any]] = []
    for history_id, lo, hi in segments:
        live.extend(entry for ordinal, entry in load(files_by_history[history_id])
                    if lo <= ordinal < hi)
    live = _apply_rollbacks(live)
    leaf = next((t for t in map(_turn_id, reversed(live)) if t), None)
    live_until = {history_id: hi for history_id, _lo, hi in segments}
    branches: list[dict[str, Any]] = []
    for file in sorted(thread_paths, key=lambda f: (metas_by_path[f]["timestamp"] or "", f)):
        if file == live_path:
            continue
        base = metas_by_path[file].get("history_base") or {}
        cut = live_until.get(history_of[file], base.get("end", -INFINITE))
        lines = load(file)
        dropped = [entry for ordinal, entry in lines if ordinal >= cut]
        prompts = [text for text in map(_typed_prompt, dropped) if text is not None]
        if not prompts:
            continue
        kept_turns = [t for ordinal, entry in lines if ordinal < cut
                      for t in (_turn_id(entry),) if t]
        fork_point = kept_turns[-1] if kept_turns else (
            next((t for t in map(_turn_id, reversed(live)) if t), None))
        stamps = [str(e["timestamp"]) for e in dropped if isinstance(e.get("timestamp"), str)]
        branches.append({
            "number": len(branches) + 1,
            "tip": next((t for t in map(_turn_id, reversed(dropped)) if t), None),
            "fork_point": fork_point,
            "length": len(dropped),
            "messages": sum(1 for e in dropped if e.get("type") == "response_item"
                            and isinstance(e.get("payload"), dict)
                            and e["payload"].get("type") == "message"
                            and e["payload"].get("role") == "assistant") + len(prompts),
            "first_prompt": clip(prompts[0]),
            "last_ts": max(stamps) if stamps else None,
            "path": file,
        })
    return CodexHistory(thread=thread, live=live, leaf=leaf, branches=branches,
                        warnings=warnings)
