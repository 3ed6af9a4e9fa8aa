"""The interactive session picker of `cos resume` (DESIGN.md §4.3), on prompt_toolkit.

The first screen is one page of the index as it stands; what changed in the logs is imported in
a background thread and the list reloads when that is done, so a large store never delays it.
Typing narrows the list (the index's `search`), Ctrl-W widens the scope (this worktree → the
repository's worktrees → all projects), Ctrl-B keeps only this branch's sessions, Enter picks,
Esc or Ctrl-C cancels. The caller's own sessions and sidechains are never listed.

prompt_toolkit is imported here only, and this module only when the picker opens.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import HSplit, Layout, Window
from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl
from prompt_toolkit.styles import Style

from coding_os import api
from coding_os.errors import CosError
from coding_os.interfaces.output import visible

__all__ = ["PAGE", "PREVIEW_LINES", "Listing", "pick_session", "session_row"]

PAGE = 50  # rows asked of the index at a time
PREVIEW_LINES = 13  # one per field of the preview, the first and last prompt included
_SCOPE_NAMES = {"worktree": "this worktree", "repo": "this repository's worktrees",
                "all": "all projects"}
_STYLE = Style.from_dict({"header": "reverse", "selected": "reverse bold", "dim": "#888888",
                          "error": "ansired"})

Loader = Callable[[str, str | None, bool, int], list[dict[str, object]]]


def session_row(row: dict[str, object], width: int, project: bool = False) -> str:
    """One listed session: id or name, agent, last active, messages, with `project` the
    project it belongs to (its directory's name), title (control characters visible)."""
    import os

    key = visible(str(row.get("name") or row["id"]))
    when = str(row.get("last_active") or "-")[:16].replace("T", " ")
    title = visible(" ".join(str(row.get("title") or "-").split()))
    where = str(row.get("project") or row.get("worktree") or row.get("cwd") or "-")
    named = visible(os.path.basename(where.rstrip("/")) or where)[:20]
    line = (f"{key[:38]:<38} {str(row['agent'])[:7]:<7} {when:<16} {row['messages']!s:>5}  "
            + (f"{named:<20} " if project else "") + title)
    return line[:max(width, 1)]


def _preview(row: dict[str, object] | None) -> list[str]:
    if row is None:
        return ["no session selected"]
    fields = [("title", row.get("title")), ("name", row.get("name")), ("id", row["id"]),
              ("native id", row.get("native_id")), ("agent", row.get("agent")),
              ("cwd", row.get("cwd") or row.get("worktree") or row.get("project")),
              ("branch", row.get("branch")), ("created", row.get("created")),
              ("last active", row.get("last_active")),
              ("size", f"{row.get('messages')} messages, {row.get('tokens')} tokens"),
              ("forked from", row.get("forked_from")),
              ("first prompt", row.get("first_prompt")), ("last prompt", row.get("last_prompt"))]
    # One line per field: a long prompt is cut by the pane's width, not wrapped.
    return [f"{key:<{max(12, len(key) + 1)}}{visible(' '.join(str(value).split()))}"
            for key, value in fields
            if value not in (None, "")]


@dataclass
class Listing:
    """What the picker shows: the query, the loaded page(s) and the selection."""

    load: Loader
    scope: str = "worktree"
    search: str = ""
    this_branch: bool = False
    limit: int = PAGE
    rows: list[dict[str, object]] = field(default_factory=list)
    more: bool = False
    selected: int = 0
    error: str | None = None
    importing: bool = False
    import_error: str | None = None

    def reload(self, limit: int = PAGE, strict: bool = False) -> None:
        """Ask the index for the first `limit` rows of the current query (one more tells
        whether there are more); an error is shown in place of the rows unless `strict`.

        Raises:
            CosError: with `strict`, the index cannot be read.
        """
        try:
            rows = self.load(self.scope, self.search or None, self.this_branch, limit + 1)
        except CosError as exc:
            if strict:
                raise
            self.error, self.rows, self.more = " ".join(str(exc).split()), [], False
            return
        self.error = None
        self.limit, self.rows, self.more = limit, rows[:limit], len(rows) > limit
        self.selected = min(self.selected, max(len(self.rows) - 1, 0))

    def move(self, step: int) -> None:
        """Move the selection, loading the next page when it reaches the end of the loaded."""
        target = self.selected + step
        if target >= len(self.rows) and self.more:
            self.reload(self.limit + max(PAGE, step))
        self.selected = max(0, min(target, len(self.rows) - 1))

    def current(self) -> dict[str, object] | None:
        """The selected session's row, if any."""
        return self.rows[self.selected] if 0 <= self.selected < len(self.rows) else None


def _default_loader(scope: str, search: str | None, this_branch: bool,
                    limit: int) -> list[dict[str, object]]:
    return api.resumable_sessions(scope=scope, search=search, this_branch=this_branch,
                                  limit=limit)


def pick_session(search: str = "", scope: str = "worktree", load: Loader | None = None,
                 refresh: Callable[[], object] | None = api.import_sessions) -> str | None:
    """Let the user pick a session on the terminal; its id, or None when cancelled.

    `search` pre-fills the search field; `refresh` (run in the background) imports what changed,
    after which the list reloads.

    Raises:
        CosError: the index cannot be read (Misroute, StorageError, …) for the first screen.
    """
    listing = Listing(load=load or _default_loader, scope=scope, search=search)
    listing.reload(strict=True)  # a project cos cannot use fails before the screen opens
    lock = threading.Lock()  # the background reload and the keys share `listing`
    query = Buffer(multiline=False, document=None)
    query.text = search
    query.cursor_position = len(search)

    def header() -> StyleAndTextTuples:
        branch = ", this branch only" if listing.this_branch else ""
        state = ("  (importing what changed…)" if listing.importing
                 else f"  (import failed: {listing.import_error})" if listing.import_error
                 else "")
        return [("class:header", f" cos resume: {_SCOPE_NAMES[listing.scope]}{branch}{state} "),
                ("class:dim", "  ↑/↓ move  Enter resume  Ctrl-W widen scope  "
                              "Ctrl-B this branch  Esc cancel")]

    def rows_text() -> StyleAndTextTuples:
        width = app.output.get_size().columns
        height = max(app.output.get_size().rows - 4 - PREVIEW_LINES, 1)
        if listing.error:
            return [("class:error", f"cos: {listing.error}")]
        if not listing.rows:
            return [("class:dim", "no session matches" if not listing.importing
                     else "no session yet: importing what changed…")]
        top = max(0, listing.selected - height + 1)
        lines: StyleAndTextTuples = []
        for number, row in enumerate(listing.rows[top:top + height], start=top):
            style = "class:selected" if number == listing.selected else ""
            lines.append((style, session_row(row, width, listing.scope == "all") + "\n"))
        if listing.more and top + height >= len(listing.rows):
            lines.append(("class:dim", "…more below"))
        return lines

    def preview_text() -> StyleAndTextTuples:
        return [("", "\n".join(_preview(listing.current())))]

    def on_search(_: Buffer) -> None:
        with lock:
            listing.search = query.text.strip()
            listing.selected = 0
            listing.reload()

    query.on_text_changed += on_search

    keys = KeyBindings()

    @keys.add("up")
    @keys.add("c-p")
    def _up(event: KeyPressEvent) -> None:
        with lock:
            listing.move(-1)

    @keys.add("down")
    @keys.add("c-n")
    def _down(event: KeyPressEvent) -> None:
        with lock:
            listing.move(1)

    @keys.add("pageup")
    def _page_up(event: KeyPressEvent) -> None:
        with lock:
            listing.move(-10)

    @keys.add("pagedown")
    def _page_down(event: KeyPressEvent) -> None:
        with lock:
            listing.move(10)

    @keys.add("c-w")
    def _widen(event: KeyPressEvent) -> None:
        scopes = api.SESSION_SCOPES
        with lock:
            listing.scope = scopes[(scopes.index(listing.scope) + 1) % len(scopes)]
            listing.selected = 0
            listing.reload()

    @keys.add("c-b")
    def _branch(event: KeyPressEvent) -> None:
        with lock:
            listing.this_branch = not listing.this_branch
            listing.selected = 0
            listing.reload()

    @keys.add("enter")
    def _pick(event: KeyPressEvent) -> None:
        row = listing.current()
        if row is not None:
            event.app.exit(result=str(row["id"]))

    @keys.add("escape", eager=True)
    @keys.add("c-c")
    @keys.add("c-d")
    def _cancel(event: KeyPressEvent) -> None:
        event.app.exit(result=None)

    layout = Layout(HSplit([
        Window(FormattedTextControl(header), height=1),
        Window(BufferControl(buffer=query, include_default_input_processors=True),
               height=1, get_line_prefix=lambda *_: [("bold", "search> ")]),
        Window(height=1, char="─"),
        Window(FormattedTextControl(rows_text), wrap_lines=False),
        Window(height=1, char="─"),
        Window(FormattedTextControl(preview_text), height=PREVIEW_LINES, wrap_lines=False),
    ]), focused_element=query)
    app: Application[str | None] = Application(layout=layout, key_bindings=keys, style=_STYLE,
                                               full_screen=True, mouse_support=False)
    app.ttimeoutlen = 0.05  # Esc alone cancels at once, not after half a second

    def import_then_reload() -> None:
        assert refresh is not None
        try:
            refresh()
        except CosError as exc:  # the index as it stands stays listed, with the reason
            listing.import_error = " ".join(str(exc).split())
        finally:
            with lock:
                listing.importing = False
                listing.reload(listing.limit)
            app.invalidate()

    importer = None
    if refresh is not None:
        listing.importing = True
        importer = threading.Thread(target=import_then_reload, name="cos-picker-import",
                                    daemon=True)
        importer.start()
    result = app.run()
    if importer is not None and result is not None:
        importer.join()  # no import may still be writing when the agent takes over
    return result
