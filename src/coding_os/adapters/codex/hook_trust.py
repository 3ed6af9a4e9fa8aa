"""Which of a project's hooks Codex runs: its project trust and its hook trust (checked with
Codex 0.169.0, its `codex app-server` `hooks/list` and plain `codex exec`).

Codex reads a project's `.codex/` (its `config.toml` and `hooks.json`) only in a project its
user trusts, a line of `$CODEX_HOME/config.toml` (Codex's trust prompt and `codex exec --trust`
write it), looked up for the directory holding `.codex/`, its project root, then the main
repository of a linked worktree:

    [projects."/abs/project"]
    trust_level = "trusted"

Even in a trusted project it runs a hook of `hooks.json` only when the user's config trusts
that very hook, by a key naming its place and the hash of what it runs:

    [hooks.state."/abs/project/.codex/hooks.json:pre_tool_use:0:0"]
    trusted_hash = "sha256:…"

The key is `<hooks.json path>:<event label>:<group index>:<handler index>` (the indexes count
in the event's list of the file); the hash is `sha256:` and the hex digest of the hook's
normalised identity as JSON with sorted keys and no spaces: `event_name` (the label), the
group's `matcher` (for the events that have one) and `hooks`, its one handler as Codex reads it
(`type`, `command`, `timeout` — 600 when unset, at least 1; for SessionEnd 1 when unset, at
most 3 —, `async`, and `statusMessage` when set). A hook whose trusted hash is not its current
one is "modified" and does not run either; `enabled = false` in its state turns it off, and
`[features] hooks = false` turns off every hook. `codex --dangerously-bypass-hook-trust` skips
the hook trust for one run. A key is built from the path as Codex walks up from its working
directory: a checkout reached through a symlink names another path than the physical one used
here.

Nothing here runs Codex: the trust is read from, and written as, the user's own config file.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coding_os import durable
from coding_os.errors import InvalidInput, StateIOError

__all__ = [
    "EVENT_LABELS",
    "SESSION_END_MAX_TIMEOUT_S",
    "CodexHook",
    "codex_home",
    "user_config_path",
    "read_config",
    "hook_hash",
    "hooks_of",
    "hook_status",
    "project_trust",
    "hooks_turned_off",
    "toml_string",
    "trust_table",
    "project_trust_lines",
]

# The events Codex reads from hooks.json, and the label each has in a hook's key and identity.
EVENT_LABELS = {
    "PreToolUse": "pre_tool_use",
    "PermissionRequest": "permission_request",
    "PostToolUse": "post_tool_use",
    "PreCompact": "pre_compact",
    "PostCompact": "post_compact",
    "SessionStart": "session_start",
    "SessionEnd": "session_end",
    "UserPromptSubmit": "user_prompt_submit",
    "SubagentStart": "subagent_start",
    "SubagentStop": "subagent_stop",
    "Stop": "stop",
}
# Events whose matcher Codex keeps; for the others it reads none.
_MATCHER_EVENTS = frozenset({"PreToolUse", "PermissionRequest", "PostToolUse", "PreCompact",
                             "PostCompact", "SessionStart", "SubagentStart", "SubagentStop"})
DEFAULT_TIMEOUT_S = 600
# Codex cuts a SessionEnd hook's timeout to this, with a warning on every run.
SESSION_END_MAX_TIMEOUT_S = 3
MAX_CONFIG_BYTES = 16 << 20


@dataclass(frozen=True)
class CodexHook:
    """One command hook of a hooks.json as Codex keys and hashes it."""

    key: str
    hash: str
    event: str
    group: int
    command: str


def codex_home(env: Mapping[str, str]) -> str:
    """Codex's home: `CODEX_HOME`, else `~/.codex`."""
    configured = env.get("CODEX_HOME")
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    return os.path.join(env.get("HOME") or os.path.expanduser("~"), ".codex")


def user_config_path(env: Mapping[str, str]) -> str:
    """The user's Codex config, where both trusts are kept: `$CODEX_HOME/config.toml`."""
    return os.path.join(codex_home(env), "config.toml")


