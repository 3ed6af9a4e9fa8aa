"""The automatic checkpoints of DESIGN.md §5, taken before a prompt's edits (`prompt`), before a
tool call that may write (`tool:<tool>`), and at a turn's end (`turn-end`; what changes after
it, until the session's next checkpoint, changed outside the session).

Two callers take them through `take_auto`: the hooks that fire inside Claude Code and Codex
(hooks/checkpoint.py), and the engine's session core for the agents that run no cos hooks
(`codex app-server`, python agents, commands: runtime/core.py). This module is on the hook's
hot path: before a tool call on a tree unchanged since the session's latest checkpoint it needs
that checkpoint's head alone (heads.py); taking a checkpoint (take.py) is imported when one is
due.
"""

from __future__ import annotations

import os

from coding_os.adapters import FILE_TOOLS, PATCH_TOOLS, WRITE_TOOLS, patch_files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from coding_os.checkpoints.watch import Ask
    from coding_os.state.root import Resolution
    from coding_os.state.tiers import Tiers

__all__ = ["AUTO_TRIGGERS", "WRITING_TOOLS", "EDIT_TOOLS", "writes", "written_paths",
           "native_point", "take_auto"]

AUTO_TRIGGERS = ("prompt", "tool", "turn-end")
# Tools that may write to the working tree: the names the hooks report (adapters.WRITE_TOOLS)
# and the items `codex app-server` asks approval for before they run.
WRITING_TOOLS = (*WRITE_TOOLS, "fileChange", "commandExecution")
# Of those, the tools whose input names the files they write (what a tracked checkpoint covers).
EDIT_TOOLS = (*FILE_TOOLS, *PATCH_TOOLS, "fileChange")
_PATCH_KEYS = ("command", "cmd", "patch", "input")


def writes(tool: str | None) -> bool:
    """Whether a call of `tool` may write to the working tree (a checkpoint is taken first)."""
    return tool in WRITING_TOOLS


def written_paths(tool: str | None, tool_input: object) -> list[str]:
    """The files a call of `tool` with `tool_input` names as written (empty when it names none):
    an edit tool's path, the files of a patch, the paths of a Codex `fileChange`'s changes."""
    if tool in PATCH_TOOLS:
        if isinstance(tool_input, str):
            return patch_files(tool_input)
        if isinstance(tool_input, dict):
            for key in _PATCH_KEYS:
                if isinstance(tool_input.get(key), str):
                    return patch_files(tool_input[key])
        return []
    if not isinstance(tool_input, dict):
        return []
    if tool in FILE_TOOLS:
        path = tool_input.get(FILE_TOOLS[tool])
        return [path] if isinstance(path, str) and path else []
    if tool == "fileChange":
        changes = tool_input.get("changes")
        if isinstance(changes, dict):  # applyPatchApproval: path → change
            return [path for path in changes if isinstance(path, str) and path]
        if isinstance(changes, list):  # item/fileChange: [{"path", "kind", "diff"}]
            return [change["path"] for change in changes if isinstance(change, dict)
                    and isinstance(change.get("path"), str) and change["path"]]
    return []


def native_point(agent: str | None, trigger: str,
                 payload: Mapping[str, object]) -> dict[str, object] | None:
    """The agent's own point in its log for a checkpoint taken on hook `payload` (DESIGN.md §5),
    or None for an agent cos knows no such point of.

    Claude Code: its session, transcript and the prompt's `prompt_id`, and for a `prompt` or
    `turn-end` checkpoint the uuid of the transcript's live leaf (the last entry of the
    conversation before the prompt, or of the turn); Codex: its thread, rollout and `turn_id`.
    """
    def text(key: str) -> str | None:
        value = payload.get(key)
        return value if isinstance(value, str) and value else None

    transcript = text("transcript_path")
    if agent == "claude":
        uuid = None
        if transcript and trigger in ("prompt", "turn-end"):
            from coding_os.adapters.claude.leaf import leaf_uuid

            uuid = leaf_uuid(transcript)
        return {"agent": "claude", "native_id": text("session_id"), "transcript": transcript,
                "uuid": uuid, "prompt_id": text("prompt_id")}
    if agent == "codex":
        return {"agent": "codex", "native_id": text("session_id"), "transcript": transcript,
                "turn_id": text("turn_id")}
    return None


def take_auto(tiers: Tiers, resolution: Resolution, config: Mapping[str, object], *,
              cwd: str, home: str, session: str, agent: str | None, trigger: str,
              tool: str | None = None, named: Sequence[str] = (), prompt: str | None = None,
              seq: int | None = None, watcher: Ask | None = None,
              native: Mapping[str, object] | None = None) -> dict[str, object] | None:
    """Take the automatic checkpoint `trigger` (one of AUTO_TRIGGERS) of the checkout `cwd`
    lies in, for `session`; its record (as `take.create` returns it), or None when none is
    due: `checkpoints.auto: false`, a `tool` that does not write, or, in tracked mode, anything
    but an edit tool naming (`named`, relative to `cwd`) files inside the tree.

    `prompt` is kept with its secrets redacted unless the project says `redact: false`;
    `config` is the project's `.coding-os.yaml`; `watcher` asks the daemon's file watcher what
    changed (without it the tree is looked at).

    Raises:
        InvalidInput: a bad `checkpoints:` section or trigger. GitError, StateIOError, OSError:
            the checkpoint could not be taken.
    """
    from coding_os.errors import InvalidInput

    if trigger not in AUTO_TRIGGERS:
        raise InvalidInput(f"no automatic checkpoint {trigger!r}")
    if trigger == "tool" and not writes(tool):
        return None
    section = config.get("checkpoints")
    if isinstance(section, dict) and section.get("auto") is False:
        return None
    from coding_os.git.repo import checkout_root
    from coding_os.state.root import checkout_dir

    settings = None  # the defaults, read when a checkpoint needs them (not an unchanged tree)
    mode = "worktree"
    if section is not None:  # checked before every checkpoint: a bad value is its error
        from coding_os.checkpoints.settings import Settings

        settings = Settings(dict(config))
        mode = settings.mode
    checkout = checkout_dir(resolution, cwd, home)
    root = checkout_root(checkout) or os.path.realpath(checkout)
    paths = None
    if mode == "tracked":
        if trigger != "tool" or tool not in EDIT_TOOLS:
            return None  # tracked covers what the edit tools name, before they write
        inside = root.rstrip(os.sep) + os.sep
        paths = [p for p in (os.path.realpath(os.path.join(cwd, n)) for n in named)
                 if p.startswith(inside)]
        if not paths:
            return None
    stands = None
    if trigger == "tool" and mode == "worktree":
        # Before a tool call on a tree unchanged since the session's latest checkpoint, that
        # one stands for this point: known from its head alone (the hook's common case).
        from coding_os.checkpoints.heads import standing

        head = standing(tiers.checkpoints_dir, session, root)
        if head is not None:
            return head.reused(session, root)
        stands = False
    from coding_os.checkpoints.take import create

    if prompt:
        from coding_os import redact

        if redact.enabled(config):
            prompt = redact.redact(prompt)
    return create(tiers, root, session=session, agent=agent, mode=mode, paths=paths,
                  trigger=f"tool:{tool}" if trigger == "tool" else trigger, prompt=prompt,
                  seq=seq, settings=settings, watcher=watcher, native=native, stands=stands)
