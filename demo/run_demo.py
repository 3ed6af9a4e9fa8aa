"""`make demo`: the main job end to end on a scratch project, printed readably.

A scratch git repository with a linked worktree; `cos init` for Claude Code and Codex; then a
scripted sequence of real-shaped hook payloads from two agents and two panels (one in the main
checkout, one in the worktree), fired exactly as the installed hook commands run: the state layer
(`cos where`, `cos whoami`, `cos hooks-log`, a state ownership check that refuses another panel's
marker); one list of sessions across cos, Claude Code and Codex (the shared fixtures imported),
resume, fork and export; checkpoints of what an edit tool and a shell command changed, a rewind
and its undo, and the daemon's file watcher; the brain (a shared task board, an MCP call filed
under its session, search). Everything runs the installed `cos` as a subprocess, with the
embedded SQLite default, under a private HOME.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

COS = str(Path(sys.executable).with_name("cos"))
BOLD = "\033[1m" if sys.stdout.isatty() else ""
DIM = "\033[2m" if sys.stdout.isatty() else ""
RESET = "\033[0m" if sys.stdout.isatty() else ""


def heading(text: str) -> None:
    print(f"\n{BOLD}== {text}{RESET}")


def run(argv: list[str], cwd: Path, env: dict[str, str], stdin: str | None = None,
        show: bool = True, check: bool = True) -> subprocess.CompletedProcess[str]:
    if show:
        prefix = " ".join(f"{k}={v}" for k, v in env.items() if k in ("COS_AGENT", "COS_PANEL_ID"))
        print(f"{DIM}$ {prefix + ' ' if prefix else ''}{shlex.join(argv)}  (in {cwd.name}){RESET}")
    proc = subprocess.run(argv, cwd=cwd, env={**BASE_ENV, **env}, input=stdin, text=True,
                          capture_output=True)
    if show and proc.stdout.strip():
        print(proc.stdout.rstrip())
    if show and proc.stderr.strip():
        print(f"{DIM}(stderr) {proc.stderr.strip()}{RESET}")
    if check and proc.returncode != 0:
        raise SystemExit(f"demo step failed with exit {proc.returncode}: {shlex.join(argv)}")
    return proc


def hook_argv(checkout: Path, agent: str, event: str) -> tuple[dict[str, str], list[str]]:
    """The command `cos init` installed for this agent and event, split into env and argv."""
    rel = ".claude/settings.json" if agent == "claude" else ".codex/hooks.json"
    settings = json.loads((checkout / rel).read_text(encoding="utf-8"))
    words = shlex.split(settings["hooks"][event][0]["hooks"][0]["command"])
    env = {}
    while "=" in words[0] and not words[0].startswith("/"):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return env, words


def fire(checkout: Path, cwd: Path, agent: str, event: str, payload: dict[str, object],
         extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env, argv = hook_argv(checkout, agent, event)
    env.update(extra_env or {})
    body = {"hook_event_name": event, "cwd": str(cwd), **payload}
    proc = run(argv, cwd, env, stdin=json.dumps(body), show=False)
    label = payload.get("tool_name") or payload.get("source") or payload.get("reason") or ""
    out = ""
    if proc.stdout.strip():
        specific = json.loads(proc.stdout)["hookSpecificOutput"]
        if "updatedInput" in specific:
            out = f"  -> updatedInput: {json.dumps(specific['updatedInput'])[:110]}"
        else:
            context = specific.get("additionalContext", "")
            out = f"  -> additionalContext: {context.splitlines()[-1][:90]}"
    print(f"  {agent:<6} {cwd.name:<9} {event:<17} {label}{out}")
    return proc


def main() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="cos-demo-"))
    global BASE_ENV
    home = scratch / "home"
    home.mkdir()
    BASE_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
                "GIT_AUTHOR_NAME": "demo", "GIT_AUTHOR_EMAIL": "demo@example.invalid",
                "GIT_COMMITTER_NAME": "demo", "GIT_COMMITTER_EMAIL": "demo@example.invalid"}
    repo = scratch / "project"
    worktree = scratch / "feature"
    try:
        heading("A scratch repository with a linked worktree")
        repo.mkdir()
        run(["git", "init", "-q", "-b", "main"], repo, {})
        (repo / "app.py").write_text("print('hello')\n", encoding="utf-8")
        run(["git", "add", "."], repo, {}, show=False)
        run(["git", "commit", "-q", "-m", "init"], repo, {}, show=False)
        run(["git", "worktree", "add", "-q", str(worktree), "-b", "feature"], repo, {})

        heading("cos init for both agents (in the main checkout and in the worktree)")
        run([COS, "init", "--agent", "claude"], repo, {})
        run([COS, "init", "--agent", "codex"], repo, {})
        run([COS, "init", "--agent", "codex"], worktree, {})
        print(f"{DIM}(a second init changes no byte:){RESET}")
        run([COS, "init", "--agent", "claude"], repo, {})

        heading("Hook fires: Claude in main, Codex in the worktree, a second Claude panel")
        claude_a = "7f1d4c8e-2b1a-4c3d-9e8f-a1b2c3d4e5f6"
        claude_b = "1a2b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c8d"
        codex = "019e1625-789d-76c0-80ab-3724b5ddb799"
        tp = str(home / ".claude" / "projects" / "-demo" / f"{claude_a}.jsonl")
        fire(repo, repo, "claude", "SessionStart", {"session_id": claude_a, "source": "startup",
                                                    "transcript_path": tp})
        fire(worktree, worktree, "codex", "SessionStart",
             {"session_id": codex, "source": "startup", "turn_id": "t1", "model": "gpt-5"})
        fire(repo, repo, "claude", "UserPromptSubmit", {"session_id": claude_a, "prompt": "Add a test",
                                                        "prompt_id": "p1"})
        fire(worktree, worktree, "codex", "UserPromptSubmit",
             {"session_id": codex, "prompt": "Fix the build", "turn_id": "t1", "model": "gpt-5"})
        fire(repo, repo, "claude", "PreToolUse", {"session_id": claude_a, "tool_name": "Edit",
                                                  "tool_input": {"file_path": str(repo / "app.py")}})
        fire(repo, repo, "claude", "PostToolUse", {"session_id": claude_a, "tool_name": "Edit",
                                                   "tool_input": {"file_path": str(repo / "app.py")},
                                                   "tool_response": {"filePath": str(repo / "app.py")}})
        fire(worktree, worktree, "codex", "PostToolUse",
             {"session_id": codex, "tool_name": "Bash", "tool_input": {"command": "make build"},
              "tool_response": "ok", "turn_id": "t1", "model": "gpt-5"})
        fire(repo, repo, "claude", "SessionStart", {"session_id": claude_b, "source": "startup"})
        fire(repo, repo, "claude", "Stop", {"session_id": claude_a, "stop_hook_active": False,
                                            "last_assistant_message": "Added the test."})

        env_a = {"COS_AGENT": "claude", "COS_PANEL_ID": claude_a}
        env_b = {"COS_AGENT": "claude", "COS_PANEL_ID": claude_b}
        heading("Panel A sets its task; compaction keeps the session and re-injects the card")
        run([COS, "state", "set", ".task-current", "TASK-12"], repo, env_a)
        fire(repo, repo, "claude", "PreCompact", {"session_id": claude_a, "trigger": "auto",
                                                  "custom_instructions": ""})
        fire(repo, repo, "claude", "SessionStart", {"session_id": claude_a, "source": "compact"})
        fire(repo, repo, "claude", "SessionEnd", {"session_id": claude_a, "reason": "other"})

        heading("cos where (from the worktree: routed to the main repository's state dir)")
        run([COS, "where"], worktree / "", {})
        heading("cos whoami (panel A, then the Codex panel from its payload)")
        run([COS, "whoami"], repo, env_a)
        payload = json.dumps({"session_id": codex, "hook_event_name": "PostToolUse"})
        run([COS, "whoami", "--payload", "-"], worktree, {"COS_AGENT": "codex"}, stdin=payload)

        heading("State ownership: panel B is refused panel A's marker")
        run([COS, "state", "get", ".task-current"], repo, env_a)
        shutil.copy(repo / ".coding-os" / "claude" / "panels" / claude_a / ".task-current",
                    repo / ".coding-os" / "claude" / "panels" / claude_b / ".task-current")
        print(f"{DIM}(copied panel A's .task-current into panel B's directory){RESET}")
        refused = run([COS, "state", "get", ".task-current"], repo, env_b, check=False)
        print(f"exit {refused.returncode}: panel B does not trust it")
        run([COS, "state", "check", ".task-current", "--json"], repo, env_b, check=False)

        heading("cos hooks-log -n 8")
        run([COS, "hooks-log", "-n", "8"], repo, {})
        heading("cos observations (what the hooks observed, from the shared SQLite database)")
        run([COS, "observations", "-n", "6"], repo, {})
        sessions_part(scratch, repo, home)
        checkpoints_part(repo)
        daemon_part(repo)
        brain_part(repo)
        engine_part(repo)
        heading("What the state dir holds")
        for path in sorted((repo / ".coding-os").rglob("*")):
            if path.is_file() and ".tmp-" not in path.name and "trash" not in path.parts \
                    and "objects" not in path.parts and "points" not in path.parts:
                print(f"  {path.relative_to(repo)}")
        checkpoints = repo / ".coding-os" / "checkpoints"
        print(f"  .coding-os/checkpoints/points/: {len(list((checkpoints / 'points').iterdir()))} "
              f"records; objects/: {sum(1 for p in (checkpoints / 'objects').rglob('*') if p.is_file())}"
              " content-addressed objects")
        print(f"\nScratch project kept at {scratch} (delete it when done).")
    except BaseException:
        print(f"\nScratch project left at {scratch} for inspection.", file=sys.stderr)
        raise


BASE_ENV: dict[str, str] = {}
FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"


def sessions_part(scratch: Path, repo: Path, home: Path) -> None:
    """Sessions: a cos-native one written through the API, real Claude Code and Codex logs
    imported, one list, a name, an export."""
    from coding_os import api

    heading("A cos-native session written through coding_os.api (a custom Python agent)")
    env = {**BASE_ENV, "COS_AGENT": "myagent"}
    session = api.create_session("myagent", title="Add a greeting", env=env, cwd=str(repo))
    api.append_event(session, "user", {"text": "Add a greeting to app.py", "turn": 1},
                     env=env, cwd=str(repo))
    api.append_event(session, "tool_call", {"turn": 1, "tool": "Edit", "call_id": "c1",
                                            "input": {"file_path": "app.py"}}, env=env,
                     cwd=str(repo))
    api.append_event(session, "tool_result", {"turn": 1, "call_id": "c1", "ok": True,
                                              "output": "edited"}, env=env, cwd=str(repo))
    api.append_event(session, "assistant", {"turn": 1, "text": "Done: app.py greets you."},
                     env=env, cwd=str(repo))
    print(f"  created {session} with 4 entries")

    codex_home = home / ".codex"
    if FIXTURES.is_dir():
        heading("Real Claude Code transcripts and Codex rollouts (the shared fixtures) imported")
        claude_dir = home / ".claude" / "projects" / "-fixtures"
        claude_dir.mkdir(parents=True)
        for path in sorted((FIXTURES / "claude").glob("*.jsonl")):
            shutil.copy(path, claude_dir / path.name.split("__", 1)[1])
        rollouts = codex_home / "sessions" / "2026" / "02" / "23"
        rollouts.mkdir(parents=True)
        for path in sorted((FIXTURES / "codex").glob("*.jsonl")):
            shutil.copy(path, rollouts / path.name.split("__", 2)[-1])
        run([COS, "import"], repo, {"CODEX_HOME": str(codex_home)})
    else:
        print(f"  ({FIXTURES} is not here: only the cos-native session is listed)")
    heading("cos sessions --scope all: one list across cos, Claude Code and Codex")
    run([COS, "sessions", "--scope", "all", "--limit", "8"], repo, {"CODEX_HOME": str(codex_home)})
    heading("A name, and an export of the cos-native session")
    run([COS, "sessions", "rename", session, "greeting"], repo, {})
    proc = run([COS, "export", session, "--format", "md"], repo, {}, show=False)
    print(f"{DIM}$ cos export {session} --format md{RESET}")
    print("\n".join(proc.stdout.splitlines()[:12]))

    heading("Resume by name: the restore report (--json never runs the agent)")
    run([COS, "resume", "greeting", "--json"], repo, {})
    heading("A fork of the cos-native session, at its first prompt")
    run([COS, "fork", session, "--at", "1", "--name", "greeting-take-2"], repo, {})
    if FIXTURES.is_dir():
        heading("A session of another project: refused, with the command to run instead")
        native = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"  # a Claude Code fixture from /path/to/Demo
        refused = run([COS, "resume", native], repo, {"CODEX_HOME": str(codex_home)},
                      check=False)
        print(f"exit {refused.returncode}")

def checkpoints_part(repo: Path) -> None:
    """Checkpoints: a scripted Claude Code session edits with its Edit tool and deletes and
    moves files with a shell command; the checkpoint list, a preview, the rewind, its undo."""
    heading("A scripted session: the Edit tool changes app.py, a shell command deletes and moves")
    (repo / "notes.md").write_text("# notes\nkeep me\n", encoding="utf-8")
    (repo / "util.py").write_text("def helper():\n    return 42\n", encoding="utf-8")
    run(["git", "add", "."], repo, {}, show=False)
    run(["git", "commit", "-q", "-m", "notes and util"], repo, {}, show=False)
    native = "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f"
    fire(repo, repo, "claude", "SessionStart", {"session_id": native, "source": "startup"})
    fire(repo, repo, "claude", "UserPromptSubmit",
         {"session_id": native, "prompt": "Tidy up: greet by name, drop the notes, move util"})
    fire(repo, repo, "claude", "PreToolUse", {"session_id": native, "tool_name": "Edit",
                                              "tool_input": {"file_path": str(repo / "app.py")}})
    (repo / "app.py").write_text("import sys\nprint(f'hello {sys.argv[1]}')\n", encoding="utf-8")
    command = "rm notes.md && mkdir -p lib && mv util.py lib/util.py"
    fire(repo, repo, "claude", "PreToolUse", {"session_id": native, "tool_name": "Bash",
                                              "tool_input": {"command": command}})
    run(["sh", "-c", command], repo, {})
    fire(repo, repo, "claude", "Stop", {"session_id": native, "stop_hook_active": False,
                                        "last_assistant_message": "Tidied up."})
    env = {"COS_AGENT": "claude", "COS_PANEL_ID": native}
    heading("cos checkpoints (this session's; newest first)")
    session = run([COS, "whoami", "--json"], repo, env, show=False)
    sid = json.loads(session.stdout)["session_id"]
    run([COS, "checkpoints", "--session", sid], repo, env)
    rows = json.loads(run([COS, "checkpoints", "--session", sid, "--json"], repo, env,
                          show=False).stdout)
    first = [row for row in rows if row["trigger"] == "prompt"][-1]["id"]
    heading("cos rewind --dry-run to the prompt: what would be restored, created, deleted")
    run([COS, "rewind", first, "--code", "--dry-run"], repo, env)
    heading("cos rewind --code: the edit, the deletion and the move are undone")
    run([COS, "rewind", first, "--code"], repo, env)
    run(["git", "status", "--short"], repo, {})
    heading("cos rewind --undo: the session's changes are back")
    run([COS, "rewind", "--undo"], repo, env)
    run(["git", "status", "--short"], repo, {})


def daemon_part(repo: Path) -> None:
    """`cos daemon`: its file watcher tells a checkpoint which paths changed."""
    heading("cos daemon start: checkpoints ask its file watcher what changed")
    run([COS, "daemon", "start"], repo, {})
    try:
        run([COS, "checkpoint", "create"], repo, {}, show=False)  # the watch starts here
        (repo / "app.py").write_text("print('hello, watcher')\n", encoding="utf-8")
        record = json.loads(run([COS, "checkpoint", "create", "--json"], repo, {},
                                show=False).stdout)
        print(f"$ cos checkpoint create --json  ->  scan: {record['scan']}, "
              f"{record['objects_written']} new objects")
        run([COS, "daemon", "status"], repo, {})
    finally:
        run([COS, "daemon", "stop"], repo, {})


def engine_part(repo: Path) -> None:
    """cos runs a session itself: a Python agent with no model, in the foreground and then over
    the protocol, re-attached from a seq; every event was stored before it was shown."""
    agent = str(Path(__file__).resolve().parents[1] / "examples" / "echo_agent.py") + ":EchoAgent"
    heading("cos run: the engine drives a Python agent (examples/echo_agent.py, no model)")
    ran = run([COS, "run", "--agent", f"python:{agent}", "--approve", "allow",
               "write notes.txt: written by the agent"], repo, {})
    session = next(word for word in ran.stderr.split() if word.startswith("ses-"))
    print(f"notes.txt now holds: {(repo / 'notes.txt').read_text(encoding='utf-8').strip()!r}")
    heading("cos protocol: a UI re-attaches to that session from seq 2 and gets the rest")
    ops = "\n".join(json.dumps({"id": str(n), "op": op}) for n, op in enumerate([
        {"type": "resume", "session": session, "last_seq": 2}, {"type": "shutdown"}], 1))
    replayed = run([COS, "protocol"], repo, {}, stdin=ops + "\n", show=False)
    for line in replayed.stdout.splitlines():
        event = json.loads(line)
        print(f"  seq {event['seq']}: {event['msg']['type']}")


def brain_part(repo: Path) -> None:
    """The brain: two panels share a task board; a claim is exclusive; an MCP tool call is filed
    under the panel that made it, because the hook tells the server; search finds it all."""
    panel_a = "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9"
    panel_b = "6f7a8b9c-0d1e-4f2a-b3c4-d5e6f7a8b9c0"
    heading("The brain: two Claude panels share one task board")
    for panel in (panel_a, panel_b):
        fire(repo, repo, "claude", "SessionStart", {"session_id": panel, "source": "startup"})
    env_a = {"COS_AGENT": "claude", "COS_PANEL_ID": panel_a}
    env_b = {"COS_AGENT": "claude", "COS_PANEL_ID": panel_b}
    run([COS, "tasks", "new", "Greet users by name", "--body", "app.py takes a name argument"],
        repo, env_a)
    run([COS, "tasks", "move", "TASK-1", "doing"], repo, env_a)
    run([COS, "state", "get", ".task-current"], repo, env_a)
    refused = run([COS, "tasks", "move", "TASK-1", "doing"], repo, env_b, check=False)
    print(f"exit {refused.returncode}: panel B cannot take a task panel A is doing")
    run([COS, "work-log", "add", "greeting reads sys.argv[1]", "--task", "TASK-1"], repo, env_a)

    heading("An MCP call from panel B: the hook adds the calling session, the server files it")
    tool_input = {"text": "reviewed the greeting change", "task": "TASK-1"}
    proc = fire(repo, repo, "claude", "PreToolUse",
                {"session_id": panel_b, "tool_name": "mcp__cos__cos_work_log_append",
                 "tool_input": tool_input})
    updated = json.loads(proc.stdout)["hookSpecificOutput"]["updatedInput"]
    print(f"{DIM}(calling cos_work_log_append on `cos mcp` over stdio, as Claude Code would){RESET}")
    result = _call_mcp_tool(repo, "cos_work_log_append", updated)
    print(json.dumps(result, indent=2))
    heading("cos tasks show TASK-1 (every move and line names its session and how it was known)")
    run([COS, "tasks", "show", "TASK-1"], repo, {})
    heading("cos search greeting (observations, work log, tasks and transcripts)")
    run([COS, "search", "greeting"], repo, {})


def _call_mcp_tool(repo: Path, tool: str, arguments: dict[str, object]) -> object:
    """One tool call through the MCP SDK's stdio client to the installed `cos mcp`."""
    import asyncio

    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    server = json.loads((repo / ".mcp.json").read_text(encoding="utf-8"))["mcpServers"]["cos"]

    async def call() -> object:
        params = StdioServerParameters(command=server["command"], args=server["args"],
                                       env={**BASE_ENV, **server["env"]}, cwd=str(repo))
        async with Client(params) as client:
            reply = await client.call_tool(tool, arguments)
            if reply.is_error:
                raise SystemExit(f"demo step failed: {tool}: {reply.content}")
            return reply.structured_content

    return asyncio.run(call())


if __name__ == "__main__":
    main()
