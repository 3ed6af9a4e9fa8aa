"""Gemini CLI's sessions as native sessions of the one list (DESIGN.md §4.2, §9).

`scan` reads every session under a Gemini dir (`coding_os.adapters.gemini.sessions`) and gives
each in the words of the other importers (`coding_os.adapters.native.NativeSession`, agent
`gemini`) with a `ScanReport`. It reads every file again: a lookup only imports when the
freshness fingerprint says a log changed (sessions/freshness.py walks the Gemini chats too).
Token use maps as a price table reads it: Gemini's thoughts are output (`reasoning`, part of
it), its tool-use prompt is input. Gemini CLI records no git branch.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from coding_os.adapters.gemini.messages import GeminiTokens, message_tokens, prompt_text
from coding_os.adapters.gemini.sessions import GeminiSession, KnownFile, scan_gemini
from coding_os.adapters.native import (NativeSession, NativeSubagent, ScanReport, TokenTotals,
                                       TurnUsage, new_native_session)

__all__ = ["AGENT", "scan", "native_session", "token_totals", "turn_usage"]

AGENT = "gemini"


def token_totals(tokens: GeminiTokens) -> TokenTotals:
    """Gemini's token counts as the normalised totals (thoughts are output, tool use input)."""
    return TokenTotals(input=tokens.input + tokens.tool, cached=tokens.cached,
                       output=tokens.output + tokens.thoughts, reasoning=tokens.thoughts)


def turn_usage(messages: Iterable[Mapping[str, Any]]) -> list[TurnUsage]:
    """Token use per turn of a session's live messages (`GeminiConversation.messages`, in
    order): each turn's prompt (a message a person typed, `prompt_text`) and the `tokens` of
    the model responses that answered it until the next prompt, with their models and cost
    (adapters/prices.py: Gemini's cached tokens are part of its input, its thoughts are billed
    as output). What comes before the first prompt is a turn of its own, prompt "" (none when
    it used no tokens)."""
    from coding_os.adapters.prices import cost

    turns: list[TurnUsage] = [TurnUsage("", TokenTotals())]
    for message in messages:
        prompt = prompt_text(message)
        if prompt is not None:
            turns.append(TurnUsage(prompt, TokenTotals()))
            continue
        if message.get("type") != "gemini":
            continue
        recorded = message_tokens(message.get("tokens"))
        if recorded is None:
            continue
        used = token_totals(recorded)
        if used.total == 0:
            continue
        model = message.get("model") if isinstance(message.get("model"), str) \
            and message.get("model") else None
        spent = cost(model, max(0, used.input - used.cached), used.output, used.cached)
        turn = turns[-1]
        models = turn.models if model is None or model in turn.models else (*turn.models, model)
        turns[-1] = TurnUsage(turn.prompt, turn.tokens + used, models,
                              None if turn.cost is None or spent is None else turn.cost + spent)
    if turns[0].tokens.total == 0:
        turns.pop(0)
    return turns


def _subagent(agent: GeminiSession, parent: str) -> NativeSubagent:
    return NativeSubagent(
        agent=AGENT, agent_id=agent.native_id, parent=parent, layout="nested", path=agent.path,
        agent_type=agent.agent_name, description=agent.summary, first_prompt=agent.first_prompt,
        entries=agent.messages, user_messages=agent.user_messages,
        assistant_messages=agent.assistant_messages, tokens=token_totals(agent.tokens),
        created=agent.started, last_active=agent.last_active)


def native_session(session: GeminiSession) -> NativeSession:
    """One Gemini session (its subagents linked) as a native session of the one list."""
    return new_native_session(
        agent=AGENT, native_id=session.native_id, path=session.path, paths=session.paths,
        cwd=session.cwd, project=session.project, git_branch=session.git_branch,
        model=session.model, title=session.title, title_source=session.title_source,
        first_prompt=session.first_prompt, last_prompt=session.last_prompt,
        user_messages=session.user_messages, assistant_messages=session.assistant_messages,
        tokens=token_totals(session.tokens), created=session.started,
        last_active=session.last_active, forked_from=session.forked_from,
        copied_entries=session.copied_messages,
        subagents=tuple(_subagent(agent, session.native_id) for agent in session.subagents),
        entry_counts=dict(session.message_types), unknown_types=dict(session.unknown_types),
        malformed_lines=session.unreadable_lines, torn_tail=session.torn_tail,
        branches=session.rewinds, tree_warnings=session.warnings)


def _files(session: GeminiSession) -> list[str]:
    if not session.subagents:
        return list(session.paths)
    files = list(session.paths)
    for agent in session.subagents:
        files.extend(_files(agent))
    return files


def _note_unread(report: ScanReport, session: GeminiSession) -> None:
    """Count the lines of `session`'s file that hold no JSON object or a record of no kind
    Gemini CLI 0.61 writes (a newer format): kept in the session's counts, never a lost
    session."""
    unread = session.unreadable_lines + session.record_counts.get("other", 0)
    if unread:
        report.unread_lines[session.path] = unread


def scan(gemini_dir: str, known: Mapping[str, KnownFile] | None = None
         ) -> tuple[list[NativeSession], ScanReport, dict[str, KnownFile]]:
    """Every Gemini CLI session under `gemini_dir` as a native session, what was read, and
    each file as read or known (what the next scan is given as `known`, see `scan_gemini`:
    a file unchanged since it is not read again); nothing raises on a bad file: it is in the
    report's `unreadable`."""
    found = scan_gemini(gemini_dir, known)
    report = ScanReport(agent=AGENT, root=found.root)
    natives: list[NativeSession] = []
    for session in found.sessions:
        natives.append(native_session(session))
        report.session_paths.append(session.path)
        report.subagents += len(session.subagents)
        for item in [session, *session.subagents]:
            report.malformed_lines += item.unreadable_lines
            _note_unread(report, item)
            if item.torn_tail:
                report.torn_files.append(item.path)
    files = {path for session in found.sessions for path in _files(session)}
    files.update(orphan.path for orphan in found.orphans)
    report.files_seen += len(files)
    report.files_unchanged += found.unchanged
    report.files_opened += len(files) - found.unchanged
    report.bytes_read += found.bytes_read  # the size of each file read when it was read
    report.sessions = len(natives)
    report.orphans = len(found.orphans)
    report.orphan_subagents = [_subagent(orphan, orphan.parent or "")
                               for orphan in found.orphans]
    for orphan in found.orphans:
        report.malformed_lines += orphan.unreadable_lines
        _note_unread(report, orphan)
    report.unreadable.extend((problem.split(":", 1)[0], problem) for problem in found.problems)
    return natives, report, found.files
