"""`cos daemon` (daemon/server.py): one per user, started and stopped from any process and
reporting in JSON and text; every request answered (a bad one with an error) and the daemon never
stopped by one; a daemon killed or restarted makes the next checkpoint scan; idle and removed trees
forgotten. For each tree it follows the git configuration and the ignore files outside the tree
(global, XDG, included, `info/exclude`) with the asker's environment, never its own: checked
through the checkpoints it feeds, which must be the snapshot a whole scan takes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coding_os.daemon.client import ask_watcher
from coding_os.daemon import server
from coding_os.checkpoints.take import create
from coding_os.state.tiers import Tiers
from tests.helpers import COS, checkpoint_now, commit_all, cos, git, same, stored, until, whole
from tests.helpers import create as cos_create


# -- the daemon itself -------------------------------------------------------------------------


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


def test_a_daemon_under_a_home_deeper_than_a_socket_path_allows_starts_and_serves_jobs(
        isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The socket's path is over the 107 bytes an address holds: bound and reached through its
    folder, by the daemon, `cos daemon status`, the hooks' client and `cos bg`'s hand-off."""
    home = isolated_env / ("h" * 110)
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q")
    started = json.loads(cos("daemon", "start", "--json", cwd=project).stdout)
    try:
        assert len(os.fsencode(os.path.join(started["dir"], "daemon.sock"))) > 108
        status = json.loads(cos("daemon", "status", "--json", cwd=project).stdout)
        assert status["running"] is True and status["pid"] == started["pid"]
        tiers = Tiers(str(project / ".coding-os"))
        (project / "a.txt").write_text("a\n")
        create(tiers, str(project), session=None, watcher=ask_watcher)  # the watch begins
        (project / "b.txt").write_text("b\n")
        record = create(tiers, str(project), session=None, watcher=ask_watcher)
        assert record["scan"] == "watcher", record
        same(stored(tiers, record), whole(tiers, str(project)))
        made = cos("bg", "--isolation", "none", "--json", "--exec", "echo deep", cwd=project)
        assert made.returncode == 0 and "did not start" not in made.stderr, made.stderr
        job = json.loads(made.stdout)["id"]

        def done() -> bool:
            rows = json.loads(cos("agents", "--json", cwd=project).stdout)
            return any(row["id"] == job and row["state"] == "done" for row in rows)

        until(done, f"job {job} to be done")
    finally:
        stopped = json.loads(cos("daemon", "stop", "--json", cwd=project).stdout)
    assert stopped["stopped"] is True
    assert not os.path.exists(os.path.join(started["dir"], "daemon.sock"))


@pytest.mark.slow
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
    assert not os.path.exists(os.path.join(first["dir"], "daemon.sock"))


def raw_request(running: dict[str, object], data: bytes, timeout: float = 10) -> bytes:
    """Send `data` to the daemon's socket as any program could; its whole answer."""
    import socket

    path = os.path.join(str(running["dir"]), "daemon.sock")
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


def test_a_deeply_nested_request_does_not_kill_the_daemon(running: dict[str, object]) -> None:
    try:
        raw_request(running, b"[" * 60000 + b"\n")
    except OSError:
        pass
    time.sleep(0.2)  # not a wait: a daemon that request killed has gone by then
    assert server.status()["running"] is True


def test_odd_requests_are_answered_and_the_daemon_keeps_running(
        running: dict[str, object], tmp_path: Path) -> None:
    # A small root: watching one means walking it (/tmp can hold 100,000 directories).
    root = json.dumps(str(tmp_path)).encode()
    for data in (b'{"op": "changes", "root": ' + root + b', "since": "x:' + b"9" * 5000 + b'"}\n',
                 b'{"op": "changes", "root": ' + root + b', "since": "x:\\u00b2"}\n',
                 b'{"op": "changes", "root": "\\ud800"}\n',
                 b'{"op": "ping"}\n{"op": "stop"}\n',
                 b"\xff\xfe\n"):
        answer = json.loads(raw_request(running, data))
        assert isinstance(answer.get("ok"), bool), (data[:40], answer)
    assert server.status()["running"] is True


