"""hosts/replicate.py: a project's session files pushed line by line to the shared storage."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from coding_os.sessions import index, transcript
from coding_os.hosts import replicate
from coding_os.hosts.identity import project_key, project_keys
from coding_os.state.tiers import Tiers
from coding_os.storage.base import IndexRow, ReplicaSource, Storage
from coding_os.storage.sqlite import SQLiteStorage
from tests.helpers import (CLAUDE_FIXTURES, ECHO_AGENT, GEMINI_DELEGATED, GEMINI_FIXTURES,
                           claude_session, copy_gemini_fixtures, cos, each_backend, git)

SID = "ses-claude-20261129-100000-aaaa"


def stored(storage: Storage, session: str, stream: str) -> bytes:
    """What the storage holds of a file: its lines, each with its newline back."""
    return b"".join(line + b"\n" for _, line in storage.replica_lines(session, stream))


def complete_lines(path: Path | str) -> bytes:
    """A file's bytes up to its last newline (a torn last line left out)."""
    data = Path(path).read_bytes()
    return data[:data.rfind(b"\n") + 1]


def transcript_file(tiers: Tiers, session: str = SID) -> Path:
    path = Path(tiers.state_dir) / "claude" / "transcripts" / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@each_backend
def test_every_complete_line_is_pushed_once_exactly_as_the_file_holds_it(
        storage: Storage, tiers: Tiers) -> None:
    path = transcript_file(tiers)
    path.write_bytes(b'{"v": 1}\n\ncaf\xc3\xa9 \xff not utf-8\nnul \x00 cr \r\n  torn')
    report = replicate.replicate(storage, tiers, host="alpha")
    assert (report.lines, report.torn) == (4, [str(path)])
    assert stored(storage, SID, "transcript") == complete_lines(path)
    source = storage.replica_source(SID, "transcript")
    assert source is not None and (source.host, source.agent, source.lines) == ("alpha", "claude", 4)
    again = replicate.replicate(storage, tiers, host="alpha")
    assert (again.lines, again.unchanged) == (0, 1)
    with path.open("ab") as f:
        f.write(b" line now whole\nmore\n")
    third = replicate.replicate(storage, tiers, host="alpha")
    assert (third.lines, third.torn) == (2, [])
    assert stored(storage, SID, "transcript") == path.read_bytes()
    assert [seq for seq, _ in storage.replica_lines(SID, "transcript")] == list(range(1, 7))


@each_backend
def test_lines_go_in_batches_and_a_lost_mark_file_resumes_without_repeats(
        storage: Storage, tiers: Tiers, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replicate, "BATCH_LINES", 7)
    path = transcript_file(tiers)
    path.write_bytes(b"".join(b"line %d\n" % n for n in range(50)))
    report = replicate.replicate(storage, tiers, host="alpha")
    assert (report.lines, report.batches) == (50, 8)
    os.unlink(os.path.join(tiers.state_dir, replicate.STATE_FILE))
    with path.open("ab") as f:
        f.write(b"line 50\n")
    resumed = replicate.replicate(storage, tiers, host="alpha")
    assert (resumed.lines, resumed.restarted) == (1, [])
    assert stored(storage, SID, "transcript") == path.read_bytes()


@each_backend
def test_a_native_file_that_shrank_or_was_rewritten_starts_over(
        storage: Storage, tiers: Tiers, tmp_path: Path) -> None:
    native = tmp_path / "claude" / "projects" / "-p" / "u-1.jsonl"
    native.parent.mkdir(parents=True)
    native.write_bytes(b"one\ntwo\nthree\n")
    sources = [replicate.Source("u-1", "native", "claude", str(native))]
    replicate.replicate(storage, tiers, host="alpha", sources=sources)
    native.write_bytes(b"one\n")  # shrank
    shrank = replicate.replicate(storage, tiers, host="alpha", sources=sources)
    assert shrank.restarted == ["native:u-1"]
    assert stored(storage, "u-1", "native") == b"one\n"
    os.unlink(os.path.join(tiers.state_dir, replicate.STATE_FILE))
    native.write_bytes(b"ONE\ntwo\n")  # rewritten in place, marks gone: the content tells
    rewritten = replicate.replicate(storage, tiers, host="alpha", sources=sources)
    assert rewritten.restarted == ["native:u-1"]
    assert stored(storage, "u-1", "native") == b"ONE\ntwo\n"
    with native.open("r+b") as f:  # rewritten in place and grown, the marks kept
        f.write(b"ONE\nTW0\nthree\n")
    in_place = replicate.replicate(storage, tiers, host="alpha", sources=sources)
    assert in_place.restarted == ["native:u-1"]
    assert stored(storage, "u-1", "native") == b"ONE\nTW0\nthree\n"
    native.write_bytes(b"ONE\ntwo\n")
    replicate.replicate(storage, tiers, host="alpha", sources=sources)
    replaced = native.with_suffix(".new")
    replaced.write_bytes(b"ONE\ntwo\nthree\n")
    os.replace(replaced, native)  # a new file under the name: resumed when it holds the lines
    kept = replicate.replicate(storage, tiers, host="alpha", sources=sources)
    assert (kept.restarted, kept.lines) == ([], 1)
    assert stored(storage, "u-1", "native") == native.read_bytes()


