"""The slash commands `cos acp` offers an editor (`available_commands_update`: /checkpoints,
/rewind, /fork) and the extension method `_cos/rewind` (DESIGN.md §12.1): each does what
`cos checkpoints`, `cos rewind` and `cos fork` do, through coding_os.api.
"""

from __future__ import annotations

from coding_os.errors import InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["REWIND_MODES", "available", "run", "rewind"]

REWIND_MODES = ("code", "conversation", "both")


def available() -> list[dict[str, Any]]:
    """The commands of `available_commands_update` (ACP AvailableCommand objects)."""
    return [
        {"name": "checkpoints", "description": "List this session's checkpoints, newest first, "
                                               "by the id /rewind takes"},
        {"name": "rewind", "description": "Rewind the files (shell-made changes included), the "
                                          "conversation or both to a checkpoint",
         "input": {"hint": "<checkpoint> [code|conversation|both]"}},
        {"name": "fork", "description": "Fork this session into a new one"},
    ]


def _checkpoints_text(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "No checkpoints yet: one is taken before each prompt's edits."
    lines = ["Checkpoints, newest first (/rewind ID [code|conversation|both]):"]
    for row in rows:
        prompt = str(row.get("prompt") or "").splitlines()[0][:60] if row.get("prompt") else ""
        lines.append(f"- {row['id']}  {row.get('ts') or ''}  turn {row.get('turn')}  "
                     f"{row.get('mode')}  {row.get('changed_count') or 0} files changed"
                     + (f"  {prompt!r}" if prompt else ""))
    return "\n".join(lines)


def _rewind_text(checkpoint: str, mode: str, report: Mapping[str, Any]) -> str:
    lines = [f"Rewound {mode} to {checkpoint}."]
    code = report.get("code")
    if isinstance(code, dict):
        summary = code.get("summary") or {}
        lines.append(f"Files: {summary.get('restore', 0)} restored, {summary.get('create', 0)} "
                     f"recreated, {summary.get('delete', 0)} deleted (undo: cos rewind --undo).")
    conversation = report.get("conversation")
    if isinstance(conversation, dict):
        note = conversation.get("note") or conversation.get("summary")
        handover = conversation.get("handover")
        if isinstance(handover, dict) and handover.get("command"):
            lines.append(f"Conversation: continue with {handover['command']}")
        elif note:
            lines.append(f"Conversation: {note}")
        else:
            lines.append("Conversation: the next prompt continues from the checkpoint.")
    return "\n".join(lines)


def _fork_text(report: Mapping[str, Any]) -> str:
    if report.get("session"):
        return f"Forked into session {report['session']} (session/load it to continue there)."
    handover = report.get("handover")
    if isinstance(handover, dict) and handover.get("command"):
        return f"Fork it in its own agent: {handover['command']}"
    return "Nothing forked."


def run(session_id: str, cwd: str, text: str, env: Mapping[str, str] | None = None
        ) -> str | None:
    """Do the slash command a prompt's `text` is, for `session_id` in the project of `cwd`, and
    return the message to show; None when the text is not one of `available()`.

    Raises:
        InvalidInput: a /rewind without a checkpoint, or with a mode not in REWIND_MODES.
        NotFound, RestoreError, …: as `api.rewind`, `api.checkpoint_list`,
            `api.fork_any_session`.
    """
    from coding_os import api

    words = text.strip().split()
    if not words or words[0] not in ("/checkpoints", "/rewind", "/fork"):
        return None
    if words[0] == "/checkpoints":
        return _checkpoints_text(api.checkpoint_list(session_id, env=env, cwd=cwd))
    if words[0] == "/fork":
        return _fork_text(api.fork_any_session(session_id, env=env, cwd=cwd).to_dict())
    if len(words) not in (2, 3):
        raise InvalidInput("usage: /rewind <checkpoint> [code|conversation|both]")
    mode = words[2] if len(words) == 3 else "both"
    _check_mode(mode)
    _check_owner(session_id, words[1], cwd, env)
    return _rewind_text(words[1], mode, api.rewind(words[1], mode, env=env, cwd=cwd))


def _check_mode(mode: object) -> None:
    if mode not in REWIND_MODES:
        raise InvalidInput(f"mode: expected one of {', '.join(REWIND_MODES)}, not {mode!r}")


def _check_owner(session_id: str, checkpoint: str, cwd: str,
                 env: Mapping[str, str] | None) -> None:
    """Refuse a checkpoint that is not of `session_id` (its list names it)."""
    from coding_os import api

    if not any(row.get("id") == checkpoint
               for row in api.checkpoint_list(session_id, env=env, cwd=cwd)):
        raise InvalidInput(f"checkpoint: {checkpoint[:80]!r} is not a checkpoint of session "
                           f"{session_id} (/checkpoints lists them)")


def rewind(params: Mapping[str, Any], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`_cos/rewind {sessionId, checkpoint, mode, dryRun, cwd?}`: the files the rewind restores
    (each `{path, action}`), its `insertions` and `deletions` (lines, as the checkpoint's diff
    counts them), and `restored` (false on a dry run). `cwd` defaults to the process's.

    Raises:
        InvalidInput: a missing or mistyped field (named), a mode not in REWIND_MODES, a
            checkpoint not of the session.
        NotFound, RestoreError, …: as `api.rewind`.
    """
    import os

    from coding_os import api

    if not isinstance(params, dict):
        raise InvalidInput("params: expected an object")
    for field in ("sessionId", "checkpoint"):
        if not isinstance(params.get(field), str) or not params[field]:
            raise InvalidInput(f"{field}: expected a non-empty string")
    mode = params.get("mode", "both")
    _check_mode(mode)
    dry_run = params.get("dryRun", False)
    if not isinstance(dry_run, bool):
        raise InvalidInput("dryRun: expected true or false")
    cwd = params.get("cwd", os.getcwd())
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise InvalidInput("cwd: expected an absolute path")
    session, checkpoint = params["sessionId"], params["checkpoint"]
    _check_owner(session, checkpoint, cwd, env)
    preview = api.rewind(checkpoint, mode, dry_run=True, env=env, cwd=cwd)
    files = (preview.get("code") or {}).get("files") or []
    answer: dict[str, Any] = {
        "files": [{"path": f["path"], "action": f["action"]} for f in files],
        "insertions": sum(int(f.get("added") or 0) for f in files),
        "deletions": sum(int(f.get("removed") or 0) for f in files),
        "restored": False}
    if not dry_run:
        done = api.rewind(checkpoint, mode, env=env, cwd=cwd)
        answer["restored"] = True
        answer["message"] = _rewind_text(checkpoint, mode, done)
    return answer
