"""The hook launcher `cos init` writes in the user's hub, run exactly as the installed hook
entries run it: `COS_AGENT=<agent> '<python>' -I -S '<launcher>' hook <Event>`."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from coding_os.launcher import (
    HOOK_FLAGS,
    console_script_command,
    parse_hook_command,
    read_launcher,
)
from coding_os.adapters import HOOK_EVENTS
from tests.helpers import COS, as_an_older_init_wrote_it, cos, cos_json, git

SETTINGS = {"claude": ".claude/settings.json", "codex": ".codex/hooks.json"}
SRC = str(Path(__file__).resolve().parents[1] / "src")
# One payload per event, of the shapes the clients send (DESIGN.md §9).
EVENT_FIELDS: dict[str, dict[str, object]] = {
    "SessionStart": {"source": "startup"},
    "UserPromptSubmit": {"prompt": "make the test pass", "prompt_id": "p1",
                         "permission_mode": "default"},
    "PreToolUse": {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "t1"},
    "PostToolUse": {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "t1",
                    "tool_response": {"stdout": "README.md\n", "stderr": ""}},
    "Stop": {"stop_hook_active": False, "last_assistant_message": "done"},
    "SubagentStart": {"agent_id": "a1", "agent_type": "Explore"},
    "SubagentStop": {"agent_id": "a1", "agent_type": "Explore"},
    "PreCompact": {"trigger": "manual", "custom_instructions": ""},
    "SessionEnd": {"reason": "prompt_input_exit"},
}


def installed(repo: Path, agent: str = "claude") -> dict[str, str]:
    """Event → the command of cos's one hook entry for it in the agent's hooks file."""
    data = json.loads((repo / SETTINGS[agent]).read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for event, groups in data["hooks"].items():
        ours = [h["command"] for g in groups for h in g["hooks"]
                if parse_hook_command(h["command"], agent, event) is not None]
        assert len(ours) == 1, (event, groups)
        found[event] = ours[0]
    return found


def run_installed(command: str, payload: Mapping[str, object], cwd: Path,
                  env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a hook command exactly as written in the settings file, through a shell."""
    return subprocess.run(["sh", "-c", command], cwd=cwd, env={**os.environ, **(env or {})},
                          input=json.dumps(payload), text=True, capture_output=True, timeout=60)


def payload(event: str, cwd: Path, session: str = "native-1") -> dict[str, object]:
    return {"session_id": session, "transcript_path": f"/tmp/{session}.jsonl", "cwd": str(cwd),
            "hook_event_name": event, **EVENT_FIELDS[event]}


def launcher_of(command: str) -> Path:
    words = shlex.split(command)
    return Path(words[4])


def interpreter_of_script(script: str) -> str:
    with open(script, "rb") as f:
        return os.fsdecode(f.readline()[2:].strip().split(b" ")[0])


def test_init_writes_commands_that_run_this_installations_launcher_in_the_hub(
        repo: Path, isolated_env: Path) -> None:
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    commands = installed(repo)
    assert set(commands) == set(HOOK_EVENTS)
    launchers = {launcher_of(c) for c in commands.values()}
    assert len(launchers) == 1
    [launcher] = launchers
    assert launcher.parent == isolated_env.resolve() / ".coding-os" / "launchers"
    for event, command in commands.items():
        words = shlex.split(command)
        assert words == ["COS_AGENT=claude", interpreter_of_script(COS), *HOOK_FLAGS,
                         str(launcher), "hook", event]
    interpreter, package = read_launcher(str(launcher)) or ("", "")
    assert interpreter == interpreter_of_script(COS)
    import coding_os

    assert package == os.path.dirname(coding_os.__file__)


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_every_event_fired_through_the_installed_command_is_handled(repo: Path,
                                                                    agent: str) -> None:
    assert cos("init", "--agent", agent, cwd=repo).returncode == 0
    commands = installed(repo, agent)
    sub = repo / "src"
    sub.mkdir()
    for event in HOOK_EVENTS:
        proc = run_installed(commands[event], payload(event, sub), cwd=sub)
        assert proc.returncode == 0, (event, proc.stderr)
        assert "Traceback" not in proc.stderr
    logged = cos_json("hooks-log", cwd=repo)
    assert isinstance(logged, list)
    assert [line["event"] for line in logged] == list(HOOK_EVENTS)
    assert {line["agent"] for line in logged} == {agent}
    sessions = {line["session"] for line in logged}
    assert len(sessions) == 1 and str(sessions.pop()).startswith(f"ses-{agent}-")
    assert not (sub / ".coding-os").exists()


