"""Who may talk to `cos web` (interfaces/web/security.py; docs/web.md "Who may use it"): a real
server asked over HTTP — the token in the path and never in a cookie, the Host check, CSRF,
the loopback listener, WebSocket upgrades, and transcript text rendered inert."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import httpx
import pytest

from tests.helpers import WEB_WAIT as WAIT
from tests.helpers import Web, cos, page, python_session, stop_web

HOSTILE = ('<script>alert("x")</script> <img src=x onerror=alert(1)> '
           '[click](javascript:alert(1)) <a href="javascript:alert(2)">here</a> '
           'see https://example.com/ok')


def test_a_request_without_the_token_in_its_path_is_refused_403(web: Web) -> None:
    for path in ("/", "/sessions", "/static/htmx.min.js", "/jobs/x/events",
                 f"/{web.token[:-1]}/", f"/{web.token}x/", f"/x{web.token}/"):
        answer = httpx.get(web.base + path, timeout=WAIT)
        assert answer.status_code == 403, path
    assert httpx.get(web.base + "/?token=wrong", timeout=WAIT).status_code == 403
    # A cookie holding the token opens nothing: the server reads no cookie.
    for name in (f"cos_web_{web.port}", "token"):
        assert httpx.get(web.base + "/", cookies={name: web.token},
                         timeout=WAIT).status_code == 403
    assert httpx.get(f"{web.base}/{web.token}/static/htmx.min.js",
                     timeout=WAIT).status_code == 200


def test_the_printed_url_redirects_under_the_token_and_sets_no_cookie(web: Web) -> None:
    answer = httpx.get(web.base + f"/sessions?token={web.token}&scope=all", timeout=WAIT)
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/{web.token}/sessions?scope=all"
    assert "set-cookie" not in answer.headers
    bare = httpx.get(f"{web.base}/{web.token}", timeout=WAIT)
    assert bare.status_code == 303 and bare.headers["location"] == f"/{web.token}/"
    client = web.client()
    landed = client.get("/")
    assert landed.status_code == 200
    assert "set-cookie" not in landed.headers
    assert "script-src 'self'" in landed.headers["content-security-policy"]
    assert landed.headers["referrer-policy"] == "no-referrer"
    shown = page(client, "/")
    links = [str(a.get("href")) for a in shown.all("a")] + [
        str(s.get("src")) for s in shown.all("script")]
    assert links and all(link.startswith(f"/{web.token}/") for link in links), links


def test_a_foreign_host_header_is_refused_421(web: Web) -> None:
    client = web.client()
    for host in (f"evil.example:{web.port}", "127.0.0.1", f"127.0.0.1:{web.port + 1}",
                 f"localhost.evil.example:{web.port}"):
        answer = client.get("/", headers={"host": host})
        assert answer.status_code == 421, host
        answer = httpx.get(f"{web.base}/?token={web.token}", headers={"host": host},
                           timeout=WAIT)
        assert answer.status_code == 421, host  # not even the token is taken
    assert client.get("/", headers={"host": f"localhost:{web.port}"}).status_code == 200


def test_a_post_without_the_csrf_token_is_refused_403_and_changes_nothing(
        web: Web, project: Path) -> None:
    client = web.client()
    csrf = page(client, "/").csrf()
    form = {"agent": "exec", "prompt": "echo made > made.txt", "isolation": "none"}
    assert client.post("/jobs", data=form).status_code == 403
    assert client.post("/jobs", data={**form, "csrf_token": "forged"}).status_code == 403
    assert client.post("/jobs", data=form, headers={"x-csrf-token": "forged"}).status_code == 403
    assert json.loads(cos("agents", "--json", cwd=project).stdout) == []
    started = client.post("/jobs", data={**form, "csrf_token": csrf})
    assert started.status_code == 303, started.text
    assert started.headers["location"] == f"/{web.token}/"
    assert len(json.loads(cos("agents", "--json", cwd=project).stdout)) == 1


def test_the_server_listens_on_the_loopback_address_only(web: Web) -> None:
    listening = []
    with open("/proc/net/tcp", encoding="ascii") as f:
        for line in f.readlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port = local.split(":")
            if int(port, 16) == web.port and state == "0A":  # LISTEN
                listening.append(address)
    assert listening == ["0100007F"]  # 127.0.0.1
    with open("/proc/net/tcp6", encoding="ascii") as f:
        assert not [line for line in f.readlines()[1:]
                    if int(line.split()[1].split(":")[1], 16) == web.port]


@pytest.mark.slow
@pytest.mark.parametrize("with_token", [False, True])
def test_a_websocket_upgrade_is_refused_with_no_traceback(web: Web, with_token: bool) -> None:
    path = f"/{web.token}/" if with_token else "/"
    with socket.create_connection(("127.0.0.1", web.port), timeout=WAIT) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{web.port}\r\n"
                     "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n".encode())
        status = sock.recv(200).split(b"\r\n")[0]
    # Never 101 (no WebSocket is served) nor 500: without the token 403, with it the page.
    assert status == (b"HTTP/1.1 200 OK" if with_token else b"HTTP/1.1 403 Forbidden")
    assert httpx.get(web.url, timeout=WAIT).status_code == 303
    err = stop_web(web)
    assert "Traceback" not in err and "upgrade" not in err.lower(), err


def test_transcript_holding_script_and_javascript_links_renders_inert(
        web: Web, project: Path) -> None:
    session = python_session(project, HOSTILE)
    client = web.client()
    shown = page(client, f"/sessions/{session}")
    scripts = shown.all("script")
    assert [s.get("src") for s in scripts] == [f"/{web.token}/static/htmx.min.js",
                                              f"/{web.token}/static/web.js"]
    assert shown.scripts == ["", ""]  # no inline script at all
    hrefs = [str(a.get("href")) for a in shown.all("a")]
    assert not [h for h in hrefs if h.strip().lower().startswith("javascript")]
    assert "https://example.com/ok" in hrefs  # an http(s) link stays a link
    assert not [attrs for _, attrs in shown.elements if "onerror" in attrs]
    assert not shown.all("img")
    text = "".join(shown.text)
    assert HOSTILE in text  # shown as text, in the conversation
    assert text.count('<script>alert("x")</script>') >= 3  # the turns and the live events
    assert [t["data-role"] for t in shown.testid("turn")] == ["user", "assistant"]


def test_the_guard_closes_a_websocket_before_its_handshake() -> None:
    """Served by an ASGI server that speaks WebSocket (cos web's does not), the app closes one
    at its connect: the server answers 403, and nothing is ever sent as HTTP on it."""
    import asyncio

    from coding_os.interfaces.web.security import Guard

    async def app(scope: object, receive: object, send: object) -> None:
        raise AssertionError("the app behind the guard was reached")

    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    scope = {"type": "websocket", "path": "/", "query_string": b"",
             "headers": [(b"host", b"127.0.0.1:8777")]}
    asyncio.run(Guard(app, "token", 8777)(scope, receive, send))
    assert sent == [{"type": "websocket.close", "code": 1008}]
