"""`handle()`: one hook event and its payload, carried out for the calling panel — the library
behind `cos hook` (the interface only reads stdin and writes stdout).

Every event: the panel's session (sessions.py), its heartbeat, the hooks-log line and what it
observed (spooled for the database), both with the secrets in their texts redacted first
(redact.py; not with `redact: false` in `.coding-os.yaml`). Gemini CLI's events are handled as
the ones they are (adapters.GEMINI_HOOK_EVENTS: BeforeTool as PreToolUse, …). PreToolUse: the policy gates (gates.py) and the attribution
of a call of cos's own MCP tools. UserPromptSubmit, a writing PreToolUse and Stop: the automatic
checkpoint (checkpoint.py).

Hot path: tool-call events touch files only (heartbeat, log, spool) — except a panel's first
event after its directory was lost, which looks its native id up in the index. The database is
otherwise opened only by the events that happen once per session or per turn (SessionStart, Stop,
SessionEnd), never under the panel lock, with a 2 s lock wait; a database failure is logged
(`db_error`) and does not fail the hook: the observations wait in the spool.

On a shared PostgreSQL every event also hands what the agent wrote over to the project's
background replicator (sessions.replicate_soon: a byte appended, a lock tried, a detached
process started when none runs), so its lines reach the other hosts with no further command.
"""

from __future__ import annotations

import os

from coding_os import durable, redact
from coding_os.adapters import EVENT_ALIASES, HOOK_EVENTS
from coding_os.errors import InvalidInput
from coding_os.hooks.checkpoint import CHECKPOINT_EVENTS, take_checkpoint
from coding_os.hooks.context import (
    HookContext,
    HookResult,
    excerpt,
    string,
    tool_input_summary,
    tool_ok,
    valid_event,
    validate_payload,
)
from coding_os.hooks.sessions import (
    Start,
    adopt,
    after_session_start,
    record_activity,
    replicate_soon,
    retry_pending_orphan,
    session_end,
    session_start,
)
from coding_os.state import hookslog, presence
from coding_os.state.caller import read_panel_session
from coding_os.state.presence import PanelLock

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["handle"]

# Payload fields read as strings. Only `session_id` (identity) must be one; another type in
# the others is logged (`bad_fields`) and the field ignored: clients drift, hooks must not fail.
_STRING_FIELDS = ("session_id", "hook_event_name", "source", "cwd", "transcript_path",
                  "tool_name", "prompt", "reason", "trigger", "agent_id", "agent_type")


_EXCERPT = 2000


def handle(event: str, payload: dict[str, object], env: Mapping[str, str] | None = None,
           cwd: str | None = None, now: float | None = None) -> HookResult:
    """Carry out hook `event` with `payload` for the calling panel.

    Raises:
        InvalidInput: the event name or the payload is malformed.
        Misroute: state would land in the global hub or through a symlink; nothing written.
        StateIOError: the state directory cannot be written (read-only, full).
    """
    env = os.environ if env is None else env
    valid_event(event)
    # Gemini CLI's names (BeforeTool, …) are handled as the events they are; the payload
    # keeps the agent's own name, which the hooks log records beside (`payload_event`).
    event = EVENT_ALIASES.get(event, event)
    validate_payload(payload)
    ctx = HookContext(event, payload, env, cwd, now)
    try:
        return _handle(ctx)
    finally:
        ctx.close()


