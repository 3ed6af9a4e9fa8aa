"""Session summaries: what a session did, derived from its observations.

Written once per session (the first writer wins): at SessionEnd, or by orphan recovery when a
panel starts a new session and its previous one never ended, or when `cos gc` reaps its panel.
"""

from __future__ import annotations

from coding_os.clock import utc_now
from coding_os.storage.base import SessionSummary, Storage

__all__ = ["summarize"]

MAX_FILES = 50


def summarize(storage: Storage, session: str, agent: str, panel: str, reason: str,
              native_id: str | None = None) -> tuple[SessionSummary, bool]:
    """Build the summary of `session` from its observations and store it unless one exists.

    Returns the stored summary (the existing one when there was one) and whether it was new.

    Raises:
        StorageError: the database cannot be read or written.
    """
    existing = storage.summary(session)
    if existing is not None:
        return existing, False
    record = storage.session(session)
    observations = storage.observations(session=session)
    prompts = tool_calls = errors = 0
    files: list[str] = []
    last_prompt = None
    for obs in observations:
        if obs.event == "UserPromptSubmit":
            prompts += 1
            last_prompt = obs.text
        elif obs.event == "PostToolUse":
            tool_calls += 1
            if obs.data.get("ok") is False:
                errors += 1
            paths = obs.data.get("paths")
            for path in paths if isinstance(paths, list) else []:
                if isinstance(path, str) and path not in files and len(files) < MAX_FILES:
                    files.append(path)
    summary = SessionSummary(
        session=session,
        agent=agent,
        panel=panel,
        reason=reason,
        native_id=native_id or (record.native_id if record else None),
        started=record.started if record else (observations[0].ts if observations else None),
        ended=observations[-1].ts if observations else (record.last_active if record else None),
        prompts=prompts,
        tool_calls=tool_calls,
        errors=errors,
        files=files,
        last_prompt=last_prompt,
        created=utc_now(),
    )
    if storage.write_summary(summary):
        return summary, True
    stored = storage.summary(session)
    return (stored or summary), False
