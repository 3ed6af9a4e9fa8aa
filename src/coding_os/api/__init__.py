"""The one facade the interfaces call: the command line, the MCP server, the web view, the
picker and any embedding runtime (the hook entry hands its payload to `hooks.events.handle`).

One module per concept — `state`, `sessions`, `checkpoints`, `brain`, `jobs`, `runs`,
`hosts` — each a set of plain functions over one context, `Project(env, cwd)` (project.py):
every function takes an optional environment and working directory, so tests and embedding
runtimes call them for any caller without touching `os.environ`, and each is that `Project`
and one call into the layer that does the work. Everything is re-exported here:
`api.rewind(...)`, `api.list_sessions(...)`.

Every `cos` command pays for what importing this package imports (benchmarks/resume_continue.py,
the plain `cos rewind`): the modules by concept import only `project.py` and the state files;
the layers are imported by the function that calls them, and the few names re-exported from a
layer (a class, a constant) when first asked for.
"""

from __future__ import annotations

from coding_os.api import brain, checkpoints, hosts, jobs, project, runs, sessions, state

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.api.brain import *  # noqa: F403
    from coding_os.api.checkpoints import *  # noqa: F403
    from coding_os.api.hosts import *  # noqa: F403
    from coding_os.api.jobs import *  # noqa: F403
    from coding_os.api.project import *  # noqa: F403
    from coding_os.api.runs import *  # noqa: F403
    from coding_os.api.sessions import *  # noqa: F403
    from coding_os.api.state import *  # noqa: F403

__all__: list[str] = []
__all__ += project.__all__
__all__ += state.__all__
__all__ += sessions.__all__
__all__ += checkpoints.__all__
__all__ += brain.__all__
__all__ += jobs.__all__
__all__ += runs.__all__
__all__ += hosts.__all__

# The module of the facade that holds each name.
_HOLDERS = {name: module for module in (project, state, sessions, checkpoints, brain, jobs, runs,
                                        hosts) for name in module.__all__}


def __getattr__(name: str) -> object:
    """`api.NAME`: the name from the module that holds it, kept here once asked for."""
    holder = _HOLDERS.get(name)
    if holder is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(holder, name)
    return value
