"""The `cos` command line: parses arguments, calls `coding_os.api`, formats the answer.

Errors are one line on stderr (`cos: …`) with the exit code of their type (coding_os.errors);
usage errors exit 2. Every command that prints data has `--json`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from coding_os import __version__, api
from coding_os.errors import Ambiguous, CosError, InvalidInput
from coding_os.interfaces.output import dump_json, error_exit, escape_json_controls, visible
from coding_os.interfaces.topics import TopicGroup

__all__ = ["cli", "run"]

F = TypeVar("F", bound=Callable[..., Any])


def echo(message: object = "", *, err: bool = False, nl: bool = True) -> None:
    """Print `message` (on stderr with `err`) with its control characters made visible: what
    cos prints readably holds text from transcripts and the store, which a terminal, or a file
    later `cat`, would act on (docs/cli.md). JSON keeps the text: it escapes them."""
    click.echo(visible(str(message)), err=err, nl=nl)


def _emit_json(data: object) -> None:
    click.echo(dump_json(data))


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(func)


@click.group(cls=TopicGroup, context_settings={"help_option_names": ["-h", "--help"],
                                               "terminal_width": 80})
@click.version_option(__version__, "--version", prog_name="cos")
def cli() -> None:
    """coding-os: the session layer for coding agents.

    One project root and state dir for every agent and panel on a repository, state files
    that prove which session wrote them, and a hooks log of everything the agents did.
    `cos COMMAND --help` says more of each command.
    """


def _refuse_no_project() -> None:
    """Stop a command that only reads, run outside any project, before it creates anything.

    Raises:
        NotFound: no git repository and no state dir here or above (exit 1).
    """
    if not api.in_project():
        import os

        from coding_os.errors import NotFound

        raise NotFound(f"no project here: {os.getcwd()} is in no git repository and under no "
                       ".coding-os/ (cd into a project, or cos init makes one here)")


@cli.command()
@json_option
def where(as_json: bool) -> None:
    """Show the state dir, project root and the rule that chose them."""
    found = api.where()
    if as_json:
        _emit_json(found)
        return
    for key, value in found.items():
        if value is not None and key not in ("state_dir_status", "foreign_reason"):
            echo(f"{key:<13}{value}")
    if found["state_dir_status"] == "foreign":
        echo(f"cos: {found['state_dir']} is not this user's state dir "
                   f"({found.get('foreign_reason')}): nothing is read from it; `cos init` moves it "
                   "aside and starts a fresh one", err=True)


@cli.command()
@json_option
@click.option("--payload", "payload_file", metavar="FILE|-",
              help="Identify as the hook payload in FILE (or stdin) would.")
def whoami(as_json: bool, payload_file: str | None) -> None:
    """Show this caller's agent, panel, session and current task."""
    payload = None
    if payload_file is not None:
        payload = _read_payload_file(payload_file)
    info = api.whoami(payload=payload)
    if as_json:
        _emit_json(info)
        return
    for key, value in info.items():
        echo(f"{key:<13}{'-' if value is None else value}")


def _read_payload_file(name: str) -> dict[str, Any]:
    from coding_os.interfaces.hook import read_payload

    if name == "-":
        return read_payload(sys.stdin.buffer)
    try:
        with open(name, "rb") as f:
            return read_payload(f)
    except OSError as exc:
        raise InvalidInput(f"cannot read payload file {name}: {exc.strerror}") from None


@cli.group()
def state() -> None:
    """Read and write ownership-proven state files (`<session-id> <value>`)."""


@state.command("set")
@click.argument("name")
@click.argument("value")
def state_set(name: str, value: str) -> None:
    """Write NAME = VALUE, owned by this panel's session (atomically)."""
    api.state_set(name, value)


@state.command("get")
@click.argument("name")
def state_get(name: str) -> None:
    """Print NAME's value if this session may trust it; else exit 1 with the reason.

    Reasons: no_file, malformed, session_mismatch, stale.
    """
    echo(api.state_get(name))


@state.command("check")
@click.argument("name")
@json_option
def state_check(name: str, as_json: bool) -> None:
    """Show whether NAME is trusted: valid, reason, owner, age_s, path."""
    verdict = api.state_check(name).as_dict()
    if as_json:
        _emit_json(verdict)
        return
    for key, value in verdict.items():
        echo(f"{key:<7}{'-' if value is None else value}")


@cli.command("hooks-log")
@click.option("--agent", help="Only this agent's lines.")
@click.option("--session", help="Only this session's lines (cos or native id).")
@click.option("--event", help="Only this hook event.")
@click.option("-n", "limit", type=int, help="The last N matching lines.")
@json_option
def hooks_log(agent: str | None, session: str | None, event: str | None, limit: int | None,
              as_json: bool) -> None:
    """Show the hooks log: one line per hook fire, oldest first."""
    _refuse_no_project()
    lines = api.hooks_log(agent=agent, session=session, limit=limit, event=event)
    if as_json:
        _emit_json(lines)
        return
    from coding_os.state.hookslog import format_line

    for fields in lines:
        echo(format_line(fields), nl=False)


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("event")
def hook(event: str) -> None:
    """Handle hook EVENT with its JSON payload on stdin (what `cos init` installs).

    Exit 0 (JSON or nothing on stdout); 1 when the payload or the state dir could not be used
    (one line on stderr, never blocking the agent); 3 on a misroute; 2 only for a block.
    """
    from coding_os.interfaces.hook import main as hook_main

    sys.exit(hook_main([event]))


@cli.command()
@click.option("--agent", type=click.Choice(["claude", "codex", "gemini"]), required=True,
              help="The agent whose hooks to install.")
@click.option("--local", is_flag=True,
              help="Claude Code: write .claude/settings.local.json (not committed).")
@json_option
def init(agent: str, local: bool, as_json: bool) -> None:
    """Install coding-os hooks for AGENT in this project (idempotent): .claude/settings.json,
    .codex/hooks.json or .gemini/settings.json. For Codex, also record its trust of those hooks
    in ~/.codex/config.toml, and say the step left to you: trusting the project in Codex."""
    report = api.init(agent, local=local)
    if as_json:
        _emit_json(report.as_dict())
        return
    verb = "installed hooks in" if report.changed else "hooks already installed in"
    echo(f"{agent}: {verb} {report.file}")
    echo(f"  command: {report.command}")
    echo(f"  state dir: {report.state_dir}")
    if report.mcp_file:
        echo(f"  MCP server: {report.mcp_file} (cos mcp)")
    for note in report.notes:
        echo(note)
    for step in report.user_steps:
        echo(f"To do: {step['why']}. Add to {step['file']}:")
        for line in step["append"].splitlines():
            echo(f"  {line}" if line else "")
        if step.get("or"):
            echo(f"(or {step['or']})")


@cli.command()
@click.option("--agent", type=click.Choice(["claude", "codex", "gemini"]),
              help="Only this agent.")
@json_option
def uninstall(agent: str | None, as_json: bool) -> None:
    """Remove exactly the hook entries `cos init` added."""
    reports = api.uninstall_hooks(agent)
    if as_json:
        _emit_json([r.as_dict() for r in reports])
        return
    for report in reports:
        state = "removed hooks from" if report.changed else "nothing left to remove in"
        echo(f"{report.agent}: {state} {report.file}")
        for note in report.notes:
            echo(f"  {note}")


