"""How `cos web` is served (interfaces/web/server.py; docs/web.md "Who may use it"), against a
real `cos web` process: another local user's connections reset unread, idle connections closed
and never starving the owner (with a low RLIMIT_NOFILE), and `--open` starting the browser on
a private page with the token on no command line."""

from __future__ import annotations

import os
import resource
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.helpers import WEB_WAIT as WAIT
from tests.helpers import OTHER_UID, as_other_user, start_web, stop_web, until

# Run as another user: connect, send a whole request carrying the token (as if it had leaked),
# and say what came back.
OTHER_USER_CLIENT = """
import socket, sys
port, token = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port), timeout=20)
s.sendall(f"GET /{token}/ HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\n\\r\\n".encode())
try:
    answer = s.recv(100)
except ConnectionResetError:
    answer = b""
print(repr(answer))
"""


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed `sock` (EOF or reset), without waiting."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_another_users_connections_are_reset_unread_and_said_once(project: Path) -> None:
    setpriv = as_other_user()
    web = start_web(project)
    try:
        for _ in range(3):
            proc = subprocess.run(
                [setpriv, f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups",
                 "/usr/bin/python3", "-I", "-c", OTHER_USER_CLIENT, str(web.port), web.token],
                capture_output=True, text=True, timeout=WAIT)
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout.strip() == "b''"  # not a byte of an answer, not even a 403
        assert web.client().get("/").status_code == 200  # its owner is served
    finally:
        err = stop_web(web)
    assert err.count(f"uid {OTHER_UID}") == 1, err


@pytest.mark.slow
def test_idle_connections_are_closed_and_never_starve_the_owner(project: Path) -> None:
    def few_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    web = start_web(project, preexec=few_files)
    held: list[socket.socket] = []
    try:
        for _ in range(400):  # more than it has file descriptors; not a byte sent
            held.append(socket.create_connection(("127.0.0.1", web.port), timeout=WAIT))

        def owner_served() -> bool:
            try:
                return httpx.get(web.url, timeout=5).status_code == 303
            except httpx.HTTPError:
                return False

        until(owner_served, "the owner's request to be answered", timeout=WAIT)
        until(lambda: all(closed_by_server(sock) for sock in held),
              "every idle connection to be closed", timeout=WAIT)
        assert owner_served()
    finally:
        for sock in held:
            sock.close()
        err = stop_web(web)
    assert "Traceback" not in err, err[:2000]
    assert len(err.splitlines()) <= 2, err  # the limit reached, and at most one accept error


def test_open_starts_the_browser_on_a_private_page_and_puts_the_token_on_no_command_line(
        project: Path, tmp_path: Path) -> None:
    said = tmp_path / "browser-argv"
    browser = tmp_path / "browser"
    # A browser that keeps running, as one does, its argv readable by anyone in /proc.
    browser.write_text(f"#!/bin/sh\necho $$ \"$@\" > {said}.tmp && mv {said}.tmp {said}\n"
                       "exec sleep 60 </dev/null >/dev/null 2>&1\n", encoding="utf-8")
    browser.chmod(0o755)
    env = {**os.environ, "BROWSER": str(browser)}
    web = start_web(project, "--open", env=env)
    try:
        until(said.exists, "the browser to start")
        pid, url = said.read_text(encoding="utf-8").split()
        assert url.startswith("file://") and web.token not in url
        page = Path(url.removeprefix("file://"))
        assert stat.S_IMODE(page.stat().st_mode) == 0o600
        assert stat.S_IMODE(page.parent.stat().st_mode) == 0o700
        assert f'content="0;url={web.url}"' in page.read_text(encoding="utf-8")
        leaked = []
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if web.token.encode() in f.read():
                        leaked.append(pid)
            except OSError:
                continue
        assert leaked == []
        assert httpx.get(web.url, timeout=WAIT).status_code == 303  # it serves meanwhile
    finally:
        if said.exists():
            os.kill(int(said.read_text(encoding="utf-8").split()[0]), signal.SIGTERM)
        stop_web(web)
    assert not page.exists()  # removed as the server ended


def test_the_connection_limit_keeps_file_descriptors_for_the_server_itself() -> None:
    from coding_os.interfaces.web.server import BACKLOG, connection_limit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
        assert connection_limit() == 1024 - 2 * BACKLOG
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
        assert connection_limit() == 16
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_killed_servers_open_page_is_removed_by_the_next_one(project: Path,
                                                               tmp_path: Path) -> None:
    from coding_os.interfaces.web.server import open_page

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    env = {"HOME": os.environ["HOME"]}
    folder = Path(os.environ["HOME"]) / ".coding-os" / "web"
    folder.mkdir(parents=True, exist_ok=True)
    left = folder / f"open-1234-{dead.pid}.html"
    left.write_text("old token", encoding="utf-8")
    alive = folder / f"open-1235-{os.getpid()}.html"
    alive.write_text("a running server's", encoding="utf-8")
    made = Path(open_page("http://127.0.0.1:1/?token=t", 1, env))
    assert made.exists() and alive.exists() and not left.exists()
