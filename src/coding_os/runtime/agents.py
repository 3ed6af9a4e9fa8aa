"""The agents a foreground run or a job names (`cos run --agent`, `cos bg --agent`): `claude`,
`codex`, `exec`, or `python:TARGET`, each as the session settings the engine runs."""

from __future__ import annotations

import os

from coding_os.errors import InvalidInput
from coding_os.runtime.backends import BACKENDS
from coding_os.runtime.core import SessionSettings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["settings_for"]


def settings_for(agent: str, cwd: str | None = None, *, model: str | None = None,
                 seed_ref: Mapping[str, object] | None = None) -> SessionSettings:
    """The session settings `agent` names: `claude`, `codex`, `exec`, or `python:TARGET` with
    TARGET `module:attr`, `path/to/file.py:attr` (from here) or the name of an entry point of
    the group `coding_os.agents`; `cwd` (default: here) made absolute. `seed_ref` (a recipe's)
    goes in the options, so the session's `session_configured` records it.

    Raises:
        InvalidInput: no backend of that name, or `python` without a target.
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
    elif target:
        raise InvalidInput(f"the {name} agent takes no target ({agent!r})")
    if seed_ref is not None:
        options["seed_ref"] = dict(seed_ref)
    return SessionSettings(agent=name, cwd=os.path.abspath(cwd or os.getcwd()), model=model,
                           options=options)
