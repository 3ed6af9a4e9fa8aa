"""The numbered append-only log (coding_os/log.py) under transcripts and events logs: the seq to
continue from read off the tail, a torn tail set aside, a failed write leaving the file as it was,
a new log made whole or not at all, lines read backwards, and the bisection to the first line
after a seq. The formats built on it are tested beside them (tests/sessions/test_transcript*.py,
tests/runtime/test_events.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coding_os import log
from coding_os.errors import NotFound, StateIOError


def record(value: object) -> str | None:
    """A format that takes any object with an integer seq >= 1 for a record."""
    if isinstance(value, dict) and log.is_seq(value.get("seq")) and value["seq"] >= 1:
        return None
    return "not a record"


def line(seq: int, text: str = "x") -> bytes:
    return b'{"v":1,"seq":%d,"text":"%s"}\n' % (seq, text.encode())


def tail_of(path: Path, first: int | None = 1) -> tuple[int | None, int]:
    fd = os.open(path, os.O_RDONLY)
    try:
        return log.continue_from(fd, os.fstat(fd).st_size, record, first)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# The seq to continue from


def test_the_next_seq_follows_the_last_line_and_a_torn_tail_is_not_a_line(
        tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(line(1) + line(2) + b'{"v":1,"seq":3,"te')
    assert tail_of(path) == (3, len(line(1) + line(2)))


def test_corrupt_lines_after_the_last_seq_are_counted_and_blank_ones_are_not(
        tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    body = line(1) + line(2) + b"not json\n\n   \n" + b"\xff\xfe\n"
    path.write_bytes(body)
    # Two damaged records (the text and the bytes that are not UTF-8) had seqs 3 and 4.
    assert tail_of(path) == (5, len(body))


def test_a_line_without_the_prefix_gives_its_seq_when_the_format_takes_it(
        tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(line(1) + b'{"seq": 7, "v": 1}\n' + b'{"seq": "8"}\n')
    assert tail_of(path) == (9, path.stat().st_size)  # "8" is no seq: one damaged record


def test_with_no_record_the_next_seq_is_the_first_one_or_none(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"")
    assert tail_of(path) == (1, 0)
    path.write_bytes(b"garbage\n\n")
    assert tail_of(path) == (2, 9)
    assert tail_of(path, first=None) == (None, 9)


def test_the_seq_is_read_from_the_prefix_of_a_long_last_line_without_parsing_it(
        tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    # Not JSON past its prefix: only the prefix is read.
    path.write_bytes(line(1) + b'{"v":1,"seq":2,' + b"x" * (3 << 20) + b"\n")
    assert tail_of(path) == (3, path.stat().st_size)


@pytest.mark.parametrize("head,seq", [
    (b'{"v":1,"seq":0,"ts"', 0), (b'{"v":1,"seq":123,', 123), (b'{"v":1,"seq":12', None),
    (b'{"v":1,"seq":,', None), (b'{"v":2,"seq":1,', None), (b'{"seq":1,', None),
])
def test_the_prefix_gives_a_seq_only_when_it_is_whole(head: bytes, seq: int | None) -> None:
    assert log.prefix_seq(head) == seq


# ---------------------------------------------------------------------------------------------
# Writing


def test_a_torn_tail_is_moved_aside_whole_and_cut_off(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(line(1) + b'{"v":1,"seq":2,"te')
    (tmp_path / "a.jsonl.torn").write_bytes(b"earlier\n")
    fd = log.open_append(str(path), create=False, what="log")
    try:
        size = os.fstat(fd).st_size
        seq, whole = log.continue_from(fd, size, record, 1)
        assert (seq, whole) == (2, len(line(1)))
        assert log.cut_torn(str(path), fd, whole, size) == len(b'{"v":1,"seq":2,"te')
        log.write_line(str(path), fd, line(2, "again"), whole, sync=True)
    finally:
        os.close(fd)
    assert path.read_bytes() == line(1) + line(2, "again")
    assert (tmp_path / "a.jsonl.torn").read_bytes() == b'earlier\n{"v":1,"seq":2,"te\n'


# Run in a process of its own: files it writes may not grow past the first line and 10 bytes.
CUT_SHORT = """
import os, resource, signal, sys
from coding_os import log
from coding_os.errors import StateIOError
path, first, second = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (first + 10, resource.RLIM_INFINITY))
fd = log.open_append(path, create=False, what="log")
try:
    log.write_line(path, fd, second, first, sync=False)
except StateIOError as exc:
    print(exc)