def stalled_clients(running: dict[str, object], count: int) -> list[socket.socket]:
    """`count` connections to the daemon, each holding a partial request (no newline)."""
    held = []
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(os.path.join(str(running["dir"]), "daemon.sock"))
        sock.sendall(b'{"op": "ping"')
        held.append(sock)
    return held


def test_clients_holding_a_partial_line_keep_no_checkpoint_waiting(
        project: Path, running: dict[str, object]) -> None:
    """Four stalled clients, each worth the daemon's whole read timeout (2 s) to a daemon
    serving one connection at a time, while the checkpoint waits as long as one of them:
    answered, it is fed by the watcher."""
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    checkpoint_now(tiers, root)  # the watch starts
    held = stalled_clients(running, 4)
    try:
        (project / "meanwhile.txt").write_text("x\n")
        record = checkpoint_now(tiers, root)
    finally:
        for sock in held:
            sock.close()
    assert record["scan"] == "watcher"
    same(stored(tiers, record), whole(tiers, root))


@pytest.mark.slow
def test_a_client_that_says_nothing_is_dropped_by_the_daemon_which_waits_idle_meanwhile(
        running: dict[str, object]) -> None:
    pid = int(str(running["pid"]))

    def cpu_seconds() -> float:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    held = stalled_clients(running, 1)[0]
    try:
        before = cpu_seconds()
        held.settimeout(30)  # far beyond the daemon's read timeout
        assert held.recv(1024) == b""  # closed, unanswered
        # The 2 s it waited for the line: asleep, not spinning on its other work meanwhile.
        assert cpu_seconds() - before < 0.5
    finally:
        held.close()
    assert json.loads(raw_request(running, b'{"op": "ping"}\n'))["ok"] is True


def test_many_concurrent_clients_each_get_their_own_answer(
        running: dict[str, object], tmp_path: Path) -> None:
    """48 clients, six to a tree, among clients that stall: each is told of its own write."""
    from concurrent.futures import ThreadPoolExecutor

    roots = []
    for number in range(8):
        root = tmp_path / f"tree{number}"
        root.mkdir()
        git(root, "init", "-q", "-b", "main")
        roots.append(root)

    def changes(root: Path, since: object) -> dict[str, object]:
        message = {"op": "changes", "root": str(root), "state_dir": None, "env": {},
                   "since": since}
        answer = json.loads(raw_request(running, json.dumps(message).encode() + b"\n"))
        assert answer["ok"] is True, answer
        return answer  # type: ignore[no-any-return]

    def ask(number: int) -> tuple[str, object, dict[str, object]]:
        root = roots[number % len(roots)]
        token = changes(root, None)["token"]
        (root / f"f{number}").write_text("x\n")
        changed = changes(root, token)["changed"]
        return f"f{number}", changed, json.loads(raw_request(running, b'{"op": "ping"}\n'))

    held = stalled_clients(running, 8)
    try:
        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(ask, range(48)))
    finally:
        for sock in held:
            sock.close()
    for name, changed, ping in results:
        assert isinstance(changed, list) and name in changed, (name, changed)
        assert ping["ok"] is True and ping["pid"] == running["pid"], ping


def test_the_daemon_socket_answers_no_other_user(
        running: dict[str, object], tmp_path: Path) -> None:
    """The daemon's directory keeps other users out (0700); one let in by a link to the
    socket, opened to all, is still answered nothing (the peer's uid is checked)."""
    import tempfile

    setpriv = shutil.which("setpriv")
    if setpriv is None or os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("setpriv as root is needed to act as another user (CI=true)")
        pytest.skip("needs setpriv, run as root, to act as another user")
    sock_path = os.path.join(str(running["dir"]), "daemon.sock")
    assert os.stat(str(running["dir"])).st_mode & 0o077 == 0
    mode = os.stat(sock_path).st_mode & 0o777
    door = tempfile.mkdtemp(prefix="cos-door-")
    try:
        os.chmod(door, 0o755)
        link = os.path.join(door, "sock")
        os.link(sock_path, link)
        os.chmod(link, 0o777)
        probe = ("import socket, sys\n"
                 "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(20)\n"
                 "s.connect(sys.argv[1])\n"
                 "try:\n"
                 "    s.sendall(b'{\"op\": \"ping\"}\\n'); answer = s.recv(4096)\n"
                 "except (BrokenPipeError, ConnectionResetError):\n"
                 "    answer = b''\n"
                 "sys.stdout.write(repr(answer))\n")
        proc = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                               "/usr/bin/python3", "-I", "-c", probe, link],
                              capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(door)
        os.chmod(sock_path, mode)
    assert proc.returncode == 0, proc.stderr  # it got in, and was answered nothing
    assert proc.stdout == "b''", proc.stdout
    log = (Path(str(running["dir"])) / "daemon.log").read_text()
    assert "a connection from uid 65534 refused" in log
    assert json.loads(raw_request(running, b'{"op": "ping"}\n'))["ok"] is True


