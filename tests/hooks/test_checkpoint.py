"""The hooks' automatic checkpoints start the daemon's file watcher on their own once a tree is
large enough for a scan to cost more than asking it (hooks/checkpoint.py), and never for a
small tree, against the project's `checkpoints.start_daemon: false`, or twice in a minute."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coding_os.checkpoints.settings import WATCHER_FROM_FILES
from coding_os.daemon import server
from coding_os.state.hookslog import parse_line
from tests.helpers import cos, cos_json, fire, git, log_lines

NATIVE = "6b1c0c47-5a43-4f0e-9d2a-3f1e3c5f9a10"


def committed_tree(project: Path, files: int) -> None:
    """`files` small files in the project, committed."""
    for number in range(files):
        path = project / f"d{number // 100:03d}" / f"f{number % 100}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"file {number}\n", encoding="utf-8")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "many files")


def bash_call(project: Path, command: str = "make") -> dict[str, str]:
    """A PreToolUse of Bash (which takes a checkpoint) after a file changed; its log line."""
    (project / "d000" / "f0.txt").write_text(f"changed {time.monotonic_ns()}\n",
                                             encoding="utf-8")
    proc = fire("PreToolUse", {"session_id": NATIVE, "tool_name": "Bash",
                               "tool_input": {"command": command}}, cwd=project)
    assert proc.returncode == 0, proc.stderr
    fields = parse_line(log_lines(project)[-1])
    assert fields is not None
    return {key: value for key, value in fields.items() if value is not None}


def wait_until_it_answers(home: Path) -> dict[str, object]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = server.status({"HOME": str(home)})
        if status.get("responding"):
            return status
        time.sleep(0.05)
    raise AssertionError("the daemon started by the hook never answered")


@pytest.mark.slow
def test_a_large_tree_starts_the_watcher_and_later_checkpoints_ask_it(
        project: Path, isolated_env: Path) -> None:
    committed_tree(project, WATCHER_FROM_FILES)
    assert fire("SessionStart", {"session_id": NATIVE, "source": "startup"},
                cwd=project).returncode == 0
    first = bash_call(project)
    assert first["checkpoint_scan"] == "full"
    assert first["daemon_started"] == "1"
    status = wait_until_it_answers(isolated_env)
    assert status["running"] is True
    scans = [bash_call(project)["checkpoint_scan"] for _ in range(3)]
    # The first checkpoint it is asked about starts the watch (and scans); then it tells.
    assert scans[0] == "full" and scans[1:] == ["watcher", "watcher"]
    rows = cos_json("daemon", "status", cwd=project)["trees"]  # type: ignore[index]
    assert [row["root"] for row in rows] == [str(project)]
    # What the watcher-fed checkpoint holds is the tree as it is.
    listed = cos_json("checkpoints", cwd=project)
    newest = listed[0]  # type: ignore[index]
    assert "d000/f0.txt" in newest["changed"]


def test_a_tree_smaller_than_the_threshold_is_scanned_and_no_daemon_starts(
        project: Path, isolated_env: Path) -> None:
    committed_tree(project, WATCHER_FROM_FILES - 50)
    assert fire("SessionStart", {"session_id": NATIVE, "source": "startup"},
                cwd=project).returncode == 0
    for _ in range(2):
        fields = bash_call(project)
        assert fields["checkpoint_scan"] == "full"
        assert "daemon_started" not in fields
    assert not (isolated_env / ".coding-os" / "daemon").exists()


def test_start_daemon_false_in_the_project_keeps_the_hooks_from_starting_it(
        project: Path, isolated_env: Path) -> None:
    committed_tree(project, WATCHER_FROM_FILES)
    (project / ".coding-os.yaml").write_text("checkpoints:\n  start_daemon: false\n",
                                             encoding="utf-8")
    assert fire("SessionStart", {"session_id": NATIVE, "source": "startup"},
                cwd=project).returncode == 0
    fields = bash_call(project)
    assert fields["checkpoint_scan"] == "full" and "daemon_started" not in fields
    assert server.status({"HOME": str(isolated_env)})["running"] is False


@pytest.mark.parametrize("value", ["maybe", "1", "[]"])
def test_a_start_daemon_that_is_not_true_or_false_is_a_logged_checkpoint_error(
        project: Path, value: str) -> None:
    committed_tree(project, 1)
    (project / ".coding-os.yaml").write_text(f"checkpoints:\n  start_daemon: {value}\n",
                                             encoding="utf-8")
    assert fire("SessionStart", {"session_id": NATIVE, "source": "startup"},
                cwd=project).returncode == 0
    fields = bash_call(project)
    assert "checkpoint" not in fields
    assert "checkpoints.start_daemon must be true or false" in fields["checkpoint_error"]


def test_a_start_is_tried_once_a_minute_however_many_hooks_fire(
        project: Path, isolated_env: Path) -> None:
    committed_tree(project, WATCHER_FROM_FILES)
    # A daemon that cannot start (its interpreter refuses a folder it cannot use): the hooks
    # go on scanning, and do not try again at every call.
    folder = isolated_env / ".coding-os" / "daemon"
    folder.mkdir(parents=True)
    (folder / "daemon.lock").mkdir()  # the daemon's lock cannot be opened: it exits at once
    assert fire("SessionStart", {"session_id": NATIVE, "source": "startup"},
                cwd=project).returncode == 0
    tried = [bash_call(project).get("daemon_started") for _ in range(3)]
    assert tried == ["1", None, None]
    marker = folder / "autostart"
    os.utime(marker, (time.time() - 120, time.time() - 120))  # a minute later
    assert bash_call(project).get("daemon_started") == "1"
    assert server.status({"HOME": str(isolated_env)})["running"] is False


@pytest.mark.slow
def test_the_hook_that_starts_the_daemon_leaves_no_child_behind(
        project: Path, isolated_env: Path) -> None:
    committed_tree(project, WATCHER_FROM_FILES)
    assert fire("SessionStart", {"session_id": NATIVE, "source": "startup"},
                cwd=project).returncode == 0
    (project / "d000" / "f0.txt").write_text("changed\n", encoding="utf-8")
    # The hook process lists its children just before it exits (as the fast-exit tests do).
    probe = (
        "import os, sys\n"
        "sys.argv = ['cos', 'hook', 'PreToolUse']\n"
        "real_exit = os._exit\n"
        "def _exit(code):\n"
        "    kids = open(f'/proc/{os.getpid()}/task/{os.getpid()}/children').read().split()\n"
        "    sys.stderr.write('CHILDREN ' + ' '.join(kids) + '\\n')\n"
        "    sys.stderr.flush()\n"
        "    real_exit(code)\n"
        "os._exit = _exit\n"
        "from coding_os.interfaces.entry import main\n"
        "main()\n")
    payload = {"session_id": NATIVE, "hook_event_name": "PreToolUse", "cwd": str(project),
               "tool_name": "Bash", "tool_input": {"command": "make"}}
    proc = subprocess.run([sys.executable, "-c", probe], cwd=project, input=json.dumps(payload),
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COS_AGENT": "claude"})
    assert proc.returncode == 0, proc.stderr
    assert "daemon_started=1" in log_lines(project)[-1]
    children = [ln for ln in proc.stderr.splitlines() if ln.startswith("CHILDREN")][-1]
    assert children.split() == ["CHILDREN"]
    wait_until_it_answers(isolated_env)


@pytest.mark.slow
def test_after_cos_daemon_stop_the_hooks_start_none_until_cos_daemon_start(
        project: Path, isolated_env: Path) -> None:
    committed_tree(project, WATCHER_FROM_FILES)
    assert fire("SessionStart", {"session_id": NATIVE, "source": "startup"},
                cwd=project).returncode == 0
    assert bash_call(project)["daemon_started"] == "1"
    wait_until_it_answers(isolated_env)
    assert cos_json("daemon", "stop", cwd=project)["stopped"] is True  # type: ignore[index]
    os.utime(isolated_env / ".coding-os" / "daemon" / "autostart", (0, 0))  # long ago
    fields = bash_call(project)
    assert fields["checkpoint_scan"] == "full" and "daemon_started" not in fields
    assert cos_json("daemon", "start", cwd=project)["running"] is True  # type: ignore[index]
    assert cos_json("daemon", "stop", cwd=project)["stopped"] is True  # type: ignore[index]
    assert cos_json("daemon", "start", cwd=project)["running"] is True  # type: ignore[index]
    server.stop({"HOME": str(isolated_env)})
    os.unlink(isolated_env / ".coding-os" / "daemon" / "stopped")  # as `cos daemon start` does
    os.utime(isolated_env / ".coding-os" / "daemon" / "autostart", (0, 0))
    assert bash_call(project)["daemon_started"] == "1"
    wait_until_it_answers(isolated_env)  # so that the teardown finds it to stop it


@pytest.mark.slow
def test_the_daemon_a_hook_starts_imports_the_hooks_own_coding_os(
        project: Path, isolated_env: Path, tmp_path: Path) -> None:
    # The hook as `cos init` installs it, with a `coding_os` package on PYTHONPATH and one in
    # the directory it runs in: the daemon it starts runs the hook's own coding-os.
    decoy = tmp_path / "decoy" / "coding_os"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("raise SystemExit('the decoy ran')\n", encoding="utf-8")
    (project / "coding_os").mkdir()
    (project / "coding_os" / "__init__.py").write_text("raise SystemExit('the clone ran')\n",
                                                        encoding="utf-8")
    committed_tree(project, WATCHER_FROM_FILES)
    assert cos("init", "--agent", "claude", cwd=project).returncode == 0
    settings = json.loads((project / ".claude" / "settings.json").read_text(encoding="utf-8"))
    command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    env = {**os.environ, "PYTHONPATH": str(decoy.parent)}
    start = json.dumps({"session_id": NATIVE, "source": "startup", "cwd": str(project),
                        "hook_event_name": "SessionStart"})
    assert fire("SessionStart", json.loads(start), cwd=project).returncode == 0
    (project / "d000" / "f0.txt").write_text("changed\n", encoding="utf-8")
    payload = json.dumps({"session_id": NATIVE, "hook_event_name": "PreToolUse",
                          "cwd": str(project), "tool_name": "Bash",
                          "tool_input": {"command": "make"}})
    proc = subprocess.run(["sh", "-c", command], cwd=project, env=env, input=payload,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "daemon_started=1" in log_lines(project)[-1]
    assert wait_until_it_answers(isolated_env)["running"] is True
    log = (isolated_env / ".coding-os" / "daemon" / "daemon.log").read_text(encoding="utf-8")
    assert "decoy" not in log and "clone ran" not in log


def test_the_prompt_a_checkpoint_keeps_has_its_secrets_redacted(project: Path,
                                                                  isolated_env: Path) -> None:
    from tests.helpers import fire_in_process

    secret = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"  # made up, built at run time
    fire_in_process(project, isolated_env, "SessionStart", NATIVE, source="startup")
    (project / "new.txt").write_text("changed\n", encoding="utf-8")
    fire_in_process(project, isolated_env, "UserPromptSubmit", NATIVE,
                    prompt=f"call the maps API with {secret}")
    records = [json.loads(p.read_text(encoding="utf-8"))
               for p in (project / ".coding-os" / "checkpoints" / "points").glob("*.json")]
    assert [r["prompt"] for r in records if r.get("prompt")] == \
        ["call the maps API with [REDACTED:google_api_key]"]
