"""Background jobs (DESIGN.md §6): coding_os.jobs.control makes and drives them; and the
per-user daemon that watches over their runners (coding_os.daemon.server)."""

from __future__ import annotations

from coding_os.api.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.jobs.control import JobFeed
    from collections.abc import Callable, Mapping
    from typing import Any

    from coding_os.runtime.core import SessionSettings
    from coding_os.runtime.foreground import View as RunView

__all__ = ["bg_start", "agents_list", "job_attach", "job_reply", "job_approve", "job_logs",
           "job_stop", "job_respawn", "job_remove", "jobs_gc", "session_job", "JobFeed",
           "job_feed", "job_interrupt"]

# The layers' names this module re-exports, imported when first asked for (`__getattr__`).
_FROM_LAYERS = {"JobFeed": "coding_os.jobs.control"}


def __getattr__(name: str) -> object:
    """A name of `_FROM_LAYERS`, from its layer: importing the facade loads none of them."""
    if name not in _FROM_LAYERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(__import__(_FROM_LAYERS[name], fromlist=[name]), name)


def bg_start(prompt: str | None, *, agent: str | None = None, command: str | None = None,
             name: str | None = None, isolation: str = "worktree", model: str | None = None,
             permission_mode: str | None = None, recipe: str | None = None,
             params: list[str] | None = None, cwd: str | None = None, carry: bool = False,
             env: Mapping[str, str] | None = None) -> dict[str, object]:
    """`cos bg`: start `prompt` (or `command`, or the prompt `recipe` renders) as a background
    job of `agent`; its row, at once. `carry`: the checkout's uncommitted changes go into the
    job's worktree (control.start_job).

    Raises:
        InvalidInput: as control.start_job, or a bad agent. RecipeError: as
            `prepare_recipe_run`. StateIOError, JobError: the job could not be made.
    """
    from coding_os.api.checkpoints import checkpoint_create
    from coding_os.jobs import control, jobs

    settings, prompt, seed_ref = control.bg_run(
        prompt, lambda where: str(checkpoint_create(env=env, cwd=where)["id"]), agent=agent,
        command=command, recipe=recipe, params=params, model=model,
        permission_mode=permission_mode, cwd=cwd)
    job = control.start_job(settings, prompt, name=name, isolation=isolation, seed_ref=seed_ref,
                            in_worktree=_worktree_hooks(settings), carry=carry, env=env)
    return jobs.row(job, alive=True)


def agents_list(every: bool = False, cwd: str | None = None,
                env: Mapping[str, str] | None = None,
                publish: bool = False) -> list[dict[str, Any]]:
    """`cos agents`: the rows of the jobs of the project of `cwd` (or of every project);
    `publish`: also publish this host's rows to a shared storage (for the other hosts'
    `cos agents --all-hosts`; a failure to is no failure of the listing)."""
    from coding_os.jobs import control

    return control.agents(every, cwd, env, publish)


def job_attach(job: str, view: RunView, *, since: int = 0, interactive: bool = False,
               env: Mapping[str, str] | None = None) -> int:
    """`cos attach`: show the job's events after `since` through `view`, then the live ones
    until the job's runner ends (or, `interactive`, Ctrl-D detaches: lines typed are replies,
    Ctrl-C interrupts). 0; 1 when the job ended failed.

    Raises:
        NotFound, Ambiguous: as jobs.resolve. InvalidInput: `since` beyond the end.
    """
    from coding_os.jobs import control

    return control.attach_view(job, view, since=since, interactive=interactive, env=env)


def job_reply(job: str, text: str, env: Mapping[str, str] | None = None) -> dict[str, object]:
    """`cos reply`: `text` as the job's next user input."""
    from coding_os.jobs import control

    return control.reply(job, text, env)


def job_approve(job: str, allow: bool = True, request: str | None = None,
                env: Mapping[str, str] | None = None) -> dict[str, object]:
    """`cos approve`: answer the approval the job waits for."""
    from coding_os.jobs import control

    return control.approve(job, allow, request, env)


def job_logs(job: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`cos logs`: the job's row, its events and its runner's stderr."""
    from coding_os.jobs import control

    return control.logs(job, env)


def job_stop(job: str, env: Mapping[str, str] | None = None) -> dict[str, object]:
    """`cos stop`: interrupt the job and end its runner; it stays stopped."""
    from coding_os.jobs import control

    return control.stop(job, env)


def job_respawn(job: str | None, every: bool = False,
                env: Mapping[str, str] | None = None) -> list[dict[str, object]]:
    """`cos respawn`: start the runner of a failed or stopped job again (or of every failed
    one), resuming its native session."""
    from coding_os.jobs import control

    return control.respawn(job, every=every, env=env)


def job_remove(job: str, force: bool = False,
               env: Mapping[str, str] | None = None) -> dict[str, object]:
    """`cos rm`: remove a job that does not run and its worktree (refused when it holds work,
    unless `force`); its transcript and events stay."""
    from coding_os.jobs import control

    return control.remove(job, force, env)


def jobs_gc(dry_run: bool = False, env: Mapping[str, str] | None = None,
            cwd: str | None = None) -> dict[str, Any]:
    """The jobs ended longer ago than cleanup_period_days, removed with their worktrees (a
    worktree that holds work is kept, and said)."""
    from coding_os.jobs import control

    return control.gc_jobs(Project(env, cwd, create=False).period_days, dry_run, env)


def session_job(session: str, env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The row of the background job whose session is `session`, or None."""
    from coding_os.jobs import control

    return control.session_job(session, env)


def job_feed(job: str, since: int = 0, env: Mapping[str, str] | None = None) -> JobFeed:
    """The feed of job `job`'s events after seq `since` (see `JobFeed`).

    Raises:
        NotFound, Ambiguous: as jobs.resolve. InvalidInput: `since` beyond the end.
    """
    from coding_os.jobs import control

    return control.feed(job, since, env)


def job_interrupt(job: str, env: Mapping[str, str] | None = None) -> dict[str, object]:
    """Interrupt the job's running task (`turn_aborted` `interrupted`); the job goes on.

    Raises:
        NotFound, Ambiguous: as jobs.resolve. Conflict: its runner does not run.
        InvalidInput: the runner refused (no task runs).
    """
    from coding_os.jobs import control

    return control.interrupt(job, env)


def _worktree_hooks(settings: SessionSettings) -> Callable[[str], dict[str, object]]:
    """For Claude Code in a worktree: the cos hooks of the checkout's settings files, which
    the worktree may lack (uncommitted), passed with --settings (install.py)."""
    from functools import partial

    from coding_os.install import worktree_hooks

    return partial(worktree_hooks, settings.agent, settings.options)
