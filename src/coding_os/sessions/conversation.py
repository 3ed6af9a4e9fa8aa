"""The conversation half of a rewind (DESIGN.md §5).

A cos-native session's transcript is rewound to a checkpoint by a `rewind` entry that hides what
came after (nothing is deleted). Claude Code and Codex keep their own logs, and cos rewinds them
through the agent's own mechanism, to the native point the checkpoint recorded
(checkpoints/auto.py `native_point`):

- Claude Code: the handover `claude --resume <id> --resume-session-at <assistant uuid>
  --fork-session --session-id <new id>` (with `in_place`, without the last two): Claude Code
  loads the conversation up to that entry and goes on from there. A fork is a new cos session
  (`forked_from`, `fork_point`) filed in the index under the new native id before the agent
  starts, so its hooks bind it.
- Codex: `codex app-server` forks the thread through the turn before the checkpoint's
  (`thread/fork` with `lastTurnId`) or reverts it in place (`thread/revert` with
  `beforeTurnId`); the handover is `codex resume <thread>`.

`plan_rewind` checks everything (the point is in the log, the log is there) before anything is
done, so a caller can refuse a rewind of both halves before the code is touched; `apply` does it.
The handover is also kept in the new (or rewound) session's presence record until the agent has
run it (`pending_handover`), so resuming that session runs it.

The summaries of the conversation from or up to a checkpoint are sessions/summaries.py's.
"""

from __future__ import annotations

import glob
import os
import uuid as uuids
from dataclasses import dataclass, field

from coding_os import jsonwire
from coding_os.errors import InvalidInput, NotFound
from coding_os.sessions import transcript
from coding_os.state.identity import agent_of_session
from coding_os.state.tiers import Tiers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["ConversationRewind", "plan_rewind", "pending_handover", "rewind_conversation"]

# Where the handover of a rewind waits in the session's presence record until the agent runs it.
_PENDING = "rewind_handover"


