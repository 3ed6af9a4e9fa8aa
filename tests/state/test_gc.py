"""`cos gc --panels`: stale panels are reaped (with a summary), live ones never."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from tests.helpers import cos, cos_json, fire


def age(path: Path, hours: float) -> None:
    old = time.time() - hours * 3600
    os.utime(path, (old, old))


def test_gc_reaps_only_panels_past_the_ttl_and_summarises_their_session(repo: Path) -> None:
    for panel in ("old", "live"):
        env = {"COS_PANEL_ID": panel}
        assert fire("SessionStart", {"session_id": panel, "source": "startup"}, cwd=repo, env=env).returncode == 0
        assert fire("UserPromptSubmit", {"session_id": panel, "prompt": "go"}, cwd=repo, env=env).returncode == 0
    panels = repo / ".coding-os" / "claude" / "panels"
    age(panels / "old" / "heartbeat", 30)
    age(panels / "live" / "heartbeat", 23)
    dry = cos_json("gc", "--panels", "--dry-run", cwd=repo)
    assert isinstance(dry, dict)
    assert [r["panel"] for r in dry["reaped"]] == ["old"] and (panels / "old").is_dir()
    report = cos_json("gc", "--panels", cwd=repo)
    assert isinstance(report, dict)
    assert [r["panel"] for r in report["reaped"]] == ["old"] and report["kept"] == 1
    assert not (panels / "old").exists() and (panels / "live").is_dir()
    session = report["reaped"][0]["session"]
    with sqlite3.connect(repo / ".coding-os" / "coding-os.db") as conn:
        row = conn.execute("SELECT reason, prompts FROM session_summaries WHERE session = ?",
                           (session,)).fetchone()
    assert row == ("reaped", 1)


def test_gc_ttl_comes_from_the_environment(repo: Path) -> None:
    assert fire("SessionStart", {"session_id": "p", "source": "startup"}, cwd=repo).returncode == 0
    age(repo / ".coding-os" / "claude" / "panels" / "p" / "heartbeat", 2)
    assert cos_json("gc", "--panels", cwd=repo)["reaped"] == []  # type: ignore[index]
    report = cos_json("gc", "--panels", cwd=repo, env={"COS_PANEL_GC_TTL": "1h"})
    assert [r["panel"] for r in report["reaped"]] == ["p"]  # type: ignore[index]


def test_a_panel_whose_hook_holds_its_lock_is_never_reaped(repo: Path) -> None:
    import fcntl

    assert fire("SessionStart", {"session_id": "p", "source": "startup"}, cwd=repo).returncode == 0
    panel = repo / ".coding-os" / "claude" / "panels" / "p"
    age(panel / "heartbeat", 48)
    fd = os.open(panel, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # what a hook holds while it writes
        report = cos_json("gc", "--panels", cwd=repo)
    finally:
        os.close(fd)
    assert isinstance(report, dict)
    assert report["busy"] == 1 and report["reaped"] == [] and panel.is_dir()


def test_a_reaped_panel_that_fires_again_starts_fresh(repo: Path) -> None:
    assert fire("SessionStart", {"session_id": "p", "source": "startup"}, cwd=repo).returncode == 0
    panel = repo / ".coding-os" / "claude" / "panels" / "p"
    age(panel / "heartbeat", 48)
    assert cos("gc", "--panels", cwd=repo).returncode == 0
    proc = fire("PostToolUse", {"session_id": "p", "tool_name": "Bash", "tool_input": {"command": "ls"}},
                cwd=repo)
    assert proc.returncode == 0 and (panel / "session-id").is_file()


def test_bad_ttl_is_a_clear_error(repo: Path) -> None:
    proc = cos("gc", "--panels", cwd=repo, env={"COS_PANEL_GC_TTL": "forever"})
    assert proc.returncode == 2 and "COS_PANEL_GC_TTL" in proc.stderr
