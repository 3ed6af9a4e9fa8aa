"""Claude Code's own transcripts, imported as native sessions (DESIGN.md §9).

Layout under the Claude config dir (`CLAUDE_CONFIG_DIR`, else `~/.claude`)::

    projects/<cwd with non-alphanumerics as ->/<session>.jsonl          a session
    projects/<key>/agent-<id>.jsonl                     a subagent (2.0.x), parent in `sessionId`
    projects/<key>/<session>/subagents/agent-<id>.jsonl a subagent (2.1.x), + agent-<id>.meta.json

Before 2.0 subagents were written inline, as `isSidechain: true` entries of the parent's file.
The format is internal to Claude Code and drifts, so only known fields are read and every entry
type is counted; types this module does not know are counted apart, never an error.

A transcript is one file per session. Claude Code appends a resumed session to the same file,
but a forked session (and, in older versions, a resumed one) starts a new file holding a copy of
the earlier entries, uuids unchanged: such a copy is linked to the session it continues.

A session file is a tree of entries (`coding_os.adapters.claude.tree`): its prompts, messages
and tokens are those of the live chain; branches a rewind or a `--resume-session-at` left beside
it are counted as branches, and entry counts and activity times are the whole file's.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from coding_os import jsonwire, redact
from coding_os.adapters.claude.tree import classify_text, classify_user_entry, read_tree
from coding_os.adapters.native import (
    FileRecord,
    ImportState,
    LineCounts,
    NativeSession,
    NativeSubagent,
    ScanReport,
    TokenTotals,
    TurnUsage,
    first_session_id,
    clip,
    count,
    list_dir,
    normalise_timestamp,
    refresh_file,
)

__all__ = [
    "KNOWN_ENTRY_TYPES",
    "ClaudeTranscript",
    "classify_user_entry",
    "default_claude_dir",
    "project_key",
    "redacted_aggregate",
    "scan_claude",
    "subagent_files",
    "is_subagent_name",
    "turn_usage",
]

AGENT = "claude"
# Entry types whose meaning is known: read for the listing, or client bookkeeping it can skip.
KNOWN_ENTRY_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "custom-title",
        "ai-title",
        "pr-link",
        "attachment",
        "progress",
        "file-history-snapshot",
        "queue-operation",
        "last-prompt",
        "agent-name",
        "permission-mode",
        "mode",
        "worktree-state",
        "cost-state",
        "api-request",
        "api-request-shape",
        "api-request-blob",
        "tools-used",
    }
)
_CONVERSATION = frozenset({"user", "assistant", "system", "attachment", "progress"})
# Entries whose uuids identify a conversation's history (copies are found through them).
_HISTORY = frozenset({"user", "assistant", "system"})
_META_SUFFIX = ".meta.json"
_META_MAX_BYTES = 1 << 20


def default_claude_dir() -> str:
    """The Claude config dir: `CLAUDE_CONFIG_DIR`, else `~/.claude`."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    return os.path.join(os.path.expanduser("~"), ".claude")


def project_key(cwd: str) -> str:
    """The folder Claude Code keeps a directory's sessions in: non-alphanumerics become `-`."""
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


# -- one file -------------------------------------------------------------------------------------


def _new_part() -> dict[str, Any]:
    """The summary of one conversation: the session's main chain, or one subagent's."""
    return {
        "entries": 0,
        "prompts": 0,
        "commands": 0,
        "first_prompt": None,
        "last_prompt": None,
        "first_command": None,
        "last_command": None,
        "usage": {},
        "compactions": 0,
        "compact_summaries": 0,
        "first_ts": None,
        "last_ts": None,
        "model": None,
        "agent_id": None,
    }


