"""`cos doctor`: is this project's coding-os healthy? Each check says what it found and the fix.

Checks, in order: the installed hooks (each runs this installation's hook launcher, which
exists in the user's hub and starts this cos; or, as an older init wrote them, an existing `cos`
console script, not a shim; and the agent will run them: Codex trusts the project and each
hook), the state dir (resolution from the project root, the caller's directory and a
subdirectory agree), whether cos can write where its hooks and commands write, the database
(integrity and migration level), the session index (fresh against the logs), orphaned panels,
the checkpoint store, the MCP server (starts as an agent starts it and lists cos's tools), and
`cos acp` (starts as an editor starts it and answers `initialize`, in a scratch folder with a
scratch state dir).

Doctor only reads, but for the probe of each folder cos writes to: a small file written,
flushed and removed again (a read-only mount, a full disk or a folder of another user fails
it, as it fails every hook). SQLite is opened read-only (immutable when no WAL is there, so no `-wal` or
`-shm` file appears), PostgreSQL through a plain connection (never `open_storage`, which
migrates); a database at an older version is reported, not migrated; nothing is repaired. A
project without a state dir gets the checks that need one skipped, and the MCP server is then
started on a scratch state dir so that nothing appears in the project.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from coding_os.adapters.mcp import MCP_SERVER_NAME, MCP_TOOLS
from coding_os import durable
from coding_os.errors import CosError, InvalidInput
from coding_os.state.root import STATE_DIR_NAME, Resolution, resolve
from coding_os.state.tiers import Tiers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.launcher import HookCommand, Launcher

__all__ = [
    "STATUSES",
    "CHECKS",
    "MCP_TOOLS",
    "MCP_TIMEOUT_S",
    "ACP_TIMEOUT_S",
    "ACP_INSTALL",
    "Check",
    "DoctorReport",
    "run_checks",
]

STATUSES = ("ok", "warn", "fail", "skip")
CHECKS = ("hooks", "state_dir", "writable", "database", "index", "panels", "checkpoints",
          "mcp", "acp")
MCP_TIMEOUT_S = 20.0
_MCP_PROTOCOL = "2025-06-18"  # the MCP revision doctor's `initialize` asks for
ACP_TIMEOUT_S = 20.0
ACP_INSTALL = "pip install 'coding-os[acp]'"  # what `cos acp` says without the ACP SDK
# Directories never searched for stray nested state dirs, and how deep the search goes.
_SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", STATE_DIR_NAME}
_NESTED_DEPTH = 3
_NESTED_MAX_DIRS = 2000


@dataclass
class Check:
    """One finding: `status` is ok, warn (works, but look), fail (broken) or skip (nothing to
    check); `fix` is the command or step that repairs it (None when there is nothing to do)."""

    name: str
    status: str
    detail: str
    fix: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class DoctorReport:
    """Every check, and where the caller's state lives."""

    state_dir: str | None
    project_root: str | None
    checks: list[Check]

    @property
    def ok(self) -> bool:
        """No check failed (warnings and skips do not count)."""
        return all(check.status != "fail" for check in self.checks)

    def as_dict(self) -> dict[str, object]:
        counts = {status: sum(c.status == status for c in self.checks) for status in STATUSES}
        return {"ok": self.ok, "state_dir": self.state_dir, "project_root": self.project_root,
                "counts": counts, "checks": [asdict(check) for check in self.checks]}


@dataclass
class _Context:
    env: Mapping[str, str]
    cwd: str
    resolution: Resolution | None
    tiers: Tiers | None
    # The state dir exists (a project where cos has run), not merely resolved.
    initialised: bool


def run_checks(env: Mapping[str, str], cwd: str, mcp_timeout_s: float = MCP_TIMEOUT_S,
               acp_timeout_s: float = ACP_TIMEOUT_S) -> DoctorReport:
    """Run every check for a caller in `cwd` with environment `env`; never raises for what it
    finds (a check that cannot run reports why as its own failure)."""
    misroute = ""
    try:
        resolution: Resolution | None = resolve(cwd, env)
    except CosError as exc:
        resolution = None
        misroute = _one_line(exc)
    tiers = Tiers(resolution.state_dir) if resolution else None
    foreign = None
    if resolution is not None:
        from coding_os.state import registry

        owner = registry.check(resolution.state_dir, resolution.hub, resolution.project_root,
                               adopt=False)
        foreign = owner.reason if owner.status == "foreign" else None
    initialised = bool(resolution and resolution.rule != "default" and foreign is None
                       and os.path.isdir(resolution.state_dir))
    ctx = _Context(env, cwd, resolution, tiers, initialised)
    # The MCP server and `cos acp` are started at once, in threads, while the checks below
    # read the state dir: those two are most of doctor's time, and they wait on other processes.
    from concurrent.futures import ThreadPoolExecutor

    probes = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cos-doctor")
    servers = [probes.submit(_guarded, "mcp", lambda c: _mcp(c, mcp_timeout_s), ctx),
               probes.submit(_guarded, "acp", lambda c: _acp(c, acp_timeout_s), ctx)]
    probes.shutdown(wait=False)
    checks: list[Check] = []
    if resolution is not None and foreign is not None:
        # Nothing is read from a state dir that is not this user's (DESIGN.md §11).
        checks.append(Check("state_dir", "fail",
                            f"{resolution.state_dir} is not this user's state dir: {foreign}; "
                            "nothing is read from it",
                            "cos init --agent claude (or --agent codex): it moves the state dir "
                            "aside, unread, and starts a fresh one",
                            {"state_dir": resolution.state_dir, "foreign": foreign}))
        checks += [Check(name, "skip", "the state dir is not this user's")
                   for name in ("hooks", "writable", "database", "index", "panels",
                                "checkpoints")]
        checks.sort(key=lambda check: CHECKS.index(check.name))
    elif resolution is None:
        checks.append(Check("state_dir", "fail", misroute,
                            "run cos inside the project, or set COS_PROJECT_ROOT to it"))
        checks += [Check(name, "skip", "the state dir cannot be resolved")
                   for name in ("hooks", "writable", "database", "index", "panels",
                                "checkpoints")]
        checks.sort(key=lambda check: CHECKS.index(check.name))
    else:
        for name, step in (("hooks", _hooks), ("state_dir", _state_dir),
                           ("writable", _writable), ("database", _database), ("index", _index), ("panels", _panels),
                           ("checkpoints", _checkpoints)):
            checks.append(_guarded(name, step, ctx))
    checks += [server.result() for server in servers]
    return DoctorReport(resolution.state_dir if resolution else None,
                        resolution.project_root if resolution else None, checks)


