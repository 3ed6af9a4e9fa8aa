"""The conversation half of a rewind of a session the engine runs (DESIGN.md §5, §6): no
handover, since the engine starts the agent itself; the session is pointed at the rewound
conversation for its next input (`SessionCore.repoint`). checkpoints/rewind.py orders the two
halves and calls this through its `Engine` interface.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from coding_os.sessions.conversation import ConversationRewind
    from coding_os.state.tiers import Tiers

__all__ = ["EngineRewind"]


class EngineRewind:
    """The engine's side of a rewind in one project (`tiers`), for a caller with environment
    `env`."""

    def __init__(self, tiers: Tiers, env: Mapping[str, str] | None = None) -> None:
        self.tiers = tiers
        self.env = env

    def runs(self, session: str) -> bool:
        """Whether the engine runs `session` (it has an events log): its conversation is
        rewound in place of a handover, for its next input."""
        from coding_os.runtime.events import events_path

        return os.path.exists(events_path(self.tiers, session))

    def check_free(self, session: str) -> None:
        """Refuse to rewind a session a process serves now (a job's runner, a cos protocol).

        Raises:
            Conflict: it is being served.
        """
        from coding_os.runtime.events import take_lease

        take_lease(self.tiers, session).release()

    def rewind(self, plan: ConversationRewind, dry_run: bool) -> dict[str, Any]:
        """Point `plan`'s session at the rewound conversation (a Codex thread forked or
        reverted now by the app-server the session runs); `dry_run`: say what would be done.

        Raises:
            Conflict: a process serves the session. NotFound, BackendError: as
                `ConversationRewind.apply_to_engine`.
        """
        import asyncio

        return asyncio.run(self._repoint(plan, dry_run))

    async def _repoint(self, plan: ConversationRewind, dry_run: bool) -> dict[str, Any]:
        from coding_os.runtime.core import open_session

        # Served by this process meanwhile (the lease), so nothing else starts it in between.
        core = open_session(plan.session, str(plan.cwd), env=self.env, repair=not dry_run)
        try:
            options = core.settings.options if core.settings else {}
            program = options.get("program")
            done: dict[str, Any] = plan.apply_to_engine(
                dry_run, program=program if isinstance(program, str) else None)
            point = done.get("repoint")
            if not dry_run and isinstance(point, dict):
                await core.repoint(point["native_id"], point["resume_at"], bool(point["fork"]))
                done["note"] = (f"{plan.session}'s next input goes on from the checkpoint "
                                f"(cos protocol --session {plan.session}, or cos respawn of "
                                "its job)")
            return done
        finally:
            await core.shutdown()
