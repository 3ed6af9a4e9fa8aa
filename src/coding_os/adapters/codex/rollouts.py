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
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Mapping
from typing import Any

from coding_os.adapters.native import (
    FileRecord,
    ImportState,
    LineCounts,
    NativeSession,
    NativeSubagent,
    ScanReport,
    TokenTotals,
    clip,
    count,
    list_dir,
    normalise_timestamp,
    refresh_file,
)

__all__ = [
    "KNOWN_LINE_TYPES",
    "CodexRollout",
    "SessionIndex",
    "default_codex_dir",
    "prompt_text",
    "scan_codex",
]

AGENT = "codex"
KNOWN_LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context",
                              "compacted"})
INDEX_NAME = "session_index.jsonl"
_ROLLOUT_NAME = re.compile(
    r"^rollout-.*?([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$"
)
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
                # Prompts as user_message events (to 0.1xx), as completed UserMessage items
                # (newer), and, for rollouts with neither, as user response items.
                "prompt_events": _new_prompts(),
                "prompt_items": _new_prompts(),
                "prompt_responses": _new_prompts(),
                "assistant": 0,
                "tokens": None,
                "compactions": 0,
                "model": None,
            }
        self.data = data

    def feed(self, entry: dict[str, Any]) -> None:
        """Take one rollout line."""
        data = self.data
        kind = self.count_line(entry)
        payload = entry.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        subtype = payload.get("type")
        if kind in ("event_msg", "response_item") and isinstance(subtype, str):
            count(data["types"], f"{kind}/{subtype}")
        if kind not in KNOWN_LINE_TYPES:
            count(data["unknown"], kind)
        ts = normalise_timestamp(entry.get("timestamp"))
        if ts is not None:
            if data["first_ts"] is None or ts < data["first_ts"]:
                data["first_ts"] = ts
            if data["last_ts"] is None or ts > data["last_ts"]:
                data["last_ts"] = ts
        if kind == "session_meta":
            self._meta(payload)
        elif kind == "event_msg":
            self._event(payload, subtype)
        elif kind == "response_item" and subtype == "message":
            role = payload.get("role")
            if role == "assistant":
                data["assistant"] += 1
            elif role == "user":
                text = prompt_text(payload.get("content"))
                if text is not None:
                    _add_prompt(data["prompt_responses"], text)
        elif kind == "turn_context":
            model = payload.get("model")
            if isinstance(model, str) and model:
                data["model"] = model
        elif kind == "compacted":
            data["compactions"] += 1

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
            "parent": text(parent),
            "subagent": subagent,
            "nickname": text(payload.get("agent_nickname")),
            "role": text(payload.get("agent_role")),
        }

    def _event(self, payload: Mapping[str, Any], subtype: object) -> None:
        data = self.data
        if subtype == "user_message":
            message = payload.get("message")
            _add_prompt(data["prompt_events"], message.strip() if isinstance(message, str) else "")
        elif subtype == "item_completed":
            item = payload.get("item")
            if isinstance(item, dict) and item.get("type") == "UserMessage":
                parts = item.get("content")
                text = prompt_text(parts) if isinstance(parts, list) else None
                _add_prompt(data["prompt_items"], text or "")
        elif subtype == "token_count":
            info = payload.get("info")
            total = info.get("total_token_usage") if isinstance(info, dict) else None
            if isinstance(total, dict):
                # Cumulative: the last one is the thread's total.
                data["tokens"] = {
                    key: value for key, value in total.items()
                    if isinstance(value, int) and not isinstance(value, bool)
                }


class SessionIndex:
    """The partial aggregate of `session_index.jsonl`: thread names, the last line per id wins."""

    def __init__(self, data: dict[str, Any] | None) -> None:
        if data is None:
            data = {"lines": 0, "malformed": {}, "names": {}}
        self.data: dict[str, Any] = data

    def dump(self) -> dict[str, Any]:
        """The aggregate as JSON."""
        return self.data

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
    codex_dir: str | os.PathLike[str] | None = None, state: ImportState | None = None
) -> tuple[list[NativeSession], ImportState]:
    """Import every Codex thread under `codex_dir/sessions`, reading only what changed.

    `codex_dir` defaults to `CODEX_HOME`, else `~/.codex`. Returns the sessions (newest
    activity first; subagent threads attached to their parents) and the new state, whose `report`
    tells what was read and what could not be. Records of other agents and directories in
    `state` are kept as they are.
    """
    base = os.path.abspath(os.fspath(codex_dir)) if codex_dir is not None else default_codex_dir()
    sessions_dir = os.path.join(base, "sessions")
    index_path = os.path.join(base, INDEX_NAME)
    previous = state if state is not None else ImportState()
    report = ScanReport(agent=AGENT, root=base)
    inside = sessions_dir + os.sep

    def is_mine(path: str, record: FileRecord) -> bool:
        return record.agent == AGENT and (path.startswith(inside) or path == index_path)

    files = {path: rec for path, rec in previous.files.items() if not is_mine(path, rec)}
    mine: dict[str, FileRecord] = {}
    for path in _discover(sessions_dir, report):
        record = _refresh(path, "rollout", previous.files.get(path), report)
        if record is not None:
            mine[path] = record
    if os.path.lexists(index_path):
        record = _refresh(index_path, "index", previous.files.get(index_path), report)
        if record is not None:
            mine[index_path] = record
    files.update(mine)
    sessions = _assemble(mine, index_path, report)
    return sessions, ImportState(files=files, report=report)


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
    meta = record.aggregate["meta"]
    if meta is not None and meta["id"]:
        return str(meta["id"])
    match = _ROLLOUT_NAME.match(os.path.basename(record.path))
    return match.group(1) if match else None


