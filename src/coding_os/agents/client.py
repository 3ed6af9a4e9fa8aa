"""Talking to `cos daemon` (agents/daemon.py): one JSON line in, one JSON line out.

A checkpoint asks the daemon from the hook path, so this module is light: the C socket module
(the `socket` module pulls in `enum` and `selectors`), the hook's JSON, and nothing when no
daemon listens (the connect fails at once).
"""

from __future__ import annotations

import _socket
import os

from coding_os import jsonwire
from coding_os.errors import CosError

__all__ = ["SOCKET", "GIT_ENV", "DaemonError", "request", "git_config_env", "is_config_pair"]

SOCKET = "daemon.sock"
# What decides git's configuration, so what it ignores: the daemon runs git with the asker's
# (each name, None when the asker has it unset, and the GIT_CONFIG_KEY_<n>/VALUE_<n> pairs).
GIT_ENV = ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
           "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT")


def git_config_env(environ: dict[str, str] | None = None) -> dict[str, str | None]:
    """The asker's variables that decide git's configuration (see GIT_ENV)."""
    source = os.environ if environ is None else environ
    found: dict[str, str | None] = {name: source.get(name) for name in GIT_ENV}
    # The names alone are looked at (a copy of the environment decodes every value too).
    found.update((name, source[name]) for name in list(source)
                 if name.startswith("GIT_CONFIG_") and is_config_pair(name))
    return found


def is_config_pair(name: str) -> bool:
    """Whether `name` is one of git's GIT_CONFIG_KEY_<n> / GIT_CONFIG_VALUE_<n>."""
    head, _, number = name.rpartition("_")
    return head in ("GIT_CONFIG_KEY", "GIT_CONFIG_VALUE") and number.isdigit()


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
            sock.connect(path)
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