@each_backend
def test_the_same_session_id_from_a_second_host_is_refused_and_the_first_kept(
        storage: Storage, tmp_path: Path) -> None:
    alpha, beta = Tiers(str(tmp_path / "a" / ".coding-os")), Tiers(str(tmp_path / "b" / ".coding-os"))
    transcript_file(alpha).write_bytes(b"alpha 1\nalpha 2\n")
    transcript_file(beta).write_bytes(b"beta 1\nbeta 2\nbeta 3\n")
    replicate.replicate(storage, alpha, host="alpha")
    refused = replicate.replicate(storage, beta, host="beta")
    assert refused.lines == 0
    assert refused.refused == [[SID, "transcript", f"session {SID} is replicated from host alpha"]]
    assert stored(storage, SID, "transcript") == b"alpha 1\nalpha 2\n"
    source = storage.replica_source(SID, "transcript")
    assert source is not None and source.host == "alpha"
    with transcript_file(alpha).open("ab") as f:
        f.write(b"alpha 3\n")
    assert replicate.replicate(storage, alpha, host="alpha").lines == 1
    assert stored(storage, SID, "transcript") == b"alpha 1\nalpha 2\nalpha 3\n"


@each_backend
def test_another_hosts_session_is_reported_once_while_the_local_file_stays_as_it_was(
        storage: Storage, tmp_path: Path) -> None:
    alpha, beta = Tiers(str(tmp_path / "a" / ".coding-os")), Tiers(str(tmp_path / "b" / ".coding-os"))
    transcript_file(alpha).write_bytes(b"alpha 1\n")
    replicate.replicate(storage, alpha, host="alpha")
    transcript_file(beta).write_bytes(b"alpha 1\n")  # a copy of alpha's, as resume writes it
    first = replicate.replicate(storage, beta, host="beta")
    assert [session for session, _, _ in first.refused] == [SID]
    again = replicate.replicate(storage, beta, host="beta")
    assert (again.refused, again.unchanged, again.lines) == ([], 1, 0)
    with transcript_file(beta).open("ab") as f:
        f.write(b"beta 2\n")  # the session went on here: its lines are not replicated
    grown = replicate.replicate(storage, beta, host="beta")
    assert [session for session, _, _ in grown.refused] == [SID]
    assert stored(storage, SID, "transcript") == b"alpha 1\n"


