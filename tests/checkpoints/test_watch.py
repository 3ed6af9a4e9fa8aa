"""Checkpoints fed by the daemon's file watcher (checkpoints/watch.py, agents/watcher.py): a
snapshot that looked only at the paths the daemon saw change must be exactly the snapshot a whole
`git status` takes, whatever happened to the tree — and whenever the watcher cannot vouch (not
running, restarted, queue overflowed, ignore rules changed, killed), the checkpoint scans."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from coding_os.daemon import server
from coding_os.checkpoints.take import create
from coding_os.checkpoints.rewind import rewind_code
from coding_os.checkpoints.restore import RestoreError
from coding_os.checkpoints.snapshot import capture
from coding_os.checkpoints.manifest import diff
from coding_os.checkpoints.store import ObjectStore
from coding_os.checkpoints.settings import Settings
from coding_os.checkpoints.snapshot import capture_of
from coding_os.state.tiers import Tiers
from tests.checkpoints.conftest import create as cos_create
from tests.checkpoints.conftest import tree
from tests.checkpoints.test_property import apply, content_st, path_st, target_st
from tests.conftest import COS, cos, git


@pytest.fixture
def running(isolated_env: Path) -> Iterator[dict[str, object]]:
    """`cos daemon` for this test's HOME, stopped afterwards."""
    report = server.start()
    try:
        yield report
    finally:
        server.stop()


@pytest.fixture
def daemon_env(isolated_env: Path) -> Iterator[dict[str, str]]:
    """An environment for a daemon started differently from the checkpoints' own."""
    env = dict(os.environ)
    yield env
    server.stop(env)


def start_daemon_ignoring(daemon_env: dict[str, str], home: Path, pattern: str) -> None:
    """Start the daemon with a git configuration of its own that ignores `pattern` (the
    checkpoints' own configuration does not)."""
    ignore = home / "daemon-ignore"
    ignore.write_text(pattern + "\n")
    config = home / "daemon-gitconfig"
    config.write_text(f"[core]\n\texcludesFile = {ignore}\n")
    daemon_env["GIT_CONFIG_GLOBAL"] = str(config)
    server.start(daemon_env)


def whole(tiers: Tiers, root: str) -> dict[str, object]:
    """The snapshot a whole `git status` takes of the tree now."""
    cap = capture_of(tiers, root, ObjectStore(tiers.checkpoints_dir), Settings())
    return capture(cap, "worktree")


def stored(tiers: Tiers, record: dict[str, object]) -> dict[str, object]:
    data = ObjectStore(tiers.checkpoints_dir).get(str(record["manifest"]))
    return json.loads(data)


def same(a: dict[str, object], b: dict[str, object], root: str | None = None) -> None:
    """The two snapshots are one: equal, or (with `root`: after a commit or a change of the
    index that changed no file, which the watcher leaves as it was) holding the same bytes,
    kind and mode at every path."""
    if root is None or a["layers"] == b["layers"]:
        assert a["layers"] == b["layers"]
    else:
        assert diff(root, a, b) == []
    assert a["skipped"] == b["skipped"]


def test_without_a_daemon_a_checkpoint_scans_the_whole_tree(project: Path) -> None:
    (project / "new.txt").write_text("x\n")
    record = cos_create(project)
    assert record["scan"] == "full"
    (project / "new.txt").write_text("y\n")
    assert cos_create(project)["scan"] == "full"


def test_with_the_daemon_a_checkpoint_looks_only_at_what_changed(
        project: Path, running: dict[str, object]) -> None:
    for number in range(30):
        folder = project / f"d{number % 5}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{number}.txt").write_text(f"{number}\n")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "files")
    tiers = Tiers(str(project / ".coding-os"))
    assert cos_create(project)["scan"] == "full"  # the watch starts here
    (project / "d1" / "f1.txt").write_text("changed\n")
    os.remove(project / "d2" / "f2.txt")
    (project / "d3" / "new.txt").write_text("new\n")
    os.rename(project / "d4", project / "d9")
    os.chmod(project / "d0" / "f0.txt", 0o755)
    record = cos_create(project)
    assert record["scan"] == "watcher"
    same(stored(tiers, record), whole(tiers, str(project)))
    # Nothing changed since: the watcher says so, and the snapshot is the same manifest.
    again = cos_create(project)
    assert again["scan"] == "watcher" and again["manifest"] == record["manifest"]
    assert again["objects_written"] == 0
    status = server.status()
    assert status["running"] is True
    assert [t["root"] for t in status["trees"]] == [str(project)]  # type: ignore[union-attr]


