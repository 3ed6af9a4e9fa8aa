"""Helpers the tests share (plain functions and constants; the fixtures are in the conftest.py
files): running `cos` as an agent's hook or a user's shell does, trees as the user sees them,
checkpoints taken in process and compared with a whole scan, the edits of the property tests, the
kill points of a restore, hooks run in process, the Claude Code and Codex fixtures, the real
clients' projects, the `cos sessions` fixtures, `cos doctor`'s report, and the rows and backends
of the storage tests."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import shutil
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest
from hypothesis import strategies as st

from coding_os import api
from coding_os.daemon.client import ask_watcher
from coding_os.checkpoints import take
from coding_os.checkpoints.snapshot import capture
from coding_os.checkpoints.manifest import diff
from coding_os.checkpoints.store import ObjectStore
from coding_os.checkpoints.settings import Settings
from coding_os.checkpoints.snapshot import capture_of
from coding_os.state.caller import read_panel_session
from coding_os.state.identity import mint_session_id
from coding_os.state.statefile import write_state
from coding_os.state.tiers import Tiers
from coding_os.storage.base import IndexRow, Observation, ReplicaSource, SessionRecord


if TYPE_CHECKING:
    import httpx

    from tests.e2e.model_server import ToolCall


# -- running cos -------------------------------------------------------------------------------


COS = str(Path(sys.executable).with_name("cos"))


def stop_runners_of(home: Path) -> None:
    """Kill every background job's runner of this HOME (the pid in the lock it holds) and what
    its agents and commands started (the sessions its job lists): none outlives its test."""
    import signal

    from coding_os.jobs import jobs
    from coding_os.runtime.children import end

    env = {"HOME": str(home)}
    for job in jobs.all_jobs(env):
        if jobs.runner_alive(job):
            try:
                with open(job.path(jobs.LOCK), encoding="ascii") as f:
                    pid = int(f.read().split()[0])
                os.killpg(pid, signal.SIGKILL)  # a runner leads a session (and group) of its own
            except (OSError, ValueError, IndexError):
                pass
        deadline = time.monotonic() + 10
        while jobs.runner_alive(job) and time.monotonic() < deadline:
            time.sleep(0.02)
        end(job.path(jobs.SESSIONS))


def live(pid: int) -> bool:
    """Whether process `pid` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def stop_daemons_of(home: Path) -> None:
    """End every daemon of this HOME, also one a hook started on its own and that is still
    starting (found by its command line): none outlives its test."""
    import signal

    folder = str(home / ".coding-os" / "daemon")
    for _ in range(2):
        found = []
        for name in os.listdir("/proc"):
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    words = f.read().split(b"\0")
            except OSError:
                continue
            line = b" ".join(words)
            if b"coding_os.daemon.server" in line and os.fsencode(folder) in line:
                found.append(int(name))
        for pid in found:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 15
        while found and time.monotonic() < deadline:
            found = [pid for pid in found if live(pid)]
            time.sleep(0.02)
        if not found:
            return
    raise AssertionError(f"daemons of {home} did not stop: {found}")


def processes_with(text: str) -> list[int]:
    """The live processes whose command line holds `text` (in any of its words)."""
    found = []
    wanted = text.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                line = f.read()
        except OSError:
            continue
        if wanted in line and live(int(name)):
            found.append(int(name))
    return found


def runners_of(job: str) -> list[int]:
    """The live processes running job `job`'s runner (a spare that took it shows the same
    command line)."""
    found = []
    for pid in processes_with(job):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                words = f.read().split(b"\0")
        except OSError:
            continue
        if b"coding_os.jobs.runner" in words and job.encode() in words:
            found.append(pid)
    return found


def git(cwd: Path | str, *args: str) -> str:
    """Run git in `cwd` and return its stdout."""
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def cos(*args: str, cwd: Path | str, env: Mapping[str, str] | None = None,
        input: str | bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the installed `cos` script as a subprocess."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    if isinstance(input, bytes):
        proc = subprocess.run([COS, *args], cwd=cwd, env=full_env, input=input,
                              capture_output=True, timeout=timeout)
        return subprocess.CompletedProcess(proc.args, proc.returncode,
                                           proc.stdout.decode("utf-8", "replace"),
                                           proc.stderr.decode("utf-8", "replace"))
    return subprocess.run([COS, *args], cwd=cwd, env=full_env, input=input, text=True,
                          capture_output=True, timeout=timeout)


def fire(event: str, payload: Mapping[str, object], *, cwd: Path | str, agent: str = "claude",
         env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Fire one hook the way an installed hook entry does: `COS_AGENT=<agent> cos hook <Event>`."""
    full = {"COS_AGENT": agent}
    if env:
        full.update(env)
    body = {"hook_event_name": event, "cwd": str(cwd), **payload}
    return cos("hook", event, cwd=cwd, env=full, input=json.dumps(body))


def cos_json(*args: str, cwd: Path | str, env: Mapping[str, str] | None = None) -> object:
    """Run `cos … --json` and parse its output; fails the test on a non-zero exit."""
    proc = cos(*args, "--json", cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def until(what: Callable[[], Any], message: str, timeout: float = 60.0,
          every: float = 0.1) -> Any:
    """What `what` returns once it is truthy, asked every `every` seconds; fails the test
    naming `message` when it is not within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        time.sleep(every)


def waits_for_lock(path: str | os.PathLike[str]) -> bool:
    """Whether some process is blocked taking a lock (flock or fcntl) on the file `path`: the
    kernel lists it in /proc/locks with `->` before the lock it waits for."""
    info = os.stat(path)
    where = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    with open("/proc/locks", encoding="ascii") as f:
        return any("->" in line and where in line.split() for line in f)


def pipe_full(fd: int) -> bool:
    """Whether the pipe read at `fd` holds as much as it can (its writer blocks)."""
    import termios

    waiting = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    return int.from_bytes(waiting, sys.byteorder) >= fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)


def _namespaces_work() -> bool:
    """Whether `unshare -rm` may mount here (read-only bind mounts, small tmpfs for full disks)."""
    import shutil

    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs tmpfs /mnt"],
                           capture_output=True)
    return probe.returncode == 0


# Skipped where namespaces are not allowed, but never under CI=true: there the tests run (and fail).
needs_namespaces = pytest.mark.skipif(not _namespaces_work() and os.environ.get("CI") != "true",
                                      reason="needs unshare -rm with mount rights")


# -- trees and checkpoints as the user sees them -----------------------------------------------


ALWAYS_OUT = (".git", ".coding-os")


