"""Who is at the other end of a loopback TCP connection (interfaces/web/peer.py): told by
sock_diag and by /proc/net/tcp alike, for this user and for another one, and not told for a
peer whose process has closed its socket."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator

import pytest

from coding_os.interfaces.web import peer
from tests.helpers import OTHER_UID, as_other_user

CONNECT = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(b"x")
if sys.argv[2] == "stay":
    sys.stdin.read()  # until the test is done with it
"""


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    with sock:
        yield sock


def both_ways(conn: socket.socket) -> tuple[int | None, int | None]:
    """What sock_diag and /proc/net/tcp each say of the peer of `conn`."""
    local, remote = conn.getsockname(), conn.getpeername()
    return peer._ask_sock_diag(local, remote), peer._read_proc(local, remote)


def test_the_owner_of_a_connection_of_this_user_is_this_user(listener: socket.socket) -> None:
    with socket.create_connection(listener.getsockname(), timeout=20):
        conn, _ = listener.accept()
        with conn:
            assert both_ways(conn) == (os.geteuid(), os.geteuid())
            assert peer.loopback_peer_uid(conn.getsockname(), conn.getpeername()) \
                == os.geteuid()
    assert peer.peers_knowable()


def test_another_users_connection_is_told_as_theirs_and_a_closed_one_as_nobodys(
        listener: socket.socket) -> None:
    setpriv = as_other_user()
    command = [setpriv, f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups",
               "/usr/bin/python3", "-I", "-c", CONNECT, str(listener.getsockname()[1])]
    staying = subprocess.Popen([*command, "stay"], stdin=subprocess.PIPE)
    try:
        conn, _ = listener.accept()
        with conn:
            assert conn.recv(1) == b"x"
            assert both_ways(conn) == (OTHER_UID, OTHER_UID)
    finally:
        staying.communicate(b"", timeout=20)
    # A peer that sent its bytes and closed: its socket, the kernel's now, reads as root's
    # and is no one's to serve.
    subprocess.run([*command, "leave"], check=True, timeout=20)
    conn, _ = listener.accept()
    with conn:
        assert conn.recv(1) == b"x"
        assert both_ways(conn) == (None, None)
