"""What coding-os knows about each agent runtime it adapts, as data.

Identity (DESIGN.md §3.3) reads these lists instead of keeping its own copies: adding an adapter
or an environment variable here routes every reader. Kept free of imports: it is on the hook path.
"""

from __future__ import annotations

__all__ = [
    "AdapterSpec", "ADAPTERS", "ADAPTER_NAMES", "PANEL_ENV_VARS", "FILE_TOOLS", "adapter",
]


class AdapterSpec:
    """One agent runtime: its name and the environment variables that identify it."""

    __slots__ = ("name", "session_env", "runtime_markers")

    def __init__(self, name: str, session_env: tuple[str, ...],
                 runtime_markers: tuple[str, ...]) -> None:
        self.name = name
        # Variables holding the runtime's own session id, in the order they are trusted.
        self.session_env = session_env
        # Variables (a trailing `*` makes a prefix) whose presence says "running inside it".
        self.runtime_markers = runtime_markers


ADAPTERS = (
    AdapterSpec(
        "claude",
        session_env=("CLAUDE_CODE_SESSION_ID", "CLAUDE_SESSION_ID"),
        runtime_markers=("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SESSION_ID"),
    ),
    AdapterSpec(
        "codex",
        session_env=("CODEX_SESSION_ID", "CODEX_THREAD_ID"),
        runtime_markers=("CODEX_SESSION_ID", "CODEX_THREAD_ID", "CODEX_SANDBOX",
                         "CODEX_SANDBOX_NETWORK_DISABLED", "CODEX_CI"),
    ),
)
# Edit tools whose input names the one file they write, and the input key holding it.
FILE_TOOLS = {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path",
              "NotebookEdit": "notebook_path"}
ADAPTER_NAMES = tuple(spec.name for spec in ADAPTERS)
PANEL_ENV_VARS = tuple(var for spec in ADAPTERS for var in spec.session_env)


def adapter(name: str) -> AdapterSpec | None:
    """The adapter called `name`, or None for an agent coding-os has no adapter for."""
    for spec in ADAPTERS:
        if spec.name == name:
            return spec
    return None
