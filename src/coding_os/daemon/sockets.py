"""Unix sockets of this user: bound and reached by any path length, and who is at the other end.

A socket's path is limited to about 107 bytes. A longer one (the daemon's or a job's socket under
a deep home) is bound and reached through `/proc/self/fd/N/NAME`, N an open descriptor of its
folder (Linux). The module imports `socket` only in the functions that make one: the hooks reach
the daemon with the C module `_socket` and `reach`.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing and collections.abc stay off the hooks' path (daemon/client.py)
    import socket
    from collections.abc import Callable

__all__ = ["bind", "connect", "reach", "unlink", "peer_uid"]

PATH_MAX = 100  # bytes of a socket path used as it is; a longer one goes through its folder


def reach(path: str, call: Callable[[str], None]) -> None:
    """`call` (a socket's `bind` or `connect`) with `path`, or, when `path` is too long for a
    socket address, with a short path to the same file through its folder."""
    if len(os.fsencode(path)) <= PATH_MAX:
        call(path)
        return
    folder, name = os.path.split(path)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        call(f"/proc/self/fd/{fd}/{name}")
    finally:
        os.close(fd)


def bind(path: str, backlog: int = 64) -> tuple[socket.socket, int]:
    """A listening socket at `path` (one left there by a killed process is replaced), reachable
    by this user only (mode 0600), and the inode of its file (for `unlink`).

    Raises:
        OSError: it could not be bound.
    """
    import socket

    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # the socket 0600: connecting takes only its write bit
    try:
        reach(path, listener.bind)
    except OSError:
        listener.close()
        raise
    finally:
        os.umask(old_umask)
    listener.listen(backlog)
    return listener, os.stat(path).st_ino


def connect(path: str, timeout: float | None = None) -> socket.socket:
    """A connection to the socket at `path`.

    Raises:
        OSError: nobody listens there (FileNotFoundError, ConnectionRefusedError, …).
    """
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        reach(path, sock.connect)
    except OSError:
        sock.close()
        raise
    return sock


def unlink(path: str, inode: int) -> None:
    """Remove the socket file at `path` if it is still the one of inode `inode` (not one another
    process bound there meanwhile)."""
    try:
        if os.stat(path).st_ino == inode:
            os.unlink(path)
    except OSError:
        pass


def peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end (Linux); None where it cannot be told, -1 when
    asking failed."""
    import socket
    import struct

    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        _, uid, _ = struct.unpack("iII", conn.getsockopt(socket.SOL_SOCKET, option,
                                                         struct.calcsize("iII")))
    except OSError:
        return -1
    return int(uid)