@cli.command()
@json_option
@click.option("--revoke", is_flag=True, help="Take the trust back.")
def trust(as_json: bool, revoke: bool) -> None:
    """Trust this project's .coding-os.yaml as it is now, so the commands it configures
    (summarizer.command) may run; a changed file needs it again (docs/security.md)."""
    report = api.trust(revoke=revoke)
    if as_json:
        _emit_json(report)
        return
    if report["trusted"]:
        echo(f"trusted {report['file']} ({report['sha256']})")
    else:
        echo(f"{report['file']} is not trusted"
                   + ("" if report["was_trusted"] else " (it was not)"))


@cli.command()
@json_option
def doctor(as_json: bool) -> None:
    """Check this project's coding-os: hooks (and whether the agent will run them), state dir,
    whether cos can write there, database, index, panels, checkpoints, the MCP server and
    `cos acp` (it answers an editor's initialize). Each
    check says ok, warn, fail or skip, and the fix; nothing is changed. Exits 6 when any check
    fails (warnings exit 0)."""
    report = api.doctor()
    if as_json:
        _emit_json(report.as_dict())
    else:
        for check in report.checks:
            echo(f"{check.status.upper() if check.status == 'fail' else check.status:<5} "
                       f"{check.name:<12} {check.detail}")
            if check.fix:
                echo(f"{'':<18}fix: {check.fix}")
        counts = report.as_dict()["counts"]
        assert isinstance(counts, dict)
        echo(", ".join(f"{n} {status}" for status, n in counts.items() if n))
    if not report.ok:
        raise click.exceptions.Exit(6)


@cli.command()
@click.option("--panels", is_flag=True, help="Only reap stale panels.")
@click.option("--dry-run", is_flag=True, help="List what would be removed; change nothing.")
@json_option
def gc(panels: bool, dry_run: bool, as_json: bool) -> None:
    """Reap panels whose heartbeat is older than COS_PANEL_GC_TTL (default 24h) and, without
    --panels, move cos transcripts older than cleanup_period_days to the trash (kept 7 days),
    remove checkpoints older than cleanup_period_days, and delete checkpoint objects no
    checkpoint reaches (older than an hour), and remove the background jobs of this user that
    ended before cleanup_period_days with their worktrees (one that holds work is kept) and the
    spare worktrees no running supervisor keeps of projects with no job for an hour."""
    report = api.gc_panels(dry_run=dry_run)
    retention = None if panels else api.collect_transcripts(dry_run=dry_run)
    objects = None if panels else api.checkpoint_collect(dry_run=dry_run)
    old_jobs = None if panels else api.jobs_gc(dry_run=dry_run)
    if as_json:
        _emit_json(report.as_dict() if retention is None
                   else {"panels": report.as_dict(), "transcripts": retention.as_dict(),
                         "checkpoints": objects, "jobs": old_jobs})
        return
    verb = "would reap" if dry_run else "reaped"
    for entry in report.reaped:
        echo(f"{verb} {entry.agent}/{entry.panel} (session {entry.session or '-'}, "
                   f"heartbeat {entry.heartbeat_age_s}s ago)")
    echo(f"{len(report.reaped)} {verb}, {report.kept} kept, {report.busy} busy")
    errors = list(report.errors)
    if retention is not None:
        moved = "would move" if dry_run else "moved"
        for path in retention.trashed:
            echo(f"{moved} {path} to the trash")
        for day in retention.purged:
            echo(f"{'would empty' if dry_run else 'emptied'} {day}")
        echo(f"{len(retention.trashed)} transcripts {moved} to the trash "
                   f"(older than {retention.period_days:g} days), {retention.kept} kept")
        errors += retention.errors
    if objects is not None:
        gone = "would remove" if dry_run else "removed"
        echo(f"{len(objects['checkpoints_removed'])} checkpoints {gone} (older than the "
                   f"period), {objects['objects_removed']} unreferenced objects {gone} "
                   f"({objects['bytes_freed']} bytes)")
        if objects["orphans_removed"]:
            echo(f"{len(objects['orphans_removed'])} checkpoints of job worktrees that are "
                 f"gone {gone}")
        errors += list(objects["problems"])
    if old_jobs is not None:
        gone = "would remove" if dry_run else "removed"
        echo(f"{len(old_jobs['removed'])} ended background jobs {gone} with their worktrees "
             f"(older than the period)")
        for kept in old_jobs["kept"]:
            echo(f"kept job {kept['id']}: {kept['why']}", err=True)
        for spare in old_jobs["spares"]:
            echo(f"{gone} the spare worktree {spare} (no supervisor keeps it)")
        for kept in old_jobs["kept_spares"]:
            echo(f"kept the spare worktree {kept['worktree']}: {kept['why']}", err=True)
    for error in errors:
        echo(f"error: {error}", err=True)


@cli.command()
@click.argument("session")
@click.option("--format", "fmt", type=click.Choice(["md", "json", "html"]), default="md",
              show_default=True, help="Output format.")
@click.option("-o", "output", metavar="FILE", help="Write to FILE instead of stdout.")
@click.option("--branch", type=click.IntRange(1), metavar="N",
              help="A Claude Code session's branch N (as `cos sessions show` lists them) "
                   "instead of its live conversation.")
def export(session: str, fmt: str, output: str | None, branch: int | None) -> None:
    """Export SESSION's conversation (cos-native, Claude Code or Codex; by id or native id).

    A Claude Code transcript is a tree: its conversation is the chain ending at the live leaf;
    --branch N exports one of the branches beside it instead.
    """
    _refuse_no_project()
    text = api.export_session(session, fmt, branch=branch)
    # JSON stays faithful (its escapes are data); Markdown and HTML show control characters.
    text = escape_json_controls(text) if fmt == "json" else visible(text)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise InvalidInput(f"cannot write {output}: {exc.strerror}") from None


@cli.command()
@click.option("--session", help="Only this session's observations.")
@click.option("-n", "limit", type=int, help="The last N observations.")
@json_option
def observations(session: str | None, limit: int | None, as_json: bool) -> None:
    """Show what the hooks observed (prompts, tool calls, stops), oldest first."""
    _refuse_no_project()
    rows = api.session_observations(session)
    if limit is not None:
        rows = rows[-limit:] if limit > 0 else []
    if as_json:
        _emit_json(rows)
        return
    for row in rows:
        tool = f" {row['tool']}" if row.get("tool") else ""
        text = f" {str(row['text'])[:100]!r}" if row.get("text") else ""
        echo(f"{row['ts']} {row['session']} {row['event']}{tool}{text}")


def _print_refresh(report: dict[str, Any]) -> None:
    echo(f"files: {report['files_seen']} seen, {report['files_unchanged']} unchanged, "
               f"{report['files_read']} read")
    echo(f"sessions: {report['sessions_added']} added, {report['sessions_updated']} "
               f"updated, {report['sessions_removed']} removed ({report['sessions']} in the logs, "
               f"{report['subagents']} subagents not listed)")
    if report["malformed_lines"] or report["unknown_types"]:
        unknown = sum(report["unknown_types"].values())
        echo(f"skipped: {report['malformed_lines']} malformed lines, {unknown} lines of "
                   "unknown types")
    for path, reason in report["unreadable"]:
        echo(f"unreadable: {path}: {reason}", err=True)
    for warning in report.get("warnings", ()):
        echo(f"warning: {warning}", err=True)


