"""The caller of a command or hook: where its state lives and who it is (§3.1–3.3 together)."""

from __future__ import annotations

import os

from coding_os import durable
from coding_os.state.identity import detect_agent, panel_identity
from coding_os.state.root import resolve
from coding_os.state.statefile import parse_state
from coding_os.state.tiers import Tiers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from coding_os.state.root import Resolution

__all__ = ["Caller", "read_panel_session"]


class Caller:
    """Resolved state dir, agent, panel and its directory for one caller."""

    __slots__ = ("cwd", "resolution", "tiers", "agent", "panel", "panel_source", "panel_dir",
                 "native")

    def __init__(self, env: Mapping[str, str] | None = None, cwd: str | None = None,
                 payload_session: str | None = None) -> None:
        """Identify the caller.

        Raises:
            Misroute: the state dir would be the global hub or a symlink.
            InvalidId: COS_AGENT or `.coding-os/.agent` names an invalid agent.
        """
        env = os.environ if env is None else env
        # resolve() takes the physical path of it; the raw one is kept for the few who need it.
        self.cwd = cwd if cwd is not None else os.getcwd()
        self.resolution: Resolution = resolve(self.cwd, env)
        self.tiers = Tiers(self.resolution.state_dir)
        self.agent = detect_agent(env, self.tiers.agent_marker)
        self.native = payload_session or None
        self.panel, self.panel_source = panel_identity(env, self.native, self.agent)
        self.panel_dir = self.tiers.panel_dir(self.agent, self.panel)

    def session(self) -> str | None:
        """The panel's current cos session id, or None before its first SessionStart."""
        current = read_panel_session(self.panel_dir)
        return current[0] if current else None


def read_panel_session(panel_dir: str) -> tuple[str, str | None] | None:
    """(session id, native id or None) from a panel's session-id file, or None."""
    data = durable.read_small(os.path.join(panel_dir, "session-id"), 8192)
    if data is None:
        return None
    parsed = parse_state(data)
    if parsed is None:
        return None
    session, native = parsed
    return session, (None if native in ("", "-") else native)