def tree(root: Path | str, *, skip_nested_git: bool = True) -> dict[str, tuple[object, ...]]:
    """Every file and symlink under `root` (never `.git` or `.coding-os` at the top, nor a nested
    `.git`): ("f", bytes, executable) or ("l", target). Empty directories are not part of it."""
    found: dict[str, tuple[object, ...]] = {}
    root = str(root)
    for top, dirs, files in os.walk(root):
        rel_top = os.path.relpath(top, root)
        keep = []
        for name in dirs:
            full = os.path.join(top, name)
            if (rel_top == "." and name in ALWAYS_OUT) or (skip_nested_git and name == ".git"):
                continue
            if os.path.islink(full):
                files.append(name)
                continue
            keep.append(name)
        dirs[:] = keep
        for name in files:
            full = os.path.join(top, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("l", os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                found[rel] = ("f", Path(full).read_bytes(), bool(st.st_mode & stat.S_IXUSR))
    return found


def raw_bytes(root: Path | str) -> dict[str, bytes]:
    """Every file's bytes (and symlink target) under `root`, `.git` included: to prove that
    nothing at all changed."""
    found: dict[str, bytes] = {}
    for top, dirs, files in os.walk(str(root)):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            full = os.path.join(top, name)
            rel = os.path.relpath(full, str(root))
            if os.path.islink(full):
                found[rel] = b"->" + os.fsencode(os.readlink(full))
            else:
                found[rel] = Path(full).read_bytes()
    return found


def create(cwd: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    """`cos checkpoint create ARGS --json`, which must succeed."""
    proc = cos("checkpoint", "create", *args, "--json", cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def rewind(cwd: Path, checkpoint: str, *args: str,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return cos("rewind", checkpoint, *args, cwd=cwd, env=env)


def rewind_ok(cwd: Path, checkpoint: str, *args: str,
              env: dict[str, str] | None = None) -> dict[str, object]:
    proc = rewind(cwd, checkpoint, *args, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def one_line_failure(proc: subprocess.CompletedProcess[str], code: int) -> str:
    """The documented failure: exit `code`, one line on stderr starting `cos:`, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert lines[0].startswith("cos"), lines[0]
    return lines[0]


def commit_all(repo: Path, message: str = "more") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def nothing_staged(folder: Path) -> bool:
    """Whether the checkpoint store `folder` holds no staged file (its staging directory stays
    between restores) and no temporary journal."""
    staging = folder / "staging"
    return (not (staging.exists() and any(staging.iterdir()))
            and not (folder / "journal.json.tmp").exists())


def temporaries(project: Path) -> list[Path]:
    """The temporary objects left in the project's checkpoint store."""
    objects = project / ".coding-os" / "checkpoints" / "objects"
    return [p for p in objects.rglob("*") if ".tmp-" in p.name]


# A checkpoint killed once its objects are in their temporary files, before the flush that
# renames them into place (the whole snapshot is this window now).
KILL_CREATE_BEFORE_FLUSH = """
import os, sys
from coding_os.checkpoints import store
def die(self, also=None):
    os._exit(9)
store.ObjectStore.flush = die
from coding_os import api
api.checkpoint_create(cwd=sys.argv[1])
"""


def killed_create(project: Path) -> list[Path]:
    """A checkpoint killed once its objects are in their temporary files; returns them."""
    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    create(project)
    for number in range(5):
        (project / f"new{number}.txt").write_text(f"new content {number}\n")
    killed = subprocess.run([sys.executable, "-c", KILL_CREATE_BEFORE_FLUSH, str(project)],
                            cwd=project, capture_output=True, text=True)
    assert killed.returncode == 9, killed.stderr
    left = temporaries(project)
    assert left, "the killed checkpoint left no temporary object (the window was missed)"
    return left


# -- checkpoints taken in process, and the whole scan they must equal --------------------------


def checkpoint_now(tiers: Tiers, root: str, **kwargs: object) -> dict[str, object]:
    """A checkpoint of `root` taken in process, of no session, asking the daemon's file
    watcher as the hooks do (when no daemon runs, the tree is scanned)."""
    kwargs.setdefault("watcher", ask_watcher)
    return take.create(tiers, root, session=None, **kwargs)  # type: ignore[arg-type]


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


# -- the edits of the property tests -----------------------------------------------------------


NAMES = ("a", "b", "c")
path_st = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join)
content_st = st.one_of(st.just(b""), st.binary(max_size=64),
                       st.sampled_from([b"text\n", b"\0\1\2\xff", b"x" * 3000]))
# Targets that cannot loop back into the tree: git status does not report the files under a
# directory replaced by a looping symlink (see test_bad_input.py for that case).
target_st = st.sampled_from(["../outside", "/etc/hostname", "nowhere", "zz/y", ""]).map(
    lambda t: t or "../../elsewhere")


def _clear(full: str) -> None:
    """Remove whatever is at `full` (file, symlink or directory)."""
    if os.path.islink(full) or os.path.isfile(full):
        os.unlink(full)
    elif os.path.isdir(full):
        shutil.rmtree(full)


class ShapeChange(Exception):
    """The edit would replace a file by a directory or back (skipped in the `same_shape` runs)."""


def _parents(root: str, rel: str, same_shape: bool = False) -> None:
    """Make `rel`'s parent directories, replacing a file or symlink in the way by a directory."""
    parts = rel.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        full = os.path.join(root, *parts[:depth])
        if os.path.islink(full) or os.path.isfile(full):
            if same_shape:
                raise ShapeChange(full)
            os.unlink(full)
        if not os.path.isdir(full):
            os.mkdir(full)


def apply(root: str, op: tuple, same_shape: bool = False) -> None:  # type: ignore[type-arg]
    """Apply one edit; with `same_shape`, an edit that would turn a file into a directory or back
    (or leave an empty directory) is skipped."""
    try:
        _apply(root, op, same_shape)
    except ShapeChange:
        pass


def _apply(root: str, op: tuple, same_shape: bool) -> None:  # type: ignore[type-arg]
    kind, rel = op[0], op[1]
    full = os.path.join(root, rel)
    if same_shape and kind in ("write", "symlink") and os.path.isdir(full) \
            and not os.path.islink(full):
        raise ShapeChange(full)
    if same_shape and kind == "rename" and os.path.isdir(os.path.join(root, op[2])):
        raise ShapeChange(full)
    if same_shape and kind == "mkdir":
        raise ShapeChange(full)
    if same_shape and kind == "delete" and os.path.isdir(full) and not os.path.islink(full):
        raise ShapeChange(full)
    if kind == "write":
        _parents(root, rel, same_shape)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)  # a directory replaced by a file
        if os.path.islink(full):
            os.unlink(full)
        with open(full, "wb") as f:
            f.write(op[2])
        os.chmod(full, 0o755 if op[3] else 0o644)
    elif kind == "delete":
        if os.path.lexists(full):
            _clear(full)
    elif kind == "rename":
        dest = os.path.join(root, op[2])
        if (not os.path.lexists(full) or op[2] == rel or op[2].startswith(rel + "/")
                or rel.startswith(op[2] + "/")):
            return
        if same_shape and os.path.isdir(full) and not os.path.islink(full):
            raise ShapeChange(full)
        _parents(root, op[2], same_shape)
        if os.path.lexists(full):  # a parent made above may have replaced it
            if os.path.lexists(dest):
                _clear(dest)
            os.rename(full, dest)
    elif kind == "chmod":
        if os.path.isfile(full) and not os.path.islink(full):
            os.chmod(full, os.stat(full).st_mode ^ 0o111)
    elif kind == "symlink":
        _parents(root, rel, same_shape)
        if os.path.lexists(full):
            _clear(full)
        os.symlink(op[2], full)
    elif kind == "mkdir":
        _parents(root, rel + "/x")


# -- killing a restore at each of its points ---------------------------------------------------


CHANGED_FILES = 6


# Each point: the patch that kills the restore there (os._exit(9), as SIGKILL), and whether the
# restore was committed by then.
RESTORE_KILLS = {
    # Uncommitted: the tree stays as before.
    "after_tmp_journal": ("""
from coding_os import durable
real = durable.overwrite
def overwrite(path, data):
    real(path, data)
    if path.endswith("journal.json.tmp"):
        os._exit(9)
durable.overwrite = overwrite
""", False),
    "during_staging": ("""
from coding_os.checkpoints import restore
real = restore._staged
calls = []
def staged(journal, number):
    calls.append(number)
    if len(calls) == 3:
        os._exit(9)
    return real(journal, number)
restore._staged = staged
""", False),
    "during_flush_sync": ("""
from coding_os import durable
real = durable.sync_files
def sync_files(paths):
    if any(p.endswith("journal.json.tmp") for p in paths):
        os._exit(9)
    return real(paths)
durable.sync_files = sync_files
""", False),
    # The snapshot's objects are one pack: killed once it is written, and once it is in place.
    "after_pack_written": ("""
from coding_os import durable
real = durable.sync_files
def sync_files(paths):
    if any(os.sep + "packs" + os.sep in p for p in paths):
        os._exit(9)
    return real(paths)
durable.sync_files = sync_files
""", False),
    "after_pack_in_place": ("""
real = os.replace
def replace(src, dst, *args, **kwargs):
    real(src, dst, *args, **kwargs)
    if ".pack.tmp-" in str(src):
        os._exit(9)
os.replace = replace
""", False),
    "after_flush_before_record": ("""
from coding_os.checkpoints import points
def write(*args, **kwargs):
    os._exit(9)
points.write = write
""", False),
    "after_record_before_rename": ("""
real = os.replace
def replace(src, dst, *args, **kwargs):
    if str(src).endswith("journal.json.tmp"):
        os._exit(9)
    return real(src, dst, *args, **kwargs)
os.replace = replace
""", False),
    # Committed: the next call completes the restore.
    "after_rename": ("""
real = os.replace
def replace(src, dst, *args, **kwargs):
    real(src, dst, *args, **kwargs)
    if str(src).endswith("journal.json.tmp"):
        os._exit(9)
os.replace = replace
""", True),
    "during_apply": ("""
real = os.rename
calls = []
def rename(*args, **kwargs):
    real(*args, **kwargs)
    if "dst_dir_fd" in kwargs:
        calls.append(1)
        if len(calls) == 2:
            os._exit(9)
os.rename = rename
""", True),
    "after_apply": ("""
from coding_os.checkpoints import restore
def remember(*args, **kwargs):
    os._exit(9)
restore.remember_rewind = remember
""", True),
    "during_unstage": ("""
from coding_os.checkpoints import restore
real = restore._remove_quietly
def remove(path):
    real(path)
    # the first removal once the restore is committed (a staged file left, then the tmp)
    if os.path.exists(os.path.join(os.path.dirname(os.path.dirname(path)), "journal.json")):
        os._exit(9)
restore._remove_quietly = remove
""", True),
    "after_unstage_before_unlink": ("""
real = os.unlink
def unlink(path, *args, **kwargs):
    if str(path).endswith(os.sep + "journal.json"):
        os._exit(9)
    return real(path, *args, **kwargs)
os.unlink = unlink
""", True),
}


def changed_after_checkpoint(project: Path) -> tuple[str, dict, dict]:  # type: ignore[type-arg]
    """A checkpoint of untracked files (their bytes are in the cos store), then a tree changed
    everywhere: rewritten files, a new file (deleted by the rewind), a deeper one."""
    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    (project / "sub").mkdir()
    for number in range(CHANGED_FILES):
        (project / f"f{number}.txt").write_text(f"at the checkpoint {number}\n" * 10)
    (project / "sub" / "deep.txt").write_text("deep at the checkpoint\n")
    (project / "link").symlink_to("f0.txt")
    checkpoint = str(create(project)["id"])
    at = tree(project)
    for number in range(CHANGED_FILES):
        (project / f"f{number}.txt").write_text(f"after {number}\n" * 12)
    (project / "sub" / "deep.txt").write_text("deep after\n")
    (project / "extra.txt").write_text("made after the checkpoint\n")
    (project / "link").unlink()
    (project / "link").symlink_to("f1.txt")
    return checkpoint, at, tree(project)


def rewind_in_child(project: Path, patch: str, checkpoint: str, *, tail: str | None = None,
                    **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run `patch`, then (unless `tail` says otherwise) a rewind to `checkpoint`, in a child
    process."""
    script = "import os, sys, json, time, threading\n" + patch + "\n" + (tail or (
        "from coding_os import api\n"
        "api.rewind(sys.argv[1], 'code', cwd=sys.argv[2])\n"))
    return subprocess.run([sys.executable, "-c", script, checkpoint, str(project)],
                          cwd=project, capture_output=True, text=True, timeout=120,
                          **kwargs)  # type: ignore[call-overload]


# -- the hooks log, and a hook started by a shell ----------------------------------------------


def log_lines(root: Path) -> list[str]:
    """The lines of the hooks log of the project at `root`."""
    path = root / ".coding-os" / ".hooks.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def run_shell(command: str, cwd: Path, payload: dict[str, object], event: str,
              agent: str = "claude") -> subprocess.CompletedProcess[str]:
    """`cos hook EVENT` started by sh with the redirections in `command` ({cos} is replaced)."""
    body = json.dumps({"hook_event_name": event, "cwd": str(cwd), **payload})
    env = dict(os.environ, COS_AGENT=agent)
    return subprocess.run(["sh", "-c", command.format(cos=COS, event=event)], cwd=cwd, env=env,
                          input=body, capture_output=True, text=True, timeout=60)


# -- cos doctor --------------------------------------------------------------------------------


def cos_doctor(cwd: Path, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """`cos doctor --json` in `cwd`: its exit code and report."""
    proc = cos("doctor", "--json", cwd=cwd, env=env, timeout=120)
    assert proc.returncode in (0, 6), proc.stderr
    assert proc.stderr == "", proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def doctor_checks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The checks of a `cos doctor --json` report by name."""
    return {check["name"]: check for check in report["checks"]}


# -- the brain's panels ------------------------------------------------------------------------


def start_panel(tiers: Tiers, panel: str, agent: str = "claude") -> str:
    """Give `panel` a current session, as its SessionStart hook does; return the session."""
    session = mint_session_id(agent)
    write_state(os.path.join(tiers.panel_dir(agent, panel), "session-id"), session, "-")
    return session


# -- hooks run in process, through the library entry the hook uses -----------------------------


def hook_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a claude hook under `home`."""
    return {"HOME": str(home), "COS_AGENT": "claude", **extra}


def fire_in_process(repo: Path, home: Path, event: str, session_id: str,
                    **payload: object) -> api.HookResult:
    """Fire `event` for the native session `session_id` in process, as `cos hook` does."""
    return api.hook(event, {"session_id": session_id, "hook_event_name": event, **payload},
                    env=hook_env(home), cwd=str(repo))


def panel_dir(repo: Path, name: str, agent: str = "claude") -> Path:
    return repo / ".coding-os" / agent / "panels" / name


def panel_session(repo: Path, name: str) -> str:
    """The cos session the panel `name` is bound to."""
    current = read_panel_session(str(panel_dir(repo, name)))
    assert current is not None
    return current[0]


def db_rows(repo: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    with sqlite3.connect(repo / ".coding-os" / "coding-os.db") as conn:
        return conn.execute(sql, params).fetchall()


# -- the Claude Code fixtures ------------------------------------------------------------------


# The shared fixtures (../shared/fixtures beside the checkout): real native logs, described in
# their SOURCES.md. Every test finds them through this one path.
SHARED_FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
CLAUDE_FIXTURES = SHARED_FIXTURES / "claude"
MAIN_1053 = "89488521-e2e7-4d97-bc02-38197efdddc8"
VIEWER = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"
SMALL = "ses_stage0_small"
LOG_PROJECT = "-Users-dain-workspace-claude-code-log"


def require_claude_fixtures() -> None:
    if CLAUDE_FIXTURES.is_dir():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"fixtures missing: {CLAUDE_FIXTURES}")
    pytest.skip(f"fixtures missing: {CLAUDE_FIXTURES}")


def copy_claude_fixtures(claude_dir: Path) -> Path:
    """The four fixture files laid out as Claude Code keeps them under `projects/`."""
    require_claude_fixtures()
    projects = claude_dir / "projects"
    layout = {
        f"claude-code-log__{MAIN_1053}.jsonl": f"{LOG_PROJECT}/{MAIN_1053}.jsonl",
        "claude-code-log__agent-3be551df.jsonl": f"{LOG_PROJECT}/agent-3be551df.jsonl",
        f"claude-code-viewer__{VIEWER}.jsonl": f"-path-to-Demo/{VIEWER}.jsonl",
        "agent-sessions__small.jsonl": f"-tmp/{SMALL}.jsonl",
    }
    for source, target in layout.items():
        destination = projects / target
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(CLAUDE_FIXTURES / source, destination)
    return claude_dir


def write_jsonl(path: Path, entries: list[dict[str, Any]], mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open(mode, encoding="utf-8") as handle:
        for item in entries:
            handle.write(json.dumps(item) + "\n")


def ts(second: int) -> str:
    return f"2026-03-01T10:{second // 60:02d}:{second % 60:02d}.000Z"


def user(uuid: str, parent: str | None, content: Any, second: int, session: str,
         **extra: Any) -> dict[str, Any]:
    return {"type": "user", "uuid": uuid, "parentUuid": parent, "isSidechain": False,
            "sessionId": session, "cwd": "/work/app", "gitBranch": "main", "version": "2.1.300",
            "timestamp": ts(second), "message": {"role": "user", "content": content}, **extra}


def assistant(uuid: str, parent: str | None, message_id: str, request: str, second: int,
              session: str, output: int = 5, **extra: Any) -> dict[str, Any]:
    usage = {"input_tokens": 10, "cache_creation_input_tokens": 100,
             "cache_read_input_tokens": 1000, "output_tokens": output}
    return {"type": "assistant", "uuid": uuid, "parentUuid": parent, "isSidechain": False,
            "sessionId": session, "cwd": "/work/app", "gitBranch": "main",
            "version": "2.1.300", "timestamp": ts(second), "requestId": request,
            "message": {"id": message_id, "role": "assistant", "model": "claude-test",
                        "content": [{"type": "text", "text": "ok"}], "usage": usage}, **extra}


def conversation(session: str, turns: int, start: int = 0, prefix: str = "",
                 parent: str | None = None) -> list[dict[str, Any]]:
    """`turns` prompt/answer pairs, chained by parentUuid from a root (or from `parent`: the
    turns go on a conversation, as Claude Code appends them)."""
    entries: list[dict[str, Any]] = []
    for turn in range(turns):
        # uuids are unique per session, as Claude Code's are; copies keep them.
        u, a = f"{session}:{prefix}u{turn}", f"{session}:{prefix}a{turn}"
        entries.append(user(u, parent, f"prompt {prefix}{turn}", start + 2 * turn, session))
        entries.append(assistant(a, u, f"msg_{prefix}{turn}", f"req_{prefix}{turn}",
                                 start + 2 * turn + 1, session))
        parent = a
    return entries


# -- the Codex fixtures ------------------------------------------------------------------------


CODEX_FIXTURES = SHARED_FIXTURES / "codex"
COMPACTED = "019c8a59-e9dd-71f0-9ae3-4079fe9726a9"
TRUNCATED = "019c8a70-dda7-7f33-98ea-f30553347322"
TOOLS = "019e1625-789d-76c0-80ab-3724b5ddb799"
OLD_EXEC = "019b7f94-51b4-7593-922e-ba12b5b73b52"
ROLLOUTS = {
    COMPACTED: ("madshn__localpush__", "2026-02-23T12-54-34"),
    TRUNCATED: ("madshn__localpush__", "2026-02-23T13-19-38"),
    TOOLS: ("codemie-ai__codemie-code__", "2026-05-11T11-26-55"),
    OLD_EXEC: ("codemie-ai__codemie-code__", "2026-01-02T18-39-45"),
}


def require_codex_fixtures() -> None:
    if CODEX_FIXTURES.is_dir():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"fixtures missing: {CODEX_FIXTURES}")
    pytest.skip(f"fixtures missing: {CODEX_FIXTURES}")


def copy_codex_fixtures(codex_home: Path) -> Path:
    """The four rollouts laid out as Codex keeps them: sessions/YYYY/MM/DD/rollout-<ts>-<id>."""
    require_codex_fixtures()
    for thread, (prefix, stamp) in ROLLOUTS.items():
        name = f"rollout-{stamp}-{thread}.jsonl"
        day = codex_home / "sessions" / stamp[:4] / stamp[5:7] / stamp[8:10]
        day.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(CODEX_FIXTURES / f"{prefix}{name}", day / name)
    return codex_home


GEMINI_FIXTURES = Path(__file__).resolve().parent / "adapters" / "gemini" / "fixtures"
# Sessions the real Gemini CLI 0.61.0 wrote there (SOURCES.md): a tool call, a resume and a
# summary; a /rewind; a subagent; a --session-file import of the first.
GEMINI_PLAIN = "aa78fc04-dbe6-4180-b260-710d72261fc2"
GEMINI_REWOUND = "72a406ac-b866-4cc2-b23d-a76a2f95a6d8"
GEMINI_DELEGATED = "bc799a31-3bc5-47fe-81d0-7617d8169e3c"
GEMINI_IMPORTED = "c2773ed1-7bf7-41f7-8b9a-1b2ea72289ae"


def copy_gemini_fixtures(home: Path, project: Path, legacy: Path) -> Path:
    """The fixtures' Gemini dir as `home/.gemini`, its two projects moved to `project` and
    `legacy` (projects.json and each `.project_root` say where a slug's sessions ran)."""
    target = home / ".gemini"
    shutil.copytree(GEMINI_FIXTURES / "gemini-home", target)
    (target / "projects.json").write_text(json.dumps(
        {"projects": {str(project): "project", str(legacy): "legacy"}}), encoding="utf-8")
    (target / "tmp" / "project" / ".project_root").write_text(str(project), encoding="utf-8")
    (target / "tmp" / "legacy" / ".project_root").write_text(str(legacy), encoding="utf-8")
    return target


def gemini_twin(session_file: Path, at: str) -> Path:
    """The second file Gemini CLI 0.61 writes for a session it resumes in another minute than
    the session's first run (`session-<minute>-<id8>.jsonl` beside `session_file`): the
    header line and a `$set` of the injected context, timed `at` (`YYYY-MM-DDTHH:MM:SS.mmmZ`);
    the conversation goes on in `session_file`. Made of `session_file`'s own first two lines,
    which are these two records of its first run; the shape is that of the real twin in
    adapters/gemini/fixtures (`session-2026-12-06T08-08-5bea7116.jsonl`, SOURCES.md step 7)
    and of the pair tests/e2e/test_gemini_server.py makes when the minutes differ."""
    header, context = (json.loads(line) for line in
                       session_file.read_text(encoding="utf-8").splitlines()[:2])
    header["startTime"] = header["lastUpdated"] = at
    context["$set"]["lastUpdated"] = at
    for message in context["$set"]["messages"]:
        message["timestamp"] = at
    short = header["sessionId"][:8]
    twin = session_file.with_name(f"session-{at[:10]}T{at[11:13]}-{at[14:16]}-{short}.jsonl")
    twin.write_text("".join(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
                            for record in (header, context)), encoding="utf-8")
    return twin


# -- the real clients (tests/e2e) --------------------------------------------------------------


ORIGINAL_LINE = "hello world"
EDITED_LINE = "hello coding-os"
SUBAGENT_MARKER = "SCRIPTED-SUBAGENT"


def require_clients() -> None:
    """Skip when the pinned clients are not installed, except under CI=true, where that fails."""
    from tests.e2e.harness import clients_installed

    if clients_installed():
        return
    message = "the real clients are not installed (npm ci --prefix tests/e2e/clients)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def wait_for_spawned_agent(body: dict[str, Any]) -> ToolCall:
    """Codex's wait_agent call for the agent that the last spawn_agent call returned."""
    from tests.e2e.model_server import ToolCall

    outputs = [i for i in body["input"] if i.get("type") == "function_call_output"]
    agent_id = json.loads(outputs[-1]["output"])["agent_id"]
    # Reported as a huge context so that Codex compacts before the next request.
    return ToolCall(
        "wait_agent",
        {"targets": [agent_id], "timeout_ms": 30000},
        namespace="multi_agent_v1",
        input_tokens=200_000,
    )


@dataclass
class CosProject:
    """A scratch repository with coding-os hooks installed for one client, after its runs."""

    agent: str
    project: Path
    home: Path
    native_id: str = ""
    results: list[subprocess.CompletedProcess[str]] = field(default_factory=list)

    @property
    def state(self) -> Path:
        return self.project / ".coding-os"

    def cos(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        full = {"PATH": os.environ["PATH"], "HOME": str(self.home), **(env or {})}
        return subprocess.run([COS, *args], cwd=self.project, env=full, capture_output=True,
                              text=True, timeout=60)

    def log(self) -> list[dict[str, str | None]]:
        proc = self.cos("hooks-log", "--json")
        assert proc.returncode == 0, proc.stderr
        rows: list[dict[str, str | None]] = json.loads(proc.stdout)
        return rows

    def db(self, sql: str, *params: object) -> list[tuple[object, ...]]:
        self.cos("observations")  # moves the hooks' spool into the database first
        with sqlite3.connect(self.state / "coding-os.db") as conn:
            return conn.execute(sql, params).fetchall()


def new_project(root: Path, agent: str) -> CosProject:
    project = (root / "project").resolve()
    project.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "hello.txt").write_text(ORIGINAL_LINE + "\n", encoding="utf-8")
    home = root / "home"
    home.mkdir()
    cos_project = CosProject(agent=agent, project=project, home=home)
    installed = cos_project.cos("init", "--agent", agent)
    assert installed.returncode == 0, installed.stderr
    return cos_project


def succeeded(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def add_file_patch(path: Path, text: str) -> str:
    """A Codex ``apply_patch`` body creating ``path`` with ``text``."""
    body = "".join(f"+{line}\n" for line in text.splitlines())
    return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"


# -- `cos sessions` on copies of the fixtures --------------------------------------------------


NATIVE_IDS = {MAIN_1053, VIEWER, SMALL, *ROLLOUTS}
HERE = "aaaaaaaa-0000-0000-0000-000000000001"  # a Claude session in the repo's subdirectory
WORKTREE = "aaaaaaaa-0000-0000-0000-000000000002"  # one in a linked worktree of the repo


def cos_in(project: tuple[Path, dict[str, str]], *args: str,
           cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `cos ARGS` in the (checkout, environment) `project`."""
    return cos(*args, cwd=cwd or project[0], env=project[1])


def cos_json_in(project: tuple[Path, dict[str, str]], *args: str,
                cwd: Path | None = None) -> object:
    """`cos ARGS --json` in `project`, which must succeed; its parsed output."""
    proc = cos_in(project, *args, "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def damage_sqlite(repo: Path, damage: str) -> None:
    """Delete the project's SQLite database, or overwrite it with bytes that are not one."""
    database = repo / ".coding-os" / "coding-os.db"
    for extra in ("-wal", "-shm"):
        database.with_name(database.name + extra).unlink(missing_ok=True)
    if damage == "delete":
        database.unlink()
    else:
        database.write_bytes(b"this is not a database" * 100)


def claude_project_dir(home: Path, cwd: Path) -> Path:
    """Where Claude Code keeps the sessions run in `cwd`: `$HOME/.claude/projects/<cwd with every
    character but ASCII letters and digits replaced by ->`."""
    mangled = "".join(c if c.isascii() and c.isalnum() else "-" for c in str(cwd))
    return Path(home) / ".claude" / "projects" / mangled


def claude_session(home: Path, session: str, cwd: Path, second: int = 0) -> None:
    """A one-turn Claude Code session `session` run in `cwd`, written under `home`."""
    entries = conversation(session, 1, start=second)
    for entry in entries:
        entry["cwd"] = str(cwd)
    write_jsonl(claude_project_dir(home, cwd) / f"{session}.jsonl", entries)


LATER = "aaaaaaaa-0000-0000-0000-000000000004"  # one more in the repo, active later


def fake_agents(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """PATH with fake `claude` and `codex` first; each writes its cwd and argv to the record."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    record = tmp_path / "record.txt"
    for name in ("claude", "codex"):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\n{{ pwd; echo {name}; for a in "$@"; do echo "$a"; done; }}'
                          f' > "{record}"\n', encoding="utf-8")
        script.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}, record


# -- PostgreSQL --------------------------------------------------------------------------------


# Read at import: the autouse isolated_env fixture scrubs COS_* variables from each test.
PG_URL = os.environ.get("COS_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def with_schema(url: str, schema: str) -> str:
    """`url` with libpq's options=-csearch_path=<schema>."""
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def pg_unreachable(reason: str) -> NoReturn:
    """Skip the test (fail it under CI=true): PostgreSQL cannot be used."""
    message = f"PostgreSQL at {PG_URL} is not usable: {reason}"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


# -- storage -----------------------------------------------------------------------------------


# The backends of the storage a test marked `@each_backend` runs against: its `storage` and
# `open_database` fixtures (tests/conftest.py) are each in turn. One spec, every backend.
STORAGE_BACKENDS = ("postgres", "sqlite")
each_backend = pytest.mark.parametrize("storage_backend", STORAGE_BACKENDS, indirect=True)

# Text UTF-8 can hold (lone surrogates are stored as U+FFFD: a test of their own covers them).
STORABLE_TEXTS = st.text(st.characters(blacklist_characters="\x00",
                                       blacklist_categories=("Cs",)))


def session_record(sid: str, **fields: object) -> SessionRecord:
    """A row of the sessions table: a claude session of panel p1, `fields` changed."""
    base: dict[str, object] = dict(id=sid, agent="claude", panel="p1", native_id="n-" + sid,
                                   started="2026-11-29T10:00:00.000Z",
                                   last_active="2026-11-29T10:00:00.000Z")
    base.update(fields)
    return SessionRecord(**base)  # type: ignore[arg-type]


def observation(oid: str, sid: str, event: str = "PostToolUse", **fields: object) -> Observation:
    """An observation of session `sid` by a claude hook, `fields` changed."""
    return Observation(oid=oid, session=sid, agent="claude", panel="p1",
                       ts="2026-11-29T10:00:01.000Z", event=event, **fields)  # type: ignore[arg-type]


def index_row(sid: str, **fields: object) -> IndexRow:
    """A row of the session index: a claude session in /work/repo, `fields` changed."""
    base: dict[str, object] = dict(id=sid, agent="claude", kind="claude", native_id=None,
                                   cwd="/work/repo", last_active="2026-11-29T10:00:00.000Z")
    base.update(fields)
    return IndexRow(**base)  # type: ignore[arg-type]


def replica_source(session: str = "s1", stream: str = "transcript", host: str = "alpha",
                   **fields: object) -> ReplicaSource:
    """A replicated file of `session` on `host`, `fields` changed."""
    base: dict[str, object] = dict(session=session, stream=stream, host=host, agent="worker",
                                   path=f"/home/u/{session}.jsonl", project_key="git:abc",
                                   root="/home/u/repo")
    base.update(fields)
    return ReplicaSource(**base)  # type: ignore[arg-type]


def as_an_older_init_wrote_it(repo: Path, agent: str, cos_path: str) -> None:
    """Turn the hooks `cos init` installed in `repo` (settings file and manifest) into what an
    older init wrote: the same groups, running the `cos` console script at `cos_path`."""
    from coding_os.launcher import console_script_command, parse_hook_command

    settings = repo / (".claude/settings.json" if agent == "claude" else ".codex/hooks.json")
    manifest = repo / ".coding-os" / "installed-manifest.json"
    hooks = json.loads(settings.read_text(encoding="utf-8"))["hooks"]
    texts = {path: path.read_text(encoding="utf-8") for path in (settings, manifest)}
    for event, groups in hooks.items():
        for command in [h["command"] for g in groups for h in g["hooks"]]:
            if parse_hook_command(command, agent, event) is not None:
                old = console_script_command(agent, cos_path, event)
                for path in texts:
                    texts[path] = texts[path].replace(json.dumps(command)[1:-1],
                                                      json.dumps(old)[1:-1])
    for path, text in texts.items():
        path.write_text(text, encoding="utf-8")
    data = json.loads(manifest.read_text(encoding="utf-8"))
    for record in data["installations"]:
        record.pop("launcher", None)
    manifest.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


# -- crafted repositories (DESIGN.md §11) ------------------------------------------------------


def crafted_clone(tmp_path: Path, files: Mapping[str, bytes | str | None],
                  links: Mapping[str, str] | None = None, name: str = "victim") -> Path:
    """A repository made by someone else and cloned, as a user clones one: `files` (path ->
    bytes or text; None makes a directory) and `links` (path -> symlink target) committed in an
    attacker's repository, then `git clone`d to `tmp_path/name`. Returns the clone."""
    attacker = tmp_path / f"{name}-attacker"
    attacker.mkdir()
    git(attacker, "init", "-q", "-b", "main")
    (attacker / "README.md").write_text("a project\n", encoding="utf-8")
    for rel, data in files.items():
        path = attacker / rel
        if data is None:
            path.mkdir(parents=True, exist_ok=True)
            (path / ".keep").write_bytes(b"")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)
    for rel, target in (links or {}).items():
        path = attacker / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, path)
    git(attacker, "add", "-A", "--force")
    git(attacker, "commit", "-q", "-m", "innocent")
    victim = tmp_path / name
    git(tmp_path, "clone", "-q", str(attacker), str(victim))
    return victim.resolve()


def tree_state(root: Path) -> dict[str, tuple[object, ...]]:
    """Every path under `root` with what it is (file bytes and mode, link target, directory
    mode): for asserting that nothing outside a project changed."""
    found: dict[str, tuple[object, ...]] = {}
    for top, dirs, names in os.walk(root):
        for name in dirs + names:
            full = os.path.join(top, name)
            st = os.lstat(full)
            rel = os.path.relpath(full, root)
            if os.path.islink(full):
                found[rel] = ("l", os.readlink(full))
            elif os.path.isdir(full):
                found[rel] = ("d", st.st_mode & 0o7777)
            else:
                with open(full, "rb") as f:
                    found[rel] = ("f", f.read(), st.st_mode & 0o7777)
    return found


# -- cos mcp --http --------------------------------------------------------------------------------


MCP_HTTP_START_TIMEOUT = 60.0
MCP_HTTP_STOP_TIMEOUT = 15.0


@dataclass
class McpHttp:
    """A running `cos mcp --http`: its URL, the bearer token it printed, its stderr so far."""
    url: str
    token: str
    stderr: Path


@contextlib.contextmanager
def mcp_http_server(project: Path | str, env: Mapping[str, str] | None = None,
                    ) -> Iterator[McpHttp]:
    """`cos mcp --http --port 0` in `project` (COS_AGENT=claude unless `env` says otherwise):
    ready once it printed its URL and token and accepts connections; stopped afterwards (its
    whole process group, SIGKILL when SIGTERM is not enough)."""
    import re
    import signal
    import socket
    import tempfile
    import time

    full_env = {**os.environ, "COS_AGENT": "claude", **(env or {})}
    log = Path(tempfile.mkdtemp(prefix="cos-mcp-http-")) / "stderr"
    with open(log, "wb") as err:
        process = subprocess.Popen([COS, "mcp", "--http", "--port", "0"], cwd=project,
                                   env=full_env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        deadline = time.monotonic() + MCP_HTTP_START_TIMEOUT
        while True:
            text = log.read_text(encoding="utf-8", errors="replace")
            found = re.search(r"(http://127\.0\.0\.1:(\d+)/mcp)\b.*?Bearer ([A-Za-z0-9_-]+)", text)
            if found:
                try:
                    socket.create_connection(("127.0.0.1", int(found[2])), timeout=1).close()
                    break
                except OSError:
                    pass
            assert process.poll() is None, f"cos mcp --http exited: {text}"
            assert time.monotonic() < deadline, f"cos mcp --http did not start: {text}"
            time.sleep(0.02)
        yield McpHttp(found[1], found[3], log)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=MCP_HTTP_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        shutil.rmtree(log.parent, ignore_errors=True)


def mcp_http_call(url: str, tool: str, arguments: Mapping[str, object],
                  authorization: str | None = None, timeout: float = 30,
                  headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
    """One self-contained tools/call POST (protocol 2026-07-28, no session needed: what any
    local process can send), with `authorization` as its Authorization header (and `headers`);
    the HTTP status and body."""
    import urllib.error
    import urllib.request

    version = "2026-07-28"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": dict(arguments),
        "_meta": {"io.modelcontextprotocol/protocolVersion": version,
                  "io.modelcontextprotocol/clientCapabilities": {}}}}
    sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": version, "Mcp-Method": "tools/call", "Mcp-Name": tool,
            **(headers or {})}
    if authorization is not None:
        sent["Authorization"] = authorization
    request = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), headers=sent,
                                     method="POST")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), bytes(exc.read())


class Terminal:
    """`cos ARGS` on a pty that is its controlling terminal: type, and read what it shows."""

    def __init__(self, project: Path, *args: str) -> None:
        self.primary, secondary = os.openpty()
        try:
            # setsid -c: a session of its own whose controlling terminal is the pty, so a
            # typed Ctrl-C is the terminal's SIGINT.
            self.proc = subprocess.Popen(["setsid", "-c", COS, *args], cwd=project,
                                         stdin=secondary, stdout=secondary, stderr=secondary)
        finally:
            os.close(secondary)
        self.shown = b""
        self._mark = 0

    def expect(self, text: str, timeout: float = 20) -> str:
        """What was shown since the last expect, up to and including `text`."""
        wanted = text.encode()
        deadline = time.monotonic() + timeout
        while wanted not in self.shown[self._mark:]:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{text!r} not shown in {timeout}s: {self.shown!r}")
            ready, _, _ = select.select([self.primary], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.primary, 65536)
                except OSError:  # EIO: the process closed the terminal
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"{text!r} never shown: {self.shown!r}")
                self.shown += chunk
        end = self.shown.index(wanted, self._mark) + len(wanted)
        seen, self._mark = self.shown[self._mark:end], end
        return seen.decode("utf-8", "replace")

    def type(self, data: str) -> None:
        os.write(self.primary, data.encode())

    def wait(self, timeout: float = 20) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([self.primary], [], [], 0.1)
            if ready:
                try:
                    self.shown += os.read(self.primary, 65536)
                except OSError:
                    pass
        return self.proc.wait(timeout=1)

    def end(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        os.close(self.primary)


TMUX_TIMEOUT_S = 15.0


def require_tmux(what: str) -> None:
    """Skip the calling test module when tmux is missing (fail in CI, where it must be)."""
    if shutil.which("tmux") is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"tmux is required in CI for {what}", pytrace=False)
        pytest.skip("tmux is not installed", allow_module_level=True)


class Pane:
    """A command running in a detached tmux session of its own server: the keys typed at it,
    the screen it shows (`capture-pane`), and its exit code once it ends."""

    def __init__(self, socket: str, exit_file: Path) -> None:
        self.socket = socket
        self.exit_file = exit_file

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.socket, *args], check=True,
                              capture_output=True, text=True, timeout=10).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "pane")

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.tmux("send-keys", "-t", "pane", *(["-l"] if literal else []), *keys)

    def wait(self, condition: Callable[[str], bool], what: str) -> str:
        """The screen once `condition` holds for it; fails after TMUX_TIMEOUT_S."""
        deadline = time.monotonic() + TMUX_TIMEOUT_S
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if condition(screen):
                return screen
            time.sleep(0.05)  # a poll interval, not a wait for something
        raise AssertionError(f"timed out waiting for {what}; the screen:\n{screen}")

    def exit_code(self) -> int:
        deadline = time.monotonic() + TMUX_TIMEOUT_S
        while time.monotonic() < deadline:
            text = self.exit_file.read_text(encoding="utf-8") if self.exit_file.exists() else ""
            if text.endswith("\n"):
                return int(text)
            time.sleep(0.05)
        raise AssertionError(f"the command did not exit; the screen:\n{self.screen()}")


