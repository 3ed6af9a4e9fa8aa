"""The automatic checkpoints of DESIGN.md §5: before a prompt's edits, before a tool call that
may write, and at a turn's end (what changes after it, until the next checkpoint of the session,
changed outside the session), taken by checkpoints/auto.py as the engine's session core takes
them for agents that run no hooks. A checkpoint that fails is logged and never fails the hook.
"""

from __future__ import annotations

import os

from coding_os.errors import CosError
from coding_os.hooks.context import HookContext, string, tool_input_summary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["CHECKPOINT_EVENTS", "take_checkpoint"]

# The events that take one, and the trigger each records.
CHECKPOINT_EVENTS = {"UserPromptSubmit": "prompt", "PreToolUse": "tool", "Stop": "turn-end"}


def take_checkpoint(ctx: HookContext, session: str, log: dict[str, object]) -> None:
    """Take the event's automatic checkpoint (checkpoints/auto.py); a failure is logged, never
    fatal (fail open)."""
    from coding_os.checkpoints.auto import EDIT_TOOLS, native_point, take_auto, writes

    payload = ctx.payload
    tool = string(payload.get("tool_name"))
    if ctx.event == "PreToolUse" and not writes(tool):
        return
    answers: list[dict[str, object] | None] = []
    try:
        config = ctx.config()
        named: list[str] = []
        if ctx.event == "PreToolUse" and tool in EDIT_TOOLS:
            _, named = tool_input_summary(tool, payload.get("tool_input"))
        trigger = CHECKPOINT_EVENTS[ctx.event]
        record = take_auto(ctx.tiers, ctx.caller.resolution, config, cwd=ctx.caller.cwd,
                           home=ctx.env.get("HOME") or os.path.expanduser("~"),
                           session=session, agent=ctx.agent,
                           trigger=trigger, tool=tool, named=named,
                           prompt=string(payload.get("prompt")),
                           native=native_point(ctx.agent, trigger, payload),
                           watcher=lambda message: _ask_watcher(message, answers, ctx.env))
        if record is None:
            return
        if record.get("scan") == "full" and answers == [None]:
            from coding_os.checkpoints.settings import Settings

            if Settings(config).start_daemon:
                _start_watcher(ctx, str(record["root"]), log)
    except (CosError, OSError, ValueError) as exc:
        log["checkpoint_error"] = " ".join(str(exc).split())[:300]
        return
    log["checkpoint"] = record["id"]
    if record.get("scan"):
        log["checkpoint_scan"] = record["scan"]  # fingerprint, watcher or full
    if record.get("reused"):
        log["checkpoint_reused"] = "1"  # nothing changed since this session's latest one
    if record.get("pruned"):
        log["checkpoints_pruned"] = str(len(record["pruned"]))  # type: ignore[arg-type]


def _ask_watcher(message: dict[str, object], answers: list[dict[str, object] | None],
                 env: Mapping[str, str]) -> dict[str, object] | None:
    """daemon.client.ask_watcher, imported only when a snapshot asks (a tree unchanged by its
    fingerprint never does); each answer is kept in `answers`."""
    from coding_os.daemon.client import ask_watcher

    answer = ask_watcher(message, env)
    answers.append(answer)
    return answer


def _start_watcher(ctx: HookContext, root: str, log: dict[str, object]) -> None:
    """After a scan of a tree no watcher answered for: start the daemon in the background
    when the tree is large enough for its next scans to cost more than asking it (the start
    itself is not waited for: this hook's checkpoint is taken already)."""
    from coding_os.checkpoints.settings import WATCHER_FROM_FILES
    from coding_os.git.repo import index_entries

    files = index_entries(root)
    if files is None or files < WATCHER_FROM_FILES:
        return
    from coding_os.daemon.client import start_in_background

    if start_in_background(ctx.env):
        log["daemon_started"] = "1"
