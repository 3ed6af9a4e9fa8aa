"""The shared brain (DESIGN.md §8): tasks, the work log, and full-text search over what the
agents did, in the project's database (SQLite or PostgreSQL alike)."""
