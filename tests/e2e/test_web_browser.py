"""`cos web` in a real browser (docs/web.md): Playwright drives Debian's Chromium
(/usr/bin/chromium; `make test` installs it as root, nothing is downloaded at run time) against
a real `cos web --json --port 0` in a scratch project. The real Claude Code and Codex, against
the scripted model server, run jobs started from the page's form, wait for an approval that the
page gives or refuses, answer a reply streamed into their session page, which is reloaded
mid-stream; a Codex job's shell command deletes files and the checkpoints page rewinds them and
undoes it; a transcript holding scripts and `javascript:` links renders inert in the DOM; every
page's screenshot is saved (to docs/web with COS_WEB_SCREENSHOTS=docs/web, else to the test's
tmp_path)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, expect, sync_playwright

from tests.e2e.model_server import Text
from tests.e2e.harness import Jobs, running_jobs, shell
from tests.helpers import (COS, TOOLS, VIEWER, copy_claude_fixtures, copy_codex_fixtures, cos,
                           git, python_session, until)

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
WAIT_MS = 120_000  # what a real client may take to reach a state on a loaded machine
ECHO_TARGET = f"{ROOT / 'examples' / 'echo_agent.py'}:EchoAgent"
# Where the screenshots go (relative to the repository), read at import: the tests' environment
# drops every COS_ variable.
SCREENSHOTS = os.environ.get("COS_WEB_SCREENSHOTS")
REPLY = "FOLLOW-UP"
GATED_ANSWER = "the answer that waited for the gate"


def require_chromium() -> None:
    """Skip when Debian's chromium is missing, except under CI=true, where that fails."""
    if os.access(CHROMIUM, os.X_OK):
        return
    message = (f"Debian's chromium is not installed ({CHROMIUM}): apt-get install chromium "
               "(make test does it when run as root)")
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    require_chromium()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Web:
    """A running `cos web --json --port 0`."""

    url: str
    port: int
    token: str
    process: subprocess.Popen[str]

    @property
    def home(self) -> str:
        """Where the printed URL sends the browser: the pages under the token's path."""
        return f"http://127.0.0.1:{self.port}/{self.token}/"


