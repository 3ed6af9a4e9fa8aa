"""The agents a foreground run or a job names (`cos run --agent`, `cos bg --agent`): `claude`,
`codex`, `gemini`, `exec`, `python:TARGET`, or `acp:COMMAND`, each as the session settings the
engine runs."""

from __future__ import annotations

import os

from coding_os.errors import InvalidInput
from coding_os.runtime.backends import BACKENDS
from coding_os.runtime.settings import SessionSettings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["settings_for"]


def settings_for(agent: str, cwd: str | None = None, *, model: str | None = None,
                 seed_ref: Mapping[str, object] | None = None) -> SessionSettings:
    """The session settings `agent` names: `claude`, `codex`, `gemini` (Gemini CLI through ACP),
    `exec`, `python:TARGET` with TARGET `module:attr`, `path/to/file.py:attr` (from here) or the
    name of an entry point of the group `coding_os.agents`, or `acp:COMMAND` with COMMAND an ACP
    agent's command line or a short name of adapters/acp_agents.py (`acp:gemini`); `cwd`
    (default: here) made absolute. `seed_ref` (a recipe's)
    goes in the options, so the session's `session_configured` records it.

    Raises:
        InvalidInput: no backend of that name, `python` or `acp` without a target.
    """
    name, _, target = agent.partition(":")
    if name not in BACKENDS:
        raise InvalidInput(f"no agent {name!r}: expected one of {', '.join(BACKENDS)} "
                           "(python:MODULE:ATTR for a Python agent)")
    options: dict[str, object] = {}
    if name == "python":
        if not target:
            raise InvalidInput("a Python agent is named python:MODULE:ATTR, "
                               "python:FILE.py:ATTR or python:ENTRY_POINT")
        module, sep, attr = target.rpartition(":")
        if sep and (module.endswith(".py") or os.sep in module):
            target = f"{os.path.abspath(module)}:{attr}"  # a file named from here
        options["target"] = target
    elif name == "acp":
        from coding_os.adapters.acp_agents import acp_command

        try:
            acp_command(target)
        except ValueError as error:
            raise InvalidInput(f"{error} (acp:gemini, acp:claude-agent-acp, "
                               "acp:codex-acp or any command line)") from None
        options["command"] = target
    elif target:
        raise InvalidInput(f"the {name} agent takes no target ({agent!r})")
    if seed_ref is not None:
        options["seed_ref"] = dict(seed_ref)
    return SessionSettings(agent=name, cwd=os.path.abspath(cwd or os.getcwd()), model=model,
                           options=options)
