"""Summaries around a point of a conversation (`cos rewind POINT --summarize-from|--summarize-up-to`).

A summariser turns the conversation's steps into text. The default needs no model: the prompts,
the files the tools touched, the commands run and the errors seen, in order. `summarizer.command`
in `.coding-os.yaml` (shell words, e.g. `claude -p`) gets the conversation as text on stdin (the
instructions first) and prints the summary on stdout. Nothing is removed from any log: a cos-native
session gets a `summary` entry standing for its range; for Claude Code and Codex sessions the
summary is reported.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Sequence

from coding_os.adapters import FILE_TOOLS, SHELL_TOOLS, patch_files
from coding_os.errors import CosError, InvalidInput
from coding_os.sessions.export import Turn

__all__ = ["SummaryError", "default_summary", "conversation_text", "run_command", "summarize"]

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
