"""`cos --help` by topic: which commands belong together (setup, sessions, checkpoints, jobs,
brain, servers) and each one's description, whole, on one line (docs/cli.md carries the
output). A command's own `--help` keeps its full text."""

from __future__ import annotations

import click

__all__ = ["TOPICS", "NAME_WIDTH", "LINE_MAX", "TopicGroup"]

# `cos --help` fits 80 columns: two spaces, the name's column, two spaces, the line.
NAME_WIDTH = 12
LINE_MAX = 80 - 2 - NAME_WIDTH - 2

# Each topic's commands, in the order a user meets them, with the line `cos --help` shows.
TOPICS: dict[str, dict[str, str]] = {
    "Setup": {
        "init": "Install the hooks of an agent (claude, codex, gemini) here.",
        "uninstall": "Remove exactly the hook entries `cos init` added.",
        "trust": "Trust the commands this project's .coding-os.yaml configures.",
        "doctor": "Check the hooks, state dir, database and index; say each fix.",
        "where": "Show the state dir, project root and the rule that chose them.",
        "whoami": "Show this caller's agent, panel, session and current task.",
        "state": "Read and write state files that prove which session wrote them.",
        "hooks-log": "Show the hooks log: one line per hook fire, oldest first.",
        "hook": "Handle a hook event (what `cos init` installs for the agents).",
        "gc": "Reap stale panels, old transcripts and old checkpoints.",
    },
    "Sessions": {
        "sessions": "List the sessions of every agent; show, rename or remove one.",
        "resume": "Resume a session in its directory and agent, or pick one.",
        "fork": "Fork a session into a new one; the source is untouched.",
        "export": "Export a session's conversation as Markdown, JSON or HTML.",
        "import": "Import what changed in the agents' logs into the session index.",
        "index": "Rebuild the session index from the transcripts and native logs.",
        "sync": "Push this project's new session lines to the shared database.",
    },
    "Checkpoints": {
        "checkpoint": "Take a checkpoint of the working tree now.",
        "checkpoints": "List checkpoints, newest first; verify them; their disk use.",
        "rewind": "Rewind the files, the conversation or both; undo a rewind.",
    },
    "Jobs": {
        "run": "Run a prompt or a recipe in a new session in the foreground.",
        "bg": "Start a prompt as a background job in its own worktree.",
        "agents": "List the background jobs, their state and what they wait for.",
        "attach": "Follow a job's events live; reply and answer its approvals.",
        "reply": "Send a job the user's next input.",
        "approve": "Allow or deny the approval a job waits for.",
        "logs": "Print what a job did so far, or its runner's stderr.",
        "stop": "Interrupt a job's task and end its runner.",
        "respawn": "Start a failed or stopped job again, resuming its session.",
        "rm": "Remove a job that does not run, with its worktree and branch.",
    },
    "Brain": {
        "tasks": "List, add and update the project's shared tasks.",
        "work-log": "Show or add to the project's work log.",
        "search": "Search observations, the work log, tasks and transcripts.",
        "observations": "Show what the hooks observed: prompts, tool calls, stops.",
    },
    "Servers": {
        "web": "Serve the web agent view on 127.0.0.1.",
        "mcp": "Run the MCP server (stdio, or HTTP).",
        "acp": "Speak the Agent Client Protocol on stdio (an editor's agent).",
        "protocol": "Speak the session protocol on stdio: JSON ops in, events out.",
        "daemon": "Start, stop or ask the per-user daemon that watches trees.",
    },
}


class TopicGroup(click.Group):
    """A click group whose help lists its commands under TOPICS, each with its one line; a
    command no topic names comes under "Other" with its own first sentence."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands, topic by topic."""
        listed = {name: self.get_command(ctx, name) for name in self.list_commands(ctx)}
        shown = {name for name, command in listed.items()
                 if command is not None and not command.hidden}
        sections: list[tuple[str, list[tuple[str, str]]]] = []
        for topic, lines in TOPICS.items():
            rows = [(name, line) for name, line in lines.items() if name in shown]
            if rows:
                sections.append((topic, rows))
        named = {name for lines in TOPICS.values() for name in lines}
        other = [(name, listed[name].get_short_help_str(200))  # type: ignore[union-attr]
                 for name in sorted(shown - named)]
        if other:
            sections.append(("Other", other))
        for topic, rows in sections:  # one column for every topic: names padded alike
            with formatter.section(topic):
                formatter.write_dl([(name.ljust(NAME_WIDTH), line) for name, line in rows],
                                   col_max=NAME_WIDTH)