def _guarded(name: str, step: Callable[[_Context], Check], ctx: _Context) -> Check:
    """A check whose own machinery broke reports that, instead of stopping the others."""
    try:
        return step(ctx)
    except CosError as exc:
        return Check(name, "fail", f"the check could not run: {_one_line(exc)}")
    except OSError as exc:
        return Check(name, "fail", f"the check could not run: {exc.strerror or exc}")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _checkout(ctx: _Context) -> str:
    """The checkout an agent runs in: where its settings files and `.mcp.json` live."""
    from coding_os.git.repo import checkout_root

    assert ctx.resolution is not None
    if ctx.resolution.worktree:
        return ctx.resolution.worktree
    if ctx.resolution.rule in ("default", "explicit"):
        return checkout_root(ctx.cwd) or ctx.resolution.project_root
    return ctx.resolution.project_root


# -- hooks ----------------------------------------------------------------------------------------


def _hooks(ctx: _Context) -> Check:
    """Every installed hooks file still has cos's hook for each event, and each runs an existing
    hook launcher in the user's hub that starts a cos (this installation's, ideally), or, as an
    older init wrote them, an existing `cos` console script."""
    from coding_os.install import installed_cos, read_manifest
    from coding_os.launcher import Launcher, this_launcher

    assert ctx.tiers is not None and ctx.resolution is not None
    try:
        manifest = read_manifest(ctx.tiers.manifest)
    except CosError as exc:
        return Check("hooks", "fail", _one_line(exc), "fix or remove it, then run "
                     "`cos init --agent claude` (or codex) again")
    records = [r for r in manifest["installations"] if isinstance(r, dict)]
    if not records:
        return Check("hooks", "warn", "no coding-os hooks are installed in this project",
                     "cos init --agent claude (or --agent codex)")
    try:
        this_cos: str | None = installed_cos()
    except CosError:
        this_cos = None
    try:
        ours: Launcher | None = this_launcher(hub=ctx.resolution.hub, env=ctx.env)
    except CosError:
        ours = None
    problems: list[str] = []
    notes: list[str] = []
    failed_agents: list[str] = []
    fixes: list[str] = []
    runs_them: list[str] = []
    data: dict[str, Any] = {"installations": []}
    for record in records:
        agent = str(record.get("agent"))
        found = _hook_commands(str(record.get("file")), agent)
        data["installations"].append({"agent": agent, "file": record.get("file"),
                                      "commands": sorted({c.program for _, c in found[1]})})
        bad = _judge_hooks(record, found, this_cos, ours, ctx.resolution.hub)
        if bad[0]:
            problems += [f"{agent}: {p}" for p in bad[0]]
            failed_agents.append(agent)
        notes += [f"{agent}: {n}" for n in bad[1]]
        if agent == "claude" and found[0] is None:
            refused, claude_fixes = _claude_runs(str(record.get("file")), ctx)
            problems += [f"claude: {p}" for p in refused]
            fixes += claude_fixes
            data["installations"][-1]["claude_runs_them"] = not refused
        if agent == "codex" and found[0] is None:
            # Whether Codex itself will run them: its own trust of the project and each hook.
            refused, codex_fixes, said = _codex_runs(record, ctx)
            problems += [f"codex: {p}" for p in refused]
            fixes += codex_fixes
            runs_them += said
            data["installations"][-1]["codex_runs_them"] = not refused
    worktree = ctx.resolution.worktree if ctx.resolution else None
    if worktree:
        # An agent started in a linked worktree reads that checkout's settings, not the main one's.
        here = {str(r.get("agent")) for r in records
                if str(r.get("file")).startswith(worktree.rstrip(os.sep) + os.sep)}
        for agent in dict.fromkeys(str(r.get("agent")) for r in records):
            if agent not in here:
                notes.append(f"{agent}: no hooks installed in this worktree ({worktree})")
    if problems:
        if failed_agents:
            fixes.insert(0, "; ".join(f"cos init --agent {a}" for a in dict.fromkeys(
                failed_agents)) + " (writes this installation's hook launcher and re-renders "
                "the hook commands)")
        return Check("hooks", "fail", "; ".join(problems + notes),
                     "; ".join(dict.fromkeys(fixes)), data)
    agents = ", ".join(dict.fromkeys(str(r.get("agent")) for r in records))
    if notes:
        agents_noted = dict.fromkeys(note.split(":", 1)[0] for note in notes)
        fix = "; ".join(f"cos init --agent {agent}" for agent in agents_noted)
        return Check("hooks", "warn", "; ".join(notes),
                     fix + (" (run in this worktree)" if worktree else ""), data)
    runs = f"this cos through its launcher {ours.path}" if ours else "an existing cos"
    return Check("hooks", "ok", "; ".join([f"{agents}: every hook runs {runs}", *runs_them]),
                 None, data)


def _claude_runs(path: str, ctx: _Context) -> tuple[list[str], list[str]]:
    """(why Claude Code will not run the hooks of `path`, the fixes): `"disableAllHooks": true`
    in the settings that win (the checkout's local settings over its shared ones over the
    user's, `$CLAUDE_CONFIG_DIR/settings.json`, else `~/.claude/settings.json`) turns every hook
    off; checked with Claude Code 2.1.328. Each file is read with bounds, never run."""
    from coding_os import jsonwire
    from coding_os.install import MAX_SETTINGS_BYTES

    checkout = os.path.dirname(os.path.dirname(path))
    user_dir = ctx.env.get("CLAUDE_CONFIG_DIR") or os.path.join(
        ctx.env.get("HOME") or os.path.expanduser("~"), ".claude")
    deciding: tuple[str, object] | None = None
    for settings_path in (os.path.join(user_dir, "settings.json"),
                          os.path.join(checkout, ".claude", "settings.json"),
                          os.path.join(checkout, ".claude", "settings.local.json")):
        try:
            raw = durable.read_regular(settings_path, MAX_SETTINGS_BYTES)
            settings = jsonwire.loads(raw) if raw and raw.strip() else {}
        except (CosError, OSError, ValueError):
            continue  # a file Claude Code cannot read either sets nothing
        if isinstance(settings, dict) and "disableAllHooks" in settings:
            deciding = (settings_path, settings["disableAllHooks"])
    if deciding is not None and deciding[1] is True:
        return ([f"Claude Code runs no hook: {deciding[0]} sets \"disableAllHooks\": true"],
                [f"remove \"disableAllHooks\": true from {deciding[0]}"])
    return [], []


