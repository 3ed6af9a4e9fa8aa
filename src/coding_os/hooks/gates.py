"""Policy gates on tool calls (`gates:` in `.coding-os.yaml`), checked by the PreToolUse hook.

Three gates, each off until configured (see docs/gates.md):

    gates:
      require_task_for_edits: true        # or {enabled: true, strict: true}
      protect_paths: ["secrets/**", .env] # or {paths: [...], strict: true}
      block_secrets: true                 # or {enabled: true, strict: false}

A gate that blocks answers the client with a deny decision and a one-line reason naming the fix
(`permissionDecision: deny` on stdout, the reason on stderr, exit 2: Claude Code reads the JSON,
Codex the stderr). Every configured gate's decision goes into the hooks-log line of the call. A
gate whose own check fails (a bad config value or glob, an unreadable state file, a bug) lets
the call through and says so in one line to the agent, unless it is `strict`: then it blocks.

A secret found by `block_secrets` is never written anywhere: the reason and the log name the
pattern only, and the logged input summary of the call is replaced. Its shapes are those of
redact.py (`BLOCKING`), the module that also redacts every text the hooks log or store.

Hot path: imported only when `gates:` is present; `re` is imported only by the gates that
match text.
"""

from __future__ import annotations

import os

from coding_os.adapters import FILE_TOOLS, PATCH_TOOLS, SHELL_TOOLS, patch_files
from coding_os.hooks.context import HookResult, excerpt

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from coding_os.hooks.context import HookContext

__all__ = ["GATES", "Verdict", "check", "blocked_result"]

GATES = ("block_secrets", "protect_paths", "require_task_for_edits")  # the order they run in
_EDIT_TOOLS = (*FILE_TOOLS, *PATCH_TOOLS)

# Shell words that change files when they name them (best effort: see docs/gates.md).
_WRITING_COMMANDS = frozenset((
    "rm", "rmdir", "unlink", "shred", "mv", "cp", "ln", "install", "rsync", "tee", "truncate",
    "chmod", "chown", "chgrp", "touch", "dd", "mkdir", "mkfifo", "patch", "split", "csplit",
))
_IN_PLACE_COMMANDS = frozenset(("sed", "perl", "ruby", "gsed"))  # writing only with -i
_WRITING_GIT = frozenset(("checkout", "restore", "rm", "mv", "apply", "reset", "clean", "stash",
                          "am", "cherry-pick", "revert", "merge", "rebase", "pull", "switch"))
# Shell operators, longest first: bash reads them greedily (`;>` is `;` then `>`, `1<>f` is
# `1`, `<>`, `f`). A backquote starts or ends a command as `(` and `)` do.
_OPERATORS = ("<<<", "<<-", "&>>", ";;&", "&&", "||", "|&", ";;", ";&", ">>", ">|", ">&", "&>",
              "<<", "<>", "<&", ";", "&", "|", "(", ")", "<", ">", "`")
_SEPARATORS = frozenset((";", "&&", "||", "|", "&", "(", ")", "|&", ";;", ";&", ";;&", "`"))
# Redirects that open their word for writing (`<>` reads and writes); `>&` followed by a number
# or `-` duplicates or closes a descriptor instead. `<`, `<&`, `<<`, `<<-`, `<<<` only read.
_WRITE_REDIRECTS = frozenset((">", ">>", ">|", "&>", "&>>", "<>", ">&"))
_ANSI_C_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n",
                   "r": "\r", "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
_COMPILED: dict[str, Any] = {}


class GateBroken(Exception):
    """A gate could not check the call: its configuration or its input is not usable."""


class Verdict:
    """The gates' answer on one tool call: a blocking result, and/or a warning for the agent."""

    __slots__ = ("blocked", "warning")

    def __init__(self, blocked: HookResult | None = None, warning: str | None = None) -> None:
        self.blocked = blocked
        self.warning = warning


class _Gate:
    """One configured gate: whether it is on, whether it is strict, and its options."""

    __slots__ = ("name", "enabled", "strict", "options", "error")

    def __init__(self, name: str, enabled: bool, strict: bool, options: object = None,
                 error: str | None = None) -> None:
        self.name = name
        self.enabled = enabled
        self.strict = strict
        self.options = options
        self.error = error  # the configuration is broken: the gate cannot check