def test_a_commit_between_checkpoints_keeps_the_snapshot_true(
        project: Path, running: dict[str, object]) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    (project / "a.txt").write_text("a\n")
    cos_create(project)
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "a")
    (project / "b.txt").write_text("b\n")
    record = cos_create(project)  # HEAD moved: the watcher's base is of another commit
    assert record["scan"] == "full"
    same(stored(tiers, record), whole(tiers, str(project)))
    (project / "b.txt").write_text("bb\n")
    record = cos_create(project)
    assert record["scan"] == "watcher"
    same(stored(tiers, record), whole(tiers, str(project)))


def test_a_changed_gitignore_makes_the_checkpoint_scan_and_the_watch_start_again(
        project: Path, running: dict[str, object]) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    (project / ".gitignore").write_text("build/\n")
    (project / "build").mkdir()
    (project / "build" / "out.o").write_bytes(b"\0" * 10)
    cos_create(project)
    (project / ".gitignore").write_text("")  # build/ is no longer ignored
    record = cos_create(project)
    assert record["scan"] == "full"
    assert "build/out.o" in stored(tiers, record)["layers"][0]["overlay"]  # type: ignore[index]
    (project / "build" / "out.o").write_bytes(b"\1" * 10)  # watched now
    record = cos_create(project)
    assert record["scan"] == "watcher"
    same(stored(tiers, record), whole(tiers, str(project)))


def test_a_restarted_daemon_makes_the_next_checkpoint_scan(
        project: Path, running: dict[str, object]) -> None:
    cos_create(project)
    server.stop()
    (project / "while-stopped.txt").write_text("x\n")  # no daemon saw this
    server.start()
    tiers = Tiers(str(project / ".coding-os"))
    record = cos_create(project)
    assert record["scan"] == "full"
    assert "while-stopped.txt" in stored(tiers, record)["layers"][0]["overlay"]  # type: ignore[index]


def test_a_killed_daemon_leaves_checkpoints_working_and_can_be_started_again(
        project: Path, running: dict[str, object]) -> None:
    cos_create(project)
    os.kill(int(str(running["pid"])), signal.SIGKILL)
    _wait_gone(int(str(running["pid"])))
    (project / "after.txt").write_text("x\n")
    assert os.path.exists(Path(str(running["dir"])) / "server.sock")  # left behind
    assert cos_create(project)["scan"] == "full"
    proc = cos("daemon", "status", "--json", cwd=project)
    assert proc.returncode == 0 and json.loads(proc.stdout)["running"] is False
    started = server.start()
    assert started["already_running"] is False and started["pid"] != running["pid"]


def test_an_overflowed_event_queue_makes_the_next_checkpoint_scan(
        project: Path, running: dict[str, object]) -> None:
    """The daemon is stopped (SIGSTOP) while more events happen than the kernel queues."""
    tiers = Tiers(str(project / ".coding-os"))
    (project / "many").mkdir()
    cos_create(project)
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    pid = int(str(running["pid"]))
    os.kill(pid, signal.SIGSTOP)
    try:
        target = project / "many" / "f"
        for number in range(limit // 2 + 10):  # two events each: create and modify
            target.with_name(f"f{number}").write_bytes(b"x")
    finally:
        os.kill(pid, signal.SIGCONT)
    record = cos_create(project)
    assert record["scan"] == "full"
    same(stored(tiers, record), whole(tiers, str(project)))
    (project / "many" / "f1").write_bytes(b"y")
    assert cos_create(project)["scan"] == "watcher"


def test_a_rewind_with_the_daemon_restores_the_tree_and_the_next_checkpoint_is_true(
        project: Path, running: dict[str, object]) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / "keep.txt").write_text("one\n")
    first = create(tiers, root, session=None)
    wanted = tree(project)
    (project / "keep.txt").write_text("two\n")
    os.remove(project / "README.md")
    (project / "extra").mkdir()
    (project / "extra" / "x").write_text("x\n")
    rewind_code(tiers, root, str(first["id"]))
    assert tree(project) == wanted
    record = create(tiers, root, session=None)
    assert record["scan"] == "watcher"
    same(stored(tiers, record), whole(tiers, root))


def test_a_nested_repository_changing_makes_the_checkpoint_scan(
        project: Path, running: dict[str, object]) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    inner = project / "vendor" / "lib"
    inner.mkdir(parents=True)
    git(inner, "init", "-q", "-b", "main")
    (inner / "x.c").write_text("int x;\n")
    cos_create(project)
    (inner / "x.c").write_text("int y;\n")
    record = cos_create(project)
    assert record["scan"] == "full"
    same(stored(tiers, record), whole(tiers, str(project)))


