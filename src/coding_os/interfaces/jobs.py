"""The commands of background agents (DESIGN.md §6, docs/background.md): `cos bg`, `cos agents`,
`cos attach`, `cos reply`, `cos approve`, `cos logs`, `cos stop`, `cos respawn`, `cos rm`.
Each parses its input, calls `coding_os.api`, and prints; cli.py adds them to `cos`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from coding_os import api
from coding_os.errors import InvalidInput, NotFound
from coding_os.interfaces.output import dump_json, table, visible

__all__ = ["COMMANDS"]

_T = TypeVar("_T")
DIFF_LINES = 20  # lines of a waiting edit's diff the table shows


def _echo(message: object = "", *, err: bool = False) -> None:
    click.echo(visible(str(message)), err=err)


def _json(data: object) -> None:
    click.echo(dump_json(data))


def _json_option(func: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(func)


def _read_text(text: str | None, what: str) -> str | None:
    """TEXT, or stdin when it is `-`.

    Raises:
        InvalidInput: stdin is not UTF-8 text.
    """
    if text == "-":
        try:
            return sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"the {what} on stdin is not UTF-8 text (byte "
                               f"{exc.object[exc.start]:#04x} at {exc.start})") from None
    return text


@click.command("bg")
@click.option("--agent", "agent", metavar="A",
              help="claude (the default, unless the recipe names one), codex, or "
                   "python:TARGET (MODULE:ATTR, FILE.py:ATTR, or an entry point).")
@click.option("--exec", "command", metavar="CMD",
              help="Run a shell command as the job instead of an agent.")
@click.option("--name", "name", metavar="N", help="The job's name (default: from the prompt).")
@click.option("--isolation", type=click.Choice(["worktree", "none"]), default="worktree",
              show_default=True,
              help="worktree: a worktree of its own on branch cos/<id> (in a git repository); "
                   "none: in the project's checkout.")
@click.option("--model", "model", metavar="M", help="The agent's model.")
@click.option("--permission-mode", "permission_mode", metavar="P",
              help="default, acceptEdits, bypassPermissions (or the agent's own names).")
@click.option("--recipe", "recipe", type=click.Path(dir_okay=False), metavar="FILE",
              help="Render the prompt from this recipe (docs/recipes.md).")
@click.option("--param", "params", multiple=True, metavar="K=V",
              help="A value for a parameter of the recipe (repeat for each).")
@click.option("--cwd", "cwd", type=click.Path(file_okay=False), metavar="P",
              help="The project and the agent's working directory (default: here).")
@click.option("--carry", is_flag=True,
              help="Carry this checkout's uncommitted changes (staged, unstaged, untracked "
                   "files not ignored) into the job's worktree.")
@_json_option
@click.argument("prompt", required=False)
def bg_command(agent: str | None, command: str | None, name: str | None, isolation: str,
               model: str | None, permission_mode: str | None, recipe: str | None,
               params: tuple[str, ...], cwd: str | None, carry: bool, as_json: bool,
               prompt: str | None) -> None:
    """Start PROMPT (`-`: read it from stdin) as a background job and return at once,
    printing `backgrounded · <id> · <name>`. The job runs in a runner process of its own under
    the supervisor (started on demand), in its own worktree in a git repository, from the last
    commit: uncommitted changes stay in this checkout (said in one line) unless `--carry`;
    `cos agents` lists the jobs, `cos attach` follows one."""
    if command is not None and (agent is not None or recipe is not None):
        raise InvalidInput("--exec runs a command: it takes no --agent or --recipe")
    if params and recipe is None:
        raise InvalidInput("--param needs --recipe FILE")
    if command is None and recipe is None and not prompt:
        raise InvalidInput("give a PROMPT, --exec CMD or --recipe FILE")
    row = api.bg_start(_read_text(prompt, "prompt"), agent=agent, command=command, name=name,
                       isolation=isolation, model=model, permission_mode=permission_mode,
                       recipe=recipe, params=list(params), cwd=cwd, carry=carry)
    if as_json:
        _json(row)
        return
    _echo(f"backgrounded · {row['id']} · {row['name']}")


def _age(started: object) -> str:
    if not isinstance(started, (int, float)):
        return "-"
    seconds = max(0, int(time.time() - started / 1000))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@click.command("agents")
@click.option("--all", "every", is_flag=True, help="The jobs of every project, not only this "
                                                     "one's.")
@click.option("--all-hosts", "all_hosts", is_flag=True,
              help="Also the jobs other hosts published to the shared storage (PostgreSQL), "
                   "each with its host: this host's live, the others' as last published.")
@click.option("--cwd", "cwd", type=click.Path(file_okay=False), metavar="P",
              help="The jobs of the project of P (default: here).")
@_json_option
def agents_command(every: bool, all_hosts: bool, cwd: str | None, as_json: bool) -> None:
    """List the background jobs under a header row: id, name, agent, state (working, blocked,
    done, failed, stopped), what a live one waits for (a blocked job's request on the line below: tool,
    command or path, an edit's diff, request id), a failed command's exit code, its age and
    branch. `--json` rows are a superset of `claude agents --json` (`approval`: the request);
    with `--all-hosts` each row has its `host` (and, from another host, `publishedAt`)."""
    if all_hosts:
        rows = api.agents_all_hosts(every=every, cwd=cwd)
    else:
        rows = api.agents_list(every=every, cwd=cwd, publish=True)
    if as_json:
        _json(rows)
        return
    if not rows:
        _echo("no background jobs (cos bg starts one)")
        return
    header, cells = _agents_table(rows, all_hosts)
    lines = table(header, cells, right=frozenset({header.index("AGE")}))
    _echo(lines[0])
    for row, line in zip(rows, lines[1:]):
        _echo(line)
        if isinstance(row.get("approval"), dict):
            _approval_lines(row["id"], row["approval"])


def _agents_table(rows: list[dict[str, Any]], all_hosts: bool
                  ) -> tuple[list[str], list[list[str]]]:
    """The header and the cells of `cos agents`'s table, one row per job (WHERE: its branch,
    else its directory)."""
    header = [*(["HOST"] if all_hosts else []), "ID", "NAME", "AGENT", "STATE", "STATUS", "AGE",
              "WHERE"]
    cells = []
    for row in rows:
        status = row["status"] or ""
        if row.get("waitingFor"):
            status = f"waiting for {row['waitingFor']}"
        if row.get("exit_code") not in (None, 0) and not status:
            status = f"exit {row['exit_code']}"
        where = str(row.get("branch") or row.get("cwd") or "")
        if "publishedAt" in row:
            where = f"{where}  (as published {_age(row['publishedAt'])} ago)"
        cells.append([*([str(row.get("host"))[:16]] if all_hosts else []), str(row["id"]),
                      str(row["name"])[:28], str(row["agent"]), str(row["state"]), status,
                      _age(row.get("startedAt")), where])
    return header, cells


def _approval_lines(job: str, approval: dict[str, Any]) -> None:
    """Under a blocked job's row: what it asks, how to answer, and an edit's diff."""
    from coding_os.jobs.approvals import summary

    _echo(f"    asks: {summary(approval)} · cos approve {job} [--deny]")
    diff = str(approval.get("diff") or "").splitlines()
    for line in diff[:DIFF_LINES]:
        _echo(f"      {line}")
    if len(diff) > DIFF_LINES:
        _echo(f"      … {len(diff) - DIFF_LINES} more lines (--json has them)")


def _here(command: str, job: str, call: Callable[[], _T]) -> _T:
    """`call()`; a job this host does not have but another host published is refused with the
    command to run there (exit 4)."""
    try:
        return call()
    except NotFound:
        api.job_elsewhere(job, command)
        raise


@click.command("attach")
@click.argument("job")
@click.option("--since", "since", type=click.IntRange(min=0), default=0, metavar="SEQ",
              help="Replay the events after SEQ (default: from the start).")
@_json_option
def attach_command(job: str, since: int, as_json: bool) -> None:
    """Show the job's events (replayed, then live) until it ends. An approval request is shown
    (tool, command or path, an edit's diff). On a terminal, type to reply, `allow` or `deny`
    to answer the request that waits, Ctrl-C interrupts the task, Ctrl-D detaches (the job goes
    on). `--json`: the events as the protocol sends them, one JSON object a line."""
    from coding_os.interfaces.console import JsonView, TextView

    interactive = not as_json and sys.stdin.isatty() and sys.stdout.isatty()
    view: Any = JsonView() if as_json else TextView(interactive=False)
    code = _here("attach", job, lambda: api.job_attach(job, view, since=since,
                                                       interactive=interactive))
    if code:
        raise click.exceptions.Exit(code)


@click.command("reply")
@click.argument("job")
@click.argument("text")
@_json_option
def reply_command(job: str, text: str, as_json: bool) -> None:
    """Send TEXT (`-`: read it from stdin) to the job as the user's next input (a running task
    is replaced by it)."""
    answer = _here("reply", job, lambda: api.job_reply(job, _read_text(text, "text") or ""))
    if as_json:
        _json(answer)
        return
    _echo(f"sent · {answer['id']} · {answer['name']} · task {answer['task']}")


@click.command("approve")
@click.argument("job")
@click.option("--deny", is_flag=True, help="Deny instead of allowing.")
@click.option("--request", "request", metavar="R",
              help="The request to answer (default: the oldest waiting).")
@_json_option
def approve_command(job: str, deny: bool, request: str | None, as_json: bool) -> None:
    """Answer the approval the job waits for: allow it, or `--deny`."""
    answer = _here("approve", job, lambda: api.job_approve(job, allow=not deny, request=request))
    if as_json:
        _json(answer)
        return
    _echo(f"{'denied' if deny else 'allowed'} · {answer['id']} · {answer['name']}")


@click.command("logs")
@click.argument("job")
@click.option("--stderr", "show_stderr", is_flag=True, help="The runner's stderr instead.")
@_json_option
def logs_command(job: str, show_stderr: bool, as_json: bool) -> None:
    """Print what the job did so far (its events as text), or its runner's `--stderr`.
    `--json`: the job's row, its events and its stderr."""
    from coding_os.interfaces.console import TextView

    found = _here("logs", job, lambda: api.job_logs(job))
    if as_json:
        _json(found)
        return
    if show_stderr:
        click.echo(visible(found["stderr"]), nl=False)
        return
    view = TextView(interactive=False)
    for event in found["events"]:
        view.show(event)


