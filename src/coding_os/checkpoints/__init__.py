"""Checkpoints and rewind (DESIGN.md §5): snapshots of the working tree taken before each prompt's
edits and before any tool call that may write, and the rewind of the code to any of them, itself
undoable.

`settings` reads `checkpoints:`; `store` holds the content-addressed objects; `manifest` is a
snapshot's format and its comparison; `snapshot` takes snapshots (`watch` feeds it what the
daemon saw change); `points` keeps the checkpoint records; `heads` keeps each session's latest
and the stat fingerprint that spares a small unchanged tree a `git status` (all a hook reads
before a tool call on such a tree); `take` takes a checkpoint; `auto` decides and takes the
automatic ones (the hook's, and the engine's for agents that run no hooks); `restore` is the journaled restore; `rewind` lists, previews, rewinds and undoes;
`upkeep` verifies, measures, collects and prunes; `lock` serialises restores with checkpoints.
"""