@cli.command("import")
@click.option("--claude-dir", metavar="DIR",
              help="Claude Code's config dir (default: $CLAUDE_CONFIG_DIR, else ~/.claude).")
@click.option("--codex-dir", metavar="DIR",
              help="Codex's home (default: $CODEX_HOME, else ~/.codex).")
@json_option
def import_(claude_dir: str | None, codex_dir: str | None, as_json: bool) -> None:
    """Import what changed in Claude Code, Codex and cos transcripts into the session index."""
    report = api.import_sessions(claude_dir=claude_dir, codex_dir=codex_dir).to_dict()
    if as_json:
        _emit_json(report)
        return
    _print_refresh(report)


@cli.group("index")
def index_group() -> None:
    """The session index (rebuildable from the transcripts and native logs)."""


@index_group.command("rebuild")
@json_option
def index_rebuild(as_json: bool) -> None:
    """Empty the session index and build it again from every log."""
    report = api.rebuild_index(progress=_progress()).to_dict()
    if as_json:
        _emit_json(report)
        return
    _print_refresh(report)


@cli.command("sync")
@json_option
def sync(as_json: bool) -> None:
    """Push the new lines of this project's sessions to the shared database (PostgreSQL)."""
    report = api.sync_sessions()
    if as_json:
        _emit_json(report)
        return
    if report["message"]:
        echo(str(report["message"]))
        return
    echo(f"pushed {report['lines']} lines of {len(report['pushed'])} files to the shared "
         f"database as host {report['host']} ({report['sources']} files, "
         f"{report['unchanged']} unchanged)")
    for name in report["restarted"]:
        echo(f"started over: {name} (the file was rewritten)")
    for session, stream, why in report["refused"]:
        echo(f"not replicated: {session} ({stream}): {why}", err=True)
    for path, why in report["unreadable"]:
        echo(f"unreadable: {path}: {why}", err=True)


def _session_table(rows: list[dict[str, Any]], here: str | None = None) -> list[str]:
    """The sessions as a table under a header: the id as short as it stays unique (any command
    taking a session accepts it), agent, last activity, messages, name or title (another
    host's marked @HOST)."""
    from coding_os.interfaces.output import table
    from coding_os.state.shortid import abbreviate

    short = abbreviate(str(row["id"]) for row in rows)
    lines = []
    for row in rows:
        label = row.get("name") or row.get("title") or "-"
        host = row.get("host")
        marker = f"@{host} " if here is not None and host not in (None, here) else ""
        lines.append((short[str(row["id"])], str(row["agent"]),
                      str(row.get("last_active") or "-")[:16].replace("T", " "),
                      str(row["messages"]), f"{marker}{' '.join(str(label).split())[:80]}"))
    return table(("ID", "AGENT", "LAST ACTIVE", "MSGS", "TITLE"), lines, right=frozenset({3}))


@cli.group("sessions", invoke_without_command=True)
@click.option("--scope", type=click.Choice(api.SESSION_SCOPES), default="worktree",
              show_default=True,
              help="worktree: this checkout; repo: the repository and its worktrees; all.")
@click.option("--agent", help="Only this agent's sessions.")
@click.option("--search", metavar="Q", help="Only sessions whose id, title, name or path has Q.")
@click.option("--limit", type=click.IntRange(min=0), metavar="N",
              help="At most N sessions (the most recent).")
@click.option("--branch", "this_branch", is_flag=True,
              help="Only sessions on the branch checked out here.")
@click.option("--host", metavar="H", help="Only the sessions of host H (default: this host).")
@click.option("--all-hosts", is_flag=True, help="The sessions of every host.")
@json_option
@click.pass_context
def sessions(ctx: click.Context, scope: str, agent: str | None, search: str | None,
             limit: int | None, this_branch: bool, host: str | None, all_hosts: bool,
             as_json: bool) -> None:
    """List sessions of every agent (cos, Claude Code, Codex), most recent first.

    Imports what changed in the logs first. Only this host's sessions unless --host or
    --all-hosts; another host's are marked @HOST (--json: every row has its `host`).
    """
    if ctx.invoked_subcommand is not None:
        return
    _refuse_no_project()
    rows = api.list_sessions(scope=scope, agent=agent, search=search, limit=limit,
                             this_branch=this_branch, host=host, all_hosts=all_hosts)
    if as_json:
        _emit_json(rows)
        return
    from coding_os.hosts.identity import this_host

    if not rows:
        echo("no sessions", err=True)
        return
    for line in _session_table(rows, this_host()):
        echo(line)


@sessions.command("show")
@click.argument("session")
@json_option
def sessions_show(session: str, as_json: bool) -> None:
    """Show one session (by cos id or native id).

    A miss in the index imports what changed and reads the transcripts, as `cos resume` does;
    what that repaired is said in one line (--json: `path` and `repaired`). A Claude Code
    session also lists the branches beside its live conversation (a rewind or a
    --resume-session-at leaves them), numbered for `cos export ID --branch N` (--json: `tree`).
    """
    _refuse_no_project()
    row = api.show_session(session)
    tree = api.session_branches(row)
    if as_json:
        _emit_json({**row, "tree": tree})
        return
    repaired = row.pop("repaired")
    path = row.pop("path")
    for key, value in row.items():
        shown = "-" if value is None else " ".join(str(value).split())  # prompts on one line
        echo(f"{key:<13}{shown}")
    if isinstance(repaired, list) and repaired:
        echo(f"index repaired (found by {str(path).replace('_', ' ')}): "
                   + "; ".join(str(note) for note in repaired))
    _echo_branches(tree)


def _echo_branches(tree: dict[str, object]) -> None:
    """The live chain and the other branches of a session, one line each."""
    if tree.get("live_leaf") is not None:
        echo(f"{'live chain':<13}{tree['live_entries']} entries, leaf {tree['live_leaf']}")
    for branch in tree.get("branches") or []:  # type: ignore[attr-defined]
        prompt = " ".join(str(branch["first_prompt"] or "-").split())[:80]
        echo(f"{'branch ' + str(branch['number']):<13}tip {branch['tip']}, "
             f"{branch['length']} entries after {branch['fork_point'] or 'no shared entry'}, "
             f"first prompt: {prompt}")
    for warning in tree.get("warnings") or []:  # type: ignore[attr-defined]
        echo(f"warning: {warning}", err=True)


@sessions.command("rename")
@click.argument("session")
@click.argument("name")
def sessions_rename(session: str, name: str) -> None:
    """Give SESSION the name NAME (one line; listed and searchable in `cos sessions`)."""
    row = api.rename_session(session, name)
    echo(f"{row['id']}: named {row['name']}")


