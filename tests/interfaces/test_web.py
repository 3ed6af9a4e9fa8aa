"""`cos web` as a user reaches it (docs/web.md): a real server started as `cos web --json --port
0` in a project, asked over HTTP with httpx — its security (token, cookie, Host, CSRF, loopback,
escaping), each page with real sessions, jobs, checkpoints and tasks, bad input, and the live
events over SSE resumed with Last-Event-ID. The browser tests are elsewhere."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest

from coding_os import api
from tests.helpers import (COS, ECHO_AGENT, VIEWER, bg_job, copy_claude_fixtures,
                           copy_codex_fixtures, cos, python_session, until)

WAIT = 60.0
HOSTILE = ('<script>alert("x")</script> <img src=x onerror=alert(1)> '
           '[click](javascript:alert(1)) <a href="javascript:alert(2)">here</a> '
           'see https://example.com/ok')


@dataclass
class Web:
    url: str
    port: int
    token: str
    process: subprocess.Popen[str]
    clients: list[httpx.Client]

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> httpx.Client:
        """A client holding the cookie the token URL sets (as a browser does)."""
        client = httpx.Client(base_url=self.base, timeout=WAIT, follow_redirects=False)
        self.clients.append(client)  # closed by the fixture
        first = client.get(self.url)
        assert first.status_code == 303, first.text
        return client


@pytest.fixture
def web(project: Path) -> Iterator[Web]:
    process = subprocess.Popen([COS, "web", "--json", "--port", "0"], cwd=project,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, process.stderr.read() if process.stderr else ""
    info = json.loads(line)
    assert info["pid"] == process.pid
    shared = None
    try:
        shared = Web(info["url"], info["port"], info["token"], process, [])
        yield shared
    finally:
        for client in shared.clients if shared else []:
            client.close()
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


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


# -- security ------------------------------------------------------------------------------


def test_a_request_without_the_token_or_its_cookie_is_refused_403(web: Web) -> None:
    for path in ("/", "/sessions", "/static/htmx.min.js", "/jobs/x/events"):
        answer = httpx.get(web.base + path, timeout=WAIT)
        assert answer.status_code == 403, path
    assert httpx.get(web.base + "/?token=wrong", timeout=WAIT).status_code == 403
    assert httpx.get(web.base + "/", cookies={f"cos_web_{web.port}": "wrong"},
                     timeout=WAIT).status_code == 403


def test_the_token_url_sets_an_httponly_strict_cookie_and_redirects_without_the_token(
        web: Web) -> None:
    answer = httpx.get(web.base + f"/sessions?token={web.token}&scope=all", timeout=WAIT)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/sessions?scope=all"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"cos_web_{web.port}={web.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    client = web.client()
    landed = client.get("/")
    assert landed.status_code == 200
    assert "script-src 'self'" in landed.headers["content-security-policy"]


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


def test_transcript_holding_script_and_javascript_links_renders_inert(
        web: Web, project: Path) -> None:
    session = python_session(project, HOSTILE)
    client = web.client()
    shown = page(client, f"/sessions/{session}")
    scripts = shown.all("script")
    assert [s.get("src") for s in scripts] == ["/static/htmx.min.js", "/static/web.js"]
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


# -- pages with real data ------------------------------------------------------------------


def test_each_page_shows_the_projects_sessions_checkpoints_tasks_and_search(
        web: Web, project: Path) -> None:
    session = python_session(project, "hello wombat")
    (project / "README.md").write_text("hello\nchanged by the test\n", encoding="utf-8")
    made = cos("checkpoint", "create", "--json", cwd=project)
    assert made.returncode == 0, made.stderr
    checkpoint = json.loads(made.stdout)["id"]
    (project / "README.md").write_text("after the checkpoint\n", encoding="utf-8")
    assert cos("tasks", "new", "paint the fence", cwd=project).returncode == 0
    assert cos("work-log", "add", "fence primed", cwd=project).returncode == 0
    client = web.client()

    listed = page(client, "/sessions")
    assert session in [row["data-session"] for row in listed.testid("session-row")]
    only_exec = page(client, "/sessions?agent=exec")
    assert not only_exec.testid("session-row")
    found = page(client, f"/sessions?q={session[-4:]}&scope=all")
    assert [row["data-session"] for row in found.testid("session-row")] == [session]

    shown = page(client, f"/sessions/{session}")
    assert "echo: hello wombat" in "".join(shown.text)
    assert {e["data-type"] for e in shown.testid("live-event")} >= {
        "session_configured", "task_started", "agent_message", "task_complete"}
    assert shown.testid("live")[0]["data-events-url"] == f"/sessions/{session}/events"
    for fmt in ("md", "json", "html"):
        exported = client.get(f"/sessions/{session}/export/{fmt}")
        assert exported.status_code == 200 and "hello wombat" in exported.text
        assert exported.headers["content-disposition"].startswith("attachment")

    timeline = page(client, "/checkpoints")
    assert checkpoint in [row["data-checkpoint"] for row in timeline.testid("checkpoint-row")]
    detail = client.get(f"/checkpoints/{checkpoint}")
    assert detail.status_code == 200, detail.text
    files = Page(detail.text).testid("diff-file")
    assert [(f["data-path"], f["data-action"]) for f in files] == [("README.md", "change")]
    assert "-changed by the test" in detail.text and "+after the checkpoint" in detail.text
    assert [f["data-path"] for f in Page(detail.text).testid("rewind-file")] == ["README.md"]

    tasks = page(client, "/tasks")
    assert "paint the fence" in "".join(tasks.text)
    assert "fence primed" in "".join(tasks.text)
    results = page(client, "/search?q=wombat")
    assert results.testid("result")
    assert page(client, "/search?q=zzqqxx").testid("results-empty")


def test_a_rewind_from_the_page_needs_its_confirmation_and_can_be_undone(
        web: Web, project: Path) -> None:
    (project / "notes.txt").write_text("first\n", encoding="utf-8")
    made = cos("checkpoint", "create", "--json", cwd=project)
    assert made.returncode == 0, made.stderr
    checkpoint = json.loads(made.stdout)["id"]
    (project / "notes.txt").write_text("second\n", encoding="utf-8")
    client = web.client()
    csrf = page(client, f"/checkpoints/{checkpoint}").csrf()
    refused = client.post(f"/checkpoints/{checkpoint}/rewind", data={"csrf_token": csrf})
    assert refused.status_code == 400 and "confirmation" in refused.text
    assert (project / "notes.txt").read_text(encoding="utf-8") == "second\n"
    done = client.post(f"/checkpoints/{checkpoint}/rewind",
                       data={"csrf_token": csrf, "confirm": "yes"})
    assert done.status_code == 200, done.text
    assert (project / "notes.txt").read_text(encoding="utf-8") == "first\n"
    undone = client.post("/rewind/undo", headers={"x-csrf-token": csrf, "hx-request": "true"})
    assert undone.status_code == 200, undone.text
    assert (project / "notes.txt").read_text(encoding="utf-8") == "second\n"


def test_a_long_session_page_holds_its_first_turns_and_loads_the_rest_when_revealed(
        web: Web, project: Path) -> None:
    session = api.create_session("python", cwd=str(project))
    for n in range(130):
        api.append_event(session, "user", {"text": f"question {n}", "turn": n + 1},
                         durability="none", cwd=str(project))
    client = web.client()
    first = page(client, f"/sessions/{session}")
    assert [t["data-n"] for t in first.testid("turn")] == [str(n) for n in range(100)]
    [more] = first.testid("turns-more")
    assert more["hx-trigger"] == "revealed"
    assert more["hx-get"] == f"/sessions/{session}/turns?offset=100"
    rest = page(client, str(more["hx-get"]))
    assert [t["data-n"] for t in rest.testid("turn")] == [str(n) for n in range(100, 130)]
    assert not rest.testid("turns-more")
    page(client, f"/sessions/{session}/turns?offset=130", 404)


# -- bad input -----------------------------------------------------------------------------


def test_claude_and_codex_session_pages_chart_tokens_per_turn_from_their_own_logs(
        web: Web, project: Path) -> None:
    from coding_os.sessions.usage import native_turns

    copy_claude_fixtures(Path.home() / ".claude")
    copy_codex_fixtures(Path.home() / ".codex")
    client = web.client()
    for session, kind in ((VIEWER, "claude"), ("019e1625-789d-76c0-80ab-3724b5ddb799", "codex")):
        shown = page(client, f"/sessions/{session}")
        [chart] = shown.testid("token-chart")
        assert chart["data-source"] == kind
        source = json.loads(cos("sessions", "show", session, "--json", cwd=project).stdout)
        expected = native_turns(source["source_path"], kind)
        bars = shown.testid("token-bar")
        assert [(int(str(b["data-input"])), int(str(b["data-output"]))) for b in bars] == \
            [(t["input"], t["output"]) for t in expected] and expected
        assert max(int(str(b["height"])) for b in bars) == 100


def test_a_session_page_folds_each_subagent_under_the_call_or_turn_that_started_it(
        web: Web, project: Path) -> None:
    copy_claude_fixtures(Path.home() / ".claude")
    client = web.client()
    shown = page(client, f"/sessions/{VIEWER}")
    marks = [attrs for _, attrs in shown.elements
             if attrs.get("data-testid") in ("turn", "sidechain")]
    sidechains = [i for i, attrs in enumerate(marks) if attrs["data-testid"] == "sidechain"]
    expected = api.session_sidechains(VIEWER, cwd=str(project))["sidechains"]
    assert len(sidechains) == len(expected) == 2
    for at, sidechain in zip(sidechains, expected):
        folded = marks[at]
        assert folded["data-call"] == sidechain["call"] and "open" not in folded
        started = marks[at - 1]  # right after the Task call that started it
        assert (started["data-testid"], started["data-role"], started["data-n"]) == \
            ("turn", "tool_call", str(sidechain["turn"]))
    assert len(shown.testid("sidechain-turn")) == sum(len(s["turns"]) for s in expected)
    assert "subagent general-purpose: Check package configuration" in "".join(shown.text)
    # A cos session's sidechain: a cos session whose parent it is.
    lead = api.create_session("python", title="lead", cwd=str(project))
    api.append_event(lead, "user", {"turn": 1, "text": "plan"}, cwd=str(project))
    helper = api.create_session("python", title="helper", parent=lead, cwd=str(project))
    api.append_event(helper, "user", {"turn": 1, "text": "the helper's part"}, cwd=str(project))
    api.append_event(lead, "assistant", {"turn": 1, "text": "done"}, cwd=str(project))
    lead_page = page(client, f"/sessions/{lead}")
    [folded] = lead_page.testid("sidechain")
    assert (folded["data-layout"], folded["data-agent"]) == ("cos", helper)
    assert "the helper's part" in "".join(lead_page.text)


def test_bad_input_gets_a_page_with_one_clear_message_and_its_status(
        web: Web, project: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    (other / "f.txt").write_text("x\n", encoding="utf-8")
    made = cos("checkpoint", "create", "--json", cwd=other)
    assert made.returncode == 0, made.stderr
    foreign = json.loads(made.stdout)["id"]
    python_session(project, "hi")
    client = web.client()
    cases = [
        ("/sessions/ses-python-20990101-000000-dead", 404, "no session"),
        ("/sessions/..%2Fetc", 404, "no page"),
        ("/sessions/bad%20id", 400, "not a session id"),
        (f"/checkpoints/{foreign}", 404, foreign),
        ("/checkpoints/cp-nonsense", 400, "not a checkpoint id"),
        ("/sessions?page=999", 404, "past the end"),
        ("/sessions?page=-1", 400, "not a page number"),
        ("/sessions?scope=galaxy", 400, "scope"),
        ("/checkpoints?page=50", 404, "past the end"),
        ("/search?q=%21%21%21", 400, ""),
        ("/jobs/nosuchjob/events", 404, "nosuchjob"),
        ("/nowhere", 404, "no page"),
    ]
    for path, status, words in cases:
        answer = client.get(path)
        assert answer.status_code == status, (path, answer.status_code, answer.text[:500])
        assert "Traceback" not in answer.text
        [message] = re.findall(r'<p class="error" id="error" data-testid="error">(.*?)</p>',
                               answer.text, re.S)
        assert message and "\n" not in message and words in message, (path, message)


# -- live events ---------------------------------------------------------------------------


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


def test_sse_resumes_after_last_event_id_with_no_event_lost_or_shown_twice(
        web: Web, project: Path) -> None:
    job = bg_job(project, "--agent", f"python:{ECHO_AGENT}", "--isolation", "none",
                 "first words")
    client = web.client()
    csrf = page(client, "/").csrf()
    url = f"/jobs/{job['id']}/events"
    with client.stream("GET", url, timeout=WAIT) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        first, _ = read_sse(answer, lambda got: any(
            e["msg"]["type"] == "task_complete" for e in got))
    last = first[-1]["seq"]
    # Meanwhile the job goes on: a reply sent while nobody follows.
    sent = client.post(f"/jobs/{job['id']}/reply", data={"text": "second words",
                                                         "csrf_token": csrf})
    assert sent.status_code == 303, sent.text
    with client.stream("GET", url, headers={"last-event-id": str(last)},
                       timeout=WAIT) as answer:
        second, _ = read_sse(answer, lambda got: any(
            e["msg"].get("text") == "echo: second words" for e in got))
    seqs = [e["seq"] for e in first + second]
    assert seqs == list(range(1, len(seqs) + 1))  # dense from 1: none lost, none twice
    # The session's page follows the same job, resumed with ?since=.
    session = job_session(project, job["id"])
    with client.stream("GET", f"/sessions/{session}/events?since={last}",
                       timeout=WAIT) as answer:
        again, _ = read_sse(answer, lambda got: got[-1]["seq"] >= seqs[-1])
    assert [e["seq"] for e in again] == seqs[len(first):]
    stopped = client.post(f"/jobs/{job['id']}/stop", headers={"x-csrf-token": csrf,
                                                              "hx-request": "true"})
    assert stopped.status_code == 200 and "stopped" in stopped.text
    # A job whose runner ended: its stored events after the seq, then the end.
    with client.stream("GET", url, headers={"last-event-id": str(seqs[-1])},
                       timeout=WAIT) as answer:
        rest, ended = read_sse(answer, lambda got: False)
    assert ended and all(e["seq"] > seqs[-1] for e in rest)
    page(client, f"{url}?since=999999", 400)


def job_session(project: Path, job: str) -> str:
    def session() -> str | None:
        rows = json.loads(cos("agents", "--json", cwd=project).stdout)
        found = [r["cos_session"] for r in rows if r["id"] == job and r["cos_session"]]
        return found[0] if found else None
    found: str = until(session, "the job's session")
    return found


def test_the_roster_lists_a_job_waiting_for_approval_and_approves_it_from_the_page(
        web: Web, project: Path) -> None:
    job = bg_job(project, "--agent", f"python:{ECHO_AGENT}", "--isolation", "none",
                 "write notes.txt: from the web")
    client = web.client()

    def waiting() -> Page | None:
        rows = page(client, "/roster/rows")
        mine = [r for r in rows.testid("job-row") if r["data-job"] == job["id"]]
        return rows if mine and mine[0]["data-state"] == "blocked" else None

    rows = until(waiting, "the job to wait for its approval")
    assert "permission prompt" in "".join(rows.text)
    csrf = page(client, "/").csrf()
    answer = client.post(f"/jobs/{job['id']}/approve",
                         data={"decision": "allow", "csrf_token": csrf},
                         headers={"hx-request": "true"})
    assert answer.status_code == 200 and "allow" in answer.text
    until(lambda: (project / "notes.txt").exists(), "the approved write")
    assert (project / "notes.txt").read_text(encoding="utf-8") == "from the web\n"
    refused = client.post(f"/jobs/{job['id']}/approve",
                          data={"decision": "maybe", "csrf_token": csrf},
                          headers={"hx-request": "true"})
    assert refused.status_code == 400 and 'data-testid="flash-error"' in refused.text


def test_without_the_web_extra_cos_web_names_the_install_and_exits_2(project: Path) -> None:
    code = ("import sys; sys.modules['starlette'] = None\n"
            "from coding_os.interfaces.cli import run\n"
            "sys.exit(run(['web', '--port', '0']))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True,
                          text=True, timeout=WAIT)
    assert done.returncode == 2
    assert done.stderr.strip() == "cos: cos web needs its extra: pip install 'coding-os[web]'"


def test_a_jobs_task_is_interrupted_and_its_session_page_sends_input_stops_and_respawns_it(
        web: Web, project: Path) -> None:
    job = bg_job(project, "--agent", f"python:{ECHO_AGENT}", "--isolation", "none",
                 "sleep 60")
    session = job_session(project, job["id"])
    client = web.client()
    until(lambda: "sleeping 60s" in "".join(page(client, f"/sessions/{session}").text),
          "the job to sleep")
    shown = page(client, f"/sessions/{session}")
    assert shown.testid("job-controls")[0]["data-job"] == job["id"]
    assert shown.testid("input-form")
    csrf = shown.csrf()
    hx = {"x-csrf-token": csrf, "hx-request": "true"}
    answer = client.post(f"/jobs/{job['id']}/interrupt", headers=hx)
    assert answer.status_code == 200 and "interrupted" in answer.text, answer.text
    aborted = [e for e in api.session_events(session, cwd=str(project))["events"]
               if e["msg"]["type"] == "turn_aborted"]
    assert [e["msg"]["reason"] for e in aborted] == ["interrupted"]
    idle = client.post(f"/jobs/{job['id']}/interrupt", headers=hx)
    assert idle.status_code == 400 and 'data-testid="flash-error"' in idle.text
    sent = client.post(f"/sessions/{session}/input", data={"text": "after the nap"}, headers=hx)
    assert sent.status_code == 200, sent.text
    until(lambda: "echo: after the nap" in "".join(page(client, f"/sessions/{session}").text),
          "the answer to the input")
    assert client.post(f"/jobs/{job['id']}/stop", headers=hx).status_code == 200
    stopped = page(client, "/roster/rows").testid("job-row")
    assert [r["data-state"] for r in stopped if r["data-job"] == job["id"]] == ["stopped"]
    again = client.post(f"/jobs/{job['id']}/respawn", headers=hx)
    assert again.status_code == 200 and "respawned" in again.text, again.text
    until(lambda: [r for r in page(client, "/roster/rows").testid("job-row")
                   if r["data-job"] == job["id"] and r["data-state"] == "done"],
          "the respawned job to be idle")
    plain = python_session(project, "no job here")
    refused = client.post(f"/sessions/{plain}/input", data={"text": "x"}, headers=hx)
    assert refused.status_code == 409 and "not run by a background job" in refused.text


def test_runner_lines_become_sse_messages_with_their_seq_as_id_and_client_only_lines_left_out(
        ) -> None:
    from coding_os.interfaces.web.live import sse_messages

    stored = [{"v": 1, "seq": n, "ts": "2026-12-02T06:00:00.000Z", "session": "ses-a", "id": None,
               "msg": {"type": "agent_message", "message": f"line {n}\n\"quoted\" <b>"}}
              for n in (7, 8)]
    lines = b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in stored)
    fast = sse_messages(lines)
    # Another key order (parsed), a line for this client only, a blank line, a torn one.
    mixed = (b'{"seq":9,"v":1,"msg":{"type":"warning","message":"x"}}\n'
             b'{"id":"attach","seq":null,"msg":{"type":"error","message":"no"}}\n\n'
             b'{"v":1,"seq":\n' + lines)
    # As many heads as lines, but not one a line: a client-only line, and an event whose
    # message holds a head of its own (an object with the same keys).
    nested = {"v": 1, "seq": 10, "msg": {"type": "agent_message", "quoted": {"v": 1, "seq": 3}}}
    paired = (b'{"id":"x","seq":null,"msg":{"type":"error","message":"no"}}\n'
              + json.dumps(nested, separators=(",", ":")).encode() + b"\n")
    for body, seqs in ((fast, [7, 8]), (sse_messages(mixed), [9, 7, 8]),
                       (sse_messages(paired), [10])):
        messages = [m for m in body.decode().split("\n\n") if m]
        assert len(messages) == len(seqs)
        for message, seq in zip(messages, seqs):
            fields = dict(line.split(": ", 1) for line in message.split("\n"))
            assert fields["id"] == str(seq) and fields["event"] == "protocol"
            assert json.loads(fields["data"])["seq"] == seq
    assert [json.loads(m.split("data: ", 1)[1]) for m in fast.decode().split("\n\n") if m] \
        == stored
