"""The numbered append-only JSON-lines log: the one implementation under transcripts (DESIGN.md
§4.1, sessions/transcript.py) and events logs (§6, runtime/events.py).

A log is a file of lines, one JSON object a line, each beginning `{"v":1,"seq":N,`: `seq` is
dense and strictly increasing. What a line holds beyond that head, and which lines are valid, is
the format's: its module gives `problem(value)` (what keeps a parsed line from being one of its
records, or None) and the seq its first record takes. This module knows the file.

Writer. `open_append` opens a log for appending (never through a symlink, never hanging on a
FIFO, only a regular file, made private). Under an exclusive `flock` on it, `continue_from` reads
the seq to continue from the tail, never the whole file: a line's seq from its prefix, a line
without one parsed; whole lines after the last seq that hold no record (corrupt ones, which a
reader reports) are counted, so a damaged record's seq is never given to another. A torn last
line (a writer killed mid-append) is moved to `<path>.torn` and cut off (`cut_torn`): nothing is
silently dropped. `write_line` writes a line with one write, fsyncs when asked and, when either
fails, leaves the file as it was. `publish` writes a new log whole or not at all.

Reader. Readers note the file's length under a shared lock (`durable.open_snapshot`), so they
see whole appends only. They report what they skip as `Problem`s: a torn last line
(`torn_tail`), and seqs out of order or missing (`check_seq`). `reverse_lines` reads lines from
the end, `first_after` bisects over byte offsets to the first line after a seq, which dense,
increasing seqs allow.

Durability modes: "event" fsyncs after every record, "turn" after those that end a turn or task
(the format says which), "none" never. In every mode the line is in the file (the page cache)
when an append returns, so it outlives the process that wrote it; the mode decides what outlives
the machine.
"""

from __future__ import annotations

import errno
import os

from coding_os import durable, jsonwire
from coding_os.errors import InvalidInput, NotFound, StateIOError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

__all__ = [
    "PREFIX",
    "DURABILITY_MODES",
    "DEFAULT_DURABILITY",
    "check_durability",
    "TORN_TAIL",
    "BLANK_LINE",
    "NOT_JSON",
    "SEQ_GAP",
    "SEQ_ORDER",
    "Problem",
    "torn_tail",
    "check_seq",
    "is_seq",
    "prefix_seq",
    "torn_start",
    "continue_from",
    "open_append",
    "cut_torn",
    "write_line",
    "publish",
    "reverse_lines",
    "first_after",
]

# Every line a writer writes starts so: its seq is read from the prefix, never parsed.
PREFIX = b'{"v":1,"seq":'

DURABILITY_MODES = ("event", "turn", "none")
DEFAULT_DURABILITY = "turn"

# Problem kinds every format's reader reports (a format adds its own).
TORN_TAIL = "torn_tail"
BLANK_LINE = "blank_line"
NOT_JSON = "not_json"
SEQ_GAP = "seq_gap"
SEQ_ORDER = "seq_order"

_HEAD = 40  # bytes of a line enough for its prefix and seq
_WINDOW = 1 << 14  # a bisection stops when its range is this small and reads on from there
_CHUNK = 1 << 16
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def check_durability(durability: str) -> None:
    """Raises:
        InvalidInput: `durability` is none of DURABILITY_MODES.
    """
    if durability not in DURABILITY_MODES:
        raise InvalidInput(f"unknown durability {str(durability)[:40]!r}: "
                           f"expected one of {', '.join(DURABILITY_MODES)}")


def is_seq(value: object) -> bool:
    """Whether `value` is an integer >= 0 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# ---------------------------------------------------------------------------------------------
# What a reader reports


class Problem:
    """One thing a reader skipped or noticed: its kind, where (byte offset, line), and detail."""

    __slots__ = ("kind", "offset", "line", "length", "detail")

    def __init__(self, kind: str, offset: int, line: int | None, length: int,
                 detail: str) -> None:
        self.kind = kind
        self.offset = offset
        self.line = line  # 1-based; None when the file was not read from its start
        self.length = length  # bytes of the line, its newline not counted
        self.detail = detail

    def as_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "offset": self.offset, "line": self.line,
                "length": self.length, "detail": self.detail}

    def __repr__(self) -> str:
        return f"Problem({self.kind}, offset={self.offset}, line={self.line}: {self.detail})"


def torn_tail(offset: int, line: int | None, length: int) -> Problem:
    """The problem of an unterminated last line of `length` bytes at `offset`."""
    return Problem(TORN_TAIL, offset, line, length,
                   f"the last line is unterminated ({length} bytes; a crash during an append) "
                   "— the next writer moves it to .torn")


def check_seq(seq: int, previous: int, offset: int, line: int | None, length: int,
              problems: list[Problem], noun: str) -> bool:
    """Whether a record of `seq` may follow one of `previous`: False (and a SEQ_ORDER problem)
    when it is not after it, so it is skipped; True, with a SEQ_GAP problem when seqs are
    missing between them. `noun` names a record in the problem (entry, event)."""
    if seq <= previous:
        problems.append(Problem(SEQ_ORDER, offset, line, length,
                                f"seq {seq} after seq {previous}; {noun} skipped"))
        return False
    if seq > previous + 1:
        missing = (f"seq {previous + 1}" if seq == previous + 2
                   else f"seqs {previous + 1}..{seq - 1}")
        problems.append(Problem(SEQ_GAP, offset, line, length, f"{missing} missing"))
    return True


# ---------------------------------------------------------------------------------------------
# Seqs from the file without parsing it


def prefix_seq(head: bytes) -> int | None:
    """The seq in a line's prefix `{"v":1,"seq":N,`, or None when the line has no such prefix."""
    if not head.startswith(PREFIX):
        return None
    end = len(PREFIX)
    while end < len(head) and 0x30 <= head[end] <= 0x39:
        end += 1
    if len(PREFIX) < end < len(head) and head[end] == 0x2C:  # ","
        return int(head[len(PREFIX):end])
    return None


