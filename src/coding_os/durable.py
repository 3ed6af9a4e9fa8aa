"""Durable file primitives every layer uses: atomic replace, locked append, private directories.

Every state write goes through here, so the guarantees are stated once: a replaced file holds the
old or the new bytes, never a mix (temp file in the same directory, fsync, rename); an appended
record is written whole under an exclusive `flock`, so records of any length from any number of
processes never interleave; directories are created 0700 and files 0600; a symlink where state is
expected is refused, never followed.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat

from coding_os.errors import InvalidInput, NotFound, StateIOError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import _thread

__all__ = [
    "open_regular",
    "exclusive_lock",
    "atomic_write", "locked_append", "ensure_dir", "read_small", "read_small_stat", "io_error",
    "read_regular", "sync_files", "overwrite", "signatures", "unlink_quietly", "write_all",
    "last_line_start", "set_aside_torn", "private", "private_dir", "open_private",
    "open_log",
    "open_snapshot",
]

DIR_MODE = 0o700
FILE_MODE = 0o600
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted as a log must not hang us


def io_error(path: str, exc: OSError) -> StateIOError:
    """A one-line StateIOError for an OSError met at `path`."""
    reason = {
        errno.ENOSPC: "no space left on device",
        errno.EDQUOT: "disk quota exceeded",
        errno.EROFS: "read-only file system",
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.ENOTDIR: "a path component is not a directory",
        errno.ELOOP: "refusing to follow a symlink",
    }.get(exc.errno or 0, exc.strerror or str(exc))
    return StateIOError(f"cannot write state at {path}: {reason}")


def ensure_dir(path: str) -> str:
    """Create `path` and its missing parents with mode 0700.

    Raises:
        StateIOError: a component cannot be created or is not a directory.
    """
    if os.path.isdir(path):
        return path
    parent = os.path.dirname(path)
    if parent != path:
        ensure_dir(parent)
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        if not os.path.isdir(path):
            raise StateIOError(f"cannot write state at {path}: not a directory") from None
    except OSError as exc:
        raise io_error(path, exc) from None
    return path


def private_dir(path: str) -> str:
    """`ensure_dir`, and the directory `path` itself made 0700 again when it is wider (made by
    hand, by an older cos, or by git under the user's umask); its parents are left as they are.

    Raises:
        StateIOError: it cannot be made or made private, or it is a symlink or another user's.
    """
    ensure_dir(path)
    try:
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            raise StateIOError(f"cannot write state at {path}: a symlink, not a directory or "
                               "not this user's")
        if info.st_mode & 0o077:
            os.chmod(path, DIR_MODE)
    except OSError as exc:
        raise io_error(path, exc) from None
    return path


def open_private(path: str, flags: int) -> int:
    """`os.open` of the file `path` with `flags`, made 0600 if missing, never through a final
    symlink, and made 0600 again when it existed with wider modes: a lock or a log cos keeps
    open or hands to a child. The caller closes the descriptor.

    Raises:
        OSError: it cannot be opened or made private.
    """
    fd = os.open(path, flags | os.O_CREAT | _O_NOFOLLOW | _O_CLOEXEC, FILE_MODE)
    try:
        private(fd, os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: str, flags: int) -> int:
    """`os.open` of the regular file `path` with `flags` (made 0600 when they create it): never
    through a final symlink, never blocking on a FIFO planted there, refused when it is not a
    regular file, and made 0600 again when it existed with wider modes: a log or a lock file cos
    writes. The caller closes the descriptor.

    Raises:
        FileNotFoundError: it is missing (without O_CREAT), or its directory is.
        StateIOError: it cannot be opened or made private; a symlink or not a regular file.
    """
    try:
        fd = os.open(path, flags | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK, FILE_MODE)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise io_error(path, exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StateIOError(f"cannot write state at {path}: not a regular file")
        private(fd, info.st_mode)
    except OSError as exc:
        os.close(fd)
        raise io_error(path, exc) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def atomic_write(path: str, data: bytes, *, sync: bool = True) -> None:
    """Replace `path` with `data` atomically (temp file, fsync, rename), mode 0600.

    Raises:
        StateIOError: the write failed (disk full, read-only, permissions); `path` is untouched.
    """
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.tmp-{os.getpid()}-{os.urandom(3).hex()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC,
                     FILE_MODE)
    except OSError as exc:
        raise io_error(path, exc) from None
    try:
        try:
            write_all(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if os.path.islink(path):
            raise StateIOError(f"refusing to replace {path}: it is a symlink")
        os.rename(tmp, path)
    except OSError as exc:
        unlink_quietly(tmp)
        raise io_error(path, exc) from None
    except BaseException:
        unlink_quietly(tmp)
        raise


def signatures(paths: list[str]) -> list[tuple[int, int, int, int] | None]:
    """The stat signature (inode, size, mtime, ctime) of each of `paths`, None where there is
    nothing to stat: two equal lists mean the files were not changed, replaced or made."""
    found: list[tuple[int, int, int, int] | None] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            found.append(None)
            continue
        found.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return found


def overwrite(path: str, data: bytes) -> None:
    """Write `data` over `path` in place (created mode 0600 when missing; no temporary file, no
    flush to disk). Unlike `atomic_write`, a reader may find it torn or half written: only for a
    file whose reader takes a torn one as missing (a cache), or one written again until it is
    whole (what a journal protects).

    Raises:
        StateIOError: the write failed.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_NOFOLLOW | _O_CLOEXEC,
                     FILE_MODE)
    except OSError as exc:
        raise io_error(path, exc) from None
    try:
        private(fd, os.fstat(fd).st_mode)
        write_all(fd, data)
    except OSError as exc:
        raise io_error(path, exc) from None
    finally:
        os.close(fd)