@click.command("stop")
@click.argument("job")
@_json_option
def stop_command(job: str, as_json: bool) -> None:
    """Interrupt the job's task and end its runner. A stopped job is never restarted by the
    supervisor; `cos respawn` starts it again."""
    row = _here("stop", job, lambda: api.job_stop(job))
    if as_json:
        _json(row)
        return
    _echo(f"stopped · {row['id']} · {row['name']}")


@click.command("respawn")
@click.argument("job", required=False)
@click.option("--all", "every", is_flag=True, help="Every failed job.")
@_json_option
def respawn_command(job: str | None, every: bool, as_json: bool) -> None:
    """Start a failed or stopped job again under the same id, in the same worktree: its native
    session is resumed (Claude Code --resume, Codex thread/resume) for the next input."""
    if (job is None) == (not every):
        raise InvalidInput("give a JOB or --all")
    rows = _here("respawn", job or "", lambda: api.job_respawn(job, every=every))
    if as_json:
        _json(rows)
        return
    if not rows:
        _echo("no failed job to respawn")
    for row in rows:
        _echo(f"respawned · {row['id']} · {row['name']}")


@click.command("rm")
@click.argument("job")
@click.option("--force", is_flag=True,
              help="Remove the worktree even with uncommitted changes or unpushed commits.")
@_json_option
def rm_command(job: str, force: bool, as_json: bool) -> None:
    """Remove a job that does not run, with its worktree and branch; a finished job (done,
    its runner idle) is stopped first, one that runs a task or waits for an approval is
    refused (exit 7: cos stop first). Refused (exit 1) when the worktree has uncommitted
    changes or commits no other branch holds, unless --force. The
    checkpoints taken in the worktree go with it; the session's transcript and events log are
    kept."""
    removed = _here("rm", job, lambda: api.job_remove(job, force=force))
    if as_json:
        _json(removed)
        return
    _echo(f"removed · {removed['id']} · {removed['name']}")


COMMANDS = (bg_command, agents_command, attach_command, reply_command, approve_command,
            logs_command, stop_command, respawn_command, rm_command)