@sessions.command("rm")
@click.argument("session")
@json_option
def sessions_rm(session: str, as_json: bool) -> None:
    """Remove a cos-native session (its transcript goes to the trash).

    Claude Code and Codex logs belong to their tools: cos never deletes them.
    """
    result = api.remove_session(session)
    if as_json:
        _emit_json(result)
        return
    echo(f"removed {result['id']}" + (f" (transcript in {result['trash']})"
                                            if result["trash"] else ""))


def _print_report(fields: list[tuple[str, object]]) -> None:
    for key, value in fields:
        if value not in (None, "", []):
            echo(f"{key:<11}{value}")


def _label(session: dict[str, Any]) -> str:
    label = session.get("name") or session.get("title")
    tool = {"cos": "cos-native", "claude": "Claude Code", "codex": "Codex"}.get(
        str(session.get("kind")), str(session.get("kind")))
    return f"{session['id']} ({tool}{', ' + ' '.join(str(label).split())[:80] if label else ''})"


def _restored_line(restored: dict[str, Any]) -> str:
    if restored["kind"] == "transcript":
        return (f"{restored['entries']} transcript entries, {restored['compacts']} compacts, "
                f"{restored['summaries']} summaries, {restored['messages']} messages")
    return f"{restored['messages']} messages, {restored['tokens']} tokens ({restored['log']})"


def _on_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def _pick(search: str = "", scope: str = "worktree") -> str:
    """The session the user picks on the terminal (see coding_os.interfaces.picker).

    Raises:
        click.exceptions.Abort: the user cancelled (exit 130).
    """
    from coding_os.interfaces.picker import pick_session

    picked = pick_session(search=search, scope=scope)
    if picked is None:
        raise click.exceptions.Abort()
    return picked


@cli.command()
@click.argument("session", required=False)
@click.option("-c", "--continue", "latest", is_flag=True,
              help="The most recently active session of this checkout (not the caller's own).")
@click.option("--from-pr", "pr", metavar="N|URL",
              help="The session whose Claude Code log links this pull request.")
@click.option("--replay", is_flag=True,
              help="A recipe session: resume its transcript (the report says mode: replay).")
@click.option("--rerun", is_flag=True,
              help="A recipe session: run its recipe and params again from the seed's "
                   "checkpoint, in a fresh worktree, in the foreground (mode: rerun).")
@click.option("--force", is_flag=True,
              help="With --rerun: run the recipe file even though it changed since the seed.")
@click.option("--approve", "approvals", type=click.Choice(["ask", "allow", "deny"]),
              help="With --rerun: answer approval requests as cos run --approve does.")
@click.option("--dry-run", is_flag=True, help="Print the restore report readably; run nothing.")
@json_option
def resume(session: str | None, latest: bool, pr: str | None, replay: bool, rerun: bool,
           force: bool, approvals: str | None, dry_run: bool, as_json: bool) -> None:
    """Resume SESSION (exact cos id, native id or user-set name) in its directory and agent.

    Without SESSION, --continue or --from-pr on a terminal, a picker lists this worktree's
    sessions: type to search, Ctrl-W widens the scope (repository, all projects), Ctrl-B keeps
    this branch, Enter resumes, Esc cancels (exit 130). A name several sessions have opens it
    with the name searched.

    Hands over to `claude --resume <id>`, `codex resume <id>` or `gemini --resume <id>` in the
    session's directory; --json prints the restore report and --dry-run shows it, neither runs
    anything. A session of another project exits 4 with the command to run there; several with
    one name exit 5.

    A session another host wrote (shared PostgreSQL, docs/hosts.md) is first written here from
    its replicated lines, its paths mapped to this checkout (not on --dry-run), and moves here:
    this host owns it and replicates its new lines from then on; the report says from which
    host, which files, and that it moved.

    A session started from a recipe (cos run --recipe) resumes with --replay or --rerun; on a
    terminal without either, cos asks which; without a terminal it is an error (exit 2).
    """
    if replay and rerun:
        raise InvalidInput("give --replay or --rerun, not both")
    mode = "replay" if replay else "rerun" if rerun else None
    if force and mode != "rerun":
        raise InvalidInput("--force goes with --rerun")
    if approvals is not None and mode != "rerun":
        raise InvalidInput("--approve goes with --rerun")
    if session is None and not latest and pr is None:
        if not _on_terminal():
            raise InvalidInput("give a session id or name, --continue or --from-pr "
                               "(the picker opens only on a terminal)")
        session = _pick()
    try:
        report = api.resume_session(session, latest=latest, pr=pr, materialize=not dry_run)
    except Ambiguous:
        if session is None or not _on_terminal():
            raise
        # Several sessions have this name: the user picks one, the name already searched.
        report = api.resume_session(_pick(search=session, scope="all"),
                                    materialize=not dry_run)
    found = str(report.session["id"])
    seed = api.recipe_seed(found)
    if seed is None and mode is not None:
        raise InvalidInput(f"{found} was not started from a recipe: --replay and --rerun are "
                           "for recipe sessions")
    if seed is not None and mode is None and not (as_json or dry_run):
        if not _on_terminal():
            raise InvalidInput(f"{found} was started from a recipe: resume it with --replay "
                               "(its transcript) or --rerun (the recipe again from its "
                               "checkpoint, in a fresh worktree)")
        mode = click.prompt(f"{found} was started from recipe {seed['path']}: replay its "
                            "transcript or rerun the recipe?",
                            type=click.Choice(api.RESUME_MODES), default="replay")
    if mode == "rerun":
        _rerun(found, force, approvals, dry_run, as_json)
        return
    data = report.to_dict()
    if mode is not None:
        # Without a mode the report is the one `cos resume ID --json` prints on its fast path
        # (interfaces/entry.py), which knows nothing of recipes.
        data["mode"], data["seed_ref"] = mode, seed
    if as_json:
        _emit_json(data)
        return
    if dry_run or report.handover is None:
        handover = data["handover"]
        _print_report([
            ("session", _label(data["session"])), ("found by", data["path"]),
            ("from host", data["host"]), *_materialized_lines(data["materialized"]),
            ("moved", _moved_line(data.get("moved_from"))),
            ("mode", mode), ("recipe", seed["path"] if seed else None),
            ("restored", _restored_line(data["restored"])),
            ("rebuilt", "; ".join(data["rebuilt"])), ("relocation", data["relocation"]),
            ("cwd", data["cwd"]),
            ("handover", handover["command"] if handover else f"none: {data['handover_note']}")])
        return
    for key, value in [("from host", report.host), *_materialized_lines(data["materialized"]),
                       ("moved", _moved_line(report.moved_from))]:
        if value:
            echo(f"cos: {key}: {value}", err=True)
    _hand_over(report.handover, report.relocation, f"resuming {report.session['id']}"
               + (f" (mode: {mode})" if mode else ""))


def _moved_line(moved_from: object) -> str | None:
    """The report line of a session that moved here with its resume."""
    return (f"from host {moved_from} to this one (its new lines are replicated from here)"
            if moved_from else None)


def _materialized_lines(files: list[dict[str, Any]]) -> list[tuple[str, object]]:
    """One report line per file materialised from another host's replica."""
    return [(str(f["action"]), f"{f['path']} ({f['stream']}, {f['lines']} lines)")
            for f in files]