def torn_start(fd: int, size: int) -> int:
    """Where the torn last line of the first `size` bytes of `fd` begins; `size` when the
    bytes end in a newline (or there are none)."""
    if size and os.pread(fd, 1, size - 1) != b"\n":
        return durable.last_line_start(fd, size)
    return size


def continue_from(fd: int, size: int, problem: Callable[[object], str | None],
                  first: int | None) -> tuple[int | None, int]:
    """(the next seq, the length of the whole lines) of the first `size` bytes of `fd`, read
    from the tail.

    The next seq follows the last whole line that has one: from its prefix, else from the line
    parsed, when `problem` finds nothing wrong with it. Whole lines after it that hold no record
    (corrupt ones; blank ones are not counted) are counted too, so a damaged record's seq is
    never given to another. With no line that has a seq, the next is `first` plus those lines
    (None when `first` is None: the format needs a first record to continue from). Only line
    starts are searched for and only prefixes read: a 20 MB last line costs a scan for its
    newline, not a copy or a parse.
    """
    whole = torn_start(fd, size)
    end = whole
    skipped = 0
    while end > 0:
        # The line is [start, end - 1), its newline at end - 1.
        start = durable.last_line_start(fd, end - 1)
        seq = prefix_seq(os.pread(fd, min(end - 1 - start, _HEAD), start))
        if seq is not None:
            return seq + 1 + skipped, whole
        line = os.pread(fd, end - 1 - start, start)
        seq = _parsed_seq(line, problem)
        if seq is not None:
            return seq + 1 + skipped, whole
        if line.strip():
            skipped += 1
        end = start
    return (None if first is None else first + skipped), whole


def _parsed_seq(line: bytes, problem: Callable[[object], str | None]) -> int | None:
    """The seq of a whole line parsed, when `problem` finds it a record; else None."""
    try:
        value = jsonwire.loads(line)
    except ValueError:  # UnicodeDecodeError is one
        return None
    if problem(value) is not None:
        return None
    assert isinstance(value, dict)
    return int(value["seq"])


# ---------------------------------------------------------------------------------------------
# Writing


def open_append(path: str, *, create: bool, what: str) -> int:
    """A descriptor of the log at `path` (`what`, for messages) open for appending, created
    (0600) when `create` and missing: never through a symlink, never blocking on a FIFO, a
    regular file, made private. The caller closes it.

    Raises:
        NotFound: no log at `path` (without `create`).
        StateIOError: it cannot be opened or made; a symlink or not a regular file.
    """
    flags = os.O_RDWR | os.O_APPEND
    try:
        return durable.open_regular(path, flags | os.O_CREAT if create else flags)
    except FileNotFoundError as exc:
        if create:  # its directory is gone
            raise durable.io_error(path, exc) from None
        raise NotFound(f"no {what} at {path}") from None


def cut_torn(path: str, fd: int, whole: int, size: int) -> int:
    """Under the exclusive lock: move the torn last line, bytes [whole, size) of the log at
    `path`, to `<path>.torn` (durably, before it is cut), then cut it off; its length.

    Raises:
        StateIOError: it could not be set aside (the log keeps it) or cut off.
    """
    torn = os.pread(fd, size - whole, whole)
    try:
        durable.set_aside_torn(path, torn)
    except OSError as exc:
        raise durable.io_error(path + ".torn", exc) from None
    try:
        os.ftruncate(fd, whole)
    except OSError as exc:
        raise durable.io_error(path, exc) from None
    return len(torn)


