"""Appenders killed mid-write (DESIGN.md §4.1): every entry whose append returned is readable
afterwards, a torn tail is set aside by the next writer, seqs stay dense, and `cos index rebuild`
afterwards gives the index the transcripts stand for (§4.2): the other sessions' rows as they were
before the kills, the appended session's row as its repaired transcript says."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from coding_os.sessions import index, transcript
from coding_os.state.tiers import Tiers
from coding_os.storage.sqlite import SQLiteStorage
from tests.helpers import COS


pytestmark = pytest.mark.slow


KILLS = 200
ROUNDS_PER_SESSION = 5  # a fresh transcript now and then keeps the files small
LARGE = 4 * 1024 * 1024  # every other entry is this long: a write that takes a while

# Appends until killed; prints "<seq> <k>" after each append that returned, and "write" just
# before the writer's os.write of a long line (so that the killer can aim inside that write).
APPENDER = r'''
import os
import sys
from coding_os.sessions import transcript
from coding_os.state.tiers import Tiers

state_dir, session, kill, large = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
tiers = Tiers(state_dir)
real_write = os.write

def announced_write(fd, data):
    if len(data) > large:
        print("write", flush=True)  # sys.stdout does not go through os.write
    return real_write(fd, data)

os.write = announced_write
print("ready", flush=True)
k = 0
while True:
    text = f"{kill}-{k}-" + ("x" * large if k % 2 else "é" * 50)
    entry_type = "assistant" if k % 2 else "user"
    # No fsync: a kill does not lose the page cache, and the appender should spend its time
    # writing (where a kill can tear a line), not waiting for the disk.
    appended = transcript.append(tiers, session, entry_type, {"text": text, "turn": k},
                                 durability="none")
    print(appended.seq, k, flush=True)
    k += 1
'''


class Round:
    """One killed appender and the next writer after it."""

    def __init__(self, kill: int, returned: dict[int, int], torn: int, next_seq: int,
                 set_aside: int, torn_file_growth: int,
                 read_after: transcript.Transcript) -> None:
        self.kill = kill
        self.returned = returned  # seq -> k of every append that returned
        self.torn = torn  # length of the torn tail the reader reported after the kill (0: none)
        self.next_seq = next_seq  # seq the next writer got
        self.set_aside = set_aside  # bytes it said it moved to .torn
        self.torn_file_growth = torn_file_growth  # bytes .torn grew by
        self.read_after = read_after


def returned_seqs(printed: list[str]) -> dict[int, int]:
    """seq -> k of the appends the appender said returned."""
    returned = {}
    for line in printed:
        parts = line.split()
        if len(parts) == 2 and line.endswith("\n"):  # a line cut by the kill says nothing
            returned[int(parts[0])] = int(parts[1])
    return returned


def kill_one(state_dir: str, session: str, kill: int, rng: random.Random,
             in_write: bool) -> dict[int, int]:
    """Start an appender and SIGKILL it at a random moment, or (`in_write`) a random moment
    into the write of its first long line; returns the appends it said returned."""
    proc = subprocess.Popen([sys.executable, "-c", APPENDER, state_dir, session, str(kill),
                             str(LARGE)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    printed = []
    if in_write:
        while (line := proc.stdout.readline()) != "write\n":
            assert line, "the appender ended before its first long write"
            printed.append(line)
        time.sleep(rng.uniform(0, 0.001))  # writing 4 MB takes one to a few milliseconds
    else:
        time.sleep(rng.uniform(0, 0.04))  # not a wait: the kill lands at a random moment
    proc.send_signal(signal.SIGKILL)
    printed += proc.stdout.readlines()
    proc.wait(timeout=30)
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    return returned_seqs(printed)


class Project:
    """A project whose state dir holds the crash's transcripts, some sessions nobody appends to,
    and the index as `cos index rebuild` left it before the first kill."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tiers = Tiers(str(root / ".coding-os"))
        home = root / "home"
        home.mkdir()
        self.env = {key: value for key, value in os.environ.items()
                    if not key.startswith(("COS_", "CLAUDE", "CODEX_"))}
        self.env.update(HOME=str(home), CLAUDE_CONFIG_DIR=str(home / "no-claude"),
                        CODEX_HOME=str(home / "no-codex"))
        self.others: list[str] = []
        self.before: dict[str, str] = {}  # id -> the row before the kills, as canonical JSON
        self.refreshed = 0  # index refreshes between a kill and the next writer

    def cos(self, *args: str) -> object:
        """`cos <args> --json` in the project; its parsed output."""
        proc = subprocess.run([COS, *args, "--json"], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    def rows(self) -> dict[str, str]:
        """Every row of the index (all columns), as canonical JSON by id."""
        storage = SQLiteStorage(self.tiers.database)
        try:
            return {row.id: json.dumps(asdict(row), sort_keys=True)
                    for row in storage.index_rows()}
        finally:
            storage.close()

    def refresh(self) -> None:
        """What a `cos sessions` between a kill and the next writer does to the index."""
        storage = SQLiteStorage(self.tiers.database)
        try:
            index.refresh(storage, self.tiers, self.env["CLAUDE_CONFIG_DIR"],
                          self.env["CODEX_HOME"])
        finally:
            storage.close()
        self.refreshed += 1


@pytest.fixture(scope="module")
def indexed_project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """The project, with three sessions nobody appends to, indexed by `cos index rebuild`."""
    root = tmp_path_factory.mktemp("crash").resolve()
    (root / "AGENTS.md").write_text("a project\n", encoding="utf-8")  # marks the project root
    made = Project(root)
    for n, title in enumerate(("first", None, "third")):
        sid = transcript.create(made.tiers, "claude", project=str(root), worktree=str(root),
                                branch="main", title=title)
        for turn in range(1, n + 3):
            transcript.append(made.tiers, sid, "user", {"text": f"prompt {turn}", "turn": turn})
            transcript.append(made.tiers, sid, "assistant",
                              {"text": f"answer {turn}", "turn": turn,
                               "usage": {"input": 10 * turn, "output": turn}})
        if n == 1:
            transcript.append(made.tiers, sid, "event", {"name": "close"})
        made.others.append(sid)
    rebuilt = made.cos("index", "rebuild")
    assert isinstance(rebuilt, dict) and rebuilt["sessions_added"] == 3
    made.before = made.rows()
    assert sorted(made.before) == sorted(made.others)
    return made


@pytest.fixture(scope="module")
def rounds(indexed_project: Project) -> list[Round]:
    """KILLS rounds of: an appender killed, the transcript read, one append by the next writer
    (what the next hook or command does), the transcript read again. Every other kill aims at
    the write of a long line; the others land anywhere. Every tenth kill, the index is refreshed
    before the next writer comes (it then reads a transcript that may have a torn tail)."""
    rng = random.Random(20261129)
    tiers = indexed_project.tiers
    done = []
    session = path = aside = ""
    for kill in range(KILLS):
        if kill % ROUNDS_PER_SESSION == 0:
            if session:
                Path(path).unlink()
                Path(aside).unlink(missing_ok=True)
            session = transcript.create(tiers, "claude")
        path = transcript.transcript_path(tiers, session)
        aside = path + ".torn"
        returned = kill_one(tiers.state_dir, session, kill, rng, in_write=kill % 2 == 1)
        after_kill = transcript.read(path).report
        torn = [p.length for p in after_kill.problems if p.kind == "torn_tail"]
        assert after_kill.kinds() in ([], ["torn_tail"]), after_kill.problems
        if kill % 10 == 9:
            indexed_project.refresh()
        aside_before = size(aside)
        next_writer = transcript.append(tiers, session, "event",
                                        {"name": "after-kill", "kill": kill})
        done.append(Round(kill, returned, torn[0] if torn else 0, next_writer.seq,
                          next_writer.torn_bytes, size(aside) - aside_before,
                          transcript.read(path)))
        assert after_kill.last_seq is not None and next_writer.seq == after_kill.last_seq + 1
    return done


def size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


def test_every_entry_whose_append_returned_is_readable_after_the_kill(
        rounds: list[Round]) -> None:
    returned = 0
    for round_ in rounds:
        # Readable right after the kill and the next append, and still when the session's
        # last round is over (later kills and set-asides never take a whole line).
        last_of_session = rounds[round_.kill - round_.kill % ROUNDS_PER_SESSION
                                 + ROUNDS_PER_SESSION - 1]
        for read in (round_.read_after, last_of_session.read_after):
            by_seq = {e["seq"]: e for e in read.entries}
            for seq, k in round_.returned.items():
                entry = by_seq.get(seq)
                assert entry is not None, f"kill {round_.kill}: seq {seq} lost"
                assert entry["text"].startswith(f"{round_.kill}-{k}-"), f"kill {round_.kill}"
        returned += len(round_.returned)
    assert returned >= KILLS  # the appenders did append


def test_a_torn_tail_is_set_aside_by_the_next_writer_and_seqs_stay_dense(
        rounds: list[Round]) -> None:
    for round_ in rounds:
        assert round_.set_aside == round_.torn, f"kill {round_.kill}"
        assert round_.torn_file_growth == (round_.torn + 1 if round_.torn else 0)
        report = round_.read_after.report
        assert report.ok, f"kill {round_.kill}: {report.problems}"
        seqs = [e["seq"] for e in round_.read_after.entries]
        assert seqs == list(range(len(seqs))) and seqs[-1] == round_.next_seq
    torn_rounds = sum(1 for r in rounds if r.torn)
    assert torn_rounds >= 5, f"{torn_rounds} kills cut an append short; the test proved little"


def test_index_rebuild_after_the_kills_gives_the_index_the_transcripts_stand_for(
        indexed_project: Project, rounds: list[Round]) -> None:
    """The sessions nobody appended to keep their rows byte for byte; the appended session's row
    says what its repaired transcript holds; the index kept up to date along the way (refreshes
    between kills and next writers, then `cos sessions`) equals the rebuilt one."""
    assert indexed_project.refreshed == KILLS // 10
    last = rounds[-1]
    appended = last.read_after.meta
    assert appended is not None
    session = appended["session"]
    listed = indexed_project.cos("sessions", "--scope", "all")
    assert isinstance(listed, list)
    assert sorted(row["id"] for row in listed) == sorted([*indexed_project.others, session])
    incremental = indexed_project.rows()
    rebuilt = indexed_project.cos("index", "rebuild")
    assert isinstance(rebuilt, dict)
    assert (rebuilt["sessions_added"], rebuilt["malformed_lines"], rebuilt["torn_files"]) == (
        4, 0, [])
    after = indexed_project.rows()
    assert after == incremental
    for sid in indexed_project.others:
        assert after[sid] == indexed_project.before[sid], sid
    row = json.loads(after[session])
    entries = transcript.read(transcript.transcript_path(indexed_project.tiers, session)).entries
    assert entries == last.read_after.entries
    assert row["messages"] == sum(1 for e in entries if e["type"] in ("user", "assistant"))
    assert row["messages"] > 0
    assert (row["created"], row["last_active"]) == (entries[0]["ts"], entries[-1]["ts"])
    assert row["status"] == "open" and row["parent"] is None