def _assemble(records: Mapping[str, FileRecord], index_path: str,
              report: ScanReport) -> list[NativeSession]:
    ordered = [records[path] for path in sorted(records)]
    names: Mapping[str, str] = {}
    for record in ordered:
        if record.torn_tail:
            report.torn_files.append(record.path)
        report.malformed_lines += sum(record.aggregate["malformed"].values())
        if record.path == index_path:
            names = record.aggregate["names"]
    rollouts: dict[str, FileRecord] = {}
    children: list[tuple[FileRecord, str]] = []
    for record in ordered:
        if record.kind != "rollout":
            continue
        thread = _thread_id(record)
        if thread is None or record.aggregate["lines"] == 0:
            report.empty_files.append(record.path)
            continue
        meta = record.aggregate["meta"] or {}
        if meta.get("subagent"):
            children.append((record, thread))
        elif thread not in rollouts:
            rollouts[thread] = record
    spawned_by = {thread: record.aggregate["meta"]["parent"] for record, thread in children}
    subagents: dict[str, list[NativeSubagent]] = {}
    for record, thread in children:
        data = record.aggregate
        meta = data["meta"]
        count, first, _last = _prompts(data)
        subagent = NativeSubagent(
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
            assistant_messages=data["assistant"],
            tokens=_tokens(data["tokens"]),
            created=meta["timestamp"] or data["first_ts"],
            last_active=data["last_ts"],
        )
        owner = _root_thread(meta["parent"], spawned_by, rollouts)
        if owner is not None:
            subagents.setdefault(owner, []).append(subagent)
        else:
            report.orphan_subagents.append(subagent)
    sessions = [
        _session(thread, record, names.get(thread), subagents.get(thread, []))
        for thread, record in rollouts.items()
    ]
    sessions.sort(key=lambda s: (s.last_active or "", s.native_id), reverse=True)
    return sessions


def _root_thread(parent: str | None, spawned_by: Mapping[str, str | None],
                 rollouts: Mapping[str, FileRecord]) -> str | None:
    """The session a subagent thread belongs to: its parent, or its parent's, up the spawn chain."""
    seen: set[str] = set()
    while parent is not None and parent not in rollouts and parent not in seen:
        seen.add(parent)
        parent = spawned_by.get(parent)
    return parent if parent in rollouts else None


def _session(thread: str, record: FileRecord, name: str | None,
             subagents: list[NativeSubagent]) -> NativeSession:
    data = record.aggregate
    meta = data["meta"] or {}
    count, first, last = _prompts(data)
    subagents = sorted(subagents, key=lambda s: (s.created or "", s.agent_id))
    version = meta.get("cli_version")
    return NativeSession(
        agent=AGENT,
        native_id=thread,
        path=record.path,
        paths=(record.path, *(s.path for s in subagents)),
        cwd=meta.get("cwd"),
        project=meta.get("cwd"),
        git_branch=meta.get("branch"),
        git_commit=meta.get("commit"),
        git_repository=meta.get("repository"),
        cli_version=version,
        cli_versions=(version,) if version else (),
        model=data["model"],
        title=name or None,
        title_source="session_index" if name else None,
        first_prompt=first,
        last_prompt=last,
        user_messages=count,
        assistant_messages=data["assistant"],
        tokens=_tokens(data["tokens"]),
        created=meta.get("timestamp") or data["first_ts"],
        last_active=data["last_ts"],
        forked_from=meta.get("forked_from"),
        compactions=data["compactions"],
        subagents=tuple(subagents),
        entry_counts=dict(sorted(data["types"].items())),
        unknown_types=dict(sorted(data["unknown"].items())),
        malformed_lines=sum(data["malformed"].values()),
        torn_tail=record.torn_tail,
    )