class ClaudeTranscript(LineCounts):
    """The partial aggregate of one transcript file (see `FileAggregate`).

    In a session file (`split`), `isSidechain` entries form inline subagent chains apart from the
    main conversation; in a subagent file everything is the subagent's own conversation.
    """

    def __init__(self, data: dict[str, Any] | None, split: bool) -> None:
        if data is None:
            data = {
                "split": split,
                "lines": 0,
                "malformed": {},
                "types": {},
                "unknown": {},
                "session_ids": {},
                "cwd": None,
                "branch": None,
                "version": None,
                "versions": [],
                "first_ts": None,
                "last_ts": None,
                "first_line_ts": None,
                "custom_title": None,
                "ai_title": None,
                "summaries": {},
                "pr_links": [],
                "main": _new_part(),
                "chains": {},
                "chain_of": {},
                # [uuid, timestamp] of the main conversation's entries, in file order: a list, so
                # the order survives any JSON store.
                "history": [],
                "roots": [],
                # The main conversation's entries with a uuid, in file order: {"u": uuid,
                # "p": parentUuid, "t": type, "s": its share of the summary, "l": a compact
                # boundary's logicalParentUuid}. `main` is summed from its live chain.
                "nodes": [],
                "compactions": 0,
                "tree_warnings": [],
                "branches": 0,
            }
        self.data = data
        self.split = bool(data["split"])

    def feed(self, entry: dict[str, Any]) -> None:
        """Take one transcript entry."""
        data = self.data
        kind = self.count_line(entry)
        types = data["types"]
        subtype: object = None
        if kind == "system":
            subtype = entry.get("subtype")
        elif kind == "attachment":
            attachment = entry.get("attachment")
            subtype = attachment.get("type") if isinstance(attachment, dict) else None
        if isinstance(subtype, str):
            count(types, f"{kind}/{subtype}")
        if kind not in KNOWN_ENTRY_TYPES:
            count(data["unknown"], kind)
        ts = normalise_timestamp(entry.get("timestamp"))
        if ts is not None:
            if data["first_line_ts"] is None:
                data["first_line_ts"] = ts
            if data["first_ts"] is None or ts < data["first_ts"]:
                data["first_ts"] = ts
            if data["last_ts"] is None or ts > data["last_ts"]:
                data["last_ts"] = ts
        self._context(entry)
        if kind in _CONVERSATION:
            self._conversation(entry, kind, ts)
        elif kind == "summary":
            leaf, text = entry.get("leafUuid"), entry.get("summary")
            if isinstance(leaf, str) and isinstance(text, str):
                data["summaries"][leaf] = text
        elif kind == "custom-title" and isinstance(entry.get("customTitle"), str):
            data["custom_title"] = entry["customTitle"]
        elif kind == "ai-title" and isinstance(entry.get("aiTitle"), str):
            data["ai_title"] = entry["aiTitle"]
        elif kind == "pr-link":
            link = entry.get("prUrl") or entry.get("prNumber")
            if isinstance(link, (str, int)) and str(link) not in data["pr_links"]:
                data["pr_links"].append(str(link))

    def _context(self, entry: Mapping[str, Any]) -> None:
        data = self.data
        session_id = entry.get("sessionId")
        if isinstance(session_id, str) and session_id:
            count(data["session_ids"], session_id)
        cwd = entry.get("cwd")
        if data["cwd"] is None and isinstance(cwd, str) and cwd:
            data["cwd"] = cwd
        branch = entry.get("gitBranch")
        if isinstance(branch, str) and branch:
            data["branch"] = branch
        version = entry.get("version")
        if isinstance(version, str) and version:
            data["version"] = version
            if version not in data["versions"]:
                data["versions"].append(version)

    def _conversation(self, entry: Mapping[str, Any], kind: str, ts: str | None) -> None:
        data = self.data
        uuid = entry.get("uuid")
        uuid = uuid if isinstance(uuid, str) and uuid else None
        parent = entry.get("parentUuid")
        parent = parent if isinstance(parent, str) and parent else None
        boundary = kind == "system" and entry.get("subtype") == "compact_boundary"
        if not self.split:
            _apply(data["main"], _share(entry, kind, ts, uuid))
            return
        if entry.get("isSidechain") is True:
            root = data["chain_of"].get(parent) if parent is not None else None
            if root is None:
                root = uuid or parent or "<unknown>"
            if uuid is not None:
                data["chain_of"][uuid] = root
            part = data["chains"].get(root)
            if part is None:
                part = data["chains"][root] = _new_part()
            _apply(part, _share(entry, kind, ts, uuid))
            return
        if boundary:
            data["compactions"] += 1
        if uuid is None:
            return  # not part of the conversation's tree, as Claude Code reads it
        if kind in _HISTORY:
            data["history"].append([uuid, ts])
            if parent is None:
                data["roots"].append(uuid)
        node: dict[str, Any] = {"u": uuid, "p": parent, "t": kind,
                                "s": _share(entry, kind, ts, uuid)}
        logical = entry.get("logicalParentUuid")
        if boundary:
            node["l"] = logical if isinstance(logical, str) else None
        data["nodes"].append(node)

    def dump(self) -> dict[str, Any]:
        """The aggregate as JSON; in a session file, `main` sums up the live chain."""
        if self.split:
            main, warnings, branch_count = _live_part(self.data["nodes"])
            self.data["main"] = main
            self.data["tree_warnings"] = warnings
            self.data["branches"] = branch_count
        return self.data

    def head(self) -> dict[str, Any]:
        """The head of the dumped aggregate: what links a file to the others (a session file's
        first entry, roots, summaries, inline subagents and the entry a compact summary at its
        start continues; a subagent file's session), without its entries."""
        data = self.data
        head: dict[str, Any] = {"lines": data["lines"], "malformed": data["malformed"],
                                "unknown": data["unknown"]}
        if not self.split:
            head["owner"] = _majority(data["session_ids"])
            return head
        nodes = data["nodes"]
        logical = nodes[0].get("l") if nodes else None
        head.update(
            first_uuid=data["history"][0][0] if data["history"] else None,
            roots=data["roots"],
            summaries=data["summaries"],
            # Titled by itself: no summary of another file can title it (`_title`).
            titled=bool(data["custom_title"] or data["ai_title"]),
            chains=len(data["chains"]),
            # Starts with a compact boundary whose logical parent is not in this file (a summary
            # cos wrote, adapters/claude/compact.py): linked to the session holding it.
            compact_start=bool(nodes) and "l" in nodes[0] and not (
                isinstance(logical, str) and any(n["u"] == logical for n in nodes)),
            logical=logical if isinstance(logical, str) else None,
        )
        return head


# The aggregate's lists of the entries' own ids (uuids, timestamps, message ids): no text in them
# but what a share (`_share`) types: its prompt or command, and its model.
_ID_LISTS = ("nodes", "history", "chain_of")


def redacted_aggregate(kind: str, data: Mapping[str, Any]) -> Mapping[str, Any]:
    """A transcript's aggregate with the secrets of its texts redacted (coding_os.redact): the
    prompts, commands and models its entries add, and every string outside the lists of ids;
    the same object when none holds one. Ids the tool writes (uuids, timestamps, message,
    request and agent ids) are kept as they are: the lists of them are not walked whole."""
    if kind == "meta" or "nodes" not in data:
        return redact.redact_value(data)  # type: ignore[return-value]
    nodes: list[dict[str, Any]] = data["nodes"]
    cleaned: list[dict[str, Any]] | None = None
    for index, node in enumerate(nodes):
        share = node["s"]
        typed, model = share.get("typed"), share.get("model")
        text = redact.redact(typed[1]) if typed and isinstance(typed[1], str) else None
        named = redact.redact(model) if isinstance(model, str) else model
        if (text is None or text is typed[1]) and named is model:
            continue
        share = dict(share)
        if text is not None:
            share["typed"] = [typed[0], text]
        if "model" in share:
            share["model"] = named
        if cleaned is None:
            cleaned = list(nodes)
        cleaned[index] = {**node, "s": share}
    rest = {key: value for key, value in data.items() if key not in _ID_LISTS}
    redacted = redact.redact_value(rest)
    if cleaned is None and redacted is rest:
        return data
    assert isinstance(redacted, dict)
    return {**redacted, **{key: data[key] for key in _ID_LISTS if key in data},
            "nodes": cleaned if cleaned is not None else nodes}