def _codex_runs(record: Mapping[str, Any], ctx: _Context
                ) -> tuple[list[str], list[str], list[str]]:
    """(why Codex will not run cos's hook for each event the installation `record` names, the
    fixes, what is fine): Codex runs a project's hooks only in a project its user trusts, each
    hook only once trusted as it is, none with `[features] hooks = false`
    (adapters/codex/hook_trust.py). An event is covered when Codex runs at least one hook of
    cos there. Only the user's own Codex config is read; nothing is run."""
    from coding_os import jsonwire
    from coding_os.adapters.codex import hook_trust
    from coding_os.install import MAX_SETTINGS_BYTES
    from coding_os.launcher import parse_hook_command
    from coding_os.state.root import linked_worktree_main

    path = str(record.get("file"))
    events = [str(e.get("event")) for e in record.get("entries", []) if isinstance(e, dict)]
    config_path = hook_trust.user_config_path(ctx.env)
    try:
        config, _ = hook_trust.read_config(config_path)
        raw = durable.read_regular(path, MAX_SETTINGS_BYTES)
        settings = jsonwire.loads(raw) if raw and raw.strip() else {}
    except (CosError, OSError, ValueError) as exc:
        return [f"cannot tell whether Codex runs the hooks: {_one_line(exc)}"], \
            [f"fix {config_path} or {path}"], []
    hooks = [hook for hook in hook_trust.hooks_of(path, settings if isinstance(settings, dict)
                                                  else {})
             if parse_hook_command(hook.command, "codex", hook.event) is not None]
    if hook_trust.hooks_turned_off(config):
        return [f"Codex runs no hook: {config_path} sets [features] hooks = false"], \
            [f"remove `hooks = false` from [features] in {config_path}"], []
    problems: list[str] = []
    fixes: list[str] = []
    checkout = os.path.dirname(os.path.dirname(path))
    main = linked_worktree_main(checkout, ctx.env)
    level = hook_trust.project_trust(config, checkout, main[1] if main else None)
    if level != "trusted":
        problems.append(f"Codex {'marks' if level else 'does not trust'} {checkout}"
                        f"{' untrusted' if level else ''}, so it loads none of {path}")
        fixes.append(f"add to {config_path}: "
                     f"{hook_trust.project_trust_lines(checkout).strip().replace(chr(10), ' ')}"
                     f"{' (in place of its trust_level)' if level else ''} (or start `codex` "
                     f"in {checkout} once and accept its trust prompt)")
    by_status: dict[str, list[str]] = {}
    for event in (e for e in events if e in hook_trust.EVENT_LABELS):
        seen = {hook_trust.hook_status(config, h) for h in hooks if h.event == event}
        if "trusted" not in seen:
            by_status.setdefault("disabled" if "disabled" in seen else "untrusted",
                                 []).append(event)
    untrusted = by_status.get("untrusted", [])
    if untrusted:
        problems.append(f"Codex has not trusted cos's hook as it is for {len(untrusted)} of "
                        f"{len(events)} events ({', '.join(untrusted)}), so it does not run it")
        fixes.append("cos init --agent codex (records Codex's trust of the hooks it wrote)")
    if by_status.get("disabled"):
        problems.append(f"{config_path} turns off cos's {', '.join(by_status['disabled'])} "
                        "hook (enabled = false)")
        fixes.append(f"remove `enabled = false` from those [hooks.state] tables of "
                     f"{config_path}")
    if problems:
        return problems, fixes, []
    return [], [], [f"Codex trusts {checkout} and cos's hook for each of the {len(events)} "
                     f"events ({config_path})"]


def _hook_commands(path: str, agent: str) -> tuple[str | None, list[tuple[str, HookCommand]]]:
    """(why the file cannot be read, or None; [(event, command)] of the file's cos hooks).
    The manifest names the file: it is read only when it is a regular file of a settings
    file's size, never through a symlink (DESIGN.md §11)."""
    from coding_os import jsonwire
    from coding_os.install import MAX_SETTINGS_BYTES
    from coding_os.launcher import parse_hook_command

    try:
        raw = durable.read_regular(path, MAX_SETTINGS_BYTES)
        if raw is None:
            return f"{path} is missing", []
        settings = jsonwire.loads(raw) if raw.strip() else {}
    except InvalidInput as exc:
        return _one_line(exc), []
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}", []
    except ValueError as exc:
        return f"{path} is not valid JSON ({_one_line(exc)})", []
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    found: list[tuple[str, HookCommand]] = []
    for event, groups in (hooks.items() if isinstance(hooks, dict) else []):
        for group in groups if isinstance(groups, list) else []:
            entries = group.get("hooks") if isinstance(group, dict) else None
            for entry in entries if isinstance(entries, list) else []:
                command = entry.get("command") if isinstance(entry, dict) else None
                parsed = (parse_hook_command(command, agent, event)
                          if isinstance(command, str) else None)
                if parsed is not None:
                    found.append((event, parsed))
    return None, found


def _judge_hooks(record: Mapping[str, Any],
                 found: tuple[str | None, list[tuple[str, HookCommand]]], this_cos: str | None,
                 ours: Launcher | None, hub: str) -> tuple[list[str], list[str]]:
    """(problems that break the hooks, notes worth a warning) for one installation."""
    unreadable, commands = found
    if unreadable:
        return [unreadable], []
    problems: list[str] = []
    notes: list[str] = []
    wanted = [str(e.get("event")) for e in record.get("entries", []) if isinstance(e, dict)]
    have = {event for event, _ in commands}
    missing = [event for event in wanted if event not in have]
    if missing:
        problems.append(f"no cos hook for {', '.join(missing)} in {record.get('file')}")
    for command in sorted({c for _, c in commands}, key=lambda c: (c.program, c.shape)):
        if command.shape == "launcher":
            _judge_launcher(command, ours, hub, problems, notes)
        else:
            _judge_console_script(command.program, this_cos, problems, notes)
    return problems, notes


def _judge_console_script(cos_path: str, this_cos: str | None, problems: list[str],
                          notes: list[str]) -> None:
    """A hook as an older init wrote it: `COS_AGENT=… '<cos>' hook <Event>`."""
    from coding_os.install import is_python_script

    if not os.path.isabs(cos_path):
        problems.append(f"hooks run {cos_path!r}, not an absolute path")
    elif not os.path.exists(cos_path):
        problems.append(f"hooks run {cos_path}, which does not exist")
    elif not is_python_script(cos_path):
        problems.append(f"hooks run {cos_path}, a shim (not a Python console script)")
    elif (interpreter := _interpreter(cos_path)) and not os.access(interpreter, os.X_OK):
        problems.append(f"hooks run {cos_path}, whose interpreter {interpreter} is gone")
    else:
        if this_cos and os.path.realpath(cos_path) != os.path.realpath(this_cos):
            notes.append(f"hooks run {cos_path}, not this installation's {this_cos}")
        notes.append(f"hooks run the console script {cos_path}, as an older init wrote them "
                     "(slower to start than the hook launcher)")


