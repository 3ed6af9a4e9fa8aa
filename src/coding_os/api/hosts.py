"""Several hosts on one shared storage (DESIGN.md §8): what this host pushes, and the other
hosts' jobs (coding_os.hosts, coding_os.jobs.roster). Another host's sessions are read through
the functions of `api.sessions`, which find them in the shared storage (hosts/remote.py)."""

from __future__ import annotations

from coding_os.api.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["sync_sessions", "agents_all_hosts", "job_elsewhere"]


def sync_sessions(env: Mapping[str, str] | None = None, cwd: str | None = None
                  ) -> dict[str, Any]:
    """Import what changed, then push the new lines of the project's session files to the
    shared storage (coding_os.hosts.replicate); on SQLite nothing is pushed and the report
    says why.

    Raises:
        Misroute, StorageError, StateIOError: as `import_sessions`.
        InvalidInput: COS_HOST is not a valid host name.
    """
    from coding_os.hosts import replicate

    project = Project(env, cwd)
    return project.index(lambda storage: replicate.sync(
        storage, project.tiers, project.root, project.refresh(storage, push=False).host
    ).to_dict())


def agents_all_hosts(every: bool = False, cwd: str | None = None,
                     env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """`cos agents --all-hosts`: this host's rows as `agents_list` gives them, then the rows
    the other hosts published to the shared storage (of the same repository, or of every
    project), each with its `host`.

    Raises:
        StorageError: the shared storage fails.
    """
    import os

    from coding_os.jobs import control

    here = None if every else Project(env, os.path.realpath(cwd or os.getcwd())).root
    return control.agents_all_hosts(here, cwd, env)


def job_elsewhere(job: str, command: str, env: Mapping[str, str] | None = None) -> None:
    """Refuse `cos <command> <job>` for a job this host does not have but another host
    published: CrossProject naming the command to run there. Nothing when no other host has it.

    Raises:
        CrossProject: the job runs on another host.
    """
    from coding_os.jobs import roster

    roster.refuse_elsewhere(job, command, env)