def _share(entry: Mapping[str, Any], kind: str, ts: str | None, uuid: str | None
           ) -> dict[str, Any]:
    """What one conversation entry adds to the summary of its part, as JSON."""
    share: dict[str, Any] = {}
    if ts is not None:
        share["ts"] = ts
    agent_id = entry.get("agentId")
    if isinstance(agent_id, str) and agent_id:
        share["agent"] = agent_id
    typed: tuple[str, str] | None = None
    if kind == "user":
        typed = classify_user_entry(entry)
    elif kind == "assistant":
        _usage(share, entry, uuid)
    elif kind == "system" and entry.get("subtype") == "compact_boundary":
        share["compaction"] = 1
    elif kind == "attachment":
        attachment = entry.get("attachment")
        if isinstance(attachment, dict) and attachment.get("type") == "queued_command":
            typed = _queued(attachment)
    if typed is not None and typed[0] in ("prompt", "command", "compact_summary"):
        share["typed"] = [typed[0], clip(typed[1])]
    return share


def _apply(part: dict[str, Any], share: Mapping[str, Any]) -> None:
    """Add one entry's share to the summary of its part."""
    part["entries"] += 1
    ts = share.get("ts")
    if ts is not None:
        if part["first_ts"] is None or ts < part["first_ts"]:
            part["first_ts"] = ts
        if part["last_ts"] is None or ts > part["last_ts"]:
            part["last_ts"] = ts
    if part["agent_id"] is None and "agent" in share:
        part["agent_id"] = share["agent"]
    typed = share.get("typed")
    if typed is not None:
        what, text = typed
        if what == "prompt":
            part["prompts"] += 1
            if part["first_prompt"] is None:
                part["first_prompt"] = text
            part["last_prompt"] = text
        elif what == "command":
            part["commands"] += 1
            if part["first_command"] is None:
                part["first_command"] = text
            part["last_command"] = text
        elif what == "compact_summary":
            part["compact_summaries"] += 1
    usage = share.get("usage")
    if usage is not None:
        key, values = usage
        known = part["usage"].get(key)
        # Lines of one message may report growing usage while it streams: keep the largest.
        part["usage"][key] = values if known is None else [max(a, b) for a, b in zip(known, values)]
    if share.get("model"):
        part["model"] = share["model"]
    part["compactions"] += share.get("compaction", 0)


def _live_part(nodes: list[Mapping[str, Any]]) -> tuple[dict[str, Any], list[str], int]:
    """The summary of the conversation's live chain, the tree's warnings, and how many
    branches lie beside it."""
    stubs: list[dict[str, Any]] = []
    shares: dict[str, Mapping[str, Any]] = {}
    for node in nodes:
        stub = {"uuid": node["u"], "parentUuid": node["p"], "type": node["t"]}
        if "l" in node:
            stub["subtype"] = "compact_boundary"
            stub["logicalParentUuid"] = node["l"]
        stubs.append(stub)
        shares[node["u"]] = node["s"]
    tree = read_tree(stubs)
    part = _new_part()
    for entry in tree.live:
        _apply(part, shares[entry["uuid"]])
    return part, list(tree.warnings), len(tree.branches())


def _queued(attachment: Mapping[str, Any]) -> tuple[str, str] | None:
    """A prompt typed while the agent was busy, delivered as an attachment."""
    mode = attachment.get("commandMode")
    if mode not in (None, "prompt", "bash"):
        return None
    prompt = attachment.get("prompt")
    texts: list[str] = []
    images = 0
    if isinstance(prompt, str):
        texts.append(prompt)
    elif isinstance(prompt, list):
        for block in prompt:
            if isinstance(block, dict) and block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            elif isinstance(block, dict) and block.get("type") == "image":
                images += 1
    what, text = classify_text(texts, images)
    if mode == "bash" and what == "prompt":
        what, text = "command", "!" + text
    return what, text


def _usage(share: dict[str, Any], entry: Mapping[str, Any], uuid: str | None) -> None:
    if entry.get("isApiErrorMessage"):
        return
    message = entry.get("message")
    if not isinstance(message, dict):
        return
    message_id = message.get("id")
    request = entry.get("requestId") or entry.get("requestRef") or ""
    # One assistant message is written as several lines (one per content block), each
    # carrying the message's usage: count it once per message and request.
    if isinstance(message_id, str) and message_id:
        key = f"{message_id}|{request}"
    else:
        key = f"uuid|{uuid}"
    usage = message.get("usage")
    values = [0, 0, 0, 0, 0]
    if isinstance(usage, dict):
        details = usage.get("output_tokens_details")
        thinking = details.get("thinking_tokens") if isinstance(details, dict) else 0
        for index, raw in enumerate(
            (
                usage.get("input_tokens"),
                usage.get("cache_creation_input_tokens"),
                usage.get("cache_read_input_tokens"),
                usage.get("output_tokens"),
                thinking,
            )
        ):
            if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0:
                values[index] = raw
    share["usage"] = [key, values]
    model = message.get("model")
    if isinstance(model, str) and model and model != "<synthetic>":
        share["model"] = model


