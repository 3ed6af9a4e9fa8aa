"""`cos doctor` run as a user runs it, in real git checkouts with `cos init --agent claude` done:
each check finds what it should, names the fix, and changes nothing (corrupt databases, old
migration levels, stale indexes and orphaned panels are reported, never repaired). The check of
Codex's hooks with the real Codex is in tests/e2e/test_doctor_real.py."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from coding_os.doctor import CHECKS, MCP_TOOLS, STATUSES
from coding_os.storage.migrations.sqlite import MIGRATIONS
from tests.helpers import (
    COS,
    as_an_older_init_wrote_it,
    RESTORE_KILLS,
    changed_after_checkpoint,
    conversation,
    copy_claude_fixtures,
    copy_codex_fixtures,
    copy_gemini_fixtures,
    cos,
    cos_doctor as doctor,
    doctor_checks as by_name,
    fire,
    GEMINI_REWOUND,
    git,
    needs_namespaces,
    TOOLS as CODEX_TOOLS,
    VIEWER,
    rewind_in_child,
    tree,
    write_jsonl,
)


NATIVE = "bbbbbbbb-0000-0000-0000-000000000001"


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {check["name"]: check["status"] for check in report["checks"]}


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under `root` (symlinks as their target) with its bytes."""
    found: dict[str, bytes] = {}
    for top, dirs, files in os.walk(root):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            full = os.path.join(top, name)
            found[os.path.relpath(full, root)] = (
                b"->" + os.fsencode(os.readlink(full)) if os.path.islink(full)
                else Path(full).read_bytes())
    return found


