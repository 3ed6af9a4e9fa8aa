"""The caller of a command or hook: where its state lives and who it is (§3.1–3.3 together)."""

from __future__ import annotations

import os
import sys

from coding_os import durable
from coding_os.errors import ForeignState
from coding_os.state import registry
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
                 "native", "ownership")

    def __init__(self, env: Mapping[str, str] | None = None, cwd: str | None = None,
                 payload_session: str | None = None, *, create: bool = True,
                 foreign_ok: bool = False) -> None:
        """Identify the caller, and make sure its state dir is this user's (state/registry.py):
        made and registered when it does not exist yet (unless not `create`), refused when it
        is foreign (unless `foreign_ok`: then `ownership` says so and nothing is read from it).

        Raises:
            Misroute: the state dir would be the global hub or a symlink.
            ForeignState: the state dir is not this user's.
            InvalidId: COS_AGENT or `.coding-os/.agent` names an invalid agent.
            StateIOError: the state dir cannot be made or registered.
        """
        env = os.environ if env is None else env
        # resolve() takes the physical path of it; the raw one is kept for the few who need it.
        self.cwd = cwd if cwd is not None else os.getcwd()
        self.resolution: Resolution = resolve(self.cwd, env)
        self.tiers = Tiers(self.resolution.state_dir)
        state_dir, hub = self.resolution.state_dir, self.resolution.hub
        self.ownership = registry.check(state_dir, hub, self.resolution.project_root)
        if self.ownership.note is not None:
            sys.stderr.write(f"cos: {self.ownership.note}\n")
        if self.ownership.status == "foreign" and not foreign_ok:
            raise ForeignState(f"{state_dir} is not this user's state dir: "
                               f"{self.ownership.reason}; `cos init` moves it aside and starts "
                               "a fresh one")
        # Made here, registered, before any writer makes it in passing (durable.ensure_dir):
        # a state dir cos made is always one it knows as this user's.
        if self.ownership.status == "absent" and create:
            registry.create(state_dir, hub)
            self.ownership = registry.Ownership("own")
        own = self.ownership.status == "own"
        self.agent = detect_agent(env, self.tiers.agent_marker if own else None)
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