def _rerun(session: str, force: bool, approvals: str | None, dry_run: bool,
           as_json: bool) -> None:
    """`cos resume SESSION --rerun`: the plan as the restore report, then the run."""
    plan = api.plan_rerun(session, force=force)
    if as_json:
        _emit_json(plan)
        return
    recipe = plan["recipe"]
    _print_report([("session", session), ("mode", "rerun"), ("recipe", recipe["path"]),
                   ("changed", "yes: the file differs from the seed's (--force)"
                    if recipe["changed"] else None),
                   ("params", " ".join(f"{k}={v}" for k, v in plan["seed"]["params"].items())),
                   ("checkpoint", plan["checkpoint"]), ("worktree", plan["worktree"]),
                   ("branch", plan["branch"]),
                   ("agent", plan["settings"]["agent"])])
    if dry_run:
        return
    view, approvals = _run_view(False, approvals)
    code = api.rerun_session(plan, view, approvals=approvals)
    if code:
        raise click.exceptions.Exit(code)


@cli.command()
@click.argument("session")
@click.option("--at", "at_seq", type=click.IntRange(min=0), metavar="SEQ",
              help="Fork at this seq (default: the end; cos-native sessions only).")
@click.option("--name", metavar="N", help="Name the new session (cos-native sessions only).")
@click.option("--dry-run", is_flag=True, help="Show what would be done; change and run nothing.")
@json_option
def fork(session: str, at_seq: int | None, name: str | None, dry_run: bool,
         as_json: bool) -> None:
    """Fork SESSION into a new session; the source is untouched.

    A cos-native session gets a new transcript that starts with a `fork` entry. A Claude Code or
    Codex session hands over to its own fork (`claude --resume <id> --fork-session`,
    `codex fork <id>`); --json and --dry-run print it and run nothing.
    """
    report = api.fork_any_session(session, at_seq, name, dry_run=dry_run)
    data = report.to_dict()
    if as_json:
        _emit_json(data)
        return
    handover = data["handover"]
    if report.session is not None:
        echo(f"forked {data['source']['id']} at seq {report.fork_point} into "
                   f"{report.session} ({report.copied} entries copied)")
        echo(f"transcript {report.transcript}")
        return
    if dry_run or report.handover is None:
        what = handover["command"] if handover else (
            f"would fork {data['source']['id']} at seq "
            f"{'end' if at_seq is None else at_seq} into a new cos session")
        _print_report([("session", _label(data["source"])), ("found by", data["path"]),
                       ("relocation", data["relocation"]), ("cwd", data["cwd"]),
                       ("fork", what)])
        return
    _hand_over(report.handover, report.relocation, f"forking {data['source']['id']}")


def _hand_over(handover: Any, relocation: str | None, doing: str) -> None:
    """Replace this process with the agent, saying on stderr what it runs and where."""
    command = handover.command()

    def announce() -> None:
        if relocation:
            echo(f"cos: {relocation}", err=True)
        echo(f"cos: {doing}: {command}", err=True)

    api.hand_over(handover, announce)


# -- checkpoints and rewind (DESIGN.md §5) --------------------------------------------------------


def _checkpoint_table(rows: list[dict[str, Any]]) -> list[str]:
    """The checkpoints as a table under a header: the id as short as it stays unique (`cos
    rewind` accepts it), time, mode, trigger, turn, files changed, session (short too), prompt."""
    from coding_os.interfaces.output import table
    from coding_os.state.shortid import abbreviate

    short = abbreviate(str(row["id"]) for row in rows)
    sessions = abbreviate(str(row["session"]) for row in rows if row.get("session"))
    lines = []
    for row in rows:
        changed, turn = row.get("changed_count"), row.get("turn")
        cleared = row.get("from_cleared_session")
        prompt = " ".join(str(row.get("prompt") or "").split())[:60]
        lines.append((short[str(row["id"])], str(row.get("ts") or "-")[:19].replace("T", " "),
                      str(row.get("mode")), str(row.get("trigger") or "-"),
                      "-" if turn is None else str(turn),
                      "-" if changed is None else str(changed),
                      sessions.get(str(row.get("session")), "-"),
                      prompt + (f"  (from the cleared session {cleared})" if cleared else "")))
    return table(("ID", "TIME", "MODE", "TRIGGER", "TURN", "CHANGED", "SESSION", "PROMPT"),
                 lines, right=frozenset({4, 5}))


@cli.group("checkpoint")
def checkpoint_group() -> None:
    """Take a checkpoint of the working tree (the hooks take them automatically)."""


@checkpoint_group.command("create")
@click.option("--session", metavar="S", help="The session it belongs to (default: this panel's).")
@click.option("--mode", type=click.Choice(["worktree", "tracked"]),
              help="worktree: every file git would add (default, or checkpoints.mode); "
                   "tracked: only the paths given.")
@click.option("--paths", "paths_flag", is_flag=True,
              help="The paths that follow are the ones a tracked checkpoint covers.")
@click.argument("paths", nargs=-1, metavar="[P …]")
@json_option
def checkpoint_create(session: str | None, mode: str | None, paths_flag: bool,
                      paths: tuple[str, ...], as_json: bool) -> None:
    """Snapshot the working tree now: tracked and untracked-not-ignored files (worktree), or
    only the paths after --paths (tracked). Unchanged content costs no new objects."""
    if paths and not paths_flag:
        raise click.UsageError("give the paths after --paths")
    from coding_os.interfaces.checkpoint_text import created_line, pruned_line, skipped_lines

    record = api.checkpoint_create(session=session, mode=mode, paths=list(paths) or None)
    pruned = pruned_line(record)
    if pruned is not None:
        echo(pruned, err=True)
    if as_json:
        _emit_json(record)
        return
    echo(created_line(record))
    for line in skipped_lines(record):
        echo(line, err=True)


@cli.group("checkpoints", invoke_without_command=True)
@click.option("--session", metavar="S", help="Only this session's (a session started by /clear "
                                             "lists the cleared session's latest first).")
@json_option
@click.pass_context
def checkpoints(ctx: click.Context, session: str | None, as_json: bool) -> None:
    """List checkpoints, newest first: id, time, mode, trigger, turn, files changed since the
    previous one, session, prompt. The ids are shown short; `cos rewind` takes them."""
    if ctx.invoked_subcommand is not None:
        return
    _refuse_no_project()
    rows = api.checkpoint_list(session)
    if as_json:
        _emit_json(rows)
        return
    if not rows:
        echo("no checkpoints", err=True)
        return
    for line in _checkpoint_table(rows):
        echo(line)


@checkpoints.command("verify")
@json_option
def checkpoints_verify(as_json: bool) -> None:
    """Re-hash every object and check every checkpoint's references; changes nothing. Exits 6
    when anything is damaged or missing (checkpoints of a job's worktree that is gone are listed,
    not damage: `cos gc` drops them)."""
    report = api.checkpoint_verify()
    if as_json:
        _emit_json(report)
    else:
        echo(f"{report['objects_checked']} objects, {report['checkpoints']} checkpoints "
                   f"checked: {'ok' if report['ok'] else 'DAMAGED'}")
        for item in [*report["damaged"], *report["missing"]]:
            echo(f"damaged: {' '.join(str(v) for v in item.values())}")
        if report["orphaned"]:
            echo(f"{len(report['orphaned'])} checkpoints of a background job's worktree that is "
                 f"gone (e.g. {report['orphaned'][0]['root']}): `cos gc` drops them")
    if not report["ok"]:
        raise click.exceptions.Exit(6)