def ok(proc_args: tuple[str, ...], cwd: Path, env: dict[str, str] | None = None) -> None:
    proc = cos(*proc_args, cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture
def healthy_project(repo: Path) -> Path:
    """A checkout with the Claude Code hooks installed, one panel that fired SessionStart, a
    built session index and one checkpoint: everything doctor looks at, healthy."""
    ok(("init", "--agent", "claude"), repo)
    proc = fire("SessionStart", {"session_id": NATIVE, "source": "startup"}, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    ok(("sessions",), repo)
    (repo / "notes.txt").write_text("untracked notes\n" * 20, encoding="utf-8")
    ok(("checkpoint", "create"), repo)
    return repo


@pytest.mark.slow
def test_a_healthy_project_passes_every_check_and_exits_0(healthy_project: Path) -> None:
    code, report = doctor(healthy_project)
    assert code == 0, report
    assert statuses(report) == {name: "ok" for name in CHECKS}, report
    assert report["ok"] is True
    assert all(check["fix"] is None for check in report["checks"])


@pytest.mark.slow
def test_the_json_report_has_every_check_in_order_with_status_detail_and_fix(
        healthy_project: Path) -> None:
    _, report = doctor(healthy_project)
    assert set(report) == {"ok", "state_dir", "project_root", "counts", "checks"}
    assert report["state_dir"] == str(healthy_project / ".coding-os")
    assert report["project_root"] == str(healthy_project)
    assert [check["name"] for check in report["checks"]] == list(CHECKS)
    for check in report["checks"]:
        assert set(check) == {"name", "status", "detail", "fix", "data"}
        assert check["status"] in STATUSES and isinstance(check["detail"], str)
    assert sum(report["counts"].values()) == len(CHECKS)


@pytest.mark.slow
def test_the_readable_report_shows_one_line_per_check_and_the_fixes(healthy_project: Path) -> None:
    (healthy_project / ".coding-os" / "coding-os.db").write_bytes(b"this is not a database" * 100)
    proc = cos("doctor", cwd=healthy_project, timeout=120)
    assert proc.returncode == 6
    lines = proc.stdout.splitlines()
    assert any(line.startswith("FAIL  database") for line in lines), proc.stdout
    assert any(line.strip().startswith("fix: ") and "cos index rebuild" in line
               for line in lines)
    assert "1 fail" in lines[-1]


@pytest.mark.slow
def test_doctor_changes_nothing_in_a_healthy_project(healthy_project: Path) -> None:
    state = healthy_project / ".coding-os"
    before = snapshot(state)
    doctor(healthy_project)
    after = snapshot(state)
    # The MCP server may log its start in the hooks log; doctor itself writes nothing.
    before.pop(".hooks.log", None)
    after.pop(".hooks.log", None)
    assert after == before


def install_hooks_running(repo: Path, cos_path: Path) -> None:
    """Install the Claude Code hooks as an older init of another installation wrote them: they
    run the `cos` console script at `cos_path`."""
    as_an_older_init_wrote_it(repo, "claude", str(cos_path))


def hook_launcher(project: Path) -> Path:
    """The launcher the project's installed hooks run."""
    import shlex

    settings = json.loads((project / ".claude" / "settings.json").read_text(encoding="utf-8"))
    return Path(shlex.split(settings["hooks"]["Stop"][0]["hooks"][0]["command"])[4])


@pytest.mark.slow
def test_hooks_an_older_init_wrote_warn_with_the_init_fix(healthy_project: Path) -> None:
    install_hooks_running(healthy_project, Path(COS))
    code, report = doctor(healthy_project)
    hooks = by_name(report)["hooks"]
    assert code == 0 and hooks["status"] == "warn", hooks
    assert "older init" in hooks["detail"] and COS in hooks["detail"]
    assert "cos init --agent claude" in hooks["fix"]

    ok(("init", "--agent", "claude"), healthy_project)  # the fix it names
    assert by_name(doctor(healthy_project)[1])["hooks"]["status"] == "ok"


@pytest.mark.slow
def test_a_missing_hook_launcher_fails_with_the_init_fix(healthy_project: Path) -> None:
    launcher = hook_launcher(healthy_project)
    assert by_name(doctor(healthy_project)[1])["hooks"]["status"] == "ok"
    launcher.unlink()
    code, report = doctor(healthy_project)
    hooks = by_name(report)["hooks"]
    assert code == 6 and hooks["status"] == "fail"
    assert f"the hook launcher {launcher} does not exist" in hooks["detail"]
    assert "cos init --agent claude" in hooks["fix"]
    assert not launcher.exists()  # doctor only reads

    ok(("init", "--agent", "claude"), healthy_project)
    assert by_name(doctor(healthy_project)[1])["hooks"]["status"] == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("content", [
    b"import sys\nsys.exit(0)\n",  # not a launcher cos wrote
    None,  # what cos writes, for another sys.path
])
def test_a_stale_hook_launcher_fails_with_the_init_fix(healthy_project: Path,
                                                       content: bytes | None) -> None:
    launcher = hook_launcher(healthy_project)
    written = launcher.read_bytes()
    launcher.write_bytes(content if content is not None
                         else written.replace(b"sys.path[:] = [\n", b"sys.path[:] = [\n    '/gone',\n"))
    code, report = doctor(healthy_project)
    hooks = by_name(report)["hooks"]
    assert code == 6 and hooks["status"] == "fail", hooks
    assert "stale" in hooks["detail"] and str(launcher) in hooks["detail"]
    assert "cos init --agent claude" in hooks["fix"]

    ok(("init", "--agent", "claude"), healthy_project)
    assert launcher.read_bytes() == written
    assert by_name(doctor(healthy_project)[1])["hooks"]["status"] == "ok"


@pytest.mark.slow
def test_a_hook_launcher_others_may_write_fails_and_init_makes_it_private(
        healthy_project: Path) -> None:
    launcher = hook_launcher(healthy_project)
    launcher.chmod(0o664)
    hooks = by_name(doctor(healthy_project)[1])["hooks"]
    assert hooks["status"] == "fail" and "not a private file" in hooks["detail"], hooks
    ok(("init", "--agent", "claude"), healthy_project)
    assert launcher.stat().st_mode & 0o777 == 0o600
    assert by_name(doctor(healthy_project)[1])["hooks"]["status"] == "ok"


@pytest.mark.slow
def test_hooks_running_a_launcher_of_the_project_fail_and_it_is_never_run(
        healthy_project: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    planted = healthy_project / "tools" / "launcher.py"
    planted.parent.mkdir()
    planted.write_text(f"open({str(marker)!r}, 'w').write('ran')\n", encoding="utf-8")
    settings = healthy_project / ".claude" / "settings.json"
    settings.write_text(settings.read_text(encoding="utf-8").replace(
        str(hook_launcher(healthy_project)), str(planted)), encoding="utf-8")
    code, report = doctor(healthy_project)
    hooks = by_name(report)["hooks"]
    assert code == 6 and hooks["status"] == "fail"
    assert f"hooks run {planted}, which is not a hook launcher in" in hooks["detail"]
    assert not marker.exists()


@pytest.mark.slow
def test_hooks_whose_interpreter_is_gone_fail(healthy_project: Path, tmp_path: Path) -> None:
    from coding_os.install import install
    from coding_os.launcher import Launcher, launcher_path
    from coding_os.state.caller import Caller

    gone = str(tmp_path / "old-venv" / "bin" / "python")
    package = str(tmp_path / "old-venv" / "lib" / "coding_os")
    install("claude", caller=Caller(cwd=str(healthy_project)), launcher=Launcher(
        gone, package, launcher_path(gone, package), (os.path.dirname(package),)))
    code, report = doctor(healthy_project)
    hooks = by_name(report)["hooks"]
    assert code == 6 and hooks["status"] == "fail"
    assert f"the interpreter {gone}, which does not exist" in hooks["detail"]
    assert "cos init --agent claude" in hooks["fix"]


@pytest.mark.slow
def test_hooks_of_another_installation_warn_and_its_launcher_is_only_read(
        healthy_project: Path, tmp_path: Path) -> None:
    from coding_os.install import install
    from coding_os.launcher import Launcher, launcher_path
    from coding_os.state.caller import Caller

    # Another installation: this interpreter, another copy of the package.
    import shutil
    import sysconfig

    import coding_os

    stdlib = sysconfig.get_path("stdlib")

    package = str(tmp_path / "other" / "coding_os")
    shutil.copytree(os.path.dirname(coding_os.__file__), package)
    marker = tmp_path / "ran.txt"
    Path(package, "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                                            "__version__ = '0.1.0'\n", encoding="utf-8")
    install("claude", caller=Caller(cwd=str(healthy_project)), launcher=Launcher(
        sys.executable, package, launcher_path(sys.executable, package),
        (os.path.dirname(package), stdlib, os.path.join(stdlib, "lib-dynload"))))
    hooks = by_name(doctor(healthy_project)[1])["hooks"]
    assert hooks["status"] == "warn", hooks
    assert f"another installation's cos ({package})" in hooks["detail"]
    assert not marker.exists()
    fired = subprocess.run(["sh", "-c", json.loads(
        (healthy_project / ".claude" / "settings.json").read_text(encoding="utf-8"))
        ["hooks"]["Stop"][0]["hooks"][0]["command"]], cwd=healthy_project, capture_output=True,
        input=json.dumps({"session_id": NATIVE, "hook_event_name": "Stop"}), text=True)
    assert fired.returncode == 0, fired.stderr
    assert marker.exists()  # the hook itself runs that installation


@pytest.mark.slow
def test_hooks_running_a_deleted_cos_fail_with_the_init_fix(healthy_project: Path,
                                                            tmp_path: Path) -> None:
    gone = tmp_path / "old-venv" / "bin" / "cos"
    install_hooks_running(healthy_project, gone)
    code, report = doctor(healthy_project)
    hooks = by_name(report)["hooks"]
    assert code == 6 and hooks["status"] == "fail"
    assert str(gone) in hooks["detail"] and "does not exist" in hooks["detail"]
    assert "cos init --agent claude" in hooks["fix"]

    ok(("init", "--agent", "claude"), healthy_project)  # the fix it names
    assert by_name(doctor(healthy_project)[1])["hooks"]["status"] == "ok"


@pytest.mark.slow
def test_hooks_running_a_shim_fail_with_the_init_fix(healthy_project: Path, tmp_path: Path) -> None:
    shim = tmp_path / "shims" / "cos"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{COS}" "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    install_hooks_running(healthy_project, shim)
    code, report = doctor(healthy_project)
    hooks = by_name(report)["hooks"]
    assert code == 6 and hooks["status"] == "fail"
    assert str(shim) in hooks["detail"] and "shim" in hooks["detail"]
    assert "cos init --agent claude" in hooks["fix"]


@pytest.mark.slow
def test_hooks_removed_from_the_settings_file_fail(healthy_project: Path) -> None:
    settings = healthy_project / ".claude" / "settings.json"
    data = json.loads(settings.read_text(encoding="utf-8"))
    del data["hooks"]["PreToolUse"]
    settings.write_text(json.dumps(data), encoding="utf-8")
    hooks = by_name(doctor(healthy_project)[1])["hooks"]
    assert hooks["status"] == "fail" and "PreToolUse" in hooks["detail"]


@pytest.mark.slow
def test_a_corrupt_sqlite_file_fails_and_is_left_byte_for_byte(healthy_project: Path) -> None:
    database = healthy_project / ".coding-os" / "coding-os.db"
    for extra in ("-wal", "-shm"):
        database.with_name(database.name + extra).unlink(missing_ok=True)
    database.write_bytes(b"this is not a database" * 100)
    listing = sorted(os.listdir(database.parent))
    code, report = doctor(healthy_project)
    check = by_name(report)["database"]
    assert code == 6 and check["status"] == "fail"
    assert "cos index rebuild" in check["fix"]
    assert database.read_bytes() == b"this is not a database" * 100
    assert sorted(os.listdir(database.parent)) == listing  # nothing set aside, no -wal/-shm


@pytest.mark.slow
def test_a_database_at_an_older_migration_is_reported_not_migrated(healthy_project: Path) -> None:
    database = healthy_project / ".coding-os" / "coding-os.db"
    database.unlink()
    conn = sqlite3.connect(database)
    conn.executescript(MIGRATIONS[0][1])
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    code, report = doctor(healthy_project)
    check = by_name(report)["database"]
    assert check["status"] == "warn" and code == 0
    assert f"schema version 1 of {len(MIGRATIONS)}" in check["detail"]
    assert "migrate" in check["fix"]
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1  # not migrated
    conn.close()

    ok(("sessions",), healthy_project)  # any command that uses it migrates it
    assert by_name(doctor(healthy_project)[1])["database"]["status"] == "ok"


@pytest.mark.slow
def test_gemini_lines_of_a_format_cos_cannot_read_are_counted_and_reported_never_a_lost_session(
        healthy_project: Path, isolated_env: Path, tmp_path: Path) -> None:
    chats = copy_gemini_fixtures(isolated_env, healthy_project, tmp_path / "legacy") / "tmp" \
        / "project" / "chats"
    ok(("sessions",), healthy_project)
    clean = by_name(doctor(healthy_project)[1])["index"]
    assert clean["status"] == "ok" and "unreadable_lines" not in clean["data"]
    [rewound] = chats.glob(f"session-*-{GEMINI_REWOUND[:8]}.jsonl")
    before = json.loads(cos("sessions", "show", GEMINI_REWOUND, "--json",
                            cwd=healthy_project).stdout)
    # What a newer Gemini CLI might write: a line that is no JSON object, a record of a kind
    # 0.61 does not write; then a prompt as 0.61 writes one.
    with rewound.open("a", encoding="utf-8") as log:
        log.write('{"$compress": {"upTo": "m3"}}\n' + "\x00not json\n")
        log.write(json.dumps({"id": "later", "timestamp": "2026-12-06T09:00:00.000Z",
                              "type": "user", "content": [{"text": "LATER prompt"}]}) + "\n")
    after = json.loads(cos("sessions", "show", GEMINI_REWOUND, "--json",
                           cwd=healthy_project).stdout)
    assert after["messages"] == before["messages"] + 1  # the session and its new prompt
    check = by_name(doctor(healthy_project)[1])["index"]
    assert check["status"] == "warn"
    assert check["data"]["unreadable_lines"] == {"gemini": {str(rewound): 2}}
    assert "2 line(s) of Gemini CLI's sessions could not be read" in check["detail"]
    assert str(rewound) in check["detail"] and "update cos" in check["fix"]
    rewound.write_bytes(b"".join(line + b"\n" for line in rewound.read_bytes().splitlines()
                                 if b"$compress" not in line and b"not json" not in line))
    ok(("sessions",), healthy_project)
    assert by_name(doctor(healthy_project)[1])["index"]["status"] == "ok"


@pytest.mark.slow
def test_claude_and_codex_lines_cos_cannot_read_are_counted_per_agent_never_a_lost_session(
        healthy_project: Path, isolated_env: Path) -> None:
    claude = copy_claude_fixtures(isolated_env / ".claude") / "projects"
    codex = copy_codex_fixtures(isolated_env / ".codex") / "sessions"
    transcript = claude / "-path-to-Demo" / f"{VIEWER}.jsonl"
    [rollout] = codex.rglob(f"rollout-*-{CODEX_TOOLS}.jsonl")
    ok(("sessions",), healthy_project)
    clean = by_name(doctor(healthy_project)[1])["index"]
    unread_before = clean["data"].get("unreadable_lines", {})
    assert str(transcript) not in unread_before.get("claude", {})
    assert "codex" not in unread_before  # the real rollouts: every line read
    shown = {native: json.loads(cos("sessions", "show", native, "--json",
                                    cwd=healthy_project).stdout)
             for native in (VIEWER, CODEX_TOOLS)}
    # What a newer Claude Code or Codex might write: a line that is no JSON object, and a
    # record of a type this cos does not know.
    with transcript.open("a", encoding="utf-8") as log:
        log.write("\x00garbled {\n" + json.dumps(
            {"type": "frame-next", "timestamp": "2026-12-06T09:00:00.000Z"}) + "\n")
    with rollout.open("a", encoding="utf-8") as log:
        log.write(json.dumps({"timestamp": "2026-12-06T09:00:00.000Z", "type": "thread_rollup",
                              "payload": {"turns": 1}}) + "\n" + "not json\n")
    for native, before in shown.items():  # kept, with what it held
        after = json.loads(cos("sessions", "show", native, "--json",
                               cwd=healthy_project).stdout)
        assert after["messages"] == before["messages"] and after["id"] == before["id"]
    code, report = doctor(healthy_project)
    check = by_name(report)["index"]
    assert check["status"] == "warn" and code == 0
    unread = check["data"]["unreadable_lines"]
    assert unread["claude"][str(transcript)] == 2 and unread["codex"] == {str(rollout): 2}
    counts = check["data"]["unreadable_line_counts"]
    assert counts == {agent: sum(files.values()) for agent, files in unread.items()}
    assert counts["codex"] == 2 and counts["claude"] >= 2
    assert f"{counts['claude']} line(s) of Claude Code's sessions could not be read" \
        in check["detail"]
    assert "2 line(s) of Codex's sessions could not be read" in check["detail"]
    plain = cos("doctor", cwd=healthy_project, timeout=120)
    assert "2 line(s) of Codex's sessions could not be read" in plain.stdout


@pytest.mark.slow
def test_a_new_transcript_makes_the_index_stale_until_a_lookup_imports_it(
        healthy_project: Path, isolated_env: Path) -> None:
    entries = conversation(NATIVE, 1)
    for entry in entries:
        entry["cwd"] = str(healthy_project)
    key = "".join(c if c.isalnum() else "-" for c in str(healthy_project))
    write_jsonl(isolated_env / ".claude" / "projects" / key / f"{NATIVE}.jsonl", entries)
    check = by_name(doctor(healthy_project)[1])["index"]
    assert check["status"] == "warn" and "stale" in check["detail"]
    assert "cos import" in check["fix"]
    assert by_name(doctor(healthy_project)[1])["index"]["status"] == "warn"  # doctor did not import

    ok(("sessions",), healthy_project)
    assert by_name(doctor(healthy_project)[1])["index"]["status"] == "ok"


@pytest.mark.slow
def test_an_orphaned_panel_is_reported_with_the_gc_fix_and_kept(healthy_project: Path) -> None:
    panels = healthy_project / ".coding-os" / "claude" / "panels"
    [panel] = os.listdir(panels)
    two_days_ago = time.time() - 2 * 86400
    os.utime(panels / panel / "heartbeat", (two_days_ago, two_days_ago))
    code, report = doctor(healthy_project)
    check = by_name(report)["panels"]
    assert code == 0 and check["status"] == "warn"
    assert f"claude/{panel}" in check["detail"]
    assert check["fix"] == "cos gc --panels"
    assert [o["panel"] for o in check["data"]["orphaned"]] == [panel]
    assert (panels / panel / "heartbeat").exists()


@pytest.mark.slow
def test_a_damaged_checkpoint_object_fails(healthy_project: Path) -> None:
    objects = healthy_project / ".coding-os" / "checkpoints" / "objects"
    victim = next(Path(top) / name for top, _, files in os.walk(objects) for name in files)
    victim.chmod(0o600)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    code, report = doctor(healthy_project)
    check = by_name(report)["checkpoints"]
    assert code == 6 and check["status"] == "fail"
    assert "1 damaged" in check["detail"] and "cos checkpoints verify" in check["fix"]


# A `cos rewind` that dies the moment its journal is written (as a SIGKILL there would).
_DIE_AFTER_JOURNAL = """
import os, sys
from coding_os.checkpoints import restore
restore._apply = lambda root, journal: os._exit(9)
from coding_os.interfaces.entry import main
sys.argv = ["cos", "rewind", sys.argv[1], "--code"]
sys.exit(main())
"""


def test_an_interrupted_rewind_fails_the_check_and_doctor_leaves_its_journal(
        healthy_project: Path) -> None:
    import subprocess
    import sys

    points = json.loads(cos("checkpoints", "--json", cwd=healthy_project).stdout)
    (healthy_project / "notes.txt").write_text("changed since the checkpoint\n", encoding="utf-8")
    died = subprocess.run([sys.executable, "-c", _DIE_AFTER_JOURNAL, points[0]["id"]],
                          cwd=healthy_project, capture_output=True, text=True, timeout=120)
    assert died.returncode == 9, died.stderr
    journal = healthy_project / ".coding-os" / "checkpoints" / "journal.json"
    written = journal.read_bytes()
    code, report = doctor(healthy_project)
    check = by_name(report)["checkpoints"]
    assert code == 6 and check["status"] == "fail" and "interrupted" in check["detail"]
    assert journal.read_bytes() == written  # reported, not completed
    assert (healthy_project / "notes.txt").read_text(encoding="utf-8") == (
        "changed since the checkpoint\n")
    ok(("checkpoints",), healthy_project)  # any other command completes it
    assert not journal.exists()
    assert (healthy_project / "notes.txt").read_text(encoding="utf-8") == "untracked notes\n" * 20


@pytest.mark.slow
def test_the_mcp_server_starts_and_lists_every_cos_tool(healthy_project: Path) -> None:
    check = by_name(doctor(healthy_project)[1])["mcp"]
    assert check["status"] == "ok", check
    assert set(MCP_TOOLS) <= set(check["data"]["tools"])
    assert check["data"]["source"] == str(healthy_project / ".mcp.json")  # as Claude Code starts it


def fake_cos(tmp_path: Path, body: str) -> Path:
    """A `cos` console script (as doctor accepts for a server) whose Python is `body`."""
    script = tmp_path / "bin" / "cos"
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"#!{sys.executable}\n{body}\n", encoding="utf-8")
    script.chmod(0o755)
    return script


@pytest.mark.slow
def test_an_mcp_server_that_never_answers_fails_after_the_timeout(
        healthy_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coding_os import install
    from coding_os.doctor import run_checks

    script = fake_cos(tmp_path, "import time\ntime.sleep(600)")
    # Doctor starts this installation's server only: here, one that never answers.
    monkeypatch.setattr(install, "installed_cos", lambda: str(script))
    (healthy_project / ".mcp.json").write_text(json.dumps(
        {"mcpServers": {"cos": {"command": str(script), "args": ["mcp"]}}}), encoding="utf-8")
    report = run_checks(dict(os.environ), str(healthy_project), mcp_timeout_s=1,
                        acp_timeout_s=1)
    checks = {c.name: c for c in report.checks}
    assert checks["mcp"].status == "fail" and "within 1s" in checks["mcp"].detail
    assert checks["acp"].status == "fail" and "within 1s" in checks["acp"].detail


@pytest.mark.slow
def test_a_broken_registered_mcp_server_command_fails(healthy_project: Path,
                                                      tmp_path: Path) -> None:
    broken = tmp_path / "broken-cos"
    broken.write_text("#!/bin/sh\necho 'cannot start' >&2\nexit 1\n", encoding="utf-8")
    broken.chmod(0o755)
    missing = tmp_path / "missing" / "cos"
    for command, says in ((broken, "doctor does not start it"), (missing, "No such file")):
        (healthy_project / ".mcp.json").write_text(json.dumps(
            {"mcpServers": {"cos": {"command": str(command), "args": ["mcp"]}}}),
            encoding="utf-8")
        code, report = doctor(healthy_project)
        check = by_name(report)["mcp"]
        assert code == 6 and check["status"] == "fail", check
        assert str(command) in check["detail"] and says in check["detail"], check
        assert "cos init --agent claude" in check["fix"]

    ok(("init", "--agent", "claude"), healthy_project)  # the fix it names
    assert by_name(doctor(healthy_project)[1])["mcp"]["status"] == "ok"


@pytest.mark.slow
def test_a_registered_server_that_is_not_cos_is_reported_and_never_run(
        healthy_project: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    (healthy_project / ".mcp.json").write_text(json.dumps({"mcpServers": {"cos": {
        "command": "sh", "args": ["-c", f"echo ran > {marker}; exit 1"]}}}), encoding="utf-8")
    code, report = doctor(healthy_project)
    check = by_name(report)["mcp"]
    assert code == 6 and check["status"] == "fail" and "does not start it" in check["detail"]
    assert not marker.exists()


def test_a_cos_server_that_cannot_start_fails_with_its_stderr(
        healthy_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coding_os import install
    from coding_os.doctor import run_checks

    script = fake_cos(tmp_path, "import sys\nsys.stderr.write('cannot start\\n')\nsys.exit(1)")
    # Doctor starts this installation's server only: here, one that exits at once.
    monkeypatch.setattr(install, "installed_cos", lambda: str(script))
    (healthy_project / ".mcp.json").write_text(json.dumps(
        {"mcpServers": {"cos": {"command": str(script), "args": ["mcp"]}}}), encoding="utf-8")
    report = run_checks(dict(os.environ), str(healthy_project))
    check = {c.name: c for c in report.checks}["mcp"]
    assert check.status == "fail", check
    assert "stderr: cannot start" in check.detail, check


def test_cos_acp_starts_and_answers_initialize_as_an_editor_starts_it(
        healthy_project: Path) -> None:
    check = by_name(doctor(healthy_project)[1])["acp"]
    assert check["status"] == "ok", check
    assert check["data"]["command"][1:] == ["acp"]
    assert check["data"]["agentInfo"]["name"] == "coding-os"
    assert "answers initialize (protocol 1, coding-os" in check["detail"]


def test_without_the_acp_sdk_the_acp_check_warns_with_the_line_that_installs_it(
        healthy_project: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "no_acp"
    blocker.mkdir()
    (blocker / "acp.py").write_text("raise ModuleNotFoundError('no acp', name='acp')\n",
                                    encoding="utf-8")
    code, report = doctor(healthy_project, {**os.environ, "PYTHONPATH": str(blocker)})
    check = by_name(report)["acp"]
    assert code == 0 and check["status"] == "warn", check
    assert check["fix"] == "pip install 'coding-os[acp]'"
    assert "needs the ACP SDK" in check["detail"]


def test_a_cos_acp_that_never_answers_fails_after_the_timeout(
        healthy_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coding_os import install
    from coding_os.doctor import run_checks

    script = fake_cos(tmp_path, "import time\ntime.sleep(600)")
    monkeypatch.setattr(install, "installed_cos", lambda: str(script))
    report = run_checks(dict(os.environ), str(healthy_project), acp_timeout_s=1)
    check = {c.name: c for c in report.checks}["acp"]
    assert check.status == "fail" and "within 1s" in check.detail, check


def test_a_cos_acp_that_writes_other_than_json_rpc_to_stdout_fails(
        healthy_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coding_os import install
    from coding_os.doctor import run_checks

    script = fake_cos(tmp_path, "print('starting up')")
    monkeypatch.setattr(install, "installed_cos", lambda: str(script))
    report = run_checks(dict(os.environ), str(healthy_project), acp_timeout_s=20)
    check = {c.name: c for c in report.checks}["acp"]
    assert check.status == "fail" and "not JSON-RPC" in check.detail, check
    assert "starting up" in check.detail


@pytest.mark.slow
def test_doctor_from_a_subdirectory_gives_the_same_answers(healthy_project: Path) -> None:
    deep = healthy_project / "src" / "pkg"
    deep.mkdir(parents=True)
    _, at_root = doctor(healthy_project)
    _, below = doctor(deep)
    assert below["state_dir"] == at_root["state_dir"]
    assert statuses(below) == statuses(at_root)
    assert str(deep) in by_name(below)["state_dir"]["data"]["probes"]


@pytest.mark.slow
def test_a_linked_worktree_shares_the_state_dir_and_needs_its_own_hooks(
        healthy_project: Path, tmp_path: Path) -> None:
    worktree = tmp_path / "wt"
    git(healthy_project, "worktree", "add", "-q", str(worktree))
    _, report = doctor(worktree)
    assert report["state_dir"] == str(healthy_project / ".coding-os")
    assert by_name(report)["state_dir"]["status"] == "ok"
    hooks = by_name(report)["hooks"]
    assert hooks["status"] == "warn" and str(worktree) in hooks["detail"]
    assert hooks["fix"].startswith("cos init --agent claude")

    ok(("init", "--agent", "claude"), worktree)
    assert by_name(doctor(worktree)[1])["hooks"]["status"] == "ok"


@pytest.mark.slow
def test_a_stray_nested_state_dir_is_a_state_dir_failure(healthy_project: Path) -> None:
    nested = healthy_project / "tools"
    (nested / ".coding-os").mkdir(parents=True)
    (nested / "pyproject.toml").write_text("[project]\nname = 'tools'\n", encoding="utf-8")
    code, report = doctor(healthy_project)
    check = by_name(report)["state_dir"]
    assert code == 6 and check["status"] == "fail"
    assert str(nested / ".coding-os") in check["detail"]
    assert str(nested / ".coding-os") in check["fix"]


@pytest.mark.slow
def test_doctor_creates_nothing_in_a_directory_without_state(repo: Path,
                                                              isolated_env: Path) -> None:
    before, home_before = snapshot(repo), snapshot(isolated_env)
    _, report = doctor(repo)
    assert snapshot(repo) == before and snapshot(isolated_env) == home_before
    assert not (repo / ".coding-os").exists()
    found = statuses(report)
    assert found["state_dir"] == "warn" and found["hooks"] == "warn"
    assert {found[name] for name in ("database", "index", "panels", "checkpoints")} == {"skip"}
    assert by_name(report)["state_dir"]["fix"].startswith("cos init")


@pytest.mark.slow
def test_a_healthy_postgresql_backend_passes_and_an_empty_schema_is_not_created(
        healthy_project: Path, pg_schemas: Callable[[bool], str]) -> None:
    import psycopg

    url = pg_schemas(False)  # a schema that does not exist yet
    env = {"COS_DATABASE_URL": url}
    check = by_name(doctor(healthy_project, env)[1])["database"]
    assert check["status"] == "warn" and check["data"]["version"] == 0
    schema = check["data"]["schema"]
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                            (schema,)).fetchone() is None  # doctor created nothing

    ok(("sessions",), healthy_project, env)
    code, report = doctor(healthy_project, env)
    check = by_name(report)["database"]
    assert check["status"] == "ok" and check["data"]["backend"] == "postgresql", check
    assert check["data"]["version"] == check["data"]["latest"]
    assert code == 0 and statuses(report)["index"] == "ok", report


@pytest.mark.slow
def test_an_unreachable_postgresql_fails_without_the_password(healthy_project: Path) -> None:
    url = "postgresql://cos:s3cret@127.0.0.1:1/nowhere?connect_timeout=2"
    code, report = doctor(healthy_project, {"COS_DATABASE_URL": url})
    check = by_name(report)["database"]
    assert code == 6 and check["status"] == "fail"
    assert "s3cret" not in json.dumps(report)
    assert "COS_DATABASE_URL" in check["fix"]


# -- a restore killed while staging ------------------------------------------------------------


@pytest.mark.slow
def test_doctor_fails_on_a_stale_temporary_journal_until_the_next_cos_call(
        project: Path) -> None:
    checkpoint, _, before = changed_after_checkpoint(project)
    killed = rewind_in_child(project, RESTORE_KILLS["during_staging"][0], checkpoint)
    assert killed.returncode == 9, killed.stderr
    proc = cos("doctor", "--json", cwd=project, timeout=120)
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["checkpoints"]["status"] == "fail"
    assert "cos" in (checks["checkpoints"].get("fix") or "")
    # doctor changes nothing
    assert (project / ".coding-os" / "checkpoints" / "journal.json.tmp").exists()
    cos("checkpoints", "--json", cwd=project)
    proc = cos("doctor", "--json", cwd=project, timeout=120)
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["checkpoints"]["status"] == "ok", checks["checkpoints"]
    assert tree(project) == before


# -- can cos write here, will the agent run its hooks ---------------------------------------------


@pytest.mark.slow
@needs_namespaces
def test_a_read_only_state_dir_fails_the_writable_check_with_its_fix(
        healthy_project: Path) -> None:
    state = healthy_project / ".coding-os"
    assert by_name(doctor(healthy_project)[1])["writable"]["status"] == "ok"
    # A real read-only mount (as root, chmod stops nothing), in a private mount namespace.
    script = 'mount --bind "$RO" "$RO" && mount -o remount,bind,ro "$RO" && exec "$0" "$@"'
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script, COS, "doctor", "--json"],
                          cwd=healthy_project, env={**os.environ, "RO": str(state)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 6, proc.stderr
    report = json.loads(proc.stdout)
    check = by_name(report)["writable"]
    assert check["status"] == "fail", check
    assert f"cannot write state at {state}: read-only file system" in check["detail"]
    assert "remount" in check["fix"]
    assert report["ok"] is False


def project_with_a_finished_job(repo: Path) -> tuple[str, Path]:
    """`cos bg` of a command job in its own worktree, waited for until done: (id, worktree)."""
    ok(("init", "--agent", "claude"), repo)
    proc = cos("bg", "--json", "--exec", "echo made by the job > made.txt", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)["id"]

    def done() -> dict[str, Any] | None:
        rows = json.loads(cos("agents", "--json", "--all", cwd=repo).stdout)
        row = next((r for r in rows if r["id"] == job), None)
        return row if row and row["state"] == "done" else None

    from tests.helpers import until

    row = until(done, f"job {job} to be done")
    return job, Path(row["worktree"])


@pytest.mark.slow
def test_after_bg_stop_rm_no_checkpoint_is_damaged_and_doctor_agrees(repo: Path) -> None:
    job, worktree = project_with_a_finished_job(repo)
    taken = [p for p in json.loads(cos("checkpoints", "--json", cwd=repo).stdout)
             if p["root"] == str(worktree)]
    assert taken, "the job took checkpoints in its worktree"
    ok(("stop", job), repo)
    removed = cos("rm", job, "--force", "--json", cwd=repo)  # it made a file: --force
    assert removed.returncode == 0, removed.stderr
    assert sorted(json.loads(removed.stdout)["checkpoints_dropped"]) == sorted(
        p["id"] for p in taken)
    assert not worktree.exists()
    verified = cos("checkpoints", "verify", "--json", cwd=repo)
    assert verified.returncode == 0, verified.stdout
    assert json.loads(verified.stdout)["orphaned"] == []
    code, report = doctor(repo)
    assert by_name(report)["checkpoints"]["status"] in ("ok", "skip"), report
    assert code == 0 or by_name(report)["checkpoints"]["status"] != "fail"


@pytest.mark.slow
def test_checkpoints_of_a_job_worktree_removed_by_hand_warn_and_gc_drops_them(
        repo: Path) -> None:
    job, worktree = project_with_a_finished_job(repo)
    git(repo, "worktree", "remove", "--force", str(worktree))  # not through cos rm
    git(repo, "branch", "-D", f"cos/{job}")
    verified = cos("checkpoints", "verify", "--json", cwd=repo)
    assert verified.returncode == 0, verified.stdout  # the store is whole: no damage
    orphans = json.loads(verified.stdout)["orphaned"]
    assert orphans and {o["root"] for o in orphans} == {str(worktree)}
    code, report = doctor(repo)
    check = by_name(report)["checkpoints"]
    assert code == 0 and check["status"] == "warn", check
    assert str(worktree) in check["detail"] and check["fix"].startswith("cos gc")

    gc = cos("gc", "--json", cwd=repo)  # the fix it names
    assert gc.returncode == 0, gc.stderr
    assert sorted(json.loads(gc.stdout)["checkpoints"]["orphans_removed"]) == sorted(
        o["checkpoint"] for o in orphans)
    assert json.loads(cos("checkpoints", "verify", "--json", cwd=repo).stdout)["orphaned"] == []
    assert by_name(doctor(repo)[1])["checkpoints"]["status"] in ("ok", "skip")


@pytest.mark.slow
def test_claude_code_settings_that_turn_every_hook_off_fail_the_hooks_check(
        healthy_project: Path, isolated_env: Path) -> None:
    # Claude Code 2.1.328 runs no hook at all with "disableAllHooks": true in the user's or the
    # checkout's settings (checked with the real client); the checkout's local file wins.
    user = isolated_env / ".claude" / "settings.json"
    user.parent.mkdir(exist_ok=True)
    user.write_text(json.dumps({"disableAllHooks": True}), encoding="utf-8")
    code, report = doctor(healthy_project)
    hooks = by_name(report)["hooks"]
    assert code == 6 and hooks["status"] == "fail", hooks
    assert f"{user} sets \"disableAllHooks\": true" in hooks["detail"]
    assert str(user) in hooks["fix"]
    local = healthy_project / ".claude" / "settings.local.json"
    local.write_text(json.dumps({"disableAllHooks": False}), encoding="utf-8")
    assert by_name(doctor(healthy_project)[1])["hooks"]["status"] == "ok"