@pytest.mark.slow
def test_a_killed_daemon_leaves_checkpoints_working_and_can_be_started_again(
        project: Path, running: dict[str, object]) -> None:
    cos_create(project)
    os.kill(int(str(running["pid"])), signal.SIGKILL)
    _wait_gone(int(str(running["pid"])))
    (project / "after.txt").write_text("x\n")
    assert os.path.exists(Path(str(running["dir"])) / "daemon.sock")  # left behind
    assert cos_create(project)["scan"] == "full"
    proc = cos("daemon", "status", "--json", cwd=project)
    assert proc.returncode == 0 and json.loads(proc.stdout)["running"] is False
    started = server.start()
    assert started["already_running"] is False and started["pid"] != running["pid"]


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


def test_forgotten_idle_trees_and_removed_trees_make_the_next_checkpoint_scan(
        tmp_path: Path, isolated_env: Path) -> None:
    """In process: the server's idle sweep, a tree removed and made again, many trees."""
    from coding_os.daemon.server import IDLE_FORGET_S, _Server

    server = _Server(str(tmp_path / "d"))
    try:
        roots = []
        for number in range(5):
            root = tmp_path / f"t{number}"
            root.mkdir()
            git(root, "init", "-q", "-b", "main")
            roots.append(str(root))
        tokens = {}
        for root in roots:
            answer = server.handle({"op": "changes", "root": root, "state_dir": None,
                                    "since": None, "env": {}})
            tokens[root] = answer["token"]
        Path(roots[0], "f").write_text("f\n")
        answer = server.handle({"op": "changes", "root": roots[0], "state_dir": None,
                                "since": tokens[roots[0]], "env": {}})
        assert answer["changed"] == ["f"]
        tokens[roots[0]] = answer["token"]
        for tree_ in server.watches.trees.values():
            if tree_.root == roots[1]:
                tree_.asked -= IDLE_FORGET_S + 1
        shutil.rmtree(roots[2])
        server.watches.drain()
        server.forget_idle()
        assert sorted(t.root for t in server.watches.trees.values()) == [
            roots[0], roots[3], roots[4]]
        assert server.watches._wds, "the watches of the others are kept"
        for root in roots[1:3]:
            os.makedirs(root, exist_ok=True)
            git(Path(root), "init", "-q", "-b", "main")
            answer = server.handle({"op": "changes", "root": root, "state_dir": None,
                                    "since": tokens[root], "env": {}})
            assert answer["ok"] is True and answer["changed"] is None
        Path(roots[0], "g").write_text("g\n")
        answer = server.handle({"op": "changes", "root": roots[0], "state_dir": None,
                                "since": tokens[roots[0]], "env": {}})
        assert answer["changed"] == ["g"]
    finally:
        server.watches.inotify.close()


# -- the asker's git environment, not the daemon's ---------------------------------------------


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


def test_the_daemons_environment_does_not_decide_what_is_watched(
        project: Path, isolated_env: Path, daemon_env: dict[str, str]) -> None:
    start_daemon_ignoring(daemon_env, isolated_env, "build/")
    (project / "build").mkdir()
    (project / "build" / "out.txt").write_text("one\n")
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    create(tiers, root, session=None, watcher=ask_watcher)
    (project / "build" / "out.txt").write_text("two\n")
    record = create(tiers, root, session=None, watcher=ask_watcher)
    same(stored(tiers, record), whole(tiers, root))


