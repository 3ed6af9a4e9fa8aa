"""`cos init` and `cos uninstall`: wiring coding-os into an agent's hook settings.

Each agent has a JSON hooks file of the same layout (Claude Code: `.claude/settings.json` or
`settings.local.json`; Codex: `.codex/hooks.json`):

    {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command",
                                                          "command": "...", "timeout": 30}]}]}}

`init` adds one matcher group per event running
`COS_AGENT=<agent> '<abs python>' -I -S '<hub>/launchers/hook-<key>.py' hook <Event>` (the hook
launcher of this installation, see `coding_os.launcher`), leaving every other key and hook as it
was; a second run changes no byte. A group an older init wrote (running the `cos` console script)
is upgraded in place. What it added is recorded in `.coding-os/installed-manifest.json`, and
`uninstall` removes exactly that: when nothing else changed in the file meanwhile, the file gets
its original bytes back. The launcher stays: it belongs to the installation, not the project, and
other projects' hooks may run it.

Codex runs a project's hooks only when its user trusts both the project and each hook, in
`$CODEX_HOME/config.toml` (adapters/codex/hook_trust.py). `init --agent codex` is the user asking
for exactly these hooks, so it records Codex's trust of the hooks it wrote (by their hashes: a
hook changed by anyone else is not trusted) as tables of its own in that file, which `uninstall`
removes. Trusting the project is another matter: it lets Codex load everything the repository's
`.codex/` holds, which is the user's call, never cos's; init says the exact lines to add (or the
prompt to accept) as a step for the user (`InstallReport.user_steps`) while it is not done.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from coding_os.adapters import hook_events
from coding_os.adapters.mcp import MCP_FILES, MCP_SERVER_NAME
from coding_os.errors import InvalidInput, NotFound, StateIOError
from coding_os import durable, jsonwire
from coding_os.launcher import Launcher, hook_command, parse_hook_command, this_launcher
from coding_os.launcher import write as write_launcher
from coding_os.state import registry
from coding_os.state.caller import Caller
from coding_os.git.repo import checkout_root
from coding_os.state.root import linked_worktree_main

__all__ = [
    "AGENT_HOOK_FILES",
    "cos_hooks_settings",
    "worktree_hooks",
    "InstallReport",
    "install",
    "uninstall",
    "installed_cos",
    "read_manifest",
    "MAX_SETTINGS_BYTES",
    "is_python_script",
]

TOOL_EVENTS = ("PreToolUse", "PostToolUse", "BeforeTool", "AfterTool")  # Gemini CLI's last

HOOK_TIMEOUT_S = 30
MANIFEST_VERSION = 1
# A settings file, an MCP file or the manifest: far larger than any cos or an agent writes.
MAX_SETTINGS_BYTES = 16 << 20
# agent -> (settings file, local settings file or None), relative to the checkout.
AGENT_HOOK_FILES: dict[str, tuple[str, str | None]] = {
    "claude": (os.path.join(".claude", "settings.json"),
               os.path.join(".claude", "settings.local.json")),
    "codex": (os.path.join(".codex", "hooks.json"), None),
    "gemini": (os.path.join(".gemini", "settings.json"), None),
}
# Marks the tables init adds to the user's Codex config (uninstall removes them whole).
CODEX_TRUST_COMMENT = ("# coding-os (cos init --agent codex): Codex's trust of the hooks it wrote; "
                       "cos uninstall removes these tables\n")


@dataclass
class InstallReport:
    """What `init` or `uninstall` did to one agent's hooks file."""

    agent: str
    file: str
    changed: bool
    events: list[str] = field(default_factory=list)
    command: str | None = None
    state_dir: str = ""
    notes: list[str] = field(default_factory=list)
    mcp_file: str | None = None  # where cos's MCP server is registered for the agent
    launcher: str | None = None  # the hook launcher the commands run
    # What the user must still do for the agent to run the hooks, each {"why", "file",
    # "append"} (the exact text to add to that file) and "or" (another way to do it).
    user_steps: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def installed_cos() -> str:
    """The absolute path of this installation's `cos` console script (never a shim).

    Raises:
        NotFound: no `cos` script belongs to this interpreter, and the one on PATH is a shim.
    """
    beside = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "cos")
    if is_python_script(beside):
        return beside
    on_path = shutil.which("cos")
    if on_path and is_python_script(on_path):
        return os.path.abspath(on_path)
    raise NotFound(
        "cannot find this installation's cos script next to "
        f"{sys.executable}{' (the cos on PATH, ' + on_path + ', is a shim)' if on_path else ''}"
    )


def is_python_script(path: str) -> bool:
    """A console script: a file whose `#!` line runs a Python interpreter directly."""
    try:
        with open(path, "rb") as f:
            first = f.readline(512)
    except OSError:
        return False
    if not first.startswith(b"#!"):
        return False
    interpreter = first[2:].strip().split(b" ")[0]
    return b"python" in os.path.basename(interpreter) and os.access(path, os.X_OK)


def _group(agent: str, launcher: Launcher, event: str) -> dict[str, Any]:
    return _group_running(hook_command(agent, launcher, event), event, _timeout(agent, event))