def _judge_launcher(command: HookCommand, ours: Launcher | None, hub: str,
                    problems: list[str], notes: list[str]) -> None:
    """A hook running `<python> -I -S <launcher>`: the interpreter exists, the launcher is a
    private file of the user's hub that cos wrote, and it starts this cos (run, when it is this
    installation's; read, never run, when it is another's)."""
    from coding_os.launcher import launchers_dir, read_launcher, render

    interpreter, path = command.interpreter or "", command.program
    if not os.path.isabs(interpreter) or not os.path.isabs(path):
        problems.append(f"hooks run {interpreter!r} {path!r}, not absolute paths")
        return
    if not os.path.isfile(interpreter) or not os.access(interpreter, os.X_OK):
        problems.append(f"hooks run the interpreter {interpreter}, which does not exist")
        return
    home = launchers_dir(hub)
    if os.path.dirname(path) != home:
        # Only a file of the user's hub, which cos writes, may be the program a hook runs.
        problems.append(f"hooks run {path}, which is not a hook launcher in {home}")
        return
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        problems.append(f"the hook launcher {path} does not exist")
        return
    if not os.path.isfile(path) or os.path.islink(path) or info.st_uid != os.geteuid() \
            or info.st_mode & 0o022:
        problems.append(f"the hook launcher {path} is not a private file of this user")
        return
    if ours is not None and path == ours.path:
        if interpreter != ours.interpreter:
            problems.append(f"hooks run this installation's launcher {path} with {interpreter}, "
                            f"not {ours.interpreter}")
        elif read_launcher(path) is None or _read(path) != render(ours):
            problems.append(f"the hook launcher {path} is stale: it is not what this cos writes "
                            "(another version wrote it, or the installation changed since)")
        elif (failure := _launcher_fails(interpreter, path)) is not None:
            problems.append(f"the hook launcher {path} does not start this cos: {failure}")
        return
    written = read_launcher(path)
    if written is None:
        problems.append(f"{path} is not a hook launcher cos wrote")
        return
    wrote_for, package = written
    if wrote_for != interpreter:
        problems.append(f"the hook launcher {path} is stale: it was written for {wrote_for}, "
                        f"the hooks run it with {interpreter}")
    elif not os.path.isfile(os.path.join(package, "interfaces", "entry.py")):
        problems.append(f"the hook launcher {path} starts the coding-os in {package}, which is "
                        "gone")
    else:
        notes.append(f"hooks run another installation's cos ({package}), not this one's "
                     f"({ours.package_dir if ours else 'unknown'})")


def _read(path: str) -> bytes | None:
    return durable.read_small(path, 1 << 20)


def _launcher_fails(interpreter: str, path: str) -> str | None:
    """Why this installation's launcher does not start this cos (`--version`), or None."""
    import subprocess

    from coding_os import __version__

    try:
        proc = subprocess.run([interpreter, "-I", "-S", path, "--version"], capture_output=True,
                              text=True, errors="replace", timeout=60, cwd="/",
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return _one_line(exc)
    if proc.returncode == 0 and proc.stdout.split()[-1:] == [__version__]:
        return None
    tail = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or [""])[-1]
    return f"exit {proc.returncode}: {tail[:200]}"