def check(ctx: HookContext, session: str, section: object, config: dict[str, Any],
          log: dict[str, object]) -> Verdict:
    """The configured gates' verdict on the PreToolUse call in `ctx`; decisions go into `log`.

    Never raises for a broken gate: it fails open with a warning, or closed when strict.
    """
    tool = ctx.payload.get("tool_name")
    tool = tool if isinstance(tool, str) else ""
    tool_input = ctx.payload.get("tool_input")
    gates, problems = _configured(section)
    decisions: list[str] = []
    warnings: list[str] = list(problems)
    if problems:
        log["gate_config_error"] = "; ".join(problems)
    blocked: HookResult | None = None
    for gate in gates:
        if not gate.enabled:
            continue
        if not _applies(gate.name, tool):
            decisions.append(f"{gate.name}:n/a")
            continue
        checker = _CHECKS[gate.name]
        try:
            if gate.error is not None:
                raise GateBroken(gate.error)
            reason = checker(ctx, session, gate, config, tool, tool_input, log)
        except Exception as exc:  # noqa: BLE001 - a gate's own failure must not stop the work
            cause = str(exc) if isinstance(exc, GateBroken) else f"{type(exc).__name__}: {exc}"
            cause = " ".join(cause.split())[:300]
            if gate.name == "block_secrets" and "input" in log:
                log["input"] = "[not logged: block_secrets could not check it]"
            log[f"gate_error_{gate.name}"] = cause
            if gate.strict:
                decisions.append(f"{gate.name}:failed-closed")
                reason = (f"Blocked by coding-os gate {gate.name}: it could not check this "
                          f"call ({cause}) and is strict; fix gates.{gate.name} in "
                          f".coding-os.yaml")
            else:
                decisions.append(f"{gate.name}:failed-open")
                warnings.append(f"coding-os gate {gate.name} could not check this call "
                                f"({cause}); it was allowed. Fix gates.{gate.name} in "
                                f".coding-os.yaml")
                continue
        else:
            if reason is None:
                decisions.append(f"{gate.name}:allow")
                continue
            decisions.append(f"{gate.name}:block")
        log["blocked_by"] = gate.name
        log["gate_reason"] = reason
        blocked = blocked_result(reason, session)
        break
    if decisions:
        log["gates"] = ",".join(decisions)
    warning = " | ".join(warnings) if warnings else None
    if warning:
        log["gate_warning"] = warning
    return Verdict(blocked, None if blocked is not None else warning)


