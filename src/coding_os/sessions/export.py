"""Export of a session's conversation as Markdown, JSON or HTML (DESIGN.md §4.5).

Reads the session where it lives — a cos-native transcript (its visible conversation: rewound
entries hidden), a Claude Code transcript (the chain ending at its live leaf, or one of the
branches beside it: adapters/claude/tree.py), a Codex thread (its live history, across the
rollouts a fork or a revert continues: adapters/codex/rollouts.py), or a Gemini CLI session (its
records replayed: adapters/gemini/sessions.py) — into one list of turns, then
renders it. Native logs are only read, never changed. Sidechain (subagent) entries inline in a
Claude transcript are left out, as they are from the session list. Secrets of known shapes in the
conversation are redacted (redact.py), unless the project says `redact: false`. `read_page` gives
one page of the same conversation, reading a cos transcript only as far as the page.

A session of another host whose file is not on this one (DESIGN.md §8) is read from its replica
in the shared storage (`ReplicaLog`, which coding_os.api reads), as its host wrote it: its paths
are that host's, as its index row's are. The readers read it through a private temporary copy
(`log_path`), removed once read, as they read the file on that host; nothing of the session
is written here.
"""

from __future__ import annotations

import copy
import html
import itertools
import json
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from coding_os import jsonwire
from coding_os.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from coding_os.adapters.claude.tree import Tree

__all__ = ["Turn", "Page", "ReplicaLog", "FORMATS", "KINDS", "STYLESHEET", "branches",
           "claude_entry_turns", "codex_item_turns", "log_path", "read_page", "read_turns",
           "render", "stylesheet"]

FORMATS = ("md", "json", "html")
KINDS = ("cos", "claude", "codex", "gemini")
TOOL_TEXT_MAX = 4000


@dataclass
class Turn:
    """One step of a conversation: a prompt, an answer, a tool call or a tool's result.

    `summary`, for a tool call, is the one line that says what it did (its command, its path:
    adapters/tool_calls.py); for a tool's result, the first line of its output. The JSON and
    Markdown exports leave it out (they give the whole text).
    """

    role: str  # user | assistant | tool_call | tool_result | note
    text: str
    ts: str | None = None
    tool: str | None = None
    summary: str | None = None


def _call(tool: object, tool_input: object, ts: str | None) -> Turn:
    """The turn of a tool call, with its summary line read from its whole input."""
    from coding_os.adapters.tool_calls import summarize

    name = str(tool)
    return Turn("tool_call", _short(tool_input), ts, name, summarize(name, tool_input))


def _result(output: object, ts: str | None) -> Turn:
    """The turn of a tool's result, with the first line of its output as its summary."""
    from coding_os.adapters.tool_calls import first_line

    text = _short(output or "")
    return Turn("tool_result", text, ts, None, first_line(text))