@dataclass
class ConversationRewind:
    """A conversation rewind checked and ready (`apply` does it).

    `kind` is the agent (`claude`, `codex`) or `cos`; `available` is False when the checkpoint
    records no native point (the report then says so and nothing is done). `point` is what the
    conversation goes back to: the assistant entry's uuid (Claude Code; None for an empty
    conversation), the turn to fork through or revert before (Codex).
    """

    record: Mapping[str, object]
    session: str
    kind: str
    in_place: bool
    available: bool = True
    native_id: str | None = None
    cwd: str | None = None
    point: dict[str, object] = field(default_factory=dict)
    note: str = ""
    env: Mapping[str, str] | None = None

    def report(self) -> dict[str, Any]:
        """What is (or would be) done, as JSON."""
        return {"session": self.session, "kind": self.kind, "available": self.available,
                "in_place": self.in_place, "native_id": self.native_id, "point": self.point,
                "applied": False, "note": self.note}

    def apply(self, tiers: Tiers, dry_run: bool) -> dict[str, Any]:
        """Rewind the conversation (`dry_run`: say what would be done and do nothing).

        Raises:
            NotFound: the agent's program is missing, or Codex's app-server cannot load the
                thread or the turn. BackendError: the app-server failed.
            StateIOError: the presence record or the index cannot be written.
        """
        report = self.report()
        if not self.available:
            return report
        if self.kind == "cos":
            seq = self.point["to_seq"]
            if not dry_run:
                transcript.append(tiers, self.session, "rewind", {"to_seq": seq})
            report.update(applied=not dry_run, to_seq=seq)
            return report
        if self.kind == "claude":
            return self._claude(tiers, report, dry_run)
        return self._codex(tiers, report, dry_run)

    def apply_to_engine(self, dry_run: bool, program: str | None = None) -> dict[str, Any]:
        """Rewind the conversation of a session the engine runs (DESIGN.md §6): no handover;
        what its next start must resume (`repoint`: `native_id`, `resume_at`, `fork`), with a
        Codex thread forked (or reverted in place) now by the app-server (`program`: the one
        the session runs).

        Raises:
            NotFound, BackendError: as `apply`.
        """
        report = self.report()
        report["engine"] = True
        if not self.available:
            return report
        assert self.native_id is not None and self.cwd is not None
        if self.kind == "claude":
            at = self.point.get("uuid")
            if at is None:
                raise InvalidInput(f"nothing of {self.session}'s conversation came before "
                                   f"checkpoint {self.record['id']}: start a new session "
                                   "instead")
            report["repoint"] = {"native_id": self.native_id, "resume_at": str(at),
                                 "fork": not self.in_place}
        else:
            from coding_os.adapters.codex.app_server import fork_thread, revert_thread

            through, before = self.point.get("through"), self.point.get("before")
            program = program or "codex"  # the session's own program, as it runs it
            if self.in_place:
                if before is not None and not dry_run:
                    revert_thread(self.native_id, str(before), cwd=self.cwd, env=self.env,
                                  program=program)
                native = self.native_id
            elif through is None:
                raise InvalidInput(f"nothing of {self.session}'s conversation came before "
                                   f"checkpoint {self.record['id']}: start a new session "
                                   "instead")
            else:
                native = ("<the forked thread>" if dry_run else
                          fork_thread(self.native_id, str(through), cwd=self.cwd, env=self.env,
                                      program=program))
            report["repoint"] = {"native_id": native, "resume_at": None, "fork": False}
        report.update(rewound_session=self.session, applied=not dry_run)
        return report

    # -- Claude Code ---------------------------------------------------------------------------

    def _claude(self, tiers: Tiers, report: dict[str, Any], dry_run: bool) -> dict[str, Any]:
        assert self.cwd is not None and self.native_id is not None
        at = self.point.get("uuid")
        new_native = str(uuids.uuid4())
        if at is None:  # nothing before the checkpoint: a conversation of its own
            argv = ["claude", "--session-id", new_native]
        else:
            argv = ["claude", "--resume", self.native_id, "--resume-session-at", str(at)]
            if not self.in_place:
                argv += ["--fork-session", "--session-id", new_native]
        forks = at is None or not self.in_place
        target = self._new_session(tiers, new_native, dry_run) if forks else self.session
        report.update(handover=_handover(argv, self.cwd), rewound_session=target,
                      new_native_id=new_native if forks else self.native_id)
        if not dry_run:
            _keep_pending(tiers, "claude", target, argv, self.cwd,
                          waits_for=new_native if forks else None,
                          leaf=self.point.get("leaf"), transcript=self.point.get("transcript"))
        report["applied"] = not dry_run
        return report

    # -- Codex ---------------------------------------------------------------------------------

    def _codex(self, tiers: Tiers, report: dict[str, Any], dry_run: bool) -> dict[str, Any]:
        from coding_os.adapters.codex.app_server import fork_thread, revert_thread

        assert self.cwd is not None and self.native_id is not None
        through = self.point.get("through")
        before = self.point.get("before")
        if self.in_place:
            argv = ["codex", "resume", self.native_id]
            if before is not None and not dry_run:
                revert_thread(self.native_id, str(before), cwd=self.cwd, env=self.env)
            report.update(handover=_handover(argv, self.cwd), rewound_session=self.session,
                          new_native_id=self.native_id, applied=not dry_run)
            return report
        if through is None:  # nothing before the checkpoint: a conversation of its own
            new_native = None
            argv = ["codex"]
        elif dry_run:
            new_native = None
            argv = ["codex", "resume", "<the forked thread>"]
        else:
            new_native = fork_thread(self.native_id, str(through), cwd=self.cwd, env=self.env)
            argv = ["codex", "resume", new_native]
        target = None
        if new_native is not None or through is None:
            target = self._new_session(tiers, new_native, dry_run)
        report.update(handover=_handover(argv, self.cwd), rewound_session=target,
                      new_native_id=new_native, applied=not dry_run)
        return report

    def _new_session(self, tiers: Tiers, native_id: str | None, dry_run: bool) -> str:
        """A new cos session for the rewound conversation, filed under `native_id` in the index
        and in a presence record that names where it was forked from (the hooks keep both)."""
        from coding_os.clock import utc_now
        from coding_os.state import presence
        from coding_os.state.identity import mint_session_id

        session = mint_session_id(self.kind)
        if dry_run:
            return session
        now = utc_now()
        fork_point = {"checkpoint": self.record.get("id"), **self.point}
        fork_point.pop("leaf", None)
        fork_point.pop("transcript", None)
        presence.write_presence(tiers, self.kind, session, {
            "native_id": native_id, "status": "pending", "project": self.record.get("root"),
            "cwd": self.cwd, "source": "rewind", "last_source": "rewind", "started": now,
            "forked_from": self.session, "fork_point": fork_point})
        if native_id is not None:
            _link(tiers, self.env, session, self.kind, native_id, self.cwd,
                  str(self.record.get("root") or "") or None, self.session, now,
                  jsonwire.dumps(fork_point))
        return session