@contextlib.contextmanager
def tmux_panes(tmp_path: Path) -> Iterator[Callable[..., Pane]]:
    """A function starting a command (argv, cwd, env added to this one's) in a tmux pane of
    160x40 on a tmux server of its own, killed on exit."""
    import shlex
    import tempfile

    # The server's socket in a short private directory (sockets have a path limit).
    socket_dir = tempfile.mkdtemp(prefix="cos-tmux-")
    socket = os.path.join(socket_dir, "sock")

    def start(argv: list[str], *, cwd: Path, env: Mapping[str, str] | None = None) -> Pane:
        full = {**os.environ, **(env or {}), "TERM": "xterm-256color"}
        full.pop("TMUX", None)
        exit_file = tmp_path / "exit-code.txt"
        exit_file.unlink(missing_ok=True)
        command = f"{shlex.join(argv)}; echo $? > {shlex.quote(str(exit_file))}; sleep 60"
        subprocess.run(["tmux", "-S", socket, "-f", "/dev/null", "new-session", "-d", "-x", "160",
                        "-y", "40", "-s", "pane", "-c", str(cwd), command],
                       check=True, env=full, timeout=10)
        return Pane(socket, exit_file)

    try:
        yield start
    finally:
        subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True, timeout=10)
        shutil.rmtree(socket_dir, ignore_errors=True)