def test_the_launcher_is_outside_the_project_private_and_nothing_of_the_project_runs(
        repo: Path, isolated_env: Path) -> None:
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    launcher = launcher_of(installed(repo)["PreToolUse"])
    assert not str(launcher).startswith(str(repo) + os.sep)
    assert launcher.stat().st_mode & 0o777 == 0o600
    assert launcher.parent.stat().st_mode & 0o777 == 0o700
    assert (isolated_env / ".coding-os").stat().st_mode & 0o777 == 0o700
    # Neither the project's directory nor a module file in it is on the hook's path.
    (repo / "coding_os").mkdir()
    (repo / "coding_os" / "__init__.py").write_text("raise SystemExit('the clone ran')\n",
                                                    encoding="utf-8")
    proc = run_installed(installed(repo)["SessionStart"], payload("SessionStart", repo),
                         cwd=repo, env={"PYTHONPATH": str(repo)})
    assert proc.returncode == 0, proc.stderr
    assert "the clone ran" not in proc.stderr


def test_a_hub_inside_the_project_is_refused_and_nothing_is_written(repo: Path) -> None:
    home = repo / "home"
    home.mkdir()
    proc = cos("init", "--agent", "claude", cwd=repo, env={"HOME": str(home)})
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "inside" in proc.stderr
    assert not (repo / ".claude").exists() and not (home / ".coding-os").exists()


def test_a_second_init_changes_no_byte_of_the_settings_nor_the_launcher(repo: Path) -> None:
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    settings = repo / ".claude" / "settings.json"
    launcher = launcher_of(installed(repo)["Stop"])
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (settings, launcher)}
    again = cos_json("init", "--agent", "claude", cwd=repo)
    assert isinstance(again, dict) and again["changed"] is False
    assert again["launcher"] == str(launcher)
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in before} == before


def test_init_makes_a_widened_launcher_private_again_and_rewrites_a_changed_one(
        repo: Path) -> None:
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    launcher = launcher_of(installed(repo)["Stop"])
    written = launcher.read_bytes()
    launcher.chmod(0o666)
    launcher.parent.chmod(0o755)
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    assert launcher.stat().st_mode & 0o777 == 0o600
    assert launcher.parent.stat().st_mode & 0o777 == 0o700
    launcher.write_bytes(b"raise SystemExit('edited')\n")
    assert cos_json("init", "--agent", "claude", cwd=repo)["changed"] is True  # type: ignore[index]
    assert launcher.read_bytes() == written
    launcher.unlink()
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    assert launcher.read_bytes() == written


def test_two_installations_of_cos_get_two_launchers_and_each_keeps_its_own(
        repo: Path, tmp_path: Path) -> None:
    """A second installation: another venv's interpreter running this coding-os from its source
    directory (through PYTHONPATH, which the launcher records: the hook runs without it)."""
    venv = tmp_path / "other-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    other_python = str(venv / "bin" / "python")
    site_packages = next(p for p in sys.path if p.endswith("site-packages"))
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    mine = launcher_of(installed(repo)["Stop"])
    mine_bytes = mine.read_bytes()
    proc = subprocess.run(
        [other_python, "-c", "import sys; from coding_os.interfaces.entry import main; "
         "sys.argv = ['cos', 'init', '--agent', 'claude']; sys.exit(main())"],
        cwd=other, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([SRC, site_packages]),
             "PATH": f"{Path(COS).parent}{os.pathsep}{os.environ.get('PATH', '')}"})
    assert proc.returncode == 0, proc.stderr
    theirs = launcher_of(installed(other)["Stop"])
    assert theirs != mine and theirs.parent == mine.parent
    assert shlex.split(installed(other)["Stop"])[1] == other_python
    assert read_launcher(str(theirs)) == (other_python, str(Path(SRC) / "coding_os"))
    assert mine.read_bytes() == mine_bytes
    for project in (repo, other):
        for event in ("SessionStart", "PostToolUse", "SessionEnd"):
            fired = run_installed(installed(project)[event], payload(event, project), project)
            assert fired.returncode == 0, (project, event, fired.stderr)


def test_a_long_hub_path_is_no_problem_for_the_command(repo: Path, tmp_path: Path) -> None:
    # A `#!` line stops at 127 to 255 bytes; the hook command names its interpreter itself.
    home = tmp_path.joinpath(*["a-rather-long-directory-name-for-a-home"] * 8)
    home.mkdir(parents=True)
    assert cos("init", "--agent", "claude", cwd=repo, env={"HOME": str(home)}).returncode == 0
    command = installed(repo)["SessionStart"]
    assert len(str(launcher_of(command))) > 300
    proc = run_installed(command, payload("SessionStart", repo), repo, env={"HOME": str(home)})
    assert proc.returncode == 0, proc.stderr


