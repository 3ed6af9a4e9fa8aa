"""Which session a call to cos's MCP server (or a brain command) comes from.

One MCP server can serve several panels of one agent at once, so its own environment cannot say
which panel called. The PreToolUse hook knows: it adds the calling panel's session to the tool's
input as `agent_session` (the PreToolUse hook, hooks/events.py). The server takes, in order:

1. `injected`: that `agent_session`, when it is a well-formed session id of the server's agent;
2. `panel`: the session file of the panel its environment names (COS_PANEL_ID, or the agent's
   own session variable such as CLAUDE_CODE_SESSION_ID), never a guess from the parent pid;
3. `active-session`: the agent's `.active-session` (its most recently started session);
4. `synthetic`: `ses-<agent>-mcp-<pid>`, so that nothing is filed under another session.

Every row the brain writes keeps which of them it used (`attributed_by`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from coding_os import durable
from coding_os.state.caller import Caller, read_panel_session
from coding_os.state.identity import agent_of_session, is_session_id
from coding_os.state.statefile import parse_state

__all__ = ["Attribution", "attribute", "SOURCES"]

SOURCES = ("injected", "panel", "active-session", "synthetic", "cli")


@dataclass(frozen=True)
class Attribution:
    """The session a call is filed under, and how it was known."""

    session: str | None
    source: str  # one of SOURCES
    rejected: str | None = None  # an injected value that was not a session id, for the log

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"session": self.session, "attributed_by": self.source}
        if self.rejected:
            out["rejected_agent_session"] = self.rejected
        return out


def attribute(caller: Caller, injected: object = None, env: Mapping[str, str] | None = None,
              synthetic: str | None = "mcp") -> Attribution:
    """The session of the caller, by the order in the module docstring; with `synthetic` None
    (the command line), the last resort is no session (`cli`) instead of a made-up one."""
    env = os.environ if env is None else env
    rejected = None
    if isinstance(injected, str) and injected:
        # The hook injects its own panel's session: one of this agent's. Another agent's id
        # (the hook did not run, and the model wrote one) is not taken on trust.
        if agent_of_session(injected) == caller.agent:
            return Attribution(injected, "injected")
        rejected = injected[:80]
    elif injected is not None:
        rejected = repr(injected)[:80]
    if caller.panel_source in ("env", "adapter_env"):
        current = read_panel_session(caller.panel_dir)
        if current is not None:
            return Attribution(current[0], "panel", rejected)
    active = durable.read_small(os.path.join(caller.tiers.agent_dir(caller.agent),
                                             ".active-session"), 8192)
    parsed = parse_state(active) if active else None
    if parsed is not None and is_session_id(parsed[0]):
        return Attribution(parsed[0], "active-session", rejected)
    if synthetic is None:
        return Attribution(None, "cli", rejected)
    return Attribution(f"ses-{caller.agent}-{synthetic}-{os.getpid()}", "synthetic", rejected)
