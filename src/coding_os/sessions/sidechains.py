"""The subagent conversations of a session (its sidechains), each placed at the turn of the
conversation that started it, for `cos web`'s session page to show folded there.

- Claude Code: a subagent's messages are `isSidechain` entries inline in the session's file
  (1.0.x), `agent-<id>.jsonl` beside it (2.0.x) or `<session>/subagents/agent-<id>.jsonl` under
  it (2.1.x, with `agent-<id>.meta.json`). Each is placed at the Task (or Agent) tool call that
  started it: the call whose result names the subagent's `agentId`, else the one whose prompt
  is the subagent's first prompt (what 1.0.x leaves to go by). A subagent no call started (a
  warm-up, a call on another branch) is listed with no place.
- cos: a cos-native session whose `session_meta.parent` is the session; placed after the last
  turn written before it was created.

The turns are those `sessions/export.py` makes of each entry, redacted as the conversation is.
"""

from __future__ import annotations

import copy
import glob
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

from coding_os import jsonwire
from coding_os.adapters.native import clip
from coding_os.errors import NotFound, StateIOError

__all__ = ["TASK_TOOLS", "claude_sidechains", "cos_sidechains"]

TASK_TOOLS = ("Task", "Agent")  # the tool that starts a subagent, before and after its rename


