"""`cos web`'s pages as a user reaches them (interfaces/web/app.py; docs/web.md): a real server
started as `cos web --json --port 0` in a project, asked over HTTP with httpx — each page with
real sessions, jobs, checkpoints and tasks, the actions of the roster and of a session, and bad
input. Who may reach it is in test_security.py, the live events in test_live.py, the browser
tests are elsewhere."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from coding_os import api
from tests.helpers import WEB_WAIT as WAIT
from tests.helpers import (ECHO_AGENT, TOOLS, VIEWER, Page, Web, bg_job, copy_claude_fixtures,
                           copy_codex_fixtures, copy_gemini_fixtures, cos, job_session, page,
                           python_session, until)
from tests.helpers import GEMINI_PLAIN


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
    assert shown.testid("live")[0]["data-events-url"] == f"/{web.token}/sessions/{session}/events"
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
    assert more["hx-get"] == f"/{web.token}/sessions/{session}/turns?offset=100"
    rest = page(client, web.inside(more["hx-get"]))
    assert [t["data-n"] for t in rest.testid("turn")] == [str(n) for n in range(100, 130)]
    assert not rest.testid("turns-more")
    page(client, f"/sessions/{session}/turns?offset=130", 404)


def test_a_session_page_says_its_tokens_and_cost_per_session_and_per_turn(
        web: Web, project: Path) -> None:
    copy_codex_fixtures(Path.home() / ".codex")
    client = web.client()
    shown = client.get(f"/sessions/{TOOLS}").text
    # gpt-5.5 at $5 a million fresh input tokens, $0.50 cached, $30 output, from its rollout.
    turns = [(57_906, 37_120, 374), (6_055_836 - 57_906, 4_929_536 - 37_120, 9_118 - 374)]
    costs = [((sent - cached) * 5 + cached * 0.5 + out * 30) / 1e6 for sent, cached, out in turns]
    assert re.findall(r'data-testid="turn-cost">([^<]*)<', shown) == [
        f"${dollars:,.2f}" for dollars in costs]
    [total] = re.findall(r'data-testid="session-cost"><span class="cost">([^<]*)<', shown)
    assert total == f"${sum(costs):,.2f}"
    assert "6,055,836 in (4,929,536 read from the cache, 0 written to it) · 9,118 out" in shown
    bars = Page(shown).testid("token-bar")
    assert [round(float(str(bar["data-cost"])), 6) for bar in bars] == [
        round(dollars, 6) for dollars in costs]
    # A session whose model no price is known for: its tokens, and no cost.
    session = python_session(project, "hello")
    assert "data-testid=\"session-cost\"" not in client.get(f"/sessions/{session}").text


def test_a_session_page_folds_each_tool_call_under_the_line_that_says_what_it_did(
        web: Web, project: Path) -> None:
    copy_claude_fixtures(Path.home() / ".claude")
    copy_codex_fixtures(Path.home() / ".codex")
    client = web.client()
    line = re.compile(r'<details class="turn tool_call" id="turn-\d+" data-n="\d+" '
                      r'data-testid="turn" data-role="tool_call">\s*<summary><span class="tool">'
                      r'([^<]*)</span><code class="call" data-testid="call-summary">([^<]*)</code>')
    claude = line.findall(client.get(f"/sessions/{VIEWER}").text)
    assert ("Glob", "**/*.md in ~/.claude/commands") in claude
    assert ("Task", "Analyze project structure") in claude
    assert ("TodoWrite", "4 to-dos") in claude
    codex = line.findall(client.get(f"/sessions/{TOOLS}").text)
    assert ("exec_command", "$ sed -n &#39;1,180p&#39; /Users/Sample_User/.codex/plugins/cache/"
            "openai-curated/superpowers/63976030/skills/using-superpowers/SKILL.md") in codex
    # Unfolded, the call's whole input, its JSON indented.
    assert '<pre>{\n  &#34;pattern&#34;: &#34;**/*.md&#34;,' in client.get(
        f"/sessions/{VIEWER}").text


def test_a_gemini_session_page_shows_its_live_conversation_with_each_tool_call_folded(
        web: Web, project: Path, tmp_path: Path) -> None:
    copy_gemini_fixtures(Path.home(), project, tmp_path / "legacy")
    client = web.client()
    shown = client.get(f"/sessions/{GEMINI_PLAIN}")
    assert shown.status_code == 200
    text = shown.text
    assert "RESUMED: what does notes.txt hold now?" in text
    assert "notes.txt holds alpha and gamma." in text
    assert "&lt;session_context&gt;" not in text and "<session_context>" not in text
    line = re.compile(r'data-role="tool_call">\s*<summary><span class="tool">([^<]*)</span>'
                      r'<code class="call" data-testid="call-summary">([^<]*)</code>')
    assert [tool for tool, _ in line.findall(text)] == [
        "run_shell_command", "write_file", "replace", "run_shell_command"]
    listed = client.get("/sessions").text
    assert GEMINI_PLAIN[:8] in listed


def test_times_read_as_how_long_ago_with_the_exact_time_on_hover(
        web: Web, project: Path) -> None:
    session = python_session(project, "hello")
    copy_claude_fixtures(Path.home() / ".claude")
    client = web.client()
    listed = client.get("/sessions?scope=all").text
    mine = listed.split(f'data-session="{session}"')[1].split("</tr>")[0]
    assert re.search(r'<time datetime="[^"]+" title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC">'
                     r'(just now|\d+ min ago)</time>', mine), mine
    # A time over a month old is its date; the exact one on hover.
    old = listed.split(f'data-session="{VIEWER}"')[1].split("</tr>")[0]
    assert '<time datetime="2025-09-07T09:54:26.' in old
    assert re.search(r'title="2025-09-07 09:54:2\d UTC">2025-09-07</time>', old), old


def test_the_checkpoint_page_names_each_files_change_alike_in_the_diff_and_the_rewind_list(
        web: Web, project: Path) -> None:
    for name in ("kept.txt", "gone.txt"):
        (project / name).write_text(f"{name}\n", encoding="utf-8")
    made = cos("checkpoint", "create", "--json", cwd=project)
    assert made.returncode == 0, made.stderr
    checkpoint = json.loads(made.stdout)["id"]
    (project / "kept.txt").write_text("kept.txt, changed\n", encoding="utf-8")
    (project / "gone.txt").unlink()
    (project / "new.txt").write_text("new\n", encoding="utf-8")
    shown = client_page = web.client().get(f"/checkpoints/{checkpoint}").text
    found = Page(client_page)
    expected = {"kept.txt": "modified", "gone.txt": "deleted", "new.txt": "added"}
    assert {f["data-path"]: f["data-change"] for f in found.testid("diff-file")} == expected
    assert {f["data-path"]: f["data-change"] for f in found.testid("rewind-file")} == expected
    # The words a reader sees are the same in both lists.
    diff, rewind = shown.split('data-testid="rewind-preview"')
    said = r'<span class="change change-(\w+)">(\w+)</span> <code>([^<]+)</code>'
    assert sorted((path, word) for _, word, path in re.findall(said, diff)) == \
        sorted((path, word) for _, word, path in re.findall(said, rewind)) == \
        sorted(expected.items())
    assert "Since this checkpoint: 1 added · 1 modified · 1 deleted." in rewind


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
    # Its state and what it waits for at a glance, started how long ago (the time on hover).
    row = client.get("/roster/rows").text.split(f'data-job="{job["id"]}"')[1].split("</tr>")[0]
    assert '<span class="state state-blocked" data-testid="job-state">blocked</span>' in row
    assert '<span class="waiting" data-testid="job-waiting">permission prompt</span>' in row
    # What it asks: the tool, the path, the request's id and the diff of the write.
    [asked] = page(client, "/roster/rows").testid("job-approval")
    assert asked["data-request"] == "r1"
    assert f'<code data-testid="job-approval-path">{project / "notes.txt"}</code>' in row
    assert "request r1" in row and "+from the web" in row
    assert re.search(r'<time datetime="[^"]+" title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC">'
                     r'(just now|\d+ min ago)</time>', row), row
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



def test_a_gemini_session_page_charts_tokens_per_turn_from_its_session_file(
        web: Web, project: Path, tmp_path: Path) -> None:
    copy_gemini_fixtures(Path.home(), project, tmp_path / "legacy")
    shown = page(web.client(), f"/sessions/{GEMINI_PLAIN}")
    [chart] = shown.testid("token-chart")
    assert chart["data-source"] == "gemini"
    assert "from the Gemini CLI session file" in "".join(shown.text)
    bars = shown.testid("token-bar")
    # Two prompts (PLAIN, then RESUMED). Every scripted answer reported 5 output tokens and a
    # thought 3 (fixtures/SOURCES.md): the first turn's four answers and one thought, the
    # resumed turn's two answers; the resume's rewrite of the first turn dropped its `tokens`,
    # which are read from that turn's earlier lines.
    assert [int(str(bar["data-output"])) for bar in bars] == [4 * 5 + 3, 2 * 5]
    row = json.loads(cos("sessions", "show", GEMINI_PLAIN, "--json", cwd=project).stdout)
    assert sum(int(str(bar["data-input"])) + int(str(bar["data-output"])) for bar in bars) \
        == row["tokens"]  # the session's tokens as the one list counts them
    assert max(int(str(bar["height"])) for bar in bars) == 100