# The tool and prompt hooks (the hot path) import neither `site` nor `re`; SessionStart's own
# work (the database, JSON) brings `re`, but never `site`.
@pytest.mark.slow
@pytest.mark.parametrize("event,unwanted", [
    ("PostToolUse", ("site", "sitecustomize", "usercustomize", "_distutils_hack", "re")),
    ("PreToolUse", ("site", "sitecustomize", "usercustomize", "_distutils_hack", "re")),
    ("UserPromptSubmit", ("site", "sitecustomize", "usercustomize", "_distutils_hack", "re")),
    ("SessionStart", ("site", "sitecustomize", "usercustomize", "_distutils_hack")),
])
def test_the_launchers_process_imports_neither_site_nor_re(repo: Path, event: str,
                                                            unwanted: tuple[str, ...]) -> None:
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    commands = installed(repo)
    assert run_installed(commands["SessionStart"], payload("SessionStart", repo),
                         repo).returncode == 0
    words = shlex.split(commands[event])
    # The installed command itself, with Python's import trace turned on.
    traced = [words[0], words[1], "-X", "importtime", *words[2:]]
    proc = run_installed(shlex.join(traced), payload(event, repo), repo)
    assert proc.returncode == 0, proc.stderr
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:") and line.count("|") == 2}
    assert "coding_os.interfaces.hook" in imported
    assert imported.isdisjoint(unwanted), sorted(imported.intersection(unwanted))


def test_uninstall_keeps_the_launcher_and_removes_exactly_what_init_added(repo: Path) -> None:
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    launcher = launcher_of(installed(repo)["Stop"])
    proc = cos("uninstall", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert f"kept the hook launcher {launcher}" in proc.stdout
    assert not (repo / ".claude").exists() and not (repo / ".mcp.json").exists()
    assert launcher.is_file()  # other projects of this installation may run it


USER_HOOK = {"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}


def older_init(repo: Path, agent: str = "claude") -> None:
    """What an older `cos init` left: the same groups, running the `cos` console script."""
    assert cos("init", "--agent", agent, cwd=repo).returncode == 0
    as_an_older_init_wrote_it(repo, agent, COS)


def test_an_older_inits_entries_are_upgraded_in_place_and_uninstall_restores_the_file(
        repo: Path) -> None:
    path = repo / ".claude" / "settings.json"
    path.parent.mkdir()
    original = json.dumps({"hooks": {"PreToolUse": [USER_HOOK]}}, indent=4) + "\n"
    path.write_text(original, encoding="utf-8")
    older_init(repo)
    old = json.loads(path.read_text(encoding="utf-8"))
    assert old["hooks"]["Stop"][0]["hooks"][0]["command"] == console_script_command(
        "claude", COS, "Stop")
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    new = json.loads(path.read_text(encoding="utf-8"))
    assert new["hooks"]["PreToolUse"][0] == USER_HOOK
    for event in HOOK_EVENTS:
        assert len(new["hooks"][event]) == len(old["hooks"][event])
        assert parse_hook_command(new["hooks"][event][-1]["hooks"][0]["command"], "claude",
                                  event).shape == "launcher"  # type: ignore[union-attr]
    assert cos("uninstall", cwd=repo).returncode == 0
    assert path.read_text(encoding="utf-8") == original


def test_an_older_entry_no_manifest_names_is_upgraded_not_duplicated(repo: Path) -> None:
    older_init(repo)
    (repo / ".coding-os" / "installed-manifest.json").unlink()
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    commands = installed(repo)  # asserts one cos entry per event
    assert all(parse_hook_command(c, "claude", e).shape == "launcher"  # type: ignore[union-attr]
               for e, c in commands.items())
    assert cos("uninstall", cwd=repo).returncode == 0
    left = json.loads((repo / ".claude" / "settings.json").read_text(encoding="utf-8"))
    assert not any(h["command"] for groups in left.get("hooks", {}).values()
                   for g in groups for h in g["hooks"])


def test_a_users_own_hook_that_runs_cos_differently_is_kept_beside_cos_entry(
        repo: Path) -> None:
    path = repo / ".claude" / "settings.json"
    path.parent.mkdir()
    mine = {"matcher": "Bash", "hooks": [{"type": "command",
                                          "command": console_script_command("claude", COS,
                                                                            "PreToolUse")}]}
    path.write_text(json.dumps({"hooks": {"PreToolUse": [mine]}}), encoding="utf-8")
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    groups = json.loads(path.read_text(encoding="utf-8"))["hooks"]["PreToolUse"]
    assert groups[0] == mine and len(groups) == 2


def test_a_hook_through_the_launcher_imports_the_hook_entry_not_the_console_scripts(
        repo: Path) -> None:
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    words = shlex.split(installed(repo)["PostToolUse"])
    env = {**os.environ, "COS_AGENT": "claude"}
    proc = subprocess.run([words[1], "-X", "importtime", *words[2:]], cwd=repo, env=env,
                          input=json.dumps(payload("PostToolUse", repo)), text=True,
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "coding_os.interfaces.hook" in imported
    assert "coding_os.interfaces.entry" not in imported
    # What is not a hook is the console script's, as `cos doctor` runs it.
    version = subprocess.run([words[1], *words[2:4], words[4], "--version"], cwd="/", env=env,
                             text=True, capture_output=True, timeout=60)
    import coding_os

    assert version.returncode == 0 and version.stdout.split()[-1:] == [coding_os.__version__]
