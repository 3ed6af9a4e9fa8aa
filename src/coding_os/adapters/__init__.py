"""What coding-os knows about each agent runtime it adapts, as data.

Identity (DESIGN.md §3.3) reads these lists instead of keeping its own copies: adding an adapter
or an environment variable here routes every reader. Kept free of imports (but `os`, loaded
at every start): it is on the hook path.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing is not imported at run time (the hook path)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import TypeGuard

__all__ = [
    "AdapterSpec", "ADAPTERS", "ADAPTER_NAMES", "PANEL_ENV_VARS", "FILE_TOOLS", "PATCH_TOOLS",
    "SHELL_TOOLS", "WRITE_TOOLS", "PATCH_FILE_PREFIXES", "HOOK_EVENTS", "GEMINI_HOOK_EVENTS",
    "EVENT_ALIASES", "LOG_DIRS", "adapter", "hook_events", "is_native_id", "log_dir",
    "patch_files",
]


class AdapterSpec:
    """One agent runtime: its name and the environment variables that identify it."""

    __slots__ = ("name", "session_env", "runtime_markers", "host_pid_env")

    def __init__(self, name: str, session_env: tuple[str, ...],
                 runtime_markers: tuple[str, ...], host_pid_env: str | None = None) -> None:
        self.name = name
        # Variables holding the runtime's own session id, in the order they are trusted.
        self.session_env = session_env
        # Variables whose presence says "running inside it".
        self.runtime_markers = runtime_markers
        # The variable a hook gets holding the agent process's pid (the same across /clear).
        self.host_pid_env = host_pid_env


ADAPTERS = (
    AdapterSpec(
        "claude",
        session_env=("CLAUDE_CODE_SESSION_ID", "CLAUDE_SESSION_ID"),
        runtime_markers=("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SESSION_ID"),
        host_pid_env="CLAUDE_PID",
    ),
    AdapterSpec(
        "codex",
        session_env=("CODEX_SESSION_ID", "CODEX_THREAD_ID"),
        # Codex gives hook processes no session variable (only the payload has it); its tool
        # processes get CODEX_SESSION_ID (the root session) and CODEX_THREAD_ID (a subagent's).
        runtime_markers=("CODEX_SESSION_ID", "CODEX_THREAD_ID", "CODEX_SANDBOX",
                         "CODEX_SANDBOX_NETWORK_DISABLED", "CODEX_CI", "CODEX_MANAGED_BY_NPM"),
    ),
    AdapterSpec(
        "gemini",
        # Gemini CLI gives its hook processes GEMINI_SESSION_ID, and the shell commands it runs
        # GEMINI_CLI=1 (checked with 0.61.0).
        session_env=("GEMINI_SESSION_ID",),
        runtime_markers=("GEMINI_CLI",),
    ),
)
# Edit tools whose input names the one file they write, and the input key holding it.
FILE_TOOLS = {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path",
              "NotebookEdit": "notebook_path",
              # Gemini CLI's edit tools.
              "write_file": "file_path", "replace": "file_path"}
# Tools whose input is a patch (Codex's apply_patch, as its hooks report it: {"command": patch}).
PATCH_TOOLS = ("apply_patch",)
PATCH_FILE_PREFIXES = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")
# Tools that run a shell command (Claude Code's Bash; Codex reports its exec_command as Bash to
# hooks, older versions as shell, local_shell or unified_exec; Gemini CLI's run_shell_command).
SHELL_TOOLS = ("Bash", "shell", "exec_command", "local_shell", "unified_exec",
               "run_shell_command")
# Tools that may write to the working tree: a checkpoint is taken before each call.
WRITE_TOOLS = (*FILE_TOOLS, *PATCH_TOOLS, *SHELL_TOOLS)
# The hook events of Claude Code and Codex that cos installs and handles (DESIGN.md §9).
HOOK_EVENTS = (
    "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
    "SubagentStart", "SubagentStop", "PreCompact", "SessionEnd",
)
# Where each agent keeps its own logs, the one copy: the variable naming the folder itself, the
# variable naming a home directory to use instead of the caller's, and the folder's name there.
LOG_DIRS = {
    "claude": ("CLAUDE_CONFIG_DIR", None, ".claude"),
    "codex": ("CODEX_HOME", None, ".codex"),
    # Gemini CLI's GEMINI_CLI_HOME replaces the home directory its `.gemini` is found in.
    "gemini": (None, "GEMINI_CLI_HOME", ".gemini"),
}
# Gemini CLI's hook events (DESIGN.md §9), each with the event of Claude Code's that cos handles
# it as: its tool events are PreToolUse and PostToolUse (a checkpoint before a writing tool),
# BeforeAgent is a prompt, AfterAgent a turn's end.
GEMINI_HOOK_EVENTS = {
    "SessionStart": "SessionStart", "BeforeAgent": "UserPromptSubmit",
    "BeforeTool": "PreToolUse", "AfterTool": "PostToolUse", "AfterAgent": "Stop",
    "PreCompress": "PreCompact", "SessionEnd": "SessionEnd",
}
# An event name of another agent's that cos handles as one of HOOK_EVENTS.
EVENT_ALIASES = {name: event for name, event in GEMINI_HOOK_EVENTS.items() if name != event}
ADAPTER_NAMES = tuple(spec.name for spec in ADAPTERS)
PANEL_ENV_VARS = tuple(var for spec in ADAPTERS for var in spec.session_env)


# What an agent's own session id may hold: cos names files after it and passes it to the agent's
# command (`claude --resume <id>`), so it is a name with nothing to escape. Claude Code's, Codex's
# and Gemini CLI's ids are UUIDs.
_NATIVE_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
NATIVE_ID_MAX = 128


def is_native_id(value: object) -> TypeGuard[str]:
    """Whether `value` can be an agent's own session id: 1 to NATIVE_ID_MAX ASCII letters,
    digits, `_` and `-`, the first a letter or a digit."""
    return isinstance(value, str) and 0 < len(value) <= NATIVE_ID_MAX \
        and value[0] not in "_-" and _NATIVE_ID_CHARS.issuperset(value)


def adapter(name: str) -> AdapterSpec | None:
    """The adapter called `name`, or None for an agent coding-os has no adapter for."""
    for spec in ADAPTERS:
        if spec.name == name:
            return spec
    return None


def hook_events(agent: str) -> tuple[str, ...]:
    """The hook events `cos init --agent <agent>` installs, by the agent's own names."""
    return tuple(GEMINI_HOOK_EVENTS) if agent == "gemini" else HOOK_EVENTS


def log_dir(name: str, environ: Mapping[str, str]) -> str:
    """Where the agent called `name` (a key of LOG_DIRS) keeps its logs for a caller with
    environment `environ` (its HOME, else this process's home directory)."""
    folder_env, home_env, folder = LOG_DIRS[name]
    if folder_env and environ.get(folder_env):
        return environ[folder_env]
    home = (home_env and environ.get(home_env)) or environ.get("HOME") \
        or os.path.expanduser("~")
    return os.path.join(os.path.abspath(home) if home_env else home, folder)


def patch_files(patch: str) -> list[str]:
    """The files a patch tool's input adds, updates, deletes or moves to, each once, in order."""
    paths: list[str] = []
    for line in patch.splitlines():
        for prefix in PATCH_FILE_PREFIXES:
            if line.startswith(prefix):
                path = line[len(prefix):].strip()
                if path and path not in paths:
                    paths.append(path)
    return paths