def _timeout(agent: str, event: str) -> int:
    """A hook's timeout: Codex cuts SessionEnd's to 3 s, warning on every run when it is more;
    Gemini CLI reads it in milliseconds."""
    from coding_os.adapters.codex.hook_trust import SESSION_END_MAX_TIMEOUT_S

    if agent == "gemini":
        return HOOK_TIMEOUT_S * 1000
    if agent == "codex" and event == "SessionEnd":
        return SESSION_END_MAX_TIMEOUT_S
    return HOOK_TIMEOUT_S


def _group_running(command: str, event: str, timeout: int) -> dict[str, Any]:
    group: dict[str, Any] = {}
    if event in TOOL_EVENTS:
        group["matcher"] = "*"
    group["hooks"] = [{"type": "command", "command": command, "timeout": timeout}]
    return group


def _is_cos_group(group: object, agent: str, event: str) -> bool:
    """Whether `group` is one an init wrote for this agent and event, of this shape or an older
    one (the `cos` console script): what another init would replace, not the user's own."""
    if not isinstance(group, dict):
        return False
    entries = group.get("hooks")
    command = entries[0].get("command") if (isinstance(entries, list) and len(entries) == 1
                                            and isinstance(entries[0], dict)) else None
    return (isinstance(command, str) and parse_hook_command(command, agent, event) is not None
            and group in (_group_running(command, event, _timeout(agent, event)),
                          _group_running(command, event, HOOK_TIMEOUT_S)))


def cos_hooks_settings(agent: str, checkout: str) -> str | None:
    """The cos hooks installed in `checkout`'s settings files for `agent` (both the shared and
    the local one), as a settings JSON of their own (`{"hooks": …}`), for a copy of the checkout
    that lacks the files (a job's worktree holds only what is committed): Claude Code takes it
    with `--settings`. None when none is installed; a file that cannot be read counts as none.
    Only the groups an init wrote are taken, never the repository's other hooks."""
    hooks: dict[str, list[Any]] = {}
    for rel in AGENT_HOOK_FILES.get(agent, ()):
        if rel is None:
            continue
        try:
            data, _ = _load_settings(os.path.join(checkout, rel))
        except (InvalidInput, StateIOError):
            continue
        for event, groups in (data.get("hooks") or {}).items():
            if not isinstance(groups, list):
                continue
            for group in groups:
                if _is_cos_group(group, agent, event) and group not in hooks.get(event, []):
                    hooks.setdefault(event, []).append(group)
    return json.dumps({"hooks": hooks}) if hooks else None


def worktree_hooks(agent: str, options: Mapping[str, object], checkout: str
                   ) -> dict[str, object]:
    """The options a job of `agent` (with `options`) running in a worktree of `checkout`
    adds: for Claude Code without settings of its own, the cos hooks of the checkout's settings
    files (`cos_hooks_settings`) as its `settings`; none otherwise."""
    if agent != "claude" or "settings" in options:
        return {}
    hooks = cos_hooks_settings("claude", checkout)
    return {"settings": hooks} if hooks else {}


def _within(path: str, directory: str) -> bool:
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _checkout_root(caller: Caller) -> str:
    """The checkout whose settings files get the hooks: the git checkout around the caller (this
    worktree, in a linked one), else the project root."""
    if caller.resolution.worktree:
        return caller.resolution.worktree
    if caller.resolution.rule in ("default", "explicit"):
        # Before the first init there is no .coding-os to find, and an explicit state dir says
        # nothing of where the checkout is: anchor at the git checkout around the caller.
        return checkout_root(caller.cwd) or caller.resolution.project_root
    return caller.resolution.project_root


def read_manifest(manifest_path: str) -> dict[str, Any]:
    """The installed manifest, or an empty one.

    Raises:
        InvalidInput: the manifest is not a regular file, too large, or not readable JSON.
        StateIOError: it cannot be read.
    """
    try:
        data = durable.read_regular(manifest_path, MAX_SETTINGS_BYTES)
    except OSError as exc:
        raise durable.io_error(manifest_path, exc) from None
    if data is None:
        return {"version": MANIFEST_VERSION, "installations": []}
    try:
        manifest = jsonwire.loads(data)
    except ValueError:
        raise InvalidInput(f"{manifest_path} is not valid JSON; fix or remove it") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("installations"), list):
        raise InvalidInput(f"{manifest_path} is not a coding-os manifest")
    return manifest


def _write_json(path: str, data: bytes, new_mode: int = 0o644) -> None:
    """Replace a settings file atomically, keeping its mode (`new_mode`, 0644 by default, for a
    new one: it is the user's file, not private state; a private one, say holding `env`
    secrets, stays private).

    Raises:
        StateIOError: it cannot be written.
    """
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = new_mode
    durable.ensure_dir(os.path.dirname(path))
    durable.atomic_write(path, data)
    os.chmod(path, mode)


def _load_settings(path: str) -> tuple[dict[str, Any], bytes | None]:
    """A settings file (the repository's: read with bounds, DESIGN.md §11) and its bytes.

    Raises:
        InvalidInput: not a regular file, too large, not a JSON object (or nested too deeply).
        StateIOError: it cannot be read.
    """
    try:
        raw = durable.read_regular(path, MAX_SETTINGS_BYTES)
    except OSError as exc:
        raise StateIOError(f"cannot read {path}: {exc.strerror}") from None
    if raw is None:
        return {}, None
    if not raw.strip():
        return {}, raw
    try:
        data = jsonwire.loads(raw)
    except ValueError as exc:
        raise InvalidInput(f"{path} is not valid JSON ({exc}); nothing was changed") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} must hold a JSON object; nothing was changed")
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise InvalidInput(f"{path}: \"hooks\" must be an object; nothing was changed")
    return data, raw


