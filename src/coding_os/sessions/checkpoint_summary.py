"""A summary of the conversation at a checkpoint (`cos rewind CP --summarize-from|--summarize-
up-to`, DESIGN.md §5): the checkpoint's session and its log found, the summariser chosen
(`summarizer.command`, which runs only with the project's consent and never under --dry-run),
then a `summary` entry in a cos-native transcript (conversation.summarize_around) or a new native
session a Claude Code or Codex session resumes as its own (native_summary.summarize_native).
"""

from __future__ import annotations

import os

from coding_os.errors import InvalidInput, NotFound

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from coding_os.state.tiers import Tiers

__all__ = ["check_request", "summarize_at"]


def check_request(checkpoint: str, direction: str) -> None:
    """Refuse a summary request before anything is read.

    Raises:
        InvalidInput: a direction other than `from` and `up-to`, a malformed checkpoint id.
    """
    from coding_os.checkpoints import points
    from coding_os.sessions.conversation import SUMMARY_DIRECTIONS

    if direction not in SUMMARY_DIRECTIONS:
        raise InvalidInput(f"summarize from or up-to, not {direction!r}")
    if not points.valid_id(checkpoint):
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
    from coding_os.sessions import transcript
    from coding_os.sessions.conversation import summarize_around, summarizer_command

    check_request(checkpoint, direction)
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
        from coding_os.sessions.native_summary import summarize_native

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
    from coding_os.errors import CosError
    from coding_os.storage.base import StorageError

    written = report["written"]
    try:
        written["linked"] = link(written["native_id"], forked_from)
    except (StorageError, CosError) as exc:
        written["linked"] = False
        report["note"] = f"{report['note']} (not listed in the index: {exc})"