def test_a_variable_the_asker_lacks_is_not_taken_from_the_daemon(
        project: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch,
        daemon_env: dict[str, str]) -> None:
    start_daemon_ignoring(daemon_env, isolated_env, "build/")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL")  # the asker's git reads ~/.gitconfig: nothing
    (project / "build").mkdir()
    (project / "build" / "out.txt").write_text("one\n")
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    checkpoint_now(tiers, root)
    (project / "build" / "out.txt").write_text("two\n")
    record = checkpoint_now(tiers, root)
    same(stored(tiers, record), whole(tiers, root))


def test_two_panels_with_other_git_variables_each_get_watcher_fed_checkpoints(
        project: Path, running: dict[str, object], isolated_env: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    scans = []
    for number in range(4):
        if number % 2:
            monkeypatch.setenv("XDG_CONFIG_HOME", str(isolated_env / ".config"))
        else:
            monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
        (project / f"f{number}.txt").write_text(f"{number}\n")
        record = checkpoint_now(tiers, root)
        same(stored(tiers, record), whole(tiers, root))
        scans.append(record["scan"])
    assert scans[2:] == ["watcher", "watcher"], scans


def test_the_xdg_git_config_is_followed(
        project: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch,
        daemon_env: dict[str, str]) -> None:
    monkeypatch.delenv("GIT_CONFIG_GLOBAL")  # git then reads ~/.gitconfig and the XDG one
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    server.start()
    (project / "build").mkdir()
    (project / "build" / "out.txt").write_text("one\n")
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    create(tiers, root, session=None, watcher=ask_watcher)
    ignore = isolated_env / "my-ignore"
    ignore.write_text("build/\n")
    (isolated_env / ".config" / "git").mkdir(parents=True)
    (isolated_env / ".config" / "git" / "config").write_text(
        f"[core]\n\texcludesFile = {ignore}\n")
    record = create(tiers, root, session=None, watcher=ask_watcher)
    same(stored(tiers, record), whole(tiers, root))


# -- ignore rules from files outside the tree --------------------------------------------------


def test_a_changed_global_ignore_file_makes_the_checkpoint_scan(
        project: Path, running: dict[str, object], isolated_env: Path) -> None:
    ignore = isolated_env / "global-ignore"
    ignore.write_text("build/\n")
    git(project, "config", "--global", "core.excludesFile", str(ignore))
    (project / "build").mkdir()
    (project / "build" / "out.txt").write_text("one\n")
    tiers = Tiers(str(project / ".coding-os"))
    create(tiers, str(project), session=None, watcher=ask_watcher)
    ignore.write_text("")  # build/ is part of the tree now
    (project / "build" / "out.txt").write_text("two\n")
    record = create(tiers, str(project), session=None, watcher=ask_watcher)
    assert "build/out.txt" in whole(tiers, str(project))["layers"][0]["overlay"]  # type: ignore[index]
    same(stored(tiers, record), whole(tiers, str(project)))


def test_an_exclude_file_in_a_new_info_directory_is_followed(
        project: Path, running: dict[str, object]) -> None:
    shutil.rmtree(project / ".git" / "info")
    (project / ".gitignore").write_text("/.coding-os/\n")
    commit_all(project, "i")
    (project / "x.log").write_text("log\n")
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    create(tiers, root, session=None, watcher=ask_watcher)
    (project / ".git" / "info").mkdir()
    (project / ".git" / "info" / "exclude").write_text("*.log\n")
    record = create(tiers, root, session=None, watcher=ask_watcher)
    same(stored(tiers, record), whole(tiers, root))


def test_an_ignore_file_named_in_an_included_config_is_followed(
        project: Path, running: dict[str, object], isolated_env: Path) -> None:
    included = isolated_env / "included.gitconfig"
    included.write_text("")
    (isolated_env / ".gitconfig").write_text(f"[include]\n\tpath = {included}\n")
    ignore = isolated_env / "ignore"
    ignore.write_text("build/\n")
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / "build").mkdir()
    (project / "build" / "out.txt").write_text("one\n")
    checkpoint_now(tiers, root)
    included.write_text(f"[core]\n\texcludesFile = {ignore}\n")  # build/ is ignored now
    record = checkpoint_now(tiers, root)
    same(stored(tiers, record), whole(tiers, root))


