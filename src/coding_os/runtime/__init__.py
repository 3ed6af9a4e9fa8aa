"""The engine that runs sessions (DESIGN.md §6). It holds `events`: the durable, numbered log of
each session's events (§7), which every event is written to before any client sees it."""