def private(fd: int, mode: int) -> None:
    """Make the open file `fd` (of `mode`) 0600 when others could read or write it: a file cos
    writes is private also when it existed before with wider modes."""
    if mode & 0o077:
        os.fchmod(fd, FILE_MODE)


def sync_files(paths: list[str]) -> None:
    """Flush each of `paths` (files or directories written without a flush) to disk, by up to
    four threads at once: a journaling filesystem commits flushes that wait together in one go,
    so a batch costs about one flush rather than one each.

    Raises:
        StateIOError: one could not be opened or flushed.
    """
    todo = list(paths)
    errors: list[StateIOError] = []

    def run() -> None:
        while todo and not errors:
            try:
                path = todo.pop()
            except IndexError:
                return
            try:
                fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                errors.append(io_error(path, exc))

    # Threads of the low-level module: `threading` costs a checkpoint or a rewind more to import
    # than its flushes take (benchmarks/checkpoints.py). Each releases its lock when done.
    done: list[_thread.LockType] = []
    if len(todo) > 1:
        import _thread

        def worker(finished: _thread.LockType) -> None:
            try:
                run()
            finally:
                finished.release()

        for _ in range(min(len(todo), 4) - 1):
            finished = _thread.allocate_lock()
            finished.acquire()
            _thread.start_new_thread(worker, (finished,))
            done.append(finished)
    run()
    for finished in done:
        finished.acquire()
    if errors:
        raise errors[0]


class exclusive_lock:  # noqa: N801 - used as a function: `with exclusive_lock(path):`
    """Hold an exclusive flock on the lock file `path` (made 0600 if missing, never through a
    symlink) for the `with` block; other processes taking it wait their turn. (A class, not a
    contextlib generator: this module is on the hook's path, which imports no contextlib.)

    Raises:
        StateIOError: the lock file cannot be opened.
    """

    __slots__ = ("path", "fd")

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> None:
        try:
            self.fd = open_private(self.path, os.O_RDWR)
        except OSError as exc:
            raise io_error(self.path, exc) from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self.fd)
            raise

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # closing releases the lock


