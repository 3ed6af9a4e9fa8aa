"""The web agent view, `cos web` (DESIGN.md §10; docs/web.md): a Starlette app rendering Jinja2
pages over `coding_os.api` — the roster of background jobs, the sessions, a session's
conversation with its live tail, checkpoints with diffs and rewind, tasks and the work log,
search — with htmx (served from the package) for actions and partial updates and Server-Sent
Events for live ones. The app is thin: every page's data comes from the api the CLI uses.
Who may reach it is security.py's, how it is served server.py's, the live feeds live.py's.
Every page lives under the token's path (`root`, the request's `root_path`): the links and
redirects of the pages carry it.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import jinja2
from markupsafe import Markup, escape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from coding_os import api
from coding_os.adapters.prices import shown_cost
from coding_os.adapters.tool_calls import shown_input
from coding_os.clock import parse_time, shown_time
from coding_os.errors import (Ambiguous, Conflict, CosError, CrossProject, InvalidId,
                              InvalidInput, NotFound)
from coding_os.interfaces.web import live
from coding_os.interfaces.web.security import CSRF_FIELD, Guard
from coding_os.sessions.export import STYLESHEET

__all__ = ["create_app", "SESSIONS_PAGE", "TURNS_PAGE", "CHECKPOINTS_PAGE", "CHANGES",
           "DIFF_CHANGES", "REWIND_CHANGES"]

HERE = os.path.dirname(os.path.abspath(__file__))
SESSIONS_PAGE = 50
TURNS_PAGE = 100
CHECKPOINTS_PAGE = 50
LIVE_SHOWN = 200  # stored events a session page shows before its live tail
QUERY_MAX = 500
_URL = re.compile(r"https?://[^\s<>\"'`]+")
# One vocabulary for a file's change on the checkpoint page, in the diff and in the rewind
# list alike: what changed from the checkpoint to the tree now (or, against the previous
# checkpoint, in its turn). The diff names the change from its old side to its new one; a
# rewind names what it does to undo it.
CHANGES = ("added", "modified", "deleted")
DIFF_CHANGES = {"create": "added", "change": "modified", "delete": "deleted"}
REWIND_CHANGES = {"delete": "added", "restore": "modified", "create": "deleted"}


def _linkify(text: object) -> Markup:
    """`text` escaped, its http(s) URLs made links (no other scheme ever becomes one)."""
    raw = "" if text is None else str(text)
    out: list[str] = []
    last = 0
    for match in _URL.finditer(raw):
        out.append(str(escape(raw[last:match.start()])))
        url = escape(match.group(0))
        out.append(f'<a href="{url}" rel="noopener noreferrer nofollow" target="_blank">{url}</a>')
        last = match.end()
    out.append(str(escape(raw[last:])))
    return Markup("".join(out))


def _ago(value: object, now: float | None = None) -> Markup:
    """A time as how long ago it was ("3 min ago"), the exact time on hover; "" for none."""
    when = parse_time(value)
    if when is None:
        return Markup("") if value in (None, "") else Markup(escape(str(value)))
    seconds = (time.time() if now is None else now) - when.timestamp()
    exact = shown_time(value)
    if seconds < -60:
        said = exact  # a clock ahead of this one: the time itself
    elif seconds < 45:
        said = "just now"
    elif seconds < 3600:
        said = f"{max(1, round(seconds / 60))} min ago"
    elif seconds < 86400:
        said = f"{round(seconds / 3600)} h ago"
    elif seconds < 2 * 86400:
        said = "yesterday"
    elif seconds < 30 * 86400:
        said = f"{int(seconds // 86400)} days ago"
    else:
        said = exact[:10]
    return Markup('<time datetime="{}" title="{}">{}</time>').format(
        when.isoformat(), exact, said)


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.join(HERE, "templates")),
        autoescape=True, trim_blocks=True,
        lstrip_blocks=True)
    environment.filters["linkify"] = _linkify
    environment.filters["tojson_text"] = lambda value: json.dumps(value, ensure_ascii=False,
                                                                  indent=2, default=str)
    environment.filters["ago"] = _ago
    environment.filters["cost"] = shown_cost
    environment.filters["shown_input"] = shown_input
    environment.filters["number"] = lambda value: f"{int(value or 0):,}"
    return environment


def _status(exc: BaseException) -> int:
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, (InvalidInput, CrossProject)):
        return 400
    if isinstance(exc, (Conflict, Ambiguous)):
        return 409
    return 500


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, CosError):
        return text
    return f"internal error: {type(exc).__name__}: {text}"


class View:
    """The pages of one server: the project it serves (`cwd`) and its templates."""

    def __init__(self, cwd: str, env: Mapping[str, str] | None = None) -> None:
        self.cwd = cwd
        self.env = env
        self.templates = _environment()
        self.streams = live.Streams()

    # -- rendering ----------------------------------------------------------------------------

    def render(self, request: Request, name: str, code: int = 200,
               **context: Any) -> HTMLResponse:
        csrf = request.scope.get("state", {}).get("csrf", "")
        root = _root(request)
        html = self.templates.get_template(name).render(
            csrf=csrf, csrf_field=CSRF_FIELD, root=root, path=request.url.path[len(root):],
            cwd=self.cwd, **context)
        return HTMLResponse(html, status_code=code)

    def error(self, request: Request, exc: BaseException) -> HTMLResponse:
        status = _status(exc)
        if request.headers.get("hx-request"):
            return self.render(request, "flash.html", status, message=_one_line(exc),
                               ok=False)
        return self.render(request, "error.html", status, message=_one_line(exc),
                           status=status)

    def page(self, handler: Callable[[Request], Response]) -> Callable[[Request], Response]:
        """A route whose CosError (and any other error) is a page with one line, never a
        traceback."""
        def route(request: Request) -> Response:
            try:
                return handler(request)
            except CosError as exc:
                return self.error(request, exc)
            except Exception as exc:  # noqa: BLE001 - one line for a bug in cos, not a traceback
                sys.stderr.write(f"cos web: {_one_line(exc)}\n")
                return self.error(request, exc)
        return route

    def done(self, request: Request, message: str, back: str) -> Response:
        """What an action answers: a line for htmx, a redirect for a plain form."""
        if request.headers.get("hx-request"):
            return self.render(request, "flash.html", message=message, ok=True)
        return RedirectResponse(_root(request) + back, status_code=303)

    # -- the roster ----------------------------------------------------------------------------

    def _jobs(self, request: Request) -> list[dict[str, Any]]:
        return api.agents_list(every=request.query_params.get("all") == "1", cwd=self.cwd,
                               env=self.env)

    def roster(self, request: Request) -> Response:
        return self.render(request, "roster.html", jobs=self._jobs(request),
                           every=request.query_params.get("all") == "1")

    def roster_rows(self, request: Request) -> Response:
        return self.render(request, "roster_rows.html", jobs=self._jobs(request))

    async def start_job(self, request: Request) -> Response:
        form = await request.form()
        fields = {key: str(form.get(key) or "").strip() for key in
                  ("agent", "prompt", "name", "isolation", "recipe", "params")}

        def start() -> Response:
            agent = fields["agent"] or "claude"
            params = [line.strip() for line in fields["params"].splitlines() if line.strip()]
            common: dict[str, Any] = {"name": fields["name"] or None,
                                      "isolation": fields["isolation"] or "worktree",
                                      "cwd": self.cwd, "env": self.env}
            if agent == "exec":
                row = api.bg_start(None, command=fields["prompt"], **common)
            elif fields["recipe"]:
                row = api.bg_start(fields["prompt"] or None, agent=fields["agent"] or None,
                                   recipe=fields["recipe"], params=params, **common)
            else:
                row = api.bg_start(fields["prompt"], agent=agent, **common)
            return self.done(request, f"backgrounded · {row['id']} · {row['name']}", "/")

        return await _in_thread(self.page(lambda _: start()), request)

    async def job_action(self, request: Request) -> Response:
        job = request.path_params["job"]
        action = request.path_params["action"]
        form = await request.form()

        def act() -> Response:
            if action == "reply":
                text = str(form.get("text") or "")
                done = api.job_reply(job, text, env=self.env)
                message = f"sent to {done['id']}"
            elif action == "approve":
                decision = str(form.get("decision") or "allow")
                if decision not in ("allow", "deny"):
                    raise InvalidInput("the decision is allow or deny")
                done = api.job_approve(job, decision == "allow",
                                       str(form.get("request") or "") or None, env=self.env)
                message = f"{done['decision']} · {done['id']} · request {done['request']}"
            elif action == "interrupt":
                done = api.job_interrupt(job, env=self.env)
                message = f"interrupted {done['id']}"
            elif action == "stop":
                done = api.job_stop(job, env=self.env)
                message = f"stopped {done['id']}"
            elif action == "respawn":
                rows = api.job_respawn(job, env=self.env)
                message = f"respawned {', '.join(str(r['id']) for r in rows)}"
            else:
                raise NotFound(f"no action {action[:40]!r}")
            return self.done(request, message, str(form.get("back") or "/")
                             if str(form.get("back") or "/").startswith("/") else "/")

        return await _in_thread(self.page(lambda _: act()), request)

    def job(self, request: Request) -> Response:
        feed_row = api.job_logs(request.path_params["job"], env=self.env)["job"]
        session = feed_row.get("cos_session")
        if not session:
            raise NotFound(f"job {feed_row['id']} has no session yet: reload in a moment")
        return RedirectResponse(f"{_root(request)}/sessions/{session}", status_code=303)

    async def job_events(self, request: Request) -> Response:
        if not self.streams.take():
            return self.streams.busy()
        try:
            since = live.resume_point(request.headers, request.query_params)
            feed = await _run(api.job_feed, request.path_params["job"], since, self.env)
        except BaseException as exc:
            self.streams.give_back()
            if isinstance(exc, CosError):
                return self.error(request, exc)
            raise
        return self.streams.response(live.job_stream(feed), feed.close)

    # -- sessions ------------------------------------------------------------------------------

    def sessions(self, request: Request) -> Response:
        query = request.query_params
        search = query.get("q") or None
        scope = query.get("scope") or "repo"
        agent = query.get("agent") or None
        page = _page_number(query.get("page"))
        if search is not None and len(search) > QUERY_MAX:
            raise InvalidInput(f"the search is over {QUERY_MAX} characters")
        rows = api.list_sessions(scope=scope, agent=agent, search=search,
                                 limit=page * SESSIONS_PAGE + 1, cwd=self.cwd, env=self.env)
        shown = rows[(page - 1) * SESSIONS_PAGE: page * SESSIONS_PAGE]
        if page > 1 and not shown:
            raise NotFound(f"page {page} is past the end of the sessions")
        return self.render(request, "sessions.html", sessions=shown, page=page,
                           more=len(rows) > page * SESSIONS_PAGE, q=search or "",
                           scope=scope, agent=agent or "", scopes=api.SESSION_SCOPES)

    def _turns(self, request: Request, offset: int) -> dict[str, Any]:
        """A page of the conversation, with the sidechains started in it (`sidechains`: by
        the turn's index) and those started nowhere on it (`unplaced`)."""
        sid, branch = request.path_params["session"], _branch(request.query_params.get("branch"))
        turns: dict[str, Any] = api.session_turns(sid, offset, TURNS_PAGE, branch,
                                                  cwd=self.cwd, env=self.env)
        shown = range(offset, offset + len(turns["turns"]))
        placed: dict[int, list[dict[str, Any]]] = {}
        unplaced = []
        for sidechain in api.session_sidechains(sid, branch, cwd=self.cwd,
                                                env=self.env)["sidechains"]:
            if sidechain["turn"] is None:
                unplaced.append(sidechain)
            elif sidechain["turn"] in shown:
                placed.setdefault(sidechain["turn"], []).append(sidechain)
        turns["sidechains"], turns["unplaced"] = placed, unplaced
        return turns

    def session(self, request: Request) -> Response:
        sid = request.path_params["session"]
        row = api.show_session(sid, cwd=self.cwd, env=self.env)
        sid = str(row["id"])
        turns = self._turns(request, 0)
        tree = api.session_branches(row, env=self.env, cwd=self.cwd)
        try:
            # The last LIVE_SHOWN events only: the log's end first, then what follows it.
            end = api.session_events(sid, cwd=self.cwd, env=self.env, limit=0)["last_seq"]
            stored = api.session_events(sid, max(0, end - LIVE_SHOWN), cwd=self.cwd,
                                        env=self.env, limit=LIVE_SHOWN)
        except InvalidId:  # a native session under its agent's id: no events log of cos's
            stored = {"engine": False, "events": [], "last_seq": 0}
        return self.render(request, "session.html", session=row, turns=turns,
                           branch=request.query_params.get("branch") or "", tree=tree,
                           engine=stored["engine"], events=stored["events"],
                           last_seq=stored["last_seq"], job=api.session_job(sid, env=self.env),
                           chart=_token_chart(api.session_tokens(sid, cwd=self.cwd,
                                                                 env=self.env)))

    def session_turns(self, request: Request) -> Response:
        offset = _offset(request.query_params.get("offset"))
        return self.render(request, "turns.html", turns=self._turns(request, offset),
                           session={"id": request.path_params["session"]},
                           branch=request.query_params.get("branch") or "")

    async def session_events(self, request: Request) -> Response:
        sid = request.path_params["session"]
        if not self.streams.take():
            return self.streams.busy()
        try:
            since = live.resume_point(request.headers, request.query_params)
            job = await _run(api.session_job, sid, self.env)
            if job is not None:
                feed = await _run(api.job_feed, str(job["id"]), since, self.env)
                return self.streams.response(live.job_stream(feed), feed.close)
            stored = await _run(lambda: api.session_events(sid, since, cwd=self.cwd,
                                                           env=self.env, limit=0))
            if not stored["engine"]:
                raise NotFound(f"session {sid} is not run by cos: it has no live events")
        except BaseException as exc:
            self.streams.give_back()
            if isinstance(exc, CosError):
                return self.error(request, exc)
            raise
        return self.streams.response(live.log_stream(sid, since, self.cwd, self.env))

    async def session_input(self, request: Request) -> Response:
        sid = request.path_params["session"]
        form = await request.form()

        def send() -> Response:
            job = api.session_job(sid, env=self.env)
            if job is None:
                raise Conflict(f"session {sid} is not run by a background job: nothing to send "
                               "its input to (cos bg starts one)")
            done = api.job_reply(str(job["id"]), str(form.get("text") or ""), env=self.env)
            return self.done(request, f"sent to {done['id']}", f"/sessions/{sid}")

        return await _in_thread(self.page(lambda _: send()), request)

    def export(self, request: Request) -> Response:
        sid = request.path_params["session"]
        fmt = request.path_params["fmt"]
        text = api.export_session(sid, fmt, cwd=self.cwd, env=self.env,
                                  branch=_branch(request.query_params.get("branch")))
        kinds = {"md": "text/markdown", "json": "application/json", "html": "text/html"}
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", sid)[:120]
        return Response(text, media_type=f"{kinds[fmt]}; charset=utf-8", headers={
            "content-disposition": f'attachment; filename="{safe}.{fmt}"',
            "content-security-policy": "sandbox; default-src 'none'"})

    # -- checkpoints ---------------------------------------------------------------------------

    def checkpoints(self, request: Request) -> Response:
        page = _page_number(request.query_params.get("page"))
        session = request.query_params.get("session") or None
        rows = api.checkpoint_list(session, cwd=self.cwd, env=self.env)
        shown = rows[(page - 1) * CHECKPOINTS_PAGE: page * CHECKPOINTS_PAGE]
        if page > 1 and not shown:
            raise NotFound(f"page {page} is past the end of the checkpoints")
        return self.render(request, "checkpoints.html", checkpoints=shown, page=page,
                           more=len(rows) > page * CHECKPOINTS_PAGE, session=session or "")

    def checkpoint(self, request: Request) -> Response:
        cp = request.path_params["checkpoint"]
        against = request.query_params.get("against") or "tree"
        diffs = api.checkpoint_diff(cp, against, cwd=self.cwd, env=self.env)
        preview = api.rewind(cp, "code", dry_run=True, cwd=self.cwd, env=self.env)["code"]
        for f in diffs["files"]:
            f["change"] = DIFF_CHANGES.get(str(f["action"]), str(f["action"]))
        for f in preview["files"]:
            f["change"] = REWIND_CHANGES.get(str(f["action"]), str(f["action"]))
        changes = {name: sum(1 for f in preview["files"] if f["change"] == name)
                   for name in CHANGES}
        return self.render(request, "checkpoint.html", diffs=diffs, preview=preview,
                           changes=changes, against=against, result=None)

    async def rewind(self, request: Request) -> Response:
        cp = request.path_params["checkpoint"]
        form = await request.form()

        def apply() -> Response:
            if form.get("confirm") != "yes":
                raise InvalidInput("tick the confirmation to rewind the code (nothing changed)")
            done = api.rewind(cp, "code", cwd=self.cwd, env=self.env)
            return self.render(request, "rewound.html", result=done, undo=False)

        return await _in_thread(self.page(lambda _: apply()), request)

    async def undo(self, request: Request) -> Response:
        def apply() -> Response:
            done = api.rewind_undo(cwd=self.cwd, env=self.env)
            return self.render(request, "rewound.html", result=done, undo=True)

        return await _in_thread(self.page(lambda _: apply()), request)

    # -- tasks, work log, search ---------------------------------------------------------------

    def tasks(self, request: Request) -> Response:
        query = request.query_params
        board = api.task_list(query.get("status") or None, cursor=query.get("after") or None,
                              cwd=self.cwd, env=self.env)
        log = api.work_log(cursor=query.get("before") or None, cwd=self.cwd, env=self.env)
        return self.render(request, "tasks.html", board=board, log=log,
                           status=query.get("status") or "")

    def search(self, request: Request) -> Response:
        query = request.query_params.get("q")
        found = None
        if query:
            if len(query) > QUERY_MAX:
                raise InvalidInput(f"the search is over {QUERY_MAX} characters")
            found = api.search(query, cursor=request.query_params.get("before") or None,
                               cwd=self.cwd, env=self.env)
        return self.render(request, "search.html", q=query or "", found=found)

    def not_found(self, request: Request, exc: Exception) -> Response:
        return self.error(request, NotFound(f"no page {request.url.path[:200]}"))


def _root(request: Request) -> str:
    """The path every page of this server lives under (the token's: security.py)."""
    return str(request.scope.get("root_path", ""))


async def _run(function: Callable[..., Any], *args: Any) -> Any:
    import anyio.to_thread

    return await anyio.to_thread.run_sync(function, *args)


async def _in_thread(route: Callable[[Request], Response], request: Request) -> Response:
    result: Response = await _run(route, request)
    return result


def _page_number(raw: str | None) -> int:
    if raw is None or raw == "":
        return 1
    if not raw.isascii() or not raw.isdigit() or len(raw) > 9 or int(raw) < 1:
        raise InvalidInput(f"not a page number: {raw[:40]!r} (1 or more)")
    return int(raw)


def _offset(raw: str | None) -> int:
    if raw is None or raw == "":
        return 0
    if not raw.isascii() or not raw.isdigit() or len(raw) > 12:
        raise InvalidInput(f"not an offset: {raw[:40]!r} (0 or more)")
    return int(raw)


def _branch(raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > 9:
        raise InvalidInput(f"not a branch number: {raw[:40]!r}")
    return int(raw)


def _token_chart(tokens: dict[str, Any]) -> dict[str, Any] | None:
    """The chart of `api.session_tokens`: its source, its bars, each turn's with its height in
    the chart (0-100), and their `total` (the session's tokens and cost)."""
    from coding_os.sessions.usage import totals

    bars = [dict(turn) for turn in tokens["turns"]]
    if not bars:
        return None
    top = max(int(bar["input"]) + int(bar["output"]) for bar in bars) or 1
    for bar in bars:
        used = int(bar["input"]) + int(bar["output"])
        bar["height"] = max(1, round(100 * used / top)) if used else 0
    return {"source": tokens["source"], "bars": bars, "top": top, "total": totals(bars)}


def create_app(token: str, port: int, cwd: str | None = None,
               env: Mapping[str, str] | None = None) -> Any:
    """The ASGI app of `cos web` for the project of `cwd`, behind its Guard (`token`, the
    loopback `port` it answers to)."""
    view = View(os.path.realpath(cwd or os.getcwd()), env)
    page = view.page
    routes = [
        Route("/", page(view.roster)),
        Route("/roster/rows", page(view.roster_rows)),
        Route("/jobs", view.start_job, methods=["POST"]),
        Route("/jobs/{job}", page(view.job)),
        Route("/jobs/{job}/events", view.job_events),
        Route("/jobs/{job}/{action}", view.job_action, methods=["POST"]),
        Route("/sessions", page(view.sessions)),
        Route("/sessions/{session}", page(view.session)),
        Route("/sessions/{session}/turns", page(view.session_turns)),
        Route("/sessions/{session}/events", view.session_events),
        Route("/sessions/{session}/input", view.session_input, methods=["POST"]),
        Route("/sessions/{session}/export/{fmt:str}", page(view.export)),
        Route("/checkpoints", page(view.checkpoints)),
        Route("/checkpoints/{checkpoint}", page(view.checkpoint)),
        Route("/checkpoints/{checkpoint}/rewind", view.rewind, methods=["POST"]),
        Route("/rewind/undo", view.undo, methods=["POST"]),
        Route("/tasks", page(view.tasks)),
        Route("/search", page(view.search)),
        # The look of a conversation, which the HTML export inlines (sessions/export.py).
        Route("/static/conversation.css",
              lambda _: FileResponse(STYLESHEET, media_type="text/css; charset=utf-8")),
        Mount("/static", StaticFiles(directory=os.path.join(HERE, "static")), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={404: view.not_found,
                                                       405: view.not_found})
    return Guard(app, token, port)