@checkpoints.command("du")
@json_option
def checkpoints_du(as_json: bool) -> None:
    """Disk used by checkpoints, against the cap (checkpoints.max_total_bytes, default 2 GiB)."""
    report = api.checkpoint_usage()
    if as_json:
        _emit_json(report)
        return
    echo(f"{report['checkpoints']} checkpoints, {report['objects']} objects: "
               f"{report['total_bytes']} bytes ({report['percent_of_cap']}% of the "
               f"{report['cap_bytes']}-byte cap)")


@cli.command("rewind")
@click.argument("checkpoint", required=False)
@click.option("--code", "part", flag_value="code", help="Restore the files only.")
@click.option("--conversation", "part", flag_value="conversation",
              help="Rewind the conversation only.")
@click.option("--both", "part", flag_value="both", help="Restore the files and the conversation.")
@click.option("--undo", is_flag=True, help="Undo the last rewind of this tree.")
@click.option("--summarize-from", "summarize", flag_value="from",
              help="Summarise the conversation from CHECKPOINT on.")
@click.option("--summarize-up-to", "summarize", flag_value="up-to",
              help="Summarise the conversation up to CHECKPOINT.")
@click.option("--instructions", metavar="TEXT", help="What the summary should focus on.")
@click.option("--in-place", is_flag=True,
              help="Rewind a Claude Code or Codex conversation in its own session instead of "
                   "a new one.")
@click.option("--dry-run", is_flag=True, help="Preview; change nothing.")
@json_option
def rewind_command(checkpoint: str | None, part: str | None, undo: bool, summarize: str | None,
                   instructions: str | None, in_place: bool, dry_run: bool,
                   as_json: bool) -> None:
    """Rewind to CHECKPOINT: --code restores the files (deleted, moved and shell-edited ones
    too), --conversation rewinds the conversation, --both does both; --dry-run previews the
    files to restore, create and delete with a diffstat, marking files changed outside the
    session. The tree as it was is checkpointed first: --undo brings it back.

    A Claude Code conversation is rewound by the command printed (claude --resume …
    --resume-session-at …); a Codex
    thread is forked (or, --in-place, reverted) by codex app-server, then resumed with codex
    resume. If the conversation cannot be rewound, --both restores no file either.

    --summarize-from / --summarize-up-to summarise around CHECKPOINT instead (the default
    summariser needs no model; summarizer.command in .coding-os.yaml runs one); originals stay.
    """
    chosen = sum(bool(x) for x in (part, undo, summarize))
    if chosen != 1:
        raise click.UsageError("give one of --code, --conversation, --both, --undo, "
                               "--summarize-from, --summarize-up-to")
    if undo:
        if checkpoint is not None:
            raise click.UsageError("--undo takes no checkpoint")
        report = api.rewind_undo()
        _emit_json(report) if as_json else _print_code(report["undo"], "undone")
        return
    if checkpoint is None:
        raise click.UsageError("which checkpoint? (see cos checkpoints)")
    if summarize:
        report = api.rewind_summarize(checkpoint, summarize, instructions, dry_run=dry_run)
        if as_json:
            _emit_json(report)
            return
        echo(report["summary"])
        appended = report.get("appended")
        echo(f"cos: summary entry at seq {appended['seq']}"
                   if appended else f"cos: {report.get('note') or 'nothing written (dry run)'}",
                   err=True)
        return
    assert part is not None
    if in_place and part == "code":
        raise click.UsageError("--in-place is for --conversation and --both")
    report = api.rewind(checkpoint, part, dry_run=dry_run, in_place=in_place)
    if as_json:
        _emit_json(report)
        return
    if "code" in report:
        _print_code(report["code"], "would restore" if dry_run else "restored")
    conversation = report.get("conversation")
    if isinstance(conversation, dict):
        echo(f"conversation: {conversation['note']}")
        handover = conversation.get("handover")
        if isinstance(handover, dict):
            rewound = conversation.get("rewound_session")
            echo(f"continue it with: {handover['command']}"
                 + (f"  (session {rewound})" if rewound and not dry_run else ""))


def _print_code(code: dict[str, Any], verb: str) -> None:
    from coding_os.interfaces.checkpoint_text import code_lines

    for line in code_lines(code, verb):
        echo(line)


def _recover_restore() -> None:
    """Complete a restore a killed `cos rewind` left half done, before any command runs."""
    from coding_os.checkpoints.restore import RestoreError

    try:
        done = api.recover_interrupted_restore()
    except RestoreError as exc:
        echo(f"cos: {' '.join(str(exc).split())}", err=True)
        return
    except CosError:
        return  # the command itself reports what stands in its way
    if done is not None:
        echo(f"cos: completed the interrupted rewind to {done.get('target')}", err=True)


# The brain: tasks, the work log, search (docs/brain.md) and the MCP server (docs/mcp.md).

_STATUSES = click.Choice(["todo", "doing", "blocked", "done"])


def _task_line(task: dict[str, Any]) -> str:
    owner = task.get("owner") or "-"
    return f"{task['id']:<10}{task['status']:<9}{owner:<36}{task['title']}"


@cli.group("tasks", invoke_without_command=True)
@click.option("--status", type=_STATUSES, help="Only tasks in this status.")
@click.option("--owner", metavar="SESSION", help="Only tasks this session owns.")
@click.option("--after", metavar="TASK", help="Start after this task (paging).")
@click.option("--limit", type=click.IntRange(1, 200), default=50, show_default=True)
@json_option
@click.pass_context
def tasks_group(ctx: click.Context, status: str | None, owner: str | None, after: str | None,
                limit: int, as_json: bool) -> None:
    """List the project's shared tasks (TASK-<n>), by number."""
    if ctx.invoked_subcommand is not None:
        return
    _refuse_no_project()
    page = api.task_list(status, owner, after, limit)
    if as_json:
        _emit_json(page)
        return
    for task in page["tasks"]:  # type: ignore[attr-defined]
        echo(_task_line(task))
    if page["next_cursor"]:
        echo(f"… more: cos tasks --after {page['next_cursor']}", err=True)


@tasks_group.command("new")
@click.argument("title")
@click.option("--body", default=None, help="What the task is about.")
@click.option("--status", type=_STATUSES, default="todo", show_default=True)
@json_option
def tasks_new(title: str, body: str | None, status: str, as_json: bool) -> None:
    """Add a task (created as doing, it is this session's current task)."""
    task = api.task_create(title, body, status)
    if as_json:
        _emit_json(task)
        return
    echo(task["id"])