def read_config(path: str) -> tuple[dict[str, Any], str | None]:
    """The parsed TOML at `path` and its text (an empty config and None when it is absent).

    Raises:
        InvalidInput: it is not a regular file, too large, not UTF-8 or not valid TOML.
        StateIOError: it cannot be read.
    """
    import tomllib

    try:
        raw = durable.read_regular(path, MAX_CONFIG_BYTES)
    except OSError as exc:
        raise StateIOError(f"cannot read {path}: {exc.strerror or exc}") from None
    if raw is None:
        return {}, None
    try:
        text = raw.decode("utf-8")
        return tomllib.loads(text), text
    except UnicodeDecodeError:
        raise InvalidInput(f"{path} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"{path} is not valid TOML ({exc})") from None
    except RecursionError:  # tomllib reads nested arrays and tables recursively
        raise InvalidInput(f"{path} is not valid TOML (nested too deeply)") from None


def _canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def hook_hash(event: str, matcher: object, handler: Mapping[str, Any]) -> str | None:
    """The hash Codex trusts a command hook by (`sha256:<hex>`), or None for a handler Codex
    does not run as a command (another type, no command, a malformed field)."""
    command = handler.get("command")
    timeout = handler.get("timeout")
    run_async = handler.get("async", False)
    status = handler.get("statusMessage")
    if handler.get("type") != "command" or not isinstance(command, str) or not command.strip() \
            or not (timeout is None or isinstance(timeout, int) and not isinstance(timeout, bool)
                    and timeout >= 0) \
            or not isinstance(run_async, bool) or not (status is None or isinstance(status, str)):
        return None
    if event == "SessionEnd":
        seconds = min(max(1, 1 if timeout is None else timeout), SESSION_END_MAX_TIMEOUT_S)
    else:
        seconds = max(1, DEFAULT_TIMEOUT_S if timeout is None else timeout)
    normalised: dict[str, Any] = {"type": "command", "command": command, "timeout": seconds,
                                  "async": run_async}
    if status is not None:
        normalised["statusMessage"] = status
    identity: dict[str, Any] = {"event_name": EVENT_LABELS[event], "hooks": [normalised]}
    if event in _MATCHER_EVENTS and isinstance(matcher, str):
        identity["matcher"] = matcher
    return "sha256:" + hashlib.sha256(_canonical(identity)).hexdigest()


def hooks_of(path: str, settings: Mapping[str, Any]) -> list[CodexHook]:
    """Every command hook of the hooks.json at `path` (its parsed `settings`) with its key and
    hash, in the file's order."""
    found: list[CodexHook] = []
    hooks = settings.get("hooks")
    for event, groups in (hooks.items() if isinstance(hooks, dict) else ()):
        if event not in EVENT_LABELS or not isinstance(groups, list):
            continue
        for group_index, group in enumerate(groups):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for handler_index, handler in enumerate(handlers if isinstance(handlers, list)
                                                    else ()):
                digest = hook_hash(event, group.get("matcher"), handler) \
                    if isinstance(handler, dict) else None
                if digest is not None:
                    found.append(CodexHook(
                        f"{path}:{EVENT_LABELS[event]}:{group_index}:{handler_index}", digest,
                        event, group_index, str(handler["command"])))
    return found


def _state(config: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    hooks = config.get("hooks")
    states = hooks.get("state") if isinstance(hooks, dict) else None
    state = states.get(key) if isinstance(states, dict) else None
    return state if isinstance(state, dict) else {}


def hook_status(config: Mapping[str, Any], hook: CodexHook) -> str:
    """What Codex makes of `hook` with the user's `config`: `trusted` (it runs), `untrusted`
    (never trusted), `modified` (trusted as something else) or `disabled` (turned off)."""
    state = _state(config, hook.key)
    if state.get("enabled") is False:
        return "disabled"
    trusted = state.get("trusted_hash")
    if not isinstance(trusted, str):
        return "untrusted"
    return "trusted" if trusted == hook.hash else "modified"


def project_trust(config: Mapping[str, Any], directory: str,
                  main_repository: str | None = None) -> str | None:
    """The trust level Codex gives `directory` (its `.codex/` folder's parent) from the user's
    `config`: `trusted`, `untrusted`, or None when the user never said; looked up for the
    directory (as given and physical), then the main repository of a linked worktree."""
    projects = config.get("projects")
    if not isinstance(projects, dict):
        return None
    candidates = [os.path.realpath(directory), directory]
    if main_repository:
        candidates += [os.path.realpath(main_repository), main_repository]
    for candidate in dict.fromkeys(candidates):
        entry = projects.get(candidate)
        level = entry.get("trust_level") if isinstance(entry, dict) else None
        if isinstance(level, str):
            return level
    return None


def hooks_turned_off(config: Mapping[str, Any]) -> bool:
    """Whether the user's config turns every hook off (`[features] hooks = false`)."""
    features = config.get("features")
    return isinstance(features, dict) and features.get("hooks") is False


def toml_string(value: str) -> str:
    """`value` as a TOML basic string (JSON's escapes are TOML's; DEL must be escaped too).

    Raises:
        InvalidInput: it holds a character TOML cannot carry (an unpaired surrogate, as a path
            that is not UTF-8 decodes to).
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{value[:200]!r} cannot be written in TOML (not UTF-8)") from None
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def trust_table(hook: CodexHook) -> str:
    """The lines of the user's config that trust `hook` as it is now.

    Raises:
        InvalidInput: its key cannot be written in TOML.
    """
    return f"[hooks.state.{toml_string(hook.key)}]\ntrusted_hash = {toml_string(hook.hash)}\n"


def project_trust_lines(directory: str) -> str:
    """The lines of the user's config that make Codex trust the project at `directory`.

    Raises:
        InvalidInput: its path cannot be written in TOML.
    """
    return f"[projects.{toml_string(directory)}]\ntrust_level = \"trusted\"\n"
