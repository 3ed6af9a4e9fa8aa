"""Who is at the other end of a loopback TCP connection (DESIGN.md §11: local servers are for
their owner alone). A TCP socket carries no peer credentials as a Unix socket does, but on
loopback the peer's socket is one of this machine's, and the kernel knows its owner: asked by
its address through sock_diag (netlink, as `ss` does), else read from /proc/net/tcp. Linux
only; IPv4, as `cos web` listens on 127.0.0.1 alone.
"""

from __future__ import annotations

import errno
import os
import socket
import struct

__all__ = ["Address", "UNKNOWABLE", "loopback_peer_uid", "peers_knowable"]

Address = tuple[str, int]
UNKNOWABLE = -1  # neither sock_diag nor /proc/net/tcp can be asked here

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NO_COOKIE = 0xFFFFFFFF
_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, seq, pid
_REQUEST = struct.Struct("=BBBBI")  # inet_diag_req_v2: family, protocol, ext, pad, states
_SOCKID = struct.Struct("!HH16s16s")  # inet_diag_sockid: sport, dport, src, dst (big-endian)
_SOCKID_REST = struct.Struct("=III")  # if, cookie[2]
_MESSAGE = struct.Struct("=BBBB48sIIIII")  # inet_diag_msg: ..., id, expires, rq, wq, uid, ino
_UNSUPPORTED = (errno.EPROTONOSUPPORT, errno.EAFNOSUPPORT, errno.EOPNOTSUPP, errno.EINVAL,
                errno.EPERM, errno.EACCES)


def loopback_peer_uid(local: Address, remote: Address) -> int | None:
    """The uid owning the socket at `remote` whose peer is `local` (the two ends of a
    connection this process accepted on `local`); None when there is no such socket (the peer
    has gone), UNKNOWABLE when this system cannot be asked."""
    found = _ask_sock_diag(local, remote)
    if found != UNKNOWABLE:
        return found
    return _read_proc(local, remote)


def peers_knowable() -> bool:
    """Whether `loopback_peer_uid` can tell anything here (asked of a connection of its own)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        with socket.create_connection(listener.getsockname(), timeout=5) as client:
            conn, _ = listener.accept()
            with conn:
                return loopback_peer_uid(conn.getsockname(), conn.getpeername()) == os.geteuid()
    except OSError:
        return False
    finally:
        listener.close()


def _ask_sock_diag(local: Address, remote: Address) -> int | None:
    """The owner of the TCP socket bound at `remote` and connected to `local`, by an exact
    sock_diag lookup (the socket looked up is named by its own address as `src`)."""
    try:
        sockid = _SOCKID.pack(remote[1], local[1], socket.inet_aton(remote[0]) + bytes(12),
                              socket.inet_aton(local[0]) + bytes(12))
    except OSError:
        return None  # not an IPv4 address: no loopback peer of ours
    body = (_REQUEST.pack(socket.AF_INET, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
            + _SOCKID_REST.pack(0, _NO_COOKIE, _NO_COOKIE))
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
    except (OSError, AttributeError):
        return UNKNOWABLE
    with sock:
        try:
            sock.settimeout(2)
            sock.send(_HEADER.pack(_HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY,
                                   _NLM_F_REQUEST, 1, 0) + body)
            answer = sock.recv(8192)
        except OSError as exc:
            return UNKNOWABLE if exc.errno in _UNSUPPORTED else None
    if len(answer) < _HEADER.size:
        return UNKNOWABLE
    _, kind, _, _, _ = _HEADER.unpack_from(answer)
    if kind == _NLMSG_ERROR:
        (code,) = struct.unpack_from("=i", answer, _HEADER.size)
        return UNKNOWABLE if -code in _UNSUPPORTED else None  # ENOENT: no such socket
    if kind != _SOCK_DIAG_BY_FAMILY or len(answer) < _HEADER.size + _MESSAGE.size:
        return UNKNOWABLE
    family, _, _, _, found, _, _, _, uid, inode = _MESSAGE.unpack_from(answer, _HEADER.size)
    if family != socket.AF_INET or found[:4] != sockid[:4]:
        return None  # not the socket asked about
    # A socket no process holds any more (closed, the kernel finishing it) has no inode and
    # reads as root's: its owner cannot be told.
    return int(uid) if inode else None


def _read_proc(local: Address, remote: Address) -> int | None:
    """The same, read from /proc/net/tcp (addresses in host byte order, hexadecimal)."""
    def hexed(address: Address) -> str:
        packed = socket.inet_aton(address[0])
        return f"{int.from_bytes(packed, 'little'):08X}:{address[1]:04X}"

    try:
        own, peer = hexed(remote), hexed(local)
    except OSError:
        return None
    try:
        with open("/proc/net/tcp", encoding="ascii") as table:
            next(table, None)
            for line in table:
                fields = line.split()
                if len(fields) > 9 and fields[1] == own and fields[2] == peer:
                    return int(fields[7]) if int(fields[9]) else None
    except (OSError, ValueError):
        return UNKNOWABLE
    return None