def _handle(ctx: HookContext) -> HookResult:
    payload = ctx.payload
    durable.ensure_dir(ctx.panel_dir)
    start: Start | None = None
    with PanelLock(ctx.panel_dir):  # file work only: no database while other hooks wait
        current = read_panel_session(ctx.panel_dir)
        if ctx.event == "SessionStart":
            start = session_start(ctx, current)
            session = start.session
        elif current is None:
            session = adopt(ctx)
        else:
            session = current[0]
            presence.beat(ctx.panel_dir, session)
    task = ctx.trusted_value(".task-current", session)
    log: dict[str, object] = {
        "ts": ctx.ts, "agent": ctx.agent, "panel": ctx.panel, "session": session,
        "task": task, "event": ctx.event,
    }
    if ctx.native:
        log["native"] = ctx.native  # the native id is a lookup key too (`hooks-log --session`)
    if ctx.caller.panel_source != "payload":
        log["panel_source"] = ctx.caller.panel_source
    payload_event = payload.get("hook_event_name")
    if isinstance(payload_event, str) and payload_event != ctx.event:
        log["payload_event"] = payload_event
    bad = [key for key in _STRING_FIELDS
           if payload.get(key) is not None and not isinstance(payload.get(key), str)]
    if bad:
        log["bad_fields"] = ",".join(bad)  # newer or odd clients: ignored, never fatal
    observation = _observe(ctx, log)
    if observation is not None:
        observation.update(session=session, agent=ctx.agent, panel=ctx.panel, ts=ctx.ts,
                           event=ctx.event)
        from coding_os.state import observations  # not for a PreToolUse: it spools nothing

        observations.spool(ctx.tiers.observations_spool, _private(ctx, observation),
                           redact=False)
    output: dict[str, object] | None = None
    if ctx.event == "PreToolUse":
        blocked, warning = _gate(ctx, session, log)
        if blocked is not None:  # a policy gate refused the call: nothing to checkpoint
            log.update(ctx.log)
            hookslog.append(ctx.tiers.hooks_log, _private(ctx, log), redact=False)
            return blocked
        output = _attribute_mcp_call(ctx, session, log)
        if warning:
            output = _with_gate_warning(output, warning)
    if ctx.event in CHECKPOINT_EVENTS:
        take_checkpoint(ctx, session, log)
    if start is not None:
        context = after_session_start(ctx, start)
        if context:
            output = {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                             "additionalContext": context}}
    elif ctx.event == "Stop":
        storage = ctx.open_storage()
        if storage is not None:
            record_activity(ctx, storage, session, status=None)
            retry_pending_orphan(ctx, session)
    elif ctx.event == "SessionEnd":
        session_end(ctx, session)
        retry_pending_orphan(ctx, session)
    replicate_soon(ctx)  # on PostgreSQL: what the agent wrote reaches the other hosts
    log.update(ctx.log)
    hookslog.append(ctx.tiers.hooks_log, _private(ctx, log), redact=False)
    return HookResult(output, session)


def _private(ctx: HookContext, record: dict[str, object]) -> dict[str, object]:
    """`record` with the secrets in its texts redacted, unless the project says `redact: false`
    (a configuration that cannot be read redacts). Costs nothing for a record holding no
    trigger of a secret's shape: the configuration is read only when one is found."""
    cleaned = redact.redact_value(record)
    if cleaned is record or not _redacts(ctx):
        return record
    return cleaned  # type: ignore[return-value]


def _redacts(ctx: HookContext) -> bool:
    try:
        return redact.enabled(ctx.config())
    except InvalidInput:
        return True


def _clean(ctx: HookContext, text: str) -> str:
    """`text` with its secrets redacted, unless the project says `redact: false`."""
    cleaned = redact.redact(text)
    return text if cleaned is text or not _redacts(ctx) else cleaned


def _clip(ctx: HookContext, text: str, limit: int) -> str:
    """`text` cut to `limit` characters, its secrets redacted before the cut (so that no cut
    leaves part of one behind)."""
    return excerpt(_clean(ctx, text), limit)


def _observe(ctx: HookContext, log: dict[str, object]) -> dict[str, object] | None:
    """Fill the event's log fields; return the observation to spool, or None for none."""
    payload = ctx.payload
    event = ctx.event
    if event == "UserPromptSubmit":
        prompt = string(payload.get("prompt")) or ""
        log["prompt_chars"] = len(prompt)
        return {"text": _clip(ctx, prompt, _EXCERPT),
                "data": {"prompt_id": string(payload.get("prompt_id"))}}
    if event in ("PreToolUse", "PostToolUse"):
        tool = string(payload.get("tool_name"))
        summary, paths = tool_input_summary(tool, payload.get("tool_input"),
                                            lambda text: _clean(ctx, text))
        log["tool"] = tool
        log["input"] = summary
        log["subagent"] = string(payload.get("agent_id"))
        if event == "PreToolUse":
            return None
        ok = tool_ok(payload.get("tool_response"))
        if not ok:
            log["ok"] = "false"
        return {"tool": tool, "text": summary,
                "data": {"paths": paths, "ok": ok,
                         "tool_use_id": string(payload.get("tool_use_id"))}}
    if event == "Stop":
        message = string(payload.get("last_assistant_message")) \
            or string(payload.get("prompt_response")) or ""  # Gemini CLI's AfterAgent
        return {"text": _clip(ctx, message, _EXCERPT)}
    if event in ("SubagentStart", "SubagentStop"):
        agent_id = string(payload.get("agent_id"))
        agent_type = string(payload.get("agent_type"))
        log["agent_id"] = agent_id
        log["agent_type"] = agent_type
        return {"data": {"agent_id": agent_id, "agent_type": agent_type}}
    if event == "PreCompact":
        log["trigger"] = string(payload.get("trigger"))
        return {"data": {"trigger": string(payload.get("trigger"))}}
    if event == "SessionStart":
        return {"data": {"source": log.get("source") or ctx.log.get("source")}}
    if event == "SessionEnd":
        return {"data": {"reason": string(payload.get("reason"))}}
    if event not in HOOK_EVENTS:
        log["unknown_event"] = "1"
    return None


