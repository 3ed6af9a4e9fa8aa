"""A real `cos web --json --port 0` started in the test's project (`web`), its clients (httpx,
as a browser holding its URL), and what a test reads of its answers: a page's elements
(`Page`, `page`) and an SSE stream's events (`read_sse`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import COS, cos, until

WAIT = 60.0
OTHER_UID = 65534  # another local user: nobody


def as_other_user() -> str:
    """setpriv, to act as another local user; the test is skipped without it or root."""
    setpriv = shutil.which("setpriv")
    if setpriv is None or os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("setpriv as root is needed to act as another user (CI=true)")
        pytest.skip("needs setpriv, run as root, to act as another user")
    return setpriv


@dataclass
class Web:
    url: str
    port: int
    token: str
    process: subprocess.Popen[str]
    clients: list[httpx.Client]
    stderr: str | None = None  # what it wrote there, once stopped

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def root(self) -> str:
        """The path every page lives under: the token's."""
        return f"/{self.token}"

    def client(self) -> httpx.Client:
        """A client that opened the printed URL, as a browser does, and asks its paths under
        where it was sent (`client.get("/sessions")` asks `/<token>/sessions`)."""
        first = httpx.get(self.url, timeout=WAIT)
        assert first.status_code == 303, first.text
        assert first.headers["location"] == f"{self.root}/"
        assert "set-cookie" not in first.headers
        client = httpx.Client(base_url=self.base + self.root, timeout=WAIT,
                              follow_redirects=False)
        self.clients.append(client)  # closed by the fixture
        return client

    def inside(self, link: object) -> str:
        """A link of a page, as the path a `client()` asks for it."""
        text = str(link)
        assert text.startswith(f"{self.root}/"), text
        return text[len(self.root):]


def start_web(project: Path, *args: str, env: dict[str, str] | None = None,
              preexec: Callable[[], None] | None = None) -> Web:
    """`cos web --json --port 0 ARGS` in `project`, once it printed its line."""
    process = subprocess.Popen([COS, "web", "--json", "--port", "0", *args], cwd=project,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env, preexec_fn=preexec)
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, process.stderr.read() if process.stderr else ""
    info = json.loads(line)
    assert info["pid"] == process.pid
    return Web(info["url"], info["port"], info["token"], process, [])


def stop_web(web: Web) -> str:
    """End `web` (SIGTERM, as Ctrl-C would), if not yet; what it wrote to stderr."""
    if web.stderr is None:
        for client in web.clients:
            client.close()
        web.process.terminate()
        try:
            _, web.stderr = web.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            web.process.kill()
            _, web.stderr = web.process.communicate(timeout=30)
    return web.stderr


@pytest.fixture
def web(project: Path) -> Iterator[Web]:
    shared = start_web(project)
    try:
        yield shared
    finally:
        stop_web(shared)


class Page(HTMLParser):
    """What the browser would build from a page: its elements with their attributes, the
    text of each script element, and the text."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._in_script = False
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
        self.text.append(data)

    def all(self, tag: str | None = None, **wanted: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.elements if (tag is None or name == tag)
                and all(attrs.get(key.replace("_", "-")) == value
                        for key, value in wanted.items())]

    def testid(self, value: str) -> list[dict[str, str | None]]:
        return [attrs for _, attrs in self.elements if attrs.get("data-testid") == value]

    def csrf(self) -> str:
        [meta] = self.all("meta", name="csrf-token")
        return str(meta["content"])


def page(client: httpx.Client, path: str, status: int = 200) -> Page:
    answer = client.get(path)
    assert answer.status_code == status, (path, answer.status_code, answer.text[:2000])
    assert "Traceback" not in answer.text
    return Page(answer.text)


def read_sse(answer: httpx.Response, stop: Callable[[list[dict[str, Any]]], bool]
             ) -> tuple[list[dict[str, Any]], bool]:
    """The protocol events of an SSE answer until `stop(events)` or its `end`; whether the
    end came."""
    events: list[dict[str, Any]] = []
    kind, data, ident = "message", "", None
    for line in answer.iter_lines():
        if line.startswith("id: "):
            ident = line[4:]
        elif line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif line == "":
            if kind == "end":
                return events, True
            if kind == "protocol":
                event = json.loads(data)
                assert str(event["seq"]) == ident
                events.append(event)
                if stop(events):
                    return events, False
            kind, data, ident = "message", "", None
    return events, False


def job_session(project: Path, job: str) -> str:
    """The cos session of background job `job`, once it has one."""
    def session() -> str | None:
        rows = json.loads(cos("agents", "--json", cwd=project).stdout)
        found = [r["cos_session"] for r in rows if r["id"] == job and r["cos_session"]]
        return found[0] if found else None
    found: str = until(session, "the job's session")
    return found
