"""Background jobs (DESIGN.md §6): the supervisor, a runner per job, the jobs' folders and roster, their worktrees, the spare runner and worktree, and recipes."""