def on_terminal(*args: str, cwd: Path) -> tuple[int, bytes]:
    """Run `cos ARGS` with stdout and stderr on a pseudo-terminal; its exit code and the bytes
    the terminal received."""
    import pty

    primary, secondary = pty.openpty()
    try:
        proc = subprocess.Popen([COS, *args], cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=secondary, stderr=secondary)
    finally:
        os.close(secondary)
    received = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            break
        if not chunk:
            break
        received += chunk
    os.close(primary)
    return proc.wait(timeout=60), received


# -- sessions the engine runs, and background jobs ---------------------------------------------

# The example agent of examples/ (no model): `python:` + this is its agent name for cos.
ECHO_AGENT = f"{Path(__file__).resolve().parents[1] / 'examples' / 'echo_agent.py'}:EchoAgent"


def python_session(project: Path, *inputs: str) -> str:
    """A session the engine ran with the example echo agent: one input, answered, then EOF."""
    lines = [{"id": "1", "op": {"type": "configure", "agent": "python", "target": ECHO_AGENT}},
             *[{"id": str(n + 2), "op": {"type": "user_input", "text": text}}
               for n, text in enumerate(inputs)]]
    done = cos("protocol", cwd=project, input="".join(json.dumps(x) + "\n" for x in lines))
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert any(e["msg"]["type"] == "task_complete" for e in events), events
    session: str = events[0]["session"]
    return session