def turn_usage(chain: Iterable[Mapping[str, Any]]) -> list[TurnUsage]:
    """Token use per turn of a conversation (a transcript's live chain, in order): each turn's
    prompt (a slash command as `/name args`) and the usage of the assistant messages that
    answered it, until the next prompt, with their models and cost (each message priced at its
    model's rates, its cache writes at the 5-minute or the hour's rate as its usage splits
    them). One message written as several lines is counted once; what comes before the first
    prompt is a turn of its own, prompt "" (none when it used no tokens)."""
    # Per turn: its prompt, each message's usage and each message's (model, cost).
    turns: list[tuple[str, dict[str, list[int]], dict[str, tuple[str | None, float | None]]]]
    turns = [("", {}, {})]
    for entry in chain:
        kind = entry.get("type")
        if kind == "user":
            what, text = classify_user_entry(entry)
            if what in ("prompt", "command"):
                turns.append((text, {}, {}))
        elif kind == "assistant":
            share: dict[str, Any] = {}
            _usage(share, entry, entry.get("uuid") if isinstance(entry.get("uuid"), str) else None)
            if "usage" in share:
                key, values = share["usage"]
                turns[-1][1][key] = values
                model = share.get("model")
                turns[-1][2][key] = (model, _message_cost(entry, model, values))
    if not turns[0][1]:
        turns.pop(0)
    return [TurnUsage(prompt, _tokens(usage), *_priced(usage, priced))
            for prompt, usage, priced in turns]


