"""The web agent view, `cos web` (DESIGN.md §10; docs/web.md): app.py holds the Starlette app
and its pages, security.py who may reach it, live.py the Server-Sent Events. Importing this
package needs nothing beyond the standard library; `app` needs the `web` extra (starlette,
jinja2, uvicorn)."""

__all__: list[str] = []
