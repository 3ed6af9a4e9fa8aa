"""The events log of a session (DESIGN.md §6, §7, torn tails as §4.1): dense seqs from 1 in the
envelope of the protocol, replay of exactly the events after any K, a torn last line never given
and set aside by the next writer, several processes appending at once, writers killed mid-write."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coding_os.errors import InvalidId, InvalidInput, NotFound, StateIOError
from coding_os.runtime import events
from coding_os.runtime.events import EventLog
from coding_os.state.identity import mint_session_id
from coding_os.state.tiers import Tiers

SESSION = "ses-claude-20261129-162000-ab12"


@pytest.fixture
def tiers(tmp_path: Path) -> Tiers:
    return Tiers(str(tmp_path / ".coding-os"))


def texts(path: str) -> list[str]:
    return [e["msg"]["text"] for e in events.read_since(path).events]


# ---------------------------------------------------------------------------------------------
# The file and its lines


def test_the_log_lives_under_the_agents_events_dir_and_a_bad_id_is_refused(
        tiers: Tiers) -> None:
    assert events.events_path(tiers, SESSION) == os.path.join(
        tiers.state_dir, "claude", "events", f"{SESSION}.jsonl")
    for bad in ("../x", "ses-../../etc", "", "ses-claude-1"):
        with pytest.raises(InvalidId):
            events.events_path(tiers, bad)
        with pytest.raises(InvalidId):
            EventLog.open(tiers, bad)


def test_events_are_numbered_from_one_in_the_envelope_of_the_protocol(tiers: Tiers) -> None:
    with EventLog.open(tiers, SESSION) as log:
        assert log.last_seq == 0
        first = log.append("session_configured",
                           {"native_id": "n-1", "agent": "claude", "cwd": "/w"})
        second = log.append("agent_message", {"text": "é\u2028\udc80"}, reply_to="ui-7")
        assert log.last_seq == 2
    path = events.events_path(tiers, SESSION)
    lines = Path(path).read_bytes().splitlines()
    assert lines[1].startswith(b'{"v":1,"seq":2,"ts":"')
    stored = [json.loads(line) for line in lines]
    assert stored == [first, second]
    assert second["id"] == "ui-7" and second["session"] == SESSION
    assert second["msg"] == {"type": "agent_message", "text": "é\u2028\udc80"}
    assert [set(e) for e in stored] == [{"v", "seq", "ts", "session", "id", "msg"}] * 2
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert events.last_seq(path) == 2


def test_an_event_of_an_unknown_type_or_without_its_fields_is_refused_and_nothing_written(
        tiers: Tiers) -> None:
    with EventLog.open(tiers, SESSION) as log:
        log.append("agent_message", {"text": "kept"})
        bad: list[tuple[str, dict[str, object]]] = [
            ("no_such_event", {}),
            ("agent_message", {}),
            ("agent_message", {"text": 3}),
            ("agent_message", {"text": "x", "type": "error"}),
            ("turn_aborted", {"task": 1, "reason": "bored"}),
            ("tool_result", {"call_id": "c", "ok": "yes", "output": None}),
            ("tool_result", {"call_id": "c", "ok": True, "output": float("nan")}),
            ("native", {"raw": object()}),
            ("native", {1: "a key that is not a string"}),  # type: ignore[dict-item]
            ("agent_message", 5),  # type: ignore[list-item]
            ("agent_message", ["text"]),  # type: ignore[list-item]
        ]
        for event_type, fields in bad:
            with pytest.raises(InvalidInput):
                log.append(event_type, fields)
        with pytest.raises(InvalidInput):
            log.append("agent_message", {"text": "x"}, reply_to=7)  # type: ignore[arg-type]
        assert log.append("agent_message", {"text": "next"})["seq"] == 2
    assert texts(events.events_path(tiers, SESSION)) == ["kept", "next"]


def test_a_symlink_or_a_fifo_in_place_of_the_log_is_refused(tiers: Tiers,
                                                            tmp_path: Path) -> None:
    path = Path(events.events_path(tiers, SESSION))
    path.parent.mkdir(parents=True)
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    path.symlink_to(target)
    with pytest.raises(StateIOError):
        EventLog.open(tiers, SESSION)
    with pytest.raises(StateIOError):
        events.read_since(str(path))
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(StateIOError):
        EventLog.open(tiers, SESSION)
    with pytest.raises(StateIOError):
        events.read_since(str(path))
    assert target.read_bytes() == b""


def test_replay_of_a_missing_log_or_from_a_bad_seq_is_an_error(tiers: Tiers) -> None:
    path = events.events_path(tiers, SESSION)
    with pytest.raises(NotFound):
        events.replay(path, 0)
    with EventLog.open(tiers, SESSION) as log:
        log.append("agent_message", {"text": "a"})
    for bad in (-1, True, "3", None):
        with pytest.raises(InvalidInput):
            events.replay(path, bad)  # type: ignore[arg-type]
    beyond = events.read_since(path, 5)
    assert beyond.events == [] and beyond.report.ok


def test_a_closed_log_refuses_appends_and_an_unknown_durability_is_refused(
        tiers: Tiers) -> None:
    with pytest.raises(InvalidInput):
        EventLog.open(tiers, SESSION, durability="sometimes")
    log = EventLog.open(tiers, SESSION, durability="event")
    log.append("agent_message", {"text": "a"})
    log.close()
    log.close()
    with pytest.raises(StateIOError):
        log.append("agent_message", {"text": "b"})


def test_two_logs_of_one_session_continue_after_each_others_lines(tiers: Tiers) -> None:
    one = EventLog.open(tiers, SESSION)
    two = EventLog.open(tiers, SESSION)
    seqs = [log.append("agent_message", {"text": str(k)})["seq"]
            for k, log in enumerate([one, two, two, one, two])]
    one.close()
    two.close()
    assert seqs == [1, 2, 3, 4, 5]
    assert texts(events.events_path(tiers, SESSION)) == ["0", "1", "2", "3", "4"]


def test_corrupt_lines_are_reported_and_skipped_and_their_seqs_never_reused(
        tiers: Tiers) -> None:
    path = events.events_path(tiers, SESSION)
    with EventLog.open(tiers, SESSION) as log:
        for k in range(3):
            log.append("agent_message", {"text": str(k)})
    with open(path, "ab") as f:
        f.write(b"not json\n\n")
    with EventLog.open(tiers, SESSION) as log:
        assert log.append("agent_message", {"text": "after"})["seq"] == 5
    read = events.read_since(path)
    assert [e["seq"] for e in read.events] == [1, 2, 3, 5]
    assert read.report.kinds() == [events.NOT_JSON, events.BLANK_LINE, events.SEQ_GAP]


# ---------------------------------------------------------------------------------------------
# Properties: replay from any K, a torn tail at any byte

# Payloads from nothing to longer than the reader's bisection window and read blocks.
PAYLOAD = st.one_of(st.text(max_size=30), st.integers(0, 200_000).map(lambda n: "x" * n))
EVENT = st.one_of(
    PAYLOAD.map(lambda text: ("agent_message", {"text": text})),
    st.tuples(PAYLOAD, st.booleans()).map(
        lambda pair: ("tool_result", {"call_id": "c", "ok": pair[1], "output": pair[0]})),
    st.integers(0, 9).map(lambda task: ("task_complete", {"task": task, "usage": {"in": 1}})),
)


def write_log(directory: str, appended: list[tuple[str, dict[str, object]]],
              durability: str = "none") -> tuple[str, list[dict[str, object]]]:
    tiers = Tiers(directory)
    with EventLog.open(tiers, SESSION, durability=durability) as log:
        stored = [log.append(event_type, fields) for event_type, fields in appended]
    return events.events_path(tiers, SESSION), stored


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(appended=st.lists(EVENT, max_size=40), data=st.data())
def test_replay_from_any_seq_gives_exactly_the_later_events_in_order(
        appended: list[tuple[str, dict[str, object]]], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path, stored = write_log(directory, appended)
        assert [e["seq"] for e in stored] == list(range(1, len(appended) + 1))
        after = data.draw(st.integers(0, len(appended) + 2), label="after_seq")
        read = events.read_since(path, after)
        assert read.events == stored[after:]
        assert read.report.ok, read.report.problems
        assert read.report.last_seq == (len(appended) if after < len(appended) else None)
        assert events.last_seq(path) == len(appended)


@settings(max_examples=60, deadline=None)
@given(appended=st.lists(EVENT, min_size=1, max_size=12), more=st.lists(EVENT, max_size=3),
       data=st.data())
def test_a_torn_last_line_is_never_replayed_and_the_next_writer_sets_it_aside_and_continues(
        appended: list[tuple[str, dict[str, object]]],
        more: list[tuple[str, dict[str, object]]], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path, stored = write_log(directory, appended)
        content = Path(path).read_bytes()
        last_start = content.rfind(b"\n", 0, len(content) - 1) + 1
        # Cut inside the last line, anywhere from its first byte to just before its newline.
        cut = data.draw(st.integers(last_start + 1, len(content) - 1), label="cut")
        os.truncate(path, cut)
        torn = content[last_start:cut]

        for after in {0, len(stored) - 1, len(stored)}:
            read = events.read_since(path, after)
            assert read.events == stored[after:-1]
            assert read.report.torn is not None
            assert (read.report.torn.offset, read.report.torn.length) == (last_start, len(torn))
            assert read.report.kinds() == [events.TORN_TAIL]

        tiers = Tiers(directory)
        with EventLog.open(tiers, SESSION, durability="none") as log:
            assert log.torn_bytes == len(torn)
            assert log.last_seq == len(stored) - 1
            again = [log.append(event_type, fields) for event_type, fields in more]
        assert Path(path + ".torn").read_bytes() == torn + b"\n"
        assert Path(path).read_bytes() == content[:last_start] + b"".join(
            json.dumps(e, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"
            for e in again)
        read = events.read_since(path)
        assert read.events == stored[:-1] + again
        assert [e["seq"] for e in read.events] == list(range(1, len(stored) + len(more)))
        assert read.report.ok


def test_replay_of_a_long_log_from_each_seq_begins_right_after_it(tiers: Tiers) -> None:
    rng = random.Random(7)
    with EventLog.open(tiers, SESSION, durability="none") as log:
        for k in range(3000):
            log.append("agent_message", {"text": "y" * rng.choice((0, 10, 100, 3000, 40_000))})
    path = events.events_path(tiers, SESSION)
    for after in range(3001):
        report = events.ReplayReport(path, after)
        first = next(events.replay(path, after, report), None)
        assert (first and first["seq"]) == (after + 1 if after < 3000 else None)
        assert report.ok
    read = events.read_since(path, 2990)
    assert [e["seq"] for e in read.events] == list(range(2991, 3001))
    assert read.report.lines < 30, "the replay read far more than the events it gave"


# ---------------------------------------------------------------------------------------------
# Several processes, and writers killed mid-write

WORKERS = 4
APPENDS = 80

# Waits for "go" on stdin so that every worker starts appending at the same moment; prints the
# seq each append returned.
WORKER = r'''
import sys
from coding_os.runtime.events import EventLog
from coding_os.state.tiers import Tiers

state_dir, session, wid, appends = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
log = EventLog.open(Tiers(state_dir), session, durability=("event", "turn", "none")[int(wid) % 3])
print("ready", flush=True)
assert sys.stdin.readline() == "go\n"
for k in range(appends):
    text = f"{wid}-{k}-" + "x" * (k * 997 % 70_000)  # some lines longer than a pipe buffer
    event = log.append("agent_message", {"text": text})
    print(event["seq"], flush=True)
log.close()
'''


def test_processes_appending_to_one_session_at_once_store_every_event_once_with_dense_seqs(
        tiers: Tiers) -> None:
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, tiers.state_dir, SESSION,
                                 str(wid), str(APPENDS)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
               for wid in range(WORKERS)]
    for worker in workers:
        assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.close()
    returned: dict[str, list[int]] = {}
    for wid, worker in enumerate(workers):
        assert worker.stdout is not None
        returned[str(wid)] = [int(line) for line in worker.stdout.read().split()]
        worker.stdout.close()
        assert worker.wait(timeout=60) == 0
    path = events.events_path(tiers, SESSION)
    read = events.read_since(path)
    assert read.report.ok, read.report.problems
    assert [e["seq"] for e in read.events] == list(range(1, WORKERS * APPENDS + 1))
    order: dict[str, list[int]] = defaultdict(list)
    seqs: dict[str, list[int]] = defaultdict(list)
    writers = []
    for event in read.events:
        wid, k, _ = event["msg"]["text"].split("-", 2)
        order[wid].append(int(k))
        seqs[wid].append(event["seq"])
        writers.append(wid)
    assert order == {str(wid): list(range(APPENDS)) for wid in range(WORKERS)}
    assert seqs == returned  # each append returned the seq its line holds
    switches = sum(1 for a, b in zip(writers, writers[1:]) if a != b)
    assert switches > 2 * WORKERS, "the workers hardly overlapped; the test proved little"
    assert not Path(path + ".torn").exists()


KILLS = 20
LARGE = 4 * 1024 * 1024

# Appends until killed. Prints "write <length of the file>" just before the os.write of a long
# line (so that the killer can aim inside that write) and "<seq>" after each append that returned.
KILLED = r'''
import os
import sys
from coding_os.runtime.events import EventLog
from coding_os.state.tiers import Tiers

state_dir, session, run, large = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
real_write = os.write

def announced_write(fd, data):
    if len(data) > large:
        print("write", os.fstat(fd).st_size, flush=True)  # print does not use os.write
    return real_write(fd, data)

os.write = announced_write
log = EventLog.open(Tiers(state_dir), session, durability="none")
print("ready", log.torn_bytes, log.last_seq, flush=True)
k = 0
while True:
    text = f"{run}-{k}-" + ("x" * large if k % 3 == 2 else "")
    print(log.append("agent_message", {"text": text})["seq"], flush=True)
    k += 1
'''


@pytest.mark.slow
def test_writers_killed_at_random_moments_leave_a_dense_log_and_set_aside_what_they_tore(
        tiers: Tiers) -> None:
    rng = random.Random(15)
    path = events.events_path(tiers, SESSION)
    returned: set[int] = set()
    stored = torn_seen = torn_aside = set_asides = 0
    for run in range(KILLS):
        proc = subprocess.Popen([sys.executable, "-c", KILLED, tiers.state_dir, SESSION,
                                 str(run), str(LARGE)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        _, torn_bytes, continued = proc.stdout.readline().split()
        # The writer that follows a kill set aside exactly what the reader saw torn.
        assert int(torn_bytes) == torn_seen
        torn_aside += int(torn_bytes)
        set_asides += bool(torn_seen)
        assert int(continued) == stored
        # Kill it after a random number of its lines, or (every other run) once its n-th write
        # of a long line has begun to grow the file: inside that write.
        lines = rng.randint(1, 12) if run % 2 == 0 else rng.randint(1, 2)
        while lines > 0:
            line = proc.stdout.readline()
            assert line, "the writer ended before it was killed"
            if line.strip().isdigit():
                returned.add(int(line))
            if run % 2 == 0 or line.startswith("write"):
                lines -= 1
        if run % 2:
            before = int(line.split()[1])
            deadline = time.monotonic() + 10
            while os.stat(path).st_size <= before and time.monotonic() < deadline:
                pass
        proc.send_signal(signal.SIGKILL)
        for line in proc.stdout.read().split():
            if line.isdigit():
                returned.add(int(line))  # an append that returned before the kill
        proc.stdout.close()
        assert proc.wait(timeout=30) == -signal.SIGKILL

        read = events.read_since(path)
        seqs = [e["seq"] for e in read.events]
        assert seqs == list(range(1, len(seqs) + 1))
        assert returned <= set(seqs), "an append that returned is missing"
        assert read.report.kinds() in ([], [events.TORN_TAIL])
        torn_seen = read.report.torn.length if read.report.torn else 0
        stored = len(seqs)
    aside = Path(path + ".torn")
    assert (aside.stat().st_size if aside.exists() else 0) == torn_aside + set_asides


def test_a_fresh_session_id_is_a_fresh_log(tiers: Tiers) -> None:
    session = mint_session_id("codex")
    with EventLog.open(tiers, session) as log:
        event = log.append("error", {"message": "boom", "fatal": False})
    assert event["seq"] == 1 and event["session"] == session
    assert events.events_path(tiers, session).endswith(f"codex/events/{session}.jsonl")