"""


def test_a_write_that_fails_leaves_the_log_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(line(1))
    done = subprocess.run([sys.executable, "-c", CUT_SHORT, str(path), str(len(line(1))),
                           line(2, "y" * 100).decode()], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("cannot write") or str(path) in done.stdout, done.stdout
    assert path.read_bytes() == line(1)


def test_a_log_is_opened_only_as_a_private_regular_file(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="no transcript at"):
        log.open_append(str(tmp_path / "missing.jsonl"), create=False, what="transcript")
    made = tmp_path / "made.jsonl"
    os.close(log.open_append(str(made), create=True, what="log"))
    assert made.stat().st_mode & 0o777 == 0o600
    wide = tmp_path / "wide.jsonl"
    wide.write_bytes(b"")
    wide.chmod(0o644)
    os.close(log.open_append(str(wide), create=False, what="log"))
    assert wide.stat().st_mode & 0o777 == 0o600
    (tmp_path / "link.jsonl").symlink_to(made)
    os.mkfifo(tmp_path / "fifo.jsonl")
    for refused in ("link.jsonl", "fifo.jsonl"):
        with pytest.raises(StateIOError):
            log.open_append(str(tmp_path / refused), create=False, what="log")


def test_a_new_log_is_published_whole_and_never_over_another(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "a.jsonl"
    log.publish(str(path), iter([line(0), line(1)]), sync=True)
    assert path.read_bytes() == line(0) + line(1)
    assert path.stat().st_mode & 0o777 == 0o600

    def failing() -> object:
        yield line(0)
        raise StateIOError("the lines could not be made")

    with pytest.raises(FileExistsError):
        log.publish(str(path), iter([line(5)]), sync=False)
    with pytest.raises(StateIOError):
        log.publish(str(tmp_path / "sub" / "b.jsonl"), failing(), sync=False)  # type: ignore[arg-type]
    assert path.read_bytes() == line(0) + line(1)
    assert sorted(os.listdir(tmp_path / "sub")) == ["a.jsonl"]  # no temp file left


# ---------------------------------------------------------------------------------------------
# Reading


def test_seqs_out_of_order_are_skipped_and_missing_ones_reported() -> None:
    problems: list[log.Problem] = []
    assert log.check_seq(3, 2, 0, 1, 10, problems, "entry")
    assert problems == []
    assert log.check_seq(5, 3, 10, 2, 10, problems, "entry")
    assert not log.check_seq(5, 5, 20, 3, 10, problems, "event")
    assert [(p.kind, p.detail) for p in problems] == [
        (log.SEQ_GAP, "seq 4 missing"), (log.SEQ_ORDER, "seq 5 after seq 5; event skipped")]
    assert log.torn_tail(7, None, 3).as_dict() == {
        "kind": log.TORN_TAIL, "offset": 7, "line": None, "length": 3,
        "detail": "the last line is unterminated (3 bytes; a crash during an append) — "
                  "the next writer moves it to .torn"}


LINES = st.lists(st.one_of(st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")),
                           st.integers(0, 150_000).map(lambda n: b"x" * n)), max_size=12)


@settings(max_examples=80, deadline=None)
@given(lines=LINES, torn=st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")))
def test_lines_read_backwards_are_the_lines_of_the_file_last_first(
        lines: list[bytes], torn: bytes) -> None:
    content = b"".join(each + b"\n" for each in lines) + torn
    with tempfile.TemporaryFile() as f:
        f.write(content)
        f.flush()
        found = list(log.reverse_lines(f.fileno(), len(content), "log"))
    expected = []
    offset = 0
    for each in lines:
        expected.append((offset, each, True))
        offset += len(each) + 1
    if torn:
        expected.append((offset, torn, False))
    assert found == expected[::-1]


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 40_000), min_size=1, max_size=60), data=st.data())
def test_the_bisection_stops_at_or_before_the_first_line_after_the_seq(
        sizes: list[int], data: st.DataObject) -> None:
    content = b"".join(line(seq, "y" * size) for seq, size in enumerate(sizes, start=1))
    after = data.draw(st.integers(0, len(sizes) + 1), label="after")
    starts = [0]
    for seq, size in enumerate(sizes, start=1):
        starts.append(starts[-1] + len(line(seq, "y" * size)))
    with tempfile.TemporaryFile() as f:
        f.write(content)
        f.flush()
        found = log.first_after(f.fileno(), len(content), after)
    assert found in starts
    target = starts[min(after, len(sizes))]  # where the line of seq after + 1 begins
    assert found <= target
    # It stops close: within the bisection's window, or at the line just before that window.
    assert target - found <= (1 << 14) + max(len(line(1, "y" * s)) for s in sizes)
