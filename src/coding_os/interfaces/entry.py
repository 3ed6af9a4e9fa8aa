"""The `cos` console script. Some forms skip the click CLI, whose import alone costs more than
the work they do: `cos hook …` (run on every tool call of every agent) goes to the fast hook
entry, and ends its process without the interpreter's teardown; the scripted resume
`cos resume (ID | -c | --continue) --json` (what tools and editors run to restore a session)
calls `coding_os.api` directly; the plain `cos bg` of an agent's prompt (the time it takes
is the job's, see benchmarks/bg_first_event.py) starts the job without the engine's imports;
and the plain `cos rewind CHECKPOINT --code [--json]` and `cos checkpoint create [--json]`
(a user waits on them as an agent waits on its hook, see benchmarks/checkpoints.py) call
`coding_os.api` directly, as the click commands do, and print what they print.
Everything else, including any other option or `--help`, loads the click CLI, which owns the
documented interface; so does a project with an interrupted rewind to complete first."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

__all__ = ["main"]

_JSON_RESUME_FLAGS = {"-c", "--continue", "--json"}


def _scripted_resume(args: list[str]) -> bool:
    """Whether `cos resume ARGS` is the scripted form: --json, and exactly one of an id or name
    (not an option, and not on a terminal) or -c/--continue; nothing else."""
    flags = [a for a in args if a.startswith("-")]
    keys = [a for a in args if not a.startswith("-")]
    if "--json" not in flags or not set(flags) <= _JSON_RESUME_FLAGS:
        return False
    latest = "-c" in flags or "--continue" in flags
    if keys and sys.stdin.isatty() and sys.stdout.isatty():
        return False  # a name several sessions have opens the picker on a terminal
    return len(keys) + latest == 1 and len(args) == len(set(args))


def _resume_json(args: list[str]) -> int:
    from coding_os import api
    from coding_os.interfaces.output import dump_json, error_exit

    keys = [a for a in args if not a.startswith("-")]
    try:
        report = api.resume_session(keys[0] if keys else None, latest=not keys)
        sys.stdout.write(dump_json(report.to_dict()) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        return error_exit(exc)
    return 0


# `cos bg` options the lean path takes, each once and as `--option VALUE`, with the values it
# takes (None: any value not starting with `-`).
_BG_OPTIONS: dict[str, tuple[str, ...] | None] = {
    "--agent": ("claude", "codex"), "--isolation": ("worktree", "none"), "--name": None,
    "--model": None, "--permission-mode": None}


def _plain_bg(args: list[str]) -> tuple[dict[str, str], bool, str] | None:
    """The options, --json and PROMPT of `cos bg ARGS` when it is the plain form: the options of
    _BG_OPTIONS and --json, each at most once, and one PROMPT (not empty, not `-`, not starting
    with `-`); None for any other form (--exec, --recipe, --cwd, --help, `--opt=value`, …),
    which the click CLI runs."""
    options: dict[str, str] = {}
    as_json = False
    prompt: str | None = None
    rest = iter(args)
    for arg in rest:
        if arg == "--json" and not as_json:
            as_json = True
        elif arg in _BG_OPTIONS and arg not in options:
            value = next(rest, None)
            allowed = _BG_OPTIONS[arg]
            if value is None or value.startswith("-") or (allowed is not None
                                                           and value not in allowed):
                return None
            options[arg] = value
        elif prompt is None and arg and not arg.startswith("-"):
            prompt = arg
        else:
            return None
    return (options, as_json, prompt) if prompt is not None else None


def _bg(options: dict[str, str], as_json: bool, prompt: str) -> int | None:
    """`cos bg` of a plain form (_plain_bg) as the click command runs it: the calls of
    api.bg_start (control.bg_run, control.start_job, jobs.row) without importing the api or the
    engine; None when the project has an interrupted rewind to complete first (the click CLI
    does it)."""
    from coding_os.checkpoints.lock import pending
    from coding_os.errors import CosError
    from coding_os.interfaces.output import dump_json, error_exit, visible
    from coding_os.state.root import resolve
    from coding_os.state.tiers import Tiers

    try:  # the project's checkpoints folder, as the click CLI's Caller(create=False) finds it
        if pending(Tiers(resolve(os.getcwd(), os.environ).state_dir).checkpoints_dir):
            return None
    except CosError:
        pass  # as the click CLI: the command itself reports what stands in its way
    try:
        from coding_os.jobs import control, jobs

        settings, text, _ = control.bg_run(
            prompt, _recipe_checkpoint, agent=options.get("--agent", "claude"),
            model=options.get("--model"), permission_mode=options.get("--permission-mode"))

        def in_worktree(checkout: str) -> dict[str, object]:
            """As api.bg_start (install.worktree_hooks), without importing install when the
            checkout has no settings file (install.AGENT_HOOK_FILES): no hooks to give."""
            if settings.agent != "claude" or not any(os.path.lexists(os.path.join(
                    checkout, ".claude", name)) for name in ("settings.json",
                                                             "settings.local.json")):
                return {}
            from coding_os.install import worktree_hooks

            return worktree_hooks(settings.agent, settings.options, checkout)

        job = control.start_job(settings, text, name=options.get("--name"),
                               isolation=options.get("--isolation", "worktree"),
                               in_worktree=in_worktree)
        row = jobs.row(job, alive=True)
        if as_json:
            sys.stdout.write(dump_json(row) + "\n")
        else:
            sys.stdout.write(visible(f"backgrounded · {row['id']} · {row['name']}") + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        return error_exit(exc)
    return 0


def _recipe_checkpoint(where: str) -> str:
    """The checkpoint a recipe's seed takes (api.bg_start's); a plain form has no recipe."""
    from coding_os import api

    return str(api.checkpoint_create(cwd=where)["id"])


def _plain_rewind(args: list[str]) -> tuple[str, bool] | None:
    """The CHECKPOINT and --json of `cos rewind ARGS` when it is the plain form: `--code`, one
    CHECKPOINT (not empty, not starting with `-`) and `--json` at most, each once, in any
    order; None for any other form (--dry-run, --both, --undo, --help, …), which the click CLI
    runs."""
    flags = [a for a in args if a.startswith("-")]
    points = [a for a in args if a and not a.startswith("-")]
    if "--code" not in flags or not set(flags) <= {"--code", "--json"} or len(points) != 1 \
            or len(flags) != len(set(flags)) or len(flags) + len(points) != len(args):
        return None
    return points[0], "--json" in flags


def _checkpoints_command(command: Callable[[], int]) -> int | None:
    """Run a plain form of the checkpoint commands (`command`) as the click CLI runs it: an
    error is one line with its exit code, a reader gone is 0, Ctrl-C is 130. None, and
    nothing done, when the project has an interrupted rewind to complete first: the click CLI
    completes it, and says so, before any command."""
    from coding_os.checkpoints.lock import pending
    from coding_os.errors import CosError
    from coding_os.interfaces.output import error_exit
    from coding_os.state.root import resolve
    from coding_os.state.tiers import Tiers

    try:  # the project's checkpoints folder, as the click CLI's Caller(create=False) finds it
        if pending(Tiers(resolve(os.getcwd(), os.environ).state_dir).checkpoints_dir):
            return None
    except CosError:
        pass  # as the click CLI: the command itself reports what stands in its way
    try:
        code = command()
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        _say(["", "cos: aborted"], err=True)  # click's Abort, as cli.run reports it
        return 130
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        return error_exit(exc)
    return code


def _say(lines: list[str], err: bool = False) -> None:
    """Print `lines` (their control characters made visible) on stdout, or stderr with `err`,
    as click.echo does: flushed, and nothing when the process was started with that
    descriptor closed."""
    from coding_os.interfaces.output import visible

    stream = sys.stderr if err else sys.stdout
    if stream is not None and lines:
        stream.write("".join(visible(line) + "\n" for line in lines))
        stream.flush()


def _rewind(checkpoint: str, as_json: bool) -> int:
    """`cos rewind CHECKPOINT --code [--json]`, as the click command runs it."""
    from coding_os import api
    from coding_os.interfaces.output import dump_json

    report = api.rewind(checkpoint, "code")
    if as_json:
        if sys.stdout is not None:  # JSON escapes its control characters itself
            sys.stdout.write(dump_json(report) + "\n")
    else:
        from coding_os.interfaces.checkpoint_text import code_lines

        _say(code_lines(report["code"], "restored"))
    return 0


def _checkpoint_create(as_json: bool) -> int:
    """`cos checkpoint create [--json]`, as the click command runs it."""
    from coding_os import api
    from coding_os.interfaces.checkpoint_text import created_line, pruned_line, skipped_lines
    from coding_os.interfaces.output import dump_json

    record = api.checkpoint_create()
    pruned = pruned_line(record)
    _say([pruned] if pruned is not None else [], err=True)
    if as_json:
        if sys.stdout is not None:
            sys.stdout.write(dump_json(record) + "\n")
        return 0
    _say([created_line(record)])
    _say(skipped_lines(record), err=True)
    return 0


def _exit_now(code: int) -> NoReturn:
    """End the process once its output is flushed, without the interpreter's teardown (the
    hook entry's `exit_now`)."""
    from coding_os.interfaces.hook import exit_now

    exit_now(code)


