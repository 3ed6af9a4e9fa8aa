"""Summaries of a Claude Code or Codex session written as a new native session the agent resumes
as its own (DESIGN.md §5): `cos rewind CP --summarize-from|--summarize-up-to` on such a session.

The point is the checkpoint's: its native point when it recorded one (`native.uuid`, the last
chain entry before its prompt, for Claude Code; `native.turn_id` for Codex), else the prompt
(Claude Code) or the turn (Codex) that was running at the checkpoint's time. The part on one
side of it goes through the summariser of `sessions/summarize.py`; the writers of
`adapters/claude/compact.py` and `adapters/codex/compact.py` make the new log. The original log
is only read.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from coding_os import jsonwire
from coding_os.clock import utc_now
from coding_os.errors import InvalidInput, NotFound
from coding_os.sessions.export import Turn, claude_entry_turns, codex_item_turns

__all__ = ["summarize_native"]


def _read_lines(path: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL log, in order (lines that are not are skipped).

    Raises:
        NotFound: there is no file at `path`.
    """
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise NotFound(f"no session log at {path}") from None
    with f:
        return list(jsonwire.objects(f))


def _claude_turns(entries: Sequence[Mapping[str, Any]]) -> list[Turn]:
    return [turn for entry in entries if not entry.get("isCompactSummary")
            for turn in claude_entry_turns(entry)]


def _codex_turns(lines: Sequence[Mapping[str, Any]]) -> list[Turn]:
    return [turn for line in lines for turn in codex_item_turns(line)]


def _native_point(record: Mapping[str, object], key: str) -> str | None:
    native = record.get("native")
    value = native.get(key) if isinstance(native, dict) else None
    return value if isinstance(value, str) and value else None


def _summary(turns: list[Turn], instructions: str | None, command: str | None,
             redacting: bool) -> tuple[str, str]:
    from coding_os.sessions.summarize import summarize

    if redacting:
        from coding_os import redact

        turns = [Turn(t.role, redact.redact(t.text), t.ts, t.tool) for t in turns]
    return summarize(turns, instructions, command)


def summarize_native(record: Mapping[str, object], direction: str, kind: str, source: str,
                     instructions: str | None, command: str | None, dry_run: bool,
                     redacting: bool = True, codex_sessions: str | None = None
                     ) -> dict[str, Any]:
    """Summarise checkpoint `record`'s Claude Code or Codex session (its log `source`, of
    `kind`) from the checkpoint on or up to it, and write the new native session (unless
    `dry_run`) beside the original: the same Claude project folder, or the Codex sessions folder
    of `source` (`codex_sessions` when `source` is not in one).

    Raises:
        InvalidInput: a bad direction or kind; a checkpoint point the log does not hold.
        NotFound: no log, or nothing to summarise on that side of the checkpoint.
        SummaryError: the summariser command failed.
        StateIOError: the new log cannot be written.
    """
    if direction not in ("from", "up-to"):
        raise InvalidInput(f"summarize from or up-to, not {direction!r}")
    checkpoint = str(record.get("id"))
    stamp = str(record.get("ts") or "")
    side = direction.replace("-", " ")
    lines = _read_lines(source)
    native = record.get("native")
    named = native.get("native_id") if isinstance(native, dict) else None
    if isinstance(named, str) and named != _original_id(lines, kind):
        raise InvalidInput(f"checkpoint {checkpoint} is of native session {named}, not of "
                           f"{source}")
    if kind == "claude":
        from coding_os.adapters.claude import compact as claude
        from coding_os.adapters.claude.tree import live_chain

        chain = live_chain(lines)
        point = _native_point(record, "uuid")
        excerpt = record.get("prompt") if record.get("trigger") == "prompt" else None
        split = claude.split_after(chain, point) if point else claude.split_at_time(
            chain, stamp, excerpt if isinstance(excerpt, str) else None)
        if split is None:
            raise InvalidInput(f"checkpoint {checkpoint}: its point is not in the conversation "
                               f"of {source}" if point else
                               f"checkpoint {checkpoint} is older than the conversation's "
                               "first prompt")
        part: Sequence[Mapping[str, Any]] = chain[:split] if direction == "up-to" \
            else chain[split:]
        if not part:
            raise NotFound(f"nothing to summarise {side} {checkpoint}")
        text, summarizer = _summary(_claude_turns(part), instructions, command, redacting)
        made = claude.compacted_entries(chain, split, direction, text, utc_now())
        native_id, fork_point, cwd = made.session, made.fork_point, made.cwd
        kept, summarised = made.kept, made.summarised
        path = os.path.join(os.path.dirname(source), f"{native_id}.jsonl")
        if not dry_run:
            claude.write_transcript(os.path.dirname(source), made)
        handover = f"claude --resume {native_id}"
        unit = "entries"
    elif kind == "codex":
        from coding_os.adapters.codex import compact as codex

        turn = _native_point(record, "turn_id")
        split = codex.split_at_turn(lines, turn) if turn else codex.split_at_time(lines, stamp)
        if split is None:
            raise InvalidInput(f"checkpoint {checkpoint}: turn {turn} is not in {source}" if turn
                               else f"checkpoint {checkpoint} is older than the thread's first "
                               "turn")
        starts = codex.turn_starts(lines)
        part = lines[starts[0]:split] if direction == "up-to" else lines[split:]
        if not part:
            raise NotFound(f"nothing to summarise {side} {checkpoint}")
        text, summarizer = _summary(_codex_turns(part), instructions, command, redacting)
        made_codex = codex.compacted_lines(lines, split, direction, text, utc_now())
        native_id, fork_point, cwd = made_codex.thread, made_codex.fork_point, made_codex.cwd
        kept, summarised = made_codex.kept, made_codex.summarised
        day = os.path.dirname(source)
        sessions = os.path.dirname(os.path.dirname(os.path.dirname(day)))
        if os.path.basename(sessions) != "sessions":
            sessions = codex_sessions or sessions
        path = codex.rollout_path(sessions, native_id)
        if not dry_run:
            codex.write_rollout(path, made_codex)
        handover = f"codex resume {native_id}"
        unit = "turns"
    else:
        raise InvalidInput(f"a {kind} session has no native log to write a summary into")
    return {"checkpoint": checkpoint, "session": str(record.get("session")), "kind": kind,
            "direction": direction, "steps": len(part), "summarizer": summarizer,
            "summary": text, "appended": None,
            "written": None if dry_run else {
                "native_id": native_id, "path": path, "forked_from": _original_id(lines, kind),
                "fork_point": fork_point, "kept": kept, "summarised": summarised, "unit": unit},
            "handover": None if dry_run else {"command": handover, "cwd": cwd},
            "note": (f"would write a new {'Claude Code' if kind == 'claude' else 'Codex'} "
                     f"session (dry run)" if dry_run else
                     f"wrote {native_id} ({summarised} {unit} summarised, {kept} kept); "
                     f"resume it with: cd {shlex.quote(cwd or '.')} && {handover}")}


def _original_id(lines: Sequence[Mapping[str, Any]], kind: str) -> str | None:
    for line in lines:
        if kind == "claude" and isinstance(line.get("sessionId"), str):
            return str(line["sessionId"])
        payload = line.get("payload")
        if kind == "codex" and line.get("type") == "session_meta" and isinstance(payload, dict):
            value = payload.get("id")
            return value if isinstance(value, str) else None
    return None
