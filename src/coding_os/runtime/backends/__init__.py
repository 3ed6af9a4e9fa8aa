"""The backends of the engine (DESIGN.md §6), one module each, imported only when used:
`claude` (Claude Code over stream-json), `codex` (Codex's app-server), `python` (a cos-native
agent runtime), `exec` (a command, no model), and `acp` (any ACP agent; `gemini` is Gemini CLI
through it)."""

from __future__ import annotations

import importlib

from coding_os.errors import InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.runtime.backend import Backend

__all__ = ["BACKENDS", "backend_for"]

# agent name → "module:class" of its backend
BACKENDS = {
    "claude": "coding_os.runtime.backends.claude:ClaudeBackend",
    "codex": "coding_os.runtime.backends.codex:CodexBackend",
    "python": "coding_os.runtime.backends.python:PythonBackend",
    "exec": "coding_os.runtime.backends.exec:ExecBackend",
    "acp": "coding_os.runtime.backends.acp:AcpBackend",
    "gemini": "coding_os.runtime.backends.acp:GeminiBackend",
}


def backend_for(agent: str) -> Backend:
    """A new backend for `agent`.

    Raises:
        InvalidInput: no backend of that name.
    """
    target = BACKENDS.get(agent)
    if target is None:
        raise InvalidInput(f"no backend {agent!r}: expected one of {', '.join(BACKENDS)}")
    module, _, name = target.partition(":")
    backend: Backend = getattr(importlib.import_module(module), name)()
    return backend