def bg_job(project: Path, *args: str, input: str | None = None) -> dict[str, Any]:
    """`cos bg --json ARGS` in `project`: the job's row."""
    done = cos("bg", "--json", *args, cwd=project, input=input)
    assert done.returncode == 0, done.stderr
    row: dict[str, Any] = json.loads(done.stdout)
    return row


# -- two hosts on one PostgreSQL (DESIGN.md §8) ---------------------------------------------------


@dataclass
class Host:
    """One simulated host: its name, HOME and checkout, and the environment cos runs in."""

    name: str
    home: Path
    checkout: Path
    env: dict[str, str]

    def cos(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([COS, *args], cwd=cwd or self.checkout,
                              env={**self.env, **(env or {})}, capture_output=True, text=True,
                              timeout=120, input=input)

    def cos_json(self, *args: str, env: dict[str, str] | None = None) -> Any:
        return json.loads(succeeded(self.cos(*args, "--json", env=env)).stdout)

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"


def new_origin(path: Path) -> Path:
    """A repository with one commit of content of its own: repositories committed alike in the
    same second would share their root commit, and so be one project."""
    path.mkdir(parents=True)
    (path / "hello.txt").write_text(f"hello from {path}\n", encoding="utf-8")
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q",
                  "-m", "initial"]):
        subprocess.run(["git", *argv], cwd=path, check=True, capture_output=True)
    return path


