"""Summaries of a conversation from or up to a checkpoint (`cos rewind CP --summarize-from|
--summarize-up-to`, DESIGN.md §5): the one module of them.

A summariser turns the conversation's steps into text. The default needs no model: the prompts,
the files the tools touched, the commands run and the errors seen, in order. `summarizer.command`
in `.coding-os.yaml` (shell words, e.g. `claude -p`; it runs only with the project's consent and
never under --dry-run) gets the conversation as text on stdin (the instructions first) and prints
the summary on stdout. Nothing is removed from any log:

- a cos-native session gets a `summary` entry standing for its range (`summarize_around`);
- a Claude Code or Codex session gets a new native session the agent resumes as its own
  (`summarize_native`): the point is the checkpoint's native point when it recorded one
  (`native.uuid`, the last chain entry before its prompt, for Claude Code; `native.turn_id` for
  Codex), else the prompt (Claude Code) or the turn (Codex) running at the checkpoint's time; the
  writers of `adapters/claude/compact.py` and `adapters/codex/compact.py` make the new log, and
  the original log is only read.

`summarize_at` finds the checkpoint's session and its log and does the one that fits.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from coding_os import jsonwire
from coding_os.adapters import FILE_TOOLS, SHELL_TOOLS, patch_files
from coding_os.clock import utc_now
from coding_os.errors import CosError, InvalidInput, NotFound
from coding_os.sessions import transcript
from coding_os.sessions.export import Turn, claude_entry_turns, codex_item_turns

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from coding_os.state.tiers import Tiers

__all__ = ["SUMMARY_DIRECTIONS", "SummaryError", "default_summary", "conversation_text",
           "run_command", "summarize", "summarizer_command", "summarize_around",
           "summarize_native", "check_request", "summarize_at"]

SUMMARY_DIRECTIONS = ("from", "up-to")

COMMAND_TIMEOUT_S = 600
_ERROR = re.compile(r"^(?:error|fatal|traceback|exception|failed|.*exit code [1-9]).*$",
                    re.IGNORECASE | re.MULTILINE)
_LIST_MAX = 50


class SummaryError(CosError):
    """The configured summariser failed."""

    exit_code = 1


def _files(turn: Turn) -> list[str]:
    try:
        data = json.loads(turn.text)
    except ValueError:
        data = turn.text
    found: list[str] = []
    if isinstance(data, dict):
        key = FILE_TOOLS.get(turn.tool or "")
        value = data.get(key) if key else data.get("file_path") or data.get("path")
        if isinstance(value, str):
            found.append(value)
        data = data.get("input") or data.get("patch") or data.get("command") or ""
    if isinstance(data, str):
        found.extend(patch_files(data))
    return found


def _command(turn: Turn) -> str | None:
    if turn.tool not in SHELL_TOOLS:
        return None
    try:
        data = json.loads(turn.text)
    except ValueError:
        return turn.text.strip() or None
    if isinstance(data, dict):
        value = data.get("command") or data.get("cmd")
        if isinstance(value, list):
            value = " ".join(str(part) for part in value)
        return str(value) if value else None
    return None


def _unique(items: Sequence[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


def default_summary(turns: Sequence[Turn], instructions: str | None = None) -> str:
    """A summary without a model: prompts, files touched, commands run, errors."""
    prompts = [" ".join(t.text.split())[:300] for t in turns if t.role == "user" and t.text]
    files = _unique([path for t in turns if t.role == "tool_call" for path in _files(t)])
    commands = _unique([c for t in turns if t.role == "tool_call" and (c := _command(t))])
    errors = [m.group(0)[:200] for t in turns if t.role == "tool_result"
              for m in [_ERROR.search(t.text)] if m]
    lines = [f"Summary of {len(turns)} steps ({len(prompts)} prompts)."]
    if instructions:
        lines.append(f"Instructions: {instructions}")
    for title, items in (("Prompts", prompts), ("Files touched", files),
                         ("Commands run", [c.splitlines()[0][:200] for c in commands]),
                         ("Errors", errors)):
        lines.append(f"{title}:" if items else f"{title}: none")
        lines.extend(f"- {item}" for item in items[:_LIST_MAX])
        if len(items) > _LIST_MAX:
            lines.append(f"- … and {len(items) - _LIST_MAX} more")
    return "\n".join(lines)


def conversation_text(turns: Sequence[Turn], instructions: str | None = None) -> str:
    """The conversation as plain text, for a summariser command's stdin."""
    head = [f"Summarise this part of a coding session. {instructions or ''}".strip(), ""]
    body = [f"[{t.role}{'' if not t.tool else ' ' + t.tool}] {t.text}" for t in turns]
    return "\n".join(head + body) + "\n"


