"""Talking to `cos daemon` (agents/client.py): a hung or slow daemon costs a checkpoint or
`cos daemon status` at most the client's timeout; the checkpoint then scans, and an answer that
came too late once does not keep the tree scanning."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from coding_os.daemon.client import ask_watcher
from coding_os.checkpoints.take import create
from coding_os.state.tiers import Tiers
from tests.helpers import checkpoint_now, cos, same, stored, whole


@pytest.mark.slow
def test_a_stopped_daemon_delays_a_checkpoint_only_by_the_client_timeout(
        project: Path, running: dict[str, object]) -> None:
    """SIGSTOP: the hook's request times out (2 s) and the checkpoint scans."""
    tiers = Tiers(str(project / ".coding-os"))
    create(tiers, str(project), session=None, watcher=ask_watcher)
    pid = int(str(running["pid"]))
    os.kill(pid, signal.SIGSTOP)
    try:
        (project / "while-stopped.txt").write_text("x\n")
        started = time.monotonic()
        record = create(tiers, str(project), session=None, watcher=ask_watcher)
        took = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert record["scan"] == "full" and took < 4.5, took
    same(stored(tiers, record), whole(tiers, str(project)))


@pytest.mark.slow
def test_status_of_a_hung_daemon_exits_0(running: dict[str, object], tmp_path: Path) -> None:
    pid = int(str(running["pid"]))
    os.kill(pid, signal.SIGSTOP)
    try:
        proc = cos("daemon", "status", "--json", cwd=tmp_path)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert proc.returncode == 0, proc.stderr


def test_an_answer_that_came_too_late_once_does_not_keep_the_tree_scanning(
        project: Path, running: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    from coding_os.daemon import client

    for number in range(2000):  # a tree whose watch takes longer than the (shortened) timeout
        (project / f"d{number}" / "e").mkdir(parents=True)
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    real = client.request
    monkeypatch.setattr(client, "request",
                        lambda folder, message, timeout=5.0: real(folder, message, 0.04))
    scans = [checkpoint_now(tiers, root)["scan"] for _ in range(4)]
    assert "watcher" in scans, scans