def _handover(argv: list[str], cwd: str) -> dict[str, Any]:
    import shlex

    return {"argv": argv, "cwd": cwd,
            "command": f"cd {shlex.quote(cwd)} && {shlex.join(argv)}"}


def _link(tiers: Tiers, env: Mapping[str, str] | None, session: str, agent: str,
          native_id: str, cwd: str | None, project: str | None, forked_from: str,
          now: str, fork_point: str | None = None) -> None:
    """File `session` under `native_id` in the index, forked from `forked_from` at
    `fork_point` (JSON: the checkpoint and the agent's point)."""
    from coding_os.sessions.database import with_index
    from coding_os.storage.base import SessionRecord, StorageError

    record = SessionRecord(id=session, agent=agent, panel="rewind", native_id=native_id,
                           project=project, cwd=cwd, source="rewind", forked_from=forked_from,
                           started=now, last_active=now, status="active",
                           fork_point=fork_point)
    try:
        with_index(tiers, os.environ if env is None else env,
                   lambda storage: storage.upsert_session(record))
    except StorageError as exc:
        from coding_os.errors import StateIOError

        raise StateIOError(f"the rewound session {session} cannot be filed in the index: "
                           f"{exc}") from None


def _keep_pending(tiers: Tiers, agent: str, session: str, argv: list[str], cwd: str, *,
                  waits_for: str | None, leaf: object, transcript: object) -> None:
    from coding_os.state import presence

    presence.write_presence(tiers, agent, session, {_PENDING: {
        "argv": argv, "cwd": cwd, "waits_for": waits_for, "leaf": leaf,
        "transcript": transcript}})


def pending_handover(tiers: Tiers, session: str) -> dict[str, Any] | None:
    """The handover a conversation rewind left for `session` that the agent has not run yet
    (`{"argv", "cwd", "command"}`), or None: resuming the session runs it instead of a plain
    resume. A Claude Code fork waits until its new transcript exists; a rewind in place until
    the transcript's live leaf is no longer the one it had."""
    agent = agent_of_session(session)
    if agent is None:
        return None
    from coding_os.state import presence

    record = presence.read_presence(tiers, agent, session) or {}
    pending = record.get(_PENDING)
    if not isinstance(pending, dict) or not isinstance(pending.get("argv"), list):
        return None
    path = pending.get("transcript")
    waits_for = pending.get("waits_for")
    if isinstance(path, str) and path:
        if isinstance(waits_for, str):
            if os.path.exists(os.path.join(os.path.dirname(path), f"{waits_for}.jsonl")):
                return None
        else:
            from coding_os.adapters.claude.tree import leaf_uuid

            if leaf_uuid(path) != pending.get("leaf"):
                return None
    return _handover([str(a) for a in pending["argv"]], str(pending.get("cwd") or "."))


