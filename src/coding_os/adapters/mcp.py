"""Where each agent finds cos's MCP server, and whether it can be reached.

`cos init` registers the server in the agent's project file (MCP_FILES); the SessionStart hook
reads that registration back to tell the agent when the server cannot be reached. The hooks
never depend on the server: state is files and the database.
"""

from __future__ import annotations

import os

__all__ = ["MCP_SERVER_NAME", "MCP_FILES", "MCP_TOOLS", "read_registration", "registered_server",
           "unreachable_reason"]

MCP_SERVER_NAME = "cos"
# agent -> the project file that registers MCP servers (Claude Code: .mcp.json; Codex: the
# `mcp_servers` table of its project config, read in trusted projects; Gemini CLI: the
# `mcpServers` of the project settings its hooks are in).
MCP_FILES = {"claude": ".mcp.json", "codex": os.path.join(".codex", "config.toml"),
             "gemini": os.path.join(".gemini", "settings.json")}
# The tools `cos mcp` serves (interfaces/mcp.py defines them; `cos doctor` expects them).
MCP_TOOLS = ("cos_sessions_search", "cos_session_show", "cos_checkpoints_list",
             "cos_rewind_preview", "cos_task_create", "cos_task_move", "cos_task_list",
             "cos_work_log_append", "cos_search")
CONNECT_TIMEOUT_S = 0.3
MAX_FILE_BYTES = 1 << 20


def read_registration(agent: str, checkout: str) -> object:
    """The `cos` entry of the agent's project MCP file as written there (any JSON/TOML value),
    or None when the file or the entry is not there. The file is the repository's: it is read
    only when it is a regular file of at most MAX_FILE_BYTES, never through a symlink.

    Raises:
        OSError: the file exists but cannot be read.
        InvalidInput: it is a symlink or not a regular file, or too large.
        ValueError: it is not valid JSON / TOML (or not UTF-8), or nested too deeply.
    """
    name = MCP_FILES.get(agent)
    if name is None:
        return None
    from coding_os import durable

    raw = durable.read_regular(os.path.join(checkout, name), MAX_FILE_BYTES)
    if raw is None:
        return None
    if agent == "codex":
        import tomllib

        try:
            servers = tomllib.loads(raw.decode("utf-8")).get("mcp_servers")
        except RecursionError:  # tomllib reads nested arrays and tables recursively
            raise ValueError("TOML nested too deeply") from None
    else:
        from coding_os import jsonwire

        data = jsonwire.loads(raw) if raw.strip() else {}
        servers = data.get("mcpServers") if isinstance(data, dict) else None
    return servers.get(MCP_SERVER_NAME) if isinstance(servers, dict) else None


def registered_server(agent: str, checkout: str) -> dict[str, object] | None:
    """The `cos` entry of the agent's project MCP file, or None when it has none (or the file
    cannot be read: a broken file is the agent's to report)."""
    from coding_os.errors import InvalidInput

    try:
        entry = read_registration(agent, checkout)
    except (OSError, ValueError, InvalidInput):
        return None
    return entry if isinstance(entry, dict) else None


def unreachable_reason(entry: dict[str, object]) -> str | None:
    """Why the registered server cannot be reached, or None when it looks reachable: an HTTP
    server must accept a connection; a stdio server's command must exist and be executable."""
    url = entry.get("url")
    if isinstance(url, str) and url:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return f"its URL {url[:100]} is not valid"
        import socket

        try:
            socket.create_connection((parts.hostname or "127.0.0.1", port),
                                     timeout=CONNECT_TIMEOUT_S).close()
        except OSError as exc:
            return f"nothing answers at {url[:100]} ({exc.strerror or exc})"
        return None
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        return "its entry names no command or URL"
    if os.sep in command:
        if not os.access(command, os.X_OK):
            return f"its command {command[:200]} does not exist or cannot be run"
    else:
        import shutil

        if shutil.which(command) is None:
            return f"its command {command[:100]} is not on PATH"
    return None