@tasks_group.command("move")
@click.argument("task")
@click.argument("status", type=_STATUSES)
@click.option("--note", default=None, help="Why (kept in the task's history).")
@click.option("--force", is_flag=True, help="Take over a task another session is doing.")
@json_option
def tasks_move(task: str, status: str, note: str | None, force: bool, as_json: bool) -> None:
    """Move TASK to STATUS; to doing, it becomes this session's (its current task)."""
    moved = api.task_move(task, status, note, force)
    if as_json:
        _emit_json(moved)
        return
    echo(_task_line(moved))


@tasks_group.command("show")
@click.argument("task")
@json_option
def tasks_show(task: str, as_json: bool) -> None:
    """Show a task with its history and its work-log lines."""
    shown = api.task_show(task)
    if as_json:
        _emit_json(shown)
        return
    echo(_task_line(shown))
    if shown.get("body"):
        echo(f"\n{shown['body']}\n")
    for move in shown.get("moves", []):  # type: ignore[attr-defined]
        echo(f"  {move['ts']}  {move['from_status'] or '-':>7} -> {move['to_status']:<8}"
                   f"{move['session'] or '-'} ({move['attributed_by']})"
                   f"{'  ' + move['note'] if move['note'] else ''}")
    for entry in shown.get("work_log", []):  # type: ignore[attr-defined]
        echo(f"  {entry['ts']}  log  {entry['session'] or '-'} ({entry['attributed_by']}):"
                   f" {entry['text']}")


@cli.group("work-log", invoke_without_command=True)
@click.option("--session", help="Only this session's lines.")
@click.option("--task", help="Only lines for this task.")
@click.option("--before", metavar="N", help="Lines numbered below N (paging).")
@click.option("--limit", type=click.IntRange(1, 200), default=50, show_default=True)
@json_option
@click.pass_context
def work_log_group(ctx: click.Context, session: str | None, task: str | None,
                   before: str | None, limit: int, as_json: bool) -> None:
    """Show the project's work log, newest first."""
    if ctx.invoked_subcommand is not None:
        return
    _refuse_no_project()
    page = api.work_log(session, task, before, limit)
    if as_json:
        _emit_json(page)
        return
    for entry in page["entries"]:  # type: ignore[attr-defined]
        echo(f"{entry['seq']:>6}  {entry['ts']}  {entry['session'] or '-'}"
                   f"{'  ' + entry['task'] if entry['task'] else ''}: {entry['text']}")


@work_log_group.command("add")
@click.argument("text")
@click.option("--task", help="The task it is for (TASK-<n>).")
@json_option
def work_log_add(text: str, task: str | None, as_json: bool) -> None:
    """Add a line to the work log, filed under this panel's session."""
    entry = api.work_log_append(text, task)
    if as_json:
        _emit_json(entry)
        return
    echo(entry["seq"])


@cli.command("search")
@click.argument("query")
@click.option("--kind", "kinds", multiple=True,
              type=click.Choice(["observation", "work_log", "task", "transcript"]),
              help="Only this kind of text (repeatable).")
@click.option("--session", help="Only this session's texts.")
@click.option("--limit", type=click.IntRange(1, 100), default=20, show_default=True)
@click.option("--cursor", metavar="N", help="The next_cursor of a previous page.")
@json_option
def search_command(query: str, kinds: tuple[str, ...], session: str | None, limit: int,
                   cursor: str | None, as_json: bool) -> None:
    """Find texts holding every word of QUERY: observations, work log, tasks, transcripts."""
    _refuse_no_project()
    page = api.search(query, list(kinds) or None, session, cursor, limit,
                      progress=_progress())
    if as_json:
        _emit_json(page)
        return
    for hit in page["results"]:  # type: ignore[attr-defined]
        echo(f"{hit['ts'][:19]}  {hit['kind']:<11} {hit['session'] or '-'}  "
                   f"{hit['snippet']}")
    if page["next_cursor"]:
        echo(f"… more: --cursor {page['next_cursor']}", err=True)


def _progress(quiet: bool = False) -> Callable[[str], None] | None:
    """Progress lines on stderr when it is a terminal."""
    if quiet or not sys.stderr.isatty():
        return None
    return lambda message: echo(f"cos: {message}…", err=True)


