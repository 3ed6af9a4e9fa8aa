"""`cos init` / `cos uninstall`: merging hook entries into the agents' settings files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from coding_os.install import hook_command, install, uninstall
from coding_os.state.caller import Caller
from coding_os.state.lifecycle import KNOWN_EVENTS
from tests.conftest import COS, cos, cos_json

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


def test_init_claude_adds_every_event_with_the_absolute_cos_and_agent(repo: Path) -> None:
    proc = cos("init", "--agent", "claude", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    settings = json.loads((repo / ".claude" / "settings.json").read_text(encoding="utf-8"))
    found = commands(settings)
    for event in KNOWN_EVENTS:
        assert found[event] == [f"COS_AGENT=claude {COS} hook {event}"]
    assert os.path.isabs(COS)
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
    assert commands(hooks)["PostToolUse"] == [f"COS_AGENT=codex {COS} hook PostToolUse"]


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


def test_reinstall_from_another_cos_replaces_its_entry_instead_of_adding_one(repo: Path) -> None:
    install("claude", caller=Caller(cwd=str(repo)), cos_path="/old/venv/bin/cos")
    install("claude", caller=Caller(cwd=str(repo)), cos_path="/new/venv/bin/cos")
    found = commands(json.loads((repo / ".claude" / "settings.json").read_text(encoding="utf-8")))
    assert found["Stop"] == [hook_command("claude", "/new/venv/bin/cos", "Stop")]
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
    assert report["events"] == list(KNOWN_EVENTS)


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