def make_host(root: Path, name: str, origin: Path, where: str, url: str,
              agents: tuple[str, ...] = ("claude", "codex"),
              env: Mapping[str, str] | None = None) -> Host:
    """Host `name`: a HOME of its own under `root`, a clone of `origin` at `root/where`,
    COS_HOST and the shared database `url`, `cos init` for each of `agents`."""
    home = root / f"home-{name}"
    home.mkdir(parents=True)
    checkout = root / where
    checkout.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", str(origin), str(checkout)], check=True,
                   capture_output=True)
    host = Host(name, home, checkout, {
        "PATH": os.environ["PATH"], "HOME": str(home), "COS_HOST": name,
        "COS_DATABASE_URL": url, "CODEX_HOME": str(home / ".codex"),
        "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"), "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid", "LANG": "C.UTF-8", **(env or {})})
    for agent in agents:
        succeeded(host.cos("init", "--agent", agent))
    return host


def replica_lines(host: Host, session: str, stream: str) -> list[bytes]:
    """The lines of `session`'s `stream` stored in the PostgreSQL database `host` shares."""
    from coding_os.storage.postgres import PostgresStorage

    with PostgresStorage(host.env["COS_DATABASE_URL"]) as storage:
        return [line for _, line in storage.replica_lines(session, stream)]