def test_concurrent_starts_leave_one_daemon(isolated_env: Path, tmp_path: Path) -> None:
    procs = [subprocess.Popen([COS, "daemon", "start", "--json"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    try:
        outs = [proc.communicate(timeout=60) for proc in procs]
        assert all(proc.returncode == 0 for proc in procs), outs
        pids = {json.loads(out)["pid"] for out, _ in outs}
        assert len(pids) == 1
    finally:
        server.stop()
    assert server.status()["running"] is False


def raw_request(running: dict[str, object], data: bytes, timeout: float = 10) -> bytes:
    """Send `data` to the daemon's socket as any program could; its whole answer."""
    import socket

    path = os.path.join(str(running["dir"]), "server.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_the_daemon_answers_bad_requests_with_an_error_and_keeps_running(
        running: dict[str, object]) -> None:
    for data in (b"not json\n", b"[1, 2]\n", b'{"op": 5}\n', b'{"op": "nope"}\n',
                 b'{"op": "changes", "root": "relative"}\n',
                 b'{"op": "changes", "root": "/no/such/dir"}\n',
                 b'{"op": "changes", "root": "/tmp", "state_dir": 7}\n',
                 b'{"op": "changes", "root": "/tmp", "env": {"PATH": "/bin"}}\n', b"\n",
                 b"{" * 70000 + b"\n"):
        answer = json.loads(raw_request(running, data))
        assert answer["ok"] is False and isinstance(answer["error"], str), (data[:40], answer)
    assert json.loads(raw_request(running, b'{"op": "ping"}\n'))["ok"] is True


def test_daemon_commands_report_in_json_and_text(isolated_env: Path, tmp_path: Path) -> None:
    status = json.loads(cos("daemon", "status", "--json", cwd=tmp_path).stdout)
    assert status["running"] is False
    assert "not running" in cos("daemon", "stop", cwd=tmp_path).stdout
    try:
        first = json.loads(cos("daemon", "start", "--json", cwd=tmp_path).stdout)
        second = json.loads(cos("daemon", "start", "--json", cwd=tmp_path).stdout)
        assert first["already_running"] is False and second["already_running"] is True
        assert first["pid"] == second["pid"]
        text = cos("daemon", "status", cwd=tmp_path).stdout
        assert f"pid {first['pid']}" in text
        assert oct(os.stat(first["dir"]).st_mode & 0o777) == "0o700"
    finally:
        stopped = json.loads(cos("daemon", "stop", "--json", cwd=tmp_path).stdout)
    assert stopped["stopped"] is True
    assert not os.path.exists(os.path.join(first["dir"], "server.sock"))


def _wait_gone(pid: int) -> None:
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    raise AssertionError(f"{pid} still runs")


# -- the property ---------------------------------------------------------------------------------

op_st = st.one_of(
    st.tuples(st.just("write"), path_st, content_st, st.booleans()),
    st.tuples(st.just("delete"), path_st),
    st.tuples(st.just("rename"), path_st, path_st),
    st.tuples(st.just("chmod"), path_st),
    st.tuples(st.just("symlink"), path_st, target_st),
    st.tuples(st.just("mkdir"), path_st),
    st.tuples(st.just("ignore"), st.sampled_from(["a/", "b", "*.o", ""])),
    st.tuples(st.just("commit"), st.just("")),
    st.tuples(st.just("rewind"), st.integers(min_value=0, max_value=20)),
    st.tuples(st.just("nest"), st.sampled_from(["a", "b", "c/a"])),
    st.tuples(st.sampled_from(["stage", "unstage"]), st.just("")),
)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@example(initial=[], batches=[[("write", "a/a", b"", False), ("ignore", "a/")],
                              [("write", "a", b"", False)]])  # an ignored dir became a file
@example(initial=[], batches=[[("commit", "")]])
@example(initial=[], batches=[[("write", "a/b", b"", False), ("ignore", "b")],
                              [("write", "a/a", b"", False)]])  # a/ held only ignored files
@given(initial=st.lists(st.tuples(st.just("write"), path_st, content_st, st.booleans()),
                        max_size=6),
       batches=st.lists(st.lists(op_st, min_size=1, max_size=4), min_size=1, max_size=6))
def test_a_snapshot_fed_by_the_watcher_is_the_whole_scan_s(
        running: dict[str, object], initial: list[tuple], batches: list[list[tuple]]  # type: ignore[type-arg]
) -> None:
    watched_scenario(initial, batches)


def watched_scenario(initial: list[tuple], batches: list[list[tuple]],  # type: ignore[type-arg]
                     below: str = "") -> None:
    """Apply `initial`, commit, then each batch of edits (with the daemon running), taking a
    checkpoint after each: every one must be the snapshot a whole scan takes. `below` puts the
    tree in that subdirectory of its repository (`top-*` edits then land above it)."""
    base = tempfile.mkdtemp(prefix="cp-watch-")
    try:
        top = os.path.realpath(os.path.join(base, "tree"))
        root = os.path.join(top, below) if below else top
        os.makedirs(root)
        tiers = Tiers(os.path.join(base, "state"))
        for op in initial:
            apply(root, op)
        git(top, "init", "-q", "-b", "main")
        git(top, "add", "-A")
        git(top, "commit", "-q", "--allow-empty", "-m", "initial")
        taken = [create(tiers, root, session=None)]
        for batch in batches:
            for op in batch:
                _edit(top, root, tiers, taken, op)
            record = create(tiers, root, session=None)
            same(stored(tiers, record), whole(tiers, root), root)
            taken.append(record)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _edit(top: str, root: str, tiers: Tiers, taken: list[dict[str, object]],
          op: tuple) -> None:  # type: ignore[type-arg]
    if op[0] == "ignore":
        Path(root, ".gitignore").write_text(op[1] + "\n")
    elif op[0] == "top-ignore":
        Path(top, ".gitignore").write_text(op[1] + "\n")
    elif op[0] == "top-write":
        os.makedirs(os.path.dirname(os.path.join(top, op[1])), exist_ok=True)
        Path(top, op[1]).write_text("top\n")
    elif op[0] == "nest":  # a repository appears
        where = os.path.join(root, op[1])
        try:
            os.makedirs(where, exist_ok=True)
        except OSError:
            return  # a file or a symlink in the way
        if os.path.isdir(where) and not os.path.islink(where):
            git(where, "init", "-q")
    elif op[0] in ("stage", "unstage"):  # the index alone changes
        subprocess.run(["git", "-C", top, *(["add", "-A"] if op[0] == "stage"
                                            else ["reset", "-q"])], capture_output=True)
    elif op[0] == "commit":  # refused when an empty repository is nested
        subprocess.run(["git", "-C", top, "add", "-A"], capture_output=True)
        subprocess.run(["git", "-C", top, "commit", "-q", "--allow-empty", "-m", "more"],
                       capture_output=True)
    elif op[0] == "rewind":
        try:
            rewind_code(tiers, root, str(taken[op[1] % len(taken)]["id"]))
        except RestoreError:
            pass  # refused (an ignored file in the way...): nothing was changed
    else:
        apply(root, op)


def test_head_read_from_the_git_dir_is_what_git_says(repo: Path, tmp_path: Path) -> None:
    """A checkpoint of an unchanged tree reads HEAD from the git dir's files instead of
    starting git: it must agree with `git rev-parse` in every layout it reads, and leave the
    others to git."""
    from coding_os.git.repo import head, head_from_files

    def agree(root: Path, readable: bool = True) -> None:
        expected = subprocess.run(["git", "-C", str(root), "rev-parse", "-q", "--verify",
                                   "HEAD^{commit}"], capture_output=True,
                                  text=True).stdout.strip() or None
        assert head(str(root)) == expected
        assert head_from_files(str(root)) == (expected if readable else None)

    agree(repo)  # a loose branch ref
    (repo / "sub").mkdir()
    agree(repo / "sub")  # a tree below the repository's top
    (repo / "f.txt").write_text("x\n")
    git(repo, "add", "f.txt")
    git(repo, "commit", "-q", "-m", "two")
    git(repo, "reset", "-q", "--soft", "HEAD~1")  # HEAD moved, no file written
    agree(repo)
    git(repo, "pack-refs", "--all")  # the branch now only in packed-refs
    agree(repo)
    git(repo, "checkout", "-q", "--detach")
    agree(repo)
    git(repo, "checkout", "-q", "main")
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt), "-b", "side")
    agree(wt.resolve())  # `.git` is a file; the branch ref in the common dir
    unborn = tmp_path / "unborn"
    unborn.mkdir()
    git(unborn, "init", "-q", "-b", "main")
    agree(unborn, readable=False)  # no commit yet: git says
