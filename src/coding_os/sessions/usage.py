"""Token use per turn of a session's conversation (the chart on `cos web`'s session page): from
the usage each finished task of a session the engine runs reported (its events log), else from
the agent's own log — a Claude Code transcript's live chain (`message.usage` of the assistant
messages, one turn from a prompt to the next), a Codex thread's live history (its
`token_count` events) or a Gemini CLI session's live conversation (the `tokens` of its model
responses). The adapters read the usage; runtime/usage.py reads the engine's events.

Each turn says what it cost, in US dollars, from the one table of model prices
(adapters/prices.py); `cost` is None when that is not known — a model the table does not have,
a session cos runs whose model was not named, a rate the table does not hold — never a
guess. `totals` adds a session's turns up.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from coding_os import jsonwire
from coding_os.adapters.native import TokenTotals, TurnUsage, clip
from coding_os.errors import InvalidInput, NotFound, StateIOError

__all__ = ["task_turn", "native_turns", "totals"]


def task_turn(turn: int, task: object, seq: object, usage: Mapping[str, Any], agent: object,
              model: object) -> dict[str, Any] | None:
    """Turn `turn` of a session the engine runs, from the `usage` one of its finished tasks
    reported (runtime/usage.py reads them from its events): `turn`, `task`, `seq`, `prompt`
    (None: the events say it elsewhere), `input` (cache reads and writes included), `output`,
    `cached`, `cache_write`, `models` and `cost`; None when it reported no tokens.

    The backends name their counts alike but count them as their agent does: the claude
    backend's `input` leaves out the tokens read from the cache (`cached_input`) and written
    to it (`cache_creation_input`), the codex backend's holds its `cached_input`. `agent` and
    `model` are those the session was configured with; without a model, or with Claude cache
    writes whose lifetime the usage does not say, the cost is not known."""
    tokens_in, tokens_out = _number(usage.get("input")), _number(usage.get("output"))
    if not tokens_in and not tokens_out:
        return None
    cached = _number(usage.get("cached_input", usage.get("cached")))
    written = _number(usage.get("cache_creation_input"))
    named = model if isinstance(model, str) and model else None
    if agent == "claude":
        fresh, tokens_in = tokens_in, tokens_in + cached + written
        spent = None if written else _price(named, fresh, tokens_out, cached, 0)
    else:
        fresh = max(0, tokens_in - cached - written)
        spent = _price(named, fresh, tokens_out, cached, written)
    return {"turn": turn, "task": task, "seq": seq, "prompt": None, "input": tokens_in,
            "output": tokens_out, "cached": cached, "cache_write": written,
            "models": [named] if named else [], "cost": spent}


def totals(turns: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A session's token use, its turns (as `task_turn` or `native_turns` give them) added
    up: `input`, `output`, `cached`, `cache_write`, `models` (in order of first use), and
    `cost` (None when a turn's is not known)."""
    summed: dict[str, Any] = {"input": 0, "output": 0, "cached": 0, "cache_write": 0,
                              "models": [], "cost": 0.0}
    for turn in turns:
        for key in ("input", "output", "cached", "cache_write"):
            summed[key] += _number(turn.get(key))
        for model in turn.get("models") or ():
            if model not in summed["models"]:
                summed["models"].append(model)
        spent = turn.get("cost")
        summed["cost"] = None if summed["cost"] is None or spent is None \
            else summed["cost"] + spent
    return summed


def _price(model: str | None, fresh: int, output: int, cached: int, written: int
           ) -> float | None:
    from coding_os.adapters.prices import cost

    return cost(model, fresh, output, cached, written)


# A Claude transcript's turns, remembered in this process while the file stays as it was (the
# page of a session shown again does not parse it again): path -> (stat signature, turns).
_KEPT = 4
_claude_remembered: dict[str, tuple[tuple[int, int, int, int], list[dict[str, Any]]]] = {}


def native_turns(path: str, kind: str) -> list[dict[str, Any]]:
    """Tokens per turn of a Claude Code (`kind` "claude"), Codex ("codex") or Gemini CLI
    ("gemini") session whose log is at `path`: `turn`, `prompt` (clipped; "" for what came before the first), `input`
    (cache reads and writes included), `output` (reasoning included), `cached`, `cache_write`,
    `models` (those that answered) and `cost` (US dollars, None when not known); a session of
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
        return [_copy(row) for row in known[1]]
    rows = _read_turns(path, kind)
    if signature is not None:
        if len(_claude_remembered) >= _KEPT and path not in _claude_remembered:
            _claude_remembered.pop(next(iter(list(_claude_remembered))), None)
        _claude_remembered[path] = (signature, [_copy(row) for row in rows])
    return rows


def _copy(row: Mapping[str, Any]) -> dict[str, Any]:
    return {**row, "models": list(row["models"])}


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
        elif kind == "gemini":
            from coding_os.adapters.gemini.native import turn_usage as gemini_usage
            from coding_os.adapters.gemini.sessions import read_conversation

            try:
                found = gemini_usage(read_conversation(path).messages)
            except (InvalidInput, StateIOError) as exc:
                raise NotFound(f"cannot read the session log at {path}: {exc}") from None
        else:
            return []
    except FileNotFoundError:
        raise NotFound(f"no session log at {path}") from None
    except OSError as exc:
        raise NotFound(f"cannot read the session log at {path}: "
                       f"{exc.strerror or type(exc).__name__}") from None
    return [_row(number, turn) for number, turn in enumerate(found, 1)]


def _row(number: int, turn: TurnUsage) -> dict[str, Any]:
    tokens: TokenTotals = turn.tokens
    return {"turn": number, "prompt": clip(" ".join(turn.prompt.split())), "input": tokens.input,
            "output": tokens.output, "cached": tokens.cached, "cache_write": tokens.cache_write,
            "models": list(turn.models), "cost": turn.cost}


def _number(value: object) -> int:
    """A count as the logs give it: a whole number 0 or more, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