def _message_cost(entry: Mapping[str, Any], model: str | None, values: list[int]
                  ) -> float | None:
    """What one assistant message cost (`values` as `_usage` reads them), None when its model
    or its rate is not in the table (adapters/prices.py)."""
    from coding_os.adapters.prices import cost

    if not any(values[:4]):
        return 0.0
    message = entry.get("message")
    usage = message.get("usage") if isinstance(message, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    speed = usage.get("speed")
    if isinstance(speed, str) and speed != "standard":
        return None  # fast mode: billed at rates the table does not hold
    creation = usage.get("cache_creation")
    long = creation.get("ephemeral_1h_input_tokens") if isinstance(creation, dict) else 0
    long = min(long, values[1]) if isinstance(long, int) and not isinstance(long, bool) \
        and long > 0 else 0
    return cost(model, values[0], values[3], values[2], values[1] - long, long)


def _priced(usage: Mapping[str, list[int]],
            priced: Mapping[str, tuple[str | None, float | None]]
            ) -> tuple[tuple[str, ...], float | None]:
    """The models of a turn's messages that used tokens, in order, and the turn's cost (None
    when one of them has none)."""
    models: dict[str, None] = {}
    total: float | None = 0.0
    for key, (model, spent) in priced.items():
        if not any(usage[key][:4]):
            continue
        if model:
            models.setdefault(model, None)
        total = None if total is None or spent is None else total + spent
    return tuple(models), total


# -- the directory ------------------------------------------------------------------------------


def scan_claude(
    claude_dir: str | os.PathLike[str] | None = None, state: ImportState | None = None,
    changed_only: bool = False, also: Callable[[str], bool] | None = None,
) -> tuple[list[NativeSession], ImportState]:
    """Import every Claude Code session under `claude_dir/projects`, reading only what changed.

    `claude_dir` defaults to `CLAUDE_CONFIG_DIR`, else `~/.claude`. Returns the sessions (newest
    activity first; subagents attached to their parents) and the new state, whose `report`
    tells what was read, what could not be, and the subagents whose parent was not found.
    Records of other agents and other directories in `state` are kept as they are.

    With `changed_only`, only the sessions that changed since `state` are assembled and
    returned: those whose file or a subagent's was read anew or is gone, and those linked to
    them as copies (a fork, an older resume), or as a summary to the session it continues, and
    those whose file `also` accepts; the others' aggregates are not read back. The report counts
    every session either way.

    Raises:
        AggregateLost: a kept aggregate that is needed cannot be read back.
    """
    base = os.path.abspath(os.fspath(claude_dir)) if claude_dir is not None else default_claude_dir()
    projects = os.path.join(base, "projects")
    previous = state if state is not None else ImportState()
    report = ScanReport(agent=AGENT, root=projects)
    inside = projects + os.sep
    files: dict[str, FileRecord] = {}
    before: dict[str, FileRecord] = {}
    for path, kept in previous.files.items():
        mine = kept.agent == AGENT and path.startswith(inside)
        (before if mine else files)[path] = kept
    current: dict[str, FileRecord] = {}
    for path, kind in _discover(projects, report):
        record = _refresh(path, kind, before.get(path), report)
        if record is not None:
            current[path] = record
    files.update(current)
    changed = {path for path, record in current.items() if before.get(path) is not record}
    changed.update(path for path in before if path not in current)
    links = dict(previous.links)
    key = f"{AGENT} {projects}"
    linked = links.get(key)
    kept_holders = linked.get("holders") if isinstance(linked, dict) else None
    sessions, holders = _assemble(current, report, before, changed if changed_only else None,
                                  kept_holders if isinstance(kept_holders, dict) else {}, also)
    links[key] = {"holders": holders}
    return sessions, ImportState(files=files, links=links, report=report)


def _discover(projects: str, report: ScanReport) -> Iterator[tuple[str, str]]:
    """Every transcript file under `projects`, with its kind: session, sibling, nested, meta."""
    for key, key_is_dir in list_dir(projects):
        if not key_is_dir:
            continue
        folder = os.path.join(projects, key)
        for name, is_dir in list_dir(folder):
            path = os.path.join(folder, name)
            if name.endswith(".jsonl"):
                if is_dir:
                    report.unreadable.append((path, "is a directory"))
                else:
                    yield path, ("sibling" if name.startswith("agent-") else "session")
            elif is_dir:
                subagents = os.path.join(path, "subagents")
                for sub_name, sub_is_dir in list_dir(subagents):
                    sub_path = os.path.join(subagents, sub_name)
                    if not sub_name.startswith("agent-"):
                        continue
                    if sub_name.endswith(".jsonl"):
                        if sub_is_dir:
                            report.unreadable.append((sub_path, "is a directory"))
                        else:
                            yield sub_path, "nested"
                    elif sub_name.endswith(_META_SUFFIX) and not sub_is_dir:
                        yield sub_path, "meta"


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
    if kind == "meta":
        return _refresh_meta(path, st, previous, report)
    split = kind == "session"
    return refresh_file(
        path, st, previous, AGENT, kind, lambda data: ClaudeTranscript(data, split), report
    )


def _refresh_meta(
    path: str, st: os.stat_result, previous: FileRecord | None, report: ScanReport
) -> FileRecord | None:
    """A subagent's `.meta.json` (one small JSON object), re-read only when it changed."""
    report.files_seen += 1
    if previous is not None and previous.kind == "meta" and previous.unchanged(st):
        report.files_unchanged += 1
        return previous
    try:
        with open(path, "rb") as handle:
            report.files_opened += 1
            raw = handle.read(_META_MAX_BYTES)
    except OSError as exc:
        report.unreadable.append((path, exc.strerror or type(exc).__name__))
        return previous
    report.bytes_read += len(raw)
    try:
        meta = jsonwire.loads(raw)
    except ValueError:
        meta = None
    aggregate: dict[str, Any] = {}
    if isinstance(meta, dict):
        for key in ("agentType", "description"):
            if isinstance(meta.get(key), str):
                aggregate[key] = meta[key]
    return FileRecord(path, AGENT, "meta", st.st_size, st.st_mtime_ns, st.st_ino, st.st_size,
                      "", aggregate)


# -- assembling sessions ------------------------------------------------------------------------


def _tokens(usage: Mapping[str, list[int]], skip: Mapping[str, Any] | None = None) -> TokenTotals:
    fresh, cache_write, cache_read, output, thinking = 0, 0, 0, 0, 0
    for key, values in usage.items():
        if skip is not None and key in skip:
            continue
        fresh += values[0]
        cache_write += values[1]
        cache_read += values[2]
        output += values[3]
        thinking += values[4]
    return TokenTotals(
        input=fresh + cache_write + cache_read,
        cached=cache_read,
        cache_write=cache_write,
        output=output,
        reasoning=thinking,
    )


def _prompts(part: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """First and last prompt; slash commands only when the person typed nothing else."""
    if part["prompts"]:
        return part["first_prompt"], part["last_prompt"]
    return part["first_command"], part["last_command"]


@dataclass
class _Draft:
    """A session being assembled from its file's aggregate."""

    record: FileRecord
    native_id: str
    project: str
    continues: str | None = None
    forked_from: str | None = None
    copied_entries: int = 0
    continued_by: list[str] = field(default_factory=list)
    created: str | None = None
    token_skip: Mapping[str, Any] | None = None
    subagents: list[NativeSubagent] = field(default_factory=list)
    subagent_paths: list[str] = field(default_factory=list)

    _history: dict[str, str | None] | None = field(default=None, repr=False, compare=False)
    _uuids: frozenset[str] | None = field(default=None, repr=False, compare=False)
    _entries: frozenset[str] | None = field(default=None, repr=False, compare=False)

    @property
    def data(self) -> Mapping[str, Any]:
        return self.record.aggregate

    @property
    def first_uuid(self) -> str:
        first: str = self.record.head["first_uuid"]
        return first

    @property
    def history(self) -> dict[str, str | None]:
        """The main conversation's uuids, in file order, with their timestamps."""
        if self._history is None:
            self._history = {uuid: ts for uuid, ts in self.record.aggregate["history"]}
        return self._history

    @property
    def uuids(self) -> frozenset[str]:
        """The main conversation's uuids, as a set."""
        if self._uuids is None:
            self._uuids = frozenset(self.history)
        return self._uuids

    @property
    def entries(self) -> frozenset[str]:
        """The uuids of every entry of the tree (attachments too: a logical parent may be one)."""
        if self._entries is None:
            self._entries = frozenset(n["u"] for n in self.record.aggregate["nodes"])
        return self._entries

    def first_own_time(self, other: _Draft) -> str:
        """The earliest timestamp of the entries `other` does not hold ("" when none has one)."""
        history = self.history
        return min((history[u] or "" for u in self.uuids - other.uuids), default="")


def _drafts(ordered: list[FileRecord]) -> tuple[list[_Draft], dict[str, _Draft | None]]:
    """The sessions among `ordered` (sorted by path), and the session each subagent file
    (`sibling`, `nested`) belongs to (None: not found), from the records' heads alone."""
    drafts = [_Draft(record, os.path.basename(record.path)[: -len(".jsonl")],
                     os.path.basename(os.path.dirname(record.path)))
              for record in ordered
              if record.kind == "session" and record.head["first_uuid"] is not None]
    by_key = {(d.project, d.native_id): d for d in drafts}
    by_id: dict[str, _Draft] = {}
    for draft in drafts:
        by_id.setdefault(draft.native_id, draft)
    owners: dict[str, _Draft | None] = {}
    for record in ordered:
        if record.kind not in ("sibling", "nested"):
            continue
        parent, project = _parent_of(record)
        owners[record.path] = by_key.get((project, parent or "")) or by_id.get(parent or "")
    return drafts, owners


def _parent_of(record: FileRecord) -> tuple[str | None, str]:
    """The session a subagent file names as its parent, and the project folder it is in."""
    if record.kind == "nested":
        session_dir = os.path.dirname(os.path.dirname(record.path))
        return os.path.basename(session_dir), os.path.basename(os.path.dirname(session_dir))
    owner: str | None = record.head["owner"]
    return owner, os.path.basename(os.path.dirname(record.path))


def _meta_path(path: str) -> str:
    """The `.meta.json` beside a subagent transcript."""
    return path[: -len(".jsonl")] + _META_SUFFIX


def _assemble(records: Mapping[str, FileRecord], report: ScanReport,
              before: Mapping[str, FileRecord], changed: set[str] | None,
              kept_holders: Mapping[str, Any], also: Callable[[str], bool] | None = None,
              ) -> tuple[list[NativeSession], dict[str, list[str]]]:
    """The sessions of `records` (all, or with `changed` those it touches and those whose file
    `also` accepts: see `scan_claude`),
    the report's counts filled in, and the transcripts holding each logical parent of a compact
    summary (`_holders`); `before` are the previous state's records of the same files.

    Raises:
        AggregateLost: a kept aggregate that is needed cannot be read back.
    """
    # Sorted by path, so the outcome never depends on the order files were discovered in.
    ordered = [records[path] for path in sorted(records)]
    summaries = _summaries(ordered)
    for record in ordered:
        if record.torn_tail:
            report.torn_files.append(record.path)
        if record.kind == "meta":
            continue
        report.malformed_lines += sum(record.head["malformed"].values())
        if record.kind == "session" and record.head["first_uuid"] is None:
            report.empty_files.append(record.path)
    drafts, owners = _drafts(ordered)
    # Nothing read anew and nothing gone: the same records, the same sessions.
    old_drafts, old_owners = (drafts, owners) if changed is not None and not changed else \
        _drafts([before[path] for path in sorted(before)])
    report.vanished.extend(sorted({d.native_id for d in old_drafts}
                                  - {d.native_id for d in drafts}))
    report.sessions = len(drafts)
    report.session_paths.extend(draft.record.path for draft in drafts)
    report.orphans = sum(1 for owner in owners.values() if owner is None)
    report.subagents = (sum(d.record.head["chains"] for d in drafts)
                        + len(owners) - report.orphans)
    holders = _holders(drafts, changed, kept_holders)
    if changed is None:
        wanted = list(drafts)
    else:
        wanted = _touched(drafts, owners, old_owners, changed, kept_holders, holders,
                          bool(changed) and summaries != _summaries(
                              [before[path] for path in sorted(before)]))
        # Those a changed transcript was linked to as a copy before: the link may be gone.
        linked_before = {d.record.path for d in _linked(
            old_drafts, [d for d in old_drafts if d.record.path in changed])} if changed else set()
        chosen = {id(draft) for draft in wanted}
        wanted = [d for d in drafts if id(d) in chosen or d.record.path in linked_before
                  or (also is not None and also(d.record.path))]
        # A copy's row is read from its original's aggregate, and an original's copies change
        # with it: every session linked to a chosen one is assembled again.
        wanted = _linked(drafts, wanted)
    _link_copies(_linked(drafts, wanted))
    _link_summaries(drafts, wanted, holders)
    chosen = {id(draft) for draft in wanted}
    for draft in wanted:
        _inline_subagents(draft)
    metas = {record.path[: -len(_META_SUFFIX)]: record.head
             for record in ordered if record.kind == "meta"}
    for path, owner in owners.items():
        if owner is not None and id(owner) not in chosen:
            continue
        if owner is None and changed is not None and path not in changed \
                and _meta_path(path) not in changed:
            continue
        record = records[path]
        parent, _project = _parent_of(record)
        name = os.path.basename(path)[: -len(".jsonl")]
        subagent = _subagent(record, record.aggregate["main"], name[len("agent-"):], parent,
                             record.kind, metas.get(path[: -len(".jsonl")]))
        if owner is None:
            report.orphan_subagents.append(subagent)
        else:
            owner.subagents.append(subagent)
            owner.subagent_paths.append(path)
    sessions = [_session(draft, summaries) for draft in wanted]
    sessions.sort(key=lambda s: (s.last_active or "", s.native_id), reverse=True)
    return sessions, holders


def _summaries(ordered: list[FileRecord]) -> dict[str, str]:
    """The `summary` entries of the session files among `ordered` (sorted by path), by leaf: a
    later file's wins."""
    summaries: dict[str, str] = {}
    for record in ordered:
        if record.kind == "session":
            summaries.update(record.head["summaries"])
    return summaries


def _touched(drafts: list[_Draft], owners: Mapping[str, _Draft | None],
             old_owners: Mapping[str, _Draft | None], changed: set[str],
             kept_holders: Mapping[str, Any], holders: Mapping[str, list[str]],
             retitled: bool) -> list[_Draft]:
    """The sessions whose rows `changed` (files read anew or gone) may change, in order: those
    whose own file or a subagent's (now or before) is in it, the compact summaries whose
    source may be another session now, and, when the `summary` entries changed (`retitled`),
    those a summary may title. `_linked` adds the sessions linked to them as copies."""
    paths: set[str] = set()
    for owner_of in (owners, old_owners):
        for path, owner in owner_of.items():
            if owner is not None and (path in changed or _meta_path(path) in changed):
                paths.add(owner.record.path)
    touched = [d for d in drafts if d.record.path in changed or d.record.path in paths
               or (retitled and not d.record.head["titled"])]
    if not changed:
        return touched
    for draft in drafts:
        head = draft.record.head
        if not head["compact_start"]:
            continue
        logical = head["logical"]
        if logical is None:
            touched.append(draft)  # linked by the entries it shares with every transcript
            continue
        old = [p for p in kept_holders.get(logical) or () if p != draft.record.path][:1]
        new = [p for p in holders.get(logical, ()) if p != draft.record.path][:1]
        if old != new:
            touched.append(draft)
    chosen = {id(draft) for draft in touched}
    return [d for d in drafts if id(d) in chosen]


def _linked(drafts: list[_Draft], wanted: list[_Draft]) -> list[_Draft]:
    """`wanted` with every session linked to one of them as a copy, transitively (the first
    entry of one among the roots of the other), in order: the sessions `_link_copies` reads."""
    if len(wanted) == len(drafts):
        return drafts
    by_root: dict[str, list[_Draft]] = {}
    by_first: dict[str, list[_Draft]] = {}
    for draft in drafts:
        for uuid in draft.record.head["roots"]:
            by_root.setdefault(uuid, []).append(draft)
        by_first.setdefault(draft.first_uuid, []).append(draft)
    found = {id(d) for d in wanted}
    pending = list(wanted)
    while pending:
        draft = pending.pop()
        near = list(by_root.get(draft.first_uuid, []))
        for uuid in draft.record.head["roots"]:
            near.extend(by_first.get(uuid, []))
        for other in near:
            if id(other) not in found:
                found.add(id(other))
                pending.append(other)
    return [d for d in drafts if id(d) in found]


def _holders(drafts: list[_Draft], changed: set[str] | None,
             kept: Mapping[str, Any]) -> dict[str, list[str]]:
    """For each logical parent a compact summary at a transcript's start names, the
    transcripts holding that entry, by path in order: `kept` (the previous scan's) brought up
    to date with the transcripts in `changed`; every transcript is read for one not kept."""
    wanted = sorted({d.record.head["logical"] for d in drafts
                     if d.record.head["compact_start"] and d.record.head["logical"]})
    paths = {d.record.path for d in drafts}
    holders: dict[str, list[str]] = {}
    for logical in wanted:
        known = kept.get(logical) if changed is not None else None
        if isinstance(known, list) and changed is not None:
            held = {p for p in known if isinstance(p, str) and p in paths and p not in changed}
            held.update(d.record.path for d in drafts
                        if d.record.path in changed and logical in d.entries)
        else:
            held = {d.record.path for d in drafts if logical in d.entries}
        holders[logical] = sorted(held)
    return holders


def _link_copies(drafts: list[_Draft]) -> None:
    """Link each transcript that copies another's history (a fork, an older resume) to it."""
    by_root: dict[str, list[_Draft]] = {}
    for draft in drafts:
        for uuid in draft.record.head["roots"]:
            by_root.setdefault(uuid, []).append(draft)
    # A copy starts at a root of the transcript it copies (its first entry, or a compaction's).
    candidates: dict[str, list[tuple[int, _Draft]]] = {}
    seen: set[tuple[str, str]] = set()
    for draft in drafts:
        for other in by_root.get(draft.first_uuid, []):
            pair = min(draft.record.path, other.record.path), max(draft.record.path,
                                                                   other.record.path)
            if other is draft or pair in seen:
                continue
            seen.add(pair)
            original, copy, shared = _direction(draft, other)
            if shared:
                candidates.setdefault(copy.record.path, []).append((shared, original))
    for copy in drafts:
        found = candidates.get(copy.record.path)
        if not found:
            continue
        # Most history shared first; then an original that is not itself a copy.
        found.sort(key=lambda c: (-c[0], c[1].record.path in candidates,
                                  c[1].data["first_ts"] or "", c[1].native_id))
        shared, original = found[0]
        copy.continues = original.native_id
        copy.copied_entries = shared
        copy.token_skip = original.data["main"]["usage"]
        copy.created = copy.first_own_time(original) or None
        original.continued_by.append(copy.native_id)


def _link_summaries(drafts: list[_Draft], wanted: list[_Draft],
                    holders: Mapping[str, list[str]]) -> None:
    """Link each of `wanted` that starts with a compact boundary continuing another transcript
    (a summary cos wrote: adapters/claude/compact.py) to the session it summarises:
    `forked_from` names the first session holding the boundary's `logicalParentUuid`
    (`holders`), or, when the boundary names none (the summary keeps the conversation's start),
    the one sharing most of its entries. A copy already linked (`continues`) is left as it is."""
    by_path = {d.record.path: d for d in drafts}
    for draft in wanted:
        head = draft.record.head
        if draft.continues is not None or not head["compact_start"]:
            continue
        logical = head["logical"]
        if logical is not None:
            holder = next((p for p in holders.get(logical, ()) if p != draft.record.path), None)
            if holder is not None:
                draft.forked_from = by_path[holder].native_id
            continue
        best: tuple[int, str] | None = None
        for other in drafts:
            if other is draft:
                continue
            shared = len(draft.entries & other.entries)
            if shared and (best is None or shared > best[0]):
                best = (shared, other.native_id)
        if best is not None:
            draft.forked_from = best[1]


def _direction(a: _Draft, b: _Draft) -> tuple[_Draft, _Draft, int]:
    """Which of two transcripts sharing history is the original; and how many entries they share.

    The copy holds the original's entries and then its own. A transcript with no entries of its
    own is the original; otherwise the one whose own entries start first is.
    """
    shared = len(a.uuids & b.uuids)
    a_has_own, b_has_own = not a.uuids <= b.uuids, not b.uuids <= a.uuids
    if b_has_own and not a_has_own:
        return a, b, shared
    if a_has_own and not b_has_own:
        return b, a, shared
    if a_has_own and b_has_own:
        time_a, time_b = a.first_own_time(b), b.first_own_time(a)
        if time_a and time_b and time_a != time_b:
            return (a, b, shared) if time_a < time_b else (b, a, shared)
    key_a = (a.data["first_line_ts"] or "", a.native_id)
    key_b = (b.data["first_line_ts"] or "", b.native_id)
    return (a, b, shared) if key_a <= key_b else (b, a, shared)


def _subagent(record: FileRecord, part: Mapping[str, Any], agent_id: str, parent: str | None,
              layout: str, meta: Mapping[str, Any] | None) -> NativeSubagent:
    first, _last = _prompts(part)
    return NativeSubagent(
        agent=AGENT,
        agent_id=agent_id,
        parent=parent,
        layout=layout,
        path=record.path,
        agent_type=(meta or {}).get("agentType"),
        description=(meta or {}).get("description"),
        first_prompt=first,
        entries=part["entries"],
        user_messages=part["prompts"] + part["commands"],
        assistant_messages=len(part["usage"]),
        tokens=_tokens(part["usage"]),
        created=part["first_ts"],
        last_active=part["last_ts"],
    )


def _majority(counts: Mapping[str, int]) -> str | None:
    if not counts:
        return None
    return min(counts, key=lambda key: (-counts[key], key))


def _inline_subagents(draft: _Draft) -> None:
    """The subagent chains written inside a session's own file (Claude Code 1.0.x)."""
    chains = draft.data["chains"]
    for root in sorted(chains, key=lambda r: (chains[r]["first_ts"] or "", r)):
        part = chains[root]
        draft.subagents.append(
            _subagent(draft.record, part, part["agent_id"] or root, draft.native_id,
                      "inline", None)
        )


def _title(draft: _Draft, summaries: Mapping[str, str]) -> tuple[str | None, str | None]:
    data = draft.data
    if data["custom_title"]:
        return data["custom_title"], "custom-title"
    if data["ai_title"]:
        return data["ai_title"], "ai-title"
    if summaries:
        # Claude Code 1.0 titled a session by the summary whose leaf is its latest entry.
        for uuid, _ts in reversed(data["history"]):
            if uuid in summaries:
                return summaries[uuid], "summary"
    return None, None


def _session(draft: _Draft, summaries: Mapping[str, str]) -> NativeSession:
    data = draft.data
    main = data["main"]
    first, last = _prompts(main)
    title, title_source = _title(draft, summaries)
    return NativeSession(
        agent=AGENT,
        native_id=draft.native_id,
        path=draft.record.path,
        paths=(draft.record.path, *sorted(draft.subagent_paths)),
        cwd=data["cwd"],
        project=draft.project,
        git_branch=data["branch"],
        cli_version=data["version"],
        cli_versions=tuple(data["versions"]),
        model=main["model"],
        title=title,
        title_source=title_source,
        first_prompt=first,
        last_prompt=last,
        user_messages=main["prompts"] + main["commands"],
        assistant_messages=len(main["usage"]),
        tokens=_tokens(main["usage"], draft.token_skip),
        created=draft.created or data["first_ts"],
        last_active=data["last_ts"],
        forked_from=draft.forked_from,
        continues=draft.continues,
        continued_by=tuple(sorted(draft.continued_by)),
        copied_entries=draft.copied_entries,
        compactions=data["compactions"],
        subagents=tuple(sorted(draft.subagents, key=lambda s: (s.created or "", s.agent_id))),
        pr_links=tuple(data["pr_links"]),
        entry_counts=dict(sorted(data["types"].items())),
        unknown_types=dict(sorted(data["unknown"].items())),
        malformed_lines=sum(data["malformed"].values()),
        torn_tail=draft.record.torn_tail,
        branches=int(data.get("branches") or 0),
        tree_warnings=tuple(data.get("tree_warnings") or ()),
    )


# A subagent transcript's file name as Claude Code makes it (`agent-<id>.jsonl`).
_SUBAGENT_FILE = re.compile(r"agent-[A-Za-z0-9_-]{1,128}\.jsonl")


def is_subagent_name(native: str, relative: str) -> bool:
    """Whether `relative` names a subagent transcript of session `native` as Claude Code lays
    it out beside the session's file: `<native>/subagents/agent-<x>.jsonl` (2.1.x) or
    `agent-<x>.jsonl` (2.0.x)."""
    prefix = f"{native}/subagents/"
    name = relative[len(prefix):] if relative.startswith(prefix) else relative
    return _SUBAGENT_FILE.fullmatch(name) is not None


def subagent_files(path: str, siblings: dict[str, dict[str, list[str]]] | None = None
                   ) -> list[tuple[str, str]]:
    """The subagent transcripts of the Claude Code session whose file is `path`, as (name
    relative to its folder, path), sorted: `<session>/subagents/agent-<id>.jsonl` (2.1.x), then
    each `agent-<id>.jsonl` beside it whose first line names the session (2.0.x). `siblings`
    keeps, per folder, which session each `agent-*.jsonl` there names, for the folder's other
    sessions."""
    folder, name = os.path.split(os.path.abspath(path))
    native = name[:-len(".jsonl")] if name.endswith(".jsonl") else name
    nested = os.path.join(folder, native, "subagents")
    try:
        names = sorted(os.listdir(nested))
    except OSError:
        names = []
    found = [(f"{native}/subagents/{n}", os.path.join(nested, n)) for n in names
             if _SUBAGENT_FILE.fullmatch(n) and os.path.isfile(os.path.join(nested, n))]
    known = siblings.get(folder) if siblings is not None else None
    if known is None:
        known = {}
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            names = []
        for n in names:
            if _SUBAGENT_FILE.fullmatch(n):
                owner = first_session_id(os.path.join(folder, n))
                if owner is not None:
                    known.setdefault(owner, []).append(n)
        if siblings is not None:
            siblings[folder] = known
    return found + [(n, os.path.join(folder, n)) for n in known.get(native, [])]