def replicator_running(state_dir: Path | str) -> bool:
    """Whether a background replicator (hosts/replicator.py) holds the project's lock."""
    import fcntl

    try:
        fd = os.open(os.path.join(state_dir, ".replicate.lock"), os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def replicator_stopped(state_dir: Path | str, timeout: float = 60.0) -> None:
    """Wait until no background replicator runs for the project: none outlives its test."""
    until(lambda: not replicator_running(state_dir), "the background replicator to stop",
          timeout)


class CuttingProxy:
    """A TCP proxy to PostgreSQL that closes a connection once the server has sent it more than
    `budget` bytes: the database stops answering in the middle of a read. `cut`: how many
    connections it cut."""

    def __init__(self, budget: int, target: tuple[str, int] = ("127.0.0.1", 5432)) -> None:
        self.budget, self.target = budget, target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            threading.Thread(target=self._pipe, args=(client, server, None), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, self.budget),
                             daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, budget: int | None) -> None:
        sent = 0
        try:
            while data := src.recv(65536):
                if budget is not None and sent + len(data) > budget:
                    self.cut += 1
                    break
                dst.sendall(data)
                sent += len(data)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def url(self, url: str) -> str:
        """`url` (of 127.0.0.1:5432) through this proxy."""
        return url.replace(f"{self.target[0]}:{self.target[1]}", f"127.0.0.1:{self.port}")

    def close(self) -> None:
        self.listener.close()