def plan_rewind(tiers: Tiers, record: Mapping[str, object], *, in_place: bool = False,
                env: Mapping[str, str] | None = None) -> ConversationRewind:
    """Check that the conversation of checkpoint `record`'s session can be rewound to it, and
    how; nothing is changed.

    Raises:
        InvalidInput: the checkpoint belongs to no session, or (cos-native) has no transcript
            position; `in_place` for a cos-native session.
        NotFound: the agent's log is gone, or the checkpoint's native point is not in it.
    """
    session = record.get("session")
    if not isinstance(session, str):
        raise InvalidInput(f"checkpoint {record['id']} belongs to no session: only its code "
                           "can be rewound")
    path = transcript.transcript_path(tiers, session)
    if os.path.exists(path):
        seq = record.get("seq")
        if not isinstance(seq, int):
            raise InvalidInput(f"checkpoint {record['id']} has no transcript position")
        return ConversationRewind(record, session, "cos", in_place, point={"to_seq": seq},
                                  note=f"entries after seq {seq} are hidden, not deleted")
    agent = agent_of_session(session) or "?"
    native = record.get("native")
    if agent not in ("claude", "codex"):
        return ConversationRewind(record, session, agent, in_place, available=False,
                                  note=f"cos keeps no transcript of {session}: only its code "
                                       "is rewound")
    if not isinstance(native, dict) or native.get("agent") != agent \
            or not isinstance(native.get("native_id"), str):
        return ConversationRewind(record, session, agent, in_place, available=False,
                                  note=f"checkpoint {record['id']} records no native point "
                                       "(taken before cos recorded them): the conversation "
                                       "part is unavailable, only the code is rewound")
    if agent == "claude":
        return _plan_claude(record, session, native, in_place, env)
    return _plan_codex(record, session, native, in_place, env)


def _plan_claude(record: Mapping[str, object], session: str, native: Mapping[str, Any],
                 in_place: bool, env: Mapping[str, str] | None) -> ConversationRewind:
    from coding_os.adapters.claude.tree import read_tree

    checkpoint = record["id"]
    path = native.get("transcript")
    if not isinstance(path, str) or not os.path.isfile(path):
        raise NotFound(f"the Claude Code transcript of checkpoint {checkpoint} is gone "
                       f"({path}): its conversation cannot be rewound")
    entries = _read_jsonl(path)
    tree = read_tree(entries)
    trigger = str(record.get("trigger") or "")
    uuid, prompt_id = native.get("uuid"), native.get("prompt_id")
    anchor: str | None
    if trigger == "turn-end" or (uuid is not None and trigger != "prompt"
                                 and prompt_id is None):
        anchor = _known(tree.nodes, uuid, checkpoint, path) if uuid is not None else None
    elif uuid is not None:
        anchor = _known(tree.nodes, uuid, checkpoint, path)
        entry = tree.nodes[anchor]
        if entry.get("type") == "user" and prompt_id and entry.get("promptId") == prompt_id:
            anchor = _parent_of(entry)  # the prompt itself was written before the hook ran
    elif isinstance(prompt_id, str):
        prompt = next((e for e in tree.nodes.values()
                       if e.get("type") == "user" and e.get("promptId") == prompt_id), None)
        if prompt is None:
            raise NotFound(f"the prompt of checkpoint {checkpoint} ({prompt_id}) is not in "
                           f"{path}: the transcript was changed; only the code can be rewound")
        anchor = _parent_of(prompt)
    else:
        anchor = None
    at = None
    while anchor is not None:  # Claude Code resumes at an assistant entry
        node = tree.nodes.get(anchor)
        if node is None:
            break
        if node.get("type") == "assistant":
            at = anchor
            break
        anchor = _parent_of(node)
    cwd = None
    if at is not None and isinstance(tree.nodes[at].get("cwd"), str):
        cwd = str(tree.nodes[at]["cwd"])
    cwd = cwd or _first_cwd(entries) or str(record.get("root") or os.getcwd())
    kept = len(tree.chain(at)[0]) if at is not None else 0
    note = (f"Claude Code resumes the conversation up to entry {at} ({kept} entries)"
            if at is not None else "nothing came before the checkpoint: the handover starts "
                                   "a new conversation")
    if at is not None:
        note += (" in place (the dropped turns stay in the file as a branch)" if in_place else
                 " as a new session; the original stays resumable as it was")
    return ConversationRewind(record, session, "claude", in_place,
                              native_id=str(native["native_id"]), cwd=cwd,
                              point={"uuid": at, "leaf": tree.leaf, "transcript": path},
                              note=note, env=env)