def _interpreter(script: str) -> str | None:
    """The interpreter named by a script's `#!` line."""
    try:
        with open(script, "rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    words = first[2:].strip().split(b" ") if first.startswith(b"#!") else []
    return os.fsdecode(words[0]) if words and words[0] else None


# -- state dir ------------------------------------------------------------------------------------


def _state_dir(ctx: _Context) -> Check:
    """Resolution from the project root, the caller's directory and subdirectories agree."""
    resolution = ctx.resolution
    assert resolution is not None
    data: dict[str, Any] = {"state_dir": resolution.state_dir, "rule": resolution.rule,
                            "project_root": resolution.project_root}
    if not ctx.initialised:
        return Check("state_dir", "warn",
                     f"no state dir: cos has not run in this project ({resolution.state_dir} "
                     "does not exist)", "cos init --agent claude (or --agent codex)", data)
    if resolution.rule == "explicit":
        return Check("state_dir", "ok", f"{resolution.state_dir} (COS_STATE_DIR, used verbatim)",
                     None, data)
    root = resolution.worktree or resolution.project_root
    probes = _probe_dirs(root, os.path.realpath(ctx.cwd))
    data["probes"] = {}
    differ: list[str] = []
    for probe in probes:
        try:
            got = resolve(probe, ctx.env).state_dir
        except CosError as exc:
            got = _one_line(exc)
        data["probes"][probe] = got
        if got != resolution.state_dir:
            differ.append(f"from {probe} it is {got}")
    if differ:
        stray = [p for p in data["probes"].values() if p.endswith(os.sep + STATE_DIR_NAME)
                 and p != resolution.state_dir]
        fix = (f"move what you need out of {', '.join(sorted(set(stray)))} and remove it (a "
               "stray nested state dir)" if stray else
               "set COS_PROJECT_ROOT (or CLAUDE_PROJECT_DIR) to the project root")
        return Check("state_dir", "fail", f"state resolves to {resolution.state_dir} from "
                     f"{ctx.cwd}, but {'; '.join(differ)}", fix, data)
    return Check("state_dir", "ok", f"{resolution.state_dir} ({resolution.rule}); the same from "
                 f"{len(probes)} places in the project", None, data)


def _probe_dirs(root: str, cwd: str) -> list[str]:
    """Where to resolve from: the root, the caller's directory, one subdirectory (a path below the
    root when it has none: resolution needs no directory to exist), and every directory near the
    top that holds a state dir of its own (where resolution would split)."""
    probes = [root, cwd]
    try:
        subdirs = sorted(e.name for e in os.scandir(root)
                         if e.is_dir(follow_symlinks=False) and e.name not in _SKIP_DIRS
                         and not e.name.startswith("."))
    except OSError:
        subdirs = []
    probes.append(os.path.join(root, subdirs[0]) if subdirs
                  else os.path.join(root, "cos-doctor-probe", "nested"))
    seen = 0
    for top, dirs, _ in os.walk(root):
        depth = top[len(root):].count(os.sep)
        if top != root and STATE_DIR_NAME in dirs:
            probes.append(top)
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        seen += len(dirs)
        if depth >= _NESTED_DEPTH or seen > _NESTED_MAX_DIRS:
            dirs[:] = []
    return list(dict.fromkeys(probes))


# -- writable -------------------------------------------------------------------------------------

_PROBE_BYTES = 4096  # a block: on a full disk, writing it fails as a checkpoint's would


def _writable(ctx: _Context) -> Check:
    """cos can write where every hook and command writes: the state dir, its checkpoint store
    and agent folders, its database and hooks log, and the user's hub (launchers, registry,
    jobs). Each folder is probed with a file written, flushed and removed; each file is asked
    (`access`, which a read-only mount answers as a write would)."""
    from coding_os.adapters import ADAPTER_NAMES

    assert ctx.tiers is not None and ctx.resolution is not None
    if not ctx.initialised:
        return Check("writable", "skip", "no state dir yet (the first cos command makes it)")
    tiers = ctx.tiers
    folders = [tiers.state_dir, tiers.checkpoints_dir,
               os.path.join(tiers.checkpoints_dir, "objects"),
               *(tiers.agent_dir(agent) for agent in ADAPTER_NAMES), ctx.resolution.hub]
    files = [tiers.database, tiers.database + "-wal", tiers.database + "-shm", tiers.hooks_log,
             tiers.manifest]
    failures: list[str] = []
    probed = [folder for folder in folders
              if os.path.isdir(folder) and not os.path.islink(folder)]
    for folder in probed:
        why = _cannot_write(folder)
        if why is not None:
            failures.append(why)
    for path in files:
        if os.path.isfile(path) and not os.access(path, os.W_OK):
            failures.append(f"cannot write {path}: "
                            f"{'read-only file system' if _read_only(path) else 'not writable'}")
    data = {"folders": probed, "failures": failures}
    if failures:
        return Check("writable", "fail", f"{len(failures)} places cos writes to cannot be "
                     f"written, so every hook and command that writes fails: "
                     f"{'; '.join(failures[:3])}",
                     "make them writable for this user (remount a read-only file system "
                     "read-write, free disk space, or give them back to this user), then run "
                     "`cos doctor` again", data)
    return Check("writable", "ok", f"cos can write its {len(probed)} folders and their files",
                 None, data)


def _cannot_write(folder: str) -> str | None:
    """Why a file cannot be written in `folder` (one line), or None when it can."""
    import tempfile

    try:
        fd, path = tempfile.mkstemp(prefix=".cos-doctor-probe-", dir=folder)
    except OSError as exc:
        return str(durable.io_error(folder, exc))
    try:
        os.write(fd, bytes(_PROBE_BYTES))
        os.fsync(fd)
    except OSError as exc:
        return str(durable.io_error(folder, exc))
    finally:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass
    return None


def _read_only(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


# -- database -------------------------------------------------------------------------------------


def _database(ctx: _Context) -> Check:
    """The database opens, passes its integrity check and is at the latest migration."""
    assert ctx.tiers is not None
    url = ctx.env.get("COS_DATABASE_URL") or ""
    if url.startswith(("postgresql://", "postgres://")):
        return _postgres(url)
    if url and not url.startswith("sqlite:///"):
        return Check("database", "fail", f"COS_DATABASE_URL {url.split('@')[-1]!r} is neither "
                     "sqlite:///path nor postgresql://…", "fix COS_DATABASE_URL")
    path = url[len("sqlite://"):] if url else ctx.tiers.database
    if not os.path.exists(path):
        if not ctx.initialised and not url:
            return Check("database", "skip", "no state dir, so no database")
        return Check("database", "skip", f"{path} does not exist yet (the first hook or cos "
                     "command creates it)", None, {"path": path})
    return _sqlite(path)


def _sqlite(path: str) -> Check:
    import sqlite3
    from urllib.parse import quote

    from coding_os.storage.migrations.sqlite import MIGRATIONS

    data: dict[str, Any] = {"backend": "sqlite", "path": path, "latest": len(MIGRATIONS)}
    fix_corrupt = (f"the session index rebuilds from the logs: `cos index rebuild` sets {path} "
                   "aside and builds a new one (tasks, work log and observations in it are lost "
                   f"unless recovered first, e.g. `sqlite3 {path} .recover`)")
    has_wal = any(os.path.exists(path + extra) for extra in ("-wal", "-shm"))
    # Without a WAL the file is the whole database: `immutable` reads it creating no -wal/-shm
    # file and taking no lock; with one, read-only mode reads through it.
    uri = f"file:{quote(os.path.abspath(path))}?mode=ro" + ("" if has_wal else "&immutable=1")
    try:
        conn = sqlite3.connect(uri, uri=True)
        try:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return Check("database", "fail", f"{path} cannot be read as a database: {exc}",
                     fix_corrupt, data)
    problems = [str(row[0]) for row in rows if row and row[0] != "ok"]
    data["version"] = version
    if problems:
        data["integrity"] = problems[:20]
        return Check("database", "fail", f"{path} fails its integrity check: "
                     f"{'; '.join(problems[:3])}", fix_corrupt, data)
    return _version_check(f"{path}", version, len(MIGRATIONS), data)


def _version_check(where: str, version: int, latest: int, data: dict[str, Any]) -> Check:
    if version > latest:
        return Check("database", "fail", f"{where} is at schema version {version}, newer than "
                     f"this coding-os knows ({latest})", "upgrade coding-os", data)
    if version < latest:
        return Check("database", "warn", f"{where} is at schema version {version} of {latest}",
                     "run any cos command that uses it to migrate it (e.g. `cos sessions`)",
                     data)
    return Check("database", "ok", f"{where}: integrity ok, schema version {version} (latest)",
                 None, data)


def _postgres(url: str) -> Check:
    try:
        import psycopg
        from psycopg import sql

        from coding_os.storage.postgres import CONNECT_TIMEOUT_S, redact, search_path_schema
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "psycopg":
            raise
        return Check("database", "fail", "COS_DATABASE_URL selects PostgreSQL, but psycopg is "
                     "not installed", "pip install 'coding-os[postgres]'")
    from psycopg.conninfo import conninfo_to_dict

    from coding_os.storage.migrations.postgres import MIGRATIONS

    shown = redact(url)
    data: dict[str, Any] = {"backend": "postgresql", "url": shown, "latest": len(MIGRATIONS)}
    try:
        params = conninfo_to_dict(url)
        password = str(params.get("password") or "")
        schema = search_path_schema(str(params.get("options") or ""))
        timeout = {} if "connect_timeout" in params else {"connect_timeout": CONNECT_TIMEOUT_S}
        with psycopg.connect(url, autocommit=True, **timeout) as conn:  # type: ignore[arg-type]
            table = (sql.Identifier(schema, "schema_migrations") if schema
                     else sql.Identifier("schema_migrations"))
            row = conn.execute("SELECT to_regclass(%s) IS NOT NULL",
                               (table.as_string(conn),)).fetchone()
            version = 0
            if row and row[0]:
                row = conn.execute(sql.SQL("SELECT coalesce(max(version), 0) FROM {}")
                                   .format(table)).fetchone()
                version = int(row[0]) if row else 0
    except psycopg.Error as exc:
        message = _one_line(exc)
        if password:
            message = message.replace(password, "***")
        return Check("database", "fail", f"cannot use {shown}: {message}",
                     "check COS_DATABASE_URL, that the server is reachable and that the login "
                     "may connect", data)
    data["version"] = version
    data["schema"] = schema
    return _version_check(shown + (f" (schema {schema})" if schema else ""), version,
                          len(MIGRATIONS), data)


# -- session index --------------------------------------------------------------------------------


_AGENT_LOGS = {"claude": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI"}


def _index(ctx: _Context) -> Check:
    """The index's freshness, and the lines of the agents' logs its last import could not read
    (no JSON object, or a record of a kind this cos does not know yet: counted per agent and
    file, their sessions listed from the rest)."""
    from coding_os.sessions.index import unreadable_lines

    check = _index_freshness(ctx)
    if check.status == "skip" or ctx.tiers is None:
        return check
    unread = unreadable_lines(ctx.tiers)
    if not unread:
        return check
    parts = []
    for agent, files in sorted(unread.items()):
        worst = max(files, key=lambda path: files[path])
        parts.append(f"{sum(files.values())} line(s) of {_AGENT_LOGS.get(agent, agent)}'s "
                     f"sessions could not be read, in {len(files)} file(s) (most in {worst}: "
                     f"{files[worst]})")
    detail = "; ".join(parts) + ": written in a format this cos does not read (the sessions " \
        "are listed from the lines it reads)"
    data = {**check.data, "unreadable_lines": unread,
            "unreadable_line_counts": {agent: sum(files.values())
                                       for agent, files in sorted(unread.items())}}
    if check.status == "ok":
        return Check("index", "warn", f"{check.detail}; but {detail}",
                     "update cos (a newer one may read them); the files are only read, never changed", data)
    return Check(check.name, check.status, f"{check.detail}; {detail}", check.fix, data)


def _index_freshness(ctx: _Context) -> Check:
    """The last import saw the logs as they are now (a stat walk; nothing is imported)."""
    from coding_os.sessions import freshness
    from coding_os.sessions.database import native_dirs
    from coding_os import durable

    assert ctx.tiers is not None
    if not ctx.initialised:
        return Check("index", "skip", "no state dir, so no session index")
    claude_dir, codex_dir = native_dirs(ctx.env)
    data = {"claude_dir": claude_dir, "codex_dir": codex_dir}
    fix = "cos import (any `cos sessions` or `cos resume` imports what changed first)"
    saved = durable.read_small(os.path.join(ctx.tiers.state_dir, freshness.FINGERPRINT_FILE))
    if not saved:
        # The fingerprint counts its lines: the two naming the directories, then one per log.
        logs = int(freshness.fingerprint(ctx.tiers, claude_dir, codex_dir).split("-", 1)[0]) - 2
        if logs <= 0:
            return Check("index", "ok", "no logs to index yet", None, data)
        return Check("index", "warn", f"the session index has never imported the logs ({logs} "
                     "files)", fix, data)
    if not freshness.unchanged(ctx.tiers, claude_dir, codex_dir):
        return Check("index", "warn", "stale: transcripts or native logs changed since the last "
                     "import", fix, data)
    url = ctx.env.get("COS_DATABASE_URL") or ""
    if not url and not os.path.exists(ctx.tiers.database):
        return Check("index", "warn", f"stale: the logs are unchanged but {ctx.tiers.database} "
                     "is gone", "cos index rebuild", data)
    return Check("index", "ok", "fresh: no log changed since the last import", None, data)


# -- panels ---------------------------------------------------------------------------------------


def _panels(ctx: _Context) -> Check:
    """Panels whose heartbeat is older than COS_PANEL_GC_TTL (what `cos gc --panels` reaps)."""
    from coding_os.state.gc import iter_panels, reap_panels

    assert ctx.tiers is not None
    if not ctx.initialised:
        return Check("panels", "skip", "no state dir, so no panels")
    try:
        report = reap_panels(ctx.tiers, ctx.env, dry_run=True)  # dry run: only reads
    except CosError as exc:
        return Check("panels", "fail", _one_line(exc), "fix COS_PANEL_GC_TTL (e.g. 24h)")
    total = sum(1 for _ in iter_panels(ctx.tiers))
    orphans = [{"agent": e.agent, "panel": e.panel, "session": e.session,
                "heartbeat_age_s": e.heartbeat_age_s} for e in report.reaped]
    data = {"ttl_s": report.ttl_s, "panels": total, "orphaned": orphans}
    if orphans:
        names = ", ".join(f"{o['agent']}/{o['panel']}" for o in orphans[:5])
        more = f" and {len(orphans) - 5} more" if len(orphans) > 5 else ""
        return Check("panels", "warn", f"{len(orphans)} of {total} panels orphaned (heartbeat "
                     f"older than {report.ttl_s:g}s): {names}{more}", "cos gc --panels", data)
    return Check("panels", "ok", f"{total} panels, none older than {report.ttl_s:g}s", None, data)


# -- checkpoints ----------------------------------------------------------------------------------


def _checkpoints(ctx: _Context) -> Check:
    """Every checkpoint object re-hashes to its id and every reference resolves."""
    from coding_os.checkpoints.upkeep import verify

    assert ctx.tiers is not None
    if not os.path.isdir(ctx.tiers.checkpoints_dir):
        return Check("checkpoints", "skip", "no checkpoints yet")
    from coding_os.checkpoints.lock import pending

    if pending(ctx.tiers.checkpoints_dir):
        return Check("checkpoints", "fail", "a rewind was interrupted: its journal is waiting",
                     "run any other cos command (e.g. `cos checkpoints`): it completes the "
                     "rewind, or rolls it back")
    report = verify(ctx.tiers)
    data = {key: report[key] for key in ("objects_checked", "checkpoints", "damaged", "missing",
                                         "orphaned")}
    if not report["ok"]:
        damaged, missing = report["damaged"], report["missing"]
        assert isinstance(damaged, list) and isinstance(missing, list)
        first = (damaged + missing)[0]
        return Check("checkpoints", "fail",
                     f"{len(damaged)} damaged objects, {len(missing)} missing references (e.g. "
                     f"{' '.join(str(v) for v in first.values())})",
                     "`cos checkpoints verify` lists them; a rewind to a damaged checkpoint is "
                     "refused: take a fresh one with `cos checkpoint create`", data)
    gone = report["orphaned"]
    assert isinstance(gone, list)
    if gone:
        return Check("checkpoints", "warn", f"{report['objects_checked']} objects and "
                     f"{report['checkpoints']} checkpoints verified, of which {len(gone)} were "
                     f"taken in a background job's worktree that is gone (e.g. "
                     f"{gone[0]['root']}): nothing can be rewound to them",
                     "cos gc (drops them, as cos rm does now)", data)
    return Check("checkpoints", "ok", f"{report['objects_checked']} objects, "
                 f"{report['checkpoints']} checkpoints verified", None, data)


# -- MCP server -----------------------------------------------------------------------------------


def _mcp(ctx: _Context, timeout_s: float) -> Check:
    """cos's MCP server starts as an agent starts it and lists every tool."""
    from importlib.util import find_spec

    if find_spec("mcp") is None:
        return Check("mcp", "fail", "the MCP SDK (mcp) is not installed", "pip install mcp")
    command, args, extra_env, source, problem = _mcp_command(ctx)
    data: dict[str, Any] = {"command": [command, *args] if command else None, "source": source}
    if problem:
        return Check("mcp", "fail", problem, _mcp_fix(source), data)
    assert command is not None
    env = {**ctx.env, **extra_env}
    scratch = None
    cwd = _checkout(ctx) if ctx.resolution else ctx.cwd
    if not ctx.initialised:
        # Nothing may appear in a project cos never ran in: the server gets a state dir of its own.
        import tempfile

        scratch = tempfile.TemporaryDirectory(prefix="cos-doctor-")
        env["COS_STATE_DIR"] = os.path.join(scratch.name, STATE_DIR_NAME)
        data["scratch_state_dir"] = True
    try:
        tools, stderr_tail = _list_tools(command, args, env, cwd, timeout_s)
    except _McpFailure as exc:
        detail = f"{' '.join([command, *args])} {exc}"
        if exc.stderr_tail:
            detail += f" (stderr: {exc.stderr_tail})"
        return Check("mcp", "fail", detail, _mcp_fix(source, [command, *args], exc.stderr_tail),
                     data)
    finally:
        if scratch is not None:
            scratch.cleanup()
    data["tools"] = tools
    missing = [name for name in MCP_TOOLS if name not in tools]
    data["missing"] = missing
    if missing:
        return Check("mcp", "fail", f"the server lists {len(tools)} tools; missing: "
                     f"{', '.join(missing)}", "upgrade coding-os, then " + _mcp_fix(source), data)
    return Check("mcp", "ok", f"{' '.join([command, *args])} starts and lists {len(tools)} "
                 f"tools ({source})", None, data)


def _mcp_fix(source: str, command: list[str] | None = None,
             stderr_tail: str | None = None) -> str:
    if stderr_tail and "No such command" in stderr_tail:
        return "upgrade coding-os: this cos has no `mcp` command"
    see = f"; `{shlex.join(command)}` in a terminal shows why it stops" if command else ""
    from coding_os.adapters.mcp import MCP_FILES

    for agent, name in MCP_FILES.items():
        if source.endswith(os.sep + name):
            return (f"cos init --agent {agent} (registers this installation's `cos mcp` "
                    f"again){see}")
    return f"reinstall coding-os (pip install coding-os){see}"


def _mcp_command(ctx: _Context) -> tuple[str | None, list[str], dict[str, str], str, str | None]:
    """(command, args, env, where it came from, why it cannot be used): this installation's
    `cos mcp`, which the checkout's `.mcp.json` (Claude Code), `.codex/config.toml` (Codex) or
    `.gemini/settings.json` (Gemini CLI) must register as `cos init` writes it. Doctor never runs what the checkout names, nor with
    the environment it gives (DESIGN.md §11): a registration that is not exactly this
    installation's is reported, and this installation's server is what is started."""
    from coding_os.adapters.mcp import MCP_FILES, read_registration
    from coding_os.install import installed_cos

    checkout = _checkout(ctx) if ctx.resolution else None
    for agent in MCP_FILES if checkout is not None else ():
        assert checkout is not None  # (for the type checker)
        path = source = os.path.join(checkout, MCP_FILES[agent])
        try:
            entry = read_registration(agent, checkout)
        except (OSError, ValueError, InvalidInput) as exc:
            return None, [], {}, source, f"cannot read {path}: {_one_line(exc)}"
        if entry is None:
            continue
        command = entry.get("command") if isinstance(entry, dict) else None
        args = (entry.get("args") or []) if isinstance(entry, dict) else None
        env = (entry.get("env") or {}) if isinstance(entry, dict) else None
        if not isinstance(command, str) or not isinstance(args, list) or not isinstance(env, dict):
            return None, [], {}, source, f"{path}: the {MCP_SERVER_NAME} server entry is malformed"
        argv = [command, *(str(a) for a in args)]
        if os.path.isabs(command) and not os.path.exists(command):
            return None, [], {}, source, f"{path} runs {command}: No such file"
        try:
            ours = installed_cos()
        except CosError as exc:
            return None, [], {}, source, _one_line(exc)
        if not _is_cos_server(command, argv[1:]) or not _same_file(command, ours) \
                or argv[1:] != ["mcp"] or env not in ({}, {"COS_AGENT": agent}):
            # A checkout's file names it: running it would run whatever a clone brought along.
            return None, [], {}, source, (
                f"{path}: its {MCP_SERVER_NAME} entry runs {shlex.join(argv)[:200]}"
                f"{' with its own environment' if env else ''}, which is not this "
                f"installation's `{ours} mcp`; doctor does not start it")
        return ours, ["mcp"], {"COS_AGENT": agent}, source, None
    try:
        return installed_cos(), ["mcp"], {}, "this installation's cos", None
    except CosError as exc:
        return None, [], {}, "this installation's cos", _one_line(exc)


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one file (compared as the kernel sees them, not by the words:
    `/proc/self/cwd/tools/cos` is a file of the checkout, whatever it is called)."""
    try:
        first, second = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def _is_cos_server(command: str, args: list[str]) -> bool:
    """Whether a registered server is a coding-os installation's `cos mcp`: an absolute `cos`
    console script run with `mcp`."""
    from coding_os.install import is_python_script

    return (os.path.isabs(command) and os.path.basename(command) == "cos"
            and is_python_script(command) and args[:1] == ["mcp"])


class _McpFailure(Exception):
    def __init__(self, message: str, stderr_tail: str | None) -> None:
        super().__init__(message)
        self.stderr_tail = stderr_tail


def _list_tools(command: str, args: list[str], env: dict[str, str], cwd: str,
                timeout_s: float) -> tuple[list[str], str | None]:
    """Start the server over stdio, initialise, list every tool (all pages) within `timeout_s`.

    Doctor speaks the three messages of MCP's stdio transport itself (newline-delimited
    JSON-RPC: `initialize`, `notifications/initialized`, `tools/list`), as an agent does, rather
    than through the SDK's client, whose import alone costs about a second.

    Raises:
        _McpFailure: it did not start, answer or list in time (with the end of its stderr).
    """
    import json
    import selectors
    import subprocess
    import tempfile
    import time

    deadline = time.monotonic() + timeout_s
    with tempfile.TemporaryFile("w+b") as errlog:
        try:
            proc = subprocess.Popen([command, *args], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=errlog, env=env, cwd=cwd)
        except OSError as exc:
            raise _McpFailure(f"failed: {_one_line(exc)}", None) from None
        assert proc.stdin is not None and proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        buffered = b""

        def send(message: dict[str, Any]) -> None:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()

        def answer(request_id: int) -> dict[str, Any]:
            """The response to `request_id`; what else the server writes is passed over."""
            nonlocal buffered
            assert proc.stdout is not None
            while True:
                while b"\n" in buffered:
                    line, buffered = buffered.split(b"\n", 1)
                    try:
                        message = json.loads(line)
                    except ValueError:
                        raise _Unanswered(f"wrote a line that is not JSON-RPC: {line[:120]!r}")
                    if not isinstance(message, dict) or message.get("id") != request_id:
                        continue
                    if "error" in message:
                        error = message["error"]
                        text = error.get("message") if isinstance(error, dict) else error
                        raise _Unanswered(f"failed: {str(text)[:200]}")
                    result = message.get("result")
                    return result if isinstance(result, dict) else {}
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    raise TimeoutError
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    code = proc.wait()
                    raise _Unanswered(f"failed: it exited with status {code} before answering")
                buffered += chunk

        names: list[str] = []
        grace = 2.0  # for a server that answered to end once its stdin closes
        try:
            send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                  "params": {"protocolVersion": _MCP_PROTOCOL, "capabilities": {},
                             "clientInfo": {"name": "cos-doctor", "version": "1"}}})
            answer(0)
            send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            cursor: str | None = None
            for page in range(1, 101):
                params = {"cursor": cursor} if cursor else {}
                send({"jsonrpc": "2.0", "id": page, "method": "tools/list", "params": params})
                result = answer(page)
                tools = result.get("tools")
                names += [tool["name"] for tool in tools if isinstance(tool, dict)
                          and isinstance(tool.get("name"), str)] if isinstance(tools, list) else []
                next_cursor = result.get("nextCursor")
                cursor = next_cursor if isinstance(next_cursor, str) and next_cursor else None
                if cursor is None:
                    break
            return names, None
        except TimeoutError:
            message = f"did not list its tools within {timeout_s:g}s"
            grace = 0.0
        except _Unanswered as exc:
            message = str(exc)
        except OSError as exc:  # its stdin closed: it stopped before reading
            message = f"failed: {_one_line(exc)}"
        finally:
            selector.close()
            # Its stdin closing is the end of the session for a stdio server.
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        errlog.seek(0)
        text = errlog.read().decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    raise _McpFailure(message, lines[-1][:300] if lines else None)


class _Unanswered(Exception):
    """The server ended, refused or wrote what is not JSON-RPC before its answer."""


# -- cos acp --------------------------------------------------------------------------------------


def _acp(ctx: _Context, timeout_s: float) -> Check:
    """This installation's `cos acp` starts and answers an `initialize` as an editor sends it,
    on stdout JSON-RPC only; without the ACP SDK (an optional extra) it warns with the install
    line `cos acp` itself prints."""
    import json
    import subprocess
    import tempfile

    from coding_os.install import installed_cos

    try:
        command = installed_cos()
    except CosError as exc:
        return Check("acp", "fail", _one_line(exc), "reinstall coding-os (pip install coding-os)")
    argv = [command, "acp"]
    data: dict[str, Any] = {"command": argv}
    env = dict(ctx.env)
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}
    with tempfile.TemporaryDirectory(prefix="cos-doctor-") as scratch:
        # Started in a scratch folder with a state dir of its own: `initialize` needs neither
        # the project nor its state, and a cos command started in the project would complete
        # an interrupted rewind there (doctor changes nothing, nor runs what a checkout holds).
        env["COS_STATE_DIR"] = os.path.join(scratch, STATE_DIR_NAME)
        try:
            # stdin ends after the request: cos acp answers, then ends as at an editor's exit.
            proc = subprocess.run(argv, input=json.dumps(request) + "\n", capture_output=True,
                                  text=True, errors="replace", env=env, timeout=timeout_s,
                                  cwd=scratch)
        except subprocess.TimeoutExpired:
            return Check("acp", "fail", f"{shlex.join(argv)} did not answer initialize and end "
                         f"within {timeout_s:g}s", f"`{shlex.join(argv)}` in a terminal shows "
                         "why", data)
    lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    stderr_tail = lines[-1][:300] if lines else None
    if proc.returncode != 0 and ACP_INSTALL in proc.stderr and not proc.stdout.strip():
        return Check("acp", "warn", f"{shlex.join(argv)} needs the ACP SDK, which is not "
                     "installed (the acp extra): editors cannot use cos as their agent",
                     ACP_INSTALL, data)
    answer, problem = _acp_answer(proc.stdout)
    if problem is None and proc.returncode != 0:
        problem = f"exited {proc.returncode} after answering"
    if problem is not None:
        detail = f"{shlex.join(argv)} {problem}"
        if stderr_tail:
            detail += f" (stderr: {stderr_tail})"
        return Check("acp", "fail", detail, "upgrade or reinstall coding-os with the acp extra "
                     f"({ACP_INSTALL}); `{shlex.join(argv)}` in a terminal shows why", data)
    data["agentInfo"] = answer.get("agentInfo")
    return Check("acp", "ok", f"{shlex.join(argv)} starts and answers initialize (protocol "
                 f"{answer.get('protocolVersion')}, {answer['agentInfo'].get('name')} "
                 f"{answer['agentInfo'].get('version')})", None, data)


def _acp_answer(stdout: str) -> tuple[dict[str, Any], str | None]:
    """The result `cos acp` gave the `initialize` (id 1), or what is wrong with its stdout."""
    import json

    result: dict[str, Any] | None = None
    for line in stdout.splitlines():
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            return {}, f"wrote a line that is not JSON-RPC to stdout: {line[:120]!r}"
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return {}, f"wrote a line that is not JSON-RPC to stdout: {line[:120]!r}"
        if message.get("id") == 1:
            if "error" in message:
                return {}, f"refused initialize: {str(message['error'])[:200]}"
            found = message.get("result")
            result = found if isinstance(found, dict) else {}
    if result is None:
        return {}, "gave no answer to initialize"
    info = result.get("agentInfo")
    if result.get("protocolVersion") != 1 or not isinstance(info, dict) \
            or info.get("name") != "coding-os":
        return {}, f"answered initialize with no coding-os agent of protocol 1: {str(result)[:200]}"
    return result, None