def _render(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def install(agent: str, *, local: bool = False, caller: Caller | None = None,
            cos_path: str | None = None, launcher: Launcher | None = None,
            env: Mapping[str, str] | None = None) -> InstallReport:
    """Merge coding-os hook entries for `agent` into its hooks file and record them; write the
    hook launcher they run (`launcher`, by default this installation's) in the user's hub.
    `cos_path` is the `cos` console script the MCP server registration runs. For Codex, also
    record its trust of these hooks in the user's Codex config (`env`'s CODEX_HOME), and say
    in `user_steps` what the user must still do for Codex to run them.

    Raises:
        InvalidInput: unknown agent, `--local` where the agent has none, unreadable settings,
            a hub inside the project.
        NotFound: this installation's `cos` script cannot be found.
        StateIOError: a file cannot be written, or the interpreter cannot report its sys.path.
    """
    if agent not in AGENT_HOOK_FILES:
        raise InvalidInput(f"unknown agent {agent!r}: expected one of "
                           f"{', '.join(AGENT_HOOK_FILES)}")
    shared, local_file = AGENT_HOOK_FILES[agent]
    if local and local_file is None:
        raise InvalidInput(f"{agent} has no project-local settings file; run without --local")
    caller = caller or Caller()
    cos_path = cos_path or installed_cos()
    checkout = _checkout_root(caller)
    state_dir = caller.resolution.state_dir
    if caller.resolution.rule == "default" and checkout != caller.resolution.project_root:
        state_dir = os.path.join(checkout, ".coding-os")
    launcher = launcher or this_launcher(hub=caller.resolution.hub)
    for inside in (checkout, state_dir):
        if _within(launcher.path, inside):
            # A file of the checkout could then be the program every hook runs (DESIGN §11).
            raise InvalidInput(f"the hook launcher {launcher.path} would be inside {inside}; "
                               "run cos init with a HOME outside the project")
    rel = local_file if local and local_file else shared
    path = os.path.join(checkout, rel)
    _refuse_links(path, checkout)
    set_aside = _set_aside_foreign(state_dir, caller.resolution.hub, checkout)
    manifest_path = os.path.join(state_dir, "installed-manifest.json")
    manifest = read_manifest(manifest_path)
    _check_manifest_paths(manifest, caller.resolution.project_root, manifest_path)
    record = _find_record(manifest, agent, path)

    data, raw = _load_settings(path)
    mcp_file, mcp_bytes, mcp_record, mcp_foreign = _plan_mcp(agent, checkout, cos_path,
                                                              manifest)
    if mcp_file is not None:
        _refuse_links(mcp_file, checkout)
    created_dir = not os.path.isdir(os.path.dirname(path))
    created_hooks_key = data.get("hooks") is None
    if created_hooks_key:
        data["hooks"] = {}
    hooks = data["hooks"]
    previous_groups = {e["event"]: e["group"] for e in (record or {}).get("entries", [])}
    entries = []
    created_events = set((record or {}).get("created_events", []))
    for event in hook_events(agent):
        group = _group(agent, launcher, event)
        groups = hooks.get(event)
        if groups is None:
            groups = hooks[event] = []
            created_events.add(event)
        if not isinstance(groups, list):
            raise InvalidInput(f"{path}: hooks.{event} must be a list; nothing was changed")
        old = previous_groups.get(event)
        if old is not None and old in groups and old != group:
            groups[groups.index(old)] = group  # reinstalled elsewhere: move our entry
        elif group not in groups:
            # An init's group no record names (an older init's, a copied file's): upgraded.
            stale = next((i for i, g in enumerate(groups) if _is_cos_group(g, agent, event)),
                         None)
            if stale is None:
                groups.append(group)
            else:
                groups[stale] = group
        entries.append({"event": event, "group": group})
    enabled_added = bool((record or {}).get("enabled_mcp"))
    enabled_created = bool((record or {}).get("enabled_mcp_created"))
    if agent == "claude" and not mcp_foreign:
        # Claude Code asks before it starts a server of a project's .mcp.json; the project's
        # own settings may approve it by name (never someone else's server of that name).
        enabled = data.get("enabledMcpjsonServers")
        if enabled is None:
            enabled = data["enabledMcpjsonServers"] = []
            enabled_created = True
        if isinstance(enabled, list) and MCP_SERVER_NAME not in enabled:
            enabled.append(MCP_SERVER_NAME)
            enabled_added = True
    in_settings = _register_mcp_in_settings(agent, path, data, record, cos_path) \
        if MCP_FILES.get(agent) == rel else None
    if in_settings is not None:
        mcp_file, mcp_foreign = path, in_settings.foreign
    rendered = _render(data)
    changed = raw is None or (jsonwire.loads(raw) if raw.strip() else {}) != data
    written = rendered if changed else raw
    assert written is not None

    if record is None:
        record = {
            "agent": agent,
            "file": path,
            "created_file": raw is None,
            "created_dir": created_dir,
            "created_hooks_key": created_hooks_key,
            "original": raw.decode("utf-8", "surrogateescape") if raw is not None else None,
        }
        manifest["installations"].append(record)
    record["entries"] = entries
    record["created_events"] = sorted(created_events)
    if agent == "claude":
        record["enabled_mcp"] = enabled_added
        record["enabled_mcp_created"] = enabled_created
    if in_settings is not None:
        record["mcp_entry"] = in_settings.entry
        record["mcp_created_key"] = in_settings.created_key
    record["cos"] = cos_path
    record["launcher"] = launcher.path
    record["written_sha256"] = hashlib.sha256(written).hexdigest()
    if mcp_record is not None:
        registrations = manifest.setdefault("mcp", [])
        registrations[:] = [r for r in registrations
                            if not (r.get("agent") == agent and r.get("file") == mcp_file)]
        registrations.append(mcp_record)
    trust = _plan_codex_trust(path, data, entries, record, os.environ if env is None else env) \
        if agent == "codex" else None
    if trust is not None and trust.record is not None:
        record["codex_trust"] = trust.record
    # The launcher before any hook names it.
    launcher_changed = write_launcher(launcher)
    _ensure_state_dir(state_dir, caller.resolution.hub, checkout, manifest)
    # The manifest first: a crash before the settings are written leaves a record whose entries
    # are simply not there to remove, never hooks that no record knows about.
    new_manifest = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    if durable.read_small(manifest_path, 16 << 20) != new_manifest:
        durable.atomic_write(manifest_path, new_manifest)
    if changed:
        _write_json(path, rendered)

    if mcp_file is not None and mcp_bytes is not None:
        _write_json(mcp_file, mcp_bytes)
    if trust is not None and trust.text is not None:
        try:
            _write_json(trust.config, trust.text.encode("utf-8"), new_mode=0o600)
        except StateIOError as exc:
            trust.notes = [f"Codex's trust of these hooks could not be recorded: {exc}"]
            trust.steps.insert(0, trust.manual)
    report = InstallReport(agent=agent, file=path,
                           changed=changed or mcp_bytes is not None or launcher_changed,
                           events=list(hook_events(agent)),
                           command=hook_command(agent, launcher, "<Event>"), state_dir=state_dir,
                           mcp_file=None if mcp_foreign else mcp_file, launcher=launcher.path)
    if set_aside is not None:
        report.notes.append(set_aside)
    if mcp_foreign:
        report.notes.append(f"{mcp_file} has a {MCP_SERVER_NAME} server entry that coding-os did "
                            "not write: kept as it is (and not approved); remove it and run "
                            "init again to register cos mcp")
    if trust is not None:
        report.changed = report.changed or trust.text is not None
        report.notes += trust.notes
        report.user_steps += trust.steps
        if trust.project_step is not None:
            report.user_steps.append(trust.project_step)
    return report


@dataclass
class _SettingsServer:
    """cos's MCP server entry in the agent's own settings file (Gemini CLI's `mcpServers`):
    the entry init wrote there (None when the `cos` entry is the user's own), whether init
    created the `mcpServers` key, and whether the entry there is the user's own."""

    entry: dict[str, Any] | None
    created_key: bool
    foreign: bool


def _register_mcp_in_settings(agent: str, path: str, data: dict[str, Any],
                              record: dict[str, Any] | None, cos_path: str) -> _SettingsServer:
    """Add cos's MCP server to `data`, the agent's settings (of `path`), unless a `cos` entry
    there is the user's own: one init wrote (as the record says, or as this init would write
    it) is replaced, anything else is kept.

    Raises:
        InvalidInput: `mcpServers` is not an object.
    """
    previous = (record or {}).get("mcp_entry")
    created_key = bool((record or {}).get("mcp_created_key"))
    servers = data.get("mcpServers")
    if servers is None:
        servers = data["mcpServers"] = {}
        created_key = True
    if not isinstance(servers, dict):
        raise InvalidInput(f"{path}: \"mcpServers\" must be an object; nothing was changed")
    entry = mcp_server_entry(agent, cos_path)
    current = servers.get(MCP_SERVER_NAME)
    if current is not None and current != entry and current != previous:
        return _SettingsServer(None, created_key, True)
    servers[MCP_SERVER_NAME] = entry
    return _SettingsServer(entry, created_key, False)


@dataclass
class _CodexTrust:
    """What init does to the user's Codex config (`text`: its new content, None for nothing)
    and what it leaves to the user."""

    config: str
    text: str | None
    record: dict[str, Any] | None
    notes: list[str]
    steps: list[dict[str, str]]
    manual: dict[str, str]  # the step that trusts the hooks by hand, if writing fails
    project_step: dict[str, str] | None


def _plan_codex_trust(path: str, data: dict[str, Any], entries: list[dict[str, Any]],
                      record: dict[str, Any] | None, env: Mapping[str, str]) -> _CodexTrust:
    """Plan Codex's trust of the hooks init wrote in `path` (its settings `data`): the tables
    of the user's Codex config that trust them as they are, added in a block of cos's own (an
    older block of cos's replaced whole; a hash the user recorded for one of these places
    replaced in place); and whether the user still has to trust the project. Nothing here
    fails the install: what cannot be done is a step for the user, and doctor says it too."""
    import tomllib

    from coding_os.adapters.codex import hook_trust
    from coding_os.state.root import linked_worktree_main

    config_path = hook_trust.user_config_path(env)
    checkout = os.path.dirname(os.path.dirname(path))
    ours = [hook for hook in hook_trust.hooks_of(path, data)
            if any(e["event"] == hook.event and data["hooks"][hook.event][hook.group] == e["group"]
                   for e in entries)]
    previous = (record or {}).get("codex_trust") or {}
    block_before = str(previous.get("block") or "")
    replaced: dict[str, list[str]] = dict(previous.get("replaced") or {})
    manual = {"why": "Codex runs a project's hook only once you trust that hook",
              "file": config_path, "append": "\n".join(hook_trust.trust_table(h) for h in ours)}
    plan = _CodexTrust(config_path, None, None, [], [], manual, None)
    try:
        config, text = hook_trust.read_config(config_path)
    except (InvalidInput, StateIOError) as exc:
        plan.notes.append(f"Codex's trust of these hooks could not be recorded: {exc}")
        plan.steps.append(manual)
        return plan
    main = linked_worktree_main(checkout, env)
    level = hook_trust.project_trust(config, checkout, main[1] if main else None)
    if level != "trusted":
        said = (f"Codex marks {checkout} untrusted in {config_path}: set its trust_level to "
                "\"trusted\"" if level == "untrusted" else
                f"Codex loads {os.path.join(checkout, '.codex')} only in a project you trust")
        plan.project_step = {
            "why": f"{said}; cos does not decide that for you (it lets Codex load everything "
                   "the repository's .codex/ holds)",
            "file": config_path, "append": hook_trust.project_trust_lines(checkout),
            "or": f"start `codex` in {checkout} once and accept its trust prompt"}
    if all(hook_trust.hook_status(config, hook) == "trusted" for hook in ours):
        plan.record = previous or {"config": config_path, "block": "", "replaced": {}}
        plan.notes.append(f"Codex trusts the {len(ours)} hooks of {path} ({config_path})")
        return plan
    base = text or ""
    if block_before and block_before in base:
        base = base.replace(block_before, "", 1)  # cos's own block: written anew below
    try:
        before = tomllib.loads(base)
        tables, left = [], []
        for hook in ours:
            state = before.get("hooks", {}).get("state", {}).get(hook.key)
            if not isinstance(state, dict):
                tables.append(hook_trust.trust_table(hook))
            elif state.get("trusted_hash") == hook.hash and state.get("enabled") is not False:
                continue
            elif _replace_once(base, state.get("trusted_hash"), hook.hash) is not None \
                    and state.get("enabled") is not False:
                old = str(state["trusted_hash"])
                base = str(_replace_once(base, old, hook.hash))
                replaced[hook.key] = [replaced.get(hook.key, [old])[0], hook.hash]
            else:
                left.append(hook)  # the user's own table for it, which cos does not rewrite
        base += "\n" if base and not base.endswith("\n") else ""
        block = ("\n" if base else "") + CODEX_TRUST_COMMENT + "\n".join(tables) if tables else ""
        new_text = base + block
        after = tomllib.loads(new_text)
    except (tomllib.TOMLDecodeError, RecursionError, InvalidInput, AttributeError) as exc:
        plan.notes.append(f"Codex's trust of these hooks could not be recorded in {config_path} "
                          f"({str(exc)[:200]})")
        plan.steps.append(manual)
        return plan
    keys = {hook.key for hook in ours} | set(previous.get("keys") or ())
    trusted = [h for h in ours if hook_trust.hook_status(after, h) == "trusted"]
    if _without(after, keys) != _without(config, keys) or len(trusted) + len(left) != len(ours):
        plan.notes.append(f"Codex's trust of these hooks could not be recorded in {config_path}: "
                          "cos cannot add its tables to that file without changing others")
        plan.steps.append(manual)
        return plan
    plan.text = new_text
    plan.record = {"config": config_path, "block": block, "replaced": replaced,
                   "keys": sorted(h.key for h in ours if hook_trust.trust_table(h) in tables)}
    plan.notes.append(f"recorded Codex's trust of the {len(trusted)} hooks it wrote in {path} "
                      f"({config_path}, [hooks.state] by their hashes; cos uninstall takes it "
                      "back)")
    if left:
        plan.steps.append({
            "why": "your own Codex settings for these hooks keep them from running (turned off, "
                   "or trusted as something else)",
            "file": config_path, "append": "\n".join(hook_trust.trust_table(h) for h in left),
            "or": "set trusted_hash (and remove enabled = false) in those tables as shown"})
    return plan


def _replace_once(text: str, old: object, new: str) -> str | None:
    """`text` with the TOML string `"old"` replaced by `"new"`, when it occurs exactly once."""
    if not isinstance(old, str) or not old:
        return None
    quoted = json.dumps(old)
    return text.replace(quoted, json.dumps(new)) if text.count(quoted) == 1 else None


def _without(config: dict[str, Any], keys: set[str]) -> dict[str, Any]:
    """The parsed Codex config without the hook states of `keys` (and then empty tables)."""
    import copy

    rest = copy.deepcopy(config)
    hooks = rest.get("hooks")
    states = hooks.get("state") if isinstance(hooks, dict) else None
    if isinstance(hooks, dict) and isinstance(states, dict):
        for key in keys:
            states.pop(key, None)
        if not states:
            del hooks["state"]
        if not hooks:
            del rest["hooks"]
    return rest


def _find_record(manifest: dict[str, Any], agent: str, path: str) -> dict[str, Any] | None:
    for record in manifest["installations"]:
        if record.get("agent") == agent and record.get("file") == path:
            return record  # type: ignore[no-any-return]
    return None


def _refuse_links(path: str, checkout: str) -> None:
    """Refuse a settings file reached through a symlink in the checkout (a repository's
    `.claude` linked to `~/.claude` would take cos's hooks into the user's global settings).

    Raises:
        InvalidInput: the file, or a directory between the checkout and it, is a symlink.
    """
    rel = os.path.relpath(path, checkout)
    here = checkout
    for part in rel.split(os.sep):
        here = os.path.join(here, part)
        if os.path.islink(here):
            raise InvalidInput(f"{here} is a symlink (to {os.path.realpath(here)}); cos writes "
                               "its settings only into the checkout itself: nothing was changed")


def _set_aside_foreign(state_dir: str, hub: str, checkout: str) -> str | None:
    """Move a state dir that is not this user's (a clone's, an archive's) out of the way,
    unread (DESIGN.md §11); returns the note saying where it went, or None.

    Raises:
        StateIOError: it cannot be moved.
    """
    import time

    owner = registry.check(state_dir, hub, checkout)
    if owner.status != "foreign":
        return None
    aside = registry.set_aside(state_dir, time.time())
    return (f"{state_dir} was not this user's state dir ({owner.reason}): moved aside, unread, "
            f"to {aside}; a fresh one was made")


def _check_manifest_paths(manifest: dict[str, Any], project: str, manifest_path: str) -> None:
    """Refuse a manifest naming a file outside the project (its checkout and linked
    worktrees): its paths come from cos's own writes, and one that names another place was
    not written by cos (DESIGN.md §11).

    Raises:
        InvalidInput: a path is absolute elsewhere, has `..`, or goes through a symlink.
    """
    files = [record.get("file") for record in manifest.get("installations", [])]
    files += [record.get("file") for record in manifest.get("mcp", [])]
    exclude = manifest.get("git_exclude")
    if isinstance(exclude, dict):
        files.append(exclude.get("file"))
    if not files:
        return
    from coding_os.git.repo import linked_worktrees

    tops = [os.path.realpath(project), *linked_worktrees(project)]
    for name in files:
        if not isinstance(name, str) or not _inside(name, tops):
            raise InvalidInput(f"{manifest_path} names {str(name)[:200]!r}, which is not a file "
                               f"of {project}; nothing was changed (move the manifest aside)")


def _inside(path: str, tops: list[str]) -> bool:
    """Whether `path` is a file under one of `tops`, reached without `..` or a symlink."""
    if not os.path.isabs(path) or os.path.normpath(path) != path or os.path.islink(path):
        return False
    parent = os.path.dirname(path)
    if os.path.realpath(parent) != parent:
        return False
    return any(parent == top or parent.startswith(top + os.sep) for top in tops)


def _ensure_state_dir(state_dir: str, hub: str, checkout: str, manifest: dict[str, Any]) -> None:
    """Create the state dir (registered as this user's) and keep it out of git
    (`.git/info/exclude`), once."""
    registry.create(state_dir, hub)
    if manifest.get("git_exclude"):
        return
    git_dir = os.path.join(checkout, ".git")
    main = linked_worktree_main(checkout)
    if main is not None:
        git_dir = os.path.join(main[1], ".git")
    if not os.path.isdir(git_dir):
        return
    exclude = os.path.join(git_dir, "info", "exclude")
    line = "/.coding-os/"
    try:
        with open(exclude, encoding="utf-8") as f:
            present = line in f.read().splitlines()
    except FileNotFoundError:
        present = False
    if not present:
        os.makedirs(os.path.dirname(exclude), exist_ok=True)
        with open(exclude, "a", encoding="utf-8") as f:
            f.write(f"{line}\n")
        manifest["git_exclude"] = {"file": exclude, "line": line}


def uninstall(agent: str | None = None, *, caller: Caller | None = None,
              env: Mapping[str, str] | None = None) -> list[InstallReport]:
    """Remove exactly the hook entries `install` recorded (all agents, or one), and the trust
    of them it recorded in the user's Codex config (`env`'s CODEX_HOME).

    Raises:
        NotFound: nothing is installed (for that agent).
        InvalidInput: a settings file or the manifest is not readable JSON.
        StateIOError: a file cannot be written.
    """
    caller = caller or Caller(create=False)
    manifest_path = caller.tiers.manifest
    manifest = read_manifest(manifest_path)
    _check_manifest_paths(manifest, caller.resolution.project_root, manifest_path)
    records = [r for r in manifest["installations"] if agent is None or r.get("agent") == agent]
    if not records:
        raise NotFound(f"coding-os hooks are not installed{' for ' + agent if agent else ''} "
                       f"(no entry in {manifest_path})")
    reports = []
    # The MCP registrations first: removing the hooks may remove a directory they share.
    for registration in [r for r in manifest.get("mcp", [])
                         if agent is None or r.get("agent") == agent]:
        _unregister_mcp(registration)
        manifest["mcp"].remove(registration)
    if not manifest.get("mcp", True):
        del manifest["mcp"]
    for record in records:
        reports.append(_remove(record))
        if isinstance(record.get("codex_trust"), dict):
            reports[-1].notes += _untrust_codex(record["codex_trust"],
                                                os.environ if env is None else env)
        manifest["installations"].remove(record)
    if not manifest["installations"]:
        exclude = manifest.pop("git_exclude", None)
        if exclude:
            _remove_exclude_line(exclude["file"], exclude["line"])
    if manifest["installations"]:
        durable.atomic_write(manifest_path, (json.dumps(manifest, indent=2) + "\n").encode())
    else:
        try:
            os.unlink(manifest_path)
        except FileNotFoundError:
            pass
    return reports


def _remove(record: dict[str, Any]) -> InstallReport:
    path = record["file"]
    report = InstallReport(agent=record["agent"], file=path, changed=False,
                           events=[e["event"] for e in record.get("entries", [])],
                           launcher=record.get("launcher"))
    if record.get("launcher"):
        report.notes.append(f"kept the hook launcher {record['launcher']}: it belongs to the "
                            "installation of cos, and other projects' hooks may run it")
    data, raw = _load_settings(path)
    if raw is None:
        report.notes.append(f"{path} no longer exists")
        return report
    hooks = data.get("hooks") or {}
    for entry in record.get("entries", []):
        groups = hooks.get(entry["event"])
        if isinstance(groups, list) and entry["group"] in groups:
            groups.remove(entry["group"])
            report.changed = True
        if entry["event"] in record.get("created_events", []) and groups == []:
            del hooks[entry["event"]]
    if record.get("created_hooks_key") and hooks == {} and "hooks" in data:
        del data["hooks"]
    servers = data.get("mcpServers")
    if record.get("mcp_entry") is not None and isinstance(servers, dict) \
            and servers.get(MCP_SERVER_NAME) == record["mcp_entry"]:
        del servers[MCP_SERVER_NAME]  # as init wrote it (else the user's now)
        report.changed = True
        if not servers and record.get("mcp_created_key"):
            del data["mcpServers"]
    enabled = data.get("enabledMcpjsonServers")
    if record.get("enabled_mcp") and isinstance(enabled, list) and MCP_SERVER_NAME in enabled:
        enabled.remove(MCP_SERVER_NAME)
        report.changed = True
        if not enabled and record.get("enabled_mcp_created"):
            del data["enabledMcpjsonServers"]
    original = record.get("original")
    if original is not None:
        original_bytes = original.encode("utf-8", "surrogateescape")
        try:
            original_data = jsonwire.loads(original_bytes) if original_bytes.strip() else {}
        except ValueError:
            original_data = None
        if original_data == data:
            if original_bytes != raw:
                _write_json(path, original_bytes)
            return report
    if record.get("created_file") and data == {}:
        os.unlink(path)
        if record.get("created_dir"):
            try:
                os.rmdir(os.path.dirname(path))
            except OSError:
                pass  # the user put something else there: keep it
        return report
    if report.changed:
        _write_json(path, _render(data))
    return report


def _untrust_codex(trust: dict[str, Any], env: Mapping[str, str]) -> list[str]:
    """Take back the Codex trust `init` recorded: its block of tables, and the hashes it put in
    place of the user's (their old values back), in the user's Codex config as it is found now
    (the manifest's path is used only when it is that file). Returns notes on what was left."""
    import tomllib

    from coding_os.adapters.codex.hook_trust import read_config, user_config_path

    config_path = user_config_path(env)
    block, replaced = str(trust.get("block") or ""), trust.get("replaced") or {}
    if not block and not replaced:
        return []
    if trust.get("config") != config_path:
        return [f"left Codex's trust of cos's hooks in {trust.get('config')}: CODEX_HOME now "
                f"names {config_path}"]
    try:
        _, text = read_config(config_path)
    except (InvalidInput, StateIOError) as exc:
        return [f"left Codex's trust of cos's hooks in {config_path}: {exc}"]
    if text is None:
        return []
    new_text = text.replace(block, "", 1) if block and block in text else text
    for old, new in (pair for pair in replaced.values() if isinstance(pair, list)
                     and len(pair) == 2):
        new_text = _replace_once(new_text, new, str(old)) or new_text
    if new_text == text:
        return []
    try:
        tomllib.loads(new_text)
        _write_json(config_path, new_text.encode("utf-8"), new_mode=0o600)
    except (tomllib.TOMLDecodeError, StateIOError) as exc:
        return [f"left Codex's trust of cos's hooks in {config_path}: {str(exc)[:200]}"]
    return [f"removed Codex's trust of cos's hooks from {config_path}"]


def _remove_exclude_line(exclude: str, line: str) -> None:
    try:
        with open(exclude, encoding="utf-8") as f:
            lines = f.read().splitlines(keepends=True)
    except FileNotFoundError:
        return
    kept = [entry for entry in lines if entry.rstrip("\n") != line]
    if kept != lines:
        with open(exclude, "w", encoding="utf-8") as f:
            f.writelines(kept)


def mcp_server_entry(agent: str, cos_path: str) -> dict[str, Any]:
    """How an agent starts cos's MCP server: this installation's `cos mcp`, told its agent.
    Gemini CLI takes a stdio server as the one with a `command` (its `type` names the URL
    transports), and asks before each call of a server's tools unless it is `trust`ed: cos's
    tools read the project's state or write its brain, as Claude Code's and Codex's hooks
    allow them without asking."""
    if agent == "gemini":
        return {"command": cos_path, "args": ["mcp"], "env": {"COS_AGENT": agent}, "trust": True}
    return {"type": "stdio", "command": cos_path, "args": ["mcp"], "env": {"COS_AGENT": agent}}


def _codex_block(cos_path: str) -> str:
    entry = mcp_server_entry("codex", cos_path)
    # A JSON string without ASCII escapes is a TOML basic string (JSON would write a character
    # outside the BMP as a surrogate pair, which TOML refuses).
    return (f"\n[mcp_servers.{MCP_SERVER_NAME}]\n"
            f"command = {json.dumps(entry['command'], ensure_ascii=False)}\n"
            f"args = {json.dumps(entry['args'], ensure_ascii=False)}\n"
            f"env = {{ COS_AGENT = \"codex\" }}\n")


def _plan_mcp(agent: str, checkout: str, cos_path: str, manifest: dict[str, Any]
              ) -> tuple[str | None, bytes | None, dict[str, Any] | None, bool]:
    """What registering `cos mcp` in the agent's project MCP file would write, read and checked
    before anything is written: (file, its new bytes, the new manifest record, whether a `cos`
    entry there is the user's own); no bytes when it is registered already or the user's; no
    file for an agent whose servers are in the settings file the hooks go to (Gemini CLI:
    `_register_mcp_in_settings` adds it there).

    Raises:
        InvalidInput: the file is not valid JSON / TOML.
        StateIOError: it cannot be read.
    """
    if agent not in MCP_FILES or MCP_FILES[agent] in AGENT_HOOK_FILES[agent]:
        return None, None, None, False  # in the settings file itself (_register_mcp_in_settings)
    path = os.path.join(checkout, MCP_FILES[agent])
    record = next((r for r in manifest.get("mcp", [])
                   if r.get("agent") == agent and r.get("file") == path), None)
    if agent == "claude":
        data, raw = _load_settings(path)
        servers = data.setdefault("mcpServers", {})
        if not isinstance(servers, dict):
            raise InvalidInput(f"{path}: \"mcpServers\" must be an object; nothing was changed")
        entry = mcp_server_entry(agent, cos_path)
        current = servers.get(MCP_SERVER_NAME)
        if current is not None and (record is None or current == entry):
            return path, None, None, current != entry  # ours as it is, or the user's own
        servers[MCP_SERVER_NAME] = entry
        original = raw.decode("utf-8", "surrogateescape") if raw is not None else None
        new_record = {"agent": agent, "file": path, "entry": entry,
                      "created_file": raw is None if record is None else record["created_file"],
                      "original": original if record is None else record.get("original")}
        return path, _render(data), new_record, False
    text: str | None
    try:
        found = durable.read_regular(path, MAX_SETTINGS_BYTES)
        text = found.decode("utf-8") if found is not None else None
    except (OSError, UnicodeDecodeError) as exc:
        raise StateIOError(f"cannot read {path}: {exc}") from None
    import tomllib

    try:
        parsed = tomllib.loads(text or "")
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"{path} is not valid TOML ({exc}); nothing was changed") from None
    except RecursionError:  # tomllib reads nested arrays and tables recursively
        raise InvalidInput(f"{path} is not valid TOML (nested too deeply); nothing was "
                           "changed") from None
    block = _codex_block(cos_path)
    servers = parsed.get("mcp_servers") or {}
    if isinstance(servers, dict) and MCP_SERVER_NAME in servers:
        ours = record is not None and record.get("block") in (text or "")
        if not ours or record is None or record.get("block") == block:
            return path, None, None, not ours
        text = (text or "").replace(record["block"], "")  # ours, for another cos: replaced
    new_text = (text or "") + block
    try:
        tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:  # e.g. mcp_servers already an inline table
        raise InvalidInput(f"{path}: cannot add [mcp_servers.{MCP_SERVER_NAME}] to it ({exc}); "
                           "add it by hand, or make mcp_servers a table; nothing was changed") \
            from None
    new_record = {"agent": agent, "file": path, "block": block,
                  "created_file": text is None if record is None else record["created_file"]}
    return path, new_text.encode("utf-8"), new_record, False


def _unregister_mcp(record: dict[str, Any]) -> None:
    """Remove the MCP registration `_register_mcp` recorded, if it is still as written."""
    path = record["file"]
    if "block" in record:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            return
        if record["block"] not in text:
            return
        text = text.replace(record["block"], "", 1)
        if record.get("created_file") and not text.strip():
            os.unlink(path)
        else:
            _write_json(path, text.encode("utf-8"))
        return
    data, raw = _load_settings(path)
    if raw is None:
        return
    servers = data.get("mcpServers")
    if not isinstance(servers, dict) or servers.get(MCP_SERVER_NAME) != record.get("entry"):
        return  # changed by the user since: theirs now
    del servers[MCP_SERVER_NAME]
    if not servers:
        del data["mcpServers"]
    original = record.get("original")
    if original is not None:
        original_bytes = original.encode("utf-8", "surrogateescape")
        try:
            same = (jsonwire.loads(original_bytes) if original_bytes.strip() else {}) == data
        except ValueError:
            same = False
        if same:  # nothing else changed: the file gets its own bytes back
            _write_json(path, original_bytes)
            return
    if record.get("created_file") and not data:
        os.unlink(path)
    else:
        _write_json(path, _render(data))
