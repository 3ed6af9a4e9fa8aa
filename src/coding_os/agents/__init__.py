"""Background agents (DESIGN.md §6): the on-demand supervisor `cos daemon` and its file watcher."""
