"""Sessions (DESIGN.md §4): canonical transcripts, the session index and its freshness check,
resume and fork, export, retention, and the conversation half of a rewind with its summaries
(the importers of Claude Code's and Codex's logs are `coding_os.adapters`).

Modules are imported by name (`from coding_os.sessions import transcript`); this package imports
nothing itself, so a hook that appends to a transcript pays only for what it uses.
"""