# Commands whose arguments become text an agent, a shell or a job's files are given.
_TEXT_COMMANDS = ("bg", "reply", "run")


def _refuse_not_utf8(command: str, args: list[str]) -> int | None:
    """Exit 2 with one line when one of `args` is not UTF-8 text (Python keeps an argument's
    bytes that are not UTF-8 as lone surrogates, which no prompt, file or job can hold); None
    when all are."""
    for arg in args:
        if arg.isascii():
            continue
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            from coding_os.errors import InvalidInput
            from coding_os.interfaces.output import error_exit

            try:  # the argument's bytes, those that are not UTF-8 as \xe9
                raw = arg.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:  # not from argv: a surrogate outside its escapes
                raw = arg.encode("utf-8", "backslashreplace")
            shown = raw.decode("utf-8", "backslashreplace")
            return error_exit(InvalidInput(f"{command}: the argument '{shown[:80]}' is not "
                                           f"UTF-8 text; cos {command} takes text in UTF-8"))
    return None


def main() -> int:
    """Entry point of the `cos` console script."""
    argv = sys.argv[1:]
    if argv[:1] and argv[0] in _TEXT_COMMANDS:
        refused = _refuse_not_utf8(argv[0], argv[1:])
        if refused is not None:
            return refused
    if argv[:1] == ["hook"] and not any(a in ("--help", "-h") for a in argv[1:]):
        from coding_os.interfaces.hook import run as run_hook

        run_hook(argv[1:])
    if argv[:1] == ["resume"] and _scripted_resume(argv[1:]):
        return _resume_json(argv[1:])
    if argv[:1] == ["bg"] and (plain := _plain_bg(argv[1:])) is not None:
        code = _bg(*plain)
        if code is not None:
            return code
    command: Callable[[], int] | None = None
    if argv[:1] == ["rewind"] and (point := _plain_rewind(argv[1:])) is not None:
        command = lambda: _rewind(*point)  # noqa: E731
    elif argv[:2] == ["checkpoint", "create"] and argv[2:] in ([], ["--json"]):
        command = lambda: _checkpoint_create(argv[2:] == ["--json"])  # noqa: E731
    if command is not None:
        import gc

        gc.disable()  # as for a hook: a short process, whose few cycles die with it
        code = _checkpoints_command(command)
        if code is not None:
            _exit_now(code)
        gc.enable()
    from coding_os.interfaces.cli import run

    return run(argv)
