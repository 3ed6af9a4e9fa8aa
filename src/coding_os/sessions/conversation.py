"""The conversation half of a rewind (DESIGN.md §5): a cos-native session's transcript rewound
to a checkpoint (a `rewind` entry hides what came after; nothing is deleted), or, for Claude Code
and Codex, the agent's own command to run; and summaries of the conversation from or up to a
checkpoint, written as a `summary` entry into a cos-native transcript or reported.
"""

from __future__ import annotations

import os

from coding_os.errors import InvalidInput, NotFound
from coding_os.sessions import transcript
from coding_os.state.identity import agent_of_session
from coding_os.state.tiers import Tiers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["SUMMARY_DIRECTIONS", "rewind_conversation", "summarizer_command", "summarize_around"]

SUMMARY_DIRECTIONS = ("from", "up-to")


def rewind_conversation(tiers: Tiers, record: Mapping[str, object],
                        dry_run: bool) -> dict[str, Any]:
    """Rewind the conversation of the session of checkpoint `record` to it (`dry_run`: say
    what would be done). A cos-native transcript gets a `rewind` entry; for another agent's
    session the report names the agent's own command.

    Raises:
        InvalidInput: the checkpoint belongs to no session, or has no transcript position.
    """
    session = record.get("session")
    if not isinstance(session, str):
        raise InvalidInput(f"checkpoint {record['id']} belongs to no session: only its code "
                           "can be rewound")
    path = transcript.transcript_path(tiers, session)
    if os.path.exists(path):
        seq = record.get("seq")
        if not isinstance(seq, int):
            raise InvalidInput(f"checkpoint {record['id']} has no transcript position")
        if not dry_run:
            transcript.append(tiers, session, "rewind", {"to_seq": seq})
        return {"session": session, "kind": "cos", "to_seq": seq, "applied": not dry_run,
                "note": f"entries after seq {seq} are hidden, not deleted"}
    agent = agent_of_session(session) or "?"
    turn = record.get("turn")
    if agent == "claude":
        command = "/rewind"
        note = (f"in Claude Code, run /rewind and pick the prompt of turn {turn} "
                f"({record.get('prompt') or 'no prompt recorded'}); choose the conversation only, "
                "cos restored the code")
    elif agent == "codex":
        command = "thread/rollback"
        note = (f"in Codex, roll the thread back to turn {turn} (app-server thread/rollback, "
                "or Esc Esc in the TUI to edit an earlier prompt); cos restored the code")
    else:
        command, note = None, f"cos keeps no transcript of {session}: only its code is rewound"
    return {"session": session, "kind": agent, "applied": False, "command": command,
            "note": note}


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
    from coding_os.sessions.summarize import summarize

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
