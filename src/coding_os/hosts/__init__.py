"""Several hosts on one PostgreSQL (DESIGN.md §8): which host and project this is, replication of what this host wrote, materialisation of another host's session here."""