def _gate(ctx: HookContext, session: str,
          log: dict[str, object]) -> tuple[HookResult | None, str | None]:
    """The policy gates' verdict on a tool call: a blocking result (or None to go on), and a
    warning for the agent when a gate could not check. Without a `gates:` section this costs
    a cached config read and imports nothing."""
    try:
        config = ctx.config()
    except InvalidInput as exc:
        # Whether gates are configured is unknown: fail open, and say so when it looks so.
        ctx.log["config_error"] = str(exc)
        if _config_mentions_gates(ctx.root):
            log["gates"] = "failed-open"
            return None, (f"coding-os gates could not be read ({exc}); this call was allowed "
                          f"unchecked. Fix .coding-os.yaml")
        return None, None
    section = config.get("gates")
    if section is None:
        return None, None
    from coding_os.hooks import gates

    verdict = gates.check(ctx, session, section, config, log)
    return verdict.blocked, verdict.warning


def _config_mentions_gates(root: str) -> bool:
    from coding_os.config import CONFIG_FILE

    try:
        with open(os.path.join(root, CONFIG_FILE), encoding="utf-8", errors="replace") as f:
            return "gates" in f.read(1 << 20)
    except OSError:
        return False


def _with_gate_warning(output: dict[str, object] | None, warning: str) -> dict[str, object]:
    """`output` with a gate's warning added as context the model reads (both clients show a
    PreToolUse `additionalContext` to the model) and as a message to the user."""
    merged = dict(output or {})
    specific = merged.get("hookSpecificOutput")
    specific = dict(specific) if isinstance(specific, dict) else {"hookEventName": "PreToolUse"}
    specific["additionalContext"] = warning
    merged["hookSpecificOutput"] = specific
    merged["systemMessage"] = warning
    return merged


def _attribute_mcp_call(ctx: HookContext, session: str,
                        log: dict[str, object]) -> dict[str, object] | None:
    """For a call of one of cos's MCP tools, the PreToolUse output that adds the calling
    session as `agent_session` to its input (one MCP server serves many panels and cannot
    tell them apart itself); None for any other tool."""
    tool = string(ctx.payload.get("tool_name"))
    if not tool or not (tool.startswith("mcp_") or "." in tool):
        return None  # no MCP tool: decided without importing anything
    from coding_os.adapters.mcp import MCP_SERVER_NAME, MCP_TOOLS

    # cos's tools as Claude Code names them (`mcp__<server>__<tool>`), as Codex may, and as
    # Gemini CLI does (`mcp_<server>_<tool>`: one underscore, so a server of the user's named
    # `cos_x` would share the prefix; only cos's own tool names are taken).
    gemini_prefix = f"mcp_{MCP_SERVER_NAME}_"
    if not (tool.startswith((f"mcp__{MCP_SERVER_NAME}__", f"{MCP_SERVER_NAME}."))
            or (tool.startswith(gemini_prefix) and tool[len(gemini_prefix):] in MCP_TOOLS)):
        return None
    tool_input = ctx.payload.get("tool_input")
    updated = dict(tool_input) if isinstance(tool_input, dict) else {}
    updated["agent_session"] = session
    log["mcp_session"] = session
    if ctx.agent == "gemini":
        # Gemini CLI merges a BeforeTool hook's `tool_input` into the call's arguments; it
        # reads no allow decision (whether it asks first is its own policy: init trusts cos's
        # server).
        return {"hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": updated}}
    # Codex applies updatedInput only with an allow decision (and Claude Code skips its own
    # prompt for the call then); cos's tools read local state or write the brain. A deny or
    # ask rule of the user's still wins over a hook's allow.
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                   "updatedInput": updated}}
