"""The three tiers of state (DESIGN.md §3.2) and which file lives in which, as data.

    <state_dir>/                     shared: coding-os.db, .hooks.log, config, installed manifest
      <agent>/                       agent-private: .model, .task-mode, .active-session, sessions/
        panels/<panel-id>/           panel-private: session-id, heartbeat, .task-current, gates

Directories are created lazily by the writers (durable.ensure_dir, mode 0700).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "STATE_FILES",
    "PER_PANEL_FILES",
    "RESERVED_NAMES",
    "DEFAULT_HORIZON_S",
    "Tiers",
    "spec_for",
    "horizon_for",
]

PANEL = "panel"
AGENT = "agent"

# (name or prefix*, tier, default trust horizon in seconds (None: not time-bound),
#  volatile: cleared when a panel starts or clears a session).
# Names not listed are panel-private, with DEFAULT_HORIZON_S, and volatile.
STATE_FILES: tuple[tuple[str, str, int | None, bool], ...] = (
    ("session-id", PANEL, None, False),
    ("heartbeat", PANEL, None, False),
    (".task-current", PANEL, 8 * 3600, True),
    (".gate-*", PANEL, 120 * 60, True),
    (".skill-*", PANEL, 120 * 60, True),
    (".model", AGENT, None, False),
    (".task-mode", AGENT, None, False),
    (".active-session", AGENT, None, False),
)
DEFAULT_HORIZON_S = 120 * 60
PANEL_ID_MAX = 64  # panel ids and state file names are at most this long
PER_PANEL_FILES = tuple(name for name, tier, _, _ in STATE_FILES if tier == PANEL)
# Written by coding-os itself; `cos state set` refuses them.
RESERVED_NAMES = ("session-id", "heartbeat", ".active-session")
# Names under the state dir that can never be agent directories.
RESERVED_DIRS = ("checkpoints", "worktrees", "sessions", "panels", "transcripts", "trash")


def spec_for(name: str) -> tuple[str, str, int | None, bool]:
    """The STATE_FILES row that governs `name` (exact names first, then prefixes)."""
    for row in STATE_FILES:
        if row[0] == name:
            return row
    for row in STATE_FILES:
        if row[0].endswith("*") and name.startswith(row[0][:-1]):
            return row
    return (name, PANEL, DEFAULT_HORIZON_S, True)


class Tiers:
    """Paths of every tier under one state dir. Pure path arithmetic: nothing is created."""

    __slots__ = ("state_dir",)

    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir

    @property
    def hooks_log(self) -> str:
        return os.path.join(self.state_dir, ".hooks.log")

    @property
    def observations_spool(self) -> str:
        return os.path.join(self.state_dir, ".observations.jsonl")

    @property
    def database(self) -> str:
        return os.path.join(self.state_dir, "coding-os.db")

    @property
    def manifest(self) -> str:
        return os.path.join(self.state_dir, "installed-manifest.json")

    @property
    def checkpoints_dir(self) -> str:
        """The checkpoint store: objects, records, the restore's journal (DESIGN.md §5)."""
        return os.path.join(self.state_dir, "checkpoints")

    @property
    def replication_requests(self) -> str:
        """Where the hooks ask for the background replicator (hosts/replicator.py)."""
        return os.path.join(self.state_dir, ".replicate-requests")

    @property
    def replication_lock(self) -> str:
        """Held by the project's background replicator while it runs (its pid inside)."""
        return os.path.join(self.state_dir, ".replicate.lock")

    @property
    def agent_marker(self) -> str:
        return os.path.join(self.state_dir, ".agent")

    def agent_dir(self, agent: str) -> str:
        return os.path.join(self.state_dir, agent)

    def panels_dir(self, agent: str) -> str:
        return os.path.join(self.state_dir, agent, "panels")

    def panel_dir(self, agent: str, panel: str) -> str:
        return os.path.join(self.state_dir, agent, "panels", panel)

    def presence_path(self, agent: str, session: str) -> str:
        return os.path.join(self.state_dir, agent, "sessions", f"{session}.json")

    def transcript_path(self, agent: str, session: str) -> str:
        """The session's transcript (DESIGN.md §4.1): `<agent>/transcripts/<sid>.jsonl`."""
        return os.path.join(self.state_dir, agent, "transcripts", f"{session}.jsonl")

    def events_path(self, agent: str, session: str) -> str:
        """The session's events log (DESIGN.md §6, §7): `<agent>/events/<sid>.jsonl`."""
        return os.path.join(self.state_dir, agent, "events", f"{session}.jsonl")

    def state_path(self, agent: str, panel: str, name: str) -> str:
        """Where the state file `name` of this agent and panel lives, by its tier."""
        if spec_for(name)[1] == AGENT:
            return os.path.join(self.agent_dir(agent), name)
        return os.path.join(self.panel_dir(agent, panel), name)

    def agents(self) -> list[str]:
        """Agents that have a directory here."""
        try:
            entries = os.listdir(self.state_dir)
        except OSError:
            return []
        return sorted(e for e in entries
                      if e[:1].islower() and e not in RESERVED_DIRS
                      and os.path.isdir(os.path.join(self.state_dir, e)))


def horizon_for(name: str, config: Mapping[str, object]) -> float | None:
    """The trust horizon of state file `name`: `state.horizons` of the project's configuration
    (a name, or a prefix ending in `*`), else the default of its row.

    Raises:
        InvalidInput: the configured horizon is not a duration.
    """
    from coding_os.config import parse_duration
    from coding_os.errors import InvalidInput

    state = config.get("state") or {}
    if not isinstance(state, dict):
        raise InvalidInput(".coding-os.yaml: state must be a mapping")
    horizons = state.get("horizons") or {}
    if not isinstance(horizons, dict):
        raise InvalidInput(".coding-os.yaml: state.horizons must be a mapping")
    if name in horizons:
        return parse_duration(horizons[name], f"state.horizons.{name}")
    for key, value in horizons.items():
        if isinstance(key, str) and key.endswith("*") and name.startswith(key[:-1]):
            return parse_duration(value, f"state.horizons.{key}")
    return spec_for(name)[2]