@pytest.mark.slow
def test_a_host_whose_clock_is_behind_keeps_order_by_seq_and_lists_right(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coding_os import clock
    from coding_os.storage.postgres import PostgresStorage

    alpha, beta = Tiers(str(tmp_path / "a" / ".coding-os")), Tiers(str(tmp_path / "b" / ".coding-os"))
    real = time.time
    empty = (str(tmp_path / "no-claude"), str(tmp_path / "no-codex"))
    with PostgresStorage(pg_url) as storage:
        ahead = transcript.create(alpha, "claude", project="/a", worktree="/a")
        behind_by = 3600.0
        monkeypatch.setattr(clock.time, "time", lambda: real() - behind_by)
        behind = transcript.create(beta, "claude", project="/b", worktree="/b")
        for turn in range(5):
            monkeypatch.setattr(clock.time, "time", real)
            transcript.append(alpha, ahead, "user", {"turn": turn, "text": f"a{turn}"})
            monkeypatch.setattr(clock.time, "time", lambda: real() - behind_by)
            transcript.append(beta, behind, "user", {"turn": turn, "text": f"b{turn}"})
            replicate.replicate(storage, alpha, host="alpha")
            replicate.replicate(storage, beta, host="beta")
        monkeypatch.setattr(clock.time, "time", real)
        for tiers, sid in ((alpha, ahead), (beta, behind)):
            path = transcript.transcript_path(tiers, sid)
            assert stored(storage, sid, "transcript") == Path(path).read_bytes()
            stamps = [json.loads(line)["ts"] for _, line in storage.replica_lines(sid, "transcript")]
            assert len(stamps) == 6
        beta_stamps = [json.loads(line)["ts"] for _, line in
                       storage.replica_lines(behind, "transcript")]
        alpha_first = json.loads(storage.replica_lines(ahead, "transcript")[0][1])["ts"]
        assert max(beta_stamps) < alpha_first  # every line of beta looks older than alpha's
        index.refresh(storage, alpha, *empty, host="alpha")
        index.refresh(storage, beta, *empty, host="beta")
        rows = storage.index_rows()
        assert [(r.id, r.host) for r in rows] == [(ahead, "alpha"), (behind, "beta")]
        assert [r.messages for r in rows] == [5, 5]
        assert [r.id for r in storage.index_rows(hosts=["beta"], local_host="beta")] == [behind]


# what a host pushes: its own files only (DESIGN.md §8, §11)


def _own_claude_session(home: Path, root: Path, native: str) -> Path:
    """A Claude Code session run in `root`, imported by this host (alpha)."""
    claude_session(home, native, root)
    key = "".join(c if c.isalnum() else "-" for c in str(root))
    return home / ".claude" / "projects" / key / f"{native}.jsonl"


def _planted(session: str, root: Path, source_path: str) -> IndexRow:
    """An index row any host of a shared database can write, claiming to be alpha's."""
    return IndexRow(id=session, native_id=session, agent="claude", kind="claude",
                    project=str(root), worktree=str(root), cwd=str(root), host="alpha",
                    last_active="2099-01-01T00:00:00.000Z", source_path=source_path)


@pytest.mark.slow
@each_backend
def test_a_row_of_the_shared_index_never_names_a_file_this_host_pushes(
        storage: Storage, tmp_path: Path, isolated_env: Path) -> None:
    root = tmp_path / "proj"
    tiers = Tiers(str(root / ".coding-os"))
    ours = _own_claude_session(isolated_env, root, "aaaaaaaa-0000-4000-8000-000000000001")
    elsewhere = _own_claude_session(isolated_env, tmp_path / "other-project",
                                    "aaaaaaaa-0000-4000-8000-000000000002")
    secret = isolated_env / ".ssh" / "id_ed25519"
    secret.parent.mkdir()
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n", encoding="utf-8")
    index.refresh(storage, tiers, str(isolated_env / ".claude"), str(isolated_env / ".codex"),
                  host="alpha")
    # Rows naming this host: a private file, and this host's session of another project filed
    # as one of this project (under an id of its own, and under its own id).
    storage.upsert_index_rows([_planted("exfil-1", root, str(secret)),
                               _planted("exfil-2", root, str(elsewhere)),
                               _planted(elsewhere.stem, root, str(elsewhere))])
    report = replicate.replicate(storage, tiers, str(root), host="alpha")
    assert report.pushed == {f"native:{ours.stem}": ours.read_bytes().count(b"\n")}
    assert stored(storage, ours.stem, "native") == ours.read_bytes()
    for session in ("exfil-1", "exfil-2", elsewhere.stem):
        assert storage.replica_sources(session) == []


@each_backend
def test_a_fifo_or_a_device_where_a_file_is_expected_is_reported_never_read(
        storage: Storage, tmp_path: Path) -> None:
    import threading

    root = tmp_path / "proj"
    tiers = Tiers(str(root / ".coding-os"))
    fifo = transcript_file(tiers)
    os.mkfifo(fifo)  # in place of a transcript of this host's own
    planted = tmp_path / "planted-fifo"
    os.mkfifo(planted)
    storage.upsert_index_rows([_planted("stall-1", root, str(planted)),
                               _planted("stall-2", root, "/dev/zero")])
    done: list[replicate.SyncReport] = []
    run = threading.Thread(target=lambda: done.append(
        replicate.replicate(storage, tiers, str(root), host="alpha")), daemon=True)
    run.start()
    run.join(30)
    if run.is_alive():  # blocked in an open: a writer lets it go before the test fails
        for path in (fifo, planted):
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        run.join(10)
    assert done, "replication blocked on a FIFO"
    assert done[0].unreadable == [[str(fifo), "not a regular file"]]
    assert done[0].lines == 0


# whole-process: cos sync, SIGKILL, two hosts

_CHILD = """
import sys
from coding_os.hosts import replicate
from coding_os.state.tiers import Tiers
from coding_os.storage.postgres import PostgresStorage

replicate.BATCH_LINES = 3
storage = PostgresStorage(sys.argv[1])
tiers = Tiers(sys.argv[2])
print("ready", flush=True)
while True:
    replicate.replicate(storage, tiers, host="alpha")
"""


@pytest.mark.slow
def test_replication_killed_at_any_moment_stores_every_line_once_in_order(
        pg_url: str, tmp_path: Path) -> None:
    tiers = Tiers(str(tmp_path / ".coding-os"))
    rng = random.Random(19)
    sessions = [f"ses-claude-20261129-10000{n}-aaaa" for n in range(3)]
    files = [transcript_file(tiers, sid) for sid in sessions]
    events = Path(tiers.state_dir) / "claude" / "events" / f"{sessions[0]}.jsonl"
    events.parent.mkdir(parents=True)
    files.append(events)
    written = 0
    from coding_os.storage.postgres import PostgresStorage

    watcher = PostgresStorage(pg_url)
    interrupted = 0  # runs killed with some lines pushed and some not
    for run in range(50):
        for path in files:  # each run has lines to push, some left torn for a later run
            with path.open("ab") as f:
                for _ in range(rng.randint(0, 12)):
                    written += 1
                    f.write(b'{"n": %d, "pad": "%s"}\n' % (written, b"x" * rng.randint(0, 300)))
                if rng.random() < 0.3:
                    f.write(b'{"torn": ')
                    f.flush()
                    f.write(b'"now whole"}\n')
        child = subprocess.Popen([sys.executable, "-c", _CHILD, pg_url, tiers.state_dir],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0, 0.05))  # not a wait: the kill lands at a random moment
        child.send_signal(signal.SIGKILL)
        child.communicate()
        have = sum(len(watcher.replica_lines(p.stem, _stream(p))) for p in files)
        want = sum(complete_lines(p).count(b"\n") for p in files)
        interrupted += have < want
    watcher.close()
    assert interrupted >= 5, interrupted
    with PostgresStorage(pg_url) as storage:
        replicate.replicate(storage, tiers, host="alpha")
        for path in files:
            session, stream = path.stem, _stream(path)
            lines = storage.replica_lines(session, stream)
            assert [seq for seq, _ in lines] == list(range(1, len(lines) + 1))
            assert stored(storage, session, stream) == path.read_bytes()