def serve(project: Path, env: Mapping[str, str], *args: str) -> Web:
    process = subprocess.Popen([COS, "web", "--json", "--port", "0", *args], cwd=project,
                               env=dict(env), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, process.stderr.read() if process.stderr else ""
    info = json.loads(line)
    return Web(info["url"], info["port"], info["token"], process)


def stop(web: Web) -> None:
    web.process.terminate()
    try:
        web.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        web.process.kill()
        web.process.wait(timeout=30)
    for stream in (web.process.stdout, web.process.stderr):
        if stream is not None:
            stream.close()


@dataclass
class Tab:
    """A browser page on a `cos web`, with what its scripts reported: uncaught errors and
    Content-Security-Policy violations (console errors)."""

    page: Page
    web: Web
    errors: list[str]

    def open(self, path: str) -> None:
        self.page.goto(self.web.home + path.removeprefix("/"))

    def check_quiet(self) -> None:
        assert not self.errors, self.errors

    def expect_refused(self, path: str, status: int) -> None:
        """Take the one console error a refused request of the page logs, and nothing else."""
        url = self.web.home + path.removeprefix("/")
        assert len(self.errors) == 1 and f"status of {status}" in self.errors[0] \
            and self.errors[0].endswith(f"({url})"), self.errors
        self.errors.clear()


class opened:
    """A context manager: a browser tab on a new `cos web` of `project` run in `env`, logged in
    with the token URL."""

    def __init__(self, browser: Browser, project: Path, env: Mapping[str, str]) -> None:
        self.browser, self.project, self.env = browser, project, env

    def __enter__(self) -> Tab:
        self.web = serve(self.project, self.env)
        self.context = self.browser.new_context(viewport={"width": 1280, "height": 860})
        self.context.set_default_timeout(WAIT_MS)
        page = self.context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
        page.on("console", lambda message: errors.append(
            f"console: {message.text} ({message.location.get('url')})")
            if message.type == "error" and not favicon(message.location.get("url")) else None)
        page.goto(self.web.url)  # the token URL: redirects to the roster, under the token
        assert page.url == self.web.home
        assert self.context.cookies() == []
        expect(page.get_by_test_id("roster")).to_be_visible()
        return Tab(page, self.web, errors)

    def __exit__(self, *exc: object) -> None:
        self.context.close()
        stop(self.web)


@pytest.fixture
def tab(browser: Browser, project: Path) -> Iterator[Tab]:
    """A browser tab on a new `cos web` of `project` run in the test's environment."""
    with opened(browser, project, os.environ) as shown:
        yield shown


def favicon(url: object) -> bool:
    """Whether `url` is the icon the browser asks for on its own (cos web serves none)."""
    return str(url).endswith("/favicon.ico")


def screenshot(page: Page, name: str, tmp_path: Path, full_page: bool = True) -> Path:
    """Save the page's screenshot (the whole page, or what the window shows) as NAME.png in
    $COS_WEB_SCREENSHOTS (relative to the repository) or else in `tmp_path`."""
    target = ROOT / SCREENSHOTS if SCREENSHOTS else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    return path


def seqs_shown(page: Page) -> list[int]:
    """The seq of every `live-event` element of the page, in document order."""
    found = page.get_by_test_id("live-event").evaluate_all(
        "items => items.map(item => item.dataset.seq)")
    return [int(seq) for seq in found]


def job_row(page: Page, job: str) -> Locator:
    return page.locator(f'[data-testid="job-row"][data-job="{job}"]')


def start_from_the_form(page: Page, agent: str, prompt: str, name: str,
                        isolation: str = "worktree") -> str:
    """Start a job with the roster's form; the id the page's message names."""
    page.get_by_test_id("new-job-agent").fill(agent)
    page.get_by_test_id("new-job-name").fill(name)
    page.get_by_test_id("new-job-isolation").select_option(isolation)
    page.get_by_test_id("new-job-prompt").fill(prompt)
    page.get_by_test_id("new-job-start").click()
    flash = page.get_by_test_id("flash-ok")
    expect(flash).to_contain_text(f"· {name}")
    started = flash.inner_text().split(" · ")
    assert started[0] == "backgrounded" and started[2] == name, started
    return started[1]


# -- jobs of the real clients --------------------------------------------------------------


@pytest.fixture
def jobs(project: Path, isolated_env: Path) -> Iterator[Jobs]:
    with running_jobs(project, isolated_env) as at:
        yield at


def test_claude_and_codex_jobs_started_from_the_page_are_approved_denied_and_answer_live(
        browser: Browser, jobs: Jobs, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    gate = threading.Event()  # holds the model's answer to the reply until the page reloaded
    request.addfinalizer(gate.set)

    def last_step(agent: str) -> Any:
        def step(body: dict[str, Any]) -> Text:
            if REPLY in json.dumps(body):  # the reply: answered once the test opens the gate
                assert gate.wait(WAIT_MS / 1000), "the gate was never opened"
                return Text(f"{agent}: {GATED_ANSWER}")
            return Text(f"{agent} is done.")
        return step

    for agent in ("claude", "codex"):
        jobs.script(f"WEB-{agent.upper()}", [shell(agent, f"echo {agent} > {agent}.txt"),
                                              last_step(agent)])
    # `cos web` runs with `claude` and `codex` on PATH, talking to the scripted server.
    with opened(browser, jobs.project, jobs.env) as tab:
        page = tab.page
        claude = start_from_the_form(page, "claude", "WEB-CLAUDE: write claude.txt",
                                     "claude-job")
        codex = start_from_the_form(page, "codex", "WEB-CODEX: write codex.txt", "codex-job")
        for job in (claude, codex):  # the roster refreshes itself: no reload
            expect(job_row(page, job)).to_have_attribute("data-state", "blocked",
                                                          timeout=WAIT_MS)
            expect(job_row(page, job).get_by_test_id("job-waiting")).to_have_text(
                "permission prompt")
        screenshot(page, "roster", tmp_path)

        job_row(page, claude).get_by_test_id("job-approve").click()
        expect(page.get_by_test_id("flash-ok")).to_contain_text(f"allow · {claude}")
        job_row(page, codex).get_by_test_id("job-deny").click()
        expect(page.get_by_test_id("flash-ok")).to_contain_text(f"deny · {codex}")
        rows = jobs.rows()
        for job in (claude, codex):
            expect(job_row(page, job)).to_have_attribute("data-state", "done", timeout=WAIT_MS)
            expect(job_row(page, job).get_by_test_id("job-approve")).to_be_disabled()
        worktree = {job: Path(rows[job]["worktree"]) for job in (claude, codex)}
        assert (worktree[claude] / "claude.txt").read_text(encoding="utf-8") == "claude\n"
        assert not (worktree[codex] / "codex.txt").exists()  # denied: never ran

        # The Claude job's session page: a reply from its input box, the answer streamed in.
        job_row(page, claude).get_by_test_id("job-link").click()
        expect(page.get_by_test_id("job-controls")).to_have_attribute("data-job", claude)
        session = page.get_by_test_id("session-id").inner_text()
        before = seqs_shown(page)
        assert before == list(range(1, len(before) + 1)) and before
        page.get_by_test_id("input-text").fill(f"{REPLY}: and now answer")
        page.get_by_test_id("input-send").click()
        expect(page.get_by_test_id("flash-ok")).to_contain_text(f"sent to {claude}")
        started = page.locator('[data-testid="live-event"][data-type="task_started"]')
        expect(started).to_have_count(2)  # the reply's task, shown live over SSE
        jobs.until_asked(REPLY)  # the model is asked: the task is mid-stream
        page.reload()
        expect(page.get_by_test_id("session-id")).to_have_text(session)
        reloaded = seqs_shown(page)
        assert reloaded == list(range(1, len(reloaded) + 1))
        assert len(reloaded) > len(before)
        gate.set()
        answer = page.locator('[data-testid="live-event"][data-type="agent_message"]',
                              has_text=GATED_ANSWER)
        expect(answer).to_have_count(1)
        expect(page.locator('[data-testid="live-event"][data-type="task_complete"]')
               ).to_have_count(2)
        shown = seqs_shown(page)
        assert shown == list(range(1, len(shown) + 1)), shown  # none lost, none twice
        stored = [event["seq"] for event in jobs.events(claude)]
        assert stored[:len(shown)] == shown
        page.reload()  # the finished reply, now read from the transcript
        expect(page.get_by_test_id("turn").filter(has_text=GATED_ANSWER)).to_have_count(1)
        # Tokens per turn: the first task's and the reply's, each from the usage it reported.
        expect(page.get_by_test_id("token-chart")).to_be_visible()
        expect(page.get_by_test_id("token-bar")).to_have_count(2)
        screenshot(page, "session", tmp_path)

        # The sessions of both jobs, finished: the turns shown, the tool calls folded.
        for job, command in ((claude, "echo claude > claude.txt"),
                             (codex, "echo codex > codex.txt")):
            tab.open(f"/jobs/{job}")
            expect(page.get_by_test_id("job-controls")).to_have_attribute("data-job", job)
            turns = page.get_by_test_id("turn")
            roles = turns.evaluate_all("turns => turns.map(turn => turn.dataset.role)")
            assert roles[0] == "user" and "assistant" in roles and "tool_call" in roles, roles
            expect(turns.first).to_contain_text(f"WEB-{rows[job]['agent'].upper()}")
            call = page.locator('[data-testid="turn"][data-role="tool_call"]').first
            assert call.evaluate("details => details.tagName === 'DETAILS' && !details.open")
            expect(call.locator("pre")).to_be_hidden()
            call.locator("summary").click()  # unfolded
            expect(call.locator("pre")).to_be_visible()
            expect(call.locator("pre")).to_contain_text(command)
            expect(page.get_by_test_id("token-bar").first).to_be_visible()
        tab.check_quiet()


def test_the_checkpoints_of_a_job_whose_shell_deleted_files_rewind_from_the_page_and_undo(
        browser: Browser, jobs: Jobs, tmp_path: Path) -> None:
    project = jobs.project
    for name in ("alpha.txt", "beta.txt"):
        (project / name).write_text(f"{name} before the job\n", encoding="utf-8")
    git(project, "add", "alpha.txt", "beta.txt")
    git(project, "commit", "-q", "-m", "two files")
    jobs.script("WEB-DELETE", [shell("codex", "rm alpha.txt beta.txt"), Text("Deleted both.")])
    with opened(browser, project, jobs.env) as tab:
        page = tab.page
        job = start_from_the_form(page, "codex", "WEB-DELETE: delete alpha.txt and beta.txt",
                                  "deleter", isolation="none")
        expect(job_row(page, job)).to_have_attribute("data-state", "blocked", timeout=WAIT_MS)
        job_row(page, job).get_by_test_id("job-approve").click()
        expect(job_row(page, job)).to_have_attribute("data-state", "done", timeout=WAIT_MS)
        assert not (project / "alpha.txt").exists() and not (project / "beta.txt").exists()

        page.get_by_test_id("nav-checkpoints").click()
        rows = page.get_by_test_id("checkpoint-row")
        expect(rows.first).to_be_visible()
        screenshot(page, "checkpoints", tmp_path)
        # The newest checkpoint that still holds both files: the one taken before the rm.
        listed = rows.evaluate_all("rows => rows.map(row => row.dataset.checkpoint)")
        deleted = page.locator('[data-testid="diff-file"][data-action="delete"]')
        for checkpoint in listed:
            tab.open(f"/checkpoints/{checkpoint}")
            expect(page.get_by_test_id("rewind-preview")).to_be_visible()
            if deleted.count():
                break
        else:
            raise AssertionError(f"no checkpoint of {listed} holds the deleted files")
        assert sorted(deleted.evaluate_all("files => files.map(f => f.dataset.path)")) == [
            "alpha.txt", "beta.txt"]
        # One word for each file's change, the same in the diff and in the rewind list.
        for testid in ("diff-file", "rewind-file"):
            listed = page.get_by_test_id(testid)
            assert sorted(listed.evaluate_all(
                "files => files.map(f => f.dataset.path + ' ' + f.dataset.change)")) == [
                "alpha.txt deleted", "beta.txt deleted"]
            expect(listed.first.locator(".change-deleted")).to_have_text("deleted")
        expect(page.get_by_test_id("diffs")).to_contain_text("-alpha.txt before the job")
        restored = page.get_by_test_id("rewind-file")
        assert sorted(restored.evaluate_all(
            "files => files.map(f => f.dataset.path + ' ' + f.dataset.action)")) == [
            "alpha.txt create", "beta.txt create"]
        screenshot(page, "checkpoint", tmp_path)

        tab.check_quiet()
        page.get_by_test_id("rewind-apply").click()  # the confirmation is not ticked
        expect(page.get_by_test_id("flash-error")).to_contain_text("tick the confirmation")
        tab.expect_refused(f"/checkpoints/{checkpoint}/rewind", 400)
        assert not (project / "alpha.txt").exists()
        page.get_by_test_id("rewind-confirm").check()
        page.get_by_test_id("rewind-apply").click()
        expect(page.get_by_test_id("rewound")).to_have_text("Rewound")
        for name in ("alpha.txt", "beta.txt"):
            assert (project / name).read_text(encoding="utf-8") == f"{name} before the job\n"

        page.get_by_test_id("undo").click()
        expect(page.get_by_test_id("rewound")).to_have_text("Undone")
        assert not (project / "alpha.txt").exists() and not (project / "beta.txt").exists()
        tab.check_quiet()


# -- security in the DOM -------------------------------------------------------------------


def test_open_lands_the_browser_on_the_roster_through_a_page_only_its_user_reads(
        browser: Browser, project: Path, tmp_path: Path) -> None:
    said = tmp_path / "browser-argv"
    starter = tmp_path / "browser"  # what `--open` starts: it hands its argument over
    starter.write_text(f"#!/bin/sh\necho \"$1\" > {said}.tmp && mv {said}.tmp {said}\n",
                       encoding="utf-8")
    starter.chmod(0o755)
    web = serve(project, {**os.environ, "BROWSER": str(starter)}, "--open")
    context = browser.new_context()
    try:
        until(said.exists, "cos web to start the browser")
        url = said.read_text(encoding="utf-8").strip()
        assert url.startswith("file://") and web.token not in url
        page = context.new_page()
        page.goto(url)  # the file sends the browser on to the token URL, then the roster
        page.wait_for_url(web.home)
        expect(page.get_by_test_id("roster")).to_be_visible()
        assert context.cookies() == []
    finally:
        context.close()
        stop(web)


# Each part, had it become markup, would set window.cosPwned (and fetch /x: a console error).
HOSTILE = ('<script>window.cosPwned = "script"</script> '
           '<img src=x onerror="window.cosPwned = \'img\'"> '
           '[click](javascript:window.cosPwned=\'md\') '
           '<a href="javascript:window.cosPwned=\'a\'">here</a> see https://example.com/ok')


def assert_inert(tab: Tab) -> None:
    """Nothing of the transcript became a script, a handler, an element or a javascript: link;
    its text is shown as text."""
    page = tab.page
    assert page.evaluate("() => window.cosPwned") is None
    scripts = page.locator("script").evaluate_all(
        "scripts => scripts.map(s => [s.getAttribute('src'), s.textContent])")
    root = f"/{tab.web.token}"
    assert scripts == [[f"{root}/static/htmx.min.js", ""], [f"{root}/static/web.js", ""]]
    hrefs = page.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert not [h for h in hrefs if str(h).strip().lower().startswith("javascript")], hrefs
    assert "https://example.com/ok" in hrefs  # an http(s) URL stays a link
    assert page.locator("img, iframe, object, embed").count() == 0
    handlers = page.locator("*").evaluate_all(
        "all => all.flatMap(e => [...e.attributes].map(a => a.name))"
        ".filter(name => name.startsWith('on'))")
    assert handlers == []


def test_a_transcript_holding_scripts_and_javascript_links_renders_inert_live_and_reloaded(
        tab: Tab, project: Path) -> None:
    page = tab.page
    done = cos("bg", "--json", "--agent", f"python:{ECHO_TARGET}", "--isolation", "none",
               HOSTILE, cwd=project)
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)["id"]
    expect(job_row(page, job)).to_have_attribute("data-state", "done", timeout=WAIT_MS)
    job_row(page, job).get_by_test_id("job-link").click()
    echoed = page.locator('[data-testid="live-event"][data-type="agent_message"]')
    expect(echoed).to_have_count(1)
    expect(echoed).to_contain_text(f"echo: {HOSTILE}")
    expect(page.get_by_test_id("turn").filter(has_text=f"echo: {HOSTILE}")).to_have_count(1)
    assert_inert(tab)

    again = HOSTILE.replace("here", "there")
    page.get_by_test_id("input-text").fill(again)
    page.get_by_test_id("input-send").click()
    expect(echoed).to_have_count(2)  # appended by the page's script from the SSE event
    expect(echoed.nth(1)).to_contain_text(f"echo: {again}")
    assert_inert(tab)
    page.reload()
    expect(page.get_by_test_id("turn").filter(has_text=f"echo: {again}")).to_have_count(1)
    assert_inert(tab)
    tab.check_quiet()


# -- the other pages -----------------------------------------------------------------------


def test_the_sessions_tasks_and_search_pages_answer_from_the_browser(
        tab: Tab, project: Path, tmp_path: Path) -> None:
    page = tab.page
    sessions = [python_session(project, words) for words in
                ("hello wombat", "plan the fence", "paint the fence")]
    assert cos("tasks", "new", "paint the fence", cwd=project).returncode == 0
    assert cos("tasks", "new", "buy the paint", cwd=project).returncode == 0
    assert cos("work-log", "add", "fence primed", cwd=project).returncode == 0

    page.get_by_test_id("nav-sessions").click()
    rows = page.get_by_test_id("session-row")
    expect(rows).to_have_count(3)
    assert sorted(rows.evaluate_all("rows => rows.map(r => r.dataset.session)")) == sorted(
        sessions)
    screenshot(page, "sessions", tmp_path)
    page.get_by_test_id("session-search").fill(sessions[0][-4:])
    page.get_by_test_id("session-filter-go").click()
    expect(rows).to_have_count(1)
    expect(rows).to_have_attribute("data-session", sessions[0])
    rows.get_by_test_id("session-link").click()
    expect(page.get_by_test_id("session-id")).to_have_text(sessions[0])
    expect(page.get_by_test_id("turn").filter(has_text="echo: hello wombat")).to_have_count(1)

    page.get_by_test_id("nav-tasks").click()
    expect(page.get_by_test_id("task-row")).to_have_count(2)
    expect(page.get_by_test_id("work-log-entry")).to_contain_text("fence primed")
    screenshot(page, "tasks", tmp_path)

    page.get_by_test_id("nav-search").click()
    page.get_by_test_id("search-query").fill("wombat")
    page.get_by_test_id("search-go").click()
    expect(page.get_by_test_id("result").first).to_contain_text("wombat")
    screenshot(page, "search", tmp_path)
    tab.check_quiet()


def test_a_claude_sessions_subagents_unfold_under_the_task_calls_that_started_them(
        tab: Tab, tmp_path: Path) -> None:
    copy_claude_fixtures(Path.home() / ".claude")  # a 1.0.x session with two inline subagents
    page = tab.page
    tab.open(f"/sessions/{VIEWER}")
    expect(page.get_by_test_id("session-id")).to_have_text(VIEWER)
    expect(page.get_by_test_id("token-chart")).to_have_attribute("data-source", "claude")
    sidechains = page.get_by_test_id("sidechain")
    expect(sidechains).to_have_count(2)
    for index in range(2):  # each right after the Task call that started it, folded
        folded = sidechains.nth(index)
        assert folded.evaluate(
            "node => node.previousElementSibling.dataset.role === 'tool_call' && "
            "node.previousElementSibling.querySelector('summary').textContent"
            ".includes('Task') && !node.open")
        expect(folded.get_by_test_id("sidechain-turn").first).to_be_hidden()
    first = sidechains.first
    first.locator("summary").first.click()
    expect(first.get_by_test_id("sidechain-turn").first).to_be_visible()
    expect(first.get_by_test_id("sidechain-turn").first).to_contain_text("package.json")
    first.scroll_into_view_if_needed()
    screenshot(page, "session-subagents", tmp_path)
    tab.check_quiet()


def test_a_sessions_tool_calls_fold_under_what_they_did_and_its_cost_shows_here_and_exported(
        tab: Tab, project: Path, tmp_path: Path) -> None:
    copy_codex_fixtures(Path.home() / ".codex")
    page = tab.page
    tab.open(f"/sessions/{TOOLS}")
    command = "$ sed -n '1,180p' /Users/Sample_User/.codex/plugins/cache/openai-curated/"
    line = page.get_by_test_id("call-summary").filter(has_text=command).first
    expect(line).to_be_visible()  # the call's one line, its input folded away
    call = page.locator('[data-testid="turn"][data-role="tool_call"]').filter(has=line)
    assert call.evaluate("details => details.tagName === 'DETAILS' && !details.open")
    expect(call.locator("pre")).to_be_hidden()
    # Tokens and cost, of the session and of each turn (gpt-5.5: $5, $0.50 cached, $30 out).
    turns = [(57_906, 37_120, 374), (6_055_836 - 57_906, 4_929_536 - 37_120, 9_118 - 374)]
    costs = [((sent - cached) * 5 + cached * 0.5 + out * 30) / 1e6 for sent, cached, out in turns]
    expect(page.get_by_test_id("session-cost")).to_have_text(f"${sum(costs):,.2f}")
    expect(page.get_by_test_id("turn-cost")).to_have_text([f"${c:,.2f}" for c in costs])
    # A time says when, the exact time on hover.
    started = page.get_by_test_id("session-facts").locator("time").first
    assert started.get_attribute("title") == "2026-05-11 08:26:55 UTC"
    line.scroll_into_view_if_needed()
    shot = screenshot(page, "session-tools", tmp_path, full_page=False)
    box, window = line.bounding_box(), page.viewport_size
    assert box is not None and window is not None and shot.stat().st_size > 0
    # The line is within what the screenshot shows, whole.
    assert 0 <= box["x"] and box["x"] + box["width"] <= window["width"] \
        and 0 <= box["y"] and box["y"] + box["height"] <= window["height"], (box, window)
    line.click()  # unfolded: the whole input, indented
    expect(call.locator("pre")).to_be_visible()
    expect(call.locator("pre")).to_contain_text('"cmd": "sed -n')

    # The HTML export, opened from its file: the same facts, look and folded calls.
    done = cos("export", TOOLS, "--format", "html", cwd=project)
    assert done.returncode == 0, done.stderr
    exported = tmp_path / "export.html"
    exported.write_text(done.stdout, encoding="utf-8")
    page.goto(exported.as_uri())
    header = page.locator("header.session")
    for fact in ("codex", "feat/codex-agent-plugin", "gpt-5.5", f"${sum(costs):,.2f}"):
        expect(header).to_contain_text(fact)
    exported_line = page.locator("code.call").filter(has_text=command).first
    expect(exported_line).to_be_visible()
    assert page.locator("details.turn.tool_call").first.evaluate("d => !d.open")
    assert page.evaluate("getComputedStyle(document.querySelector('.turn.user'))"
                         ".borderLeftStyle") == "solid"  # the inlined stylesheet applies
    screenshot(page, "export", tmp_path, full_page=False)
    tab.check_quiet()


def test_the_roster_shows_a_jobs_state_and_what_it_waits_for_at_a_glance(
        tab: Tab, project: Path, tmp_path: Path) -> None:
    done = cos("bg", "--json", "--agent", f"python:{ECHO_TARGET}", "--isolation", "none",
               "--name", "writer", "write notes.md: from the roster", cwd=project)
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)["id"]
    page = tab.page
    row = job_row(page, job)
    expect(row).to_have_attribute("data-state", "blocked", timeout=WAIT_MS)
    state, waiting = row.get_by_test_id("job-state"), row.get_by_test_id("job-waiting")
    expect(state).to_have_text("blocked")
    expect(state).to_have_class("state state-blocked")
    expect(waiting).to_have_text("permission prompt")
    expect(waiting).to_be_visible()
    assert waiting.evaluate("w => getComputedStyle(w).backgroundColor") != "rgba(0, 0, 0, 0)"
    expect(row.locator("time")).to_have_text(re.compile(r"^(just now|\d+ min ago)$"))
    row.get_by_test_id("job-approve").click()
    expect(row).to_have_attribute("data-state", "done", timeout=WAIT_MS)
    expect(row.get_by_test_id("job-state")).to_have_class("state state-done")
    tab.check_quiet()
