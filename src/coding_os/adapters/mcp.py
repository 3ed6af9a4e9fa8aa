"""Where each agent finds cos's MCP server, and whether it can be reached.

`cos init` registers the server in the agent's project file (MCP_FILES); the SessionStart hook
reads that registration back to tell the agent when the server cannot be reached. The hooks
never depend on the server: state is files and the database.
"""

from __future__ import annotations

import os

__all__ = ["MCP_SERVER_NAME", "MCP_FILES", "registered_server", "unreachable_reason"]

MCP_SERVER_NAME = "cos"
# agent -> the project file that registers MCP servers (Claude Code: .mcp.json; Codex: the
# `mcp_servers` table of its project config, read in trusted projects).
MCP_FILES = {"claude": ".mcp.json", "codex": os.path.join(".codex", "config.toml")}
CONNECT_TIMEOUT_S = 0.3


def registered_server(agent: str, checkout: str) -> dict[str, object] | None:
    """The `cos` entry of the agent's project MCP file, or None when it has none (or the file
    cannot be read: a broken file is the agent's to report)."""
    name = MCP_FILES.get(agent)
    if name is None:
        return None
    path = os.path.join(checkout, name)
    try:
        with open(path, "rb") as f:
            raw = f.read(1 << 20)
    except OSError:
        return None
    try:
        if agent == "codex":
            import tomllib

            servers = tomllib.loads(raw.decode("utf-8")).get("mcp_servers")
        else:
            import json

            data = json.loads(raw)
            servers = data.get("mcpServers") if isinstance(data, dict) else None
    except (ValueError, UnicodeDecodeError):
        return None
    entry = servers.get(MCP_SERVER_NAME) if isinstance(servers, dict) else None
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
