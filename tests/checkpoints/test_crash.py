"""A code restore killed (SIGKILL) at random points, 200 times: the next `cos` call leaves the
tree exactly at the checkpoint or exactly as it was before the rewind — never between."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import commit_all, cos, create, git, nothing_staged, tree


pytestmark = pytest.mark.slow


FILES = 300
KILLS = 200
LANES = 2  # independent trees killed in parallel, to stay within the time budget
# The restore, run as its own process to be killed. Each rename of the apply phase (the only
# os.rename calls a restore makes) is slowed by a millisecond, so that the committed window —
# the journal written, the tree half restored — is long enough for random kills to land in.
RESTORE = ("import os, sys, time\nfrom coding_os import api\n"
           "_rename = os.rename\n"
           "def slow_rename(*args, **kwargs):\n"
           "    time.sleep(0.001)\n"
           "    return _rename(*args, **kwargs)\n"
           "os.rename = slow_rename\n"
           "api.rewind(sys.argv[1], 'code', cwd=sys.argv[2])\n")


def _make_before(root: Path) -> None:
    """The tree as the agent left it: every file rewritten, some deleted, some new, modes."""
    for number in range(FILES):
        path = root / "src" / f"d{number % 10}" / f"f{number}.txt"
        if number % 15 == 0:
            if path.exists():
                path.unlink()
            continue
        if path.is_symlink():
            path.unlink()
        path.write_bytes(f"after {number}\n".encode() * 8)
        os.chmod(path, 0o755 if number % 7 == 0 else 0o644)
    for number in range(20):
        path = root / "gen" / f"new{number}.bin"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(bytes([number]) * 100)


def _setup(root: Path) -> tuple[str, dict, dict]:  # type: ignore[type-arg]
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    with open(root / ".git" / "info" / "exclude", "a", encoding="utf-8") as f:
        f.write("/.coding-os/\n")
    for number in range(FILES):
        path = root / "src" / f"d{number % 10}" / f"f{number}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"committed {number}\n".encode() * 8)
    commit_all(root, "base")
    for number in range(0, FILES, 3):  # uncommitted work at the checkpoint: cos holds it
        (root / "src" / f"d{number % 10}" / f"f{number}.txt").write_bytes(
            f"at the checkpoint {number}\n".encode())
    (root / "src" / "link").symlink_to("d1/f1.txt")
    target = create(root)
    at_checkpoint = tree(root)
    _make_before(root)
    create(root)  # the agent's state was checkpointed too (as the hooks would)
    return str(target["id"]), at_checkpoint, tree(root)


def _restore(root: Path, checkpoint: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", RESTORE, checkpoint, str(root)], cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _lane(root: Path, kills: int, seed: int, results: dict[str, object]) -> None:
    checkpoint, at_checkpoint, before = _setup(root)
    journal = root / ".coding-os" / "checkpoints" / "journal.json"
    # One uninterrupted run, to spread the kills over it, watching when its journal exists
    # (the window where a kill leaves work for the next call).
    start = time.monotonic()
    proc = _restore(root, checkpoint)
    window: list[float] = []
    while proc.poll() is None:
        if journal.exists():
            window.append(time.monotonic() - start)
        time.sleep(0.0005)  # the poll interval of this measurement of the journal's window
    code = proc.wait(timeout=60)
    error = proc.stderr.read() if proc.stderr else b""
    if proc.stderr:
        proc.stderr.close()
    assert code == 0, error
    full = time.monotonic() - start
    assert tree(root) == at_checkpoint
    low, high = (min(window), max(window)) if window else (full * 0.6, full * 1.05)
    rng = random.Random(seed)
    outcomes = {"checkpoint": 0, "before": 0, "journal": 0}
    for _ in range(kills):
        if tree(root) != before:
            _make_before(root)
            if (root / "src" / "link").exists() or (root / "src" / "link").is_symlink():
                (root / "src" / "link").unlink()
            (root / "src" / "link").symlink_to("d1/f1.txt")
            assert tree(root) == before
        proc = _restore(root, checkpoint)
        # A third of the kills anywhere, a sixth before the journal exists (the checks, the
        # staging and the journal being written: the tree must stay as before), half around the
        # window where the journal is being applied.
        draw = rng.random()
        time.sleep(rng.uniform(0.0, full * 1.1) if draw < 1 / 3
                   else rng.uniform(0.0, max(0.001, low - 0.01)) if draw < 0.5
                   else rng.uniform(max(0.0, low - 0.01), high + 0.005))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        if proc.stderr:
            proc.stderr.close()
        outcomes["journal"] += journal.exists()
        after = cos("checkpoints", "--json", cwd=root)
        assert after.returncode == 0, after.stderr
        assert not journal.exists()
        assert nothing_staged(root / ".coding-os" / "checkpoints")
        now = tree(root)
        if now == at_checkpoint:
            outcomes["checkpoint"] += 1
        elif now == before:
            outcomes["before"] += 1
        else:
            changed = sorted(p for p in set(now) | set(before) if now.get(p) != before.get(p))
            raise AssertionError(f"the tree is between the two states: {changed[:10]}")
    results[str(root)] = {**outcomes, "full_s": round(full, 3)}


def test_a_restore_killed_at_random_points_leaves_the_tree_at_one_end_never_between(
        tmp_path: Path) -> None:
    # On tmpfs when there is one: fsync is free there, so 200 kills fit in the time budget;
    # SIGKILL leaves the same state on any file system.
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        import tempfile

        tmp_path = Path(tempfile.mkdtemp(prefix="cos-crash-", dir="/dev/shm")).resolve()
    results: dict[str, object] = {}
    errors: list[BaseException] = []

    def run(number: int) -> None:
        try:
            _lane(tmp_path / f"tree{number}", KILLS // LANES, number, results)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(LANES)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    if str(tmp_path).startswith("/dev/shm/"):
        import shutil

        shutil.rmtree(tmp_path, ignore_errors=True)
    if errors:
        raise errors[0]
    assert len(results) == LANES, results
    totals = {key: sum(r[key] for r in results.values()) for key in  # type: ignore[index]
              ("checkpoint", "before", "journal")}
    print(json.dumps(results))
    assert totals["checkpoint"] + totals["before"] == KILLS
    # The kills must exercise the interesting window: a journal left for the next call.
    assert totals["journal"] >= KILLS // 20, results
    assert totals["before"] >= KILLS // 10, results
