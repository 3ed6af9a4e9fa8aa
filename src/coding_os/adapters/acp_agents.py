"""The ACP agents cos knows by a short name (DESIGN.md §12.2), in one table with the versions
checked here (the ones tests/e2e/clients/package.json pins): `--agent acp:gemini` runs
`gemini --acp`. Any other `acp:<command line>` runs that command as it is."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

__all__ = ["AcpAgent", "ACP_AGENTS", "acp_command"]


@dataclass(frozen=True)
class AcpAgent:
    """A known ACP agent: its short name, the command that speaks ACP on stdio, and the npm
    package and version it was checked with."""

    name: str
    command: tuple[str, ...]
    package: str
    version: str


ACP_AGENTS: dict[str, AcpAgent] = {agent.name: agent for agent in (
    AcpAgent("gemini", ("gemini", "--acp"), "@google/gemini-cli", "0.61.0"),
    AcpAgent("claude-agent-acp", ("claude-agent-acp",), "@zed-industries/claude-agent-acp",
             "0.23.1"),
    AcpAgent("codex-acp", ("codex-acp",), "@zed-industries/codex-acp", "0.16.0"),
)}


def acp_command(line: str) -> list[str]:
    """The argv `acp:<line>` runs: a known agent's command for its short name, else `line`
    split as a shell would (no shell runs it).

    Raises:
        ValueError: an empty line, or one with unbalanced quotes.
    """
    known = ACP_AGENTS.get(line.strip())
    if known is not None:
        return list(known.command)
    argv = shlex.split(line)
    if not argv:
        raise ValueError("an ACP agent is named acp:<command line>")
    return argv