@cli.command("mcp")
@click.option("--http", "http", is_flag=True,
              help="Serve streamable HTTP on 127.0.0.1 (one server for several panels) "
                   "instead of stdio; every request needs the bearer token kept in "
                   "~/.coding-os/mcp-token (printed on stderr at start).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="The port for --http (0: any free port, printed at start).")
def mcp_command(http: bool, port: int) -> None:
    """Run the MCP server (stdio by default; logs go to stderr and the hooks log)."""
    try:
        from coding_os.interfaces.mcp import serve
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in ("mcp", "mcp_types", "pydantic"):
            raise
        raise InvalidInput("the MCP server needs the mcp package: pip install 'mcp>=2.3'") \
            from None
    serve("http" if http else "stdio", port)


@cli.command("acp")
@click.option("--agent", "agent", metavar="A", default="claude", show_default=True,
              help="The agent of the sessions session/new starts: claude, codex, exec (each "
                   "prompt a shell command) or python:TARGET; a client may change it before "
                   "a session's first prompt (the agent config option).")
@click.option("--cwd", "cwd", type=click.Path(file_okay=False), metavar="P",
              help="The project session/list lists when the client names none (default: here).")
def acp_command(agent: str, cwd: str | None) -> None:
    """Speak the Agent Client Protocol on stdio (docs/acp.md): an editor's ACP agent whose
    sessions are cos background jobs, which outlive the editor. stdout carries JSON-RPC only."""
    try:
        from coding_os.interfaces.acp.server import serve_stdio
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in ("acp", "pydantic", "pydantic_core"):
            raise
        raise InvalidInput("cos acp needs the ACP SDK: pip install 'coding-os[acp]'") from None
    from os.path import abspath

    code = serve_stdio(agent, abspath(cwd) if cwd else None)
    if code:
        raise click.exceptions.Exit(code)


@cli.command("protocol")
@click.option("--session", "session", metavar="ID",
              help="Serve this session of the project (a resume op replays its events).")
@click.option("--agent", "agent", metavar="A",
              help="The agent a configure op without one starts: claude, codex, python, exec.")
@click.option("--cwd", "cwd", type=click.Path(file_okay=False), metavar="P",
              help="The project and the agent's working directory (default: here).")
def protocol_command(session: str | None, agent: str | None, cwd: str | None) -> None:
    """Speak the session protocol on stdio: one JSON op per line in, one JSON event per line
    out (docs/protocol.md). Bad input gets an error event; it serves until shutdown or EOF."""
    code = api.serve_protocol(session=session, agent=agent, cwd=cwd)
    if code:
        raise click.exceptions.Exit(code)


@cli.command("run")
@click.option("--agent", "agent", metavar="A",
              help="claude (the default, unless the recipe names one), codex, exec (the prompt "
                   "is a shell command) or python:TARGET (MODULE:ATTR, FILE.py:ATTR, or an "
                   "entry point of coding_os.agents).")
@click.option("--model", "model", metavar="M", help="The agent's model (default: the recipe's, "
                                                     "else the agent's own).")
@click.option("--recipe", "recipe", type=click.Path(dir_okay=False), metavar="FILE",
              help="Render the prompt from this recipe (docs/recipes.md); checkpoints the tree "
                   "first and records the seed in the session.")
@click.option("--param", "params", multiple=True, metavar="K=V",
              help="A value for a parameter of the recipe (repeat for each).")
@click.option("--cwd", "cwd", type=click.Path(file_okay=False), metavar="P",
              help="The project and the agent's working directory (default: here).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the session's events as cos protocol sends them, one JSON object a "
                   "line; ask nothing (approvals as --approve, default deny).")
@click.option("--approve", "approvals", type=click.Choice(["ask", "allow", "deny"]),
              help="Answer approval requests: ask (the default on a terminal), allow every "
                   "one, or deny every one (the default without a terminal and with --json).")
@click.argument("prompt", required=False)
def run_command(agent: str | None, model: str | None, recipe: str | None,
                params: tuple[str, ...], cwd: str | None, as_json: bool,
                approvals: str | None, prompt: str | None) -> None:
    """Run PROMPT (or the prompt --recipe renders) in a new session in the foreground and show
    what the agent does (with stdout a terminal, the running tool and its elapsed time on one
    line the next output replaces). On a terminal, approvals are asked (y/n, default no), Ctrl-C
    interrupts the task (again at the prompt: quit) and further prompts are read until an empty
    line or Ctrl-D. Exit 0 when the last task completed, 1 when it failed or was aborted, 130 after
    Ctrl-C; 2 for a recipe or value refused (nothing run)."""
    from coding_os.jobs.recipes import parse_params

    parsed = parse_params(params)
    if parsed and recipe is None:
        raise InvalidInput("--param needs --recipe FILE")
    if recipe is None and not prompt:
        raise InvalidInput("give a PROMPT or --recipe FILE")
    view, approvals = _run_view(as_json, approvals)
    code = api.run_session(prompt, view, agent=agent, cwd=cwd, approvals=approvals,
                           recipe=recipe, params=parsed, model=model)
    if code:
        raise click.exceptions.Exit(code)


def _run_view(as_json: bool, approvals: str | None) -> tuple[Any, str]:
    """The view a foreground session shows itself through, and the approvals policy."""
    from coding_os.interfaces.console import JsonView, TextView

    interactive = not as_json and sys.stdin.isatty()
    if approvals is None:
        approvals = "ask" if interactive else "deny"
    elif approvals == "ask" and not interactive:
        raise InvalidInput("--approve ask needs a terminal on stdin and no --json; "
                           "use --approve allow or deny")
    if as_json:
        import os

        # stdout is the wire: whatever else writes to file descriptor 1 (a python agent's
        # print) goes to stderr, as with `cos protocol`.
        wire = os.fdopen(os.dup(1), "w", encoding="ascii", newline="\n")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        return JsonView(out=wire), approvals
    return TextView(interactive=interactive, status=sys.stdout.isatty()), approvals


# -- the daemon (DESIGN.md §6) ----------------------------------------------------------------------


@cli.group("daemon")
def daemon_group() -> None:
    """The on-demand supervisor, one per user: it watches the trees checkpoints ask about, so a
    checkpoint looks only at what changed. The hooks start it by themselves for a tree of 2,000
    tracked files or more (checkpoints.start_daemon: false turns that off; docs/daemon.md)."""


def _daemon_lines(report: dict[str, Any]) -> None:
    if not report.get("running"):
        echo("the daemon is not running (cos daemon start)")
        return
    if not report.get("responding", True):
        echo(f"the daemon holds its lock but does not answer ({report.get('error')}); "
                   "checkpoints scan meanwhile")
        return
    echo(f"the daemon runs: pid {report.get('pid')}, version {report.get('version')}, "
               f"since {report.get('started')}")
    for tree in report.get("trees") or []:
        state = f"not watched: {tree['broken']}" if tree.get("broken") else (
            f"{tree['watched_dirs']} directories watched, {tree['changed_paths']} changed "
            f"path{'' if tree['changed_paths'] == 1 else 's'} kept")
        echo(f"  {tree['root']}  {state}")


@daemon_group.command("start")
@json_option
def daemon_start(as_json: bool) -> None:
    """Start the daemon unless it runs, and wait until it answers; the hooks may start it on
    their own again."""
    report = api.daemon_start()
    if as_json:
        _emit_json(report)
        return
    if report.get("already_running"):
        echo(f"the daemon already runs (pid {report.get('pid')})")
    else:
        _daemon_lines(report)


@daemon_group.command("stop")
@json_option
def daemon_stop(as_json: bool) -> None:
    """Stop the daemon (nothing to do when it is not running); the hooks start none until the
    next `cos daemon start`."""
    report = api.daemon_stop()
    if as_json:
        _emit_json(report)
        return
    echo(f"the daemon (pid {report.get('pid')}) stopped" if report.get("stopped")
               else "the daemon was not running")


@daemon_group.command("status")
@json_option
def daemon_status(as_json: bool) -> None:
    """Whether the daemon runs, and the trees it watches (exit 0 either way; see `running`)."""
    report = api.daemon_status()
    if as_json:
        _emit_json(report)
        return
    _daemon_lines(report)


@cli.command("web")
@click.option("--port", type=click.IntRange(0, 65535), default=8777, show_default=True,
              help="The port on 127.0.0.1 (0: any free port).")
@click.option("--open", "open_browser", is_flag=True,
              help="Open the page in a browser (through a file only you can read: the token "
                   "is on no command line).")
@click.option("--json", "as_json", is_flag=True,
              help="Print {url, port, token, pid} as one JSON line, then serve.")
def web_command(port: int, open_browser: bool, as_json: bool) -> None:
    """Serve the web agent view on 127.0.0.1 (docs/web.md): the roster, sessions, live
    jobs, checkpoints, tasks and search. Prints its URL with a random token; serves until
    stopped."""
    try:
        from coding_os.interfaces.web.server import serve
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in ("starlette", "uvicorn", "jinja2",
                                                       "markupsafe", "anyio"):
            raise
        raise InvalidInput("cos web needs its extra: pip install 'coding-os[web]'") from None
    serve(port, open_browser=open_browser, as_json=as_json)


def _add_agents_commands() -> None:
    from coding_os.interfaces.jobs import COMMANDS

    for command in COMMANDS:
        cli.add_command(command)


_add_agents_commands()


def run(argv: list[str]) -> int:
    """Run the CLI on `argv`; return the exit code (errors are one line on stderr)."""
    # `doctor` only reads: it reports an interrupted restore instead of completing it; nor is
    # it the MCP server's to complete (doctor starts one too).
    # Nor is the daemon's, which belongs to no project.
    if argv[:1] not in (["--help"], ["-h"], ["--version"], [], ["doctor"], ["mcp"], ["daemon"]):
        _recover_restore()
    try:
        code = cli.main(args=argv, prog_name="cos", standalone_mode=False)
    except CosError as exc:
        return error_exit(exc)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "cos"
        echo(f"cos: {' '.join(exc.format_message().split())} (see '{command} --help')",
                   err=True)
        return exc.exit_code
    except click.ClickException as exc:
        echo(f"cos: {' '.join(exc.format_message().split())}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        echo("cos: aborted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback, for a bug in cos
        return error_exit(exc)
    return code if isinstance(code, int) else 0
