"""Runs in the foreground and the protocol (DESIGN.md §6, §7): `cos run`, `cos protocol`, and
the recipes a run starts from (coding_os.jobs.recipes; a run from a recipe records its seed_ref
in the options of its `session_configured` event)."""

from __future__ import annotations

from coding_os.api.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.jobs.recipes import RESUME_MODES, RecipeRun
    from collections.abc import Mapping
    from typing import Any

    from coding_os.runtime.core import SessionSettings
    from coding_os.runtime.foreground import View as RunView

__all__ = ["run_agent_settings", "run_session", "serve_protocol", "RecipeRun", "RESUME_MODES",
           "prepare_recipe_run", "recipe_seed", "plan_rerun", "rerun_session"]

# The layers' names this module re-exports, imported when first asked for (`__getattr__`).
_FROM_LAYERS = {"RecipeRun": "coding_os.jobs.recipes", "RESUME_MODES": "coding_os.jobs.recipes"}


def __getattr__(name: str) -> object:
    """A name of `_FROM_LAYERS`, from its layer: importing the facade loads none of them."""
    if name not in _FROM_LAYERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(__import__(_FROM_LAYERS[name], fromlist=[name]), name)


def run_agent_settings(agent: str, cwd: str | None = None, *, model: str | None = None,
                       seed_ref: Mapping[str, object] | None = None) -> SessionSettings:
    """The session settings `cos run --agent AGENT` names: `claude`, `codex`, `exec`, or
    `python:TARGET` with TARGET `module:attr`, `path/to/file.py:attr` (from here) or the name of
    an entry point of the group `coding_os.agents`. `seed_ref` (a recipe's, see
    `prepare_recipe_run`) goes in the options, so the session's `session_configured` records it.

    Raises:
        InvalidInput: no backend of that name, or `python` without a target.
    """
    from coding_os.runtime.agents import settings_for

    return settings_for(agent, cwd, model=model, seed_ref=seed_ref)


def run_session(prompt: str | None, view: RunView, *, agent: str | None = None,
                cwd: str | None = None, approvals: str = "deny",
                env: Mapping[str, str] | None = None, recipe: str | None = None,
                params: Mapping[str, str] | None = None, model: str | None = None) -> int:
    """`cos run`: run `prompt` (or the prompt `recipe` renders with `params`) in a new session
    of `agent` (default: the recipe's, else claude) in the foreground, then each further prompt
    `view` reads, showing every event through `view`; the exit status of the last task
    (0 completed, 1 failed or aborted, 130 ended by Ctrl-C). `approvals`: `ask` (the view asks),
    `allow` or `deny` every request.

    Raises:
        InvalidInput: a bad agent or approvals policy; no prompt and no recipe, both, or params
            without a recipe. RecipeError: as `prepare_recipe_run`. Misroute, StateIOError: as
            the state dir.
    """
    from coding_os.api.checkpoints import checkpoint_create
    from coding_os.jobs.recipes import foreground_run
    from coding_os.runtime.foreground import run_foreground

    settings, text = foreground_run(
        prompt, lambda where: str(checkpoint_create(env=env, cwd=where)["id"]), recipe=recipe,
        params=params, agent=agent, model=model, cwd=cwd)
    return run_foreground(settings, text, view, approvals=approvals, env=env)


def serve_protocol(session: str | None = None, agent: str | None = None,
                   cwd: str | None = None, env: Mapping[str, str] | None = None) -> int:
    """`cos protocol`: the protocol of DESIGN.md §7 on stdin and stdout until shutdown or the
    end of stdin; its exit status. `session` serves that session (of this project); `agent` is
    the agent a `configure` without one starts; `cwd` the project and the agent's directory.

    Raises:
        InvalidInput: both a session and an agent, or an agent without a backend.
    """
    import os

    from coding_os.errors import InvalidInput
    from coding_os.runtime.backends import BACKENDS
    from coding_os.runtime.protocol import serve_stdio

    if session is not None and agent is not None:
        raise InvalidInput("give --session or --agent, not both")
    if agent is not None and agent.partition(":")[0] not in BACKENDS:
        raise InvalidInput(f"no backend {agent!r}: expected one of {', '.join(BACKENDS)}")
    return serve_stdio(session=session, agent=agent,
                       cwd=os.path.abspath(cwd) if cwd is not None else None, env=env)


def prepare_recipe_run(recipe: str, params: Mapping[str, str], *, agent: str | None = None,
                       model: str | None = None, cwd: str | None = None,
                       env: Mapping[str, str] | None = None) -> RecipeRun:
    """Load and render `recipe` with `params` (file parameters inside the checkout of `cwd`),
    then take a manual checkpoint of that checkout (the seed's `checkpoint`). `agent` and
    `model` win over the recipe's `settings`; the agent defaults to claude. Nothing is written
    when the recipe or a value is refused.

    Raises:
        RecipeError: as `load_recipe` and `render`. InvalidInput: a bad agent.
        GitError, StateIOError: the checkpoint cannot be taken.
    """
    from coding_os.api.checkpoints import checkpoint_create
    from coding_os.jobs.recipes import prepare_run

    return prepare_run(recipe, params,
                       lambda where: str(checkpoint_create(env=env, cwd=where)["id"]),
                       agent=agent, model=model, cwd=cwd)


def recipe_seed(session: str, env: Mapping[str, str] | None = None,
                cwd: str | None = None) -> dict[str, Any] | None:
    """The seed_ref of `session` (a cos session id of this project) when a recipe seeded it,
    else None (also for an id that is no cos session id)."""
    from coding_os.jobs.recipes import session_seed
    from coding_os.state.identity import is_session_id

    if not is_session_id(session):
        return None  # a native id: only cos runs sessions from recipes
    found = session_seed(Project(env, cwd, create=False).tiers, session)
    return None if found is None else found[0]


def plan_rerun(session: str, *, force: bool = False, env: Mapping[str, str] | None = None,
               cwd: str | None = None) -> dict[str, Any]:
    """What `cos resume SESSION --rerun` does, checked and changing nothing: jobs/recipes.py
    `plan_rerun` for the caller's project.

    Raises:
        As `recipes.plan_rerun`.
    """
    from coding_os.jobs import recipes

    project = Project(env, cwd, create=False)
    return recipes.plan_rerun(project.tiers, project.root, session, force=force)


def rerun_session(plan: Mapping[str, Any], view: RunView, *, approvals: str = "deny",
                  env: Mapping[str, str] | None = None, cwd: str | None = None) -> int:
    """Run a `plan_rerun` plan: the seed's checkpoint restored into the plan's fresh worktree,
    the recipe rendered there with the seed's params, and run in the foreground with the
    session's agent settings (a new session whose seed_ref is the original's); the exit status
    as `run_session`'s.

    Raises:
        RecipeError: the checkpoint is of no git tree, the recipe or a value is refused now.
        Conflict: the worktree exists. NotFound, DamagedObject, RestoreError, GitError: the
            tree cannot be restored.
    """
    from coding_os.jobs.recipes import rerun_run
    from coding_os.runtime.foreground import run_foreground

    run = rerun_run(Project(env, cwd, create=False).tiers, plan)
    return run_foreground(run.settings, run.text, view, approvals=approvals, env=env)
