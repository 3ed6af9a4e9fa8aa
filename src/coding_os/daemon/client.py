"""Talking to `cos daemon` (daemon/server.py): one JSON line in, one JSON line out.

A checkpoint asks the daemon from the hook path, so this module is light: the C socket module
(the `socket` module pulls in `enum` and `selectors`), the hook's JSON, and nothing when no
daemon listens (the connect fails at once).
"""

from __future__ import annotations

import _socket
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

from coding_os import jsonwire
from coding_os.daemon.sockets import reach
from coding_os.errors import CosError

__all__ = ["SOCKET", "STOPPED", "DaemonError", "daemon_dir", "request", "ask_watcher",
           "start_in_background"]

SOCKET = "daemon.sock"
LOG = "daemon.log"
# When an on-demand start was last tried: one try a minute, whatever the hooks firing meanwhile.
AUTOSTART = "autostart"
AUTOSTART_BACKOFF_S = 60.0
# Left by `cos daemon stop`: the hooks start no daemon until `cos daemon start` removes it.
STOPPED = "stopped"


def daemon_dir(env: Mapping[str, str] | None = None) -> str:
    """The daemon's folder in the user's hub: its socket, lock, log and pid file."""
    from coding_os.state.root import hub_dir

    return os.path.join(hub_dir(env), "daemon")


class DaemonError(CosError):
    """The daemon could not be started, stopped or reached."""

    exit_code = 1


def request(folder: str, message: dict[str, object], timeout: float = 5.0
            ) -> dict[str, object] | None:
    """The daemon's answer to `message`; None when no daemon listens in `folder`.

    Raises:
        DaemonError: it was reached but did not answer, or answered nonsense.
    """
    path = os.path.join(folder, SOCKET)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        try:
            reach(path, sock.connect)
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
            return None  # no daemon, or one that was killed and left its socket
        except OSError as exc:
            raise DaemonError(f"cannot reach the daemon at {path}: {exc.strerror or exc}"
                              ) from None
        sock.sendall(jsonwire.dumps(message).encode("ascii") + b"\n")
        chunks = []
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                break
    except OSError as exc:
        raise DaemonError(f"the daemon did not answer: {exc.strerror or exc}") from None
    finally:
        sock.close()
    try:
        answer = jsonwire.loads(b"".join(chunks).decode("utf-8", "surrogateescape"))
    except ValueError:
        raise DaemonError("the daemon's answer was not JSON") from None
    if not isinstance(answer, dict):
        raise DaemonError("the daemon's answer was not a JSON object")
    return answer


def ask_watcher(message: dict[str, object],
                env: Mapping[str, str] | None = None) -> dict[str, object] | None:
    """The file watcher's answer to `message` (checkpoints/watch.py's questions); None when no
    daemon listens or it could not answer: the checkpoint then scans."""
    try:
        return request(daemon_dir(env), message, timeout=2.0)
    except DaemonError:
        return None


def start_in_background(env: Mapping[str, str] | None = None) -> bool:
    """Start the daemon without waiting for it, as a hook may (its latency is the agent's):
    the daemon forks away twice (no child of the caller is left behind), leaves the caller's
    session and runs until no tree has been asked about for hours (`--until-idle`). Returns
    whether a start was tried: not within a minute of the last try, nor after `cos daemon
    stop` until `cos daemon start`. A second daemon started meanwhile finds the first's lock
    and exits. The daemon runs with this process's interpreter and `sys.path` (what the hook
    launcher set), isolated from the environment's PYTHON* variables and the current
    directory.

    Raises:
        StateIOError: the daemon's folder cannot be made.
    """
    import sys
    import time

    from coding_os import durable

    folder = durable.ensure_dir(daemon_dir(env))
    if os.path.lexists(os.path.join(folder, STOPPED)):
        return False
    marker = os.path.join(folder, AUTOSTART)
    try:
        if time.time() - os.stat(marker).st_mtime < AUTOSTART_BACKOFF_S:
            return False
    except FileNotFoundError:
        pass
    durable.atomic_write(marker, b"", sync=False)
    path = [entry for entry in sys.path if os.path.isabs(entry)]  # never the current directory
    code = (f"import sys; sys.path[:] = {path!r}; from coding_os.daemon.server import main; "
            f"sys.exit(main(['--until-idle', {folder!r}]))")
    argv = [sys.executable, "-I", "-S", "-c", code]
    pid = os.fork()
    if pid == 0:  # the child: fork the daemon and go
        try:
            if os.fork() == 0:
                os.setsid()
                os.chdir("/")  # nothing of the caller's directory is on the daemon's path
                null = os.open(os.devnull, os.O_RDONLY)
                log = durable.open_private(os.path.join(folder, LOG),
                                           os.O_WRONLY | os.O_APPEND)
                os.dup2(null, 0)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.closerange(3, 256)
                os.execv(argv[0], argv)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    return True