def _stream(path: Path) -> str:
    return "transcript" if path.parent.name == "transcripts" else "events"


def _host_env(home: Path, host: str, url: str) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return {"HOME": str(home), "COS_HOST": host, "COS_DATABASE_URL": url,
            "GIT_CONFIG_GLOBAL": str(home / ".gitconfig")}


def _engine_session(checkout: Path, env: dict[str, str], *inputs: str) -> str:
    lines = [{"id": "1", "op": {"type": "configure", "agent": "python", "target": ECHO_AGENT}},
             *[{"id": str(n + 2), "op": {"type": "user_input", "text": text}}
               for n, text in enumerate(inputs)]]
    done = cos("protocol", cwd=checkout, env=env,
               input="".join(json.dumps(x) + "\n" for x in lines))
    assert done.returncode == 0, done.stderr
    session: str = json.loads(done.stdout.splitlines()[0])["session"]
    return session


def _sync(checkout: Path, env: dict[str, str]) -> dict[str, object]:
    done = cos("sync", "--json", cwd=checkout, env=env)
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def _clone(origin: Path, target: Path, *args: str) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    git(target.parent, "clone", "-q", *args, f"file://{origin}", str(target))
    with open(target / ".git" / "info" / "exclude", "a", encoding="utf-8") as f:
        f.write("/.coding-os/\n")
    return target.resolve()


def _two_hosts(repo: Path, tmp_path: Path, pg_url: str
               ) -> tuple[dict[str, Path], dict[str, dict[str, str]]]:
    """Hosts alpha and beta on one database, each with a clone of `repo` at a path of its own
    (under another root) and a home of its own: their checkouts and environments."""
    checkouts = {"alpha": _clone(repo, tmp_path / "alpha" / "work" / "app"),
                 "beta": _clone(repo, tmp_path / "beta" / "src" / "checkout")}
    return checkouts, {host: _host_env(tmp_path / host / "home", host, pg_url)
                       for host in checkouts}


@pytest.mark.slow
def test_two_hosts_writing_sessions_at_once_replicate_both_completely_and_apart(
        pg_url: str, repo: Path, tmp_path: Path) -> None:
    from coding_os.storage.postgres import PostgresStorage

    checkouts, envs = _two_hosts(repo, tmp_path, pg_url)

    def work(host: str) -> list[str]:
        made = []
        for turn in range(2):
            made.append(_engine_session(checkouts[host], envs[host], f"{host} {turn} a",
                                        f"{host} {turn} b"))
            _sync(checkouts[host], envs[host])
        return made

    with ThreadPoolExecutor(2) as pool:
        made = dict(zip(checkouts, pool.map(work, checkouts)))
    finals = {host: _sync(checkouts[host], envs[host]) for host in checkouts}
    assert all(report["refused"] == [] for report in finals.values())
    with PostgresStorage(pg_url) as storage:
        for host, sessions in made.items():
            state = Tiers(str(checkouts[host] / ".coding-os"))
            for sid in sessions:
                sources = storage.replica_sources(sid)
                assert {(s.stream, s.host, s.root) for s in sources} == {
                    ("events", host, str(checkouts[host])),
                    ("transcript", host, str(checkouts[host]))}
                assert stored(storage, sid, "transcript") == \
                    Path(transcript.transcript_path(state, sid)).read_bytes()
                events = Path(state.events_path("python", sid))
                assert stored(storage, sid, "events") == events.read_bytes()
                assert f"{host} 1 b".encode() in stored(storage, sid, "transcript") or \
                    f"{host} 0 b".encode() in stored(storage, sid, "transcript")
        rows = storage.index_rows()
        assert sorted((r.id, r.host) for r in rows) == sorted(
            (sid, host) for host, sessions in made.items() for sid in sessions)
        key = project_key(str(repo))
        assert key is not None and storage.project_hosts(key) == {
            host: str(root) for host, root in checkouts.items()}


