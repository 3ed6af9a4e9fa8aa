"""The storage interface every backend implements (SQLite, PostgreSQL): one object for callers,
the union of small interfaces, one per concern, each in its own module with its rows:

- `Lifecycle` (storage/lifecycle.py): migrations, schema version, close; `StorageError`;
- `SessionStore` (storage/sessions.py): the sessions the hooks saw;
- `ObservationStore` (storage/observations.py): what the hooks observed;
- `SummaryStore` (storage/summaries.py): what each session did;
- `IndexStore` (storage/index.py): the session index and its user-set names;
- `BrainStore` (storage/brain.py): tasks, the work log, full-text search;
- `ReplicaStore` (storage/replicas.py): replicated session files;
- `HostStore` (storage/hosts.py): sessions moved between hosts, project roots per host;
- `JobStore` (storage/jobs.py): the jobs each host publishes.

Backends are interchangeable: each concern has its conformance file (tests/storage/test_<module>.py)
that runs the same specs against each backend. Rows are plain dataclasses; timestamps are
ISO-8601 UTC strings. The names of the concern modules are re-exported here.

These are abstract base classes rather than `typing.Protocol`s: the hooks open the storage, and
`typing` is not imported on their path.
"""

from __future__ import annotations

from coding_os.storage.brain import (
    SEARCH_KINDS,
    TASK_STATUSES,
    BrainStore,
    SearchDoc,
    SearchHit,
    SourceMark,
    Task,
    TaskMove,
    WorkLogEntry,
    task_text,
)
from coding_os.storage.hosts import HostStore
from coding_os.storage.index import INDEX_COLUMNS, IndexRow, IndexStore, index_query, like_pattern
from coding_os.storage.jobs import JobStore, published_jobs
from coding_os.storage.lifecycle import (
    Lifecycle,
    StorageError,
    check_schema_version,
    storable_text,
)
from coding_os.storage.observations import Observation, ObservationStore
from coding_os.storage.replicas import (
    REPLICA_STREAMS,
    ReplicaSource,
    ReplicaStore,
    valid_replica_lines,
)
from coding_os.storage.sessions import SessionRecord, SessionStore
from coding_os.storage.summaries import SessionSummary, SummaryStore

__all__ = [
    "Storage", "SessionRecord", "Observation", "SessionSummary", "StorageError", "storable_text",
    "check_schema_version", "IndexRow", "INDEX_COLUMNS", "like_pattern", "index_query",
    "Task", "TaskMove", "WorkLogEntry", "SearchDoc", "SearchHit", "SourceMark", "TASK_STATUSES",
    "SEARCH_KINDS", "task_text", "ReplicaSource", "REPLICA_STREAMS", "valid_replica_lines",
    "published_jobs",
    "Lifecycle", "SessionStore", "ObservationStore", "SummaryStore", "IndexStore", "BrainStore",
    "ReplicaStore", "HostStore", "JobStore",
]


class Storage(Lifecycle, SessionStore, ObservationStore, SummaryStore, IndexStore, BrainStore,
              ReplicaStore, HostStore, JobStore):
    """The shared database of one project: every concern's interface, in one object.

    Every method may raise StorageError when the database cannot be used. A context manager:
    `with open_storage(...) as storage:` closes it on the way out. A caller that needs one
    concern may take that concern's interface (e.g. `IndexStore`); every `Storage` is one.
    """