def _include_case(repo: Path, root: Path, tmp_path: Path) -> tuple[Tiers, str, Path]:
    home = Path(os.environ["HOME"])
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").write_text("build/\n")
    (root / "build").mkdir(parents=True, exist_ok=True)
    (root / "build" / "old.txt").write_text("old\n")
    (root / "a.txt").write_text("a\n")
    commit_all(repo, "a")
    git(repo, "config", "include.path", "inc.cfg")  # relative: .git/inc.cfg, absent yet
    tiers = Tiers(str(root / ".coding-os"))
    return tiers, str(root), tmp_path / "no-ignore"


def test_an_included_config_file_at_the_repository_top_is_watched(
        project: Path, running: dict[str, object], tmp_path: Path) -> None:
    tiers, root, empty = _include_case(project, project, tmp_path)
    checkpoint_now(tiers, root)
    checkpoint_now(tiers, root)
    empty.write_text("")
    (project / ".git" / "inc.cfg").write_text(f"[core]\n\texcludesFile = {empty}\n")
    (project / "build" / "new.txt").write_text("new\n")
    record = checkpoint_now(tiers, root)
    same(stored(tiers, record), whole(tiers, root))
    assert "build/new.txt" in str(stored(tiers, record))


def test_an_included_config_file_is_watched_for_a_tree_below_the_top(
        repo: Path, running: dict[str, object], tmp_path: Path) -> None:
    sub = repo / "sub"
    sub.mkdir()
    tiers, root, empty = _include_case(repo, sub, tmp_path)
    checkpoint_now(tiers, root)
    checkpoint_now(tiers, root)
    empty.write_text("")
    (repo / ".git" / "inc.cfg").write_text(f"[core]\n\texcludesFile = {empty}\n")
    (sub / "build" / "new.txt").write_text("new\n")
    record = checkpoint_now(tiers, root)
    same(stored(tiers, record), whole(tiers, root))


def test_a_branch_switch_that_changes_the_excludes_file_restarts_the_watch(
        project: Path, running: dict[str, object], tmp_path: Path) -> None:
    tiers, root, empty = _include_case(project, project, tmp_path)
    empty.write_text("")
    inc = tmp_path / "other.cfg"
    inc.write_text(f"[core]\n\texcludesFile = {empty}\n")
    git(project, "config", "includeIf.onbranch:other.path", str(inc))
    checkpoint_now(tiers, root)
    checkpoint_now(tiers, root)
    git(project, "checkout", "-q", "-b", "other")  # build/ is no longer ignored
    checkpoint_now(tiers, root)
    (project / "build" / "new.txt").write_text("new\n")
    record = checkpoint_now(tiers, root)
    same(stored(tiers, record), whole(tiers, root))


IDLE_DAEMON = """
import sys
from coding_os.daemon import server
server.IDLE_FORGET_S, server.SWEEP_S = 0.3, 0.1
sys.exit(server.main(sys.argv[1:]))
"""


def test_a_daemon_started_on_demand_stops_once_nothing_was_asked_for_its_idle_time(
        tmp_path: Path) -> None:
    folder = tmp_path / "daemon"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", IDLE_DAEMON, "--until-idle", str(folder)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started >= 0.3
    assert "the daemon started on demand stops" in proc.stdout
    assert not (folder / "daemon.sock").exists()


def test_a_daemon_started_by_the_user_keeps_running_when_idle(tmp_path: Path) -> None:
    folder = tmp_path / "daemon"
    proc = subprocess.Popen([sys.executable, "-c", IDLE_DAEMON, str(folder)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not (folder / "daemon.sock").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(1.0)  # more than three times its idle time, swept every 0.1 s
        assert proc.poll() is None
        assert server.request(str(folder), {"op": "ping"}) is not None
    finally:
        server.request(str(folder), {"op": "stop"})
        proc.wait(timeout=30)