def blocked_result(reason: str, session: str) -> HookResult:
    """The hook's answer that blocks the call with `reason`, in both clients' forms.

    Claude Code reads the JSON decision (even with exit 2); Codex reads stderr of an exit 2.
    """
    output: dict[str, object] = {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": reason}}
    return HookResult(output, session, exit_code=2, message=reason)


def _applies(name: str, tool: str) -> bool:
    if name == "require_task_for_edits":
        return tool in _EDIT_TOOLS
    return tool in _EDIT_TOOLS or tool in SHELL_TOOLS


# -- configuration -------------------------------------------------------------------------------


def _configured(section: object) -> tuple[list[_Gate], list[str]]:
    """The gates of the `gates:` section, and what is wrong with the section itself."""
    if section is None or section is False:
        return [], []
    if not isinstance(section, dict):
        return [], [f"coding-os gates: expected a mapping in .coding-os.yaml, got "
                    f"{type(section).__name__}; no gate is checked"]
    problems = []
    for key in section:
        if key not in GATES:
            problems.append(f"coding-os gates: unknown gate {str(key)[:60]!r} in .coding-os.yaml "
                            f"(known: {', '.join(sorted(GATES))}); it is not checked")
    gates = [_gate_config(name, section[name]) for name in GATES if name in section]
    return gates, problems


def _gate_config(name: str, raw: object) -> _Gate:
    """One gate's settings: `true`/`false`, a list of globs (protect_paths), or a mapping."""
    if raw is None or raw is False:
        return _Gate(name, enabled=False, strict=False)
    if raw is True:
        return _Gate(name, enabled=True, strict=False,
                     error=f"gates.{name}: expected a list of globs, got true"
                     if name == "protect_paths" else None)
    if name == "protect_paths" and isinstance(raw, (list, str)):
        return _paths_gate(name, raw, strict=False)
    if not isinstance(raw, dict):
        return _Gate(name, enabled=True, strict=False,
                     error=f"gates.{name}: expected true, false or a mapping, got "
                           f"{type(raw).__name__}")
    strict = raw.get("strict", False)
    if not isinstance(strict, bool):
        return _Gate(name, enabled=True, strict=True,
                     error=f"gates.{name}.strict: expected true or false")
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        return _Gate(name, enabled=True, strict=strict,
                     error=f"gates.{name}.enabled: expected true or false")
    if not enabled:
        return _Gate(name, enabled=False, strict=strict)
    unknown = [str(k) for k in raw if k not in ("enabled", "strict", "paths")
               or (k == "paths" and name != "protect_paths")]
    if unknown:
        return _Gate(name, enabled=True, strict=strict,
                     error=f"gates.{name}: unknown setting {unknown[0][:40]!r}")
    if name == "protect_paths":
        return _paths_gate(name, raw.get("paths"), strict=strict)
    return _Gate(name, enabled=True, strict=strict)


def _paths_gate(name: str, raw: object, strict: bool) -> _Gate:
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        return _Gate(name, enabled=True, strict=strict,
                     error=f"gates.{name}: expected a list of globs")
    for glob in raw:
        if not isinstance(glob, str) or not glob.strip():
            return _Gate(name, enabled=True, strict=strict,
                         error=f"gates.{name}: every glob must be a non-empty string, got "
                               f"{str(glob)[:40]!r}")
    return _Gate(name, enabled=True, strict=strict, options=[g.strip() for g in raw])


# -- require_task_for_edits ----------------------------------------------------------------------


def _require_task(ctx: HookContext, session: str, gate: _Gate, config: dict[str, Any], tool: str,
                  tool_input: object, log: dict[str, object]) -> str | None:
    """Edit tools only while this session owns a current task (`.task-current`).

    Raises:
        GateBroken: the horizon setting is bad or the state file cannot be read.
    """
    if tool not in _EDIT_TOOLS:
        return None
    from coding_os.state.tiers import horizon_for
    from coding_os.errors import CosError
    from coding_os.state.statefile import check_state

    name = ".task-current"
    fix = "run `cos state set .task-current TASK-<n>` in this session first"
    try:
        horizon = horizon_for(name, config)
        verdict = check_state(ctx.tiers.state_path(ctx.agent, ctx.panel, name), session,
                              horizon, ctx.now)
    except (CosError, OSError) as exc:
        raise GateBroken(f"cannot read {name}: {exc}") from None
    if verdict.valid and (verdict.value or "").strip():
        return None
    log["task_check"] = verdict.reason or "empty"
    why = {
        "no_file": "this session has no current task",
        "session_mismatch": "the current task belongs to another session (session mismatch)",
        "stale": "this session's current task is older than its horizon",
        "malformed": "the .task-current file is not a coding-os state file",
    }.get(verdict.reason or "", "this session's current task is empty")
    return f"Blocked by coding-os gate require_task_for_edits: {why}; {fix}"


# -- protect_paths -------------------------------------------------------------------------------


def _protect_paths(ctx: HookContext, session: str, gate: _Gate, config: dict[str, Any], tool: str,
                   tool_input: object, log: dict[str, object]) -> str | None:
    """No tool writes a path matching one of the globs.

    Raises:
        GateBroken: a glob is not valid.
    """
    if tool not in _EDIT_TOOLS and tool not in SHELL_TOOLS:
        return None
    globs: list[str] = gate.options  # type: ignore[assignment]
    matchers = [(glob, _glob_matcher(glob)) for glob in globs]
    cwd = _call_cwd(ctx)
    if tool in SHELL_TOOLS:
        command = _shell_command(tool_input)
        targets = _shell_write_targets(command) if command else []
        how = "a shell command that looks like it writes"
    else:
        targets = _edit_targets(tool, tool_input)
        how = f"{tool}"
    for target in targets:
        for glob, matches in matchers:
            if any(matches(candidate) for candidate in _candidates(ctx.root, cwd, target)):
                log["protected"] = glob
                return (f"Blocked by coding-os gate protect_paths: {how} targets "
                        f"{excerpt(target, 200)}, which matches the protected glob {glob!r}; "
                        f"leave it unchanged or ask the user to change it")
    return None


def _glob_matcher(glob: str) -> Callable[[str], bool]:
    """A test for project-relative paths: `*` and `?` stay within a directory, `**` spans
    directories, a glob without `/` matches a name at any depth, `dir/**` matches `dir` too.

    Raises:
        GateBroken: the glob is not valid (an unclosed `[`).
    """
    cached = _COMPILED.get(glob)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    import re

    pattern = glob[2:] if glob.startswith("./") else glob
    anchored = "/" in pattern.rstrip("/")
    pattern = pattern.strip("/")
    if glob.endswith("/"):
        pattern += "/**"
    out = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == n:
            out.append("(?:/.*)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            start = i + 2 if pattern[i + 1:i + 2] == "!" else i + 1
            start += 1 if pattern[start:start + 1] == "]" else 0  # `[]x]`: a literal ]
            end = pattern.find("]", start)
            if end < 0:
                raise GateBroken(f"bad glob {glob!r}: unclosed [")
            body = pattern[i + 1:end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    body = "".join(out)
    try:
        regex = re.compile(body if anchored else f"(?:.*/)?{body}", re.DOTALL)
    except re.error as exc:
        raise GateBroken(f"bad glob {glob!r}: {exc}") from None
    _COMPILED[glob] = regex.fullmatch
    return regex.fullmatch  # type: ignore[return-value]


def _call_cwd(ctx: HookContext) -> str:
    cwd = ctx.payload.get("cwd")
    return cwd if isinstance(cwd, str) and os.path.isabs(cwd) else ctx.caller.cwd


def _candidates(root: str, cwd: str, target: str) -> list[str]:
    """The forms of `target` the globs are matched against: relative to the project root as
    written and with symlinks resolved; just the name where either is outside the project."""
    target = os.path.expanduser(target) if target.startswith("~") else target
    absolute = os.path.normpath(os.path.join(cwd, target))
    forms: list[str] = []
    for path in (absolute, os.path.realpath(absolute)):
        found = False
        for base in (root, os.path.realpath(root)):
            inside = base.rstrip(os.sep) + os.sep
            if path.startswith(inside):
                forms.append(path[len(inside):])
                found = True
            elif path == base:
                forms.append(".")
                found = True
        if not found:  # outside (as written, or where a symlink leads): name globs apply
            forms.append(os.path.basename(path))
    return list(dict.fromkeys(forms))


def _edit_targets(tool: str, tool_input: object) -> list[str]:
    if tool in PATCH_TOOLS:
        return patch_files(_patch_text(tool_input))
    if isinstance(tool_input, dict):
        path = tool_input.get(FILE_TOOLS.get(tool, ""))
        if isinstance(path, str) and path:
            return [path]
        raise GateBroken(f"{tool} input names no file")
    raise GateBroken(f"{tool} input is not an object")


def _patch_text(tool_input: object) -> str:
    """The patch an apply_patch call carries (Codex reports it as `{"command": patch}`).

    Raises:
        GateBroken: no patch text is found.
    """
    if isinstance(tool_input, str):
        return tool_input
    if isinstance(tool_input, dict):
        for key in ("command", "input", "patch"):
            value = tool_input.get(key)
            if isinstance(value, str):
                return value
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                return "\n".join(value)
    raise GateBroken("apply_patch input holds no patch text")


def _shell_command(tool_input: object) -> str | None:
    if isinstance(tool_input, str):
        return tool_input
    if isinstance(tool_input, dict):
        for key in ("command", "cmd"):
            value = tool_input.get(key)
            if isinstance(value, str):
                return value
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return " ".join(value)
    return None


def _shell_write_targets(command: str) -> list[str]:
    """The words of a shell command that it may write to (best effort, over-inclusive):
    redirect targets, and every argument of a segment that runs a writing command."""
    targets: list[str] = []
    segment: list[tuple[bool, str]] = []
    for token in [*_shell_tokens(command), (True, ";")]:
        if token[0] and token[1] in _SEPARATORS:
            targets.extend(_segment_targets(segment))
            segment = []
        else:
            segment.append(token)
    return targets


def _shell_tokens(command: str, depth: int = 0) -> list[tuple[bool, str]]:
    """The words and operators of a shell command as bash splits them, `(True, op)` for an
    operator: quotes and escapes removed (`$'...'` decoded), a `#` starting a word comments out
    the line, a newline ends a command. What a command substitution inside double quotes runs
    is added after the command, as a command of its own (10 levels deep at most)."""
    tokens: list[tuple[bool, str]] = []
    nested: list[tuple[bool, str]] = []
    word: list[str] = []
    quoted = False  # the word has a quoted part: '' is a word too
    i, n = 0, len(command)
    while i < n:
        char = command[i]
        if char in " \t\n" or char in ";&|()<>`":
            if word or quoted:
                tokens.append((False, "".join(word)))
                word, quoted = [], False
            if char == "\n":
                tokens.append((True, ";"))
            if char in " \t\n":
                i += 1
            else:
                operator = next(op for op in _OPERATORS if command.startswith(op, i))
                tokens.append((True, operator))
                i += len(operator)
        elif char == "#" and not word and not quoted:
            i = command.find("\n", i)
            i = n if i < 0 else i
        elif char == "\\":
            word.append(command[i + 1:i + 2].replace("\n", ""))  # backslash-newline joins lines
            i += 2
        elif char == "'":
            close = command.find("'", i + 1)
            close = n if close < 0 else close
            word.append(command[i + 1:close])
            quoted, i = True, close + 1
        elif command.startswith("$'", i):
            text, i = _ansi_c_quoted(command, i + 2)
            word.append(text)
            quoted = True
        elif char == '"' or command.startswith('$"', i):
            i += 1 if char == '"' else 2
            while i < n and command[i] != '"':
                if command[i] == "\\" and command[i + 1:i + 2] in ('"', "\\", "$", "`", "\n"):
                    word.append(command[i + 1].replace("\n", ""))
                    i += 2
                    continue
                if depth < 10 and (command.startswith("$(", i) or command[i] == "`"):
                    inner, i = _substitution(command, i)
                    nested += [(True, ";"), *_shell_tokens(inner, depth + 1)]
                    continue
                word.append(command[i])
                i += 1
            quoted, i = True, i + 1
        else:
            word.append(char)
            i += 1
    if word or quoted:
        tokens.append((False, "".join(word)))
    return tokens + nested


def _substitution(command: str, start: int) -> tuple[str, int]:
    """The command of the `$(...)` or backquoted substitution at `start`, and where it ends."""
    if command[start] == "`":
        close = command.find("`", start + 1)
        close = len(command) if close < 0 else close
        return command[start + 1:close], close + 1
    depth, i = 0, start + 1
    while i < len(command):
        depth += {"(": 1, ")": -1}.get(command[i], 0)
        if depth == 0:
            break
        i += 1
    return command[start + 2:i], i + 1


def _ansi_c_quoted(command: str, start: int) -> tuple[str, int]:
    """The text of the `$'...'` whose body begins at `start`, escapes decoded as bash does
    (`\\x2e` is `.`), and the index after its closing quote."""
    text: list[str] = []
    i, n = start, len(command)
    while i < n and command[i] != "'":
        if command[i] != "\\" or i + 1 >= n:
            text.append(command[i])
            i += 1
            continue
        escape = command[i + 1]
        if escape in _ANSI_C_ESCAPES:
            text.append(_ANSI_C_ESCAPES[escape])
            i += 2
            continue
        if escape in "xuU":  # \xHH, \uHHHH, \UHHHHHHHH
            width = {"x": 2, "u": 4, "U": 8}[escape]
            digits_allowed, first = "0123456789abcdefABCDEF", i + 2
        elif escape in "01234567":  # \NNN, octal
            digits_allowed, first, width = "01234567", i + 1, 3
        else:
            text.append("\\" + escape)
            i += 2
            continue
        end = first
        while end < min(first + width, n) and command[end] in digits_allowed:
            end += 1
        value = int(command[first:end], 8 if width == 3 else 16) if end > first else None
        if value is None or value > 0x10FFFF:
            text.append("\\" + escape)
            i += 2
        else:
            text.append(chr(value))
            i = end
    return "".join(text), i + 1


def _segment_targets(tokens: list[tuple[bool, str]]) -> list[str]:
    targets: list[str] = []
    words: list[str] = []
    redirect: str | None = None
    for is_operator, text in tokens:
        if is_operator:  # what is left of the operators in a segment: redirects
            redirect = text
            continue
        if redirect is None:
            words.append(text)
            continue
        duplicate = redirect == ">&" and (text.isdigit() or text == "-")
        if redirect in _WRITE_REDIRECTS and not duplicate:
            targets.append(text)
        redirect = None  # a redirect's word is not an argument of the command
    names = [os.path.basename(w) for w in words]
    writes = (any(name in _WRITING_COMMANDS for name in names)
              or (any(name in _IN_PLACE_COMMANDS for name in names)
                  and any(w.startswith(("-i", "--in-place")) or w.startswith("-") and
                          "i" in w[1:] and not w.startswith("--") for w in words))
              or ("git" in names and any(w in _WRITING_GIT for w in words)))
    if writes:
        for word in words:
            if word.startswith("-") and "=" not in word:
                continue
            value = word.split("=", 1)[1] if "=" in word else word  # of=x, --output=x
            if value:
                targets.append(value)
    return targets


# -- block_secrets -------------------------------------------------------------------------------


def _block_secrets(ctx: HookContext, session: str, gate: _Gate, config: dict[str, Any], tool: str,
                   tool_input: object, log: dict[str, object]) -> str | None:
    """No write whose content holds a secret of a known shape; the secret is never repeated.

    Raises:
        GateBroken: the call's content cannot be read.
    """
    if tool not in _EDIT_TOOLS and tool not in SHELL_TOOLS:
        return None
    texts = _written_texts(tool, tool_input)
    found = _secret_kind(texts)
    if found is None:
        return None
    if "input" in log:
        log["input"] = f"[redacted: {found}]"  # the summary may hold the secret itself
    log["secret"] = found
    where = "shell command" if tool in SHELL_TOOLS else f"{tool} content"
    return (f"Blocked by coding-os gate block_secrets: the {where} contains a secret "
            f"(pattern {found}); keep secrets out of files and commands, read them from the "
            f"environment or a secret store instead")


def _written_texts(tool: str, tool_input: object) -> list[str]:
    """The text a call would write: file content, edit replacements, added patch lines, or the
    shell command itself.

    Raises:
        GateBroken: the input has an unexpected shape.
    """
    if tool in SHELL_TOOLS:
        command = _shell_command(tool_input)
        if command is None:
            raise GateBroken(f"{tool} input holds no command")
        return [command]
    if tool in PATCH_TOOLS:
        patch = _patch_text(tool_input)
        return ["\n".join(line[1:] for line in patch.splitlines() if line.startswith("+"))]
    if not isinstance(tool_input, dict):
        raise GateBroken(f"{tool} input is not an object")
    texts = []
    for key in ("content", "new_string", "new_source"):
        value = tool_input.get(key)
        if isinstance(value, str):
            texts.append(value)
    edits = tool_input.get("edits")
    if isinstance(edits, list):
        for edit in edits:
            if isinstance(edit, dict) and isinstance(edit.get("new_string"), str):
                texts.append(edit["new_string"])
    return texts


def _secret_kind(texts: list[str]) -> str | None:
    """The name of the first secret shape found in `texts` (the shapes of redact.BLOCKING, those
    recognised by the value itself), or None."""
    from coding_os.redact import first_secret

    return first_secret(texts)


_CHECKS: dict[str, Callable[..., str | None]] = {
    "require_task_for_edits": _require_task,
    "protect_paths": _protect_paths,
    "block_secrets": _block_secrets,
}