@pytest.mark.slow
def test_a_project_is_recognised_across_hosts_by_root_commit_or_by_origin_when_shallow(
        pg_url: str, repo: Path, tmp_path: Path) -> None:
    from coding_os.storage.postgres import PostgresStorage

    for n in range(3):
        (repo / f"f{n}.txt").write_text(f"{n}\n", encoding="utf-8")
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", f"c{n}")
    full = _clone(repo, tmp_path / "alpha" / "app")
    shallow = _clone(repo, tmp_path / "beta" / "shallow-app", "--depth", "1")
    other_full = _clone(repo, tmp_path / "gamma" / "elsewhere")
    hosts = {"alpha": full, "beta": shallow, "gamma": other_full}
    for host, checkout in hosts.items():
        _sync(checkout, _host_env(tmp_path / host / "home", host, pg_url))
    by_commit, by_origin = project_keys(str(full))
    assert project_keys(str(shallow)) == [by_origin]
    with PostgresStorage(pg_url) as storage:
        assert storage.project_hosts(by_commit) == {"alpha": str(full), "gamma": str(other_full)}
        assert storage.project_hosts(by_origin) == {host: str(c) for host, c in hosts.items()}


def test_cos_sync_on_sqlite_says_there_is_nothing_to_replicate_to(project: Path) -> None:
    done = cos("sync", cwd=project)
    assert done.returncode == 0 and "nothing to replicate to" in done.stdout
    report = json.loads(cos("sync", "--json", cwd=project).stdout)
    assert (report["shared"], report["lines"]) == (False, 0)


def test_cos_sync_with_an_invalid_host_name_fails_with_one_line(project: Path) -> None:
    done = cos("sync", cwd=project, env={"COS_HOST": "no spaces allowed"})
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "host name" in done.stderr
    assert "Traceback" not in done.stderr