# -- cos protocol as a process, and the backends its conformance scenarios run against ---------


@dataclass(frozen=True)
class BackendCase:
    """How one backend is driven through the same scenarios: the configure op's fields, an
    input that ends at once and the message it shows, and a slow input with the message that
    says it is under way (a prefix: exec's names the pid of its process group)."""

    agent: str
    configure: dict[str, Any]
    quick: str
    quick_says: str
    slow: str
    slow_says: str
    approvals: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


BACKENDS = {
    "exec": BackendCase("exec", {"agent": "exec"}, "echo hello", "hello",
                        "echo started $$; exec sleep 30", "started"),
    "python": BackendCase("python", {"agent": "python", "target": ECHO_AGENT},
                          "hello", "echo: hello", "sleep 30", "sleeping 30s", approvals=True),
}


ProtocolEvent = dict[str, Any]


class ProtocolProcess:
    """A `cos protocol` subprocess: send ops, read events with bounded waits."""

    def __init__(self, cwd: Path, *args: str, env: Mapping[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([COS, "protocol", *args], cwd=cwd, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self._buffer = b""
        self.seen: list[ProtocolEvent] = []
        self._next_id = 0

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, op_type: str, **fields: Any) -> str:
        self._next_id += 1
        submission = f"c{self._next_id}"
        self.send_raw(json.dumps({"id": submission, "op": {"type": op_type, **fields}})
                      .encode() + b"\n")
        return submission

    def read(self, timeout: float = 15) -> ProtocolEvent:
        """The next event (fails after `timeout` seconds without one)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no event in {timeout}s; seen {self.seen[-5:]}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise AssertionError(f"cos protocol ended; stderr: {self.stderr()}")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        event: ProtocolEvent = json.loads(line)
        self.seen.append(event)
        return event

    def until(self, match: Callable[[ProtocolEvent], bool],
              timeout: float = 15) -> list[ProtocolEvent]:
        """Events up to and including the first that matches."""
        got = []
        deadline = time.monotonic() + timeout
        while True:
            event = self.read(max(deadline - time.monotonic(), 0.01))
            got.append(event)
            if match(event):
                return got

    def until_says(self, prefix: str, timeout: float = 15) -> list[ProtocolEvent]:
        """Events up to and including the first message that starts with `prefix`."""
        return self.until(lambda event: str(event["msg"].get("text", "")).startswith(prefix),
                          timeout)

    def until_type(self, kind: str, timeout: float = 15) -> list[ProtocolEvent]:
        """Events up to and including the first of type `kind`."""
        return self.until(lambda event: event["msg"]["type"] == kind, timeout)

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode("utf-8", "replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def end(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


# -- cos web as a process, and what a test reads of its answers --------------------------------


WEB_WAIT = 60.0  # seconds cos web may take to answer
OTHER_UID = 65534  # another local user: nobody


def as_other_user() -> str:
    """setpriv, to act as another local user; the test is skipped without it or root."""
    setpriv = shutil.which("setpriv")
    if setpriv is None or os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("setpriv as root is needed to act as another user (CI=true)")
        pytest.skip("needs setpriv, run as root, to act as another user")
    return setpriv


@dataclass
class Web:
    """A `cos web` this test started: where it listens, its token, its process and clients."""

    url: str
    port: int
    token: str
    process: subprocess.Popen[str]
    clients: list[httpx.Client]
    stderr: str | None = None  # what it wrote there, once stopped

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def root(self) -> str:
        """The path every page lives under: the token's."""
        return f"/{self.token}"

    def client(self) -> httpx.Client:

        """A client that opened the printed URL, as a browser does, and asks its paths under
        where it was sent (`client.get("/sessions")` asks `/<token>/sessions`)."""
        import httpx

        first = httpx.get(self.url, timeout=WEB_WAIT)
        assert first.status_code == 303, first.text
        assert first.headers["location"] == f"{self.root}/"
        assert "set-cookie" not in first.headers
        client = httpx.Client(base_url=self.base + self.root, timeout=WEB_WAIT,
                              follow_redirects=False)
        self.clients.append(client)  # closed by the fixture
        return client

    def inside(self, link: object) -> str:
        """A link of a page, as the path a `client()` asks for it."""
        text = str(link)
        assert text.startswith(f"{self.root}/"), text
        return text[len(self.root):]


def start_web(project: Path, *args: str, env: dict[str, str] | None = None,
              preexec: Callable[[], None] | None = None) -> Web:
    """`cos web --json --port 0 ARGS` in `project`, once it printed its line."""
    process = subprocess.Popen([COS, "web", "--json", "--port", "0", *args], cwd=project,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env, preexec_fn=preexec)
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, process.stderr.read() if process.stderr else ""
    info = json.loads(line)
    assert info["pid"] == process.pid
    return Web(info["url"], info["port"], info["token"], process, [])


def stop_web(web: Web) -> str:
    """End `web` (SIGTERM, as Ctrl-C would), if not yet; what it wrote to stderr."""
    if web.stderr is None:
        for client in web.clients:
            client.close()
        web.process.terminate()
        try:
            _, web.stderr = web.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            web.process.kill()
            _, web.stderr = web.process.communicate(timeout=30)
    return web.stderr


class Page(HTMLParser):
    """What the browser would build from a page: its elements with their attributes, the
    text of each script element, and the text."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._in_script = False
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
        self.text.append(data)

    def all(self, tag: str | None = None, **wanted: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.elements if (tag is None or name == tag)
                and all(attrs.get(key.replace("_", "-")) == value
                        for key, value in wanted.items())]

    def testid(self, value: str) -> list[dict[str, str | None]]:
        return [attrs for _, attrs in self.elements if attrs.get("data-testid") == value]

    def csrf(self) -> str:
        [meta] = self.all("meta", name="csrf-token")
        return str(meta["content"])


def page(client: httpx.Client, path: str, status: int = 200) -> Page:
    answer = client.get(path)
    assert answer.status_code == status, (path, answer.status_code, answer.text[:2000])
    assert "Traceback" not in answer.text
    return Page(answer.text)


def read_sse(answer: httpx.Response, stop: Callable[[list[dict[str, Any]]], bool]
             ) -> tuple[list[dict[str, Any]], bool]:
    """The protocol events of an SSE answer until `stop(events)` or its `end`; whether the
    end came."""
    events: list[dict[str, Any]] = []
    kind, data, ident = "message", "", None
    for line in answer.iter_lines():
        if line.startswith("id: "):
            ident = line[4:]
        elif line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif line == "":
            if kind == "end":
                return events, True
            if kind == "protocol":
                event = json.loads(data)
                assert str(event["seq"]) == ident
                events.append(event)
                if stop(events):
                    return events, False
            kind, data, ident = "message", "", None
    return events, False


def job_session(project: Path, job: str) -> str:
    """The cos session of background job `job`, once it has one."""
    def session() -> str | None:
        rows = json.loads(cos("agents", "--json", cwd=project).stdout)
        found = [r["cos_session"] for r in rows if r["id"] == job and r["cos_session"]]
        return found[0] if found else None
    found: str = until(session, "the job's session")
    return found