def write_line(path: str, fd: int, record: bytes, size: int, sync: bool) -> None:
    """Under the exclusive lock: append `record` (whole lines) to the log at `path`, whose
    length is `size`, with one write, and fsync it when `sync`.

    Raises:
        StateIOError: the write or the fsync failed: the log is cut back to `size` (never half
            a record, or one not known durable, left behind).
    """
    try:
        durable.write_all(fd, record)
        if sync:
            os.fsync(fd)
    except OSError as exc:
        try:
            os.ftruncate(fd, size)
        except OSError:
            pass
        raise durable.io_error(path, exc) from None


def publish(path: str, lines: Iterable[bytes], sync: bool) -> None:
    """Write a new log at `path` whole or not at all: a temp file beside it, linked into place.

    Raises:
        FileExistsError: `path` exists (nothing is changed).
        StateIOError: the file cannot be written.
    """
    directory, name = os.path.split(path)
    durable.ensure_dir(directory)
    tmp = os.path.join(directory, f".{name}.tmp-{os.getpid()}-{os.urandom(3).hex()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC,
                     durable.FILE_MODE)
    except OSError as exc:
        raise durable.io_error(path, exc) from None
    try:
        try:
            for line in lines:
                durable.write_all(fd, line)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # fails if `path` exists: creation is exclusive
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            # A file system without hard links: check, then rename (exclusive in practice,
            # since the logs' names are random ids, reserved).
            if os.path.lexists(path):
                raise FileExistsError(errno.EEXIST, "exists", path) from None
            os.rename(tmp, path)
        if sync:
            _fsync_dir(directory)
    except FileExistsError:
        raise
    except OSError as exc:
        raise durable.io_error(path, exc) from None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass  # already renamed into place, or gone


def _fsync_dir(directory: str) -> None:
    """Make a new directory entry durable. The file is already in place and synced: a file
    system that cannot sync a directory (EINVAL) costs that guarantee, not the log."""
    try:
        fd = os.open(directory, os.O_RDONLY | _O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise


# ---------------------------------------------------------------------------------------------
# Reading


def reverse_lines(fd: int, size: int, what: str) -> Iterator[tuple[int, bytes, bool]]:
    """The lines in the first `size` bytes of `fd`, last first: (offset, bytes, whole).

    Reads backwards in blocks. Only the first line yielded can be unterminated (whole False:
    a torn tail); the newline is never part of the bytes.

    Raises:
        StateIOError: the file (a `what`) shrank while it was read.
    """
    if size <= 0:
        return
    whole = os.pread(fd, 1, size - 1) == b"\n"
    pos = size - 1 if whole else size
    pieces: list[bytes] = []  # the current line's blocks, last block first
    while pos > 0:
        start = max(0, pos - _CHUNK)
        block = os.pread(fd, pos - start, start)
        if len(block) != pos - start:
            raise StateIOError(f"a {what} shrank while it was read; read it again")
        cut = len(block)
        newline = block.rfind(b"\n", 0, cut)
        while newline >= 0:
            pieces.append(block[newline + 1:cut])
            yield start + newline + 1, b"".join(reversed(pieces)), whole
            pieces, whole, cut = [], True, newline
            newline = block.rfind(b"\n", 0, cut)
        pieces.append(block[:cut])
        pos = start
    yield 0, b"".join(reversed(pieces)), whole


def _seq_at_or_after(fd: int, offset: int, limit: int) -> tuple[int, int] | None:
    """(start, seq) of the first line starting in [offset, limit) whose prefix holds a seq."""
    if offset > 0 and os.pread(fd, 1, offset - 1) != b"\n":
        offset = _next_line(fd, offset, limit)
    while offset < limit:
        seq = prefix_seq(os.pread(fd, min(limit - offset, _HEAD), offset))
        if seq is not None:
            return offset, seq
        offset = _next_line(fd, offset, limit)
    return None


def _next_line(fd: int, offset: int, limit: int) -> int:
    """The start of the line after the one holding `offset` (`limit` when it is not before).
    Reads small blocks first: most lines are short, and a probe should cost about one."""
    block_size = 512
    while offset < limit:
        block = os.pread(fd, min(limit - offset, block_size), offset)
        if not block:
            break
        newline = block.find(b"\n")
        if newline >= 0:
            return offset + newline + 1
        offset += len(block)
        block_size = min(block_size * 2, _CHUNK)
    return limit


def first_after(fd: int, size: int, after_seq: int) -> int:
    """A line start at or before the first line of the first `size` bytes of `fd` with seq >
    `after_seq`, close to it: a bisection over byte offsets, which dense, increasing seqs
    allow; the read goes on from there, line by line."""
    low, high = 0, size  # every line before `low` holds a seq <= after_seq
    while high - low > _WINDOW:
        middle = (low + high) // 2
        found = _seq_at_or_after(fd, middle, high)
        if found is None or found[1] > after_seq:
            high = middle
        else:
            low = found[0]
    return low
