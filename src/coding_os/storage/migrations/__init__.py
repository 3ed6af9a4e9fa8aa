"""Schema migrations, one append-only list per dialect.

The position in the list is the version. Never reorder or edit an applied migration; to undo
something, append a new one. Each migration and its bookkeeping run in one transaction.
"""