@pytest.mark.slow
def test_every_import_on_postgresql_pushes_what_it_found(pg_url: str, project: Path,
                                                         tmp_path: Path) -> None:
    from coding_os.storage.postgres import PostgresStorage

    env = _host_env(tmp_path / "home-alpha", "alpha", pg_url)
    sid = _engine_session(project, env, "first")
    done = cos("import", "--json", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    state = Tiers(str(project / ".coding-os"))
    path = Path(transcript.transcript_path(state, sid))
    with PostgresStorage(pg_url) as storage:
        assert stored(storage, sid, "transcript") == path.read_bytes()
        assert stored(storage, sid, "events") == \
            Path(state.events_path("python", sid)).read_bytes()
    again = _sync(project, env)
    assert (again["lines"], again["unchanged"]) == (0, 2)


@pytest.mark.slow
@each_backend
def test_two_runs_of_one_host_at_once_store_every_line_once(
        storage: Storage, tiers: Tiers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        request: pytest.FixtureRequest) -> None:
    monkeypatch.setattr(replicate, "BATCH_LINES", 5)
    path = transcript_file(tiers)
    path.write_bytes(b"".join(b"line %d\n" % n for n in range(400)))
    if isinstance(storage, SQLiteStorage):
        second: Storage = SQLiteStorage(storage.path)
    else:
        from coding_os.storage.postgres import PostgresStorage

        second = PostgresStorage(request.getfixturevalue("pg_url"))
    try:
        with ThreadPoolExecutor(2) as pool:
            reports = list(pool.map(lambda s: replicate.replicate(s, tiers, host="alpha"),
                                    [storage, second]))
    finally:
        second.close()
    assert sum(r.lines for r in reports) == 400
    assert stored(storage, SID, "transcript") == path.read_bytes()
    assert storage.replica_source(SID, "transcript").lines == 400  # type: ignore[union-attr]


def test_a_file_unchanged_since_it_was_pushed_to_one_database_is_pushed_to_another(
        tiers: Tiers, tmp_path: Path) -> None:
    path = transcript_file(tiers)
    path.write_bytes(b"one\ntwo\n")
    with SQLiteStorage(str(tmp_path / "first" / "coding-os.db")) as first:
        assert replicate.replicate(first, tiers, host="alpha").lines == 2
    with SQLiteStorage(str(tmp_path / "second" / "coding-os.db")) as second:
        report = replicate.replicate(second, tiers, host="alpha")
        assert (report.lines, report.unchanged) == (2, 0)
        assert stored(second, SID, "transcript") == path.read_bytes()
        assert replicate.replicate(second, tiers, host="alpha").unchanged == 1


@each_backend
def test_a_session_moved_here_goes_on_from_the_stored_lines_of_its_mapped_copy(
        storage: Storage, tmp_path: Path) -> None:
    from coding_os.hosts.materialize import materialize
    from coding_os.storage.base import IndexRow

    a_root, b_root = str(tmp_path / "a"), str(tmp_path / "b")
    alpha, beta = Tiers(a_root + "/.coding-os"), Tiers(b_root + "/.coding-os")
    on_a = b"".join(json.dumps(entry).encode() + b"\n" for entry in [
        {"type": "session_meta", "project": a_root, "worktree": a_root, "cwd": a_root},
        {"type": "user", "text": "one", "cwd": a_root + "/pkg"}])
    transcript_file(alpha).write_bytes(on_a)
    replicate.replicate(storage, alpha, host="alpha", root=a_root)
    storage.upsert_index_rows([IndexRow(id=SID, agent="claude", kind="cos", native_id=None,
                                        cwd=a_root, host="alpha")])
    row = storage.index_row(SID)
    assert row is not None
    done = materialize(storage, row, storage.replica_sources(SID), source_root=a_root,
                       root=b_root, cwd=b_root, tiers=beta, claude_dir=str(tmp_path / "claude"),
                       codex_dir=str(tmp_path / "codex"), gemini_dir=str(tmp_path / "gemini"))
    path = transcript_file(beta)
    assert a_root.encode() not in path.read_bytes()  # the copy holds B's paths
    assert storage.move_session(SID, "alpha", "beta")
    for f in done.files:
        replicate.adopt(storage, beta, replicate.Source(f.session, f.stream, f.agent, f.path),
                        "beta", f.lines, f.size, f.last)
    first = replicate.replicate(storage, beta, host="beta", root=b_root)
    assert (first.lines, first.restarted, first.refused, first.unchanged) == (0, [], [], 1)
    os.utime(path, ns=(10**9, 10**9))  # touched, nothing new: read, not taken for a rewrite
    touched = replicate.replicate(storage, beta, host="beta", root=b_root)
    assert (touched.lines, touched.restarted) == (0, [])
    b_line = json.dumps({"type": "user", "text": "two", "cwd": b_root}).encode() + b"\n"
    with path.open("ab") as f:
        f.write(b_line)
    grown = replicate.replicate(storage, beta, host="beta", root=b_root)
    assert (grown.pushed, grown.restarted) == ({f"transcript:{SID}": 1}, [])
    assert stored(storage, SID, "transcript") == on_a + b_line  # each line as its host wrote it
    with transcript_file(alpha).open("ab") as f:
        f.write(b'{"type": "user", "text": "late on alpha"}\n')
    late = replicate.replicate(storage, alpha, host="alpha", root=a_root)
    assert [session for session, _, _ in late.refused] == [SID]
    assert stored(storage, SID, "transcript") == on_a + b_line


@each_backend
def test_an_adopted_copy_that_no_longer_holds_the_stored_lines_starts_over(
        storage: Storage, tmp_path: Path) -> None:
    beta = Tiers(str(tmp_path / "b" / ".coding-os"))
    storage.add_replica_lines(
        ReplicaSource(session=SID, stream="transcript", host="beta", agent="claude",
                      path="/elsewhere.jsonl", project_key=None, root=None),
        [(1, b'{"cwd": "/a/x"}'), (2, b'{"cwd": "/a"}')])
    path = transcript_file(beta)
    path.write_bytes(b'{"cwd": "/b/x"}\n{"cwd": "/b"}\n')
    replicate.adopt(storage, beta, replicate.Source(SID, "transcript", "claude", str(path)),
                    "beta", 2, path.stat().st_size, len(b'{"cwd": "/b/x"}\n'))
    assert replicate.replicate(storage, beta, host="beta").unchanged == 1
    path.write_bytes(b'{"cwd": "/b/x"}\n{"cwd": "/c"}\n')  # its last line rewritten
    redone = replicate.replicate(storage, beta, host="beta")
    assert redone.restarted == [f"transcript:{SID}"]
    assert stored(storage, SID, "transcript") == path.read_bytes()


FIXTURES = CLAUDE_FIXTURES
FIXTURE_SESSION = "89488521-e2e7-4d97-bc02-38197efdddc8"
FIXTURE_CWD = b"/Users/dain/workspace/claude-code-log"


@pytest.mark.slow
def test_a_claude_sessions_subagent_transcripts_reach_the_host_that_resumes_it(
        pg_url: str, repo: Path, tmp_path: Path) -> None:
    from coding_os.adapters.claude.transcripts import project_key as munge
    from coding_os.sessions.sidechains import claude_sidechains
    from coding_os.storage.postgres import PostgresStorage

    checkouts, envs = _two_hosts(repo, tmp_path, pg_url)
    folders = {host: Path(envs[host]["HOME"]) / ".claude" / "projects" / munge(str(root))
               for host, root in checkouts.items()}
    main = (FIXTURES / f"claude-code-log__{FIXTURE_SESSION}.jsonl").read_bytes()
    agent = (FIXTURES / "claude-code-log__agent-3be551df.jsonl").read_bytes()
    other_session = b"58edcfae-5291-436c-91e4-54fbb188a0ca"  # the one the agent fixture names
    # Real Claude Code files of one session on alpha, run in alpha's checkout: a 2.1.x nested
    # subagent, a 2.0.x one beside the session, and beside it another session's (not this one's).
    planted = {
        f"{FIXTURE_SESSION}.jsonl": main,
        f"{FIXTURE_SESSION}/subagents/agent-3be551df.jsonl": agent,
        "agent-a0b1c2d3.jsonl": agent.replace(other_session, FIXTURE_SESSION.encode()),
        "agent-3be551df.jsonl": agent}
    for name, data in planted.items():
        path = folders["alpha"] / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.replace(FIXTURE_CWD, str(checkouts["alpha"]).encode()))
    ours = [name for name in planted if name != "agent-3be551df.jsonl"]
    alpha = _sync(checkouts["alpha"], envs["alpha"])
    assert alpha["refused"] == [] and alpha["unreadable"] == []
    with PostgresStorage(pg_url) as storage:
        (row,) = [r for r in storage.index_rows() if r.native_id == FIXTURE_SESSION]
        assert sorted(s.stream for s in storage.replica_sources(row.id)) == sorted(
            ["native", *(f"subagent:{name}" for name in ours[1:])])
        assert all(s.host == "alpha" for s in storage.replica_sources(row.id))

    done = cos("resume", FIXTURE_SESSION, "--json", cwd=checkouts["beta"], env=envs["beta"])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["moved_from"] == "alpha"
    assert sorted(Path(f["path"]).relative_to(folders["beta"]).as_posix()
                  for f in report["materialized"]) == sorted(ours)
    for name in ours:  # the bytes alpha has, alpha's checkout mapped to beta's in each cwd
        mapped = (folders["alpha"] / name).read_bytes().replace(
            b'"cwd":"%s' % str(checkouts["alpha"]).encode(),
            b'"cwd":"%s' % str(checkouts["beta"]).encode())
        assert mapped != (folders["alpha"] / name).read_bytes()
        assert (folders["beta"] / name).read_bytes() == mapped
    assert not (folders["beta"] / "agent-3be551df.jsonl").exists()
    found = claude_sidechains(str(folders["beta"] / f"{FIXTURE_SESSION}.jsonl"))
    assert sorted((s["layout"], len(s["turns"]) > 0) for s in found) == [
        ("nested", True), ("sibling", True)]
    # beta owns the session now: its copies are known as pushed, what it adds is pushed.
    beta = _sync(checkouts["beta"], envs["beta"])
    assert (beta["refused"], beta["restarted"], beta["pushed"]) == ([], [], {})
    nested = folders["beta"] / ours[1]
    line = nested.read_bytes().splitlines()[-1]
    with nested.open("ab") as f:
        f.write(line + b"\n")
    beta = _sync(checkouts["beta"], envs["beta"])
    stream = f"subagent:{ours[1]}"
    assert (beta["restarted"], beta["pushed"]) == ([], {f"{stream}:{row.id}": 1})
    with PostgresStorage(pg_url) as storage:
        assert {s.host for s in storage.replica_sources(row.id)} == {"beta"}
        assert stored(storage, row.id, stream) == \
            (folders["alpha"] / ours[1]).read_bytes() + line + b"\n"


