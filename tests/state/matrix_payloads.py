"""Hook payloads shaped like the ones Claude Code 2.1 and Codex 0.169 put on a hook's stdin.

DESIGN.md §9: Claude Code always sends `session_id`, `transcript_path`, `cwd` and
`hook_event_name`, plus the fields of each event; Codex sends the same plus `turn_id`, `model` and
`permission_mode`, and reports its shell tool as `tool_name: "Bash"`.

When `tests/e2e/payloads/<agent>-<Event>.json` exists (a payload captured from a real client), it
is the template and only the identity fields (`session_id`, `cwd`, `transcript_path`,
`hook_event_name`) and the fields a test asks for are replaced; otherwise the shape below is used.
tests/e2e/payloads/ENV.md says what else the clients put in a hook's environment.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from pathlib import Path

__all__ = ["CAPTURED_DIR", "EVENTS", "new_native_id", "payload", "tool_response",
           "transcript_path"]

# Captured from the real clients by the e2e harness (tests/e2e/test_harness.py).
CAPTURED_DIR = Path(__file__).resolve().parents[1] / "e2e" / "payloads"
# Every event `cos init` installs a hook for (DESIGN.md §9).
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
          "SubagentStart", "SubagentStop", "PreCompact", "SessionEnd")
CODEX_MODEL = "gpt-5.1-codex"


def new_native_id() -> str:
    """A fresh native session id, a UUID as both clients use."""
    return str(uuid.uuid4())


def transcript_path(agent: str, native: str, cwd: Path | str) -> str:
    """Where the client keeps this session's own log (under the test's private HOME)."""
    home = os.environ["HOME"]
    if agent == "codex":
        stamp = time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime())
        day = time.strftime("%Y/%m/%d", time.gmtime())
        return f"{home}/.codex/sessions/{day}/rollout-{stamp}-{native}.jsonl"
    project = re.sub(r"[^A-Za-z0-9]", "-", str(cwd))
    return f"{home}/.claude/projects/{project}/{native}.jsonl"


def _event_fields(agent: str, event: str) -> dict[str, object]:
    """Per-event fields with plausible values; tests override what they assert on."""
    if event == "SessionStart":
        return {"source": "startup"}
    if event == "UserPromptSubmit":
        return {"prompt": "fix the failing test", "prompt_id": str(uuid.uuid4()),
                "permission_mode": "default"}
    if event in ("PreToolUse", "PostToolUse"):
        fields: dict[str, object] = {
            "tool_name": "Bash",
            "tool_input": {"command": "ls -la", "description": "List files"},
            "tool_use_id": (f"toolu_{uuid.uuid4().hex[:24]}" if agent == "claude"
                            else f"call_{uuid.uuid4().hex[:24]}"),
            "permission_mode": "default",
        }
        if event == "PostToolUse":
            fields["tool_response"] = tool_response(agent, "Bash")
        return fields
    if event == "Stop":
        return {"stop_hook_active": False, "last_assistant_message": "Done."}
    if event in ("SubagentStart", "SubagentStop"):
        return {"agent_id": f"agent-{uuid.uuid4().hex[:8]}", "agent_type": "general-purpose"}
    if event == "PreCompact":
        return {"trigger": "auto", "custom_instructions": ""}
    if event == "SessionEnd":
        return {"reason": "other"}
    return {}


def tool_response(agent: str, tool_name: str) -> object:
    """A successful tool result as the client reports it (Codex: the output as a string)."""
    if agent == "codex":
        return "Success. Updated the following files:\n" if tool_name == "apply_patch" else "ok\n"
    if tool_name == "Bash":
        return {"stdout": "ok\n", "stderr": "", "interrupted": False, "isImage": False}
    return {"type": "update", "filePath": "", "structuredPatch": [], "userModified": False}


def _captured(agent: str, event: str) -> dict[str, object] | None:
    path = CAPTURED_DIR / f"{agent}-{event}.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


def payload(agent: str, event: str, *, session_id: str, cwd: Path | str,
            **fields: object) -> dict[str, object]:
    """The stdin JSON of hook `event` for `agent`'s session `session_id` running in `cwd`."""
    body = _captured(agent, event)
    if body is None:
        body = _event_fields(agent, event)
        if agent == "codex":
            body.update(turn_id=str(uuid.uuid4()), model=CODEX_MODEL)
            body.setdefault("permission_mode", "default")
    if (event == "PostToolUse" and "tool_response" not in fields and "tool_name" in fields
            and fields["tool_name"] != body.get("tool_name")):
        # A captured template holds the response of another tool: answer as this tool would.
        body["tool_response"] = tool_response(agent, str(fields["tool_name"]))
    body.update(session_id=session_id, cwd=str(cwd), hook_event_name=event,
                transcript_path=transcript_path(agent, session_id, cwd))
    body.update(fields)
    return body