def run_command(command: str, text: str) -> str:
    """Run the configured summariser: `text` on stdin, the summary on stdout.

    Raises:
        InvalidInput: the command is empty or cannot be split into words.
        SummaryError: it cannot be run, fails, times out or prints nothing.
    """
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise InvalidInput(f"summarizer.command cannot be parsed: {exc}") from None
    if not argv:
        raise InvalidInput("summarizer.command is empty")
    try:
        proc = subprocess.run(argv, input=text.encode("utf-8"), capture_output=True,
                              timeout=COMMAND_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise SummaryError(f"summarizer {argv[0]} is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise SummaryError(f"summarizer {argv[0]} did not finish in {COMMAND_TIMEOUT_S} s") \
            from None
    if proc.returncode != 0:
        error = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SummaryError(f"summarizer {argv[0]} exited {proc.returncode}"
                           f"{': ' + error[0][:200] if error else ''}")
    summary = proc.stdout.decode("utf-8", "replace").strip()
    if not summary:
        raise SummaryError(f"summarizer {argv[0]} printed nothing")
    return summary


def summarize(turns: Sequence[Turn], instructions: str | None = None,
              command: str | None = None) -> tuple[str, str]:
    """The summary of `turns`, and the summariser that wrote it (`default` or the command)."""
    if command:
        return run_command(command, conversation_text(turns, instructions)), command
    return default_summary(turns, instructions), "default"


def summarizer_command(config: Mapping[str, object]) -> str | None:
    """`summarizer.command` of the project's configuration, or None for the built-in summary.

    Raises:
        InvalidInput: it is there but not a string.
    """
    section = config.get("summarizer") or {}
    command = section.get("command") if isinstance(section, dict) else None
    if command is not None and not isinstance(command, str):
        raise InvalidInput("summarizer.command in .coding-os.yaml must be a string")
    return command


def summarize_around(tiers: Tiers, record: Mapping[str, object], direction: str, kind: str,
                     source: str, instructions: str | None, command: str | None,
                     dry_run: bool) -> dict[str, Any]:
    """Summarise the conversation of checkpoint `record`'s session (its log `source`, of
    `kind`) from the checkpoint on or up to it; a cos-native session gets a `summary` entry
    for the range (unless `dry_run`).

    Raises:
        InvalidInput: a bad direction; a cos checkpoint without a transcript position.
        NotFound: nothing to summarise on that side of the checkpoint.
        SummaryError: the summariser command failed.
    """
    from coding_os.sessions.export import read_turns

    if direction not in SUMMARY_DIRECTIONS:
        raise InvalidInput(f"summarize from or up-to, not {direction!r}")
    checkpoint, session = record["id"], str(record.get("session"))
    _, turns = read_turns(source, kind)
    stamp = str(record.get("ts") or "")
    part = [t for t in turns if (str(t.ts or "") >= stamp) == (direction == "from")]
    if not part:
        raise NotFound(f"nothing to summarise {direction.replace('-', ' ')} {checkpoint}")
    text, summarizer = summarize(part, instructions, command)
    report: dict[str, object] = {"checkpoint": checkpoint, "session": session, "kind": kind,
                                 "direction": direction, "steps": len(part),
                                 "summarizer": summarizer, "summary": text, "appended": None}
    if kind == "cos":
        seq = record.get("seq")
        last = transcript.last_seq(source) or 0
        if not isinstance(seq, int):
            raise InvalidInput(f"checkpoint {checkpoint} has no transcript position")
        low, high = (seq + 1, last) if direction == "from" else (1, seq)
        if low <= high and not dry_run:
            appended = transcript.append(tiers, session, "summary",
                                         {"text": text, "from_seq": low, "to_seq": high})
            report["appended"] = {"seq": appended.seq, "from_seq": low, "to_seq": high}
    else:
        report["note"] = ("the summary is not written into the agent's own log; paste it, or "
                          "use the agent's own compaction")
    return report


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


def check_request(checkpoint: str, direction: str) -> None:
    """Refuse a summary request before anything is read.

    Raises:
        InvalidInput: a direction other than `from` and `up-to`, a malformed checkpoint id.
    """
    from coding_os.checkpoints import points

    if direction not in SUMMARY_DIRECTIONS:
        raise InvalidInput(f"summarize from or up-to, not {direction!r}")
    if not points.valid_key(checkpoint):
        raise InvalidInput(f"not a checkpoint id: {checkpoint[:80]!r} (cp-YYYYMMDD-HHMMSS-…)")


def summarize_at(tiers: Tiers, checkpoint: str, direction: str, instructions: str | None,
                 dry_run: bool, *, config: Callable[[], Mapping[str, object]],
                 consent: Callable[[str], None], row_of: Callable[[str], Mapping[str, Any]],
                 link: Callable[[str, str], bool], codex_dir: str,
                 redacting: bool) -> dict[str, Any]:
    """Summarise the conversation of `checkpoint`'s session from it on (`direction` "from") or
    up to it ("up-to") with the summariser `config()` names (`consent(what)` asked first for a
    command of the repository). A cos-native session gets a `summary` entry; another's log is
    found by `row_of(session)` (its index row), and the new native session the summary makes is
    listed in the index, forked from it, by `link(native id, forked from)` (whether it was; the
    index is a cache: a failure to update it is said in the note, never fatal). The report's
    `handover` is the command to continue.

    Raises:
        InvalidInput, NotFound: as `check_request`; an unknown checkpoint, one of no session;
            a session without a log.
        NotTrusted: as `consent`.
        SummaryError: the configured summariser failed.
    """
    from coding_os.checkpoints import points

    check_request(checkpoint, direction)
    checkpoint = points.resolve(tiers.checkpoints_dir, checkpoint)
    record = points.load(tiers.checkpoints_dir, checkpoint)
    session = record.get("session")
    if not isinstance(session, str):
        raise InvalidInput(f"checkpoint {checkpoint} belongs to no session: nothing to summarise")
    command = summarizer_command(config())
    skipped = None
    if command is not None:
        # A command from the repository: never under --dry-run, and only with consent.
        if dry_run:
            command, skipped = None, "summarizer.command is not run under --dry-run"
        else:
            consent(f"summarizer.command ({command[:80]!r})")
    path = transcript.transcript_path(tiers, session)
    row: Mapping[str, Any] = {}
    if os.path.exists(path):
        kind, source = "cos", path
    else:
        row = row_of(session)
        kind, source = str(row.get("kind")), str(row.get("source_path") or "")
        if not source:
            raise NotFound(f"session {session} has no log to summarise")
    if kind in ("claude", "codex"):
        # A new native session the agent resumes as its own (sessions.native_summary).

        report = summarize_native(record, direction, kind, source, instructions, command,
                                  dry_run, redacting=redacting,
                                  codex_sessions=os.path.join(codex_dir, "sessions"))
        if report["written"] is not None:
            _link(report, link, str(row.get("id") or row.get("native_id")))
    else:
        report = summarize_around(tiers, record, direction, kind, source, instructions,
                                  command, dry_run)
    if skipped is not None:
        report["summarizer_note"] = skipped
    return report


def _link(report: dict[str, Any], link: Callable[[str, str], bool], forked_from: str) -> None:
    """List the native session a summary wrote (`report["written"]`) in the index."""
    from coding_os.storage.base import StorageError

    written = report["written"]
    try:
        written["linked"] = link(written["native_id"], forked_from)
    except (StorageError, CosError) as exc:
        written["linked"] = False
        report["note"] = f"{report['note']} (not listed in the index: {exc})"