def locked_append(path: str, record: bytes) -> None:
    """Append the line `record` whole to `path` under an exclusive flock.

    A failed write is rolled back. A line left unterminated by a writer killed mid-write (a
    fatal signal can cut a large write short) is first moved aside to `<path>.torn`, so the
    file holds whole lines only and nothing is silently dropped.

    Raises:
        StateIOError: the append failed; the file keeps exactly its previous records.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | _O_NOFOLLOW | _O_CLOEXEC,
                     FILE_MODE)
    except OSError as exc:
        raise io_error(path, exc) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        info = os.fstat(fd)
        size = info.st_size
        try:
            private(fd, info.st_mode)
            if size and os.pread(fd, 1, size - 1) != b"\n":
                size = _set_aside_torn_tail(fd, path, size)
        except OSError as exc:
            raise io_error(path, exc) from None
        try:
            write_all(fd, record)
        except OSError as exc:
            # Never leave half a record behind: cut the file back to where this append began.
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            raise io_error(path, exc) from None
    finally:
        os.close(fd)  # closing releases the lock


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd` (a write may take less than it is given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def last_line_start(fd: int, end: int) -> int:
    """The offset just after the last newline before `end` in `fd` (0 when there is none)."""
    pos = end
    while pos > 0:
        begin = max(0, pos - (1 << 16))
        newline = os.pread(fd, pos - begin, begin).rfind(b"\n")
        if newline >= 0:
            return begin + newline + 1
        pos = begin
    return 0


def set_aside_torn(path: str, torn: bytes) -> None:
    """Append a torn last line (and a newline) to `<path>.torn`, durably, before the caller
    cuts it off `path`: nothing a crash left is ever silently dropped."""
    aside = open_private(path + ".torn", os.O_WRONLY | os.O_APPEND)
    try:
        write_all(aside, torn + b"\n")
        os.fsync(aside)
    finally:
        os.close(aside)


def _set_aside_torn_tail(fd: int, path: str, size: int) -> int:
    """Move the bytes after the last newline to `<path>.torn`; return the new size."""
    start = last_line_start(fd, size)
    set_aside_torn(path, os.pread(fd, size - start, start))
    os.ftruncate(fd, start)
    return start


def _open_state_file(path: str) -> int | None:
    """A read-only descriptor of `path`, not following a final symlink; None when absent."""
    try:
        return os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return None
        raise io_error(path, exc) from None


def read_small(path: str, limit: int = 1 << 20) -> bytes | None:
    """Read a small state file without following a final symlink; None when it is absent."""
    fd = _open_state_file(path)
    if fd is None:
        return None
    try:
        return os.read(fd, limit)
    finally:
        os.close(fd)


def read_small_stat(path: str, limit: int = 1 << 20) -> tuple[bytes, float] | None:
    """`read_small`, with the mtime of the very file read (not a later one at the same path)."""
    fd = _open_state_file(path)
    if fd is None:
        return None
    try:
        return os.read(fd, limit), os.fstat(fd).st_mtime
    finally:
        os.close(fd)


def read_regular(path: str, limit: int) -> bytes | None:
    """The bytes of the regular file at `path`, or None when there is none: a file that a
    repository or a manifest names (DESIGN.md §11, bounded input). It is opened without
    following a final symlink and without blocking (a FIFO never stalls), and read only when it
    is a regular file of at most `limit` bytes.

    Raises:
        InvalidInput: it is a symlink, a device, a FIFO or a directory, or larger than `limit`.
        OSError: it cannot be opened or read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _O_NOFOLLOW | _O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidInput(f"{path} is not a regular file (a symlink); not read") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidInput(f"{path} is not a regular file; not read")
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise InvalidInput(f"{path} is larger than {_size(limit)}; not read")
    return data


def _size(count: int) -> str:
    return f"{count >> 20} MiB" if count >= 1 << 20 and not count % (1 << 20) else f"{count} bytes"


def unlink_quietly(path: str) -> None:
    """Remove the file at `path` if it can be; a failure is not an error (best effort)."""
    try:
        os.unlink(path)
    except OSError:
        pass  # best effort: a stray temp file is ignored by readers and reaped by gc


def open_log(path: str, what: str) -> tuple[int, os.stat_result]:
    """An fd of the regular file at `path` (a log: `what`, for messages), opened without
    following a final symlink and without blocking, and its status now (`st_size`: its length).
    The caller closes the fd. For a log whose writer takes no lock (another program's); cos's
    own: `open_snapshot`.

    Raises:
        NotFound: no file at `path`.
        StateIOError: it cannot be read, is a symlink or not a regular file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK)
    except FileNotFoundError:
        raise NotFound(f"no {what} at {path}") from None
    except OSError as exc:
        reason = ("refusing to follow a symlink" if exc.errno == errno.ELOOP
                  else exc.strerror or str(exc))
        raise StateIOError(f"cannot read {what} {path}: {reason}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StateIOError(f"cannot read {what} {path}: not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def open_snapshot(path: str, what: str) -> tuple[int, int]:
    """An fd of the line log at `path` (a transcript, an events log: `what`, for messages)
    and its length at a moment no append was in progress. The caller closes the fd.

    Raises:
        NotFound: no file at `path`.
        StateIOError: it cannot be read, is a symlink or not a regular file.
    """
    fd, _ = open_log(path, what)
    try:
        # Appenders hold the exclusive lock for one line: under the shared lock the length is
        # at a line boundary (unless a crash left a torn tail), and the read never blocks them.
        fcntl.flock(fd, fcntl.LOCK_SH)
        size = os.fstat(fd).st_size
        fcntl.flock(fd, fcntl.LOCK_UN)
    except BaseException:
        os.close(fd)
        raise
    return fd, size