def test_a_gemini_sessions_subagent_files_are_pushed_under_its_id_and_never_as_a_session(
        storage: Storage, repo: Path, tmp_path: Path) -> None:
    gemini = copy_gemini_fixtures(tmp_path / "home", repo, tmp_path / "legacy")
    state = Tiers(str(repo / ".coding-os"))
    index.refresh(storage, state, str(tmp_path / "claude"), str(tmp_path / "codex"),
                  host="alpha", gemini_dir=str(gemini))
    sources = replicate.project_sources(state, str(repo))
    streams: dict[str, list[str]] = {}
    for source in sources:
        streams.setdefault(source.session, []).append(source.stream)
    chats = gemini / "tmp" / "project" / "chats"
    (agent,) = (chats / GEMINI_DELEGATED).iterdir()
    name = f"{GEMINI_DELEGATED}/{agent.name}"
    assert streams[GEMINI_DELEGATED] == ["native", f"subagent:{name}"]
    others = [s for sid, s in streams.items() if sid != GEMINI_DELEGATED]
    assert len(others) == 3 and all(s == ["native"] for s in others)  # the project's others
    assert agent.stem not in streams and str(agent) not in index.native_files(state)
    report = replicate.replicate(storage, state, root=str(repo), host="alpha", sources=sources)
    assert report.refused == [] and report.unreadable == []
    assert stored(storage, GEMINI_DELEGATED, f"subagent:{name}") == agent.read_bytes()


