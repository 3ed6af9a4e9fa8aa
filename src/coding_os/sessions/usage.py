"""Token use per turn of a session's conversation (the chart on `cos web`'s session page): from
the usage each finished task of a session the engine runs reported (its events log), else from
the agent's own log — a Claude Code transcript's live chain (`message.usage` of the assistant
messages, one turn from a prompt to the next) or a Codex thread's live history (its
`token_count` events). The adapters read the usage; this module picks the source.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from coding_os import jsonwire
from coding_os.adapters.native import TokenTotals, clip
from coding_os.errors import NotFound

__all__ = ["engine_turns", "native_turns"]


def engine_turns(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tokens per turn from the `usage` of an engine session's `task_complete` events: `turn`
    (1, 2, ...), `task`, `seq`, `prompt` (None: the events say it elsewhere), `input`,
    `output`, `cached`."""
    turns: list[dict[str, Any]] = []
    for event in events:
        msg = event.get("msg")
        usage = msg.get("usage") if isinstance(msg, dict) else None
        if not isinstance(msg, dict) or msg.get("type") != "task_complete" \
                or not isinstance(usage, dict):
            continue
        tokens_in, tokens_out = usage.get("input"), usage.get("output")
        if not _count(tokens_in) and not _count(tokens_out):
            continue
        cached = usage.get("cached")
        turns.append({"turn": len(turns) + 1, "task": msg.get("task"), "seq": event.get("seq"),
                      "prompt": None, "input": tokens_in if _count(tokens_in) else 0,
                      "output": tokens_out if _count(tokens_out) else 0,
                      "cached": cached if _count(cached) else 0})
    return turns


# A Claude transcript's turns, remembered in this process while the file stays as it was (the
# page of a session shown again does not parse it again): path -> (stat signature, turns).
_KEPT = 4
_claude_remembered: dict[str, tuple[tuple[int, int, int, int], list[dict[str, Any]]]] = {}


def native_turns(path: str, kind: str) -> list[dict[str, Any]]:
    """Tokens per turn of a Claude Code (`kind` "claude") or Codex ("codex") session whose log
    is at `path`: `turn`, `prompt` (clipped; "" for what came before the first), `input`
    (cache reads and writes included), `output` (reasoning included), `cached`; a session of
    another kind has none.

    Raises:
        NotFound: there is no log at `path`, or it cannot be read.
    """
    if kind != "claude":
        return _read_turns(path, kind)
    try:
        info = os.stat(path)
        signature: tuple[int, int, int, int] | None = (info.st_dev, info.st_ino, info.st_size,
                                                       info.st_mtime_ns)
    except OSError:
        signature = None  # read below: NotFound, or the reader's error
    known = _claude_remembered.get(path)
    if known is not None and signature is not None and known[0] == signature:
        return [dict(row) for row in known[1]]
    rows = _read_turns(path, kind)
    if signature is not None:
        if len(_claude_remembered) >= _KEPT and path not in _claude_remembered:
            _claude_remembered.pop(next(iter(list(_claude_remembered))), None)
        _claude_remembered[path] = (signature, [dict(row) for row in rows])
    return rows


def _read_turns(path: str, kind: str) -> list[dict[str, Any]]:
    try:
        if kind == "claude":
            from coding_os.adapters.claude.transcripts import turn_usage as claude_usage
            from coding_os.adapters.claude.tree import read_tree

            with open(path, encoding="utf-8", errors="replace") as handle:
                entries = list(jsonwire.objects(handle))
            tree = read_tree(entries)
            # Messages without uuids (hand-written, or older than uuids) are read as a line.
            chain = tree.live if tree.leaf is not None else [
                entry for entry in entries if entry.get("isSidechain") is not True]
            found = claude_usage(chain)
        elif kind == "codex":
            from coding_os.adapters.codex.rollouts import read_history
            from coding_os.adapters.codex.rollouts import turn_usage as codex_usage

            found = codex_usage(read_history(path).live)
        else:
            return []
    except FileNotFoundError:
        raise NotFound(f"no session log at {path}") from None
    except OSError as exc:
        raise NotFound(f"cannot read the session log at {path}: "
                       f"{exc.strerror or type(exc).__name__}") from None
    return [_row(number, prompt, tokens) for number, (prompt, tokens) in enumerate(found, 1)]


def _row(number: int, prompt: str, tokens: TokenTotals) -> dict[str, Any]:
    return {"turn": number, "prompt": clip(" ".join(prompt.split())), "input": tokens.input,
            "output": tokens.output, "cached": tokens.cached}


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0