def _lines(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return list(jsonwire.objects(handle))


def _first_prompt(entries: Iterable[Mapping[str, Any]]) -> str:
    from coding_os.adapters.claude.tree import classify_user_entry

    for entry in entries:
        if entry.get("type") == "user":
            what, text = classify_user_entry(entry)
            if what in ("prompt", "command"):
                return text.strip()
    return ""


def _turns(entries: Iterable[Mapping[str, Any]], redacting: bool) -> list[dict[str, Any]]:
    from coding_os import redact
    from coding_os.sessions.export import claude_entry_turns

    turns = [turn for entry in entries for turn in claude_entry_turns(entry)]
    if redacting:
        for turn in turns:
            turn.text = redact.redact(turn.text)
    return [asdict(turn) for turn in turns]


def _calls(chain: Iterable[Mapping[str, Any]]) -> tuple[dict[str, int], dict[str, dict[str, Any]]]:
    """The conversation turn (its index, as export numbers the chain's turns) of every tool
    call on `chain`, and the Task calls' inputs, by tool_use id."""
    from coding_os.sessions.export import claude_entry_turns

    turn_of: dict[str, int] = {}
    tasks: dict[str, dict[str, Any]] = {}
    count = 0
    for entry in chain:
        turns = claude_entry_turns(entry)
        calls = [count + i for i, turn in enumerate(turns) if turn.role == "tool_call"]
        message = entry.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        blocks = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"] \
            if entry.get("type") in ("user", "assistant") and isinstance(content, list) else []
        for block, index in zip(blocks, calls):
            call = block.get("id")
            if not isinstance(call, str):
                continue
            turn_of[call] = index
            if block.get("name") in TASK_TOOLS and isinstance(block.get("input"), dict):
                tasks[call] = block["input"]
        count += len(turns)
    return turn_of, tasks


def _started_agents(entries: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The tool_use id of the call that started each subagent, by the `agentId` its result
    names."""
    found: dict[str, str] = {}
    for entry in entries:
        result = entry.get("toolUseResult")
        message = entry.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(result, dict) or not isinstance(result.get("agentId"), str) \
                or not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result" \
                    and isinstance(block.get("tool_use_id"), str):
                found[result["agentId"]] = block["tool_use_id"]
    return found


def _inline(entries: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The sidechains inline in a transcript: their entries grouped by the root of their chain
    (file order), each with its agent id (the entries' `agentId`, else the root's uuid)."""
    parent_of: dict[str, str | None] = {}
    for entry in entries:
        if entry.get("isSidechain") is True and isinstance(entry.get("uuid"), str):
            parent = entry.get("parentUuid")
            parent_of[entry["uuid"]] = parent if isinstance(parent, str) else None
    chains: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        uuid = entry.get("uuid")
        if entry.get("isSidechain") is not True or not isinstance(uuid, str):
            continue
        root, seen = uuid, {uuid}
        while parent_of.get(root) in parent_of and parent_of[root] not in seen:
            root = str(parent_of[root])
            seen.add(root)
        chains.setdefault(root, []).append(entry)
    return [(next((str(e["agentId"]) for e in chain if isinstance(e.get("agentId"), str)), root),
             chain) for root, chain in chains.items()]


def _files(path: str, native_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    """The subagent transcripts of session `native_id` whose file is `path`: (layout, file,
    its meta) for 2.1.x nested files and 2.0.x siblings naming the session."""
    from coding_os.adapters.claude.transcripts import subagent_files

    found: list[tuple[str, str, dict[str, Any]]] = []
    for relative, file in subagent_files(os.path.join(os.path.dirname(os.path.abspath(path)),
                                                      f"{native_id}.jsonl")):
        if "/" not in relative:
            found.append(("sibling", file, {}))
            continue
        meta: dict[str, Any] = {}
        try:
            with open(file[:-len(".jsonl")] + ".meta.json", encoding="utf-8") as handle:
                loaded = json.load(handle)
            meta = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            pass
        found.append(("nested", file, meta))
    return found


# A Claude transcript's sidechains, remembered in this process while it and the subagent files
# beside and under it stay as they were (the next page of its conversation, or the page shown
# again, does not parse them again): (path, branch, redacting) -> (signature, sidechains).
_KEPT = 4
_claude_remembered: dict[tuple[str, int | None, bool], tuple[object, list[dict[str, Any]]]] = {}


def _signature(path: str) -> object:
    """The stat of the transcript and of every subagent file beside or under it, or None."""
    folder = glob.escape(os.path.dirname(os.path.abspath(path)))
    files = [path, *glob.glob(os.path.join(folder, "agent-*.jsonl")),
             *glob.glob(os.path.join(folder, "*", "subagents", "agent-*"))]
    try:
        return tuple((file, info.st_ino, info.st_size, info.st_mtime_ns)
                     for file in sorted(files) for info in (os.stat(file),))
    except OSError:
        return None


def claude_sidechains(path: str, branch: int | None = None, redacting: bool = True
                      ) -> list[dict[str, Any]]:
    """The subagents of the Claude Code session whose transcript is at `path`, oldest first:
    `agent_id`, `layout` (inline, sibling, nested), `call` (the tool_use id of the call that
    started it, or None), `turn` (that call's index among the conversation's turns, on the
    live chain or branch `branch`; None when it is not on it), `description` and `agent_type`
    (the call's, else the subagent's meta), `prompt` (clipped), `turns` (export's, as dicts).

    Raises:
        NotFound: there is no transcript at `path`, or it cannot be read.
        InvalidInput: a branch the transcript does not have.
    """
    signature = _signature(path)
    key = (path, branch, redacting)
    known = _claude_remembered.get(key)
    if known is not None and signature is not None and known[0] == signature:
        return copy.deepcopy(known[1])
    found = _read_claude(path, branch, redacting)
    if signature is not None:
        if len(_claude_remembered) >= _KEPT and key not in _claude_remembered:
            _claude_remembered.pop(next(iter(list(_claude_remembered))), None)
        _claude_remembered[key] = (signature, copy.deepcopy(found))
    return found


def _read_claude(path: str, branch: int | None, redacting: bool) -> list[dict[str, Any]]:
    from coding_os.adapters.claude.tree import read_tree
    from coding_os.errors import InvalidInput

    try:
        entries = _lines(path)
    except FileNotFoundError:
        raise NotFound(f"no session log at {path}") from None
    except OSError as exc:
        raise NotFound(f"cannot read the session log at {path}: "
                       f"{exc.strerror or type(exc).__name__}") from None
    main = [e for e in entries if e.get("isSidechain") is not True]
    tree = read_tree(main)
    if branch is None:
        chain = tree.live if tree.leaf is not None else main
    else:
        found = tree.branches()
        if not 1 <= branch <= len(found):
            raise InvalidInput(f"branch {branch}: the session has "
                               + (f"branches 1 to {len(found)}" if found else "no other branch"))
        chain = tree.chain(found[branch - 1].tip)[0]
    turn_of, tasks = _calls(chain)
    started = _started_agents(main)
    ids = [e["sessionId"] for e in main if isinstance(e.get("sessionId"), str)]
    native_id = max(set(ids), key=ids.count) if ids else \
        os.path.basename(path).removesuffix(".jsonl")
    sidechains: list[tuple[str, str, dict[str, Any], list[dict[str, Any]]]] = [
        (agent_id, "inline", {}, chain_entries) for agent_id, chain_entries in _inline(entries)]
    for layout, file, meta in _files(path, native_id):
        try:
            own = _lines(file)
        except OSError:
            continue
        agent_id = next((str(e["agentId"]) for e in own if isinstance(e.get("agentId"), str)),
                        os.path.basename(file)[len("agent-"):-len(".jsonl")])
        sidechains.append((agent_id, layout, meta, own))
    used: set[str] = set()
    out: list[dict[str, Any]] = []
    for agent_id, layout, meta, own in sidechains:
        prompt = _first_prompt(own)
        call = started.get(agent_id)
        if call is None or call in used:
            call = next((c for c, task in tasks.items() if c not in used and c not in
                         started.values() and str(task.get("prompt", "")).strip() == prompt
                         and prompt), None)
        if call is not None:
            used.add(call)
        task = tasks.get(call, {}) if call is not None else {}
        stamps = [str(e["timestamp"]) for e in own if isinstance(e.get("timestamp"), str)]
        out.append({"agent_id": agent_id, "layout": layout, "call": call,
                    "turn": turn_of.get(call) if call is not None else None,
                    "description": task.get("description") or meta.get("description"),
                    "agent_type": task.get("subagent_type") or meta.get("agentType"),
                    "prompt": clip(" ".join(prompt.split())), "created": min(stamps, default=None),
                    "turns": _turns(own, redacting)})
    out.sort(key=lambda s: (s["created"] or "", s["agent_id"]))
    return out


# The `parent` of each cos transcript, by transcripts folder, read once per file (a transcript's
# session_meta never changes): folder -> {transcript: parent}.
_parents_known: dict[str, dict[str, str | None]] = {}


def _parents(folder: str) -> dict[str, str | None]:
    """The `parent` in the session_meta of every transcript in `folder` (None: it has none);
    only the transcripts not listed at the last call are read."""
    from coding_os.sessions import transcript

    try:
        names = [name for name in os.listdir(folder)
                 if name.endswith(".jsonl") and not name.startswith(".")]
    except OSError:
        return {}
    before = _parents_known.get(folder, {})
    found: dict[str, str | None] = {}
    for name in names:
        path = os.path.join(folder, name)
        if path in before:
            found[path] = before[path]
            continue
        try:
            meta = transcript.read_meta(path)
        except (NotFound, StateIOError):
            continue
        parent = meta.get("parent") if meta else None
        found[path] = parent if isinstance(parent, str) else None
    _parents_known[folder] = found
    return found


def cos_sidechains(state_dir: str, session: str, path: str, redacting: bool = True
                   ) -> list[dict[str, Any]]:
    """The cos-native sessions of `state_dir` whose `parent` is `session` (its transcript at
    `path`), oldest first: `session`, `title`, `created`, `turn` (the index of the session's
    last turn written before it was created; None before the first), `turns` (export's, as
    dicts). The session's own transcript is read only when it has one."""
    from coding_os.sessions import transcript
    from coding_os.sessions.export import read_turns

    out: list[dict[str, Any]] = []
    stamps: list[str] | None = None
    for folder in sorted(glob.glob(os.path.join(glob.escape(state_dir), "*", "transcripts"))):
        for candidate, parent in sorted(_parents(folder).items()):
            if parent != session:
                continue
            try:
                meta = transcript.read_meta(candidate)
            except (NotFound, StateIOError):
                continue
            if not meta or meta.get("parent") != session:
                continue
            created = str(meta.get("ts") or "")
            try:
                _meta, turns = read_turns(candidate, "cos", redacting)
            except NotFound:
                continue
            if stamps is None:
                stamps = [turn.ts or "" for turn in read_turns(path, "cos", redacting)[1]]
            before = [i for i, ts in enumerate(stamps) if ts and ts <= created]
            out.append({"session": meta.get("session"), "title": meta.get("title"),
                        "created": created or None, "turn": before[-1] if before else None,
                        "layout": "cos", "agent_id": meta.get("session"), "call": None,
                        "description": meta.get("title"), "agent_type": meta.get("agent"),
                        "prompt": next((clip(" ".join(t.text.split())) for t in turns
                                        if t.role == "user"), ""),
                        "turns": [asdict(turn) for turn in turns]})
    out.sort(key=lambda s: (s["created"] or "", str(s["session"])))
    return out