def _gemini_sessions(checkout: Path, env: dict[str, str]) -> list[dict[str, object]]:
    done = cos("sessions", "--agent", "gemini", "--json", cwd=checkout, env=env)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, object]] = json.loads(done.stdout)
    return rows


@pytest.mark.slow
def test_a_gemini_sessions_subagent_files_reach_the_host_that_resumes_it(
        pg_url: str, repo: Path, tmp_path: Path) -> None:
    from coding_os.storage.postgres import PostgresStorage

    checkouts, envs = _two_hosts(repo, tmp_path, pg_url)
    geminis = {host: Path(envs[host]["HOME"]) / ".gemini" for host in checkouts}
    # The real Gemini CLI 0.61 session that ran a subagent, on alpha, run in alpha's checkout.
    fixture = GEMINI_FIXTURES / "gemini-home" / "tmp" / "project" / "chats"
    main = f"session-2026-12-06T08-07-{GEMINI_DELEGATED[:8]}.jsonl"
    (agent,) = (fixture / GEMINI_DELEGATED).iterdir()
    names = [main, f"{GEMINI_DELEGATED}/{agent.name}"]
    chats = geminis["alpha"] / "tmp" / "project" / "chats"
    for name in names:
        (chats / name).parent.mkdir(parents=True, exist_ok=True)
        (chats / name).write_bytes((fixture / name).read_bytes())
    (geminis["alpha"] / "projects.json").write_text(
        json.dumps({"projects": {str(checkouts["alpha"]): "project"}}), encoding="utf-8")
    (chats.parent / ".project_root").write_text(str(checkouts["alpha"]), encoding="utf-8")
    (on_alpha,) = _gemini_sessions(checkouts["alpha"], envs["alpha"])
    alpha = _sync(checkouts["alpha"], envs["alpha"])
    assert alpha["refused"] == [] and alpha["unreadable"] == []
    stream = f"subagent:{names[1]}"
    with PostgresStorage(pg_url) as storage:
        assert sorted(s.stream for s in storage.replica_sources(GEMINI_DELEGATED)) == \
            ["native", stream]  # the subagent once, under its parent's id
        assert stored(storage, GEMINI_DELEGATED, stream) == agent.read_bytes()

    done = cos("resume", GEMINI_DELEGATED, "--json", cwd=checkouts["beta"], env=envs["beta"])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["moved_from"] == "alpha"
    registry = json.loads((geminis["beta"] / "projects.json").read_text(encoding="utf-8"))
    chats_b = geminis["beta"] / "tmp" / registry["projects"][str(checkouts["beta"])] / "chats"
    assert sorted(Path(f["path"]).relative_to(chats_b).as_posix()
                  for f in report["materialized"]) == sorted(names)
    for name in names:  # Gemini's lines hold no path field: the bytes alpha has
        assert (chats_b / name).read_bytes() == (chats / name).read_bytes()
    # beta's index, refreshed from beta's ~/.gemini, has the session with its subagent.
    (on_beta,) = _gemini_sessions(checkouts["beta"], envs["beta"])
    assert on_beta["host"] == "beta" and on_beta["cwd"] == str(checkouts["beta"])
    assert {k: on_beta[k] for k in ("id", "messages", "tokens", "title")} == \
        {k: on_alpha[k] for k in ("id", "messages", "tokens", "title")}
    rebuilt = cos("index", "rebuild", "--json", cwd=checkouts["beta"], env=envs["beta"])
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert (json.loads(rebuilt.stdout)["subagents"],
            json.loads(rebuilt.stdout)["orphan_subagents"]) == (1, 0)
    # beta owns the session now: its copies are known as pushed, what it adds is pushed.
    beta = _sync(checkouts["beta"], envs["beta"])
    assert (beta["refused"], beta["restarted"], beta["pushed"]) == ([], [], {})
    line = (chats_b / names[1]).read_bytes().splitlines()[-1]
    with (chats_b / names[1]).open("ab") as f:
        f.write(line + b"\n")
    beta = _sync(checkouts["beta"], envs["beta"])
    assert (beta["restarted"], beta["pushed"]) == ([], {f"{stream}:{GEMINI_DELEGATED}": 1})
    with PostgresStorage(pg_url) as storage:
        assert {s.host for s in storage.replica_sources(GEMINI_DELEGATED)} == {"beta"}
        assert stored(storage, GEMINI_DELEGATED, stream) == agent.read_bytes() + line + b"\n"