def _lines(path: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL file; lines that are not JSON objects (or nest deeper than
    jsonwire.MAX_DEPTH) are skipped, as the importer skips them."""
    try:
        f = open(path, encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise NotFound(f"no session log at {path}") from None
    with f:
        yield from jsonwire.objects(f)


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _short(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) <= TOOL_TEXT_MAX:
        return text
    head = text[: TOOL_TEXT_MAX - 1]
    # Never end in part of a word: a secret the cut halved would escape its redaction.
    whole = head.rstrip(_WORD_CHARACTERS)
    return (whole if len(head) - len(whole) <= 256 else head) + "…"


_WORD_CHARACTERS = ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                    "_-+/=.~:@%")


_COS_NOTES = ("compact", "summary")


def _cos_turn(entry: Mapping[str, Any]) -> Turn | None:
    """The turn of one cos transcript entry (None for an entry that is not part of the
    conversation: the session_meta, a title, a checkpoint…)."""
    kind = entry.get("type")
    ts = entry.get("ts")
    if kind in ("user", "assistant"):
        return Turn(str(kind), str(entry.get("text") or ""), ts)
    if kind == "tool_call":
        return _call(entry.get("tool"), entry.get("input"), ts)
    if kind == "tool_result":
        return _result(entry.get("output"), ts)
    if kind in _COS_NOTES:
        return Turn("note", f"[{kind}] {entry.get('text') or ''}", ts)
    return None


_COS_TURN_TYPES = frozenset(("user", "assistant", "tool_call", "tool_result") + _COS_NOTES)


def _cos_turns(path: str) -> tuple[dict[str, Any], list[Turn]]:
    from coding_os.sessions import transcript

    read = transcript.read(path)
    meta = dict(read.meta or {})
    turns = [turn for turn in map(_cos_turn, read.visible()) if turn is not None]
    return meta, turns


_COS_MARKS_KEPT = 8
_COS_MARKS_PER_FILE = 4096  # pages of a file: a mark is some 100 bytes
# path -> (its session_meta, {a number of turns: where a read continues after that many turns,
# a transcript.Resume})
_cos_marks: dict[str, tuple[dict[str, Any], dict[int, Any]]] = {}


def _cos_page(path: str, offset: int, limit: int
              ) -> tuple[dict[str, Any], list[Turn], int | None]:
    """The session_meta, the turns `offset` to `offset + limit` of a cos transcript's visible
    conversation, and the number of its turns — None when the read stopped early: it reads
    entries only until one turn past the page is found (transcript.iter_visible). Where the
    read stopped is remembered in this process (_COS_MARKS_PER_FILE places a file, for the last
    _COS_MARKS_KEPT files), so the next page continues from there, not from the file's start.
    """
    from coding_os.sessions import transcript

    meta, marks = _cos_marks.get(path, ({}, {}))
    start = max((n for n in marks if n <= offset), default=0)
    report = transcript.ReadReport(path)
    page: list[Turn] = []
    with closing(transcript.iter_visible(path, report, marks.get(start))) as entries:
        first = next(entries, None)
        if report.resumed:
            count, before = start, marks[start]
        else:
            count, before, marks = 0, None, {}
            meta = dict(first) if first is not None and first["type"] == "session_meta" else {}
        for entry in itertools.chain(() if first is None else (first,), entries):
            # `before`: where a read continues to take this entry next (None: not known);
            # `after`: to take the entry that follows it.
            after = report.resume
            if entry.get("type") in _COS_TURN_TYPES:
                if count == offset + limit:  # one turn past the page: there is more
                    if before is not None and len(marks) < _COS_MARKS_PER_FILE:
                        marks[count] = before
                        if len(_cos_marks) >= _COS_MARKS_KEPT and path not in _cos_marks:
                            # The oldest; cos web's threads may race for it.
                            _cos_marks.pop(next(iter(list(_cos_marks))), None)
                        _cos_marks[path] = (meta, marks)
                    return dict(meta), page, None
                if count >= offset:
                    turn = _cos_turn(entry)
                    assert turn is not None
                    page.append(turn)
                count += 1
            before = after
    return dict(meta), page, count


def _claude_tree(path: str) -> tuple[dict[str, Any], list[Mapping[str, Any]], Tree]:
    """A Claude transcript's title and warnings, its entries (sidechains left out) and their
    tree."""
    from coding_os.adapters.claude.tree import read_tree

    meta: dict[str, Any] = {}
    entries: list[Mapping[str, Any]] = []
    for entry in _lines(path):
        if entry.get("type") == "custom-title" and isinstance(entry.get("customTitle"), str):
            meta["title"] = entry["customTitle"]
        if entry.get("isSidechain") is not True:
            entries.append(entry)
    tree = read_tree(entries)
    if tree.warnings:
        meta["warnings"] = list(tree.warnings)
    return meta, entries, tree


def _claude_chain(path: str, branch: int | None,
                  parsed: tuple[dict[str, Any], list[Mapping[str, Any]], Tree] | None = None
                  ) -> tuple[dict[str, Any], list[Mapping[str, Any]]]:
    """The title, warnings and chosen branch of a Claude transcript (`parsed`: its
    `_claude_tree`, when read already), and the chain to export: the live chain, or branch
    number `branch`.

    Raises:
        InvalidInput: there is no branch of that number.
    """
    known, entries, tree = parsed or _claude_tree(path)
    meta = dict(known)
    if branch is None:
        # Messages without uuids (hand-written, or older than uuids) are read as a line.
        return meta, tree.live if tree.leaf is not None else entries
    found = tree.branches()
    if not 1 <= branch <= len(found):
        raise InvalidInput(f"--branch {branch}: the session has "
                           + (f"branches 1 to {len(found)}" if found else "no other branch")
                           + " (cos sessions show ID lists them)")
    meta["branch"] = found[branch - 1].to_dict()
    return meta, tree.chain(found[branch - 1].tip)[0]


def claude_entry_turns(entry: Mapping[str, Any]) -> list[Turn]:
    """The turns of one Claude Code transcript entry: its text, tool calls and tool results
    (none for an entry that is not a user or assistant message)."""
    if entry.get("type") not in ("user", "assistant"):
        return []
    ts = entry.get("timestamp") if isinstance(entry.get("timestamp"), str) else None
    content = _mapping(entry.get("message")).get("content")
    role = str(entry["type"])
    if isinstance(content, str):
        return [Turn(role, content, ts)]
    turns: list[Turn] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            turns.append(Turn(role, block["text"], ts))
        elif kind == "tool_use":
            turns.append(_call(block.get("name"), block.get("input"), ts))
        elif kind == "tool_result":
            result = block.get("content")
            if isinstance(result, list):
                result = "\n".join(str(part.get("text", "")) for part in result
                                   if isinstance(part, dict))
            turns.append(_result(result, ts))
    return turns


def _claude_turns(path: str, branch: int | None = None,
                  parsed: tuple[dict[str, Any], list[Mapping[str, Any]], Tree] | None = None
                  ) -> tuple[dict[str, Any], list[Turn]]:
    meta, chain = _claude_chain(path, branch, parsed)
    turns: list[Turn] = []
    for entry in chain:
        if entry.get("type") in ("user", "assistant"):
            meta.setdefault("native_id", entry.get("sessionId"))
            meta.setdefault("cwd", entry.get("cwd"))
        turns += claude_entry_turns(entry)
    return meta, turns


def _claude_shape(tree: Tree) -> dict[str, Any]:
    return {"live_leaf": tree.leaf, "live_entries": len(tree.live),
            "branches": [b.to_dict() for b in tree.branches()], "warnings": list(tree.warnings)}


_CLAUDE_VIEWS_KEPT = 2
# path -> ((st_dev, st_ino, st_size, st_mtime_ns), views): a view is ("turns", branch) -> the
# (meta, turns) of `_claude_turns`, or "shape" -> `_claude_shape`.
_claude_views: dict[str, tuple[tuple[int, int, int, int], dict[object, Any]]] = {}


def _claude_view(path: str, key: tuple[str, int | None] | str) -> Any:
    """A view of a Claude transcript (see `_claude_views`), remembered in this process while
    the file stays as it was: the pages of a session after its first, and its branches, do
    not read it again. A read computes the live chain's turns and the shape together.

    Raises:
        InvalidInput: a branch the transcript does not have.
        NotFound: there is no file at `path`.
    """
    signature: tuple[int, int, int, int] | None
    try:
        info = os.stat(path)
        signature = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    except OSError:
        signature = None  # read below: NotFound, or the reader's error
    known = _claude_views.get(path)
    if known is not None and known[0] == signature and key in known[1]:
        return known[1][key]
    parsed = _claude_tree(path)  # NotFound when the file is gone
    views: dict[object, Any] = known[1] if known is not None and known[0] == signature else {}
    views[("turns", None)] = _claude_turns(path, None, parsed)
    views["shape"] = _claude_shape(parsed[2])
    if signature is not None:
        if len(_claude_views) >= _CLAUDE_VIEWS_KEPT and path not in _claude_views:
            # The oldest; cos web's threads may race for it.
            _claude_views.pop(next(iter(list(_claude_views))), None)
        _claude_views[path] = (signature, views)
    if key not in views:
        assert isinstance(key, tuple)  # ("turns", branch)
        views[key] = _claude_turns(path, key[1], parsed)
    return views[key]


def _codex_history(path: str) -> Any:
    """The thread's history (adapters/codex/rollouts.py: its live history across the rollouts
    a fork or a revert continues, and the turns a revert dropped)."""
    from coding_os.adapters.codex.rollouts import read_history

    try:
        return read_history(path)
    except FileNotFoundError:
        raise NotFound(f"no session log at {path}") from None
    except OSError as exc:
        raise NotFound(f"cannot read the session log at {path}: "
                       f"{exc.strerror or type(exc).__name__}") from None


# A Codex user message that starts so is context Codex injected, not something typed.
_CODEX_CONTEXT_PREFIXES = ("<environment_context", "<user_instructions", "# AGENTS.md")


def codex_item_turns(line: Mapping[str, Any]) -> list[Turn]:
    """The turns of one line of a Codex rollout: a `response_item` message, tool call or tool
    output (none for other lines, or for the context Codex injects as a user message)."""
    payload = _mapping(line.get("payload"))
    if line.get("type") != "response_item":
        return []
    ts = line.get("timestamp") if isinstance(line.get("timestamp"), str) else None
    kind = payload.get("type")
    if kind == "message" and payload.get("role") in ("user", "assistant"):
        text = "\n".join(str(part.get("text", "")) for part in payload.get("content") or []
                         if isinstance(part, dict) and isinstance(part.get("text"), str))
        if text and not text.lstrip().startswith(_CODEX_CONTEXT_PREFIXES):
            return [Turn(str(payload["role"]), text, ts)]
    elif kind in ("function_call", "custom_tool_call"):
        arguments = payload.get("arguments", payload.get("input"))
        return [_call(payload.get("name"), arguments, ts)]
    elif kind in ("function_call_output", "custom_tool_call_output"):
        output = payload.get("output")
        if isinstance(output, dict):
            output = output.get("content", output)
        return [_result(output, ts)]
    return []


def _codex_turns(path: str) -> tuple[dict[str, Any], list[Turn]]:
    meta: dict[str, Any] = {}
    turns: list[Turn] = []
    history = _codex_history(path)
    if history.warnings:
        meta["warnings"] = list(history.warnings)
    for entry in history.live:
        if entry.get("type") == "session_meta":
            payload = _mapping(entry.get("payload"))
            meta.setdefault("native_id", payload.get("id"))
            meta.setdefault("cwd", payload.get("cwd"))
        turns += codex_item_turns(entry)
    return meta, turns


def _gemini_turns(path: str) -> tuple[dict[str, Any], list[Turn]]:
    """The live conversation of a Gemini CLI session file (adapters/gemini/sessions.py: its
    records replayed as Gemini replays them): typed prompts, answers, tool calls with their
    results, notices; the injected context, thoughts and `/commands` are left out."""
    from coding_os.adapters.gemini.sessions import read_conversation

    conversation = read_conversation(path)
    session = conversation.session
    meta: dict[str, Any] = {"native_id": session.native_id, "title": session.title}
    if session.warnings:
        meta["warnings"] = list(session.warnings)
    turns: list[Turn] = []
    for entry in conversation.entries:
        if entry.kind == "prompt" and entry.text:
            turns.append(Turn("user", entry.text, entry.timestamp))
        elif entry.kind == "assistant" and entry.text:
            turns.append(Turn("assistant", entry.text, entry.timestamp))
        elif entry.kind == "tool_call":
            turns.append(_call(entry.tool, dict(entry.args or {}), entry.timestamp))
            if entry.output is not None:
                turns.append(_result(entry.output, entry.timestamp))
        elif entry.kind == "tool_result":
            turns.append(_result(entry.output, entry.timestamp))
        elif entry.kind == "notice" and entry.text:
            turns.append(Turn("note", entry.text, entry.timestamp))
    return meta, turns


def _read(path: str, kind: str, branch: int | None) -> tuple[dict[str, Any], list[Turn]]:
    if kind not in KINDS:
        raise InvalidInput(f"unknown session kind {kind!r}: expected one of {', '.join(KINDS)}")
    if kind == "claude":
        return _claude_turns(path, branch)
    if branch is not None:
        raise InvalidInput(f"--branch: a {kind} session has no branches (only Claude Code "
                           "transcripts are trees)")
    if kind == "gemini":
        return _gemini_turns(path)
    return _cos_turns(path) if kind == "cos" else _codex_turns(path)


def _redacted(meta: dict[str, Any], turns: list[Turn], redacting: bool
              ) -> tuple[dict[str, Any], list[Turn]]:
    if not redacting:
        return meta, turns
    from coding_os import redact

    return (redact.redact_value(meta),  # type: ignore[return-value]
            [Turn(t.role, redact.redact(t.text), t.ts, t.tool,
                  None if t.summary is None else redact.redact(t.summary)) for t in turns])


def read_turns(path: str, kind: str, redacting: bool = True, branch: int | None = None
               ) -> tuple[dict[str, Any], list[Turn]]:
    """The session's metadata and conversation from its log at `path`, of `kind` (KINDS), the
    secrets in it redacted unless `redacting` is false.

    A Claude Code transcript gives its live chain, or with `branch` the chain of that branch
    (numbered as `branches` numbers them); `meta["warnings"]` says when its chain is broken.

    Raises:
        InvalidInput: an unknown kind, or a branch the session does not have.
        NotFound: there is no file at `path`.
    """
    meta, turns = _read(path, kind, branch)
    return _redacted(meta, turns, redacting)


@dataclass
class Page:
    """Turns `offset` to `offset + len(turns)` of a conversation, and what is known of the
    rest: `total` turns (None when the log was not read to its end), `more` after the page."""

    meta: dict[str, Any]
    turns: list[Turn]
    offset: int
    total: int | None
    more: bool


def read_page(path: str, kind: str, offset: int, limit: int, redacting: bool = True,
              branch: int | None = None) -> Page:
    """The turns `offset` to `offset + limit` of the conversation `read_turns` gives (the same
    turns, the same metadata), only the page's turns redacted.

    What it costs: a cos transcript is read from its start (or from where this process's read
    of an earlier page stopped: `_cos_page`) only until one turn past the page (the whole file
    when a rewind may hide some of those turns: transcript.iter_visible), so `total` is None
    unless that reached its end. A Claude Code transcript is a tree whose live
    chain is known only at its end: it is read whole, and the turns kept in this process for
    the next pages while the file stays unchanged (`_claude_view`; `branches` shares the read).
    A Codex thread's live history is known only once its rollouts are read: they are read
    whole, then kept in this process while they stay unchanged (rollouts.read_history). For
    both, `total` is known.

    Raises:
        InvalidInput: an unknown kind, a branch the session does not have, a negative offset
            or a limit below 1.
        NotFound: there is no file at `path`.
    """
    if offset < 0 or limit < 1:
        raise InvalidInput(f"a page is an offset >= 0 and a limit >= 1, not {offset} and "
                           f"{limit}")
    total: int | None
    if kind == "cos" and branch is None:
        meta, turns, total = _cos_page(path, offset, limit)
        more = total is None
    else:
        if kind == "claude":
            known, every = _claude_view(path, ("turns", branch))
            meta = dict(known)
        else:
            meta, every = _read(path, kind, branch)
        turns, total = every[offset:offset + limit], len(every)
        more = offset + limit < total
    meta, turns = _redacted(meta, turns, redacting)
    return Page(meta, turns, offset, total, more)


@dataclass
class ReplicaLog:
    """The log of another host's session as the shared storage holds it: the name its file has
    on that host, its kind (KINDS) and its lines (without their newlines) as that host wrote
    them (hosts/materialize.py `read_replica`: nothing mapped); for a Claude Code session,
    when asked for, its subagents' transcripts by their names relative to its folder
    (`<id>/subagents/agent-<x>.jsonl` or `agent-<x>.jsonl`, as hosts/replicate.py files
    them)."""

    name: str
    kind: str  # KINDS
    lines: list[bytes]
    subagents: dict[str, list[bytes]] = field(default_factory=dict)


# The name a copy keeps from its host's file: plain characters, a .jsonl file.
_COPY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,200}\.jsonl$")


def _write_copy(path: str, lines: list[bytes]) -> None:
    """Raises: StateIOError: it cannot be written."""
    from coding_os import durable
    from coding_os.errors import StateIOError

    durable.ensure_dir(os.path.dirname(path))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, durable.FILE_MODE)
        with os.fdopen(fd, "wb") as f:  # in a folder of this user's alone (0700)
            f.writelines(part for line in lines for part in (line, b"\n"))
    except OSError as exc:
        raise StateIOError(f"cannot make a temporary copy of the replicated session: "
                           f"{exc.strerror or exc}") from None


@contextmanager
def log_path(path: str, replica: ReplicaLog | None = None) -> Iterator[str]:
    """Where to read a session's log: `path` itself, or, with `replica`, a private temporary
    copy of it, in a 0700 directory of its own removed on exit, named as on its host (a Codex
    rollout under a `sessions` folder, as Codex keeps it; a Claude Code session's subagents
    where Claude Code writes them beside it): every reader of this module and of the adapters
    reads it as it reads the file on that host. A subagent whose name is not one Claude Code
    gives is left out.

    Raises:
        StateIOError: the copy cannot be written.
    """
    if replica is None:
        yield path
        return
    import shutil
    import tempfile

    from coding_os.errors import StateIOError

    name = replica.name if _COPY_NAME.match(replica.name) else "session.jsonl"
    try:
        folder = tempfile.mkdtemp(prefix="cos-replica-")
    except OSError as exc:
        raise StateIOError(f"cannot make a temporary copy of the replicated session: "
                           f"{exc.strerror or exc}") from None
    try:
        where = os.path.join(folder, "sessions") if replica.kind == "codex" else folder
        copy = os.path.join(where, name)
        _write_copy(copy, replica.lines)
        from coding_os.adapters.claude.transcripts import is_subagent_name

        native = name[:-len(".jsonl")]
        for relative, lines in sorted(replica.subagents.items()):
            if is_subagent_name(native, relative):
                _write_copy(os.path.join(where, *relative.split("/")), lines)
        yield copy
    finally:
        shutil.rmtree(folder, ignore_errors=True)


_LABELS = {"user": "User", "assistant": "Assistant", "tool_call": "Tool call",
           "tool_result": "Tool result", "note": "Note"}


def branches(path: str, kind: str) -> dict[str, Any]:
    """The shape of a session's conversation: for a Claude Code transcript, its live chain
    (`live_leaf`, `live_entries`), the `branches` beside it (see `tree.Branch`) and `warnings`
    (a broken chain); for a Codex thread, its live history (`live_leaf`: its last turn id) and
    the turns reverts dropped (see `rollouts.CodexHistory`); cos sessions have no branches.

    Raises:
        NotFound: there is no file at `path`.
    """
    if kind == "codex":
        history = _codex_history(path)
        return {"live_leaf": history.leaf, "live_entries": len(history.live),
                "branches": history.branches, "warnings": list(history.warnings)}
    if kind != "claude":
        return {"live_leaf": None, "live_entries": None, "branches": [], "warnings": []}
    return copy.deepcopy(_claude_view(path, "shape"))


def render(meta: dict[str, Any], turns: list[Turn], fmt: str,
           header: Mapping[str, Any] | None = None) -> str:
    """The conversation as `fmt` (FORMATS). The HTML page opens with the session's facts —
    its agent, project, branch, dates and token use, from `header` (`agent`, `project`,
    `branch`, `created`, `last_active`, and `tokens` as `usage.totals` gives them) where given,
    else from `meta` and the turns' times — and has the look of cos web's session page, its
    stylesheet inlined: the file stands alone.

    Raises:
        InvalidInput: an unknown format.
    """
    title = str(meta.get("title") or meta.get("session") or meta.get("native_id") or "session")
    if fmt == "json":
        # The turns as they always were: the summary lines are the HTML page's.
        return json.dumps({"meta": meta, "turns": [
            {"role": t.role, "text": t.text, "ts": t.ts, "tool": t.tool} for t in turns]},
            ensure_ascii=False, indent=2) + "\n"
    if fmt == "md":
        out = [f"# {title}", ""]
        for warning in meta.get("warnings") or ():
            out += [f"> {warning}", ""]
        for turn in turns:
            head = _LABELS.get(turn.role, turn.role) + (f" `{turn.tool}`" if turn.tool else "")
            out.append(f"## {head}" + (f" — {turn.ts}" if turn.ts else ""))
            out.append("")
            if turn.role in ("tool_call", "tool_result"):
                fence = "````" if "```" in turn.text else "```"
                out += [fence, turn.text, fence]
            else:
                out.append(turn.text)
            out.append("")
        return "\n".join(out)
    if fmt == "html":
        return _html_page(title, meta, turns, header or {})
    raise InvalidInput(f"unknown export format {fmt!r}: expected one of {', '.join(FORMATS)}")


STYLESHEET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conversation.css")


def stylesheet() -> str:
    """The look of a conversation (conversation.css), which cos web serves and the HTML export
    inlines."""
    with open(STYLESHEET, encoding="utf-8") as f:
        return f.read()


def _html_page(title: str, meta: Mapping[str, Any], turns: list[Turn],
               header: Mapping[str, Any]) -> str:
    from coding_os import __version__

    e = html.escape
    # A stylesheet never holds markup, but its text goes into a <style>: no "</" may end it.
    css = stylesheet().replace("</", "<\\/")
    facts = "".join(f"<dt>{e(name)}</dt><dd>{value}</dd>"
                    for name, value in _header_facts(meta, turns, header))
    warnings = "".join(f'<p class="warning">{e(str(w))}</p>\n'
                       for w in meta.get("warnings") or ())
    body = "\n".join(_html_turn(turn, n) for n, turn in enumerate(turns))
    return ("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{e(title)} · cos export</title>\n<style>\n{css}</style>\n</head>\n"
            f"<body class=\"export\">\n<main>\n<header class=\"session\">\n<h1>{e(title)}</h1>\n"
            f"<dl class=\"facts\">{facts}</dl>\n</header>\n{warnings}"
            f"<section class=\"conversation\">\n{body}\n</section>\n"
            f"<footer>Exported by coding-os {e(__version__)}.</footer>\n</main>\n"
            "</body>\n</html>\n")


def _header_facts(meta: Mapping[str, Any], turns: list[Turn], header: Mapping[str, Any]
                  ) -> list[tuple[str, str]]:
    """The facts of the page's header, each a name and its value as HTML."""
    from coding_os.adapters.prices import shown_cost

    e = html.escape

    def known(*values: object) -> str | None:
        return next((str(value) for value in values if value not in (None, "")), None)

    facts: list[tuple[str, str]] = []
    stamps = [turn.ts for turn in turns if turn.ts]
    for name, value in (("agent", known(header.get("agent"), meta.get("agent"))),
                        ("project", known(header.get("project"), meta.get("project"),
                                          meta.get("cwd"))),
                        ("branch", known(header.get("branch"), meta.get("branch")))):
        if value is not None:
            facts.append((name, e(value)))
    started = known(header.get("created"), stamps[0] if stamps else None)
    ended = known(header.get("last_active"), stamps[-1] if stamps else None)
    if started is not None:
        facts.append(("started", _html_time(started)))
    if ended is not None:
        facts.append(("last active", _html_time(ended)))
    tokens = header.get("tokens")
    if isinstance(tokens, Mapping):
        used = (f"{tokens['input']:,} in ({tokens['cached']:,} read from the cache, "
                f"{tokens['cache_write']:,} written to it) · {tokens['output']:,} out")
        facts.append(("tokens", f'<span class="tokens">{e(used)}</span>'))
        if tokens.get("models"):
            facts.append(("model", e(", ".join(str(m) for m in tokens["models"]))))
        cost = shown_cost(tokens.get("cost"))
        facts.append(("cost", f'<span class="cost">{e(cost)}</span>' if cost else
                      '<span class="muted">not known (a model without a price)</span>'))
    facts.append(("steps", f"{len(turns):,} (prompts, answers, tool calls and results)"))
    for name, key in (("session", "id"), ("native id", "native_id")):
        value = known(meta.get(key))
        if value is not None:
            facts.append((name, f'<code>{e(value)}</code>'))
    return facts


def _html_time(ts: str) -> str:
    from coding_os.clock import shown_time

    return f'<time datetime="{html.escape(ts)}">{html.escape(shown_time(ts))}</time>'


def _html_turn(turn: Turn, n: int) -> str:
    """One turn as cos web's session page shows it: a prompt, an answer or a note as a card,
    a tool call or its result folded under its one line."""
    e = html.escape
    when = _html_time(turn.ts) if turn.ts else ""
    if turn.role in ("tool_call", "tool_result"):
        from coding_os.adapters.tool_calls import shown_input

        name = (turn.tool or "tool") if turn.role == "tool_call" else "result"
        text = shown_input(turn.text) if turn.role == "tool_call" else turn.text
        return (f'<details class="turn {turn.role}" id="turn-{n}"><summary>'
                f'<span class="tool">{e(name)}</span><code class="call">{e(turn.summary or "")}'
                f'</code><span class="when">{when}</span></summary>'
                f"<pre>{e(text)}</pre></details>")
    return (f'<div class="turn {e(turn.role)}" id="turn-{n}"><div class="who">'
            f'<span class="role">{e(turn.role)}</span> {when}</div>'
            f'<div class="text">{e(turn.text)}</div></div>')