def _plan_codex(record: Mapping[str, object], session: str, native: Mapping[str, Any],
                in_place: bool, env: Mapping[str, str] | None) -> ConversationRewind:
    checkpoint = record["id"]
    thread = str(native["native_id"])
    path = native.get("transcript")
    if not isinstance(path, str) or not os.path.isfile(path):
        path = _find_rollout(thread, env)
    if path is None:
        raise NotFound(f"no Codex rollout of thread {thread} (checkpoint {checkpoint}): its "
                       "conversation cannot be rewound")
    entries = _read_jsonl(path)
    turns: list[tuple[str, str]] = []  # (turn id, when it started)
    cwd = None
    for entry in entries:
        payload = entry.get("payload")
        if not isinstance(payload, dict):
            continue
        if entry.get("type") == "session_meta" and isinstance(payload.get("cwd"), str):
            cwd = cwd or payload["cwd"]
        if entry.get("type") == "event_msg" and payload.get("type") == "task_started" \
                and isinstance(payload.get("turn_id"), str) \
                and payload["turn_id"] not in (t for t, _ in turns):
            turns.append((payload["turn_id"], str(entry.get("timestamp") or "")))
    ids = [turn for turn, _ in turns]
    turn = native.get("turn_id")
    trigger = str(record.get("trigger") or "")
    if isinstance(turn, str):
        if turn not in ids:
            raise NotFound(f"turn {turn} of checkpoint {checkpoint} is not in {path}: the "
                           "rollout was changed; only the code can be rewound")
        index = ids.index(turn)
    else:  # the engine's checkpoint: the turn that started after it
        stamp = str(record.get("ts") or "")
        later = [i for i, (_, started) in enumerate(turns) if started >= stamp]
        index = later[0] if later else len(ids)
    if trigger == "turn-end":
        index += 1  # the checkpoint's turn is kept
    through = ids[index - 1] if index > 0 else None
    before = ids[index] if index < len(ids) else None
    kept = index
    note = (f"Codex keeps {kept} turn{'s' * (kept != 1)} of the thread"
            + (" in place (thread/revert)" if in_place else
               " in a fork (thread/fork); the original thread stays as it was"
               if through is not None else
               ": nothing came before the checkpoint, the handover starts a new thread"))
    if in_place and before is None:
        note = "the thread has no turn after the checkpoint: nothing to revert"
    return ConversationRewind(record, session, "codex", in_place, native_id=thread,
                              cwd=cwd or str(record.get("root") or os.getcwd()),
                              point={"through": through, "before": before, "rollout": path},
                              note=note, env=env)


def _find_rollout(thread: str, env: Mapping[str, str] | None) -> str | None:
    environ = os.environ if env is None else env
    home = environ.get("CODEX_HOME") or os.path.join(environ.get("HOME") or "~", ".codex")
    found = glob.glob(os.path.join(glob.escape(os.path.expanduser(home)), "sessions", "*", "*",
                                   "*", f"rollout-*-{glob.escape(thread)}.jsonl"))
    return sorted(found)[-1] if found else None


def _read_jsonl(path: str) -> list[dict[str, Any]]:
    """The JSON objects of a log file, one a line (a torn or foreign line is skipped)."""
    try:
        with open(path, "rb") as f:
            return list(jsonwire.objects(f))
    except OSError as exc:
        raise NotFound(f"cannot read {path}: {exc.strerror or exc}") from None


def _known(nodes: Mapping[str, object], uuid: object, checkpoint: object, path: str) -> str:
    if not isinstance(uuid, str) or uuid not in nodes:
        raise NotFound(f"the native point of checkpoint {checkpoint} (entry {uuid}) is not in "
                       f"{path}: the transcript was changed; only the code can be rewound")
    return uuid


def _parent_of(entry: Mapping[str, Any]) -> str | None:
    parent = entry.get("parentUuid") or entry.get("logicalParentUuid")
    return parent if isinstance(parent, str) and parent else None


def _first_cwd(entries: list[dict[str, Any]]) -> str | None:
    return next((str(e["cwd"]) for e in entries if isinstance(e.get("cwd"), str)), None)


def rewind_conversation(tiers: Tiers, record: Mapping[str, object], dry_run: bool, *,
                        in_place: bool = False,
                        env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Rewind the conversation of the session of checkpoint `record` to it (`dry_run`: say
    what would be done): `plan_rewind`, then `apply`.

    Raises:
        As `plan_rewind` and `ConversationRewind.apply`.
    """
    return plan_rewind(tiers, record, in_place=in_place, env=env).apply(tiers, dry_run)
