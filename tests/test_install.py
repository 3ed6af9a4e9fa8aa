"""`cos init` / `cos uninstall`: merging hook entries into the agents' settings files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from coding_os.install import install, uninstall
from coding_os.launcher import Launcher, hook_command, launcher_path, this_launcher
from coding_os.state.caller import Caller
from coding_os.adapters import HOOK_EVENTS
from tests.helpers import COS, cos, cos_json


USER_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}],
    },
}


def commands(settings: dict[str, object]) -> dict[str, list[str]]:
    hooks = settings.get("hooks", {})
    assert isinstance(hooks, dict)
    return {event: [h["command"] for g in groups for h in g["hooks"]] for event, groups in hooks.items()}


def test_init_claude_adds_every_event_running_this_installations_launcher(repo: Path) -> None:
    proc = cos("init", "--agent", "claude", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    settings = json.loads((repo / ".claude" / "settings.json").read_text(encoding="utf-8"))
    found = commands(settings)
    launcher = this_launcher()  # what the cos process above computed, computed here
    for event in HOOK_EVENTS:
        assert found[event] == [hook_command("claude", launcher, event)]
    assert os.path.isabs(launcher.interpreter) and os.path.isabs(launcher.path)
    assert settings["hooks"]["PreToolUse"][0]["matcher"] == "*"
    manifest = json.loads((repo / ".coding-os" / "installed-manifest.json").read_text(encoding="utf-8"))
    assert manifest["installations"][0]["agent"] == "claude"


def test_init_keeps_user_hooks_and_keys_and_a_second_run_changes_no_byte(repo: Path) -> None:
    path = repo / ".claude" / "settings.json"
    path.parent.mkdir()
    original = json.dumps(USER_SETTINGS, indent=4) + "\n"
    path.write_text(original, encoding="utf-8")
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    first = path.read_bytes()
    settings = json.loads(first)
    assert settings["model"] == "opus" and settings["permissions"] == USER_SETTINGS["permissions"]
    assert commands(settings)["PreToolUse"][0] == "./guard.sh"
    assert commands(settings)["Notification"] == ["notify-send hi"]
    manifest_path = repo / ".coding-os" / "installed-manifest.json"
    manifest_before = manifest_path.read_bytes()
    mtime = path.stat().st_mtime_ns
    second = cos("init", "--agent", "claude", cwd=repo)
    assert second.returncode == 0 and "already installed" in second.stdout
    assert path.read_bytes() == first and path.stat().st_mtime_ns == mtime
    assert manifest_path.read_bytes() == manifest_before


def test_uninstall_restores_the_original_bytes(repo: Path) -> None:
    path = repo / ".claude" / "settings.json"
    path.parent.mkdir()
    original = json.dumps(USER_SETTINGS, indent=4) + "\n"
    path.write_text(original, encoding="utf-8")
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    assert cos("uninstall", cwd=repo).returncode == 0
    assert path.read_text(encoding="utf-8") == original
    assert not (repo / ".coding-os" / "installed-manifest.json").exists()


def test_uninstall_removes_only_its_own_entries_when_the_user_edited_meanwhile(repo: Path) -> None:
    path = repo / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps(USER_SETTINGS), encoding="utf-8")
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    settings = json.loads(path.read_text(encoding="utf-8"))
    settings["theme"] = "dark"
    settings["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "./after.sh"}]})
    path.write_text(json.dumps(settings), encoding="utf-8")
    assert cos("uninstall", "--agent", "claude", cwd=repo).returncode == 0
    after = json.loads(path.read_text(encoding="utf-8"))
    assert after["theme"] == "dark"
    assert commands(after) == {"PreToolUse": ["./guard.sh"], "Notification": ["notify-send hi"],
                               "Stop": ["./after.sh"]}


def test_init_into_a_fresh_checkout_and_uninstall_leave_no_settings_behind(repo: Path) -> None:
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    assert "/.coding-os/" in (repo / ".git" / "info" / "exclude").read_text(encoding="utf-8")
    assert cos("uninstall", cwd=repo).returncode == 0
    assert not (repo / ".claude").exists()
    assert "/.coding-os/" not in (repo / ".git" / "info" / "exclude").read_text(encoding="utf-8")


def test_local_flag_writes_settings_local_json(repo: Path) -> None:
    assert cos("init", "--agent", "claude", "--local", cwd=repo).returncode == 0
    assert (repo / ".claude" / "settings.local.json").is_file()
    assert not (repo / ".claude" / "settings.json").exists()


def test_init_codex_writes_codex_hooks_and_explains_trust(repo: Path) -> None:
    proc = cos("init", "--agent", "codex", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert "trust" in proc.stdout
    hooks = json.loads((repo / ".codex" / "hooks.json").read_text(encoding="utf-8"))
    assert commands(hooks)["PostToolUse"] == [hook_command("codex", this_launcher(),
                                                           "PostToolUse")]


def test_codex_has_no_local_settings(repo: Path) -> None:
    proc = cos("init", "--agent", "codex", "--local", cwd=repo)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1


def test_init_from_a_subdirectory_installs_at_the_checkout_root(repo: Path) -> None:
    sub = repo / "src"
    sub.mkdir()
    assert cos("init", "--agent", "claude", cwd=sub).returncode == 0
    assert (repo / ".claude" / "settings.json").is_file()
    assert (repo / ".coding-os").is_dir() and not (sub / ".coding-os").exists()
    assert cos_json("where", cwd=sub)["rule"] == "marker_walk"  # type: ignore[index]


def other_installation(venv: str) -> Launcher:
    """The launcher of a cos installed in another venv."""
    interpreter = f"{venv}/bin/python"
    package = f"{venv}/lib/python3.11/site-packages/coding_os"
    return Launcher(interpreter, package, launcher_path(interpreter, package),
                    (os.path.dirname(package),))


def test_reinstall_from_another_cos_replaces_its_entry_instead_of_adding_one(repo: Path) -> None:
    old, new = other_installation("/old/venv"), other_installation("/new/venv")
    install("claude", caller=Caller(cwd=str(repo)), cos_path="/old/venv/bin/cos", launcher=old)
    install("claude", caller=Caller(cwd=str(repo)), cos_path="/new/venv/bin/cos", launcher=new)
    found = commands(json.loads((repo / ".claude" / "settings.json").read_text(encoding="utf-8")))
    assert found["Stop"] == [hook_command("claude", new, "Stop")]
    assert os.path.isfile(old.path) and os.path.isfile(new.path) and old.path != new.path
    uninstall(caller=Caller(cwd=str(repo)))
    assert not (repo / ".claude" / "settings.json").exists()


def test_invalid_settings_json_is_refused_and_left_untouched(repo: Path) -> None:
    path = repo / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text("{not json", encoding="utf-8")
    proc = cos("init", "--agent", "claude", cwd=repo)
    assert proc.returncode == 2
    assert "not valid JSON" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert path.read_text(encoding="utf-8") == "{not json"


def test_uninstall_without_an_installation_is_not_found(repo: Path) -> None:
    proc = cos("uninstall", cwd=repo)
    assert proc.returncode == 1 and "not installed" in proc.stderr


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_init_json_reports_file_and_events(repo: Path, agent: str) -> None:
    report = cos_json("init", "--agent", agent, cwd=repo)
    assert isinstance(report, dict)
    assert report["agent"] == agent and report["changed"] is True
    assert report["events"] == list(HOOK_EVENTS)


def test_init_with_an_explicit_state_dir_still_writes_settings_in_the_checkout(
        repo: Path, tmp_path: Path) -> None:
    state = tmp_path / "elsewhere" / "state"
    assert cos("init", "--agent", "claude", cwd=repo, env={"COS_STATE_DIR": str(state)}).returncode == 0
    assert (repo / ".claude" / "settings.json").is_file()
    assert not (state.parent / ".claude").exists()


def test_a_private_settings_file_stays_private(repo: Path) -> None:
    path = repo / ".claude" / "settings.local.json"
    path.parent.mkdir()
    path.write_text('{"env": {"API_TOKEN": "secret"}}', encoding="utf-8")
    path.chmod(0o600)
    assert cos("init", "--agent", "claude", "--local", cwd=repo).returncode == 0
    assert path.stat().st_mode & 0o777 == 0o600
    assert cos("uninstall", cwd=repo).returncode == 0
    assert path.stat().st_mode & 0o777 == 0o600


# The MCP server registration: `.mcp.json` and the project settings' approval for
# Claude Code, `[mcp_servers.cos]` in `.codex/config.toml` for Codex.

USER_MCP = '{\n  "mcpServers": {\n    "other": {"command": "other-server", "args": []}\n  }\n}\n'
USER_TOML = '# my codex settings\nmodel = "o4"\n\n[mcp_servers.other]\ncommand = "other"\n'


def snapshot(repo: Path) -> dict[str, bytes]:
    """Every file of the checkout outside .git, by relative path."""
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted(repo.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(repo).parts}


def test_init_claude_registers_the_mcp_server_and_approves_it_in_the_project_settings(
        repo: Path) -> None:
    proc = cos("init", "--agent", "claude", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert ".mcp.json" in proc.stdout
    servers = json.loads((repo / ".mcp.json").read_text(encoding="utf-8"))["mcpServers"]
    assert servers == {"cos": {"type": "stdio", "command": COS, "args": ["mcp"],
                               "env": {"COS_AGENT": "claude"}}}
    settings = json.loads((repo / ".claude" / "settings.json").read_text(encoding="utf-8"))
    assert settings["enabledMcpjsonServers"] == ["cos"]


def test_init_codex_registers_the_mcp_server_in_its_project_config(repo: Path) -> None:
    import tomllib

    assert cos("init", "--agent", "codex", cwd=repo).returncode == 0
    config = tomllib.loads((repo / ".codex" / "config.toml").read_text(encoding="utf-8"))
    assert config["mcp_servers"]["cos"] == {"command": COS, "args": ["mcp"],
                                            "env": {"COS_AGENT": "codex"}}


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_second_init_changes_no_byte_of_the_mcp_registration(repo: Path, agent: str) -> None:
    (repo / ".codex").mkdir()
    (repo / ".codex" / "config.toml").write_text(USER_TOML, encoding="utf-8")
    (repo / ".mcp.json").write_text(USER_MCP, encoding="utf-8")
    assert cos("init", "--agent", agent, cwd=repo).returncode == 0
    first = snapshot(repo)
    again = cos_json("init", "--agent", agent, cwd=repo)
    assert isinstance(again, dict) and again["changed"] is False
    assert snapshot(repo) == first


def test_init_for_both_agents_registers_each_once(repo: Path) -> None:
    import tomllib

    for agent in ("claude", "codex", "claude", "codex"):
        assert cos("init", "--agent", agent, cwd=repo).returncode == 0
    text = (repo / ".codex" / "config.toml").read_text(encoding="utf-8")
    assert text.count("[mcp_servers.cos]") == 1 and "cos" in tomllib.loads(text)["mcp_servers"]
    settings = json.loads((repo / ".claude" / "settings.json").read_text(encoding="utf-8"))
    assert settings["enabledMcpjsonServers"] == ["cos"]


def test_a_users_own_cos_server_entry_is_left_untouched_by_init_and_uninstall(
        repo: Path) -> None:
    mine = '{"mcpServers": {"cos": {"command": "/my/own/cos", "args": ["mcp", "--http"]}}}\n'
    (repo / ".mcp.json").write_text(mine, encoding="utf-8")
    toml = '[mcp_servers.cos]\ncommand = "/my/own/cos"\nargs = ["mcp"]\n'
    (repo / ".codex").mkdir()
    (repo / ".codex" / "config.toml").write_text(toml, encoding="utf-8")
    for agent in ("claude", "codex"):
        assert cos("init", "--agent", agent, cwd=repo).returncode == 0
    assert (repo / ".mcp.json").read_text(encoding="utf-8") == mine
    assert (repo / ".codex" / "config.toml").read_text(encoding="utf-8") == toml
    assert cos("uninstall", cwd=repo).returncode == 0
    assert (repo / ".mcp.json").read_text(encoding="utf-8") == mine
    assert (repo / ".codex" / "config.toml").read_text(encoding="utf-8") == toml


def test_uninstall_restores_the_original_bytes_of_every_file_it_touched(repo: Path) -> None:
    (repo / ".mcp.json").write_text(USER_MCP, encoding="utf-8")
    (repo / ".codex").mkdir()
    (repo / ".codex" / "config.toml").write_text(USER_TOML, encoding="utf-8")
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(json.dumps(USER_SETTINGS, indent=4) + "\n",
                                                    encoding="utf-8")
    before = snapshot(repo)
    for agent in ("claude", "codex"):
        assert cos("init", "--agent", agent, cwd=repo).returncode == 0
    assert (repo / ".mcp.json").read_bytes() != before[".mcp.json"]
    assert (repo / ".codex" / "config.toml").read_bytes() != before[".codex/config.toml"]
    assert cos("uninstall", cwd=repo).returncode == 0
    after = {k: v for k, v in snapshot(repo).items() if not k.startswith(".coding-os")}
    assert after == before


def test_uninstall_in_a_fresh_checkout_removes_the_files_init_created(repo: Path) -> None:
    before = snapshot(repo)
    for agent in ("claude", "codex"):
        assert cos("init", "--agent", agent, cwd=repo).returncode == 0
    assert (repo / ".mcp.json").is_file() and (repo / ".codex" / "config.toml").is_file()
    assert cos("uninstall", cwd=repo).returncode == 0
    assert not (repo / ".mcp.json").exists() and not (repo / ".codex").exists()
    assert not (repo / ".claude").exists()
    assert {k: v for k, v in snapshot(repo).items() if not k.startswith(".coding-os")} == before


def test_uninstall_keeps_a_registration_the_user_changed_since(repo: Path) -> None:
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    path = repo / ".mcp.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["mcpServers"]["cos"]["args"] = ["mcp", "--http"]
    path.write_text(json.dumps(data), encoding="utf-8")
    assert cos("uninstall", cwd=repo).returncode == 0
    assert json.loads(path.read_text(encoding="utf-8"))["mcpServers"]["cos"]["args"] == [
        "mcp", "--http"]


@pytest.mark.parametrize("agent,name,content", [
    ("claude", ".mcp.json", "{not json"),
    ("claude", ".mcp.json", '{"mcpServers": []}'),
    ("codex", ".codex/config.toml", "[mcp_servers\nbroken = "),
])
def test_an_invalid_mcp_file_is_a_clear_error_and_nothing_is_changed(
        repo: Path, agent: str, name: str, content: str) -> None:
    path = repo / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(content, encoding="utf-8")
    proc = cos("init", "--agent", agent, cwd=repo)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and name.split("/")[-1] in proc.stderr
    assert path.read_text(encoding="utf-8") == content


@pytest.mark.parametrize("agent,name,content", [
    ("claude", ".mcp.json", "{not json"),
    ("codex", ".codex/config.toml", "[mcp_servers\nbroken = "),
])
def test_an_invalid_mcp_file_leaves_the_agents_settings_unwritten(
        repo: Path, agent: str, name: str, content: str) -> None:
    path = repo / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(content, encoding="utf-8")
    before = snapshot(repo)
    assert cos("init", "--agent", agent, cwd=repo).returncode == 2
    assert {k: v for k, v in snapshot(repo).items() if not k.startswith(".coding-os")} == before


def test_a_users_own_cos_server_is_neither_approved_nor_reported_as_registered(
        repo: Path) -> None:
    """Approving by name a server that a clone brought along would let Claude Code start it
    without asking."""
    foreign = {"mcpServers": {"cos": {"command": "sh", "args": ["-c", "echo pwned"]}}}
    (repo / ".mcp.json").write_text(json.dumps(foreign), encoding="utf-8")
    report = cos_json("init", "--agent", "claude", cwd=repo)
    assert isinstance(report, dict) and report["mcp_file"] is None
    assert any("did not write" in note for note in report["notes"])
    settings = json.loads((repo / ".claude" / "settings.json").read_text(encoding="utf-8"))
    assert "cos" not in settings.get("enabledMcpjsonServers", [])
    plain = cos("init", "--agent", "claude", cwd=repo)
    assert "MCP server:" not in plain.stdout and "did not write" in plain.stdout


def test_a_codex_config_that_cannot_take_the_table_is_refused_and_left_as_it_was(
        repo: Path) -> None:
    (repo / ".codex").mkdir()
    inline = 'mcp_servers = { other = { command = "x" } }\n'
    (repo / ".codex" / "config.toml").write_text(inline, encoding="utf-8")
    before = snapshot(repo)
    proc = cos("init", "--agent", "codex", cwd=repo)
    assert proc.returncode == 2 and "nothing was changed" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert snapshot(repo) == before


def test_the_codex_table_is_valid_toml_for_any_cos_path() -> None:
    import tomllib

    from coding_os.install import _codex_block

    for path in ("/opt/🚀 tools/cos", '/odd "quoted" \\ path/cos', "/tab\there/cos"):
        parsed = tomllib.loads(_codex_block(path))
        assert parsed["mcp_servers"]["cos"]["command"] == path


# -- Codex's trust of the hooks init wrote (adapters/codex/hook_trust.py) ------------------------


USER_CODEX_CONFIG = '''model = "o3"  # the user's own settings, comments included

[projects."/somewhere/else"]
trust_level = "trusted"
'''


def codex_config(home: Path) -> Path:
    return home / ".codex" / "config.toml"


def codex_hooks_of(repo: Path) -> list[object]:
    from coding_os.adapters.codex.hook_trust import hooks_of

    path = repo / ".codex" / "hooks.json"
    return hooks_of(str(path), json.loads(path.read_text(encoding="utf-8")))  # type: ignore[arg-type]


def statuses(repo: Path, home: Path) -> set[str]:
    import tomllib

    from coding_os.adapters.codex.hook_trust import hook_status

    parsed = tomllib.loads(codex_config(home).read_text(encoding="utf-8"))
    return {hook_status(parsed, hook) for hook in codex_hooks_of(repo)}  # type: ignore[arg-type]


def test_init_codex_records_codex_trust_of_its_hooks_and_says_the_project_step(
        repo: Path, isolated_env: Path) -> None:
    codex_config(isolated_env).parent.mkdir()
    codex_config(isolated_env).write_text(USER_CODEX_CONFIG, encoding="utf-8")
    report = cos_json("init", "--agent", "codex", cwd=repo)
    assert isinstance(report, dict)
    text = codex_config(isolated_env).read_text(encoding="utf-8")
    assert text.startswith(USER_CODEX_CONFIG)  # the user's config, byte for byte, comes first
    assert statuses(repo, isolated_env) == {"trusted"}
    assert len(codex_hooks_of(repo)) == len(HOOK_EVENTS)
    # Trusting the project is the user's call: one step, the exact lines, and nothing written.
    assert report["user_steps"] == [{
        "why": report["user_steps"][0]["why"], "file": str(codex_config(isolated_env)),
        "append": f'[projects."{repo}"]\ntrust_level = "trusted"\n',
        "or": f"start `codex` in {repo} once and accept its trust prompt"}]
    assert f'[projects."{repo}"]' not in text
    printed = cos("init", "--agent", "codex", cwd=repo).stdout
    assert f'  [projects."{repo}"]' in printed and '  trust_level = "trusted"' in printed
    assert codex_config(isolated_env).read_text(encoding="utf-8") == text  # no byte changed

    with open(codex_config(isolated_env), "a", encoding="utf-8") as f:
        f.write(report["user_steps"][0]["append"])
    assert cos_json("init", "--agent", "codex", cwd=repo)["user_steps"] == []  # type: ignore[index]


def test_uninstall_takes_codex_trust_back_leaving_the_users_config_as_it_was(
        repo: Path, isolated_env: Path) -> None:
    codex_config(isolated_env).parent.mkdir()
    codex_config(isolated_env).write_text(USER_CODEX_CONFIG, encoding="utf-8")
    assert cos("init", "--agent", "codex", cwd=repo).returncode == 0
    assert statuses(repo, isolated_env) == {"trusted"}
    assert cos("uninstall", cwd=repo).returncode == 0
    assert codex_config(isolated_env).read_text(encoding="utf-8") == USER_CODEX_CONFIG


def test_init_codex_without_a_codex_config_makes_a_private_one(
        repo: Path, isolated_env: Path) -> None:
    assert cos("init", "--agent", "codex", cwd=repo).returncode == 0
    assert statuses(repo, isolated_env) == {"trusted"}
    assert codex_config(isolated_env).stat().st_mode & 0o777 == 0o600
    assert codex_config(isolated_env).parent.stat().st_mode & 0o777 == 0o700


def test_codex_trust_goes_where_codex_home_says(repo: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "codex-home"
    assert cos("init", "--agent", "codex", cwd=repo,
               env={"CODEX_HOME": str(elsewhere)}).returncode == 0
    import tomllib

    from coding_os.adapters.codex.hook_trust import hook_status

    parsed = tomllib.loads((elsewhere / "config.toml").read_text(encoding="utf-8"))
    assert {hook_status(parsed, h) for h in codex_hooks_of(repo)} == {"trusted"}  # type: ignore[arg-type]


def test_a_hash_the_user_trusted_before_is_replaced_and_put_back_by_uninstall(
        repo: Path, isolated_env: Path) -> None:
    assert cos("init", "--agent", "codex", cwd=repo).returncode == 0
    stop = next(h for h in codex_hooks_of(repo) if h.event == "Stop")  # type: ignore[attr-defined]
    # As the user would have it from Codex's own review of an older hook at that place.
    old = "sha256:" + "0" * 64
    mine = f'model = "o3"\n\n[hooks.state."{stop.key}"]\ntrusted_hash = "{old}"\n'
    codex_config(isolated_env).write_text(mine, encoding="utf-8")
    assert cos("init", "--agent", "codex", cwd=repo).returncode == 0
    assert statuses(repo, isolated_env) == {"trusted"}
    assert cos("uninstall", cwd=repo).returncode == 0
    assert codex_config(isolated_env).read_text(encoding="utf-8") == mine


def test_a_hook_the_user_turned_off_stays_off_and_is_a_step(repo: Path, isolated_env: Path) -> None:
    assert cos("init", "--agent", "codex", cwd=repo).returncode == 0
    stop = next(h for h in codex_hooks_of(repo) if h.event == "Stop")  # type: ignore[attr-defined]
    mine = f'[hooks.state."{stop.key}"]\nenabled = false\n'
    codex_config(isolated_env).write_text(mine, encoding="utf-8")
    report = cos_json("init", "--agent", "codex", cwd=repo)
    assert isinstance(report, dict)
    assert f'[hooks.state."{stop.key}"]' in report["user_steps"][0]["append"]
    assert codex_config(isolated_env).read_text(encoding="utf-8").startswith(mine)
    assert statuses(repo, isolated_env) == {"trusted", "disabled"}


def test_an_invalid_codex_config_is_left_as_it_is_and_the_trust_is_a_step(
        repo: Path, isolated_env: Path) -> None:
    codex_config(isolated_env).parent.mkdir()
    codex_config(isolated_env).write_text("model = [unclosed\n", encoding="utf-8")
    report = cos_json("init", "--agent", "codex", cwd=repo)
    assert isinstance(report, dict)
    assert codex_config(isolated_env).read_text(encoding="utf-8") == "model = [unclosed\n"
    assert "[hooks.state." in report["user_steps"][0]["append"]
    assert any("could not be recorded" in note for note in report["notes"])


def test_codex_session_end_hook_asks_for_no_more_time_than_codex_gives(repo: Path) -> None:
    assert cos("init", "--agent", "codex", cwd=repo).returncode == 0
    hooks = json.loads((repo / ".codex" / "hooks.json").read_text(encoding="utf-8"))
    assert hooks["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] == 3
    assert hooks["hooks"]["Stop"][0]["hooks"][0]["timeout"] == 30


def test_init_gemini_registers_the_mcp_server_in_its_settings_and_uninstall_takes_it_back(
        repo: Path) -> None:
    settings = repo / ".gemini" / "settings.json"
    settings.parent.mkdir()
    mine = {"mcpServers": {"docs": {"command": "docs-server"}}, "ui": {"theme": "mine"}}
    settings.write_text(json.dumps(mine, indent=4) + "\n", encoding="utf-8")
    before = settings.read_bytes()
    report = cos_json("init", "--agent", "gemini", cwd=repo)
    assert isinstance(report, dict) and report["mcp_file"] == str(settings)
    written = json.loads(settings.read_text(encoding="utf-8"))
    assert written["mcpServers"] == {
        "docs": {"command": "docs-server"},
        "cos": {"command": COS, "args": ["mcp"], "env": {"COS_AGENT": "gemini"}, "trust": True}}
    first = settings.read_bytes()
    again = cos_json("init", "--agent", "gemini", cwd=repo)
    assert isinstance(again, dict) and again["changed"] is False
    assert settings.read_bytes() == first
    assert cos("uninstall", "--agent", "gemini", cwd=repo).returncode == 0
    assert settings.read_bytes() == before


def test_a_users_own_cos_server_in_the_gemini_settings_is_kept_and_not_reported(
        repo: Path) -> None:
    settings = repo / ".gemini" / "settings.json"
    settings.parent.mkdir()
    foreign = {"command": "sh", "args": ["-c", "echo pwned"]}
    settings.write_text(json.dumps({"mcpServers": {"cos": foreign}}), encoding="utf-8")
    report = cos_json("init", "--agent", "gemini", cwd=repo)
    assert isinstance(report, dict) and report["mcp_file"] is None
    assert any("did not write" in note for note in report["notes"])
    assert json.loads(settings.read_text(encoding="utf-8"))["mcpServers"] == {"cos": foreign}
    assert cos("uninstall", "--agent", "gemini", cwd=repo).returncode == 0
    assert json.loads(settings.read_text(encoding="utf-8")) == {"mcpServers": {"cos": foreign}}


def test_gemini_settings_whose_mcp_servers_is_not_an_object_are_refused_untouched(
        repo: Path) -> None:
    settings = repo / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"mcpServers": []}', encoding="utf-8")
    proc = cos("init", "--agent", "gemini", cwd=repo)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "mcpServers" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert settings.read_text(encoding="utf-8") == '{"mcpServers": []}'
